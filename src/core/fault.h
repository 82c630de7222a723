// Fault injection: every resource acquisition in compile and load asks Hit()
// first, so tests can make the N-th acquisition fail (or every acquisition at
// a named place) and prove that nothing leaks, no file is left behind, and the
// error says what failed (docs/design.md, "Lifecycle on failure").
//
// Production cost: one relaxed atomic load per acquisition when no injector
// is alive. The injector is process-wide and meant for single-threaded tests.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace fcb::fault {

enum class Kind : uint32_t {
  kIo = 1,        // open, mkstemp, write, fsync, close, rename, fstat, mmap
  kAlloc = 2,     // large buffers: weight blobs while compiling, prepared kernels
  kContext = 4,   // a per-(method, target) compile context or a node's lowering
  kArena = 8,     // an execution's activation arena
  kThreads = 16,  // an execution's thread pool
};
const char* KindName(Kind k);

// Counts one acquisition of `kind` at `where` (e.g. a target name); true when
// an injector wants it to fail (then errno is set to EIO for I/O kinds).
bool Hit(Kind kind, const std::string& where = "");

namespace testing {

class Injector {
 public:
  // Fails the n-th acquisition whose kind is in `kinds` (1-based; 0 = only count).
  explicit Injector(int64_t n, uint32_t kinds = 0xffffffffu);
  // Fails every acquisition of `kind` whose `where` is in `wheres`.
  Injector(Kind kind, std::set<std::string> wheres);
  ~Injector();
  Injector(const Injector&) = delete;
  Injector& operator=(const Injector&) = delete;

  int64_t count() const;      // acquisitions counted so far
  bool fired() const;         // whether an acquisition was made to fail
  std::string fired_at() const;  // "io", "arena", ... of the failed one
};

}  // namespace testing
}  // namespace fcb::fault
