// FuseResidualAdd on hand-built NHWC graphs: which patterns fold into the
// conv and which must stay. (The numerics of the fused epilogue are checked
// end to end by tests/models_test.cc, ResNets against ONNX Runtime.)
#include "passes/fuse_residual.h"
#include "ops/names.h"

#include <gtest/gtest.h>

namespace fcb::passes {
namespace {

int AddTensor(ir::Graph& g, const std::string& name) {
  ir::Value v;
  v.name = name;
  v.dtype = ir::DType::kF32;
  v.shape = {1, 4, 4, 8};
  v.has_shape = true;
  return g.AddValue(std::move(v));
}

void AddNode(ir::Graph& g, const std::string& op, std::vector<int> in, std::vector<int> out) {
  ir::Node n;
  n.name = op + std::to_string(g.nodes.size());
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  g.nodes.push_back(std::move(n));
}

// x -> ConvNhwc -> y;  Add(y, r) -> s;  Relu(s) -> z.  (weights: plain values;
// the pass only looks at the structure)
struct Block {
  ir::Graph g;
  int x, w, r, y, s, z;
  Block() {
    x = AddTensor(g, "x"), w = AddTensor(g, "w"), r = AddTensor(g, "r");
    y = AddTensor(g, "y"), s = AddTensor(g, "s"), z = AddTensor(g, "z");
    g.inputs = {x, w, r};
    AddNode(g, std::string(ops::opname::ConvNhwc), {x, w, -1}, {y});
    AddNode(g, "Add", {r, y}, {s});
    AddNode(g, "Relu", {s}, {z});
    g.outputs = {z};
  }
};

TEST(FuseResidualAdd, AddAndReluFoldIntoTheConv) {
  Block b;
  ASSERT_TRUE(FuseResidualAdd(b.g).ok());
  ASSERT_EQ(b.g.nodes.size(), 1u);
  const ir::Node& c = b.g.nodes[0];
  EXPECT_EQ(c.op_type, ops::opname::ConvNhwc);
  ASSERT_EQ(c.inputs.size(), 4u);
  EXPECT_EQ(c.inputs[3], b.r);
  EXPECT_EQ(c.outputs[0], b.z);
  EXPECT_EQ(c.GetInt(ops::attr::kActivation, 0), 1);
}

TEST(FuseResidualAdd, SumThatIsAGraphOutputKeepsNoRelu) {
  Block b;
  b.g.outputs = {b.s, b.z};  // the sum itself is wanted: fuse the Add only
  ASSERT_TRUE(FuseResidualAdd(b.g).ok());
  ASSERT_EQ(b.g.nodes.size(), 2u);
  EXPECT_EQ(b.g.nodes[0].outputs[0], b.s);
  EXPECT_EQ(b.g.nodes[0].GetInt(ops::attr::kActivation, 0), 0);
  EXPECT_EQ(b.g.nodes[1].op_type, "Relu");
}

TEST(FuseResidualAdd, ConvWithActivationIsLeftAlone) {
  Block b;
  b.g.nodes[0].SetInt(ops::attr::kActivation, 1);  // relu(conv) + r != relu(conv + r)
  ASSERT_TRUE(FuseResidualAdd(b.g).ok());
  EXPECT_EQ(b.g.nodes.size(), 3u);
}

TEST(FuseResidualAdd, ConvOutputWithAnotherUseIsLeftAlone) {
  Block b;
  b.g.outputs.push_back(b.y);
  ASSERT_TRUE(FuseResidualAdd(b.g).ok());
  EXPECT_EQ(b.g.nodes.size(), 3u);
}

TEST(FuseResidualAdd, ResidualComputedAfterTheConvPicksTheLaterConv) {
  // y1 = conv(x); y2 = conv(x) (later); Add(y1, y2): only the later conv can
  // take the other as its residual, since y1 exists when it runs.
  Block b;
  const int y2 = AddTensor(b.g, "y2");
  b.g.nodes.insert(b.g.nodes.begin() + 1, ir::Node{});
  ir::Node& c2 = b.g.nodes[1];
  c2.name = "conv2";
  c2.op_type = std::string(ops::opname::ConvNhwc);
  c2.inputs = {b.x, b.w, -1};
  c2.outputs = {y2};
  b.g.nodes[2].inputs = {b.y, y2};
  ASSERT_TRUE(FuseResidualAdd(b.g).ok());
  ASSERT_EQ(b.g.nodes.size(), 2u);
  EXPECT_EQ(b.g.nodes[0].inputs.size(), 3u);  // the first conv is unchanged
  ASSERT_EQ(b.g.nodes[1].inputs.size(), 4u);
  EXPECT_EQ(b.g.nodes[1].inputs[3], b.y);
  EXPECT_EQ(b.g.nodes[1].outputs[0], b.z);
}

TEST(FuseResidualAdd, BroadcastAddIsLeftAlone) {
  Block b;
  b.g.values[b.r].shape = {1, 1, 1, 8};
  ASSERT_TRUE(FuseResidualAdd(b.g).ok());
  EXPECT_EQ(b.g.nodes.size(), 3u);
}

}  // namespace
}  // namespace fcb::passes
