#include "core/thread_pool.h"

#include <algorithm>

namespace fcb {
namespace {

// Spin iterations before blocking; a pause is ~40-140 cycles, so this is
// roughly 50-150 us.
constexpr int kSpinIterations = 2000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  try {
    for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  } catch (...) {
    // Join the workers already started before reporting the failure: a
    // joinable std::thread destroyed during unwinding would terminate.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true, std::memory_order_release);
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
    throw;
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
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
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_work_.notify_all();
  DoChunks(0);
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i)
    CpuRelax();
  if (pending_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    bool ready = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (stop_.load(std::memory_order_acquire)) return;
      if (generation_.load(std::memory_order_acquire) != seen) {
        ready = true;
        break;
      }
      CpuRelax();
    }
    if (!ready) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] {
        return stop_.load(std::memory_order_acquire) ||
               generation_.load(std::memory_order_acquire) != seen;
      });
      if (stop_.load(std::memory_order_acquire)) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    DoChunks(index);
    // The last worker wakes the caller; notifying under mu_ means a caller
    // that checked pending_ under mu_ is already waiting, so no wake is lost.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

}  // namespace fcb
