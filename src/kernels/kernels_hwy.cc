// The kernels, compiled once per Highway target. foreach_target.h re-includes
// this file for every target in HWY_TARGETS; each pass defines the kernels in
// a namespace unique to that target (fcb::kernels::N_AVX3, ...), which lets
// the code for all targets co-exist in one translation unit.
//
// Which targets: generic -> HWY_SCALAR (GCC 12.2 sets HWY_BROKEN_EMU128, so
// the portable fallback is HWY_SCALAR), x86-64-v2 -> HWY_SSE4, x86-64-v3 ->
// HWY_AVX2, x86-64-v4 -> HWY_AVX3, armv8-a -> HWY_NEON. SSSE3 and AVX3_DL are
// not used, so they are not compiled. HWY_COMPILE_ALL_ATTAINABLE keeps
// HWY_SCALAR (and every lower target) even when the build's baseline (-march)
// is above it.
//
// The other AArch64 targets are compiled from this same file in translation
// units of their own (src/kernels/variants/, each with FCB_KERNEL_VARIANT and
// the -march it needs): armv8.2-a is HWY_NEON again with FP16 and dot
// product enabled, and the SVE targets are HWY_SVE / HWY_SVE2 compiled for a
// fixed vector length each (see common-inl.h), so Highway's SVE targets are
// disabled in this one.
//
// Dispatch is not Highway's: HWY_DYNAMIC_DISPATCH would consult process-wide
// state. FillKernelTable calls each target's FillTable by its namespace, once
// per TargetId, so Highway is used header-only (no libhwy.so).

// Must precede every Highway header (detect_targets.h reads them once).
#ifndef FCB_KERNEL_VARIANT_FILL
#include "kernels/hwy_targets.h"
#else
// A variant translation unit: only the target its -march makes the baseline.
#define HWY_COMPILE_ONLY_STATIC 1
#ifndef HWY_IS_DEBUG_BUILD
#define HWY_IS_DEBUG_BUILD 0  // as in hwy_targets.h: no libhwy for hwy::Abort
#endif
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "kernels/common-inl.h"
#include "kernels/conv_gemm-inl.h"
#include "kernels/eltwise-inl.h"
#include "kernels/spatial-inl.h"
#include "kernels/tile-inl.h"
#include "kernels/winograd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

// This target's entry points; the only function exported per target.
void FillTable(KernelTable* t) {
  t->isa = hwy::TargetName(HWY_TARGET);
  t->conv = &Conv;
  t->depthwise = &Depthwise;
  t->grouped_small = &GroupedSmall;
  t->winograd = &Winograd;
  t->gemm = &Gemm;
  t->matmul = &MatMul;
  t->maxpool = &MaxPool;
  t->avgpool = &AvgPool;
  t->global_avgpool = &GlobalAvgPool;
  t->unary = &Unary;
  t->binary = &Binary;
  t->softmax = &Softmax;
  t->layernorm = &LayerNorm;
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#if defined(FCB_KERNEL_VARIANT_FILL) && HWY_ONCE
#include "kernels/kernel_table_internal.h"

namespace fcb::kernels::internal {
int64_t FCB_KERNEL_VARIANT_FILL(KernelTable* table) {
  FCB_KNS::FillTable(table);
  return HWY_STATIC_TARGET;
}
}  // namespace fcb::kernels::internal

#elif HWY_ONCE
#include "kernels/kernel_table_internal.h"

namespace fcb::kernels {
namespace internal {
namespace {

// Each target's FillTable is named directly rather than through HWY_EXPORT:
// that table's first entry is Highway's dispatch trampoline, which references
// libhwy.so, and loading libhwy.so costs every process ~3 ms of static
// initialisation (measured: an empty program linked with -lhwy takes 4.3 ms
// of CPU instead of 0.7 ms), a third of a cold `fcb run` on a small model.
static_assert((HWY_TARGETS & HWY_SCALAR) != 0, "the generic target needs HWY_SCALAR code");
#if HWY_ARCH_X86
static_assert((HWY_TARGETS & (HWY_SSE4 | HWY_AVX2 | HWY_AVX3)) == (HWY_SSE4 | HWY_AVX2 | HWY_AVX3),
              "x86-64-v2/v3/v4 need SSE4/AVX2/AVX3 code");
#endif
#if HWY_ARCH_ARM_A64
static_assert((HWY_TARGETS & HWY_NEON) != 0, "armv8-a needs NEON code");
#endif

using FillFn = void (*)(KernelTable*);

struct TargetCode {
  int64_t hwy_target;
  FillFn fill;
};

TargetCode CodeFor(TargetId target) {
  switch (target) {
    case TargetId::kGeneric:
      return {HWY_SCALAR, &N_SCALAR::FillTable};
#if HWY_ARCH_X86
    case TargetId::kX86_64_V2:
      return {HWY_SSE4, &N_SSE4::FillTable};
    case TargetId::kX86_64_V3:
      return {HWY_AVX2, &N_AVX2::FillTable};
    case TargetId::kX86_64_V4:
      return {HWY_AVX3, &N_AVX3::FillTable};
#endif
#if HWY_ARCH_ARM_A64
    case TargetId::kArmv8A:
      return {HWY_NEON, &N_NEON::FillTable};
#endif
    default:
      return {0, nullptr};
  }
}

}  // namespace

int64_t FillKernelTable(TargetId target, KernelTable* table) {
#if HWY_ARCH_ARM_A64 && defined(FCB_HAVE_ARM_VARIANTS)
  switch (target) {
    case TargetId::kArmv82A: return FillArmv82A(table);
    case TargetId::kArmv82ASve:
      switch (DetectHost().sve_bits) {
        case 256: return FillSveVl256(table);
        case 512: return FillSveVl512(table);
        default: return 0;
      }
    case TargetId::kArmv9A:
      switch (DetectHost().sve_bits) {
        case 128: return FillSve2Vl128(table);
        case 256: return FillSve2Vl256(table);
        case 512: return FillSve2Vl512(table);
        default: return 0;
      }
    default: break;
  }
#endif
  const TargetCode code = CodeFor(target);
  if (code.fill == nullptr) return 0;
  code.fill(table);
  return code.hwy_target;
}

}  // namespace internal
}  // namespace fcb::kernels
#endif  // HWY_ONCE
