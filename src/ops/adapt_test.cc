// Kernels that adapt (Kernel::adapts): made at one set of shapes, run at
// others through RunContext::shapes, they must give exactly what a kernel made
// for those other shapes on the same target gives (whose own tests compare it
// with references), on every runnable target with 1 and 3 threads. The
// shapes differ the ways a plan resolved at a run's sizes sees: a dim
// growing, shrinking to 1 (a broadcast or a collapse that was not there) or
// to 0, and operand values (indices, a Clip's bounds) that differ from those
// seen at creation.
#include <gtest/gtest.h>

#include "core/half.h"
#include "kernels/packing.h"
#include "ops/conv_geom.h"
#include "ops/internal/internal.h"
#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

// Infer and create `op` at `inputs` (every input given as a constant).
struct Made {
  std::vector<TensorInfo> in, out;
  std::unique_ptr<Kernel> kernel;
};
Made Make(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& inputs, int num_outputs) {
  Made m;
  const OpDef* def = FindOp(op);
  EXPECT_NE(def, nullptr) << op;
  if (!def) return m;
  std::vector<const ir::TensorData*> consts;
  for (const auto& t : inputs) {
    m.in.push_back(t ? TensorInfo{t->dtype, t->shape} : TensorInfo{});
    consts.push_back(t.get());
  }
  InferContext ictx{op, attrs, m.in, consts, num_outputs};
  const Status st = InferOutputs(*def, ictx, &m.out);
  EXPECT_TRUE(st.ok()) << op << ": " << st.ToString();
  if (!st.ok()) return m;
  auto k = def->create(CreateContext{op, attrs, m.in, m.out, consts});
  EXPECT_TRUE(k.ok()) << op << ": " << k.status().ToString();
  if (k.ok()) m.kernel = std::move(k).value();
  return m;
}

// `op` made at `made` adapts, and run at `run`'s shapes and contents gives
// exactly what a kernel made for those shapes on the same target gives, on
// every target and thread count.
void CheckAdapts(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& made,
                 const std::vector<TensorPtr>& run, int num_outputs = 1) {
  SCOPED_TRACE(op);
  const Made at = Make(op, attrs, made, num_outputs);
  ASSERT_TRUE(at.kernel);
  ASSERT_TRUE(at.kernel->adapts());
  std::vector<const void*> in_ptrs;
  for (const auto& t : run) in_ptrs.push_back(t ? t->bytes.data() : nullptr);
  for (TargetId target : fcb::testing::RunnableTargetIds()) {
    for (int threads : {1, 3}) {
      auto want = RunWith(op, attrs, run, num_outputs, kernels::GetKernelTable(target), threads);
      ASSERT_TRUE(want.ok()) << TargetName(target) << ": " << want.status().ToString();
      std::vector<std::span<const int64_t>> shapes;
      for (const auto& t : run) shapes.push_back(t ? std::span<const int64_t>(t->shape) : std::span<const int64_t>());
      for (const auto& w : *want) shapes.push_back(w->shape);
      ThreadPool pool(threads);
      RunContext ctx{&kernels::GetKernelBundle(target), &pool};
      ctx.shapes = shapes.data();
      // The scratch the op asks for at the shapes it was made for (a plan's,
      // planned at the bound: kTraitFixedScratch ops ask the same at every size).
      std::vector<uint64_t> scratch;
      if (const OpDef* def = FindOp(op); def && def->scratch) {
        std::vector<const ir::TensorData*> consts;
        for (const auto& t : made) consts.push_back(t.get());
        auto bytes = def->scratch(CreateContext{op, attrs, at.in, at.out, consts});
        ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
        const uint64_t stride = (bytes.value() + 63) / 64 * 64;
        scratch.resize(stride * static_cast<uint64_t>(threads) / 8 + 8);
        ctx.scratch = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
        ctx.scratch_stride = stride;
      }
      std::vector<TensorPtr> outs;
      std::vector<void*> out_ptrs;
      for (const auto& w : *want) {
        outs.push_back(ir::TensorData::Make(w->dtype, w->shape));
        if (!outs.back()->bytes.empty()) std::memset(outs.back()->bytes.data(), 0xA5, outs.back()->bytes.size());
        out_ptrs.push_back(outs.back()->bytes.data());
      }
      const Status st = at.kernel->Run(ctx, in_ptrs.data(), out_ptrs.data());
      ASSERT_TRUE(st.ok()) << TargetName(target) << ": " << st.ToString();
      for (size_t i = 0; i < outs.size(); ++i)
        EXPECT_TRUE(Same(*outs[i], *(*want)[i], 0)) << TargetName(target) << " threads=" << threads << " output " << i;
    }
  }
}

