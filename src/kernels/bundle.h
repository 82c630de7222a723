// A target's kernels, all of them: the bundle the runtime chooses once, when a
// program is loaded (RunContext::k), so that no operator looks a kernel up
// while it runs.
#pragma once

#include "core/target.h"
#include "kernels/int8.h"
#include "kernels/kernels.h"

namespace fcb::kernels {

struct KernelBundle {
  KernelTable f32;   // float kernels (kernels.h)
  QKernelTable i8;   // int8 kernels (int8.h), the dot-product code this host runs best
};

// `target`'s bundle, built once per process for every target of the manifest
// (core/targets.def). A target this build or host has no code for gets tables
// whose isa is "unavailable" and whose kernels are null; HostCanRun rules it
// out anyway.
const KernelBundle& GetKernelBundle(TargetId target);

}  // namespace fcb::kernels
