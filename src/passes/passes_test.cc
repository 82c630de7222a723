// Pass tests on hand-built IR graphs. Numerical checks compare against hand
// computations (independent of the op registry) and, where the ops exist,
// against the unoptimized graph run through ops::Evaluate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "kernels/kernels.h"
#include "ops/op.h"
#include "ops/names.h"
#include "passes/passes.h"
#include "passes/test_interpreter.h"
#include "test_util.h"

namespace fcb::passes {
namespace {

using fcb::testing::Floats;
using fcb::testing::Interpret;

using fcb::testing::AddNode;
using fcb::testing::AddTensor;

std::vector<float> Ramp(int64_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(scale * i) + offset;
  return v;
}

int FindValue(const ir::Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return static_cast<int>(i);
  return -1;
}

// x[1,2,3,3] -> Conv(W[3,2,1,1], B[3]) -> BN -> y
struct ConvBn {
  ir::Graph g;
  std::vector<float> w = Ramp(6, 0.9f, 0.f), b = {0.1f, -0.2f, 0.3f};
  std::vector<float> scale = {1.5f, -0.5f, 2.f}, bias = {0.25f, 0.f, -1.f};
  std::vector<float> mean = {0.3f, -0.1f, 0.7f}, var = {0.5f, 2.f, 0.01f};
  float eps = 1e-3f;
  ConvBn() {
    int x = AddTensor(g, "x", {1, 2, 3, 3});
    g.inputs = {x};
    int wi = g.AddConstant("w", ir::TensorData::FromFloats({3, 2, 1, 1}, w));
    int bi = g.AddConstant("b", ir::TensorData::FromFloats({3}, b));
    int c = AddTensor(g, "conv_out", {1, 3, 3, 3});
    AddNode(g, "Conv", {x, wi, bi}, {c}, "conv");
    std::vector<int> params;
    for (auto* p : {&scale, &bias, &mean, &var})
      params.push_back(g.AddConstant("bn_p", ir::TensorData::FromFloats({3}, *p)));
    int y = AddTensor(g, "y", {1, 3, 3, 3});
    AddNode(g, "BatchNormalization", {c, params[0], params[1], params[2], params[3]}, {y}, "bn")
        .SetFloat("epsilon", eps);
    g.outputs = {y};
  }
};

TEST(FoldBatchNorm, ConvWeightsAndBiasMatchHandComputation) {
  ConvBn t;
  ASSERT_TRUE(FoldBatchNorm(t.g).ok());
  ASSERT_EQ(t.g.nodes.size(), 1u);
  const ir::Node& conv = t.g.nodes[0];
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(t.g.values[conv.outputs[0]].name, "y");
  auto w = Floats(t.g.values[conv.inputs[1]].constant);
  auto b = Floats(t.g.values[conv.inputs[2]].constant);
  for (int m = 0; m < 3; ++m) {
    const double s = double(t.scale[m]) / std::sqrt(double(t.var[m]) + double(t.eps));
    for (int k = 0; k < 2; ++k) EXPECT_EQ(w[m * 2 + k], static_cast<float>(t.w[m * 2 + k] * s));
    EXPECT_EQ(b[m], static_cast<float>((double(t.b[m]) - t.mean[m]) * s + t.bias[m]));
  }
  // The original weights are untouched (they may be shared).
  EXPECT_EQ(Floats(t.g.values[FindValue(t.g, "w")].constant), t.w);
  ASSERT_TRUE(t.g.Validate().ok());
}

// NCHW Conv has no generic kernel before the layout pass, so the 1x1 conv and
// the BN are computed here directly, in double.
std::vector<double> Conv1x1(const std::vector<float>& x, const std::vector<float>& w,
                            const std::vector<float>& b, int cin, int cout, int pixels) {
  std::vector<double> y(cout * pixels);
  for (int m = 0; m < cout; ++m)
    for (int p = 0; p < pixels; ++p) {
      double acc = b[m];
      for (int c = 0; c < cin; ++c) acc += double(w[m * cin + c]) * x[c * pixels + p];
      y[m * pixels + p] = acc;
    }
  return y;
}

TEST(FoldBatchNorm, ConvResultsMatchUnfused) {
  ConvBn t;
  ir::Graph folded = t.g;
  ASSERT_TRUE(FoldBatchNorm(folded).ok());
  ASSERT_EQ(folded.nodes.size(), 1u);
  const std::vector<float> x = Ramp(18, 0.37f, 0.2f);
  std::vector<double> ref = Conv1x1(x, t.w, t.b, 2, 3, 9);
  for (int m = 0; m < 3; ++m)
    for (int p = 0; p < 9; ++p) {
      double& v = ref[m * 9 + p];
      v = (v - t.mean[m]) / std::sqrt(double(t.var[m]) + double(t.eps)) * t.scale[m] + t.bias[m];
    }
  const ir::Node& conv = folded.nodes[0];
  std::vector<double> got = Conv1x1(x, Floats(folded.values[conv.inputs[1]].constant),
                                    Floats(folded.values[conv.inputs[2]].constant), 2, 3, 9);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5 * (1 + std::abs(ref[i])));
}

TEST(FoldBatchNorm, ConvWithoutBiasGetsOne) {
  ConvBn t;
  t.g.nodes[0].inputs.resize(2);
  ASSERT_TRUE(FoldBatchNorm(t.g).ok());
  ASSERT_EQ(t.g.nodes.size(), 1u);
  ASSERT_EQ(t.g.nodes[0].inputs.size(), 3u);
  auto b = Floats(t.g.values[t.g.nodes[0].inputs[2]].constant);
  const double s0 = double(t.scale[0]) / std::sqrt(double(t.var[0]) + double(t.eps));
  EXPECT_EQ(b[0], static_cast<float>(-t.mean[0] * s0 + t.bias[0]));
}

TEST(FoldBatchNorm, ConvWithASecondUseIsLeftAlone) {
  ConvBn t;
  t.g.outputs.push_back(t.g.nodes[0].outputs[0]);  // conv output is also a graph output
  ASSERT_TRUE(FoldBatchNorm(t.g).ok());
  EXPECT_EQ(t.g.nodes.size(), 2u);
}

// A[2,3] x B[3,4] (MatMul) or Gemm(transB) -> BN over 4 columns.
TEST(FoldBatchNorm, MatMulBecomesGemmWithScaledColumns) {
  ir::Graph g;
  int a = AddTensor(g, "a", {2, 3});
  g.inputs = {a};
  std::vector<float> bw = Ramp(12, 0.5f, 0.1f);
  int b = g.AddConstant("b", ir::TensorData::FromFloats({3, 4}, bw));
  int mm = AddTensor(g, "mm", {2, 4});
  AddNode(g, "MatMul", {a, b}, {mm}, "matmul");
  std::vector<float> scale = {1, 2, 3, 4}, bias = {0, 1, 0, 1}, mean = {0.5f, 0, 0, 1}, var = {1, 1, 4, 0.25f};
  std::vector<int> p;
  for (auto* v : {&scale, &bias, &mean, &var}) p.push_back(g.AddConstant("p", ir::TensorData::FromFloats({4}, *v)));
  int y = AddTensor(g, "y", {2, 4});
  AddNode(g, "BatchNormalization", {mm, p[0], p[1], p[2], p[3]}, {y}, "bn");
  g.outputs = {y};
  ir::Graph orig = g;
  ASSERT_TRUE(FoldBatchNorm(g).ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Gemm");
  EXPECT_EQ(g.nodes[0].outputs[0], y);
  auto nb = Floats(g.values[g.nodes[0].inputs[1]].constant);
  auto nc = Floats(g.values[g.nodes[0].inputs[2]].constant);
  for (int n = 0; n < 4; ++n) {
    const double s = scale[n] / std::sqrt(double(var[n]) + double(1e-5f));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(nb[k * 4 + n], static_cast<float>(bw[k * 4 + n] * s));
    EXPECT_EQ(nc[n], static_cast<float>(-mean[n] * s + bias[n]));
  }
  if (ops::FindOp("Gemm") && ops::FindOp("MatMul") && ops::FindOp("BatchNormalization")) {
    auto x = ir::TensorData::FromFloats({2, 3}, Ramp(6, 1.1f, 0));
    auto ref = Interpret(orig, {{a, x}});
    auto got = Interpret(g, {{a, x}});
    ASSERT_TRUE(ref.ok() && got.ok()) << ref.status().ToString() << got.status().ToString();
    EXPECT_LT(fcb::testing::Compare(Floats(got.value()[y]), Floats(ref.value()[y])).max_abs, 1e-5);
  } else {
    ADD_FAILURE() << "Gemm/MatMul/BatchNormalization not registered yet: numeric check not run";
  }
}

// x -> Conv -> act -> y, for every fusible activation.
TEST(FuseActivations, SetsAttrsAndTakesOverTheOutput) {
  struct Case { std::string op; kernels::Act act; float a, b; };
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : {Case{"Relu", kernels::Act::kRelu, 0, 0},
                        Case{"Clip", kernels::Act::kClip, -1.f, 6.f},
                        Case{"Sigmoid", kernels::Act::kSigmoid, 0, 0},
                        Case{"HardSigmoid", kernels::Act::kHardSigmoid, 0.2f, 0.5f},
                        Case{"HardSwish", kernels::Act::kHardSwish, 0, 0},
                        Case{"Tanh", kernels::Act::kTanh, 0, 0},
                        Case{"LeakyRelu", kernels::Act::kLeakyRelu, 0.1f, 0}}) {
    ConvBn t;
    ir::Graph& g = t.g;
    g.nodes.pop_back();  // drop the BN: conv_out -> act -> y
    int conv_out = g.nodes[0].outputs[0];
    int y = g.outputs[0];
    std::vector<int> in = {conv_out};
    if (c.op == "Clip") {
      in.push_back(g.AddConstant("lo", ir::TensorData::FromFloats({}, {c.a})));
      in.push_back(g.AddConstant("hi", ir::TensorData::FromFloats({}, {c.b})));
    }
    auto& act = AddNode(g, c.op, in, {y}, "act");
    if (c.op == "LeakyRelu") act.SetFloat("alpha", c.a);
    ASSERT_TRUE(FuseActivations(g).ok());
    ASSERT_EQ(g.nodes.size(), 1u) << c.op;
    EXPECT_EQ(g.nodes[0].GetInt(ops::attr::kActivation, -1), static_cast<int64_t>(c.act)) << c.op;
    EXPECT_EQ(g.nodes[0].GetFloat(ops::attr::kActivationAlpha, -9), c.a) << c.op;
    EXPECT_EQ(g.nodes[0].GetFloat(ops::attr::kActivationBeta, -9), c.b) << c.op;
    EXPECT_EQ(g.nodes[0].outputs[0], y) << c.op;
    EXPECT_EQ(g.values[g.outputs[0]].name, "y");
  }
  // Clip without bounds: infinite ones.
  ConvBn t;
  t.g.nodes.pop_back();
  AddNode(t.g, "Clip", {t.g.nodes[0].outputs[0]}, {t.g.outputs[0]}, "clip");
  ASSERT_TRUE(FuseActivations(t.g).ok());
  ASSERT_EQ(t.g.nodes.size(), 1u);
  EXPECT_EQ(t.g.nodes[0].GetFloat(ops::attr::kActivationAlpha, 0), -inf);
  EXPECT_EQ(t.g.nodes[0].GetFloat(ops::attr::kActivationBeta, 0), inf);
}

// A ConvTranspose carries the activation in both of its forms (the reference
// kernel and ConvTransposeNhwc), so it takes one too.
TEST(FuseActivations, ConvTransposeTakesTheActivation) {
  ConvBn t;
  ir::Graph& g = t.g;
  g.nodes.pop_back();
  g.nodes[0].op_type = "ConvTranspose";
  AddNode(g, "Relu", {g.nodes[0].outputs[0]}, {g.outputs[0]}, "relu");
  ASSERT_TRUE(FuseActivations(g).ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].GetInt(ops::attr::kActivation, -1), static_cast<int64_t>(kernels::Act::kRelu));
}

