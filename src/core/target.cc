#include "core/target.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define FCB_X86 1
#else
#define FCB_X86 0
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#define FCB_AARCH64 1
#else
#define FCB_AARCH64 0
#endif

#include <algorithm>
#include <string>
#include <vector>

namespace fcb {

const std::vector<TargetInfo>& KnownTargets() {
  static const std::vector<TargetInfo> kTargets = {
#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, march, i8_hwy, i8_dot, needs, description) \
  {TargetId::id, name, description, score, TargetArch::k##arch, sve},
#include "core/targets.def"
#undef FCB_TARGET
  };
  return kTargets;
}

const TargetInfo& TargetInfoOf(TargetId id) {
  const auto& ts = KnownTargets();
  const size_t i = static_cast<size_t>(id);
  return ts[i < ts.size() ? i : 0];
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

const char* ArchName(TargetArch arch) {
  switch (arch) {
    case TargetArch::kAny: return "any";
    case TargetArch::kX86_64: return "x86-64";
    case TargetArch::kAArch64: return "aarch64";
  }
  return "unknown";
}

bool SveTargetHasLength(TargetId target, int bits) {
  // Lengths are powers of two here, so each is one bit of the mask (an SVE
  // length may be any multiple of 128, e.g. 384, which no target has code for).
  return bits > 0 && (bits & (bits - 1)) == 0 && (TargetInfoOf(target).sve_lengths & static_cast<unsigned>(bits)) != 0;
}

namespace {
// "128, 256 or 512": the lengths `target` has SVE code for, in words.
std::string SveLengthsInWords(TargetId target) {
  std::vector<std::string> lengths;
  for (unsigned bits = 128; bits <= 2048; bits *= 2)
    if (TargetInfoOf(target).sve_lengths & bits) lengths.push_back(std::to_string(bits));
  std::string out;
  for (size_t i = 0; i < lengths.size(); ++i)
    out += (i == 0 ? "" : i + 1 == lengths.size() ? " or " : ", ") + lengths[i];
  return out;
}
}  // namespace

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
      f.avx512vnni = c & (1u << 11);
      f.avx512vbmi = c & (1u << 1);
      const unsigned max_sub = a;
      if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f.avxvnni = a & (1u << 4);
      }
    }
    if (__get_cpuid(0x80000001, &a, &b, &c, &d)) f.lzcnt = c & (1u << 5);
#endif
#if FCB_AARCH64
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f.asimd = hw & HWCAP_ASIMD;
    f.fphp = hw & HWCAP_FPHP;
    f.asimdhp = hw & HWCAP_ASIMDHP;
    f.asimddp = hw & HWCAP_ASIMDDP;
    f.sve = hw & HWCAP_SVE;
    f.sve2 = hw2 & HWCAP2_SVE2;
    if (f.sve) {
      // The length the OS has set for this thread (threads it starts inherit it).
      const int vl = prctl(PR_SVE_GET_VL);
      f.sve_bits = vl < 0 ? 0 : (vl & PR_SVE_VL_LEN_MASK) * 8;
    }
#endif
    return f;
  }();
  return kHost;
}

std::string WhyHostCannotRun(const HostFeatures& f, TargetId target) {
  std::string missing;
  auto need = [&](bool have, const char* what) {
    if (!have) missing += (missing.empty() ? "" : ", ") + std::string(what);
  };
  const TargetArch arch = TargetInfoOf(target).arch;
#if FCB_X86
  constexpr TargetArch kHostArch = TargetArch::kX86_64;
#elif FCB_AARCH64
  constexpr TargetArch kHostArch = TargetArch::kAArch64;
#else
  constexpr TargetArch kHostArch = TargetArch::kAny;
#endif
  if (arch != TargetArch::kAny && arch != kHostArch)
    return std::string("it holds ") + ArchName(arch) + " code and this host is not " + ArchName(arch);
  // The manifest's needs column, in its order.
#define NEED_NOTHING
#define NEED(what) FCB_NEED_##what;
#define FCB_NEED_SSE42 need(f.sse42 && f.popcnt && f.ssse3, "SSE4.2, SSSE3, POPCNT")
#define FCB_NEED_AVX2 \
  need(f.avx && f.avx2 && f.fma && f.bmi1 && f.bmi2 && f.f16c && f.lzcnt && f.movbe, "AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE")
#define FCB_NEED_OS_AVX need(!f.avx || f.os_avx, "AVX state enabled by the OS")
#define FCB_NEED_AVX512 need(f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl, "AVX-512 F/BW/CD/DQ/VL")
#define FCB_NEED_OS_AVX512 need(!f.avx512f || f.os_avx512, "AVX-512 state enabled by the OS")
#define FCB_NEED_ASIMD need(f.asimd, "Advanced SIMD")
#define FCB_NEED_FP16 need(f.fphp && f.asimdhp, "FP16 arithmetic")
#define FCB_NEED_DOTPROD need(f.asimddp, "dot product")
#define FCB_NEED_SVE need(f.sve, "SVE")
#define FCB_NEED_SVE2 need(f.sve2, "SVE2")
#define FCB_NEED_SVE_LENGTH                                                                                           \
  if (f.sve && !SveTargetHasLength(target, f.sve_bits))                                                              \
  missing += (missing.empty() ? "" : ", ") + std::string("an SVE vector length of ") + SveLengthsInWords(target) + \
             " bits (this thread has " + std::to_string(f.sve_bits) + ")"
  switch (target) {
#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, march, i8_hwy, i8_dot, needs, description) \
  case TargetId::id: {                                                                                   \
    needs                                                                                                \
  } break;
#include "core/targets.def"
#undef FCB_TARGET
  }
#undef NEED_NOTHING
#undef NEED
  return missing.empty() ? "" : "this host lacks " + missing;
}

bool HostCanRun(const HostFeatures& f, TargetId target) { return WhyHostCannotRun(f, target).empty(); }

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
