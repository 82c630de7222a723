// Private link between kernels_hwy.cc (which compiles the kernels once per
// Highway target) and kernel_table.cc (which hands out one table per TargetId).
#pragma once

#include "core/target.h"
#include "kernels/kernels.h"

namespace fcb::kernels::internal {

// Fills `table` with the functions compiled for `target`'s Highway target and
// returns that Highway target's bit (HWY_SCALAR, HWY_SSE4, ...), or 0 when
// this build has no code for `target` (e.g. an x86 level on another CPU family).
int64_t FillKernelTable(TargetId target, KernelTable* table);

// The AArch64 kernel compilations beyond kernels_hwy.cc's own (one translation
// unit each under src/kernels/variants/, built when FCB_HAVE_ARM_VARIANTS).
// Each fills `table` and returns its Highway target bit.
int64_t FillArmv82A(KernelTable* table);    // NEON with FP16 + dot product
int64_t FillSveVl256(KernelTable* table);   // SVE, 256-bit vectors
int64_t FillSveVl512(KernelTable* table);   // SVE, 512-bit vectors
int64_t FillSve2Vl128(KernelTable* table);  // SVE2, 128-bit vectors
int64_t FillSve2Vl256(KernelTable* table);  // SVE2, 256-bit vectors
int64_t FillSve2Vl512(KernelTable* table);  // SVE2, 512-bit vectors

}  // namespace fcb::kernels::internal