// A Gemm takes an activation only where GemmPacked's lowering will take the
// node: with transA the variable-operand kernel runs, which has no epilogue.
TEST(FuseActivations, GemmOnlyWhenItLowersToGemmPacked) {
  for (int trans_a : {0, 1}) {
    ir::Graph g;
    const int a = AddTensor(g, "a", trans_a ? ir::Shape{3, 2} : ir::Shape{2, 3});
    g.inputs = {a};
    const int b = g.AddConstant("b", ir::TensorData::FromFloats({3, 4}, Ramp(12, 0.5f, -1.f)));
    const int mid = AddTensor(g, "mid", {2, 4});
    const int y = AddTensor(g, "y", {2, 4});
    AddNode(g, "Gemm", {a, b}, {mid}, "gemm").SetInt("transA", trans_a);
    AddNode(g, "Relu", {mid}, {y}, "relu");
    g.outputs = {y};
    ASSERT_TRUE(FuseActivations(g).ok());
    EXPECT_EQ(g.nodes.size(), trans_a ? 2u : 1u) << "transA " << trans_a;
  }
}

TEST(FuseActivations, MulOfSigmoidBecomesSilu) {
  for (int order = 0; order < 2; ++order) {
    ConvBn t;
    ir::Graph& g = t.g;
    g.nodes.pop_back();
    int x = g.nodes[0].outputs[0];
    int s = AddTensor(g, "sig", {1, 3, 3, 3});
    AddNode(g, "Sigmoid", {x}, {s}, "sigmoid");
    AddNode(g, "Mul", order ? std::vector<int>{s, x} : std::vector<int>{x, s}, {g.outputs[0]}, "mul");
    ASSERT_TRUE(FuseActivations(g).ok());
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].GetInt(ops::attr::kActivation, -1), static_cast<int64_t>(kernels::Act::kSilu));
    EXPECT_EQ(g.nodes[0].outputs[0], g.outputs[0]);
  }
  {  // x has a third use: the Sigmoid and Mul stay
    ConvBn t;
    ir::Graph& g = t.g;
    g.nodes.pop_back();
    int x = g.nodes[0].outputs[0];
    int s = AddTensor(g, "sig", {1, 3, 3, 3});
    AddNode(g, "Sigmoid", {x}, {s}, "sigmoid");
    AddNode(g, "Mul", {x, s}, {g.outputs[0]}, "mul");
    g.outputs.push_back(x);
    ASSERT_TRUE(FuseActivations(g).ok());
    EXPECT_EQ(g.nodes.size(), 3u);
  }
}

