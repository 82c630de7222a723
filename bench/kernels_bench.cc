// Microbenchmark of the hot kernels, per target, single thread: GEMM with
// packed B (M=N=K=512 and 1024) and a ResNet-like 3x3 conv (56x56x64 -> 64,
// pad 1), the same conv by Winograd F(4x4, 3x3) (FLOP/s counted as the direct
// conv's, so the two compare directly), and an L1-resident GEMM tile. Reports FLOP/s ("FLOPS" counter); compare against the machine's
// single-core fp32 peak (about 208 GFLOP/s with AVX-512 FMA).
//
// The first benchmark, peak_fma/avx512, is a pure register FMA loop: the
// machine's measured single-core peak. Every kernel also reports "pct_peak",
// its FLOP/s as a percentage of that measured peak (measured once at start-up).
//
// Built by CMake when Google Benchmark is found (FCB_BUILD_BENCH):
//   cmake --build build --target kernels_bench
//   build/bench/kernels_bench --benchmark_filter='peak|x86-64-v4'

#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "peak_fma.h"

namespace fcb::kernels {
namespace {

// Measured single-core peak in FLOP/s (0 when the host has no AVX-512).
double g_peak_flops = 0;

// Thread CPU time, like Google Benchmark's rates: on a shared machine wall time
// would charge other processes' time slices to the loop.
double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double MeasurePeak() {
  if (!bench::HostHasAvx512()) return 0;
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const int64_t iters = 20'000'000;
    const double t0 = CpuSeconds();
    benchmark::DoNotOptimize(bench::PeakFmaAvx512(iters));
    best = std::max(best, iters * bench::kPeakFlopPerIter / (CpuSeconds() - t0));
  }
  return best;
}

void BenchPeak(benchmark::State& state) {
  const int64_t iters = 1'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(bench::PeakFmaAvx512(iters));
  state.counters["FLOPS"] =
      benchmark::Counter(iters * bench::kPeakFlopPerIter, benchmark::Counter::kIsIterationInvariantRate);
}

void SetFlops(benchmark::State& state, double flop) {
  state.counters["FLOPS"] = benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
  if (g_peak_flops > 0)
    state.counters["pct_peak"] =  // percent of the measured peak
        benchmark::Counter(100.0 * flop / g_peak_flops, benchmark::Counter::kIsIterationInvariantRate);
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void BenchGemm(benchmark::State& state, TargetId target, int64_t M, int64_t N, int64_t K) {
  const KernelTable& k = GetKernelTable(target);
  const auto A = Random(M * K, 1), B = Random(K * N, 2), bias = Random(N, 3);
  const auto packed = PackGemmB(B.data(), K, N, N, 1);
  std::vector<float> C(static_cast<size_t>(M * N));
  const Epilogue ep{};
  for (auto _ : state) {
    k.gemm(M, N, K, A.data(), K, packed.data(), bias.data(), C.data(), N, ep, 0, M);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, 2.0 * M * N * K);
}

void BenchConv3x3(benchmark::State& state, TargetId target) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = g.oh = g.ow = 56, g.ic = g.oc = 64, g.kh = g.kw = 3;
  g.sh = g.sw = g.dh = g.dw = 1, g.pad_top = g.pad_left = 1, g.groups = 1;
  g.in_pixel_stride = g.out_pixel_stride = 64;
  const auto in = Random(56 * 56 * 64, 1), w = Random(64 * 64 * 9, 2), b = Random(64, 3);
  const auto packed = PackConv(w.data(), 64, 64, 3, 3, 1);
  const auto pbias = PackConvBias(b.data(), 64, 1);
  std::vector<float> out(56 * 56 * 64);
  const Epilogue ep{Act::kRelu, 0.f, 0.f};
  for (auto _ : state) {
    k.conv(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, 56 * 56);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, 2.0 * 56 * 56 * 64 * 64 * 9);
}

// An activation over 1M floats (the epilogue cost of a large conv). Out of
// place: repeated in place, SiLU would drive values into denormals.
void BenchUnary(benchmark::State& state, TargetId target, Act act) {
  const KernelTable& k = GetKernelTable(target);
  const auto x = Random(1 << 20, 4);
  std::vector<float> y(x.size());
  const Epilogue ep{act, 0.f, 0.f};
  for (auto _ : state) {
    k.unary(ep, x.data(), y.data(), 0, 1 << 20);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["elems"] =
      benchmark::Counter(1 << 20, benchmark::Counter::kIsIterationInvariantRate);
}

void BenchWinograd(benchmark::State& state, TargetId target, int64_t hw, int64_t c) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = g.oh = g.ow = hw, g.ic = g.oc = c, g.kh = g.kw = 3;
  g.sh = g.sw = g.dh = g.dw = 1, g.pad_top = g.pad_left = 1, g.groups = 1;
  g.in_pixel_stride = g.out_pixel_stride = c;
  const auto in = Random(hw * hw * c, 1), w = Random(c * c * 9, 2), b = Random(c, 3);
  const auto packed = PackWinograd(w.data(), c, c);
  const auto pbias = PackConvBias(b.data(), c, 1);
  std::vector<float> out(static_cast<size_t>(hw * hw * c));
  const Epilogue ep{Act::kRelu, 0.f, 0.f};
  const int64_t tiles = ((hw + 3) / 4) * ((hw + 3) / 4);
  for (auto _ : state) {
    k.winograd(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, tiles);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, 2.0 * hw * hw * c * c * 9);
}

}  // namespace
}  // namespace fcb::kernels

int main(int argc, char** argv) {
  using namespace fcb;
  kernels::g_peak_flops = kernels::MeasurePeak();
  if (kernels::g_peak_flops > 0)
    std::printf("measured single-core fp32 FMA peak (AVX-512): %.1f GFLOP/s\n", kernels::g_peak_flops / 1e9);
  if (bench::HostHasAvx512()) benchmark::RegisterBenchmark("peak_fma/avx512", kernels::BenchPeak);
  for (TargetId t : RunnableTargets()) {
    const std::string name = TargetName(t);
    for (int64_t size : {512, 1024})
      benchmark::RegisterBenchmark(("gemm" + std::to_string(size) + "/" + name).c_str(),
                                   kernels::BenchGemm, t, size, size, size)
          ->Unit(benchmark::kMillisecond);
    // One register tile's worth of rows and columns: everything stays in L1,
    // so this is the microkernel's own ceiling (tile setup and A packing included).
    benchmark::RegisterBenchmark(("gemm_l1_12x32x256/" + name).c_str(), kernels::BenchGemm, t,
                                 12, 32, 256);
    benchmark::RegisterBenchmark(("conv3x3_56x56x64/" + name).c_str(), kernels::BenchConv3x3, t)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("silu_1M/" + name).c_str(), kernels::BenchUnary, t, kernels::Act::kSilu);
    benchmark::RegisterBenchmark(("relu_1M/" + name).c_str(), kernels::BenchUnary, t, kernels::Act::kRelu);
    benchmark::RegisterBenchmark(("winograd3x3_56x56x64/" + name).c_str(), kernels::BenchWinograd,
                                 t, 56, 64)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("winograd3x3_28x28x128/" + name).c_str(),
                                 kernels::BenchWinograd, t, 28, 128)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
