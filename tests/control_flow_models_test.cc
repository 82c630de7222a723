// Models with If, Loop and Scan (scripts/export_graph_models.py: exported by
// PyTorch, or built with onnx.helper where PyTorch exports none), each
// compiled into one .fcb for every target; every target the host runs
// matches ONNX Runtime on each case's own inputs (CASE.feeds/NAME.npy) within
// 1e-4 relative L2 per output (CASE.ref/NAME.npy).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "reference_compare.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

struct Case {
  const char* name;
  const char* model;
};

class ControlFlowModel : public ::testing::TestWithParam<Case> {};

TEST_P(ControlFlowModel, EveryTargetMatchesOnnxRuntime) {
  const Case& c = GetParam();
  const std::string dir = TestDataDir();
  const std::string model = dir + "/" + c.model + ".onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  const auto feeds = testing::ReadNpyFolder(dir + "/" + c.name + ".feeds");
  const auto want = testing::ReadNpyFolder(dir + "/" + c.name + ".ref");
  ASSERT_FALSE(feeds.empty()) << "no inputs for " << c.name << ": run scripts/prepare_testdata.sh";
  ASSERT_FALSE(want.empty()) << "no reference for " << c.name << ": run scripts/prepare_testdata.sh";

  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  CompileSpec spec;
  spec.targets = {"all"};
  auto report = Compile(model, spec, out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  testing::ForEachRunnableTarget(
      out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    auto ex = Execution::Create(program, "main", 1);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    const MethodInfo& info = ex.value()->info();
    ASSERT_EQ(info.inputs.size(), feeds.size());
    for (const auto& [name, a] : feeds) {
      Status s = ex.value()->SetInput(name, a.data.data(), a.data.size());
      ASSERT_TRUE(s.ok()) << name << ": " << s.message();
    }
    Status s = ex.value()->Run();
    ASSERT_TRUE(s.ok()) << s.message();
    int compared = 0;
    ASSERT_NO_FATAL_FAILURE(testing::ExpectOutputsMatch(*ex.value(), want, 1e-4, std::string(c.name) + " on " + target, &compared));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Exported, ControlFlowModel,
    ::testing::Values(
        // If on a graph-input bool scalar: both branches computed, Where selects.
        Case{"if_runtime_true", "if_runtime"}, Case{"if_runtime_false", "if_runtime"},
        // Loop whose trip count PyTorch wrote as a constant: unrolled.
        Case{"loop_const", "loop_const"},
        // Scan with axes and directions: unrolled.
        Case{"scan_sum", "scan_sum"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace fcb