TensorPtr F(Shape s, uint32_t seed) { return F32(s, Rand(ir::NumElements(s), seed)); }
TensorPtr Ints(Shape s, int64_t mod, uint32_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(ir::NumElements(s)));
  uint32_t x = seed;
  for (auto& e : v) e = static_cast<int64_t>((x = x * 1664525u + 1013904223u) >> 8) % mod;
  return I64(std::move(s), v);
}
TensorPtr Bools(Shape s, uint32_t seed) {
  std::vector<uint8_t> v(static_cast<size_t>(ir::NumElements(s)));
  uint32_t x = seed;
  for (auto& e : v) e = ((x = x * 1664525u + 1013904223u) >> 12) & 1;
  return Bool(std::move(s), v);
}
TensorPtr Half(Shape s, uint32_t seed) {
  const auto f = Rand(ir::NumElements(s), seed);
  std::vector<uint16_t> bits(f.size());
  for (size_t i = 0; i < f.size(); ++i) bits[i] = FloatToHalf(f[i]);
  return Typed(DType::kF16, std::move(s), bits);
}

TEST(Adapts, BroadcastArithmetic) {
  // Growing, a dim shrinking to 1 where it was merged (now a broadcast), and empty.
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Pow"}) {
    CheckAdapts(op, A(), {F({2, 3, 5}, 1), F({5}, 2)}, {F({2, 7, 5}, 3), F({5}, 4)});
    CheckAdapts(op, A(), {F({2, 3, 4}, 1), F({2, 3, 4}, 2)}, {F({2, 1, 4}, 3), F({2, 3, 4}, 4)});
    CheckAdapts(op, A(), {F({1, 4, 1, 9}, 1), F({}, 2)}, {F({1, 4, 1, 0}, 3), F({}, 4)});
  }
  CheckAdapts("Add", A(), {Ints({3, 6}, 100, 1), Ints({1, 6}, 100, 2)}, {Ints({5, 2}, 100, 3), Ints({1, 2}, 100, 4)});
  CheckAdapts("Mean", A(), {F({2, 3}, 1)}, {F({4, 3}, 2)});  // one input: a broadcast copy
  CheckAdapts("Add", A(), {Half({2, 8}, 1), Half({8}, 2)}, {Half({5, 8}, 3), Half({8}, 4)});
  CheckAdapts("Less", A(), {Half({2, 8}, 1), Half({8}, 2)}, {Half({1, 8}, 3), Half({8}, 4)});
}

TEST(Adapts, ComparisonsAndLogic) {
  CheckAdapts("Equal", A(), {Ints({1, 12}, 3, 1), Ints({}, 3, 2)}, {Ints({1, 40}, 3, 3), Ints({}, 3, 4)});
  CheckAdapts("LessOrEqual", A(), {F({6, 1}, 1), F({1, 6}, 2)}, {F({9, 1}, 3), F({1, 9}, 4)});
  CheckAdapts("And", A(), {Bools({1, 1, 1, 8}, 1), Bools({1, 1, 6, 8}, 2)}, {Bools({1, 1, 1, 3}, 3), Bools({1, 1, 1, 3}, 4)});
  CheckAdapts("Equal", A(), {Bools({4}, 1), Bools({4}, 2)}, {Bools({11}, 3), Bools({11}, 4)});
  CheckAdapts("Where", A(), {Bools({1, 1, 4, 8}, 1), F({1, 2, 4, 8}, 2), F({}, 3)},
              {Bools({1, 1, 1, 13}, 4), F({1, 2, 1, 13}, 5), F({}, 6)});
}

