// Models of opsets 1 to 6: read as opset 7 when every node's operator version
// is the same at both opsets, refused node by node (all in one error) when not.
#include <gtest/gtest.h>

#include <cmath>

#include "import/onnx_builder_test.h"
#include "import/onnx_import.h"
#include "passes/test_interpreter.h"
#include "test_util.h"

namespace fcb::import {
namespace {

using namespace fcb::testing;  // NOLINT

Result<ir::Graph> Import(const onnx::ModelProto& m) {
  return ImportOnnxBytes(m.SerializeAsString(), "", {});
}

int ValueId(const ir::Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<float> Ramp(int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = 0.37f * static_cast<float>(i) - 2.1f;
  return x;
}

// Elu-6 and Selu-6 are the versions opset 7 still uses: the model imports and
// computes the opset-7 results.
TEST(OldOpset, UnchangedOperatorsOfOpset6Import) {
  auto m = MakeModel(6, 3);
  AddInput(m, "x", {2, 3});
  AttrFloat(AddNode(m, "Elu", {"x"}, {"e"}), "alpha", 0.5f);
  AddNode(m, "Selu", {"x"}, {"s"});
  AddOutput(m, "e");
  AddOutput(m, "s");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->opset, 7);  // canonicalized as opset 7
  const std::vector<float> x = Ramp(6);
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({2, 3}, x)}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  const auto e = Floats(vals.value()[ValueId(*g, "e")]);
  const auto s = Floats(vals.value()[ValueId(*g, "s")]);
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  for (int i = 0; i < 6; ++i) {
    const double xe = x[i];
    EXPECT_NEAR(e[i], xe > 0 ? xe : 0.5 * (std::exp(xe) - 1), 1e-6) << i;
    EXPECT_NEAR(s[i], xe > 0 ? gamma * xe : gamma * alpha * (std::exp(xe) - 1), 1e-5) << i;
  }
}

// Opset 1: Softplus-1, Not-1 and GlobalAveragePool-1 are still current at 7.
TEST(OldOpset, UnchangedOperatorsOfOpset1Import) {
  auto m = MakeModel(1, 3);
  AddInput(m, "x", {1, 2, 2, 2});
  AddInput(m, "b", {3}, onnx::TensorProto::BOOL);
  AddNode(m, "Softplus", {"x"}, {"sp"});
  AddNode(m, "GlobalAveragePool", {"x"}, {"gap"});
  AddNode(m, "Not", {"b"}, {"nb"});
  for (const char* o : {"sp", "gap", "nb"}) AddOutput(m, o);
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<float> x = Ramp(8);
  auto bools = ir::TensorData::Make(ir::DType::kBool, {3});
  bools->bytes = {1, 0, 1};
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({1, 2, 2, 2}, x)},
                             {g->inputs[1], bools}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  const auto sp = Floats(vals.value()[ValueId(*g, "sp")]);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(sp[i], std::log1p(std::exp(double{x[i]})), 1e-6) << i;
  const auto gap = Floats(vals.value()[ValueId(*g, "gap")]);
  ASSERT_EQ(gap.size(), 2u);
  EXPECT_NEAR(gap[0], (x[0] + x[1] + x[2] + x[3]) / 4, 1e-6);
  EXPECT_NEAR(gap[1], (x[4] + x[5] + x[6] + x[7]) / 4, 1e-6);
  EXPECT_EQ(vals.value()[ValueId(*g, "nb")]->bytes, (std::vector<uint8_t>{0, 1, 0}));
}

// Softmax-1 (coerced to 2-D) is canonicalized as at opset 7.
TEST(OldOpset, Opset6SoftmaxIsCanonicalized) {
  auto m = MakeModel(6, 3);
  AddInput(m, "x", {2, 3});
  AttrInt(AddNode(m, "Softmax", {"x"}, {"y"}), "axis", 0);  // all 6 values form one row
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<float> x = Ramp(6);
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({2, 3}, x)}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  const auto y = Floats(vals.value()[ValueId(*g, "y")]);
  double sum = 0;
  for (float v : x) sum += std::exp(double{v});
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[i], std::exp(double{x[i]}) / sum, 1e-6) << i;
}

// Add-6 (legacy broadcast), BatchNormalization-6 and Reshape-1 differ from
// their opset-7 versions; Shrink did not exist yet. All are listed in one
// error with the node's name and op; the unchanged Softsign is not.
TEST(OldOpset, ChangedOperatorsAreListedTogether) {
  auto m = MakeModel(4, 3);
  AddInput(m, "x", {2, 3});
  AddInput(m, "c", {3});
  AttrInt(AddNode(m, "Add", {"x", "c"}, {"sum"}, "my_add"), "broadcast", 1);
  AttrInts(AddNode(m, "Reshape", {"x"}, {"r"}, "my_reshape"), "shape", {3, 2});
  AddNode(m, "Shrink", {"x"}, {"sh"}, "my_shrink");
  AddNode(m, "Softsign", {"x"}, {"ok"}, "fine_softsign");  // Softsign-1 is current at 7
  for (const char* o : {"sum", "r", "sh", "ok"}) AddOutput(m, o);
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "node 'my_add' (Add) uses opset-4 semantics (Add-1) that changed in");
  const std::string msg = g.status().message();
  EXPECT_NE(msg.find("3 unsupported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_add' (Add) uses opset-4 semantics (Add-1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("changed in opset 7 (legacy broadcast)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_reshape' (Reshape) uses opset-4 semantics (Reshape-1)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("changed in opset 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("re-export the model at opset >= 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_shrink' (Shrink): Shrink does not exist in opset 4"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("fine_softsign"), std::string::npos) << msg;
}

// The same Add at opset 7 imports (multidirectional broadcast, no attribute).
TEST(OldOpset, Opset6AddIsRefusedButOpset7AddIsNot) {
  for (int64_t opset : {6, 7}) {
    auto m = MakeModel(opset, 3);
    AddInput(m, "x", {2, 3});
    AddInput(m, "c", {3});
    AddNode(m, "Add", {"x", "c"}, {"sum"}, "add");
    AddOutput(m, "sum");
    auto g = Import(m);
    EXPECT_EQ(g.ok(), opset == 7) << opset << ": " << g.status().ToString();
    if (!g.ok())
      EXPECT_NE(g.status().message().find("uses opset-6 semantics (Add-6) that changed in opset 7"),
                std::string::npos)
          << g.status().ToString();
  }
}

}  // namespace
}  // namespace fcb::import
