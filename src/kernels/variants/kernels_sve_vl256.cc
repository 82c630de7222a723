// One AArch64 compilation of the kernels (see kernels_hwy.cc and kernel_ns.h);
// CMakeLists.txt gives this file its -march (FCB_ARM_VARIANT_FLAGS_sve_vl256) and
// builds it only for AArch64.
#if defined(__aarch64__)
#define FCB_KERNEL_VARIANT _SVE_VL256
#define FCB_KERNEL_VARIANT_FILL FillSveVl256
#include "kernels/kernels_hwy.cc"
#endif
