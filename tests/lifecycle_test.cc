// Lifecycles that are safe on every failure path: a failure injected at every
// resource acquisition along compile and along load gives the right error,
// leaks nothing (LeakSanitizer in CI), leaves no file behind, never touches an
// existing output, and leaves process-wide state as it was.
#include <gtest/gtest.h>

#include <dirent.h>

#include <set>

#include "compile/session_testing.h"
#include "core/target.h"
#include "core/fault_testing.h"
#include "fcb/fcb.h"
#include "test_util.h"

namespace fcb {
namespace {

using fault::testing::Injector;
using testing::TempDir;

const std::string kDemo = FCB_SOURCE_DIR "/models/demo_cnn.onnx";

CompileSpec AllTargets() {
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["input"] = {1, 3, 64, 64};
  return spec;
}

std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

TEST(Lifecycle, CompileFailsCleanlyAtEveryAcquisition) {
  TempDir tmp;
  const std::string out = tmp.File("out.fcb");
  int64_t total = 0;
  {
    Injector count_only(0);
    auto r = Compile(kDemo, AllTargets(), out);
    ASSERT_TRUE(r.ok()) << r.status().message();
    total = count_only.count();
  }
  ASSERT_GT(total, 10) << "compile must pass through its acquisition points";
  std::printf("compile of the demo model for 4 targets: %lld acquisition points\n", static_cast<long long>(total));
  const std::vector<uint8_t> good = testing::ReadBytes(out);
  for (int64_t n = 1; n <= total; ++n) {
    SCOPED_TRACE("failing acquisition " + std::to_string(n) + " of " + std::to_string(total));
    const bool keep_existing = n % 2 == 1;  // alternate: an existing good file, or none
    if (!keep_existing) std::remove(out.c_str());
    Result<CompileReport> r = CompileReport{};
    std::string where;
    {
      Injector inj(n);
      r = Compile(kDemo, AllTargets(), out);
      ASSERT_TRUE(inj.fired());
      where = inj.fired_at();
    }
    // An I/O failure reports the OS's words; any other acquisition says it was injected.
    if (where == "io")
      ASSERT_REFUSED(r, StatusCode::kIoError, "Input/output error") << "an injected io failure must fail the compile";
    else
      EXPECT_REFUSED(r, StatusCode::kResourceExhausted, "(injected fault)") << "an injected " << where << " failure";
    if (keep_existing) {
      EXPECT_EQ(ListDir(tmp.path()), std::set<std::string>{"out.fcb"}) << "no temporary file may be left";
      EXPECT_TRUE(testing::ReadBytes(out) == good) << "an existing output must stay untouched";
    } else {
      EXPECT_TRUE(ListDir(tmp.path()).empty()) << "a failed compile leaves no file behind";
      testing::WriteBytes(out, good);
    }
    EXPECT_TRUE(compile::ActiveCompileSessions().empty()) << "process-wide registry restored";
  }
}

TEST(Lifecycle, LoadAndExecutionFailCleanlyAtEveryAcquisition) {
  TempDir tmp;
  const std::string path = tmp.File("m.fcb");
  ASSERT_TRUE(Compile(kDemo, AllTargets(), path).ok());
  auto load_and_run = [&]() -> Status {
    FCB_ASSIGN_OR_RETURN(auto program, Program::Load(path));
    FCB_ASSIGN_OR_RETURN(auto ex, Execution::Create(program, "main", 2));
    std::vector<float> in(3 * 64 * 64, 0.25f);
    FCB_RETURN_IF_ERROR(ex->SetInput("input", in.data(), in.size() * 4));
    return ex->Run();
  };
  int64_t total = 0;
  {
    Injector count_only(0);
    ASSERT_TRUE(load_and_run().ok());
    total = count_only.count();
  }
  ASSERT_GT(total, 5);
  std::printf("load + execution (2 threads) + run: %lld acquisition points\n", static_cast<long long>(total));
  std::set<std::string> kinds;
  for (int64_t n = 1; n <= total; ++n) {
    SCOPED_TRACE("failing acquisition " + std::to_string(n));
    Injector inj(n);
    Status s = load_and_run();
    ASSERT_TRUE(inj.fired());
    kinds.insert(inj.fired_at());
    const std::string kind = inj.fired_at();
    if (kind == "io")
      EXPECT_REFUSED(s, StatusCode::kIoError, "Input/output error");
    else if (kind == "arena")
      EXPECT_REFUSED(s, StatusCode::kResourceExhausted, "cannot allocate the");
    else
      EXPECT_REFUSED(s, StatusCode::kResourceExhausted, "(injected fault)") << kind;
  }
  for (const char* k : {"io", "alloc", "arena", "threads"}) EXPECT_TRUE(kinds.count(k)) << k << " was never exercised";
  EXPECT_TRUE(load_and_run().ok()) << "nothing sticky remains after failures";
}

// Two of four targets fail: one error names both, with method and node.
TEST(Lifecycle, FailuresOfSeveralTargetsAreReportedTogether) {
  TempDir tmp;
  Result<CompileReport> r = CompileReport{};
  {
    Injector inj(fault::Kind::kAlloc, {"generic", "x86-64-v3"});
    r = Compile(kDemo, AllTargets(), tmp.File("out.fcb"));
  }
  EXPECT_REFUSED(r, StatusCode::kResourceExhausted, "compilation failed in 2 places");
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("2 places"), std::string::npos) << msg;
  EXPECT_NE(msg.find("target 'generic', method 'main': node '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("target 'x86-64-v3', method 'main': node '"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("x86-64-v2'"), std::string::npos) << "targets that compiled are not reported: " << msg;
  EXPECT_TRUE(ListDir(tmp.path()).empty());
}

// A compile started while another is running (here: from the outer compile's
// progress callback) stacks in the registry and does not disturb the outer one,
// whether it succeeds or fails.
struct NestState {
  std::string dir;
  int inner_runs = 0;
  bool inner_failed_ok = false, inner_ok = false;
  std::vector<std::string> seen_during_inner;
};

void NestedProgress(void* user, const std::string& stage, const std::string&, const std::string& target) {
  auto* st = static_cast<NestState*>(user);
  if (stage != "lower" || target != "x86-64-v2" || st->inner_runs > 0) return;
  ++st->inner_runs;
  CompileSpec bad;  // invalid: fails validation
  st->inner_failed_ok = !Compile(kDemo, bad, st->dir + "/inner_bad.fcb").ok();
  CompileSpec good;
  good.targets = {"generic"};
  good.input_shapes["input"] = {1, 3, 64, 64};
  CompileHooks hooks;
  hooks.user = st;
  hooks.progress = [](void* u, const std::string&, const std::string&, const std::string&) {
    static_cast<NestState*>(u)->seen_during_inner = compile::ActiveCompileSessions();
  };
  st->inner_ok = Compile(kDemo, good, st->dir + "/inner.fcb", hooks).ok();
}

TEST(Lifecycle, NestedCompilesDoNotDisturbTheOuterOne) {
  TempDir tmp;
  NestState st;
  st.dir = tmp.path();
  CompileHooks hooks;
  hooks.progress = NestedProgress;
  hooks.user = &st;
  auto r = Compile(kDemo, AllTargets(), tmp.File("outer.fcb"), hooks);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(st.inner_runs, 1);
  EXPECT_TRUE(st.inner_failed_ok);
  EXPECT_TRUE(st.inner_ok);
  EXPECT_EQ(st.seen_during_inner, (std::vector<std::string>{tmp.File("outer.fcb"), tmp.File("inner.fcb")}));
  EXPECT_TRUE(compile::ActiveCompileSessions().empty());
  auto outer = Program::Load(tmp.File("outer.fcb"));
  ASSERT_TRUE(outer.ok()) << outer.status().message();
  EXPECT_EQ(outer.value()->targets_in_file().size(), KnownTargets().size());
  auto inner = Program::Load(tmp.File("inner.fcb"));
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(inner.value()->targets_in_file(), std::vector<std::string>{"generic"});
}

}  // namespace
}  // namespace fcb
