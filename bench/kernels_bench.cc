// Microbenchmark of the hot kernels, per target, single thread: GEMM with
// packed B (M=N=K=512 and 1024) and a ResNet-like 3x3 conv (56x56x64 -> 64,
// pad 1), the same conv by Winograd F(4x4, 3x3) (FLOP/s counted as the direct
// conv's, so the two compare directly), an L1-resident GEMM tile, and
// MatMulNBits' int8 kernel (nbits4_i8_MxNxK/TARGET/CODE, each gemm_nbits_i8 code the host runs; NBITS_CALL_ROWS=R sets the rows
// per call, 32 by default as the operator makes them). Reports FLOP/s ("FLOPS" counter); compare against the machine's
// single-core fp32 peak (about 208 GFLOP/s with AVX-512 FMA).
//
// The first benchmark, peak_fma/avx512, is a pure register FMA loop: the
// machine's measured single-core peak. Every FLOP-counted kernel also reports
// "pct_peak": its FLOP/s as a percentage of that loop's, measured in bursts
// interleaved with the kernel (see RunVsPeak).
//
// Built by CMake when Google Benchmark is found (FCB_BUILD_BENCH):
//   cmake --build build --target kernels_bench
//   build/bench/kernels_bench --benchmark_filter='peak|x86-64-v4'

#include <array>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <new>
#include <random>
#include <string>
#include <vector>

#ifdef FCB_BENCH_OPENBLAS
#include <cblas.h>
#endif

#include "core/arena_memory.h"
#include "core/target.h"
#include "kernels/int8.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "peak_fma.h"

namespace fcb::kernels {
namespace {

// Thread CPU time, like Google Benchmark's rates: on a shared machine wall time
// would charge other processes' time slices to the loop.
double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void BenchPeak(benchmark::State& state) {
  const int64_t iters = 1'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(bench::PeakFmaAvx512(iters));
  state.counters["FLOPS"] =
      benchmark::Counter(iters * bench::kPeakFlopPerIter, benchmark::Counter::kIsIterationInvariantRate);
}

// Runs `run` (one kernel call of `flop` FLOP) in blocks of about 2 ms. On
// AVX-512 hosts each block is followed by a burst of the register FMA loop of
// about the same length, and "pct_peak" is the median over blocks of the
// kernel's rate divided by the peak loop's rate right next to it. This
// machine's clock moves by 10-20 % within seconds (shared host, turbo), so a
// peak measured once at start-up would turn those swings into kernel
// "efficiency"; interleaving cancels them. Reported time is the kernel's only.
template <typename Fn>
void RunVsPeak(benchmark::State& state, double flop, Fn&& run) {
  run();  // warm caches and page in the buffers
  const double t0 = CpuSeconds();
  run();
  const double one = std::max(CpuSeconds() - t0, 1e-7);
  const int64_t reps = std::max<int64_t>(1, static_cast<int64_t>(2e-3 / one));
  const bool peak = bench::HostHasAvx512();
  const int64_t peak_iters =
      std::max<int64_t>(1000, static_cast<int64_t>(flop * reps / bench::kPeakFlopPerIter));
  std::vector<double> ratios;
  for (auto _ : state) {
    const double a = CpuSeconds();
    for (int64_t i = 0; i < reps; ++i) run();
    const double kernel_s = CpuSeconds() - a;
    state.SetIterationTime(kernel_s);
    if (!peak) continue;
    const double b = CpuSeconds();
    benchmark::DoNotOptimize(bench::PeakFmaAvx512(peak_iters));
    const double peak_s = CpuSeconds() - b;
    ratios.push_back((flop * reps / kernel_s) / (peak_iters * bench::kPeakFlopPerIter / peak_s));
  }
  state.counters["FLOPS"] =
      benchmark::Counter(flop * static_cast<double>(reps), benchmark::Counter::kIsIterationInvariantRate);
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    state.counters["pct_peak"] = 100.0 * ratios[ratios.size() / 2];
  }
}

// Kernel operands live 64-byte aligned, as the runtime's arena and weight pool
// place them; std::vector's 16-byte alignment would split every vector load
// across two cache lines and measure a case that never happens.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const Aligned64&) const { return true; }
};
using Buffer = std::vector<float, Aligned64<float>>;

