// The namespace of one compilation of the kernels.
//
// kernels_hwy.cc compiles the kernels once per Highway target in one
// translation unit (namespaces fcb::kernels::N_SSE4, N_AVX3, ...). Some targets
// need more than one compilation of one Highway target with different compiler
// flags: the armv8.2-a NEON code (FP16 and dot product enabled) beside the
// armv8-a NEON code, and SVE code for each fixed vector length. Those are
// separate translation units (src/kernels/variants/) that define
// FCB_KERNEL_VARIANT to a suffix, so their namespace is, e.g.,
// fcb::kernels::N_SVE_VL512 and nothing they define collides with another
// compilation's.
#pragma once

#ifndef FCB_KERNEL_VARIANT
#define FCB_KERNEL_VARIANT
#endif
#define FCB_KNS_CAT2(a, b) a##b
#define FCB_KNS_CAT(a, b) FCB_KNS_CAT2(a, b)
// Use as `namespace fcb::kernels::FCB_KNS {`; it expands to the Highway
// target's namespace (set per foreach_target pass) plus the variant suffix.
#define FCB_KNS FCB_KNS_CAT(HWY_NAMESPACE, FCB_KERNEL_VARIANT)
