// One KernelBundle per TargetId, built once and never changed afterwards.

#include <hwy/targets.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/bundle.h"
#include "kernels/kernel_table_internal.h"

namespace fcb::kernels {
namespace {

// The first kernel of `t` that is null (its member name), or nullptr.
const char* NullKernel(const KernelTable& t) {
#define FCB_CHECK_KERNEL(member, fn) \
  if (t.member == nullptr) return #member;
  FCB_F32_KERNELS(FCB_CHECK_KERNEL)
  return nullptr;
}
const char* NullKernel(const QKernelTable& t) {
  FCB_I8_KERNELS(FCB_CHECK_KERNEL)
#undef FCB_CHECK_KERNEL
  return nullptr;
}

[[noreturn]] void BuildDefect(TargetId target, const char* table, const std::string& problem) {
  std::fprintf(stderr, "fcb: %s for target %s: %s\n", table, TargetName(target), problem.c_str());
  std::abort();
}

// A table whose functions are missing, or that was filled by another Highway
// target than the one its TargetId maps to, would run the wrong code silently;
// that is a build defect, so it stops the process with a message. A target
// this build has no code for (an x86 level on another CPU family, an SVE
// target on a host whose vector length has no compiled variant) gets a table
// named "unavailable" with null functions; HostCanRun rules it out anyway.
KernelBundle Build(TargetId target) {
  KernelBundle b{};
  const int64_t hwy_target = internal::FillKernelTable(target, &b.f32);
  if (hwy_target == 0) {
    b.f32.isa = "unavailable";
  } else if (b.f32.isa == nullptr || std::strcmp(b.f32.isa, hwy::TargetName(hwy_target)) != 0) {
    BuildDefect(target, "kernel table", "table filled by the wrong Highway target");
  } else if (const char* null = NullKernel(b.f32)) {
    BuildDefect(target, "kernel table", std::string("table has a null kernel (") + null + ")");
  }
  if (hwy_target != 0) b.f32.gemm_nbits_i8 = internal::NBitsI8Variants(target, b.f32.gemm_nbits_i8).front().fn;
  const std::vector<QKernelTable> i8 = internal::QKernelVariants(target);
  if (i8.empty()) {
    b.i8.isa = "unavailable";
  } else if (const char* null = NullKernel(i8.front())) {
    BuildDefect(target, "int8 kernel table", std::string("has a null kernel (") + null + ")");
  } else {
    b.i8 = i8.front();
  }
  return b;
}

}  // namespace

const KernelBundle& GetKernelBundle(TargetId target) {
  static const std::vector<KernelBundle> kBundles = [] {
    std::vector<KernelBundle> v;
    for (const TargetInfo& t : KnownTargets()) v.push_back(Build(t.id));
    return v;
  }();
  const size_t i = static_cast<size_t>(target);
  return kBundles[i < kBundles.size() ? i : 0];
}

const KernelTable& GetKernelTable(TargetId target) { return GetKernelBundle(target).f32; }

}  // namespace fcb::kernels
