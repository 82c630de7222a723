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

// A thread claims its own chunk (the caller chunk 0, worker i chunk i) and
// then any chunk still unclaimed. Running the same part of consecutive
// operators on the same core keeps that part's activations in its cache;
// taking the rest keeps a late worker from delaying the caller. A claim is a
// CAS on the mask, which is published after the job's fields (release) and
// not replaced before every claimed chunk is done, so the fields read after a
// claim are that job's, even for a worker that slept through earlier jobs.
void ThreadPool::RunChunks(int self, bool notify) {
  uint64_t v = unclaimed_.load(std::memory_order_acquire);
  while (v != 0) {
    const uint64_t own = self < 64 ? uint64_t{1} << self : 0;
    const uint64_t bit = (v & own) ? own : v & (~v + 1);  // own chunk, else the lowest
    if (!unclaimed_.compare_exchange_weak(v, v & ~bit, std::memory_order_acq_rel,
                                          std::memory_order_acquire))
      continue;
    const int64_t begin = static_cast<int64_t>(__builtin_ctzll(bit)) * chunk_;
    const int64_t total = num_chunks_;
    fn_(ctx_, self, begin, std::min(n_, begin + chunk_));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == total && notify) {
      // Notifying under mu_: a caller that checked done_ under mu_ is
      // already waiting, so no wake is lost.
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
    v = unclaimed_.load(std::memory_order_acquire);
  }
}

void ThreadPool::Run(int64_t n, int64_t grain, TaskFn fn, void* ctx) {
  const int threads = num_threads();
  int64_t chunks = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    const int64_t per_thread = (n + threads - 1) / threads;
    // At most 64 chunks, one bit each in unclaimed_.
    chunk_ = std::max({grain, per_thread, (n + 63) / 64, int64_t{1}});
    chunks = (n + chunk_ - 1) / chunk_;
    num_chunks_ = chunks;
    done_.store(0, std::memory_order_relaxed);
    unclaimed_.store(chunks >= 64 ? ~uint64_t{0} : (uint64_t{1} << chunks) - 1,
                     std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_work_.notify_all();
  RunChunks(0, /*notify=*/false);
  for (int i = 0; i < kSpinIterations && done_.load(std::memory_order_acquire) != chunks; ++i)
    CpuRelax();
  if (done_.load(std::memory_order_acquire) == chunks) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == chunks; });
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
    // The job published with this generation, or a newer one.
    RunChunks(index, /*notify=*/true);
  }
}

}  // namespace fcb
