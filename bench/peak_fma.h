// The machine's measured fp32 FMA peak on one core: the yardstick the kernel
// benchmarks report their GFLOP/s against.
#pragma once

#include <cstdint>

namespace fcb::bench {

// True when this CPU can run the AVX-512 loop below.
bool HostHasAvx512();

// Runs `iters` iterations of 24 independent 16-lane FMA chains (enough to keep
// both FMA ports busy through the 4-cycle latency) and returns a value derived
// from the accumulators so the work cannot be optimized away. Each iteration is
// 24 * 16 * 2 = 768 FLOP. Call only when HostHasAvx512().
float PeakFmaAvx512(int64_t iters);
inline constexpr double kPeakFlopPerIter = 24.0 * 16 * 2;

}  // namespace fcb::bench