TEST(Adapts, UnaryAndCasts) {
  CheckAdapts("Not", A(), {Bools({1, 20}, 1)}, {Bools({1, 7}, 2)});
  CheckAdapts("Relu", A(), {F({3, 16}, 1)}, {F({3, 5}, 2)});
  CheckAdapts("Exp", A(), {F({3, 16}, 1)}, {F({3, 33}, 2)});
  CheckAdapts("Neg", A(), {Ints({10}, 50, 1)}, {Ints({3}, 50, 2)});
  CheckAdapts("Cast", A().I("to", static_cast<int64_t>(DType::kI64)), {F({2, 5}, 1)}, {F({2, 9}, 2)});
  CheckAdapts("Cast", A().I("to", static_cast<int64_t>(DType::kF32)), {F({2, 5}, 1)}, {F({2, 1}, 2)});
  // Clip's bounds are read at each run: other values than at creation.
  CheckAdapts("Clip", A(), {F({8}, 1), F32({}, {-0.5f}), F32({}, {0.5f})}, {F({13}, 2), F32({}, {-1.f}), F32({}, {0.25f})});
}

TEST(Adapts, SoftmaxAlongAnyAxis) {
  CheckAdapts("Softmax", A(), {F({1, 4, 1, 9}, 1)}, {F({1, 4, 1, 30}, 2)});
  CheckAdapts("Softmax", A().I("axis", 1), {F({2, 5, 3}, 1)}, {F({2, 8, 4}, 2)});
  CheckAdapts("LogSoftmax", A(), {F({3, 7}, 1)}, {F({1, 2}, 2)});
}

TEST(Adapts, ConcatGatherAndViews) {
  // A KV cache's Concat along the past, including an empty past.
  CheckAdapts("Concat", A().I("axis", 2), {F({1, 4, 5, 16}, 1), F({1, 4, 1, 16}, 2)},
              {F({1, 4, 9, 16}, 3), F({1, 4, 1, 16}, 4)});
  CheckAdapts("Concat", A().I("axis", 2), {F({1, 4, 5, 16}, 1), F({1, 4, 1, 16}, 2)},
              {F({1, 4, 0, 16}, 3), F({1, 4, 1, 16}, 4)});
  CheckAdapts("Concat", A().I("axis", -1), {Ints({2, 3}, 9, 1), Ints({2, 1}, 9, 2), Ints({2, 2}, 9, 3)},
              {Ints({6, 1}, 9, 4), Ints({6, 4}, 9, 5), Ints({6, 2}, 9, 6)});
  // Indices are read at each run: other values and counts than at creation.
  CheckAdapts("Gather", A(), {F({10, 6}, 1), Ints({1, 3}, 10, 2)}, {F({10, 6}, 3), Ints({1, 5}, 10, 4)});
  CheckAdapts("Gather", A().I("axis", 1), {F({2, 8, 3}, 1), Ints({4}, 8, 2)}, {F({2, 11, 3}, 3), Ints({2}, 11, 4)});
  CheckAdapts("Unsqueeze", A(), {F({1, 9}, 1), I64({1}, {1})}, {F({1, 4}, 2), I64({1}, {1})});
  CheckAdapts("Reshape", A(), {F({2, 3, 4}, 1), I64({2}, {0, -1})}, {F({2, 5, 4}, 2), I64({2}, {0, -1})});
}

