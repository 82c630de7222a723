// The Highway targets the kernel translation units compile (kernels_hwy.cc,
// int8_hwy.cc): SSSE3 and AVX3_DL are not used, and the SVE family is
// compiled in translation units of its own (src/kernels/variants/). Include
// before any Highway header; HWY_COMPILE_ALL_ATTAINABLE keeps HWY_SCALAR and
// every lower target even when the build's baseline (-march) is above them.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
// The generic target is HWY_SCALAR code under every compiler. GCC before 12.3
// (Debian 12's 12.2) gets it anyway (Highway marks EMU128 broken there); clang
// would pick EMU128 instead, so the same is asked for explicitly: one generic
// target, whichever compiler built it (the clang build is the fuzzing one).
#ifndef HWY_BROKEN_EMU128
#define HWY_BROKEN_EMU128 1
#endif
// Highway is used header-only (no libhwy): its debug assertions, which it
// turns on for sanitizer builds, call hwy::Abort from the library. The kernels
// are checked by their own tests instead.
#ifndef HWY_IS_DEBUG_BUILD
#define HWY_IS_DEBUG_BUILD 0
#endif
