#include "core/target.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define FCB_X86 1
#else
#define FCB_X86 0
#endif

#include <algorithm>

namespace fcb {

const std::vector<TargetInfo>& KnownTargets() {
  static const std::vector<TargetInfo> kTargets = {
      {TargetId::kGeneric, "generic", "portable scalar code for any CPU", 0},
      {TargetId::kX86_64_V2, "x86-64-v2", "x86-64 with SSE4.2, SSSE3, POPCNT (128-bit vectors)", 20},
      {TargetId::kX86_64_V3, "x86-64-v3", "x86-64 with AVX2, FMA, BMI2, F16C (256-bit vectors)", 30},
      {TargetId::kX86_64_V4, "x86-64-v4", "x86-64 with AVX-512 F/BW/CD/DQ/VL (512-bit vectors)", 40},
  };
  return kTargets;
}

std::optional<TargetId> TargetFromName(std::string_view name) {
  for (const auto& t : KnownTargets())
    if (name == t.name) return t.id;
  return std::nullopt;
}

const char* TargetName(TargetId id) {
  for (const auto& t : KnownTargets())
    if (t.id == id) return t.name;
  return "unknown";
}

std::string KnownTargetNames() {
  std::string out;
  for (const auto& t : KnownTargets()) {
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

#if FCB_X86
namespace {
uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
}  // namespace
#endif

const HostFeatures& DetectHost() {
  static const HostFeatures kHost = [] {
    HostFeatures f;
#if FCB_X86
    unsigned a, b, c, d;
    unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
      f.ssse3 = c & (1u << 9);
      f.fma = c & (1u << 12);
      f.sse42 = c & (1u << 20);
      f.movbe = c & (1u << 22);
      f.popcnt = c & (1u << 23);
      f.avx = c & (1u << 28);
      f.f16c = c & (1u << 29);
      const bool osxsave = c & (1u << 27);
      if (osxsave) {
        const uint64_t xcr0 = ReadXcr0();
        f.os_avx = (xcr0 & 0x6) == 0x6;
        f.os_avx512 = f.os_avx && (xcr0 & 0xE0) == 0xE0;
      }
    }
    if (max_leaf >= 7) {
      __cpuid_count(7, 0, a, b, c, d);
      f.bmi1 = b & (1u << 3);
      f.avx2 = b & (1u << 5);
      f.bmi2 = b & (1u << 8);
      f.avx512f = b & (1u << 16);
      f.avx512dq = b & (1u << 17);
      f.avx512cd = b & (1u << 28);
      f.avx512bw = b & (1u << 30);
      f.avx512vl = b & (1u << 31);
    }
    if (__get_cpuid(0x80000001, &a, &b, &c, &d)) f.lzcnt = c & (1u << 5);
#endif
    return f;
  }();
  return kHost;
}

bool HostCanRun(const HostFeatures& f, TargetId target) {
  const bool v2 = f.sse42 && f.popcnt && f.ssse3;
  const bool v3 = v2 && f.avx && f.avx2 && f.fma && f.bmi1 && f.bmi2 && f.f16c && f.lzcnt &&
                  f.movbe && f.os_avx;
  const bool v4 = v3 && f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl &&
                  f.os_avx512;
  switch (target) {
    case TargetId::kGeneric: return true;
#if FCB_X86
    case TargetId::kX86_64_V2: return v2;
    case TargetId::kX86_64_V3: return v3;
    case TargetId::kX86_64_V4: return v4;
#else
    default: (void)v4; return false;
#endif
  }
  return false;
}

bool HostCanRun(TargetId target) { return HostCanRun(DetectHost(), target); }

std::vector<TargetId> RunnableTargets() {
  std::vector<TargetInfo> ts = KnownTargets();
  std::sort(ts.begin(), ts.end(), [](const TargetInfo& x, const TargetInfo& y) { return x.score > y.score; });
  std::vector<TargetId> out;
  for (const auto& t : ts)
    if (HostCanRun(t.id)) out.push_back(t.id);
  return out;
}

}  // namespace fcb
