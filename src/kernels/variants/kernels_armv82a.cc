// One AArch64 compilation of the kernels (see kernels_hwy.cc and kernel_ns.h);
// CMakeLists.txt gives this file its -march (FCB_ARM_VARIANT_FLAGS_armv82a) and
// builds it only for AArch64.
#if defined(__aarch64__)
#define FCB_KERNEL_VARIANT _ARMV82A
#define FCB_KERNEL_VARIANT_FILL FillArmv82A
#include "kernels/kernels_hwy.cc"
#endif
