// The process-wide registry of compiles in progress.
//
// Every compile registers a session for its duration (RAII), so diagnostics and
// tests can see what is compiling and nested compiles (a compile started from a
// progress callback, or from another thread) stack instead of clobbering each
// other. The destructor always unregisters, whatever failed before it: the
// registry is restored even when a compile's own teardown fails.
#pragma once

#include <string>
#include <vector>

namespace fcb::compile {

class CompileSession {
 public:
  explicit CompileSession(std::string output_path);
  ~CompileSession();
  CompileSession(const CompileSession&) = delete;
  CompileSession& operator=(const CompileSession&) = delete;
  // How many sessions were active when this one started (0 = outermost).
  int depth() const { return depth_; }

 private:
  std::string output_;
  int depth_ = 0;
  uint64_t id_ = 0;
};

// Output paths of the sessions active now, outermost first.
std::vector<std::string> ActiveCompileSessions();

}  // namespace fcb::compile
