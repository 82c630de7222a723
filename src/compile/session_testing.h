// The process-wide registry of compiles in progress, for tests: linking
// compile/session_testing.cc (test programs only; it is not part of libfcb.so)
// installs it as the session observer (compile/session.h) at start-up. Nested
// compiles (one started from a progress callback, or from another thread)
// stack instead of clobbering each other.
#pragma once

#include <string>
#include <vector>

#include "compile/session.h"

namespace fcb::compile {

// Output paths of the sessions active now, outermost first.
std::vector<std::string> ActiveCompileSessions();

}  // namespace fcb::compile
