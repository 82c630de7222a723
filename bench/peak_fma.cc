// A pure register FMA loop: no loads, no stores, independent chains, so it runs
// at the FMA units' throughput and measures the single-core peak.
#include "peak_fma.h"

#include <immintrin.h>

namespace fcb::bench {

bool HostHasAvx512() { return __builtin_cpu_supports("avx512f"); }

__attribute__((target("avx512f"))) float PeakFmaAvx512(int64_t iters) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    // Keeps the compiler from collapsing the chain across iterations.
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]),
                     "+v"(acc[5]), "+v"(acc[6]), "+v"(acc[7]), "+v"(acc[8]), "+v"(acc[9]),
                     "+v"(acc[10]), "+v"(acc[11]));
  }
  __m512 s = acc[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace fcb::bench