// A kernel's per-thread scratch (the runtime's comes from the execution's arena).
struct Scratch {
  explicit Scratch(int64_t floats) : buf(static_cast<size_t>(floats)) {}
  float* get() { return buf.data(); }
  Buffer buf;
};

Buffer Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Buffer v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

Buffer Aligned(const std::vector<float>& v) { return Buffer(v.begin(), v.end()); }

// An activation tensor of n random floats, placed as an Execution places its
// arena (core/arena_memory.h: huge pages from 1 MiB). Weights stay in a
// Buffer: the runtime reads them from the file's mapping, in 4 KiB pages.
class ArenaBuffer {
 public:
  ArenaBuffer(int64_t n, uint32_t seed) {
    if (!mem_.Allocate(static_cast<uint64_t>(n) * sizeof(float))) throw std::bad_alloc();
    const Buffer init = Random(n, seed);
    std::copy(init.begin(), init.end(), data());
  }
  float* data() const { return reinterpret_cast<float*>(mem_.data()); }

 private:
  ArenaMemory mem_;
};

// cold_b: the weights cold, as in a model whose weights are read once per
// run: enough copies of packed B (256 MiB in all, more than any L3 here)
// that each call reads a copy that left the caches long ago.
void BenchGemmB(benchmark::State& state, TargetId target, int64_t M, int64_t N, int64_t K, bool cold_b) {
  const KernelTable& k = GetKernelTable(target);
  const ArenaBuffer A(M * K, 1), C(M * N, 4);
  const auto B = Random(K * N, 2), bias = Random(N, 3);
  const auto one = PackGemmB(B.data(), K, N, N, 1);
  const size_t copies = cold_b ? std::max<size_t>(2, (size_t{256} << 20) / (one.size() * sizeof(float))) : 1;
  std::vector<Buffer> packed;
  for (size_t i = 0; i < copies; ++i) packed.push_back(Aligned(one));
  const Epilogue ep{};
  Scratch scratch(kGemmScratchFloats);
  size_t next = 0;
  RunVsPeak(state, 2.0 * M * N * K, [&] {
    k.gemm(M, N, K, A.data(), K, packed[next].data(), bias.data(), C.data(), N, ep, 0, M, scratch.get());
    next = (next + 1) % copies;
    benchmark::ClobberMemory();
  });
}

void BenchGemm(benchmark::State& state, TargetId target, int64_t M, int64_t N, int64_t K) {
  BenchGemmB(state, target, M, N, K, false);
}
void BenchGemmColdB(benchmark::State& state, TargetId target, int64_t M, int64_t N, int64_t K) {
  BenchGemmB(state, target, M, N, K, true);
}

// MatMulNBits at accuracy_level 4 (KernelTable::gemm_nbits_i8): 4-bit
// weights in blocks of 32 with zero points, A quantized once outside the
// loop; rows in calls of NBITS_CALL_ROWS (32) as the operator makes them. FLOP/s counts
// 2 * M * N * K.
int64_t kCallRows = std::getenv("NBITS_CALL_ROWS") ? std::atoll(std::getenv("NBITS_CALL_ROWS")) : 32;
void BenchNBitsI8(benchmark::State& state, decltype(KernelTable::gemm_nbits_i8) fn, int64_t M, int64_t N,
                  int64_t K) {
  NBitsGeom g;
  g.k = K;
  g.n = N;
  g.bits = 4;
  g.block_size = 32;
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  std::mt19937 rng(7);
  std::vector<uint8_t> b(static_cast<size_t>(N * blocks * g.block_size / 2)), zp(static_cast<size_t>(N * ((blocks + 1) / 2)));
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  for (auto& x : zp) x = static_cast<uint8_t>(rng());
  std::vector<float> scales(static_cast<size_t>(N * blocks), 0.01f);
  const PackedNBits packed = PackNBits(g, b.data(), scales.data(), zp.data());
  const auto a = Random(M * K, 1);
  std::vector<int16_t> qa(static_cast<size_t>(M * kp));
  std::vector<float> as(static_cast<size_t>(M * blocks)), y(static_cast<size_t>(M * N));
  std::vector<int32_t> asum(static_cast<size_t>(M * blocks));
  QuantizeBlocksI8(g, a.data(), M, qa.data(), as.data(), asum.data());
  RunVsPeak(state, 2.0 * M * N * K, [&] {
    for (int64_t r0 = 0; r0 < M; r0 += kCallRows)
      fn(g, std::min<int64_t>(kCallRows, M - r0), qa.data() + r0 * kp, as.data() + r0 * blocks,
                      asum.data() + r0 * blocks, packed.weights.data(), packed.scales.data(),
                      packed.zero_points.data(), nullptr, y.data() + r0 * N, N, 0, NBitsPanels(g));
    benchmark::ClobberMemory();
  });
}

