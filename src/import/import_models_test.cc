// Imports the real exported models (scripts/prepare_testdata.sh) and checks
// that import makes them fully static: every value has a shape, and no shape
// arithmetic (Shape, and int64 Gather/Concat/... chains) or Constant node survives.
#include <gtest/gtest.h>

#include <set>

#include "import/onnx_import.h"
#include "test_util.h"

namespace fcb::import {
namespace {

std::string ModelPath(const std::string& name) { return fcb::testing::TestDataDir() + "/" + name; }

class RealModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModel, ImportsFullyStatic) {
  const std::string path = ModelPath(GetParam());
  ASSERT_TRUE(fcb::testing::FileExists(path))
      << path << " is missing: run scripts/prepare_testdata.sh (test data is required, not optional)";
  auto g = ImportOnnx(path, {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->Validate().ok()) << g->Validate().ToString();
  ASSERT_FALSE(g->nodes.empty());
  ASSERT_EQ(g->inputs.size(), 1u);
  EXPECT_EQ(g->values[g->inputs[0]].shape, (ir::Shape{1, 3, 224, 224}));
  for (const auto& v : g->values) {
    EXPECT_TRUE(v.has_shape) << "value '" << v.name << "' has no shape";
    EXPECT_NE(v.dtype, ir::DType::kUndefined) << "value '" << v.name << "'";
  }
  // Shape arithmetic is int64 (Shape -> Gather -> Unsqueeze -> Concat -> Reshape);
  // a data Concat (SqueezeNet's fire modules) is float and legitimately stays.
  const std::set<std::string> shape_ops = {"Shape", "Size", "Constant", "ConstantOfShape"};
  for (const auto& n : g->nodes) {
    EXPECT_EQ(shape_ops.count(n.op_type), 0u) << n.Describe() << " survived import";
    for (int o : n.outputs)
      EXPECT_NE(g->values[o].dtype, ir::DType::kI64) << n.Describe() << " computes int64 (shape "
                                                     << "arithmetic) at run time";
    bool all_const = true;
    for (int i : n.inputs) all_const = all_const && (i < 0 || g->values[i].is_constant());
    EXPECT_FALSE(all_const) << n.Describe() << " has only constant inputs but was not folded";
  }
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->values[g->outputs[0]].shape, (ir::Shape{1, 1000}));
}

INSTANTIATE_TEST_SUITE_P(Models, RealModel,
                         ::testing::Values("resnet18.onnx", "squeezenet1_1.onnx", "mobilenet_v2.onnx",
                                           "efficientnet_b0.onnx"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find('.'));
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// The dynamic-batch export needs its batch dim fixed, and says how.
TEST(RealModel, DynamicBatchNeedsInputShape) {
  const std::string path = ModelPath("resnet18_dynamic.onnx");
  ASSERT_TRUE(fcb::testing::FileExists(path)) << path << " is missing: run scripts/prepare_testdata.sh";
  auto bad = ImportOnnx(path, {});
  ASSERT_REFUSED(bad, StatusCode::kInvalidArgument, "input 'input' has symbolic dim 0 ('batch'); fix it in input_shapes,");
  EXPECT_NE(bad.status().message().find("input_shapes['"), std::string::npos) << bad.status().ToString();
  ImportOptions opts;
  // The input's name is in the error; the model's first input is what torch names "input".
  const std::string msg = bad.status().message();
  const size_t q = msg.find("input '") + 7;
  const std::string name = msg.substr(q, msg.find('\'', q) - q);
  opts.input_shapes[name] = {2, 3, 224, 224};
  auto g = ImportOnnx(path, opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->values[g->outputs[0]].shape, (ir::Shape{2, 1000}));
  for (const auto& n : g->nodes) EXPECT_NE(n.op_type, "Shape") << n.Describe();
}

}  // namespace
}  // namespace fcb::import
