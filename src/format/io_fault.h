// The fault-injection point of the .fcb writer and loader (core/fault.h), so
// tests can make any one of their I/O steps fail and check that nothing leaks
// and nothing is left half-written (docs/design.md, "Lifecycle on failure").
//
// Every OS call the writer or loader makes (mkstemp, fchmod, each write, fsync,
// close, rename, open, fstat, mmap) first asks IoFaultHit(); when it answers
// true the call is skipped and treated as failed with errno = EIO. The tests'
// side, testing::FailAt, is in format/io_fault_testing.h (test builds only).
#pragma once

#include "core/fault.h"

namespace fcb::format {

// Counts one I/O step; true when a test's injector wants it to fail (and then
// errno is EIO). Without one: a relaxed load and a branch not taken.
inline bool IoFaultHit() { return fault::Hit(fault::Kind::kIo); }

}  // namespace fcb::format
