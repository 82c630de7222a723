// One KernelTable per TargetId, built once and never changed afterwards.

#include <hwy/targets.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/kernel_table_internal.h"
#include "kernels/kernels.h"

namespace fcb::kernels {
namespace {

constexpr int kNumTargets = kNumTargetIds;

// A table whose functions are missing, or that was filled by another Highway
// target than the one its TargetId maps to, would run the wrong code silently;
// that is a build defect, so it stops the process with a message. A target
// this build has no code for (an x86 level on another CPU family, an SVE
// target on a host whose vector length has no compiled variant) gets a table
// named "unavailable" with null functions; HostCanRun rules it out anyway.
KernelTable BuildChecked(TargetId target) {
  KernelTable t{};
  const int64_t hwy_target = internal::FillKernelTable(target, &t);
  const char* problem = nullptr;
  if (hwy_target == 0) {
    t.isa = "unavailable";
    return t;
  }
  if (t.isa == nullptr || std::strcmp(t.isa, hwy::TargetName(hwy_target)) != 0) {
    problem = "table filled by the wrong Highway target";
  } else if (!t.conv || !t.depthwise || !t.grouped_small || !t.winograd || !t.gemm || !t.matmul || !t.maxpool || !t.avgpool ||
             !t.global_avgpool || !t.unary || !t.binary || !t.softmax || !t.layernorm) {
    problem = "table has a null kernel";
  }
  if (problem != nullptr) {
    std::fprintf(stderr, "fcb: kernel table for target %s: %s\n", TargetName(target), problem);
    std::abort();
  }
  return t;
}

}  // namespace

const KernelTable& GetKernelTable(TargetId target) {
  static const std::array<KernelTable, kNumTargets> kTables = [] {
    std::array<KernelTable, kNumTargets> t{};
    for (int i = 0; i < kNumTargets; ++i) t[i] = BuildChecked(static_cast<TargetId>(i));
    return t;
  }();
  const int i = static_cast<int>(target);
  return kTables[i < kNumTargets ? i : 0];
}

}  // namespace fcb::kernels
