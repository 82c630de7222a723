// Read bandwidth probe (a benchmark, never a test): how fast this machine
// streams memory into the cores, the roofline of a decode step that reads
// every weight once per token (scripts/bench_llm.sh).
//
//   bandwidth [--bytes N | --mib N] [--threads "1 2"] [--reps N] [--json]
//
// Allocates a buffer of N bytes (default: 4x the last-level cache as the OS
// reports it, at least 1 GiB and at most 4 GiB, so it comes from DRAM), fills
// it (every page touched before timing), then per thread count T sums it
// --reps times (default 10; a pass reads a buffer under 256 MiB several times
// over), each of T threads (the main one among them) reading a contiguous 1/T of it
// with a loop of independent 64-bit additions that the compiler vectorises;
// the loop is compiled for AVX-512, AVX2 and baseline x86-64 and the CPU
// picks one at load time (target_clones), elsewhere plain -O3 code. A pass
// is timed from the moment all threads are released to the moment the last
// one is done; prints the best (and median) pass as GB/s (1e9 bytes/s).
// Given a model's weight bytes (--bytes), the same buffer read again and
// again is what a decode step does with its weights, caches included.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "bandwidth: %s\n", m.c_str());
  std::exit(2);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FCB_BW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FCB_BW_CLONES
#endif

// Sums n 64-bit words with 32 independent accumulators (256 bytes a round):
// the additions are 1-cycle and independent, so the loads are the limit.
FCB_BW_CLONES __attribute__((noinline)) uint64_t SumWords(const uint64_t* __restrict p, size_t n) {
  uint64_t acc[32] = {};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; ++j) acc[j] += p[i + j];
  uint64_t s = 0;
  for (; i < n; ++i) s += p[i];
  for (int j = 0; j < 32; ++j) s += acc[j];
  return s;
}

size_t LastLevelCacheBytes() {
  long best = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  best = std::max(best, sysconf(_SC_LEVEL3_CACHE_SIZE));
  best = std::max(best, sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  for (int idx = 0; idx < 8; ++idx) {  // /sys's largest cache level of cpu0
    const std::string f = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size";
    FILE* fp = std::fopen(f.c_str(), "r");
    if (!fp) break;
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, fp)) {
      char* end = nullptr;
      long v = std::strtol(buf, &end, 10);
      if (end && (*end == 'K' || *end == 'k')) v <<= 10;
      if (end && (*end == 'M' || *end == 'm')) v <<= 20;
      best = std::max(best, v);
    }
    std::fclose(fp);
  }
  return best > 0 ? static_cast<size_t>(best) : 0;
}

struct Result {
  int threads;
  double best_gbs, median_gbs;
};

// One thread count: `reps` passes, each reading the buffer `loops` times
// (enough to time a small buffer well), split among `t` threads: the calling
// thread and t - 1 others, which spin on a start flag so the pass is timed
// from one release to the last finish (thread creation is outside the timed
// region, and no thread spins beside the t readers).
Result Measure(const uint64_t* words, size_t n, int t, int reps, int loops) {
  std::vector<double> gbs;
  std::atomic<uint64_t> sink{0};
  for (int r = 0; r < reps; ++r) {
    std::atomic<int> ready{0}, done{0};
    std::atomic<bool> go{false};
    auto work = [&](int k) {
      const size_t lo = n * k / t, hi = n * (k + 1) / t;
      uint64_t s = 0;
      for (int l = 0; l < loops; ++l) s += SumWords(words + lo, hi - lo);
      sink.fetch_add(s, std::memory_order_relaxed);
      done.fetch_add(1, std::memory_order_acq_rel);
    };
    std::vector<std::thread> pool;
    for (int k = 1; k < t; ++k) {
      pool.emplace_back([&, k] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        work(k);
      });
    }
    while (ready.load() < t - 1) {
    }
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    work(0);
    while (done.load(std::memory_order_acquire) < t) {
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (auto& th : pool) th.join();
    gbs.push_back(static_cast<double>(n) * 8 * loops / s / 1e9);
  }
  if (sink.load() == 0x5eed) std::printf(" ");  // keeps the sums alive
  std::sort(gbs.begin(), gbs.end());
  return {t, gbs.back(), gbs[gbs.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 0;
  std::vector<int> threads{1, 2};
  int reps = 10;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--bytes") {
      bytes = std::strtoull(next().c_str(), nullptr, 10);
    } else if (a == "--mib") {
      bytes = std::strtoull(next().c_str(), nullptr, 10) << 20;
    } else if (a == "--threads") {
      threads.clear();
      std::istringstream in(next());
      for (int t; in >> t;) {
        if (t < 1) Die("--threads: counts must be positive");
        threads.push_back(t);
      }
      if (threads.empty()) Die("--threads: no thread count given");
    } else if (a == "--reps") {
      reps = std::atoi(next().c_str());
      if (reps < 1) Die("--reps must be at least 1");
    } else if (a == "--json") {
      json = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: bandwidth [--bytes N | --mib N] [--threads \"1 2\"] [--reps N] [--json]\n");
      return 0;
    } else {
      Die("unknown argument '" + a + "' (see --help)");
    }
  }
  const size_t llc = LastLevelCacheBytes();
  if (bytes == 0) bytes = std::min<size_t>(std::max<size_t>(size_t{1} << 30, 4 * llc), size_t{4} << 30);
  const size_t n = std::max<size_t>(bytes / 8, 32);
  void* raw = nullptr;
  if (posix_memalign(&raw, 4096, n * 8) != 0) Die("cannot allocate " + std::to_string(n * 8) + " bytes");
  auto* words = static_cast<uint64_t*>(raw);
  for (size_t i = 0; i < n; ++i) words[i] = i * 0x9E3779B97F4A7C15ull;  // every page touched
  // A pass reads at least 256 MiB: a small buffer is read several times over.
  const int loops = static_cast<int>(std::max<size_t>(1, ((size_t{256} << 20) + n * 8 - 1) / (n * 8)));
  std::vector<Result> results;
  for (int t : threads) results.push_back(Measure(words, n, t, reps, loops));
  std::free(raw);
  if (json) {
    std::printf("{\"bytes\": %zu, \"llc_bytes\": %zu, \"reps\": %d, \"reads_per_pass\": %d, \"results\": [", n * 8,
                llc, reps, loops);
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("%s{\"threads\": %d, \"best_gbs\": %.2f, \"median_gbs\": %.2f}", i ? ", " : "", results[i].threads,
                  results[i].best_gbs, results[i].median_gbs);
    std::printf("]}\n");
  } else {
    std::printf("read bandwidth: buffer %.1f MiB (last-level cache %.1f MiB), best of %d passes of %d read(s)\n",
                static_cast<double>(n * 8) / (1 << 20), static_cast<double>(llc) / (1 << 20), reps, loops);
    for (const auto& r : results)
      std::printf("threads %d: %.2f GB/s (median %.2f GB/s)\n", r.threads, r.best_gbs, r.median_gbs);
  }
  return 0;
}
