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

// Each thread owns a contiguous run of chunks (thread t the t-th of
// num_threads equal runs) and claims them in order; when its own are gone it
// takes the highest chunk still unclaimed, at the far end of another
// thread's run. Running the same part of consecutive operators on the same
// core keeps that part's activations in its cache; taking the rest keeps a
// late or slowed worker (a busy machine, a vCPU the host preempts) from
// delaying the caller by more than a chunk. A claim is a CAS on the mask,
// which is published after the job's fields (release) and not replaced
// before every claimed chunk is done, so the fields read after a claim are
// that job's, even for a worker that slept through earlier jobs.
void ThreadPool::RunChunks(int self, bool notify) {
  const int threads = num_threads();
  uint64_t v = unclaimed_.load(std::memory_order_acquire);
  while (v != 0) {
    // This thread's run of the job v belongs to (if the job was replaced
    // since, the CAS below fails or the choice is merely not the best).
    const int64_t count = num_chunks_.load(std::memory_order_relaxed);
    const int64_t lo = count * self / threads, hi = count * (self + 1) / threads;
    const uint64_t own = (hi >= 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1) & ~((uint64_t{1} << lo) - 1);
    const uint64_t mine = v & own;
    const uint64_t bit = mine ? mine & (~mine + 1) : uint64_t{1} << (63 - __builtin_clzll(v));
    if (!unclaimed_.compare_exchange_weak(v, v & ~bit, std::memory_order_acq_rel,
                                          std::memory_order_acquire))
      continue;
    const int64_t total = num_chunks_.load(std::memory_order_relaxed);
    const int64_t begin = static_cast<int64_t>(__builtin_ctzll(bit)) * chunk_;
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

void ThreadPool::Run(int64_t n, int64_t grain, int chunks_per_thread, TaskFn fn, void* ctx) {
  const int threads = num_threads();
  int64_t chunks = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    // chunks_per_thread per thread (at least `grain` items each), at most 64
    // chunks, one bit each in unclaimed_.
    const int64_t parts = int64_t{threads} * std::max(1, chunks_per_thread);
    const int64_t per_chunk = (n + parts - 1) / parts;
    chunk_ = std::max({grain, per_chunk, (n + 63) / 64, int64_t{1}});
    chunks = (n + chunk_ - 1) / chunk_;
    num_chunks_.store(chunks, std::memory_order_relaxed);
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
