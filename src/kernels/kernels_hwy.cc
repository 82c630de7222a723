// The kernels, compiled once per Highway target. foreach_target.h re-includes
// this file for every target in HWY_TARGETS; each pass defines the kernels in
// a namespace unique to that target (fcb::kernels::N_AVX3, ...), which lets
// the code for all targets co-exist in one translation unit.
//
// Which code each target runs is the target manifest's (core/targets.def):
// a row's hwy column names the Highway target of this file's pass that holds
// its code (generic -> HWY_SCALAR: GCC 12.2 sets HWY_BROKEN_EMU128, so the
// portable fallback is HWY_SCALAR; x86-64-v2/v3/v4 -> HWY_SSE4/AVX2/AVX3;
// armv8-a -> HWY_NEON). SSSE3 and AVX3_DL are not used, so they are not
// compiled (hwy_targets.h). HWY_COMPILE_ALL_ATTAINABLE keeps HWY_SCALAR (and
// every lower target) even when the build's baseline (-march) is above it.
//
// A row with a variant suffix has code of its own: CMakeLists.txt generates
// one translation unit per such row (and per SVE vector length of it) that
// defines FCB_KERNEL_VARIANT_* and includes this file, compiled with the
// row's -march. armv8.2-a is HWY_NEON again with FP16 and dot product
// enabled, and the SVE targets are HWY_SVE / HWY_SVE2 compiled for a fixed
// vector length each (see common-inl.h), so Highway's SVE targets are
// disabled in this file's own passes.
//
// Dispatch is not Highway's: HWY_DYNAMIC_DISPATCH would consult process-wide
// state. FillKernelTable calls each target's FillTable through FillTableOf
// (this file's passes) or FillVariant (the variant units), once per TargetId,
// so Highway is used header-only (no libhwy.so).

#include "kernels/kernel_ns.h"

// Must precede every Highway header (detect_targets.h reads them once).
#ifndef FCB_KERNEL_VARIANT_TARGET
#include "kernels/hwy_targets.h"
#else
// A variant translation unit: only the target its -march makes the baseline.
#define HWY_COMPILE_ONLY_STATIC 1
#ifndef HWY_IS_DEBUG_BUILD
#define HWY_IS_DEBUG_BUILD 0  // as in hwy_targets.h: no libhwy for hwy::Abort
#endif
// Per Highway family of a variant (the manifest's hwy column): the Highway
// targets its code may be, and those its -march also makes attainable that
// must not be chosen instead (armv9-a's SVE2 code, not SVE-only code).
#define FCB_VARIANT_FAMILY_NEON HWY_NEON
#define FCB_VARIANT_FAMILY_SVE (HWY_SVE | HWY_SVE_256)
#define FCB_VARIANT_FAMILY_SVE2 (HWY_SVE2 | HWY_SVE2_128)
#define FCB_VARIANT_EXCLUDES_NEON 0
#define FCB_VARIANT_EXCLUDES_SVE 0
#define FCB_VARIANT_EXCLUDES_SVE2 (HWY_SVE | HWY_SVE_256)
#define HWY_DISABLED_TARGETS FCB_KNS_CAT(FCB_VARIANT_EXCLUDES_, FCB_KERNEL_VARIANT_HWY)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "kernels/attention-inl.h"
#include "kernels/common-inl.h"
#include "kernels/conv_gemm-inl.h"
#include "kernels/eltwise-inl.h"
#include "kernels/nbits-inl.h"
#include "kernels/spatial-inl.h"
#include "kernels/tile-inl.h"
#include "kernels/winograd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

// This target's entry points; the only function exported per target.
void FillTable(KernelTable* t) {
  t->isa = hwy::TargetName(HWY_TARGET);
#define FCB_SET_KERNEL(member, fn) t->member = &fn;
  FCB_F32_KERNELS(FCB_SET_KERNEL)
#undef FCB_SET_KERNEL
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#include "kernels/kernel_table_internal.h"

#ifndef FCB_KERNEL_VARIANT_TARGET
namespace fcb::kernels::internal {
// This pass's FillTable under its Highway target's bit. Each target's
// FillTable is named directly rather than through HWY_EXPORT: that table's
// first entry is Highway's dispatch trampoline, which references libhwy.so,
// and loading libhwy.so costs every process ~3 ms of static initialisation
// (measured: an empty program linked with -lhwy takes 4.3 ms of CPU instead
// of 0.7 ms), a third of a cold `fcb run` on a small model.
template <>
void FillTableOf<HWY_TARGET>(KernelTable* table) {
  FCB_KNS::FillTable(table);
}
}  // namespace fcb::kernels::internal
#endif

#if defined(FCB_KERNEL_VARIANT_TARGET) && HWY_ONCE
namespace fcb::kernels::internal {
static_assert((HWY_STATIC_TARGET & FCB_KNS_CAT(FCB_VARIANT_FAMILY_, FCB_KERNEL_VARIANT_HWY)) != 0,
              "the variant's -march does not give the Highway target its manifest row names");
template <>
int64_t FillVariant<TargetId::FCB_KERNEL_VARIANT_TARGET, FCB_KERNEL_VARIANT_BITS>(KernelTable* table) {
  FCB_KNS::FillTable(table);
  return HWY_STATIC_TARGET;
}
}  // namespace fcb::kernels::internal

#elif HWY_ONCE
namespace fcb::kernels::internal {
namespace {

// Every manifest row of this build's CPU family whose code is one of this
// file's passes has that pass.
#define FCB_TARGET(id, name, arch, score, hwy, variant, ...)                                          \
  static_assert(!ArchBuilt(TargetArch::k##arch) || sizeof(variant) > 1 || (HWY_TARGETS & HWY_##hwy) != 0, \
                name " needs HWY_" #hwy " code");
#include "core/targets.def"
#undef FCB_TARGET

// The variant of row kId for this host's SVE vector length, trying each
// length of kLengths from kBits up; 0 when none is this host's.
template <TargetId kId, unsigned kLengths, unsigned kBits = 128>
int64_t FillSveVariant(int bits, KernelTable* table) {
  if constexpr (kBits > 2048) {
    return 0;
  } else {
    if constexpr ((kLengths & kBits) != 0)
      if (bits == static_cast<int>(kBits)) return FillVariant<kId, kBits>(table);
    return FillSveVariant<kId, kLengths, kBits * 2>(bits, table);
  }
}

// Row kId's code: none off its CPU family, its variant translation unit (the
// one for this host's SVE vector length), or this file's pass kHwy.
template <TargetId kId, TargetArch kArch, int64_t kHwy, bool kVariant, unsigned kSveLengths>
int64_t FillRow(KernelTable* table) {
  if constexpr (!ArchBuilt(kArch)) {
    return 0;
  } else if constexpr (kVariant) {
#if defined(FCB_HAVE_ARM_VARIANTS)
    if constexpr (kSveLengths == 0) return FillVariant<kId, 0>(table);
    else return FillSveVariant<kId, kSveLengths>(DetectHost().sve_bits, table);
#else
    return 0;
#endif
  } else {
    FillTableOf<kHwy>(table);
    return kHwy;
  }
}

}  // namespace

int64_t FillKernelTable(TargetId target, KernelTable* table) {
  switch (target) {
#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, ...) \
  case TargetId::id:                                              \
    return FillRow<TargetId::id, TargetArch::k##arch, HWY_##hwy, (sizeof(variant) > 1), (sve)>(table);
#include "core/targets.def"
#undef FCB_TARGET
  }
  return 0;
}

}  // namespace fcb::kernels::internal
#endif  // HWY_ONCE
