// Fault injection points: every resource acquisition in compile and load asks
// Hit() first, so tests can make the N-th acquisition fail (or every
// acquisition at a named place) and prove that nothing leaks, no file is left
// behind, and the error says what failed (docs/design.md, "Lifecycle on failure").
//
// The library holds only the points: Hit() is an inline test of one
// process-wide hook pointer, null unless a test installed one (a relaxed load
// and a branch predicted not taken; nothing is counted, locked or formatted).
// The injector that counts and decides (core/fault_testing.h) is compiled into
// test programs only, never into libfcb.so.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace fcb::fault {

enum class Kind : uint32_t {
  kIo = 1,        // open, mkstemp, write, fsync, close, rename, fstat, mmap
  kAlloc = 2,     // large buffers: weight blobs while compiling, prepared kernels
  kContext = 4,   // a per-(method, target) compile context or a node's lowering
  kArena = 8,     // an execution's activation arena
  kThreads = 16,  // an execution's thread pool
};

// Decides whether the acquisition of `kind` at `where` (e.g. a target or method
// name) fails; when it says so for kIo it also sets errno to EIO.
using HookFn = bool (*)(Kind kind, std::string_view where);

// The installed hook, or null. Only core/fault_testing.cc sets it.
extern std::atomic<HookFn> g_hook;

// Counts one acquisition of `kind` at `where`; true when it is to fail.
inline bool Hit(Kind kind, std::string_view where = {}) {
  const HookFn hook = g_hook.load(std::memory_order_relaxed);
  if (__builtin_expect(hook != nullptr, 0)) return hook(kind, where);
  return false;
}

}  // namespace fcb::fault