TEST(Adapts, RangeAndFillsOverOtherCounts) {
  // Positions over a past that grew or shrank (to none), other starts and steps than at creation.
  CheckAdapts("Range", A(), {I64({}, {0}), I64({}, {9}), I64({}, {1})}, {I64({}, {3}), I64({}, {40}), I64({}, {1})});
  CheckAdapts("Range", A(), {I64({}, {0}), I64({}, {9}), I64({}, {1})}, {I64({}, {5}), I64({}, {5}), I64({}, {1})});
  CheckAdapts("Range", A(), {I64({}, {10}), I64({}, {0}), I64({}, {-3})}, {I64({}, {7}), I64({}, {-20}), I64({}, {-2})});
  CheckAdapts("Range", A(), {F32({}, {0.5f}), F32({}, {3.f}), F32({}, {0.5f})}, {F32({}, {-1.f}), F32({}, {4.f}), F32({}, {0.25f})});
  CheckAdapts("Range", A(), {Typed(DType::kI32, {}, std::vector<int32_t>{1}), Typed(DType::kI32, {}, std::vector<int32_t>{4}),
                             Typed(DType::kI32, {}, std::vector<int32_t>{1})},
              {Typed(DType::kI32, {}, std::vector<int32_t>{2}), Typed(DType::kI32, {}, std::vector<int32_t>{70}),
               Typed(DType::kI32, {}, std::vector<int32_t>{3})});
  // A mask's zeros and ones over more (or no) elements; each fill width.
  CheckAdapts("ConstantOfShape", A(), {I64({2}, {1, 9})}, {I64({2}, {3, 40})});
  CheckAdapts("ConstantOfShape", A(), {I64({2}, {1, 9})}, {I64({2}, {1, 0})});
  CheckAdapts("ConstantOfShape", A().Is("value", {1}).I("value.dtype", static_cast<int64_t>(DType::kI64)),
              {I64({1}, {4})}, {I64({1}, {200000})});
  CheckAdapts("ConstantOfShape", A().Is("value", {1}).I("value.dtype", static_cast<int64_t>(DType::kBool)),
              {I64({3}, {1, 2, 2})}, {I64({3}, {1, 5, 7})});
}

TEST(Adapts, SlicesSplitsAndExpands) {
  // A Slice's bounds read at each run (constants at creation, values computed from the shapes later):
  // the last rows of a growing past, a negative step, ends past the dim, an empty result, int32 bounds.
  CheckAdapts("Slice", A(), {F({1, 4, 9, 16}, 1), I64({1}, {-1}), I64({1}, {INT64_MAX}), I64({1}, {2})},
              {F({1, 4, 30, 16}, 2), I64({1}, {-5}), I64({1}, {INT64_MAX}), I64({1}, {2})});
  CheckAdapts("Slice", A(), {F({6, 5}, 1), I64({2}, {0, 1}), I64({2}, {3, 4}), I64({2}, {0, 1}), I64({2}, {1, 1})},
              {F({9, 7}, 2), I64({2}, {8, 6}), I64({2}, {-100, 0}), I64({2}, {0, 1}), I64({2}, {-2, -3})});
  CheckAdapts("Slice", A(), {F({6, 5}, 1), I64({1}, {1}), I64({1}, {3})}, {F({2, 5}, 2), I64({1}, {1}), I64({1}, {1})});
  CheckAdapts("Slice", A(), {Ints({8}, 9, 1), Typed(DType::kI32, {1}, std::vector<int32_t>{2}),
                             Typed(DType::kI32, {1}, std::vector<int32_t>{6})},
              {Ints({20}, 9, 2), Typed(DType::kI32, {1}, std::vector<int32_t>{3}),
               Typed(DType::kI32, {1}, std::vector<int32_t>{17})});
  // Opset 1's attributes: the input's shape alone changes.
  CheckAdapts("Slice", A().Is("starts", {1}).Is("ends", {-1}).Is("axes", {1}), {F({2, 6}, 1)}, {F({3, 11}, 2)});
  // Split along a growing dim: pieces by the split input, even pieces, opset 18's last smaller piece.
  CheckAdapts("Split", A().I("axis", 1), {F({2, 6, 3}, 1), I64({2}, {2, 4})}, {F({2, 9, 3}, 2), I64({2}, {5, 4})}, 2);
  CheckAdapts("Split", A().I("axis", -1), {F({3, 8}, 1)}, {F({5, 4}, 2)}, 2);
  CheckAdapts("Split", A().I("axis", 0).I("num_outputs", 3), {F({7, 2}, 1)}, {F({11, 2}, 2)}, 3);
  // Expand to a mask's shape that grew, shrank and lost a broadcast dim.
  CheckAdapts("Expand", A(), {F({1, 1, 1, 9}, 1), I64({4}, {1, 4, 9, 9})}, {F({1, 1, 1, 30}, 2), I64({4}, {1, 4, 30, 30})});
  CheckAdapts("Expand", A(), {F({3, 1}, 1), I64({2}, {3, 5})}, {F({3, 1}, 2), I64({2}, {1, 1})});
  CheckAdapts("Expand", A(), {Bools({1, 9}, 1), I64({3}, {2, 1, 9})}, {Bools({1, 2}, 2), I64({3}, {2, 3, 2})});
}

