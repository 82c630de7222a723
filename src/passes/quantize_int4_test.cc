// QuantizeInt4 (precision "int4") and its block quantization against a scalar
// reference written here in double with its own half-to-even rounding: ties,
// the clipped opposite extreme, a positive extreme (negative scale), all-zero
// blocks, a K that is not a multiple of 32 (padding nibbles), the nibble
// order; then the graph rewrite: which MatMul/Gemm/Gather become 4-bit, which
// 8-bit (the head rule, embeddings by token ids), which stay float, and the
// rewritten graph's outputs equal to the float graph run on the dequantized
// weights (the reference kernels through ops::Evaluate).
#include "passes/quantize_int4.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/names.h"
#include "passes/passes.h"
#include "passes/test_interpreter.h"
#include "test_util.h"

namespace fcb::passes {
namespace {

using fcb::testing::AddNode;
using fcb::testing::AddTensor;
using fcb::testing::Floats;
using fcb::testing::Interpret;

// Round half to even, by hand.
double HalfEven(double x) {
  const double f = std::floor(x), d = x - f;
  if (d < 0.5) return f;
  if (d > 0.5) return f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

// The scalar reference of quantize_int4.h: returns the scale, fills q.
float RefBlock(const std::vector<float>& w, int bits, std::vector<int>* q) {
  const int lo = -(1 << (bits - 1)), hi = -lo - 1;
  float e = 0;
  for (float v : w)
    if (std::fabs(v) > std::fabs(e)) e = v;
  q->assign(w.size(), 0);
  if (e == 0) return 0.0f;
  const float scale = e / static_cast<float>(lo);
  for (size_t i = 0; i < w.size(); ++i) {
    const float r = w[i] / scale;  // float32 division, as specified
    (*q)[i] = static_cast<int>(std::min<double>(hi, std::max<double>(lo, HalfEven(r))));
  }
  return scale;
}

std::vector<float> Wave(int64_t n, float freq, float amp, float phase = 0.f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = amp * std::sin(freq * i + phase) * (0.3f + 0.7f * std::cos(0.11f * i));
  return v;
}

void ExpectBlock(const std::vector<float>& w, int bits, float want_scale, const std::vector<int>& want_q) {
  std::vector<int8_t> q(w.size());
  const float s = QuantizeBlockSymmetric(w.data(), static_cast<int64_t>(w.size()), 1, bits, q.data());
  EXPECT_EQ(s, want_scale);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(q[i], want_q[i]) << "value " << i << " = " << w[i];
}

TEST(QuantizeInt4, BlockTiesClipsAndSigns) {
  // Extreme -8: scale 1 exactly; halves round to even; 7.5 rounds to 8 and clips to 7.
  ExpectBlock({-8, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 6.5f, 7.5f, 7}, 4, 1.0f, {-8, 0, 2, 2, 0, -2, 6, 7, 7});
  // A positive extreme maps to -8 through a negative scale; its opposite clips to 7.
  ExpectBlock({4, -4, 1.25f, -0.75f, 0.25f}, 4, -0.5f, {-8, 7, -2, 2, 0});
  // Equal magnitudes: the first one decides the sign of the scale.
  ExpectBlock({-2, 2, 1}, 4, 0.25f, {-8, 7, 4});
  ExpectBlock({2, -2, 1}, 4, -0.25f, {-8, 7, -4});
  // 8 bits: the extreme to -128.
  ExpectBlock({-128, 0.5f, 1.5f, 127.5f, 64.5f}, 8, 1.0f, {-128, 0, 2, 127, 64});
  // All zero.
  ExpectBlock({0, 0, -0.0f, 0}, 4, 0.0f, {0, 0, 0, 0});
  // Against the reference on many blocks of varied values, both widths.
  for (int bits : {4, 8})
    for (int t = 0; t < 40; ++t) {
      std::vector<float> w = Wave(32, 0.37f + 0.05f * t, 0.1f + t, 0.3f * t);
      std::vector<int> want;
      const float ws = RefBlock(w, bits, &want);
      ExpectBlock(w, bits, ws, want);
    }
}

// The operands of a [K, N] weight with K = 45 (a partial last block), one
// all-zero column and one column whose tail block is zero.
TEST(QuantizeInt4, NBitsOperandsWithKTail) {
  const int64_t K = 45, N = 3;
  std::vector<float> w = Wave(K * N, 0.71f, 2.0f);
  for (int64_t k = 0; k < K; ++k) w[k * N + 1] = 0.0f;   // column 1: all zero
  for (int64_t k = 32; k < K; ++k) w[k * N + 2] = 0.0f;  // column 2: zero tail block
  for (int bits : {4, 8}) {
    SCOPED_TRACE(bits);
    NBitsOperands op = QuantizeNBits(w.data(), K, N, N, 1, bits);
    ASSERT_EQ(op.blocks, 2);
    const int64_t blob = 32 * bits / 8;
    EXPECT_EQ(op.b->shape, (ir::Shape{N, 2, blob}));
    EXPECT_EQ(op.scales->shape, (ir::Shape{N * 2}));
    const int zero = 1 << (bits - 1);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < 2; ++b) {
        std::vector<float> block;
        for (int64_t k = b * 32; k < std::min<int64_t>(K, b * 32 + 32); ++k) block.push_back(w[k * N + n]);
        std::vector<int> q;
        const float s = RefBlock(block, bits, &q);
        EXPECT_EQ(op.scales->data<float>()[n * 2 + b], s) << "column " << n << " block " << b;
        if (n == 1 || (n == 2 && b == 1)) EXPECT_EQ(s, 0.0f);
        const uint8_t* p = op.b->data<uint8_t>() + (n * 2 + b) * blob;
        for (int64_t i = 0; i < 32; ++i) {
          const int stored = bits == 8 ? p[i] : (p[i / 2] >> ((i & 1) * 4)) & 15;
          const int want = i < static_cast<int64_t>(q.size()) ? q[i] + zero : zero;  // padding: q 0
          EXPECT_EQ(stored, want) << "column " << n << " block " << b << " element " << i;
        }
      }
  }
}

std::vector<std::string> Ops(const ir::Graph& g) {
  std::vector<std::string> v;
  for (const auto& n : g.nodes) v.push_back(n.op_type);
  return v;
}

int ValueId(const ir::Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return static_cast<int>(i);
  return -1;
}

// y = 2 * Gemm(MatMul(Gather(E, ids) + Gather(COS, |pos|), W1), W2^T, C) and
// z = MatMul(., small W): the Gemm is the head (through the Mul), the small
// MatMul and the table read by computed positions stay float.
TEST(QuantizeInt4, RewritesAndMatchesDequantizedFloat) {
  for (bool int4_head : {false, true}) {
    SCOPED_TRACE(int4_head ? "int4_head" : "8-bit head");
    ir::Graph g;
    const int64_t V = 40, H = 70, N1 = 48, N2 = 33;
    const int ids = AddTensor(g, "ids", {2, 3}, ir::DType::kI64);
    const int pos = AddTensor(g, "pos", {2, 3}, ir::DType::kI64);
    g.inputs = {ids, pos};
    const int emb = AddTensor(g, "emb", {2, 3, H});
    const std::vector<float> ev = Wave(V * H, 0.31f, 1.0f);
    AddNode(g, "Gather", {g.AddConstant("E", ir::TensorData::FromFloats({V, H}, ev)), ids}, {emb}, "embed");
    // A table indexed by a computed value (rotary caches): stays float.
    const int pos2 = AddTensor(g, "pos2", {2, 3}, ir::DType::kI64);
    AddNode(g, "Abs", {pos}, {pos2}, "abs");
    const int cosv = AddTensor(g, "cosv", {2, 3, H});
    AddNode(g, "Gather", {g.AddConstant("COS", ir::TensorData::FromFloats({V, H}, Wave(V * H, 0.2f, 1.f))), pos2},
            {cosv}, "cos");
    const int sum = AddTensor(g, "sum", {2, 3, H});
    AddNode(g, "Add", {emb, cosv}, {sum}, "add_pos");
    const int h1 = AddTensor(g, "h1", {2, 3, N1});
    const std::vector<float> w1 = Wave(H * N1, 0.53f, 0.4f);
    AddNode(g, "MatMul", {sum, g.AddConstant("W1", ir::TensorData::FromFloats({H, N1}, w1))}, {h1}, "fc1");
    const int flat = AddTensor(g, "flat", {6, N1});
    AddNode(g, "Reshape", {h1, g.AddConstant("shape", ir::TensorData::FromInts({2}, {6, N1}))}, {flat}, "flatten");
    const int h2 = AddTensor(g, "h2", {6, N2});
    const std::vector<float> w2 = Wave(N2 * N1, 0.77f, 0.3f), cv = Wave(N2, 1.3f, 0.5f);
    ir::Node& gemm = AddNode(g, "Gemm",
                             {flat, g.AddConstant("W2", ir::TensorData::FromFloats({N2, N1}, w2)),
                              g.AddConstant("C", ir::TensorData::FromFloats({N2}, cv))},
                             {h2}, "head");
    gemm.SetInt("transB", 1);
    gemm.SetFloat("alpha", 0.5f);
    const int y = AddTensor(g, "y", {6, N2});
    AddNode(g, "Mul", {h2, g.AddConstant("two", ir::TensorData::FromFloats({}, {2.0f}))}, {y}, "scale");
    // A small MatMul (48 x 16 < 1024 elements) stays float, a graph output though it is.
    const int z = AddTensor(g, "z", {6, 16});
    AddNode(g, "MatMul", {flat, g.AddConstant("WS", ir::TensorData::FromFloats({N1, 16}, Wave(N1 * 16, 0.1f, 0.1f)))},
            {z}, "small");
    g.outputs = {y, z};
    ASSERT_TRUE(g.Validate().ok());
    const ir::Graph orig = g;
    {
      // The default arithmetic is accuracy_level 4 (int8 activations).
      ir::Graph d = g;
      ASSERT_TRUE(QuantizeInt4(d, int4_head).ok());
      for (const auto& n : d.nodes)
        if (n.op_type == "com.microsoft.MatMulNBits") EXPECT_EQ(n.GetInt("accuracy_level", -1), 4) << n.name;
    }
    // Float arithmetic, so that the float graph on the dequantized weights below is its oracle.
    ASSERT_TRUE(QuantizeInt4(g, int4_head, /*float_activations=*/true).ok());
    ASSERT_TRUE(EliminateDeadNodes(g).ok());
    ASSERT_EQ(Ops(g), (std::vector<std::string>{std::string(ops::opname::GatherRowsNBits), "Abs", "Gather", "Add",
                                                "com.microsoft.MatMulNBits", "Reshape", "com.microsoft.MatMulNBits",
                                                "Add", "Mul", "MatMul"}));
    // fc1 4-bit (an intermediate), the head and the table 8-bit (or 4 with int4_head).
    const int hb = int4_head ? 4 : 8;
    EXPECT_EQ(g.nodes[4].GetInt("bits", 0), 4);
    EXPECT_EQ(g.nodes[6].GetInt("bits", 0), hb);
    EXPECT_EQ(g.nodes[0].GetInt("bits", 0), hb);
    EXPECT_EQ(g.nodes[6].name, "head");
    EXPECT_EQ(g.nodes[6].GetInt("block_size", 0), 32);
    EXPECT_EQ(g.nodes[6].GetInt("accuracy_level", -1), 0);
    EXPECT_EQ(g.nodes[6].inputs.size(), 3u) << "no zero points";

    // The float graph on the dequantized weights, built from the reference.
    ir::Graph deq = orig;
    auto dequantize = [&](const std::string& name, int64_t k, int64_t n, bool nk, float alpha, int bits) {
      const ir::TensorData& t = *deq.values[ValueId(deq, name)].constant;
      std::vector<float> out(t.numel());
      for (int64_t c = 0; c < n; ++c)
        for (int64_t b = 0; b * 32 < k; ++b) {
          std::vector<float> block;
          for (int64_t kk = b * 32; kk < std::min(k, b * 32 + 32); ++kk)
            block.push_back(static_cast<float>(alpha * static_cast<double>(t.data<float>()[nk ? c * k + kk : kk * n + c])));
          std::vector<int> q;
          const float s = RefBlock(block, bits, &q);
          for (size_t i = 0; i < block.size(); ++i) {
            const int64_t kk = b * 32 + static_cast<int64_t>(i);
            out[nk ? c * k + kk : kk * n + c] = s * static_cast<float>(q[i]);
          }
        }
      deq.values[ValueId(deq, name)].constant = ir::TensorData::FromFloats(t.shape, out);
    };
    dequantize("E", H, V, true, 1.0f, hb);
    dequantize("W1", H, N1, false, 1.0f, 4);
    dequantize("W2", N1, N2, true, 0.5f, hb);
    deq.nodes[6].SetFloat("alpha", 1.0f);  // folded into the dequantized weights
    ASSERT_EQ(deq.nodes[6].op_type, "Gemm");

    std::vector<int64_t> idv = {0, 39, 5, -1, 17, 3};
    auto idt = ir::TensorData::FromInts({2, 3}, idv);
    auto pt = ir::TensorData::FromInts({2, 3}, {1, 2, 3, 4, 5, 6});
    auto got = Interpret(g, {{ValueId(g, "ids"), idt}, {ValueId(g, "pos"), pt}});
    auto want = Interpret(deq, {{ids, idt}, {pos, pt}});
    auto fp = Interpret(orig, {{ids, idt}, {pos, pt}});
    ASSERT_TRUE(got.ok() && want.ok() && fp.ok()) << got.status().ToString() << want.status().ToString();
    // The dequantizing gather is exact.
    EXPECT_EQ(Floats(got.value()[ValueId(g, "emb")]), Floats(want.value()[emb]));
    const auto d = fcb::testing::Compare(Floats(got.value()[ValueId(g, "y")]), Floats(want.value()[y]));
    EXPECT_LT(d.rel_l2, 1e-5);
    const auto q = fcb::testing::Compare(Floats(got.value()[ValueId(g, "y")]), Floats(fp.value()[y]));
    EXPECT_GT(q.rel_l2, 1e-4) << "the weights were quantized";
    EXPECT_LT(q.rel_l2, int4_head ? 0.3 : 0.2);
  }
}

// A tied head: logits = MatMul(Gather(E, ids), Transpose(E)), the Transpose
// left unfolded (a table past the folding limit): the head reads E
// transposed, and its 8-bit blocks along H are the table's, byte for byte.
// An index out of range fails the run, naming it.
TEST(QuantizeInt4, TiedHeadThroughTranspose) {
  ir::Graph g;
  const int64_t V = 40, H = 64;
  const int ids = AddTensor(g, "ids", {1, 3}, ir::DType::kI64);
  g.inputs = {ids};
  const int e = g.AddConstant("E", ir::TensorData::FromFloats({V, H}, Wave(V * H, 0.29f, 0.7f)));
  const int emb = AddTensor(g, "emb", {1, 3, H});
  AddNode(g, "Gather", {e, ids}, {emb}, "embed");
  const int et = AddTensor(g, "et", {H, V});
  AddNode(g, "Transpose", {e}, {et}, "tie");
  const int y = AddTensor(g, "logits", {1, 3, V});
  AddNode(g, "MatMul", {emb, et}, {y}, "lm_head");
  g.outputs = {y};
  const ir::Graph orig = g;
  ASSERT_TRUE(QuantizeInt4(g, false, /*float_activations=*/true).ok());
  ASSERT_TRUE(EliminateDeadNodes(g).ok());
  ASSERT_EQ(Ops(g), (std::vector<std::string>{std::string(ops::opname::GatherRowsNBits), "com.microsoft.MatMulNBits"}));
  EXPECT_EQ(g.nodes[1].GetInt("bits", 0), 8);
  EXPECT_EQ(g.nodes[1].GetInt("K", 0), H);
  EXPECT_EQ(g.nodes[1].GetInt("N", 0), V);
  const ir::TensorData& table = *g.values[g.nodes[0].inputs[0]].constant;
  const ir::TensorData& head = *g.values[g.nodes[1].inputs[1]].constant;
  EXPECT_EQ(table.bytes, head.bytes);
  EXPECT_EQ(g.values[g.nodes[0].inputs[1]].constant->bytes, g.values[g.nodes[1].inputs[2]].constant->bytes);
  auto idt = ir::TensorData::FromInts({1, 3}, {3, 0, 39});
  auto got = Interpret(g, {{ValueId(g, "ids"), idt}});
  auto fp = Interpret(orig, {{ids, idt}});
  ASSERT_TRUE(got.ok() && fp.ok()) << got.status().ToString();
  const auto d = fcb::testing::Compare(Floats(got.value()[ValueId(g, "logits")]), Floats(fp.value()[y]));
  EXPECT_GT(d.rel_l2, 1e-5);
  EXPECT_LT(d.rel_l2, 0.05);
  auto bad = Interpret(g, {{ValueId(g, "ids"), ir::TensorData::FromInts({1, 3}, {3, 40, 0})}});
  EXPECT_REFUSED(bad, StatusCode::kInvalidArgument, "index 40 (position 1) is out of range for a table of 40 rows");
}

TEST(QuantizeInt4, NeedsTheOptimizingPipeline) {
  ir::Graph g;
  const int a = AddTensor(g, "a", {1, 64});
  g.inputs = {a};
  const int y = AddTensor(g, "y", {1, 32});
  AddNode(g, "MatMul", {a, g.AddConstant("W", ir::TensorData::FromFloats({64, 32}, Wave(64 * 32, 0.3f, 1.f)))}, {y},
          "mm");
  g.outputs = {y};
  GraphPrecision p;
  p.precision = ops::Precision::kInt4;
  ir::Graph level0 = g;
  EXPECT_REFUSED(RunDefaultPasses(level0, 0, p), StatusCode::kInvalidArgument,
                 "precision int4 needs optimization_level 1 or higher");
  ASSERT_TRUE(RunDefaultPasses(g, 1, p).ok());
  ASSERT_EQ(Ops(g), std::vector<std::string>{"com.microsoft.MatMulNBits"});
  EXPECT_EQ(g.nodes[0].GetInt("bits", 0), 8) << "its output is the graph's: the head";
}

// Weights with no int4 code stay float: a NaN or infinite weight, and a
// Gemm whose alpha times B overflows float (the quantizer would otherwise
// convert NaN to an integer).
TEST(QuantizeInt4, NonFiniteWeightsStayFloat) {
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind == 0 ? "NaN weight" : kind == 1 ? "infinite weight" : "alpha * B overflows");
    ir::Graph g;
    const int a = AddTensor(g, "a", {2, 64});
    g.inputs = {a};
    const int h = AddTensor(g, "h", {2, 32}), y = AddTensor(g, "y", {2, 32});
    std::vector<float> w = Wave(64 * 32, 0.3f, 1.f);
    if (kind == 0) w[77] = std::nanf("");
    if (kind == 1) w[5] = -INFINITY;
    if (kind == 2) w[9] = 3e38f;
    ir::Node& gemm = AddNode(g, "Gemm", {a, g.AddConstant("W", ir::TensorData::FromFloats({64, 32}, w))}, {h}, "gemm");
    gemm.SetFloat("alpha", kind == 2 ? 4.0f : 1.0f);
    AddNode(g, "Relu", {h}, {y}, "relu");
    g.outputs = {y};
    ASSERT_TRUE(g.Validate().ok());
    ASSERT_TRUE(QuantizeInt4(g, false).ok());
    EXPECT_EQ(Ops(g), (std::vector<std::string>{"Gemm", "Relu"}));
  }
}

}  // namespace
}  // namespace fcb::passes
