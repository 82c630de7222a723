#include "runtime/pool_check.h"

#include <system_error>

namespace fcb {

PoolCheck::~PoolCheck() {
  if (thread_.joinable()) thread_.join();
}

void PoolCheck::Finish(Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    passed_.store(s.ok(), std::memory_order_release);
    status_ = std::move(s);
  }
  cv_.notify_all();
}

void PoolCheck::Start(const format::LoadedFile* file) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = false;
    passed_.store(false, std::memory_order_release);
  }
  try {
    // One thread: the caller's threads are running the model meanwhile.
    thread_ = std::thread([this, file] { Finish(file->VerifyPool(1)); });
  } catch (const std::system_error&) {
    Finish(file->VerifyPool());
  }
}

Status PoolCheck::Wait() const {
  if (passed_.load(std::memory_order_acquire)) return Status::Ok();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return status_;
}

}  // namespace fcb