TEST(Adapts, MatMulGeometries) {
  // Attention over a growing past: scores and the weighted sum.
  CheckAdapts("MatMul", A(), {F({1, 4, 1, 16}, 1), F({1, 4, 16, 9}, 2)}, {F({1, 4, 1, 16}, 3), F({1, 4, 16, 30}, 4)});
  CheckAdapts("MatMul", A(), {F({1, 4, 1, 9}, 1), F({1, 4, 9, 16}, 2)}, {F({1, 4, 1, 1}, 3), F({1, 4, 1, 16}, 4)});
  // Rows, batch broadcast, a batch dim shrinking to 1, 1-D operands, integers.
  CheckAdapts("MatMul", A(), {F({2, 1, 3, 4}, 1), F({5, 4, 2}, 2)}, {F({2, 1, 40, 4}, 3), F({1, 4, 2}, 4)});
  CheckAdapts("MatMul", A(), {F({7}, 1), F({3, 7, 2}, 2)}, {F({3}, 3), F({3, 3, 2}, 4)});
  CheckAdapts("MatMul", A(), {Ints({3, 4}, 7, 1), Ints({4, 5}, 7, 2)}, {Ints({6, 2}, 7, 3), Ints({2, 5}, 7, 4)});
}

TEST(Adapts, TransposeAcrossItsPaths) {
  // Heads to the front ([B, S, H, D] -> [B, H, S, D]) with S growing and shrinking to 1 (then rows copy).
  CheckAdapts("Transpose", A().Is("perm", {0, 2, 1, 3}), {F({1, 9, 4, 16}, 1)}, {F({1, 1, 4, 16}, 2)});
  CheckAdapts("Transpose", A().Is("perm", {0, 2, 1, 3}), {F({1, 1, 4, 16}, 1)}, {F({1, 37, 4, 16}, 2)});
  // K transposed for the scores: tiles; a few output columns (2 to 4); empty.
  CheckAdapts("Transpose", A().Is("perm", {0, 1, 3, 2}), {F({1, 4, 9, 16}, 1)}, {F({1, 4, 70, 16}, 2)});
  CheckAdapts("Transpose", A().Is("perm", {1, 0}), {F({40, 64}, 1)}, {F({3, 100}, 2)});
  CheckAdapts("Transpose", A().Is("perm", {1, 0}), {F({40, 64}, 1)}, {F({100, 3}, 2)});
  CheckAdapts("Transpose", A().Is("perm", {1, 0}), {F({40, 64}, 1)}, {F({0, 3}, 2)});
  CheckAdapts("Transpose", A().Is("perm", {2, 0, 1}), {Ints({2, 3, 4}, 9, 1)}, {Ints({5, 1, 2}, 9, 2)});
}

TEST(Adapts, NormalizationOverMoreRows) {
  CheckAdapts("LayerNormalization", A().F("epsilon", 1e-5f), {F({1, 7, 16}, 1), F({16}, 2), F({16}, 3)},
              {F({1, 30, 16}, 4), F({16}, 5), F({16}, 6)});
  // Normalized over the last two dims with a trailing Scale: the normalized row grows (the scalar path).
  CheckAdapts("LayerNormalization", A().I("axis", 1), {F({2, 3, 8}, 1), F({8}, 2)}, {F({2, 5, 8}, 3), F({8}, 4)});
  CheckAdapts("LayerNormalization", A(), {F({4, 8}, 1), F({8}, 2), F({8}, 3)}, {F({1, 8}, 4), F({8}, 5), F({8}, 6)}, 3);
  CheckAdapts("SimplifiedLayerNormalization", A(), {F({3, 12}, 1), F({12}, 2)}, {F({9, 12}, 3), F({12}, 4)});
}

