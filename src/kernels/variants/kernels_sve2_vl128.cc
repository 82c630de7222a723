// One AArch64 compilation of the kernels (see kernels_hwy.cc and kernel_ns.h);
// CMakeLists.txt gives this file its -march (FCB_ARM_VARIANT_FLAGS_sve2_vl128) and
// builds it only for AArch64.
#if defined(__aarch64__)
#define FCB_KERNEL_VARIANT _SVE2_VL128
// SVE2 code, not the SVE-only targets the -march also makes attainable.
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE_256)
#define FCB_KERNEL_VARIANT_FILL FillSve2Vl128
#include "kernels/kernels_hwy.cc"
#endif