TEST(FuseActivations, LeavesUnfusibleCasesAlone) {
  {  // producer output is also a graph output
    ConvBn t;
    t.g.nodes.pop_back();
    AddNode(t.g, "Relu", {t.g.nodes[0].outputs[0]}, {t.g.outputs[0]}, "relu");
    t.g.outputs.push_back(t.g.nodes[0].outputs[0]);
    ASSERT_TRUE(FuseActivations(t.g).ok());
    EXPECT_EQ(t.g.nodes.size(), 2u);
  }
  for (const char* op : {"MatMul", "Gemm"}) {  // variable B: not the packed GEMM
    ir::Graph g;
    int a = AddTensor(g, "a", {2, 2}), b = AddTensor(g, "b", {2, 2});
    g.inputs = {a, b};
    int m = AddTensor(g, "m", {2, 2}), y = AddTensor(g, "y", {2, 2});
    AddNode(g, op, {a, b}, {m}, "mm");
    AddNode(g, "Relu", {m}, {y}, "relu");
    g.outputs = {y};
    ASSERT_TRUE(FuseActivations(g).ok());
    EXPECT_EQ(g.nodes.size(), 2u) << op;
  }
  {  // Clip with a runtime bound
    ConvBn t;
    t.g.nodes.pop_back();
    int lo = AddTensor(t.g, "lo", {});
    t.g.inputs.push_back(lo);
    AddNode(t.g, "Clip", {t.g.nodes[0].outputs[0], lo}, {t.g.outputs[0]}, "clip");
    ASSERT_TRUE(FuseActivations(t.g).ok());
    EXPECT_EQ(t.g.nodes.size(), 2u);
  }
}

