// The fault injector of the tests (see core/fault.h): counts acquisitions and
// makes the chosen one fail. Defined in core/fault_testing.cc, which is linked
// into test programs only (it is not part of libfcb.so), so only tests that
// link the library's layer objects can inject faults.
//
// Process-wide and meant for single-threaded tests: one injector at a time.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "core/fault.h"

namespace fcb::fault {

const char* KindName(Kind k);  // "io", "alloc", ...

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