// MatMul of two activations (KernelTable::matmul, B row-major and read in
// place): an attention head's scores, Q [M x K] times K^T [K x N].
void BenchMatMul(benchmark::State& state, TargetId target, int64_t M, int64_t N, int64_t K) {
  const KernelTable& k = GetKernelTable(target);
  const auto a = Random(M * K, 1), b = Random(K * N, 2);
  Buffer c(static_cast<size_t>(M * N));
  RunVsPeak(state, 2.0 * M * N * K, [&] {
    k.matmul(M, N, K, a.data(), K, b.data(), N, c.data(), N, 0, M);
    benchmark::ClobberMemory();
  });
}

// The RGB stem of mobile networks: a 3x3 stride-2 conv over 3 channels
// (224x224 -> 112x112), K = 27.
void BenchStem(benchmark::State& state, TargetId target, int64_t oc, bool nchw) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = 224, g.oh = g.ow = 112, g.ic = 3, g.oc = oc, g.kh = g.kw = 3;
  g.sh = g.sw = 2, g.dh = g.dw = 1, g.pad_top = g.pad_left = 1, g.groups = 1;
  g.in_pixel_stride = 3, g.out_pixel_stride = oc;
  g.in_nchw = nchw;
  const auto in = Random(224 * 224 * 3, 1), w = Random(oc * 27, 2), b = Random(oc, 3);
  const auto packed = Aligned(PackConv(w.data(), oc, 3, 3, 3, 1));
  const auto pbias = Aligned(PackConvBias(b.data(), oc, 1));
  Buffer out(static_cast<size_t>(112 * 112 * oc));
  const Epilogue ep{Act::kClip, 0.f, 6.f};
  Scratch scratch(kGemmScratchFloats);
  RunVsPeak(state, 2.0 * 112 * 112 * oc * 27, [&] {
    k.conv(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, 112 * 112, scratch.get());
    benchmark::ClobberMemory();
  });
}

void BenchConv3x3(benchmark::State& state, TargetId target) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = g.oh = g.ow = 56, g.ic = g.oc = 64, g.kh = g.kw = 3;
  g.sh = g.sw = g.dh = g.dw = 1, g.pad_top = g.pad_left = 1, g.groups = 1;
  g.in_pixel_stride = g.out_pixel_stride = 64;
  const auto in = Random(56 * 56 * 64, 1), w = Random(64 * 64 * 9, 2), b = Random(64, 3);
  const auto packed = Aligned(PackConv(w.data(), 64, 64, 3, 3, 1));
  const auto pbias = Aligned(PackConvBias(b.data(), 64, 1));
  Buffer out(56 * 56 * 64);
  const Epilogue ep{Act::kRelu, 0.f, 0.f};
  Scratch scratch(kGemmScratchFloats);
  RunVsPeak(state, 2.0 * 56 * 56 * 64 * 64 * 9, [&] {
    k.conv(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, 56 * 56, scratch.get());
    benchmark::ClobberMemory();
  });
}

// A depthwise 3x3 conv (MobileNetV2's 56x56x144 block, ReLU6) and a 1x1 conv
// with few input channels (its 112x112 x 16 -> 96 expansion): the two halves
// of an inverted-residual block.
// A k x k depthwise conv with "same" padding (k / 2 on every side).
void BenchDepthwise(benchmark::State& state, TargetId target, int64_t hw, int64_t c, int64_t stride,
                    int64_t ksize, Act act) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = hw, g.ic = g.oc = g.groups = c, g.kh = g.kw = ksize;
  g.sh = g.sw = stride, g.dh = g.dw = 1, g.pad_top = g.pad_left = ksize / 2;
  g.oh = g.ow = (hw + 2 * (ksize / 2) - ksize) / stride + 1;
  g.in_pixel_stride = g.out_pixel_stride = c;
  const auto in = Random(hw * hw * c, 1), w = Random(c * ksize * ksize, 2), b = Random(c, 3);
  const auto packed = Aligned(PackDepthwise(w.data(), c, ksize, ksize));
  const auto pbias = Aligned(PackDepthwiseBias(b.data(), c));
  Buffer out(static_cast<size_t>(g.oh * g.ow * c));
  const Epilogue ep{act, 0.f, 6.f};
  RunVsPeak(state, 2.0 * g.oh * g.ow * c * ksize * ksize, [&] {
    k.depthwise(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, g.oh * g.ow);
    benchmark::ClobberMemory();
  });
}

