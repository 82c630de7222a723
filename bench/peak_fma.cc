// A pure register FMA loop: no loads, no stores, independent chains, so it runs
// at the FMA units' throughput and measures the single-core peak.
#include "peak_fma.h"


namespace fcb::bench {

bool HostHasAvx512() { return __builtin_cpu_supports("avx512f"); }

// Written in assembly so the compiler can neither spill the accumulators nor
// fold the chains: 24 zmm accumulators, each updated once per iteration.
__attribute__((target("avx512f"))) float PeakFmaAvx512(int64_t iters) {
  alignas(64) float out[16];
  const float a = 0.999999f, b = 1e-7f;
  __asm__ volatile(
      "vbroadcastss %[a], %%zmm30\n\t"
      "vbroadcastss %[b], %%zmm31\n\t"
      "vxorps %%zmm0, %%zmm0, %%zmm0\n\t"
      ".irp r,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23\n\t"
      "vmovaps %%zmm0, %%zmm\\r\n\t"
      ".endr\n\t"
      "test %[n], %[n]\n\t"
      "jle 2f\n\t"
      "1:\n\t"
      ".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23\n\t"
      "vfmadd132ps %%zmm30, %%zmm31, %%zmm\\r\n\t"
      ".endr\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "2:\n\t"
      ".irp r,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23\n\t"
      "vaddps %%zmm\\r, %%zmm0, %%zmm0\n\t"
      ".endr\n\t"
      "vmovaps %%zmm0, %[out]\n\t"
      : [n] "+r"(iters), [out] "=m"(out)
      : [a] "m"(a), [b] "m"(b)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
        "xmm21", "xmm22", "xmm23", "xmm30", "xmm31", "cc");
  float s = 0;
  for (float x : out) s += x;
  return s;
}

}  // namespace fcb::bench
