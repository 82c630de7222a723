// A fixed pool of worker threads for splitting one operator's work.
//
// Created with an execution, destroyed with it; ParallelFor does not allocate.
// The calling thread takes part in the work, so a pool of 1 runs inline.
//
// Workers spin for a short while (~100 us) before they sleep, and the caller
// spins before it sleeps waiting for them: a model runs dozens of operators of
// 10-500 us each, and waking a sleeping thread costs tens of microseconds (far
// more in a VM, where it is an IPI to a halted vCPU), which cancelled all the
// gain of a second thread on small operators.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace fcb {

class ThreadPool {
 public:
  // Total threads including the caller; num_threads <= 1 means run inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), with chunks of at
  // least `grain` items, and returns when all are done. Not reentrant. Each
  // thread gets up to kChunksPerThread chunks (see RunChunks), so a slowed
  // thread's later chunks go to the others.
  static constexpr int kChunksPerThread = 4;

  // kChunksPerThread when n items still make chunks of at least `min_chunk`
  // that way, else 1: for ParallelForThreads callers whose chunks each cost a
  // fixed overhead (a pass over the weights), which only large n amortizes.
  int ChunksPerThreadFor(int64_t n, int64_t min_chunk) const {
    return n >= min_chunk * num_threads() * kChunksPerThread ? kChunksPerThread : 1;
  }
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n <= grain) {
      fn(int64_t{0}, n);
      return;
    }
    Run(n, grain, kChunksPerThread, &Trampoline<Fn>, &fn);
  }

  // As ParallelFor, calling fn(thread, begin, end) where thread in
  // [0, num_threads()) names the thread running the chunk (0 = the caller):
  // a chunk may use per-thread scratch memory indexed by it. One chunk per
  // thread unless `chunks_per_thread` says more: callers whose chunks each
  // repeat work (pack the whole input for a slice of the channels, recompute
  // rows at a band's edges) keep one.
  template <typename Fn>
  void ParallelForThreads(int64_t n, int64_t grain, Fn&& fn, int chunks_per_thread = 1) {
    if (n <= 0) return;
    if (workers_.empty() || n <= grain) {
      fn(0, int64_t{0}, n);
      return;
    }
    Run(n, grain, chunks_per_thread, &ThreadTrampoline<Fn>, &fn);
  }

 private:
  using TaskFn = void (*)(void* ctx, int thread, int64_t begin, int64_t end);
  template <typename Fn>
  static void Trampoline(void* ctx, int, int64_t begin, int64_t end) {
    (*static_cast<Fn*>(ctx))(begin, end);
  }
  template <typename Fn>
  static void ThreadTrampoline(void* ctx, int thread, int64_t begin, int64_t end) {
    (*static_cast<Fn*>(ctx))(thread, begin, end);
  }
  void Run(int64_t n, int64_t grain, int chunks_per_thread, TaskFn fn, void* ctx);
  void WorkerLoop(int index);
  // Claims and runs chunks of the current job, thread `self`'s own first,
  // until none is left; `notify` wakes the caller after the last chunk.
  void RunChunks(int self, bool notify);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  // Written under mu_ (so the condition variables' predicates stay exact) and
  // read without it while spinning.
  std::atomic<uint64_t> generation_{0};
  // Chunks are claimed, not assigned: bit c set while chunk c is unclaimed.
  // A worker the OS has not scheduled yet (a busy machine) then delays
  // nothing, the caller takes its chunks; a worker waking late finds none,
  // and one slowed down mid-job loses its later chunks to the others.
  std::atomic<uint64_t> unclaimed_{0};
  std::atomic<int64_t> done_{0};  // chunks finished in the current job
  std::atomic<bool> stop_{false};
  // Current job, written under mu_ before unclaimed_ is published (release); read
  // only by a thread that has claimed one of its chunks.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  // Also read before a claim, to pick the thread's own chunks.
  std::atomic<int64_t> num_chunks_{0};
};

}  // namespace fcb
