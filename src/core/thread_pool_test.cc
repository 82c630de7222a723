// ThreadPool: every item of [0, n) runs exactly once, in chunks of at least
// the grain, for every thread count and chunking; and a thread held up in its
// first chunk loses its later chunks to the others instead of making the
// caller wait for all of them.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace fcb {
namespace {

TEST(ThreadPool, EveryItemOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 8, 63, 64, 65, 100, 1000}) {
      for (int64_t grain : {1, 3, 16}) {
        for (int per_thread : {1, 4}) {
          std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
          std::atomic<int> short_chunks{0}, bad_thread{0};
          pool.ParallelForThreads(
              n, grain,
              [&](int t, int64_t b, int64_t e) {
                if (t < 0 || t >= threads) bad_thread.fetch_add(1);
                if (e - b < grain && e != n) short_chunks.fetch_add(1);  // only the last may be short
                for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
              },
              per_thread);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(hits[i].load(), 1) << "item " << i << " n " << n << " grain " << grain << " threads "
                                         << threads << " chunks/thread " << per_thread;
          EXPECT_EQ(short_chunks.load(), 0) << "n " << n << " grain " << grain;
          EXPECT_EQ(bad_thread.load(), 0);
        }
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "ParallelFor item " << i << " n " << n;
      }
    }
  }
}

// Two threads, four chunks each. The caller, in its first chunk, waits for
// the worker to start one; the worker then sleeps in it, so the caller, done
// with its own four, takes the worker's other three (from the far end of the
// worker's run). Without stealing, or with one chunk per thread, the caller
// would run four chunks or one.
TEST(ThreadPool, AHeldUpThreadLosesItsLaterChunks) {
  ThreadPool pool(2);
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::atomic<int> by_caller{0}, by_worker{0};
    std::atomic<bool> worker_started{false};
    pool.ParallelForThreads(
        8, 1,
        [&](int t, int64_t, int64_t) {
          if (t == 0) {
            if (by_caller.fetch_add(1) == 0) {
              const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
              while (!worker_started.load() && std::chrono::steady_clock::now() < until)
                std::this_thread::yield();
            }
          } else if (by_worker.fetch_add(1) == 0) {
            worker_started.store(true);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        },
        4);
    ASSERT_TRUE(worker_started.load()) << "the worker never ran a chunk in 5 s";
    EXPECT_EQ(by_caller.load() + by_worker.load(), 8);
    EXPECT_EQ(by_worker.load(), 1) << "attempt " << attempt;
    EXPECT_EQ(by_caller.load(), 7) << "attempt " << attempt;
  }
}

}  // namespace
}  // namespace fcb
