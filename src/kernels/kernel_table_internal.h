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

}  // namespace fcb::kernels::internal
