// A compile in progress, made visible to whoever watches (RAII).
//
// Every compile holds a CompileSession for its duration. The library itself
// keeps no registry: a session tells the installed observer (null unless a
// test program installed one) that it began and, from its destructor, that it
// ended, whatever failed in between, so an observer's view is restored even
// when a compile's own teardown fails. Without an observer a session costs a
// relaxed load. The registry of active sessions that tests check
// (ActiveCompileSessions) is compile/session_testing.h, linked into tests only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace fcb::compile {

struct SessionObserver {
  // Called when a compile writing `output_path` begins; returns a token for ended().
  uint64_t (*began)(const std::string& output_path);
  void (*ended)(uint64_t token);
};

// The installed observer, or null. Only compile/session_testing.cc sets it.
extern std::atomic<const SessionObserver*> g_session_observer;

class CompileSession {
 public:
  explicit CompileSession(const std::string& output_path)
      : observer_(g_session_observer.load(std::memory_order_acquire)) {
    if (observer_) token_ = observer_->began(output_path);
  }
  ~CompileSession() {
    if (observer_) observer_->ended(token_);
  }
  CompileSession(const CompileSession&) = delete;
  CompileSession& operator=(const CompileSession&) = delete;

 private:
  const SessionObserver* observer_;
  uint64_t token_ = 0;
};

}  // namespace fcb::compile
