// The target manifest (core/targets.def) and what follows from it: the
// TargetId order, the names, the SVE lengths and the host requirements.
#include "core/target.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace fcb {
namespace {

TEST(TargetManifest, KnownTargetsAreTheRowsInTargetIdOrder) {
  const auto& ts = KnownTargets();
  ASSERT_EQ(static_cast<int>(ts.size()), kNumTargetIds);
  std::set<std::string> names;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(ts[i].id), i) << ts[i].name;
    EXPECT_TRUE(names.insert(ts[i].name).second) << "two targets named " << ts[i].name;
    EXPECT_EQ(TargetFromName(ts[i].name), ts[i].id);
    EXPECT_EQ(&TargetInfoOf(ts[i].id), &ts[i]);
  }
  EXPECT_EQ(ts.front().id, TargetId::kGeneric);
  EXPECT_EQ(ts.front().arch, TargetArch::kAny);
}

TEST(TargetManifest, SveLengthsArePowersOfTwoOnly) {
  EXPECT_TRUE(SveTargetHasLength(TargetId::kArmv9A, 128));
  EXPECT_TRUE(SveTargetHasLength(TargetId::kArmv82ASve, 512));
  EXPECT_FALSE(SveTargetHasLength(TargetId::kArmv82ASve, 128));
  // 384 = 128 | 256 as bits, but not a length either target has code for.
  EXPECT_FALSE(SveTargetHasLength(TargetId::kArmv9A, 384));
  EXPECT_FALSE(SveTargetHasLength(TargetId::kArmv9A, 0));
  EXPECT_FALSE(SveTargetHasLength(TargetId::kArmv8A, 128));
}

HostFeatures Everything() {
  HostFeatures f;
  f.sse42 = f.popcnt = f.ssse3 = true;
  f.avx = f.avx2 = f.fma = f.bmi1 = f.bmi2 = f.f16c = f.lzcnt = f.movbe = true;
  f.avx512f = f.avx512bw = f.avx512cd = f.avx512dq = f.avx512vl = true;
  f.avx512vnni = f.avxvnni = f.avx512vbmi = true;
  f.os_avx = f.os_avx512 = true;
  f.asimd = f.fphp = f.asimdhp = f.asimddp = f.sve = f.sve2 = true;
  f.sve_bits = 256;
  return f;
}

// Every row of this host's architecture names its requirements: a host with
// every feature runs it, a host with none is refused with a reason; a host
// whose SVE length has no code is refused in the manifest's words.
TEST(TargetManifest, EveryTargetNamesWhatItNeeds) {
  const HostFeatures all = Everything(), none;
  for (const TargetInfo& t : KnownTargets()) {
    const std::string why_all = WhyHostCannotRun(all, t.id);
    if (why_all.starts_with("it holds")) continue;  // another architecture's code
    EXPECT_EQ(why_all, "") << t.name;
    if (t.id != TargetId::kGeneric) EXPECT_TRUE(WhyHostCannotRun(none, t.id).starts_with("this host lacks ")) << t.name;
    if (t.sve_lengths != 0) {
      HostFeatures odd = all;
      odd.sve_bits = 1024;
      EXPECT_NE(WhyHostCannotRun(odd, t.id).find("an SVE vector length of"), std::string::npos) << t.name;
    }
  }
#if defined(__aarch64__)
  HostFeatures a64fx = Everything();
  a64fx.sve2 = false;
  a64fx.sve_bits = 128;
  EXPECT_EQ(WhyHostCannotRun(a64fx, TargetId::kArmv9A), "this host lacks SVE2");
  EXPECT_EQ(WhyHostCannotRun(a64fx, TargetId::kArmv82ASve),
            "this host lacks an SVE vector length of 256 or 512 bits (this thread has 128)");
  a64fx.sve_bits = 1024;
  EXPECT_EQ(WhyHostCannotRun(a64fx, TargetId::kArmv9A),
            "this host lacks SVE2, an SVE vector length of 128, 256 or 512 bits (this thread has 1024)");
#elif defined(__x86_64__)
  EXPECT_EQ(WhyHostCannotRun(none, TargetId::kX86_64_V4),
            "this host lacks AVX-512 F/BW/CD/DQ/VL, AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE, SSE4.2, SSSE3, POPCNT");
#endif
}

}  // namespace
}  // namespace fcb