void BenchPointwiseAct(benchmark::State& state, TargetId target, int64_t hw, int64_t ic, int64_t oc, Act act) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = g.oh = g.ow = hw, g.ic = ic, g.oc = oc, g.kh = g.kw = 1;
  g.sh = g.sw = g.dh = g.dw = 1, g.groups = 1;
  g.in_pixel_stride = ic, g.out_pixel_stride = oc;
  const auto in = Random(hw * hw * ic, 1), w = Random(oc * ic, 2), b = Random(oc, 3);
  const auto packed = Aligned(PackConv(w.data(), oc, ic, 1, 1, 1));
  const auto pbias = Aligned(PackConvBias(b.data(), oc, 1));
  Buffer out(static_cast<size_t>(hw * hw * oc));
  const Epilogue ep{act, 0.f, 6.f};
  Scratch scratch(kGemmScratchFloats);
  RunVsPeak(state, 2.0 * hw * hw * ic * oc, [&] {
    k.conv(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, hw * hw, scratch.get());
    benchmark::ClobberMemory();
  });
}

// As the MobileNets run it, ending in ReLU6.
void BenchPointwise(benchmark::State& state, TargetId target, int64_t hw, int64_t ic, int64_t oc) {
  BenchPointwiseAct(state, target, hw, ic, oc, Act::kClip);
}

#ifdef FCB_BENCH_OPENBLAS
// The same product by OpenBLAS's sgemm on one thread, operands placed the same
// way (B row-major, unpacked: OpenBLAS packs it on every call, which is part
// of its design). A reference for what a hand-tuned BLAS reaches on this
// machine, next to the same interleaved peak. Built when libopenblas-dev is
// installed (an optional, benchmark-only dependency).
void BenchOpenBlas(benchmark::State& state, int64_t M, int64_t N, int64_t K) {
  openblas_set_num_threads(1);
  const ArenaBuffer A(M * K, 1), C(M * N, 4);
  const auto B = Random(K * N, 2);
  RunVsPeak(state, 2.0 * M * N * K, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.f, A.data(), static_cast<int>(K), B.data(),
                static_cast<int>(N), 0.f, C.data(), static_cast<int>(N));
    benchmark::ClobberMemory();
  });
}
#endif

// An activation over 1M floats (the epilogue cost of a large conv). Out of
// place: repeated in place, SiLU would drive values into denormals.
void BenchUnary(benchmark::State& state, TargetId target, Act act) {
  const KernelTable& k = GetKernelTable(target);
  const auto x = Random(1 << 20, 4);
  Buffer y(x.size());
  const Epilogue ep{act, 0.f, 0.f};
  for (auto _ : state) {
    k.unary(ep, x.data(), y.data(), 0, 1 << 20);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["elems"] =
      benchmark::Counter(1 << 20, benchmark::Counter::kIsIterationInvariantRate);
}

void BenchWinograd(benchmark::State& state, TargetId target, int64_t hw, int64_t c, int64_t oc) {
  const KernelTable& k = GetKernelTable(target);
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = g.oh = g.ow = hw, g.ic = c, g.oc = oc, g.kh = g.kw = 3;
  g.sh = g.sw = g.dh = g.dw = 1, g.pad_top = g.pad_left = 1, g.groups = 1;
  g.in_pixel_stride = c, g.out_pixel_stride = oc;
  const auto in = Random(hw * hw * c, 1), w = Random(oc * c * 9, 2), b = Random(oc, 3);
  const auto packed = Aligned(PackWinograd(w.data(), oc, c));
  const auto pbias = Aligned(PackConvBias(b.data(), oc, 1));
  Buffer out(static_cast<size_t>(hw * hw * oc));
  const Epilogue ep{Act::kRelu, 0.f, 0.f};
  const int64_t tiles = ((hw + 3) / 4) * ((hw + 3) / 4);
  Scratch scratch(kWinogradScratchFloats);
  RunVsPeak(state, 2.0 * hw * hw * c * oc * 9, [&] {
    k.winograd(g, in.data(), packed.data(), pbias.data(), nullptr, out.data(), ep, 0, tiles, 0, PanelCount(g.oc), scratch.get());
    benchmark::ClobberMemory();
  });
}

}  // namespace
}  // namespace fcb::kernels

