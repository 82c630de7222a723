// Private link between the kernel compilations (kernels_hwy.cc once per
// Highway target, the AArch64 variant translation units CMakeLists.txt
// generates from core/targets.def, int8_hwy.cc) and kernel_table.cc, which
// builds one KernelBundle per TargetId.
#pragma once

#include <cstdint>
#include <vector>

#include "core/target.h"
#include "kernels/int8.h"
#include "kernels/kernels.h"

namespace fcb::kernels::internal {

// The CPU family this build compiles code for; the manifest's rows of another
// family get no code (their tables say "unavailable").
#if defined(__x86_64__)
inline constexpr TargetArch kBuildArch = TargetArch::kX86_64;
#elif defined(__aarch64__)
inline constexpr TargetArch kBuildArch = TargetArch::kAArch64;
#else
inline constexpr TargetArch kBuildArch = TargetArch::kAny;
#endif
constexpr bool ArchBuilt(TargetArch arch) { return arch == TargetArch::kAny || arch == kBuildArch; }

// Fills `table` with the functions compiled for `target` and returns their
// Highway target's bit (HWY_SCALAR, HWY_SSE4, ...), or 0 when this build has
// no code for `target` (e.g. an x86 level on another CPU family, an SVE
// target on a host whose vector length has no compilation).
int64_t FillKernelTable(TargetId target, KernelTable* table);

// One pass of kernels_hwy.cc's own, by its Highway target's bit.
template <int64_t kHwyTarget>
void FillTableOf(KernelTable* table);
// One variant translation unit: the code of manifest row kId compiled for an
// SVE vector length of kBits (0 for a row without SVE). Returns its Highway
// target's bit.
template <TargetId kId, unsigned kBits>
int64_t FillVariant(KernelTable* table);

// The portable int8 code compiled for `target` (int8_hwy.cc); false when this
// build has none for it.
bool FillQKernelTable(TargetId target, QKernelTable* table);
// One pass of int8_hwy.cc, by its Highway target's bit.
template <int64_t kHwyTarget>
void FillQTableOf(QKernelTable* table);

// Every int8 table this host can run for `target`, the portable code with
// each dot-product code the manifest's i8_dot column gives and the host has,
// the best first (int8_conv.cc); empty when this build has no code for it.
std::vector<QKernelTable> QKernelVariants(TargetId target);
// gemm_nbits_i8's codes for `target` on this host, best first, the last one
// `portable` (the table's own); int8_conv.cc.
std::vector<NBitsI8Variant> NBitsI8Variants(TargetId target, decltype(KernelTable::gemm_nbits_i8) portable);

}  // namespace fcb::kernels::internal
