// The one place tests enumerate targets.
//
// PerTarget is a gtest value-parameterised fixture over every target the
// library knows; a test written with TEST_P runs once per target and a target
// this host cannot run shows up as a skipped test that says why (never as a
// pass). The cases come from the library's own target list:
//   - layer tests (linked with the layers' objects): LayerTargets(), from
//     fcb::KnownTargets() and HostCanRun() in core/target.h;
//   - end-to-end tests (public API only): ApiTargets(), from fcb::ListTargets().
// Usage:
//   class ConvOnTarget : public fcb::testing::PerTarget {};
//   TEST_P(ConvOnTarget, MatchesTheReference) { ... target_name() ... }
//   FCB_INSTANTIATE_PER_TARGET(ConvOnTarget, fcb::testing::LayerTargets());
//
// Tests that check many small things on every target inside one test body (the
// op registry's Check(), a model compiled once and loaded forced to each
// target) use RunnableTargetNames() / ForEachRunnableTarget() below, which
// read the same lists.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "core/target.h"
#include "fcb/fcb.h"
#include "fcb/inspect.h"

namespace fcb::testing {

// One target as a test parameter: its name, and whether this host runs it (and
// if not, why).
struct TargetCase {
  std::string name;
  bool runnable = false;
  std::string why_not;
};

inline void PrintTo(const TargetCase& c, std::ostream* os) { *os << c.name; }

// Every target of core/target.h, in its fixed order (layer tests).
inline std::vector<TargetCase> LayerTargets() {
  std::vector<TargetCase> out;
  for (const TargetInfo& t : KnownTargets())
    out.push_back({t.name, HostCanRun(t.id), WhyHostCannotRun(DetectHost(), t.id)});
  return out;
}

// Every target of the public ListTargets(), in its fixed order (end-to-end tests).
inline std::vector<TargetCase> ApiTargets() {
  std::vector<TargetCase> out;
  for (const TargetDesc& t : ListTargets()) out.push_back({t.name, t.host_can_run, t.why_not});
  return out;
}

// The fixture: skips (visibly, with the reason) a target the host cannot run.
class PerTarget : public ::testing::TestWithParam<TargetCase> {
 protected:
  void SetUp() override {
    if (!GetParam().runnable)
      GTEST_SKIP() << "this host cannot run target " << GetParam().name << ": " << GetParam().why_not;
  }
  const std::string& target_name() const { return GetParam().name; }
  // The target's id (layer tests only).
  TargetId target_id() const {
    const auto id = TargetFromName(GetParam().name);
    EXPECT_TRUE(id.has_value()) << GetParam().name;
    return id.value_or(TargetId::kGeneric);
  }
};

// gtest test names allow only letters, digits and '_': "x86-64-v2" -> "x86_64_v2".
inline std::string TargetTestName(const ::testing::TestParamInfo<TargetCase>& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

#define FCB_INSTANTIATE_PER_TARGET(fixture, cases) \
  INSTANTIATE_TEST_SUITE_P(Targets, fixture, ::testing::ValuesIn(cases), ::fcb::testing::TargetTestName)

// The targets of `cases` this host runs, in list order.
inline std::vector<std::string> RunnableTargetNames(const std::vector<TargetCase>& cases) {
  std::vector<std::string> out;
  for (const TargetCase& c : cases)
    if (c.runnable) out.push_back(c.name);
  return out;
}

// The ids of the targets of LayerTargets() this host runs, in list order.
inline std::vector<TargetId> RunnableTargetIds() {
  std::vector<TargetId> out;
  for (const std::string& name : RunnableTargetNames(LayerTargets())) out.push_back(*TargetFromName(name));
  return out;
}

// Calls fn(target name, program) for every target of ApiTargets() this host
// runs, with `file` loaded forced to it, under a SCOPED_TRACE naming the
// target; a load that fails, or that answers another target, is a test failure.
template <typename Fn>
void ForEachRunnableTarget(const std::string& file, Fn&& fn) {
  for (const std::string& name : RunnableTargetNames(ApiTargets())) {
    SCOPED_TRACE(name);
    LoadOptions lo;
    lo.target = name;
    auto program = Program::Load(file, lo);
    EXPECT_TRUE(program.ok()) << program.status().message();
    if (!program.ok()) continue;
    EXPECT_EQ(program.value()->target(), name);
    fn(name, program.value());
  }
}

}  // namespace fcb::testing