int main(int argc, char** argv) {
  using namespace fcb;
  if (bench::HostHasAvx512()) benchmark::RegisterBenchmark("peak_fma/avx512", kernels::BenchPeak);
#ifdef FCB_BENCH_OPENBLAS
  for (int64_t size : {512, 1024})
    benchmark::RegisterBenchmark(("openblas_sgemm" + std::to_string(size)).c_str(),
                                 kernels::BenchOpenBlas, size, size, size)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
#endif
  for (TargetId t : RunnableTargets()) {
    const std::string name = TargetName(t);
    for (int64_t size : {512, 1024})
      benchmark::RegisterBenchmark(("gemm" + std::to_string(size) + "/" + name).c_str(),
                                   kernels::BenchGemm, t, size, size, size)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    // Transformer block shapes (BERT-base at 128 tokens, M x N x K): a row
    // count that is not a multiple of the register tile, and a few K blocks.
    for (auto [m, n, k] : {std::array<int64_t, 3>{128, 768, 768}, {128, 2304, 768}, {128, 3072, 768},
                           {128, 768, 3072}})
      benchmark::RegisterBenchmark(("gemm_" + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                    std::to_string(k) + "/" + name).c_str(),
                                   kernels::BenchGemm, t, m, n, k)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    for (auto [m, n, k] : {std::array<int64_t, 3>{128, 2304, 768}, {128, 3072, 768}, {128, 768, 3072}})
      benchmark::RegisterBenchmark(("gemm_coldb_" + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                    std::to_string(k) + "/" + name).c_str(),
                                   kernels::BenchGemmColdB, t, m, n, k)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    // One register tile's worth of rows and columns: everything stays in L1,
    // so this is the microkernel's own ceiling (tile setup and A packing included).
    benchmark::RegisterBenchmark(("gemm_l1_12x32x256/" + name).c_str(), kernels::BenchGemm, t,
                                 12, 32, 256)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("conv3x3_56x56x64/" + name).c_str(), kernels::BenchConv3x3, t)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    for (bool nchw : {false, true})
      for (int64_t oc : {16, 32, 64})
        benchmark::RegisterBenchmark(
            ("stem3x3s2_224_3to" + std::to_string(oc) + (nchw ? "_nchw/" : "/") + name).c_str(),
            kernels::BenchStem, t, oc, nchw)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    // Depthwise convs of MobileNet-v2 and EfficientNet-B0 (5x5 on small maps:
    // most pixels are edge pixels), ending in ReLU6, and two with SiLU, the
    // EfficientNets' activation.
    using kernels::Act;
    const struct {
      const char* label;
      int64_t hw, c, stride, ksize;
      Act act;
    } dws[] = {{"dw3x3_56x56x144", 56, 144, 1, 3, Act::kClip},         {"dw3x3_112x112x32", 112, 32, 1, 3, Act::kClip},
               {"dw3x3s2_112x112x96", 112, 96, 2, 3, Act::kClip},      {"dw3x3_14x14x576", 14, 576, 1, 3, Act::kClip},
               {"dw5x5_7x7x1152", 7, 1152, 1, 5, Act::kClip},          {"dw5x5_14x14x480", 14, 480, 1, 5, Act::kClip},
               {"dw5x5s2_56x56x144", 56, 144, 2, 5, Act::kClip},       {"dw3x3_112x112x32_silu", 112, 32, 1, 3, Act::kSilu},
               {"dw5x5_14x14x480_silu", 14, 480, 1, 5, Act::kSilu}};
    for (const auto& dw : dws)
      benchmark::RegisterBenchmark((std::string(dw.label) + "/" + name).c_str(), kernels::BenchDepthwise, t, dw.hw,
                                   dw.c, dw.stride, dw.ksize, dw.act)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("conv1x1_56x56_24to144/" + name).c_str(), kernels::BenchPointwise, t, 56, 24, 144)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    // The same with SiLU.
    benchmark::RegisterBenchmark(("conv1x1_56x56_24to144_silu/" + name).c_str(), kernels::BenchPointwiseAct, t, 56,
                                 24, 144, Act::kSilu)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    // MatMulNBits accuracy_level 4: SmolLM2-135M's projections, decode and 128-token prefill.
    for (auto [m, n, kk] : {std::array<int64_t, 3>{1, 1536, 576}, {128, 1536, 576}, {1, 576, 1536}, {128, 576, 1536}})
      for (const kernels::NBitsI8Variant& v : kernels::NBitsI8VariantsForTesting(t))
        benchmark::RegisterBenchmark(("nbits4_i8_" + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                      std::to_string(kk) + "/" + name + "/" + v.dot).c_str(),
                                     kernels::BenchNBitsI8, v.fn, m, n, kk)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    // Attention products: BERT-base (sequence 128, head 64) and a Swin window (49 tokens, head 32).
    for (auto [m, n, kk] : {std::array<int64_t, 3>{128, 128, 64}, {128, 64, 128}, {49, 49, 32}, {49, 32, 49}})
      benchmark::RegisterBenchmark(("matmul_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk) +
                                    "/" + name).c_str(),
                                   kernels::BenchMatMul, t, m, n, kk)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    // ResNet-50's bottleneck 1x1 convs (14x14 256 -> 512 is one thread's half of the 1024 at 2 threads).
    for (auto [hw, ic, oc] : {std::array<int64_t, 3>{14, 256, 1024}, {14, 256, 512}, {56, 64, 256}, {28, 512, 128}})
      benchmark::RegisterBenchmark(("conv1x1_" + std::to_string(hw) + "x" + std::to_string(hw) + "_" +
                                    std::to_string(ic) + "to" + std::to_string(oc) + "/" + name).c_str(),
                                   kernels::BenchPointwise, t, hw, ic, oc)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("conv1x1_28x28_16to96/" + name).c_str(), kernels::BenchPointwise, t, 28, 16, 96)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("conv1x1_112x112_16to48/" + name).c_str(), kernels::BenchPointwise, t, 112, 16, 48)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("conv1x1_112x112_32to16/" + name).c_str(), kernels::BenchPointwise, t, 112, 32, 16)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("conv1x1_45x45_16to48/" + name).c_str(), kernels::BenchPointwise, t, 45, 16, 48)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    for (auto [hw, ic, oc] : {std::array<int64_t, 3>{14, 80, 480}, {7, 192, 1152}, {14, 112, 672}, {28, 40, 240}, {7, 1152, 192}}) {
      const std::string shape = std::to_string(hw) + "x" + std::to_string(hw) + "_" + std::to_string(ic) + "to" + std::to_string(oc);
      benchmark::RegisterBenchmark(("conv1x1_" + shape + "/" + name).c_str(), kernels::BenchPointwise, t, hw, ic, oc)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(("gemm_l1_12x32x16/" + name).c_str(), kernels::BenchGemm, t, 12, 32, 16)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("silu_1M/" + name).c_str(), kernels::BenchUnary, t, kernels::Act::kSilu);
    benchmark::RegisterBenchmark(("relu_1M/" + name).c_str(), kernels::BenchUnary, t, kernels::Act::kRelu);
    benchmark::RegisterBenchmark(("gelu_1M/" + name).c_str(), kernels::BenchUnary, t, kernels::Act::kGelu);
    benchmark::RegisterBenchmark(("sigmoid_1M/" + name).c_str(), kernels::BenchUnary, t, kernels::Act::kSigmoid);
    benchmark::RegisterBenchmark(("winograd3x3_56x56x64/" + name).c_str(), kernels::BenchWinograd,
                                 t, 56, 64, 64)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("winograd3x3_28x28x128/" + name).c_str(),
                                 kernels::BenchWinograd, t, 28, 128, 128)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("winograd3x3_14x14x256/" + name).c_str(),
                                 kernels::BenchWinograd, t, 14, 256, 256)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    // EfficientNet-V2's fused-MBConv expansion.
    benchmark::RegisterBenchmark(("winograd3x3_56x56_48to192/" + name).c_str(),
                                 kernels::BenchWinograd, t, 56, 48, 192)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
