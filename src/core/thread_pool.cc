#include "core/thread_pool.h"

#include <algorithm>

namespace fcb {

ThreadPool::ThreadPool(int num_threads) {
  try {
    for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  } catch (...) {
    // Join the workers already started before reporting the failure: a
    // joinable std::thread destroyed during unwinding would terminate.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
    throw;
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

// Static partition: thread t takes chunks t, t+T, ... Deterministic and
// allocation-free; operators split work into near-equal items.
void ThreadPool::DoChunks(int self) {
  const int threads = num_threads();
  for (int64_t c = self; c < num_chunks_; c += threads) {
    const int64_t begin = c * chunk_;
    const int64_t end = std::min(n_, begin + chunk_);
    fn_(ctx_, begin, end);
  }
}

void ThreadPool::Run(int64_t n, int64_t grain, TaskFn fn, void* ctx) {
  const int threads = num_threads();
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    const int64_t per_thread = (n + threads - 1) / threads;
    chunk_ = std::max<int64_t>(std::max<int64_t>(grain, 1), per_thread);
    num_chunks_ = (n + chunk_ - 1) / chunk_;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_work_.notify_all();
  DoChunks(0);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    DoChunks(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

}  // namespace fcb