// An NHWC convolution's parameters: `k` x `k`, stride `s`, pads `pad` on
// every side, dilation `d`, `group` groups of `oc` output channels.
internal::SliceConvParams ConvP(int64_t oc, int64_t k, int64_t s, int64_t pad, int64_t d = 1, int64_t group = 1) {
  internal::SliceConvParams p;
  p.kernel = {k, k}, p.strides = {s, s}, p.dilations = {d, d}, p.pads = {pad, pad, pad, pad};
  p.group = group, p.out_channels = oc;
  p.ep.act = kernels::Act::kRelu;
  return p;
}
Attrs ConvA(const internal::SliceConvParams& p, bool nchw = false) {
  std::vector<format::AttrDesc> a = EncodeParams(p);
  if (nchw) {
    format::AttrDesc d;
    d.name = std::string(attr::kInputNchw);
    d.ints = {1};
    a.push_back(std::move(d));
  }
  return Attrs(std::move(a));
}
TensorPtr Packed(const std::vector<float>& v) { return F32({static_cast<int64_t>(v.size())}, v); }
// ConvNhwc's packed weights and bias for `p` over ic input channels
// (depthwise: 0 PackConv, 1 PackDepthwise, 2 PackGroupedSmall).
std::pair<TensorPtr, TensorPtr> ConvWeights(const internal::SliceConvParams& p, int64_t ic, int depthwise,
                                            uint32_t seed) {
  const int64_t oc = p.out_channels, icg = ic / p.group, kh = p.kernel[0], kw = p.kernel[1];
  const auto w = Rand(oc * icg * kh * kw, seed, -0.5f, 0.5f);
  const auto b = Rand(oc, seed + 1);
  if (depthwise == 1)
    return {Packed(kernels::PackDepthwise(w.data(), oc, kh, kw)), Packed(kernels::PackDepthwiseBias(b.data(), oc))};
  if (depthwise == 2)
    return {Packed(kernels::PackGroupedSmall(w.data(), oc, icg, kh, kw)),
            Packed(kernels::PackDepthwiseBias(b.data(), oc))};
  return {Packed(kernels::PackConv(w.data(), oc, icg, kh, kw, p.group)),
          Packed(kernels::PackConvBias(b.data(), oc, p.group))};
}

TEST(Adapts, ConvolutionsOverOtherPictures) {
  // Dense 3x3 with a residual, over a larger and a smaller picture and
  // another batch; a 1x1 stride 2; a dilated one; depthwise and small
  // groups; a conv whose output is a channel slice; the NCHW stem read.
  struct Case {
    internal::SliceConvParams p;
    int64_t ic;
    int depthwise;
    bool residual, nchw;
    Shape made, run;  // input 0 (NHWC, or NCHW where nchw)
  };
  std::vector<Case> cases = {
      {ConvP(24, 3, 1, 1), 20, 0, true, false, {1, 9, 11, 20}, {2, 5, 17, 20}},
      {ConvP(24, 3, 1, 1), 20, 0, true, false, {1, 9, 11, 20}, {1, 3, 2, 20}},
      {ConvP(40, 1, 2, 0), 16, 0, false, false, {1, 16, 16, 16}, {1, 7, 9, 16}},
      {ConvP(16, 3, 1, 2, 2), 8, 0, false, false, {1, 12, 12, 8}, {2, 6, 13, 8}},
      {ConvP(32, 3, 2, 1, 1, 32), 32, 1, false, false, {1, 15, 15, 32}, {1, 8, 30, 32}},
      {ConvP(32, 3, 1, 1, 1, 8), 32, 2, true, false, {1, 10, 10, 32}, {1, 4, 19, 32}},
      {ConvP(64, 7, 2, 3), 3, 0, false, true, {1, 3, 64, 64}, {1, 3, 37, 53}},
  };
  internal::SliceConvParams sliced = ConvP(16, 3, 1, 1);
  sliced.out_channel_offset = 8;
  sliced.out_pixel_channels = 40;
  cases.push_back({sliced, 16, 0, false, false, {1, 12, 12, 16}, {1, 5, 21, 16}});
  uint32_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::ShapeToString(c.made) + " -> " + ir::ShapeToString(c.run) + " oc " +
                 std::to_string(c.p.out_channels));
    internal::SliceConvParams p = c.p;
    p.depthwise = c.depthwise;
    const auto [w, b] = ConvWeights(p, c.ic, c.depthwise, seed);
    const Attrs a = ConvA(p, c.nchw);
    // The output's shape at each picture, for the residual.
    auto out_of = [&](const Shape& x) {
      const int64_t h = c.nchw ? x[2] : x[1], wd = c.nchw ? x[3] : x[2];
      const int64_t oh = WindowOutputSize(h, p.pads[0], p.pads[2], (p.kernel[0] - 1) * p.dilations[0] + 1,
                                          p.strides[0], false);
      const int64_t ow = WindowOutputSize(wd, p.pads[1], p.pads[3], (p.kernel[1] - 1) * p.dilations[1] + 1,
                                          p.strides[1], false);
      return Shape{x[0], oh, ow, p.out_channels};
    };
    std::vector<TensorPtr> made = {F(c.made, seed + 2), w, b}, run = {F(c.run, seed + 3), w, b};
    if (c.residual) {
      made.push_back(F(out_of(c.made), seed + 4));
      run.push_back(F(out_of(c.run), seed + 5));
    }
    CheckAdapts(std::string(opname::ConvNhwc), a, made, run);
    seed += 10;
  }
  // Winograd, with a residual, over more and fewer tiles.
  const int64_t ic = 20, oc = 24;
  const auto wt = Rand(oc * ic * 9, 7, -0.5f, 0.5f);
  const auto bias = Rand(oc, 8);
  const auto wino = Packed(kernels::PackWinograd(wt.data(), oc, ic));
  const auto pb = Packed(kernels::PackConvBias(bias.data(), oc, 1));
  const Attrs wa = ConvA(ConvP(oc, 3, 1, 1));
  for (const Shape& run : {Shape{2, 13, 9, ic}, Shape{1, 3, 5, ic}, Shape{1, 40, 33, ic}}) {
    CheckAdapts(std::string(opname::ConvWinogradNhwc), wa, {F({1, 9, 11, ic}, 1), wino, pb, F({1, 9, 11, oc}, 2)},
                {F(run, 3), wino, pb, F({run[0], run[1], run[2], oc}, 4)});
  }
}

