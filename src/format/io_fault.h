// A tiny fault-injection seam for the .fcb writer and loader, so tests can make
// any one of their I/O steps fail and check that nothing leaks and nothing is
// left half-written (docs/design.md, "Lifecycle on failure").
//
// Every OS call the writer or loader makes (mkstemp, fchmod, each write, fsync,
// close, rename, open, fstat, mmap) first asks IoFaultHit(); when it answers
// true the call is skipped and treated as failed with errno = EIO.
//
// The state is process-wide and meant for single-threaded tests only: while a
// testing::FailAt is alive, do not write or load .fcb files from other threads.
#pragma once

#include <cstdint>

namespace fcb::format {

// Counts one I/O step; true when it is the step a FailAt asked to fail (and
// then sets errno to EIO). Costs one relaxed atomic load when no FailAt is alive.
bool IoFaultHit();

namespace testing {

// While alive, the `n`-th I/O step (1-based, counted from construction) fails.
// The destructor turns injection off again. Not nestable.
class FailAt {
 public:
  explicit FailAt(int64_t n);
  ~FailAt();
  FailAt(const FailAt&) = delete;
  FailAt& operator=(const FailAt&) = delete;

  // How many I/O steps ran since construction (including the failed one).
  int64_t steps() const;
  // Whether the n-th step was reached (so the operation really failed there).
  bool fired() const;
};

}  // namespace testing
}  // namespace fcb::format