// 1-D convolutions become 2-D ones of height 1 with the same results (the
// reference kernels before and after), whatever their stride, padding,
// dilation, groups and output padding; a chain of them stays 4-D between
// the convolutions, and a 1-D value read elsewhere keeps its Squeeze.
TEST(Conv1dAs2d, SameResultsAndChainsStay4D) {
  ir::Graph g;
  const int x = AddTensor(g, "x", {2, 4, 19});
  g.inputs = {x};
  // conv_a: stride 3, asymmetric pads, dilation 2, groups 2, bias.
  const int wa = g.AddConstant("wa", ir::TensorData::FromFloats({6, 2, 3}, Ramp(36, 0.37f, 0.f)));
  const int ba = g.AddConstant("ba", ir::TensorData::FromFloats({6}, Ramp(6, 1.1f, 0.1f)));
  const int a = AddTensor(g, "a", {2, 6, 6});  // (19 + 1 + 2 - 5) / 3 + 1 = 6
  AddNode(g, "Conv", {x, wa, ba}, {a}, "conv_a")
      .SetInts("strides", {3});
  g.nodes.back().SetInts("pads", {1, 2});
  g.nodes.back().SetInts("dilations", {2});
  g.nodes.back().SetInt("group", 2);
  // conv_t: ConvTranspose stride 2, pads, output_padding 1, reading conv_a directly.
  const int wt = g.AddConstant("wt", ir::TensorData::FromFloats({6, 5, 4}, Ramp(120, 0.23f, -0.1f)));
  const int t = AddTensor(g, "t", {2, 5, 11});  // (6 - 1) * 2 - 1 - 2 + 4 + 1 = 11
  AddNode(g, "ConvTranspose", {a, wt}, {t}, "conv_t").SetInts("strides", {2});
  g.nodes.back().SetInts("pads", {1, 2});
  g.nodes.back().SetInts("output_padding", {1});
  // relu reads conv_a's 1-D output too: that Squeeze stays.
  const int r = AddTensor(g, "r", {2, 6, 6});
  AddNode(g, "Relu", {a}, {r}, "relu");
  g.outputs = {t, r};
  const ir::Graph orig = g;

  ASSERT_TRUE(Conv1dAs2d(g).ok());
  int convs = 0, unsqueezes = 0, squeezes = 0;
  for (const auto& n : g.nodes) {
    if (n.op_type == "Conv" || n.op_type == "ConvTranspose") {
      ++convs;
      EXPECT_EQ(g.values[n.inputs[0]].shape.size(), 4u) << n.Describe();
      EXPECT_EQ(g.values[n.inputs[1]].shape.size(), 4u) << n.Describe();
    }
    unsqueezes += n.op_type == "Unsqueeze";
    squeezes += n.op_type == "Squeeze";
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(unsqueezes, 1) << "conv_t reads conv_a's 4-D output";
  EXPECT_EQ(squeezes, 2) << "conv_a's (read by relu) and conv_t's (a graph output)";
  EXPECT_EQ(g.values[g.outputs[0]].name, "t");

  auto in = ir::TensorData::FromFloats({2, 4, 19}, Ramp(152, 0.71f, 0.2f));
  auto want = Interpret(orig, {{x, in}});
  auto got = Interpret(g, {{x, in}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (int k = 0; k < 2; ++k) {
    const auto w = Floats(want.value()[orig.outputs[k]]), o = Floats(got.value()[g.outputs[k]]);
    ASSERT_EQ(w.size(), o.size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(o[i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << k << " " << i;
  }
}

// Quantized 1-D convolutions (ConvInteger with a per-channel weight zero
// point, stride, pads, dilation and groups; the activation's zero point a
// run-time scalar as a dynamic quantization gives it) become 2-D ones of
// height 1 with the same int32 results; a float Conv is left to the float
// form of the pass.
TEST(Conv1dAs2d, QuantizedConvolutionsSameResults) {
  ir::Graph g;
  const int x = AddTensor(g, "x", {1, 4, 23}, ir::DType::kU8);
  const int xz = AddTensor(g, "xz", {}, ir::DType::kU8);
  const int xf = AddTensor(g, "xf", {1, 4, 23});
  g.inputs = {x, xz, xf};
  auto w = ir::TensorData::Make(ir::DType::kI8, {6, 2, 3});
  for (size_t i = 0; i < w->bytes.size(); ++i) w->bytes[i] = static_cast<uint8_t>(static_cast<int8_t>((i * 37) % 255 - 127));
  const int wv = g.AddConstant("w", w);
  auto wz = ir::TensorData::Make(ir::DType::kI8, {6});
  for (size_t i = 0; i < wz->bytes.size(); ++i) wz->bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(3 * i) - 7);
  const int wzv = g.AddConstant("wz", wz);
  const int y = AddTensor(g, "y", {1, 6, 10}, ir::DType::kI32);  // (23 + 1 + 0 - 5) / 2 + 1 = 10
  AddNode(g, "ConvInteger", {x, wv, xz, wzv}, {y}, "conv_q").SetInts("strides", {2});
  g.nodes.back().SetInts("pads", {1, 0});
  g.nodes.back().SetInts("dilations", {2});
  g.nodes.back().SetInt("group", 2);
  const int wf = g.AddConstant("wf", ir::TensorData::FromFloats({3, 4, 2}, Ramp(24, 0.3f, 0.f)));
  const int yf = AddTensor(g, "yf", {1, 3, 22});
  AddNode(g, "Conv", {xf, wf}, {yf}, "conv_f");
  g.outputs = {y, yf};
  const ir::Graph orig = g;

  ASSERT_TRUE(Conv1dAs2d(g, /*quantized=*/true).ok());
  int rewritten = 0;
  for (const auto& n : g.nodes) {
    if (n.op_type == "ConvInteger") {
      ++rewritten;
      EXPECT_EQ(g.values[n.inputs[0]].shape.size(), 4u) << n.Describe();
      EXPECT_EQ(g.values[n.inputs[1]].shape, (ir::Shape{6, 2, 1, 3})) << n.Describe();
      EXPECT_EQ(g.values[n.outputs[0]].dtype, ir::DType::kI32);
    }
    if (n.op_type == "Conv") EXPECT_EQ(g.values[n.inputs[0]].shape.size(), 3u) << "the float Conv stays 1-D";
  }
  EXPECT_EQ(rewritten, 1);
  EXPECT_EQ(g.values[g.outputs[0]].name, "y");

  auto in = ir::TensorData::Make(ir::DType::kU8, {1, 4, 23});
  for (size_t i = 0; i < in->bytes.size(); ++i) in->bytes[i] = static_cast<uint8_t>((i * 53 + 11) % 256);
  auto zero = ir::TensorData::Make(ir::DType::kU8, {});
  zero->bytes[0] = 131;
  auto inf = ir::TensorData::FromFloats({1, 4, 23}, Ramp(92, 0.71f, 0.2f));
  auto want = Interpret(orig, {{x, in}, {xz, zero}, {xf, inf}});
  auto got = Interpret(g, {{x, in}, {xz, zero}, {xf, inf}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const auto& a = want.value()[orig.outputs[0]];
  const auto& b = got.value()[g.outputs[0]];
  ASSERT_EQ(a->shape, b->shape);
  EXPECT_EQ(a->bytes, b->bytes);
  int32_t nonzero = 0;
  for (size_t i = 0; i < a->bytes.size(); i += 4) nonzero += a->bytes[i] != 0;
  EXPECT_GT(nonzero, 0);
}

// MatMul + row bias becomes Gemm with C (rank 3 through Reshapes, the Gelu
// after it moved next to the Gemm so FuseActivations can fold it); a rank-2
// MatMul + bias becomes one Gemm; a bias that is not a row, or a MatMul
// output read twice, stays as it is. Same results before and after.
TEST(FuseMatMulBias, BiasIntoGemmAndActivationNextToIt) {
  ir::Graph g;
  const int x = AddTensor(g, "x", {2, 3, 4});
  const int x2 = AddTensor(g, "x2", {5, 4});
  g.inputs = {x, x2};
  const int w = g.AddConstant("w", ir::TensorData::FromFloats({4, 6}, Ramp(24, 0.41f, 0.f)));
  const int bias = g.AddConstant("bias", ir::TensorData::FromFloats({1, 1, 6}, Ramp(6, 1.3f, 0.2f)));
  const int bias2 = g.AddConstant("bias2", ir::TensorData::FromFloats({6}, Ramp(6, 0.7f, -0.1f)));
  const int full = g.AddConstant("full", ir::TensorData::FromFloats({5, 6}, Ramp(30, 0.3f, 0.f)));
  const int y = AddTensor(g, "y", {2, 3, 6}), z = AddTensor(g, "z", {2, 3, 6}), a = AddTensor(g, "a", {2, 3, 6});
  AddNode(g, "MatMul", {x, w}, {y}, "mm");
  AddNode(g, "Add", {bias, y}, {z}, "add");
  AddNode(g, "Gelu", {z}, {a}, "gelu");
  const int y2 = AddTensor(g, "y2", {5, 6}), z2 = AddTensor(g, "z2", {5, 6});
  AddNode(g, "MatMul", {x2, w}, {y2}, "mm2");
  AddNode(g, "Add", {y2, bias2}, {z2}, "add2");
  const int y3 = AddTensor(g, "y3", {5, 6}), z3 = AddTensor(g, "z3", {5, 6});
  AddNode(g, "MatMul", {x2, w}, {y3}, "mm3");
  AddNode(g, "Add", {y3, full}, {z3}, "add3");  // not a row: stays
  g.outputs = {a, z2, z3};
  const ir::Graph orig = g;

  ASSERT_TRUE(FuseMatMulBias(g).ok());
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Gemm", "Gelu", "Reshape", "Gemm", "MatMul", "Add"}));
  EXPECT_EQ(g.nodes[1].name, "mm");
  EXPECT_EQ(g.nodes[2].inputs[0], g.nodes[1].outputs[0]) << "the Gelu reads the Gemm directly";
  EXPECT_EQ(g.values[g.outputs[0]].name, "a");

  auto in = ir::TensorData::FromFloats({2, 3, 4}, Ramp(24, 0.9f, 0.1f));
  auto in2 = ir::TensorData::FromFloats({5, 4}, Ramp(20, 0.6f, -0.2f));
  auto want = Interpret(orig, {{x, in}, {x2, in2}});
  auto got = Interpret(g, {{x, in}, {x2, in2}});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t k = 0; k < 3; ++k) {
    const auto wv = Floats(want.value()[orig.outputs[k]]), gv = Floats(got.value()[g.outputs[k]]);
    ASSERT_EQ(wv.size(), gv.size());
    for (size_t i = 0; i < wv.size(); ++i) EXPECT_NEAR(gv[i], wv[i], 1e-5f * (1 + std::fabs(wv[i]))) << k << " " << i;
  }
}

TEST(EliminateDeadNodes, RemovesDeadChainsAndCompactsValues) {
  ir::Graph g;
  int x = AddTensor(g, "x", {4});
  g.inputs = {x};
  int unused_const = g.AddConstant("unused", ir::TensorData::FromFloats({1}, {1}));
  int a = AddTensor(g, "a", {4}), dead1 = AddTensor(g, "dead1", {4}), dead2 = AddTensor(g, "dead2", {4});
  AddNode(g, "Relu", {x}, {a}, "live");
  AddNode(g, "Relu", {x}, {dead1}, "dead_a");
  AddNode(g, "Tanh", {dead1}, {dead2}, "dead_b");
  g.outputs = {a};
  (void)unused_const;
  ASSERT_TRUE(EliminateDeadNodes(g).ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "live");
  ASSERT_EQ(g.values.size(), 2u);
  EXPECT_EQ(g.values[g.inputs[0]].name, "x");
  EXPECT_EQ(g.values[g.outputs[0]].name, "a");
  EXPECT_EQ(g.values[g.nodes[0].inputs[0]].name, "x");
  EXPECT_EQ(g.values[g.nodes[0].outputs[0]].name, "a");
  EXPECT_TRUE(g.Validate().ok());
}

TEST(RemoveIdentities, RewiresConsumersAndKeepsOutputNames) {
  ir::Graph g;
  int x = AddTensor(g, "x", {2, 3});
  g.inputs = {x};
  int r = AddTensor(g, "r", {2, 3}), i1 = AddTensor(g, "i1", {2, 3}), t = AddTensor(g, "t", {2, 3});
  int out = AddTensor(g, "out", {2, 3});
  int same_shape = g.AddConstant("shape", ir::TensorData::FromInts({2}, {2, 3}));
  AddNode(g, "Relu", {x}, {r}, "relu");
  AddNode(g, "Identity", {r}, {i1}, "id");
  AddNode(g, "Reshape", {i1, same_shape}, {t}, "noop_reshape");
  AddNode(g, "Dropout", {t}, {out}, "drop");  // graph output: relu must write "out"
  g.outputs = {out};
  ASSERT_TRUE(RemoveIdentities(g).ok());
  ASSERT_TRUE(EliminateDeadNodes(g).ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
  EXPECT_EQ(g.values[g.nodes[0].outputs[0]].name, "out");
  EXPECT_EQ(g.values[g.outputs[0]].name, "out");
  EXPECT_TRUE(g.Validate().ok());
}

TEST(RemoveIdentities, KeepsIdentityBetweenInputAndOutput) {
  ir::Graph g;
  int x = AddTensor(g, "x", {2});
  int y = AddTensor(g, "y", {2});
  g.inputs = {x};
  AddNode(g, "Identity", {x}, {y}, "id");
  g.outputs = {y};
  ASSERT_TRUE(RemoveIdentities(g).ok());
  EXPECT_EQ(g.nodes.size(), 1u);
}

TEST(FoldConstants, EvaluatesAllConstantNodes) {
  ASSERT_NE(ops::FindOp("Add"), nullptr) << "Add is not registered yet (src/ops)";
  ir::Graph g;
  int x = AddTensor(g, "x", {2});
  g.inputs = {x};
  int a = g.AddConstant("a", ir::TensorData::FromFloats({2}, {1, 2}));
  int b = g.AddConstant("b", ir::TensorData::FromFloats({2}, {10, 20}));
  int c = AddTensor(g, "c", {2}), y = AddTensor(g, "y", {2});
  AddNode(g, "Add", {a, b}, {c}, "const_add");
  AddNode(g, "Add", {x, c}, {y}, "add");
  g.outputs = {y};
  ASSERT_TRUE(FoldConstants(g).ok());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "add");
  ASSERT_TRUE(g.values[c].is_constant());
  EXPECT_EQ(Floats(g.values[c].constant), (std::vector<float>{11, 22}));
}

TEST(RunDefaultPasses, LevelZeroDoesNotFoldBatchNorm) {
  ConvBn t0, t1;
  ASSERT_TRUE(RunDefaultPasses(t0.g, 0).ok());
  EXPECT_EQ(t0.g.nodes.size(), 2u);
  ASSERT_TRUE(RunDefaultPasses(t1.g, 1).ok());
  EXPECT_EQ(t1.g.nodes.size(), 1u);
  // The replaced weights are gone from the value table.
  EXPECT_EQ(FindValue(t1.g, "w"), -1);
  EXPECT_EQ(t1.g.values[t1.g.outputs[0]].name, "y");
}

// x (uint8) -> DequantizeLinear -> GlobalAveragePool -> QuantizeLinear -> y.
// Channel 0 averages to exactly halfway between two quantized values (the
// case torch-quantized resnets hit in 2 of 64 channels), channel 1 does not.
struct QdqPool {
  ir::Graph g;
  int x, y;
  explicit QdqPool(bool per_channel_scale = false) {
    x = AddTensor(g, "x", {1, 2, 2, 2}, ir::DType::kU8);
    g.inputs = {x};
    int s = per_channel_scale ? g.AddConstant("s", ir::TensorData::FromFloats({2}, {0.1f, 0.1f}))
                              : g.AddConstant("s", ir::TensorData::FromFloats({}, {0.1f}));
    auto zx_t = ir::TensorData::Make(ir::DType::kU8, {});
    zx_t->mutable_data<uint8_t>()[0] = 3;
    auto zy_t = ir::TensorData::Make(ir::DType::kU8, {});
    zy_t->mutable_data<uint8_t>()[0] = 5;
    int zx = g.AddConstant("zx", zx_t), zy = g.AddConstant("zy", zy_t);
    int d = AddTensor(g, "d", {1, 2, 2, 2}), p = AddTensor(g, "p", {1, 2, 1, 1});
    y = AddTensor(g, "y", {1, 2, 1, 1}, ir::DType::kU8);
    AddNode(g, "DequantizeLinear", {x, s, zx}, {d}, "dq");
    AddNode(g, "GlobalAveragePool", {d}, {p}, "pool");
    AddNode(g, "QuantizeLinear", {p, s, zy}, {y}, "q");
    g.outputs = {y};
  }
  std::vector<uint8_t> Run() const {
    auto in = ir::TensorData::Make(ir::DType::kU8, {1, 2, 2, 2});
    const uint8_t v[8] = {4, 5, 6, 7, 6, 7, 7, 7};  // minus zx: sums 10 and 15 over 4
    std::memcpy(in->mutable_data<uint8_t>(), v, 8);
    auto vals = Interpret(g, {{x, in}});
    EXPECT_TRUE(vals.ok()) << vals.status().message();
    if (!vals.ok()) return {};
    const ir::TensorPtr& out = vals.value()[g.outputs[0]];
    return std::vector<uint8_t>(out->data<uint8_t>(), out->data<uint8_t>() + out->numel());
  }
};

TEST(ExactQdqGlobalAveragePool, RoundsExactTiesHalfToEven) {
  QdqPool t;
  ASSERT_TRUE(ExactQdqGlobalAveragePool(t.g).ok());
  ASSERT_TRUE(EliminateDeadNodes(t.g).ok());
  ASSERT_TRUE(t.g.Validate().ok());
  for (const auto& n : t.g.nodes) {
    EXPECT_NE(n.op_type, "GlobalAveragePool");
    EXPECT_NE(n.op_type, "DequantizeLinear");
  }
  EXPECT_EQ(t.g.values[t.g.outputs[0]].name, "y");
  // 10 / 4 = 2.5 -> 2 (even), + 5; 15 / 4 = 3.75 -> 4, + 5.
  EXPECT_EQ(t.Run(), (std::vector<uint8_t>{7, 9}));
}

TEST(ExactQdqGlobalAveragePool, LeavesPerChannelScalesAndSharedValuesAlone) {
  QdqPool per_channel(true);
  const size_t nodes = per_channel.g.nodes.size();
  ASSERT_TRUE(ExactQdqGlobalAveragePool(per_channel.g).ok());
  EXPECT_EQ(per_channel.g.nodes.size(), nodes);
  QdqPool shared;
  shared.g.outputs.push_back(FindValue(shared.g, "p"));  // the float mean is also an output
  ASSERT_TRUE(ExactQdqGlobalAveragePool(shared.g).ok());
  EXPECT_EQ(shared.g.nodes.size(), nodes);
}

TEST(RunDefaultPasses, ExactQdqGlobalAveragePoolRunsAtLevelZero) {
  QdqPool t;
  ASSERT_TRUE(RunDefaultPasses(t.g, 0).ok());
  EXPECT_EQ(t.Run(), (std::vector<uint8_t>{7, 9}));
}

}  // namespace
}  // namespace fcb::passes

namespace fcb::passes {
namespace {

using testing::AddNode;
using testing::AddTensor;
using testing::Interpret;

// x [2, 3, 8] -> the decomposed layer norm of opsets < 17; `pow` picks
// Pow(d, 2) (torch.onnx) or Mul(d, d); gamma/beta optional. `leak` also makes
// an intermediate a graph output; `axis` is the reduced axis.
struct DecomposedLayerNorm {
  ir::Graph g;
  int x = -1, d = -1;
  DecomposedLayerNorm(bool pow, bool affine, bool leak = false, int64_t axis = -1) {
    g.opset = 13;
    x = AddTensor(g, "x", {2, 3, 8});
    g.inputs = {x};
    const ir::Shape s{2, 3, 8}, r = axis == -1 ? ir::Shape{2, 3, 1} : ir::Shape{2, 1, 8};
    int m = AddTensor(g, "m", r), sq = AddTensor(g, "sq", s), v = AddTensor(g, "v", r);
    int ve = AddTensor(g, "ve", r), sd = AddTensor(g, "sd", r), y = AddTensor(g, "y", s);
    d = AddTensor(g, "d", s);
    AddNode(g, "ReduceMean", {x}, {m}, "mean").SetInts("axes", {axis});
    AddNode(g, "Sub", {x, m}, {d}, "sub");
    if (pow) {
      AddNode(g, "Pow", {d, g.AddConstant("two", ir::TensorData::FromFloats({}, {2.f}))}, {sq}, "pow");
    } else {
      AddNode(g, "Mul", {d, d}, {sq}, "square");
    }
    AddNode(g, "ReduceMean", {sq}, {v}, "var").SetInts("axes", {axis});
    AddNode(g, "Add", {v, g.AddConstant("eps", ir::TensorData::FromFloats({}, {1e-5f}))}, {ve}, "add_eps");
    AddNode(g, "Sqrt", {ve}, {sd}, "sqrt");
    AddNode(g, "Div", {d, sd}, {y}, "div");
    int out = y;
    if (affine) {
      std::vector<float> gamma(8), beta(8);
      for (int i = 0; i < 8; ++i) gamma[i] = 0.5f + 0.1f * i, beta[i] = 0.05f * i - 0.2f;
      int yg = AddTensor(g, "yg", s), yb = AddTensor(g, "yb", s);
      AddNode(g, "Mul", {y, g.AddConstant("gamma", ir::TensorData::FromFloats({1, 1, 8}, gamma))}, {yg}, "scale");
      AddNode(g, "Add", {g.AddConstant("beta", ir::TensorData::FromFloats({8}, beta)), yg}, {yb}, "shift");
      out = yb;
    }
    g.outputs = {out};
    if (leak) g.outputs.push_back(d);
  }
  std::vector<float> Run() const {
    std::vector<float> in(48);
    for (int i = 0; i < 48; ++i) in[i] = std::sin(0.7f * i) * 3.f + (i % 8 == 0 ? 5.f : 0.f);
    auto vals = Interpret(g, {{x, ir::TensorData::FromFloats({2, 3, 8}, in)}});
    EXPECT_TRUE(vals.ok()) << vals.status().message();
    return vals.ok() ? testing::Floats(vals.value()[g.outputs[0]]) : std::vector<float>{};
  }
  int Count(std::string_view op) const {
    int c = 0;
    for (const auto& n : g.nodes) c += n.op_type == op;
    return c;
  }
};

TEST(FuseLayerNorm, BothSquareFormsWithAndWithoutAffineBecomeOneNode) {
  for (bool pow : {false, true})
    for (bool affine : {false, true}) {
      SCOPED_TRACE(std::string(pow ? "Pow" : "Mul") + (affine ? " + gamma/beta" : ""));
      DecomposedLayerNorm t(pow, affine);
      const std::vector<float> want = t.Run();
      ASSERT_TRUE(FuseLayerNorm(t.g).ok());
      ASSERT_TRUE(EliminateDeadNodes(t.g).ok());
      ASSERT_TRUE(t.g.Validate().ok());
      ASSERT_EQ(t.g.nodes.size(), 1u);
      EXPECT_EQ(t.g.nodes[0].op_type, "LayerNormalization");
      EXPECT_EQ(t.g.nodes[0].name, affine ? "shift" : "div");
      EXPECT_EQ(t.g.nodes[0].inputs.size(), affine ? 3u : 2u);
      EXPECT_EQ(t.g.values[t.g.outputs[0]].name, affine ? "yb" : "y");
      const std::vector<float> got = t.Run();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
    }
}

TEST(FuseLayerNorm, LeavesPatternsItCannotReplace) {
  DecomposedLayerNorm leak(true, true, /*leak=*/true);  // d is also a graph output
  ASSERT_TRUE(FuseLayerNorm(leak.g).ok());
  EXPECT_EQ(leak.Count("LayerNormalization"), 0);
  EXPECT_EQ(leak.Count("ReduceMean"), 2);
  DecomposedLayerNorm middle(false, false, false, /*axis=*/1);  // not the last axis
  ASSERT_TRUE(FuseLayerNorm(middle.g).ok());
  EXPECT_EQ(middle.Count("LayerNormalization"), 0);
}

}  // namespace
}  // namespace fcb::passes

namespace fcb::passes {
namespace {

// x [4, 16] -> x/2 (1 + erf(x/sqrt 2)) in association `form`: 0 (x*a)*0.5
// (torch.onnx), 1 (x*0.5)*a, 2 x*(a*0.5); `mul` scales by 1/sqrt 2 with a
// Mul instead of dividing; `leak` makes Erf's output a graph output too.
struct DecomposedGelu {
  ir::Graph g;
  int x = -1;
  DecomposedGelu(int form, bool mul, bool leak = false) {
    g.opset = 13;
    const ir::Shape s{4, 16};
    x = AddTensor(g, "x", s);
    g.inputs = {x};
    auto scalar = [&](const char* name, float v) { return g.AddConstant(name, ir::TensorData::FromFloats({}, {v})); };
    int d = AddTensor(g, "d", s), e = AddTensor(g, "e", s), a = AddTensor(g, "a", s), t = AddTensor(g, "t", s);
    int y = AddTensor(g, "y", s);
    if (mul) AddNode(g, "Mul", {scalar("r2", 0.70710678f), x}, {d}, "scale");
    else AddNode(g, "Div", {x, scalar("s2", 1.41421356f)}, {d}, "scale");
    AddNode(g, "Erf", {d}, {e}, "erf");
    AddNode(g, "Add", {scalar("one", 1.f), e}, {a}, "add1");
    if (form == 0) {
      AddNode(g, "Mul", {x, a}, {t}, "mul_x");
      AddNode(g, "Mul", {t, scalar("half", 0.5f)}, {y}, "mul_half");
    } else if (form == 1) {
      AddNode(g, "Mul", {scalar("half", 0.5f), x}, {t}, "half_x");
      AddNode(g, "Mul", {a, t}, {y}, "mul_half");
    } else {
      AddNode(g, "Mul", {a, scalar("half", 0.5f)}, {t}, "half_a");
      AddNode(g, "Mul", {t, x}, {y}, "mul_half");
    }
    g.outputs = {y};
    if (leak) g.outputs.push_back(e);
  }
  std::vector<float> Run() const {
    std::vector<float> in(64);
    for (int i = 0; i < 64; ++i) in[i] = (i - 32) * 0.23f;
    auto vals = Interpret(g, {{x, ir::TensorData::FromFloats({4, 16}, in)}});
    EXPECT_TRUE(vals.ok()) << vals.status().message();
    return vals.ok() ? testing::Floats(vals.value()[g.outputs[0]]) : std::vector<float>{};
  }
};

TEST(FuseGelu, EveryAssociationBecomesOneGeluNode) {
  for (int form = 0; form < 3; ++form)
    for (bool mul : {false, true}) {
      SCOPED_TRACE("form " + std::to_string(form) + (mul ? " (Mul by 1/sqrt 2)" : " (Div by sqrt 2)"));
      DecomposedGelu t(form, mul);
      const std::vector<float> want = t.Run();
      ASSERT_TRUE(FuseGelu(t.g).ok());
      ASSERT_TRUE(EliminateDeadNodes(t.g).ok());
      ASSERT_TRUE(t.g.Validate().ok());
      ASSERT_EQ(t.g.nodes.size(), 1u);
      EXPECT_EQ(t.g.nodes[0].op_type, "Gelu");
      EXPECT_EQ(t.g.nodes[0].name, "mul_half");
      EXPECT_EQ(t.g.values[t.g.outputs[0]].name, "y");
      const std::vector<float> got = t.Run();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << i;
    }
}

TEST(FuseGelu, LeavesAPatternWhoseIntermediateIsUsedElsewhere) {
  DecomposedGelu t(0, false, /*leak=*/true);
  ASSERT_TRUE(FuseGelu(t.g).ok());
  for (const auto& n : t.g.nodes) EXPECT_NE(n.op_type, "Gelu");
  EXPECT_EQ(t.g.nodes.size(), 5u);
}

}  // namespace
}  // namespace fcb::passes

namespace fcb::passes {
namespace {

// x [rows, K] -> MatMul(x, DequantizeLinear(Transpose(wq [N, K] int8), scale,
// zero_point, axis)) -> y [rows, N].
struct DequantMatMul {
  static constexpr int64_t K = 70, N = 37;
  ir::Graph g;
  int x = -1, y = -1;
  int64_t rows = 3;
  explicit DequantMatMul(bool per_row = false, bool weight_is_input = false, int64_t m = 3) : rows(m) {
    x = AddTensor(g, "x", {rows, K});
    g.inputs = {x};
    auto wq = ir::TensorData::Make(ir::DType::kI8, {N, K});
    for (int64_t i = 0; i < N * K; ++i) wq->mutable_data<int8_t>()[i] = static_cast<int8_t>((i * 37) % 255 - 127);
    int w = -1;
    if (weight_is_input) {
      w = AddTensor(g, "wq", {N, K}, ir::DType::kI8);
      g.inputs.push_back(w);
    } else {
      w = g.AddConstant("wq", wq);
    }
    const int64_t len = per_row ? K : N;  // per column: the transposed weight's axis 1 (N)
    std::vector<float> s(len);
    auto zp = ir::TensorData::Make(ir::DType::kI8, {len});
    for (int64_t i = 0; i < len; ++i) {
      s[i] = 0.01f + 0.001f * static_cast<float>(i);
      zp->mutable_data<int8_t>()[i] = static_cast<int8_t>(i % 7 - 3);
    }
    const int sc = g.AddConstant("scale", ir::TensorData::FromFloats({len}, s));
    const int z = g.AddConstant("zero_point", zp);
    const int wt = AddTensor(g, "wq_t", {K, N}, ir::DType::kI8);
    AddNode(g, "Transpose", {w}, {wt}, "transpose").SetInts("perm", {1, 0});
    const int wf = AddTensor(g, "w", {K, N});
    AddNode(g, "DequantizeLinear", {wt, sc, z}, {wf}, "dq").SetInt("axis", per_row ? 0 : 1);
    y = AddTensor(g, "y", {rows, N});
    AddNode(g, "MatMul", {x, wf}, {y}, "mm");
    g.outputs = {y};
  }
  ir::TensorPtr Input() const { return ir::TensorData::FromFloats({rows, K}, Ramp(rows * K, 0.37f, 0.1f)); }
};

TEST(WeightOnlyInt8MatMul, DequantizedTransposedWeightBecomesMatMulNBits) {
  // Three rows with a weight above the (lowered) fold limit; one row with any
  // weight.
  for (int64_t rows : {3, 1}) {
    DequantMatMul t(false, false, rows);
    auto want = Interpret(t.g, {{t.x, t.Input()}});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(WeightOnlyInt8MatMul(t.g, rows == 1 ? kWeightOnlyFoldLimit : 0).ok());
    ASSERT_TRUE(EliminateDeadNodes(t.g).ok());
    // Only the MatMulNBits node is left: no Transpose or DequantizeLinear of
    // the weight runs.
    ASSERT_EQ(t.g.nodes.size(), 1u);
    const ir::Node& n = t.g.nodes[0];
    EXPECT_EQ(n.op_type, "com.microsoft.MatMulNBits");
    EXPECT_EQ(n.GetInt("bits", 0), 8);
    EXPECT_EQ(n.GetInt("K", 0), DequantMatMul::K);
    EXPECT_EQ(n.GetInt("N", 0), DequantMatMul::N);
    EXPECT_EQ(t.g.values[n.outputs[0]].name, "y");
    std::vector<const ir::TensorData*> in;
    const auto x = t.Input();
    for (int i : n.inputs) in.push_back(i == t.g.inputs[0] ? x.get() : i >= 0 ? t.g.values[i].constant.get() : nullptr);
    auto got = ops::Evaluate(n.op_type, ops::AttrsFromNode(n), in, 1);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto ref = Floats(want.value()[t.y]), out = Floats(got.value()[0]);
    ASSERT_EQ(ref.size(), out.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << i;
  }
}

TEST(WeightOnlyInt8MatMul, LeavesOtherFormsUnchanged) {
  // Per-row scales (along K): not uniform within a block along K.
  // A weight that is not a constant. A weight within the fold limit under 3
  // rows.
  for (int c = 0; c < 3; ++c) {
    DequantMatMul t(c == 0, c == 1);
    const size_t nodes = t.g.nodes.size(), values = t.g.values.size();
    ASSERT_TRUE(WeightOnlyInt8MatMul(t.g, c == 2 ? DequantMatMul::K * DequantMatMul::N : 0).ok());
    ASSERT_EQ(t.g.nodes.size(), nodes) << c;
    EXPECT_EQ(t.g.values.size(), values) << c;
    EXPECT_EQ(t.g.nodes.back().op_type, "MatMul") << c;
    EXPECT_EQ(t.g.nodes.back().domain, "") << c;
  }
}


// The graphs of the FuseKvCacheAttention tests: inputs q, k, v and mask,
// nodes added one output at a time, and the two checks every form gets.
struct AttentionGraphBuilder {
  ir::Graph g;
  int q, k, v, mask;
  AttentionGraphBuilder(const ir::Shape& q_shape, const ir::Shape& kv_shape, const ir::Shape& mask_shape) {
    q = AddTensor(g, "q", q_shape);
    k = AddTensor(g, "k", kv_shape);
    v = AddTensor(g, "v", kv_shape);
    mask = AddTensor(g, "mask", mask_shape);
    g.inputs = {q, k, v, mask};
  }
  // A node `node` computing the value `name` of `shape` from `in` (its id in
  // *out); the node is returned for its attributes.
  ir::Node& Op(const std::string& op, std::vector<int> in, const std::string& name, const ir::Shape& shape,
               const std::string& node, int* out) {
    *out = AddTensor(g, name, shape);
    return AddNode(g, op, std::move(in), {*out}, node);
  }
  int Op(const std::string& op, std::vector<int> in, const std::string& name, const ir::Shape& shape,
         const std::string& node) {
    int out;
    Op(op, std::move(in), name, shape, node, &out);
    return out;
  }
  int Constant(const std::string& name, ir::TensorPtr t) { return g.AddConstant(name, std::move(t)); }
  // Kt = Transpose(k), scores = (q @ Kt) * scale: the product's first steps.
  int ScaledScores(int q_in, int k_in, std::vector<int64_t> perm, const ir::Shape& kt_shape, const ir::Shape& qk_shape,
                   float scale) {
    int kt;
    Op("Transpose", {k_in}, "kt", kt_shape, "transpose", &kt).SetInts("perm", std::move(perm));
    const int qk = Op("MatMul", {q_in, kt}, "qk", qk_shape, "qk");
    const int c = Constant("scale", ir::TensorData::FromFloats({}, {scale}));
    return Op("Mul", {qk, c}, "scores", qk_shape, "scale");
  }

  // Ramps as the inputs' values.
  std::map<int, ir::TensorPtr> Inputs() const {
    auto ramp = [&](int id, float scale, float offset) {
      const ir::Shape& shape = g.values[id].shape;
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      return ir::TensorData::FromFloats(shape, Ramp(n, scale, offset));
    };
    return {{q, ramp(q, 0.37f, 0.f)},
            {k, ramp(k, 0.53f, 0.1f)},
            {v, ramp(v, 0.71f, -0.2f)},
            {mask, ramp(mask, 1.3f, -1.f)}};
  }
  // FuseKvCacheAttention (no cache, dense attention fused) leaves one
  // AttentionFused, which check_node checks further, whose output y equals
  // the unfused graph's on Inputs().
  void ExpectFusedAsUnfused(int y, const std::function<void(const ir::Node&)>& check_node) {
    const auto in = Inputs();
    auto before = Interpret(g, in);
    ASSERT_TRUE(before.ok()) << before.status().message();
    const auto want = Floats(before.value()[y]);
    int appends = -1, fused = -1;
    ASSERT_TRUE(FuseKvCacheAttention(g, 0, {}, true, &appends, &fused).ok());
    EXPECT_EQ(appends, 0);
    EXPECT_EQ(fused, 1);
    ASSERT_EQ(g.nodes.size(), 1u);  // the rest is dead
    const ir::Node& n = g.nodes[0];
    EXPECT_EQ(n.op_type, ops::opname::AttentionFused);
    check_node(n);
    std::map<int, ir::TensorPtr> in2;  // values are renumbered by the dead-node pass
    for (const auto& [id, t] : in) in2[FindValue(g, g.values[id].name)] = t;
    auto after = Interpret(g, in2);
    ASSERT_TRUE(after.ok()) << after.status().message();
    const auto got = Floats(after.value()[FindValue(g, "y")]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
  }
  // FuseKvCacheAttention fuses nothing and leaves every node.
  void ExpectUnfused() {
    const size_t nodes = g.nodes.size();
    int appends = -1, fused = -1;
    ASSERT_TRUE(FuseKvCacheAttention(g, 0, {}, true, &appends, &fused).ok());
    EXPECT_EQ(fused, 0);
    EXPECT_EQ(g.nodes.size(), nodes);
  }
};

// Scaled dot-product attention as plain exporters write it, grouped KV heads
// repeated by Unsqueeze -> Expand -> Reshape (q [1,4,3,8], k/v [1,2,5,8],
// mask [3,5]): FuseKvCacheAttention makes it one AttentionFused over the
// unrepeated K and V, with the same outputs as the unfused graph; a scores
// value that is also a graph output keeps the pattern unfused.
struct AttentionGraph : AttentionGraphBuilder {
  int scores, y;
  explicit AttentionGraph(bool scores_out) : AttentionGraphBuilder({1, 4, 3, 8}, {1, 2, 5, 8}, {3, 5}) {
    auto repeat = [&](int t, const std::string& n) {
      int axes = Constant(n + "_axes", ir::TensorData::FromInts({1}, {2}));
      int u = Op("Unsqueeze", {t, axes}, n + "_u", {1, 2, 1, 5, 8}, n + "_unsqueeze");
      int es = Constant(n + "_es", ir::TensorData::FromInts({5}, {1, 2, 2, 5, 8}));
      int e = Op("Expand", {u, es}, n + "_e", {1, 2, 2, 5, 8}, n + "_expand");
      int rs = Constant(n + "_rs", ir::TensorData::FromInts({4}, {1, 4, 5, 8}));
      return Op("Reshape", {e, rs}, n + "_r", {1, 4, 5, 8}, n + "_reshape");
    };
    const int kr = repeat(k, "k"), vr = repeat(v, "v");
    scores = ScaledScores(q, kr, {0, 1, 3, 2}, {1, 4, 8, 5}, {1, 4, 3, 5}, 0.25f);
    const int masked = Op("Add", {scores, mask}, "masked", {1, 4, 3, 5}, "mask");
    int probs;
    Op("Softmax", {masked}, "probs", {1, 4, 3, 5}, "softmax", &probs).SetInt("axis", -1);
    y = Op("MatMul", {probs, vr}, "y", {1, 4, 3, 8}, "pv");
    g.outputs = {y};
    if (scores_out) g.outputs.push_back(scores);
  }
};

TEST(FuseKvCacheAttention, FusesExporterAttentionWithGroupedHeads) {
  AttentionGraph a(false);
  ASSERT_NO_FATAL_FAILURE(a.ExpectFusedAsUnfused(a.y, [&](const ir::Node& n) {
    EXPECT_EQ(n.inputs, (std::vector<int>{a.q, a.k, a.v, a.mask}));
    EXPECT_EQ(n.GetFloat(ops::attr::kScale, 0.f), 0.25f);
    EXPECT_EQ(n.GetInt(ops::attr::kRowCapacity, -1), 0);
  }));
  // Only attentions over a KvAppend when dense fusion is off.
  AttentionGraph b(false);
  int appends = -1, fused = -1;
  ASSERT_TRUE(FuseKvCacheAttention(b.g, 128, {}, false, &appends, &fused).ok());
  EXPECT_EQ(fused, 0);
}

TEST(FuseKvCacheAttention, AnIntermediateUsedElsewhereKeepsThePattern) { AttentionGraph(true).ExpectUnfused(); }

// The batched-matrix form Hugging Face's Whisper exports (q, k, v [1,2,.,4]
// reshaped to [2,.,4], K transposed by perm 0 2 1, the scores reshaped to
// [1,2,3,5] for the mask and back, the probabilities through the same pair
// of reshapes, the [2,3,4] result reshaped to [1,2,3,4]): one AttentionFused
// writing the last Reshape's output, equal to the unfused graph.
struct BmmAttentionGraph : AttentionGraphBuilder {
  int probs4, y;
  explicit BmmAttentionGraph(bool probs_out) : AttentionGraphBuilder({1, 2, 3, 4}, {1, 2, 5, 4}, {1, 1, 3, 5}) {
    auto reshape = [&](int x, const std::string& n, const ir::Shape& to) {
      int s = Constant(n + "_shape", ir::TensorData::FromInts({static_cast<int64_t>(to.size())}, to));
      return Op("Reshape", {x, s}, n, to, n + "_reshape");
    };
    const int q3 = reshape(q, "q3", {2, 3, 4}), k3 = reshape(k, "k3", {2, 5, 4}), v3 = reshape(v, "v3", {2, 5, 4});
    const int scores = ScaledScores(q3, k3, {0, 2, 1}, {2, 4, 5}, {2, 3, 5}, 0.5f);
    const int scores4 = reshape(scores, "scores4", {1, 2, 3, 5});
    const int masked = Op("Add", {scores4, mask}, "masked", {1, 2, 3, 5}, "mask");
    const int masked3 = reshape(masked, "masked3", {2, 3, 5});
    int probs;
    Op("Softmax", {masked3}, "probs", {2, 3, 5}, "softmax", &probs).SetInt("axis", 2);
    probs4 = reshape(probs, "probs4", {1, 2, 3, 5});
    const int probs3 = reshape(probs4, "probs3", {2, 3, 5});
    const int o3 = Op("MatMul", {probs3, v3}, "o3", {2, 3, 4}, "pv");
    y = reshape(o3, "y", {1, 2, 3, 4});
    g.outputs = {y};
    if (probs_out) g.outputs.push_back(probs4);
  }
};

TEST(FuseKvCacheAttention, FusesTheBatchedMatrixFormThroughHeadReshapes) {
  BmmAttentionGraph a(false);
  // One node: every reshape, the transpose, both MatMuls and the softmax are gone.
  ASSERT_NO_FATAL_FAILURE(a.ExpectFusedAsUnfused(a.y, [&](const ir::Node& n) {
    std::vector<std::string> names;  // values are renumbered by the dead-node pass
    for (int v : n.inputs) names.push_back(a.g.values[v].name);
    for (int v : n.outputs) names.push_back(a.g.values[v].name);
    EXPECT_EQ(names, (std::vector<std::string>{"q", "k", "v", "mask", "y"}));
    EXPECT_EQ(n.GetFloat(ops::attr::kScale, 0.f), 0.5f);
  }));
}

TEST(FuseKvCacheAttention, BatchedMatrixFormWithItsProbabilitiesAnOutputStaysUnfused) {
  BmmAttentionGraph(true).ExpectUnfused();
}

}  // namespace
}  // namespace fcb::passes