// An NHWC pool's parameters: `k` x `k`, stride `s`, pads `pad` on every side.
Attrs PoolA(int64_t k, int64_t s, int64_t pad, int64_t ceil, int64_t include_pad) {
  internal::WindowParams w;
  w.kernel = {k, k}, w.strides = {s, s}, w.pads = {pad, pad, pad, pad};
  std::vector<format::AttrDesc> a = EncodeParams(w);
  for (auto [name, v] : {std::pair{attr::kCeilMode, ceil}, std::pair{attr::kCountIncludePad, include_pad}}) {
    format::AttrDesc d;
    d.name = std::string(name);
    d.ints = {v};
    a.push_back(std::move(d));
  }
  return Attrs(std::move(a));
}

TEST(Adapts, PoolsOverOtherPictures) {
  for (std::string_view op : {opname::MaxPoolNhwc, opname::AvgPoolNhwc})
    for (int64_t ceil : {0, 1}) {
      const Attrs a = PoolA(3, 2, 1, ceil, 1);
      for (const Shape& run : {Shape{1, 7, 12, 16}, Shape{2, 4, 3, 16}, Shape{1, 33, 1, 16}})
        CheckAdapts(std::string(op), a, {F({1, 16, 16, 16}, 1)}, {F(run, 2)});
    }
  for (const Shape& run : {Shape{1, 7, 12, 24}, Shape{3, 1, 1, 24}})
    CheckAdapts(std::string(opname::GlobalAvgPoolNhwc), A(), {F({1, 5, 5, 24}, 1)}, {F(run, 2)});
}

