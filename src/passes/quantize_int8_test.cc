// QuantizeInt8 (precision "int8") on hand-built graphs: the exact node pattern
// ONNX Runtime's quantize_dynamic writes, per-channel symmetric int8 weights
// computed by hand, no float weight left after dead-node elimination, and
// results close to the float graph (the rewritten graph runs on the reference
// kernels through ops::Evaluate; float Conv, which has no kernel before
// lowering, is computed here in double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "ops/names.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "passes/test_interpreter.h"
#include "test_util.h"

namespace fcb::passes {
namespace {

using fcb::testing::Floats;
using fcb::testing::Interpret;

using fcb::testing::AddNode;
using fcb::testing::AddTensor;

// Deterministic values in about [-amp, amp] with varied magnitudes per channel.
std::vector<float> Wave(int64_t n, float freq, float amp, float phase = 0.f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = amp * std::sin(freq * i + phase) * (0.3f + 0.7f * std::cos(0.11f * i));
  return v;
}

std::vector<std::string> Ops(const ir::Graph& g) {
  std::vector<std::string> v;
  for (const auto& n : g.nodes) v.push_back(n.op_type);
  return v;
}

const ir::Node* FindNode(const ir::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

// Float constants with at least `min_elems` elements still in the graph.
int ValueId(const ir::Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return static_cast<int>(i);
  return -1;
}

int LargeFloatConstants(const ir::Graph& g, int64_t min_elems) {
  int k = 0;
  for (const auto& v : g.values)
    if (v.is_constant() && v.dtype == ir::DType::kF32 && v.constant->numel() >= min_elems) ++k;
  return k;
}

// Expected per-channel quantization of rows (channel c = rows[c]).
void ExpectQuantized(const std::vector<std::vector<double>>& rows, const ir::TensorData& scales,
                     const std::function<int8_t(int64_t c, int64_t k)>& q) {
  ASSERT_EQ(scales.dtype, ir::DType::kF32);
  ASSERT_EQ(scales.numel(), static_cast<int64_t>(rows.size()));
  for (size_t c = 0; c < rows.size(); ++c) {
    double m = 0;
    for (double w : rows[c]) m = std::max(m, std::fabs(w));
    const float s = m > 0 ? static_cast<float>(m / 127.0) : 1.f;
    EXPECT_EQ(scales.data<float>()[c], s) << "channel " << c;
    for (size_t k = 0; k < rows[c].size(); ++k) {
      const double r = std::nearbyint(rows[c][k] / s);  // ties to even (default rounding mode)
      EXPECT_EQ(q(c, k), static_cast<int8_t>(std::clamp(r, -127.0, 127.0))) << "channel " << c << " k " << k;
    }
  }
}

// Direct NCHW convolution in double (2-D; 1-D as height 1), any group.
std::vector<double> ConvRef(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                            int n, int c, int h, int wd, int m, int kh, int kw, int group, int pad_h, int pad_w,
                            int stride, int* oh_out, int* ow_out) {
  const int oh = (h + 2 * pad_h - kh) / stride + 1, ow = (wd + 2 * pad_w - kw) / stride + 1;
  *oh_out = oh;
  *ow_out = ow;
  const int cg = c / group, mg = m / group;
  std::vector<double> y(static_cast<size_t>(n) * m * oh * ow);
  for (int in = 0; in < n; ++in)
    for (int om = 0; om < m; ++om) {
      const int gi = om / mg;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double acc = b.empty() ? 0.0 : b[om];
          for (int ic = 0; ic < cg; ++ic)
            for (int ky = 0; ky < kh; ++ky)
              for (int kx = 0; kx < kw; ++kx) {
                const int iy = oy * stride - pad_h + ky, ix = ox * stride - pad_w + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += double(w[((om * cg + ic) * kh + ky) * kw + kx]) *
                       x[((in * c + gi * cg + ic) * h + iy) * wd + ix];
              }
          y[((in * m + om) * oh + oy) * ow + ox] = acc;
        }
    }
  return y;
}

double RelL2(const std::vector<float>& got, const std::vector<double>& want) {
  double d = 0, r = 0;
  for (size_t i = 0; i < want.size(); ++i) d += (got[i] - want[i]) * (got[i] - want[i]), r += want[i] * want[i];
  return std::sqrt(d / r);
}

struct ConvCase {
  int n = 1, c = 4, h = 7, w = 6, m = 6, kh = 3, kw = 3, group = 1, pad = 1, stride = 1;
  bool bias = true, one_d = false;
};

// Builds x -> Conv -> y, quantizes it, checks the pattern, the weights and the result.
void CheckConv(const ConvCase& k) {
  SCOPED_TRACE("group " + std::to_string(k.group) + (k.one_d ? " 1-D" : " 2-D") + (k.bias ? " bias" : ""));
  ir::Graph g;
  const int h = k.one_d ? 1 : k.h, kh = k.one_d ? 1 : k.kh, pad_h = k.one_d ? 0 : k.pad;
  const ir::Shape xs = k.one_d ? ir::Shape{k.n, k.c, k.w} : ir::Shape{k.n, k.c, h, k.w};
  const ir::Shape ws = k.one_d ? ir::Shape{k.m, k.c / k.group, k.kw} : ir::Shape{k.m, k.c / k.group, kh, k.kw};
  const int x = AddTensor(g, "x", xs);
  g.inputs = {x};
  const std::vector<float> wv = Wave(ir::NumElements(ws), 0.7f, 0.5f);
  const std::vector<float> bv = k.bias ? Wave(k.m, 1.3f, 0.2f, 0.4f) : std::vector<float>{};
  std::vector<int> in = {x, g.AddConstant("w", ir::TensorData::FromFloats(ws, wv))};
  if (k.bias) in.push_back(g.AddConstant("b", ir::TensorData::FromFloats({k.m}, bv)));
  int oh, ow;
  const std::vector<float> xv = Wave(ir::NumElements(xs), 0.31f, 2.f, 0.1f);
  const std::vector<double> want =
      ConvRef(xv, wv, bv, k.n, k.c, h, k.w, k.m, kh, k.kw, k.group, pad_h, k.pad, k.stride, &oh, &ow);
  const ir::Shape ys = k.one_d ? ir::Shape{k.n, k.m, ow} : ir::Shape{k.n, k.m, oh, ow};
  const int y = AddTensor(g, "y", ys);
  ir::Node& conv = AddNode(g, "Conv", in, {y}, "my_conv");
  conv.SetInt("group", k.group);
  conv.SetInts("strides", k.one_d ? std::vector<int64_t>{k.stride} : std::vector<int64_t>{k.stride, k.stride});
  conv.SetInts("pads", k.one_d ? std::vector<int64_t>{k.pad, k.pad}
                               : std::vector<int64_t>{pad_h, k.pad, pad_h, k.pad});
  g.outputs = {y};
  const std::vector<int64_t> pads = conv.GetInts("pads");

  ASSERT_TRUE(QuantizeInt8(g).ok());
  ASSERT_TRUE(EliminateDeadNodes(g).ok());  // compacts the value table: ids by name below
  ASSERT_TRUE(g.Validate().ok());
  const int x2 = ValueId(g, "x"), y2 = ValueId(g, "y");
  std::vector<std::string> want_ops = {"DynamicQuantizeLinear", "ConvInteger", "Cast", "Mul", "Mul"};
  if (k.bias) want_ops.push_back("Add");
  ASSERT_EQ(Ops(g), want_ops);
  const ir::Node& dql = g.nodes[0];
  const ir::Node& ci = g.nodes[1];
  EXPECT_EQ(ci.name, "my_conv") << "the integer op keeps the user's node name";
  EXPECT_EQ(dql.inputs, std::vector<int>{x2});
  EXPECT_EQ(ci.inputs[0], dql.outputs[0]);
  EXPECT_EQ(ci.inputs[2], dql.outputs[2]);
  EXPECT_EQ(ci.GetInt("group", 1), k.group);
  EXPECT_EQ(ci.GetInts("pads"), pads);
  EXPECT_EQ(g.values[ci.outputs[0]].dtype, ir::DType::kI32);
  const ir::Node& cast = g.nodes[2];
  EXPECT_EQ(cast.inputs[0], ci.outputs[0]);
  EXPECT_EQ(cast.GetInt("to", 0), 1);
  const ir::Node& m = g.nodes[3];  // M = x_scale * w_scale
  EXPECT_EQ(m.inputs[0], dql.outputs[1]);
  const ir::TensorData& wscale = *g.values[m.inputs[1]].constant;
  ir::Shape scale_shape(ws.size() - 1, 1);
  scale_shape[0] = k.m;
  EXPECT_EQ(wscale.shape, scale_shape);
  const ir::Node& rescale = g.nodes[4];
  EXPECT_EQ(rescale.inputs, (std::vector<int>{cast.outputs[0], m.outputs[0]}));
  EXPECT_EQ(g.nodes.back().outputs[0], y2) << "the chain writes the original output value";
  EXPECT_EQ(g.outputs, std::vector<int>{y2});
  if (k.bias) {
    const ir::TensorData& bt = *g.values[g.nodes[5].inputs[1]].constant;
    EXPECT_EQ(bt.shape, scale_shape);
    EXPECT_EQ(Floats(g.values[g.nodes[5].inputs[1]].constant), bv);
  }
  // Weights: int8, per output channel, zero points int8 zeros.
  const ir::TensorData& wq = *g.values[ci.inputs[1]].constant;
  const ir::TensorData& wzp = *g.values[ci.inputs[3]].constant;
  ASSERT_EQ(wq.dtype, ir::DType::kI8);
  EXPECT_EQ(wq.shape, ws);
  ASSERT_EQ(wzp.dtype, ir::DType::kI8);
  EXPECT_EQ(wzp.shape, ir::Shape{k.m});
  for (int64_t i = 0; i < wzp.numel(); ++i) EXPECT_EQ(wzp.data<int8_t>()[i], 0);
  const int64_t per = ir::NumElements(ws) / k.m;
  std::vector<std::vector<double>> rows(k.m);
  for (int r = 0; r < k.m; ++r)
    for (int64_t j = 0; j < per; ++j) rows[r].push_back(wv[r * per + j]);
  ExpectQuantized(rows, wscale, [&](int64_t c, int64_t j) { return wq.data<int8_t>()[c * per + j]; });
  EXPECT_EQ(LargeFloatConstants(g, ir::NumElements(ws)), 0) << "the float weights must be gone";

  auto got = Interpret(g, {{x2, ir::TensorData::FromFloats(xs, xv)}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const double rel = RelL2(Floats(got.value()[y2]), want);
  EXPECT_LT(rel, 4e-2);
  EXPECT_GT(rel, 0.0) << "the result must really be quantized";
}

TEST(QuantizeInt8, Conv2dWithBias) { CheckConv(ConvCase{}); }

TEST(QuantizeInt8, Conv2dGroupedStridedNoBias) {
  ConvCase k;
  k.group = 2;
  k.stride = 2;
  k.bias = false;
  CheckConv(k);
}

TEST(QuantizeInt8, Conv2dGrouped) {
  ConvCase k;
  k.c = 6;
  k.group = 3;
  CheckConv(k);
}

// Depthwise convolutions stay float (their weights are stored as int8 by the
// lowering instead, see ConvNhwc).
TEST(QuantizeInt8, Conv2dDepthwiseStaysFloat) {
  ir::Graph g;
  const int x = AddTensor(g, "x", {1, 6, 7, 6});
  g.inputs = {x};
  const int w = g.AddConstant("w", ir::TensorData::FromFloats({6, 1, 3, 3}, Wave(54, 0.7f, 0.5f)));
  const int y = AddTensor(g, "y", {1, 6, 5, 4});
  AddNode(g, "Conv", {x, w}, {y}, "dw").SetInt("group", 6);
  g.outputs = {y};
  ASSERT_TRUE(QuantizeInt8(g).ok());
  EXPECT_EQ(Ops(g), std::vector<std::string>{"Conv"});
}

TEST(QuantizeInt8, Conv1d) {
  ConvCase k;
  k.one_d = true;
  k.w = 11;
  k.group = 2;
  CheckConv(k);
}

// MatMul with a 3-D A and Gemm with alpha, beta, transB and a per-column C.
TEST(QuantizeInt8, MatMulAndGemm) {
  for (bool gemm : {false, true}) {
    SCOPED_TRACE(gemm ? "Gemm" : "MatMul");
    ir::Graph g;
    const int64_t K = 9, N = 5;
    const ir::Shape as = gemm ? ir::Shape{3, K} : ir::Shape{2, 3, K};
    const int a = AddTensor(g, "a", as);
    g.inputs = {a};
    const std::vector<float> bv = Wave(K * N, 0.9f, 0.8f);  // [K, N], or [N, K] for transB
    const std::vector<float> cv = Wave(N, 1.7f, 0.5f);
    const float alpha = 0.75f, beta = 2.f;
    ir::Shape ys = as;
    ys.back() = N;
    const int y = AddTensor(g, "y", ys);
    if (gemm) {
      ir::Node& n = AddNode(g, "Gemm",
                            {a, g.AddConstant("B", ir::TensorData::FromFloats({N, K}, bv)),
                             g.AddConstant("C", ir::TensorData::FromFloats({N}, cv))},
                            {y}, "my_gemm");
      n.SetInt("transB", 1);
      n.SetFloat("alpha", alpha);
      n.SetFloat("beta", beta);
    } else {
      AddNode(g, "MatMul", {a, g.AddConstant("B", ir::TensorData::FromFloats({K, N}, bv))}, {y}, "my_matmul");
    }
    g.outputs = {y};
    const ir::Graph orig = g;
    ASSERT_TRUE(QuantizeInt8(g).ok());
    ASSERT_TRUE(EliminateDeadNodes(g).ok());
    ASSERT_TRUE(g.Validate().ok());
    const int a2 = ValueId(g, "a"), y2 = ValueId(g, "y");
    std::vector<std::string> want_ops = {"DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Mul"};
    if (gemm) want_ops.push_back("Add");
    ASSERT_EQ(Ops(g), want_ops);
    const ir::Node& mi = g.nodes[1];
    EXPECT_EQ(mi.name, gemm ? "my_gemm" : "my_matmul");
    const ir::TensorData& wq = *g.values[mi.inputs[1]].constant;
    ASSERT_EQ(wq.dtype, ir::DType::kI8);
    EXPECT_EQ(wq.shape, (ir::Shape{K, N})) << "weights as [K, N], transB undone";
    EXPECT_EQ(g.values[mi.inputs[3]].constant->shape, ir::Shape{N});
    const ir::TensorData& wscale = *g.values[g.nodes[3].inputs[1]].constant;
    EXPECT_EQ(wscale.shape, ir::Shape{N});
    std::vector<std::vector<double>> cols(N);
    for (int64_t c = 0; c < N; ++c)
      for (int64_t k = 0; k < K; ++k)
        cols[c].push_back(gemm ? alpha * static_cast<double>(bv[c * K + k]) : bv[k * N + c]);
    ExpectQuantized(cols, wscale, [&](int64_t c, int64_t k) { return wq.data<int8_t>()[k * N + c]; });
    if (gemm) {
      auto bias = Floats(g.values[g.nodes[5].inputs[1]].constant);
      for (int64_t c = 0; c < N; ++c) EXPECT_EQ(bias[c], beta * cv[c]);
    }
    EXPECT_EQ(LargeFloatConstants(g, K * N), 0);
    auto x = ir::TensorData::FromFloats(as, Wave(ir::NumElements(as), 0.43f, 1.5f));
    auto ref = Interpret(orig, {{a, x}});
    auto got = Interpret(g, {{a2, x}});
    ASSERT_TRUE(ref.ok() && got.ok()) << ref.status().ToString() << got.status().ToString();
    const auto d = fcb::testing::Compare(Floats(got.value()[y2]), Floats(ref.value()[y]));
    EXPECT_LT(d.rel_l2, 4e-2);
    EXPECT_GT(d.rel_l2, 0.0);
  }
}

// Rounding is half to even, the range [-127, 127], an all-zero channel gets scale 1.
TEST(QuantizeInt8, TiesZeroChannelsAndRange) {
  ir::Graph g;
  const int a = AddTensor(g, "a", {2, 4});
  g.inputs = {a};
  // Columns of B [4, 3]: {127, 2.5, 3.5, -2.5} (scale exactly 1), zeros, {-1, 0.5, 0, 0}.
  const std::vector<float> bv = {127, 0, -1, 2.5f, 0, 0.5f, 3.5f, 0, 0, -2.5f, 0, 0};
  const int y = AddTensor(g, "y", {2, 3});
  AddNode(g, "MatMul", {a, g.AddConstant("B", ir::TensorData::FromFloats({4, 3}, bv))}, {y}, "mm");
  g.outputs = {y};
  ASSERT_TRUE(QuantizeInt8(g).ok());
  const ir::Node* mi = FindNode(g, "MatMulInteger");
  ASSERT_NE(mi, nullptr);
  const ir::TensorData& wq = *g.values[mi->inputs[1]].constant;
  const std::vector<int8_t> q(wq.data<int8_t>(), wq.data<int8_t>() + 12);
  EXPECT_EQ(q, (std::vector<int8_t>{127, 0, -127, 2, 0, 64, 4, 0, 0, -2, 0, 0}));
  const ir::TensorData& s = *g.values[g.nodes[3].inputs[1]].constant;
  EXPECT_EQ(s.data<float>()[0], 1.f);
  EXPECT_EQ(s.data<float>()[1], 1.f) << "an all-zero column gets scale 1";
  EXPECT_EQ(s.data<float>()[2], static_cast<float>(1.0 / 127));
}

// Two consumers of one activation share one DynamicQuantizeLinear; nodes that
// cannot be quantized (transA, a fed weight, a non-float input) stay as they are.
TEST(QuantizeInt8, SharesQuantizedInputsAndLeavesOthersAlone) {
  ir::Graph g;
  const int a = AddTensor(g, "a", {3, 4});
  const int fed = AddTensor(g, "fed", {4, 2});
  const int ai = AddTensor(g, "ai", {3, 4}, ir::DType::kI32);
  g.inputs = {a, fed, ai};
  const int b1 = g.AddConstant("B1", ir::TensorData::FromFloats({4, 2}, Wave(8, 0.5f, 1.f)));
  const int b2 = g.AddConstant("B2", ir::TensorData::FromFloats({4, 3}, Wave(12, 0.6f, 1.f)));
  const int bt = g.AddConstant("Bt", ir::TensorData::FromFloats({3, 2}, Wave(6, 0.6f, 1.f)));
  auto bit = ir::TensorData::Make(ir::DType::kI32, {4, 2});
  for (int i = 0; i < 8; ++i) bit->mutable_data<int32_t>()[i] = i - 3;
  const int bi = g.AddConstant("Bi", bit);
  const int y1 = AddTensor(g, "y1", {3, 2}), y2 = AddTensor(g, "y2", {3, 3}), y3 = AddTensor(g, "y3", {3, 2}),
            y4 = AddTensor(g, "y4", {4, 2});
  const int y5 = AddTensor(g, "y5", {3, 2}, ir::DType::kI32);
  AddNode(g, "MatMul", {a, b1}, {y1}, "first");
  AddNode(g, "MatMul", {a, b2}, {y2}, "second");
  AddNode(g, "MatMul", {a, fed}, {y3}, "fed_weight");
  AddNode(g, "Gemm", {a, bt}, {y4}, "trans_a").SetInt("transA", 1);
  AddNode(g, "MatMul", {ai, bi}, {y5}, "integer");
  g.outputs = {y1, y2, y3, y4, y5};
  ASSERT_TRUE(QuantizeInt8(g).ok());
  ASSERT_TRUE(EliminateDeadNodes(g).ok());
  int dql = 0, mmi = 0;
  for (const auto& n : g.nodes) {
    dql += n.op_type == "DynamicQuantizeLinear";
    mmi += n.op_type == "MatMulInteger";
  }
  EXPECT_EQ(dql, 1);
  EXPECT_EQ(mmi, 2);
  int untouched = 0;
  for (const auto& n : g.nodes)
    if (n.name == "fed_weight" || n.name == "trans_a" || n.name == "integer") {
      ++untouched;
      EXPECT_TRUE(n.op_type == "MatMul" || n.op_type == "Gemm") << n.Describe();
    }
  EXPECT_EQ(untouched, 3);
  ASSERT_TRUE(g.Validate().ok());
}

// Through the pipeline: BatchNormalization is folded first (the folded
// weights are the ones quantized), the Relu is not fused into the float Conv
// but into the int8 kernel that FuseQuantized makes of the quantized chain,
// no float weight survives; level 0 refuses int8.
TEST(QuantizeInt8, RunsAfterBatchNormFoldingAndBeforeActivationFusion) {
  ir::Graph g;
  const int x = AddTensor(g, "x", {1, 2, 5, 5});
  g.inputs = {x};
  const int w = g.AddConstant("w", ir::TensorData::FromFloats({3, 2, 3, 3}, Wave(54, 0.8f, 0.6f)));
  const int c = AddTensor(g, "c", {1, 3, 5, 5});
  AddNode(g, "Conv", {x, w}, {c}, "conv").SetInts("pads", {1, 1, 1, 1});
  std::vector<int> p;
  for (const auto& v : {std::vector<float>{1.5f, -0.5f, 2.f}, std::vector<float>{0.1f, 0.f, -1.f},
                        std::vector<float>{0.3f, -0.1f, 0.7f}, std::vector<float>{0.5f, 2.f, 0.1f}})
    p.push_back(g.AddConstant("bn", ir::TensorData::FromFloats({3}, v)));
  const int b = AddTensor(g, "b", {1, 3, 5, 5});
  AddNode(g, "BatchNormalization", {c, p[0], p[1], p[2], p[3]}, {b}, "bn");
  const int y = AddTensor(g, "y", {1, 3, 5, 5});
  AddNode(g, "Relu", {b}, {y}, "relu");
  g.outputs = {y};
  ir::Graph level0 = g;
  EXPECT_REFUSED(RunDefaultPasses(level0, 0, true), StatusCode::kInvalidArgument, "precision int8 needs optimization_level 1 or higher");
  ASSERT_TRUE(RunDefaultPasses(g, 1, true).ok());
  // FuseQuantized then takes ConvInteger -> Cast -> Mul -> Add -> Relu into
  // one int8 kernel node (the Relu as its epilogue); the Mul computing
  // x_scale * w_scale stays.
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"DynamicQuantizeLinear", "Mul", std::string(ops::opname::QConv)}));
  for (const auto& n : g.nodes)
    if (n.op_type == ops::opname::QConv) {
      EXPECT_EQ(n.GetInt(ops::attr::kQuantMode, -1), 2) << "the multiplier mode";
      EXPECT_TRUE(n.Has(ops::attr::kActivation)) << "the Relu";
      EXPECT_EQ(n.name, "conv") << "the user's node name";
    }
  EXPECT_EQ(LargeFloatConstants(g, 54), 0);
  // Without int8 the same pipeline keeps the float Conv with the Relu fused.
  ir::Graph fp = level0;
  ASSERT_TRUE(RunDefaultPasses(fp, 1).ok());
  EXPECT_EQ(Ops(fp), std::vector<std::string>{"Conv"});
}

}  // namespace
}  // namespace fcb::passes
