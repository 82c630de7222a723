// Makes one I/O step of the .fcb writer or loader fail (format/io_fault.h).
// Defined in format/io_fault_testing.cc, linked into test programs only.
//
// The state is process-wide and meant for single-threaded tests only: while a
// testing::FailAt is alive, do not write or load .fcb files from other threads.
#pragma once

#include <cstdint>
#include <memory>

namespace fcb::fault::testing {
class Injector;
}

namespace fcb::format::testing {

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

 private:
  std::unique_ptr<fault::testing::Injector> injector_;
};

}  // namespace fcb::format::testing