// OpDef::window_shape's promise: at every other picture the op's inference
// accepts exactly where the window's outputs are at least 1 (the residual the
// output's shape), and gives [N, OH, OW, C] with the window's formula.
TEST(Adapts, WindowShapesGiveWhatTheInferenceGives) {
  struct Case {
    std::string op;
    Attrs attrs;
    std::vector<TensorPtr> inputs;  // at the bound
  };
  auto Z = [](Shape s) { return ir::TensorData::Make(DType::kF32, std::move(s)); };
  std::vector<Case> cases;
  for (auto [p, ic, nchw, residual] : {std::tuple{ConvP(24, 3, 1, 1), int64_t{20}, false, true},
                                        std::tuple{ConvP(16, 5, 3, 2, 2), int64_t{8}, false, false},
                                        std::tuple{ConvP(64, 7, 2, 3), int64_t{3}, true, false}}) {
    const auto [w, b] = ConvWeights(p, ic, 0, 1);
    std::vector<TensorPtr> in = {Z(nchw ? Shape{1, ic, 40, 40} : Shape{1, 40, 40, ic}), w, b};
    Case c{std::string(opname::ConvNhwc), ConvA(p, nchw), in};
    if (residual) {
      std::vector<TensorInfo> infos;
      for (const auto& t : in) infos.push_back({t->dtype, t->shape});
      std::vector<const ir::TensorData*> consts(in.size(), nullptr);
      std::vector<TensorInfo> out;
      ASSERT_TRUE(InferOutputs(*FindOp(c.op), InferContext{c.op, c.attrs, infos, consts, 1}, &out).ok());
      c.inputs.push_back(Z(out[0].shape));
    }
    cases.push_back(std::move(c));
  }
  for (int64_t ceil : {0, 1})
    cases.push_back({std::string(opname::MaxPoolNhwc), PoolA(3, 2, 0, ceil, 0), {Z({1, 40, 40, 16})}});
  cases.push_back({std::string(opname::AvgPoolNhwc), PoolA(5, 3, 1, 1, 1), {Z({1, 40, 40, 16})}});
  cases.push_back({std::string(opname::GlobalAvgPoolNhwc), A(), {Z({1, 40, 40, 16})}});
  int accepted = 0, refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const OpDef* def = FindOp(c.op);
    ASSERT_TRUE(def && def->window_shape);
    std::vector<TensorInfo> infos;
    for (const auto& t : c.inputs) infos.push_back({t->dtype, t->shape});
    WindowShape ws;
    ASSERT_TRUE(def->window_shape(c.attrs, infos, &ws));
    std::vector<TensorInfo> at_bound;
    const std::vector<const ir::TensorData*> no_consts(infos.size(), nullptr);
    ASSERT_TRUE(InferOutputs(*def, InferContext{c.op, c.attrs, infos, no_consts, 1}, &at_bound).ok());
    const int64_t channels = at_bound[0].shape[3];
    for (int64_t n : {1, 2})
      for (int64_t h = 1; h <= 24; ++h)
        for (int64_t w = 1; w <= 24; w += 3) {
          std::vector<TensorInfo> in = infos;
          in[0].shape[0] = n;
          in[0].shape[static_cast<size_t>(ws.h_axis)] = h;
          in[0].shape[static_cast<size_t>(ws.w_axis)] = w;
          int64_t o[2];
          for (int i = 0; i < 2; ++i)
            o[i] = ws.global ? 1
                             : WindowOutputSize(i == 0 ? h : w, ws.pad_begin[i], ws.pad_end[i], ws.extent[i],
                                                ws.stride[i], ws.ceil_mode);
          if (ws.residual >= 0) in[static_cast<size_t>(ws.residual)].shape = {n, std::max<int64_t>(o[0], 1),
                                                                              std::max<int64_t>(o[1], 1), channels};
          std::vector<const ir::TensorData*> consts(in.size(), nullptr);
          std::vector<TensorInfo> out;
          const Status st = InferOutputs(*def, InferContext{c.op, c.attrs, in, consts, 1}, &out);
          const std::string at = "n=" + std::to_string(n) + " h=" + std::to_string(h) + " w=" + std::to_string(w);
          if (o[0] >= 1 && o[1] >= 1) {
            ++accepted;
            ASSERT_TRUE(st.ok()) << at << ": " << st.message();
            EXPECT_EQ(out[0].shape, (Shape{n, o[0], o[1], channels})) << at;
          } else {
            ++refused;
            EXPECT_FALSE(st.ok()) << at;
          }
        }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);  // pictures too small for a window: refused as the window says
}

TEST(Adapts, KernelsThatDoNotAdaptSayNot) {
  // Variadic sums of more than two inputs keep plans per stage made at creation.
  const Made sum = Make("Sum", A(), {F({2, 3}, 1), F({2, 3}, 2), F({2, 3}, 3)}, 1);
  ASSERT_TRUE(sum.kernel);
  EXPECT_FALSE(sum.kernel->adapts());
}

}  // namespace
}  // namespace fcb::ops::testing
