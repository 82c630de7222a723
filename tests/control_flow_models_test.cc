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
    ASSERT_EQ(info.outputs.size(), want.size());
    for (size_t i = 0; i < info.outputs.size(); ++i) {
      const auto& spec_i = info.outputs[i];
      auto w = want.find(spec_i.name);
      ASSERT_NE(w, want.end()) << "output " << spec_i.name << " has no reference";
      ASSERT_EQ(spec_i.shape, w->second.shape) << spec_i.name;
      ASSERT_EQ(spec_i.dtype, DType::kF32) << spec_i.name;
      const float* p = static_cast<const float*>(ex.value()->output_data(i));
      std::vector<float> got(p, p + spec_i.bytes() / 4), ref(w->second.data.size() / 4);
      std::memcpy(ref.data(), w->second.data.data(), ref.size() * 4);
      auto d = testing::Compare(got, ref);
      EXPECT_LE(d.rel_l2, 1e-4) << c.name << " output " << spec_i.name << " on " << target;
    }
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
