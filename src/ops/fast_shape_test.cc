// ops::FastOutputShape (the output shapes a resolution at a new size works
// out in place for the common ops, instead of running their inference)
// against the ops' own inference (ops::InferOutputs): for each op it takes, a
// step checked at one set of shapes (the bound) is shaped at many others,
// random ones included. Where the inference succeeds the fast way must give
// exactly its outputs, or decline; where the inference refuses, the fast way
// must decline (so the inference runs and reports it); and over each op's
// cases the fast way must have taken some, so that it is exercised at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "ops/ops_test_util.h"
#include "ops/plan_check.h"

namespace fcb::ops::testing {
namespace {

struct Operand {
  DType dtype = DType::kF32;
  Shape shape;
  TensorPtr value;  // a known value (Reshape's target, Unsqueeze's axes), else null
};

// One step of `op` checked at `bound`, shaped at other operands.
class FastStep {
 public:
  FastStep(const std::string& op, Attrs attrs, std::vector<Operand> bound, std::vector<bool> weight = {},
           int outputs = 1)
      : op_(op), attrs_(std::move(attrs)), outputs_(outputs) {
    def_ = FindOp(op);
    EXPECT_NE(def_, nullptr) << op;
    step_.op = op;
    for (size_t i = 0; i < bound.size(); ++i) step_.inputs.push_back(static_cast<int32_t>(i));
    for (int i = 0; i < outputs; ++i) step_.outputs.push_back(static_cast<int32_t>(bound.size()) + i);
    cs_.def = def_;
    cs_.attrs = attrs_;
    Infos(bound, &cs_.inputs, &cs_.constants);
    const Status st =
        InferOutputs(*def_, InferContext{op, attrs_, cs_.inputs, cs_.constants, outputs}, &cs_.outputs);
    EXPECT_TRUE(st.ok()) << op << " at the bound: " << st.message();
    weights_.assign(bound.size() + static_cast<size_t>(outputs), nullptr);
    static const int kWeight = 0;
    for (size_t i = 0; i < weight.size(); ++i)
      if (weight[i]) weights_[i] = &kWeight;
    kind_ = FastShapeOf(step_, cs_, weights_, &params_, &at_);
  }

  FastShape kind() const { return kind_; }

  // Shapes the step at `run` both ways; returns whether the fast way took it.
  bool Check(const std::vector<Operand>& run) {
    std::vector<TensorInfo> in;
    std::vector<const ir::TensorData*> constants;
    Infos(run, &in, &constants);
    std::vector<TensorInfo> generic;
    const Status st = InferOutputs(*def_, InferContext{op_, attrs_, in, constants, outputs_}, &generic);
    // Written over a vector holding another shape, as a resolution reuses them.
    std::vector<TensorInfo> fast{TensorInfo{DType::kI8, {7, 7, 7, 7, 7, 7}}, TensorInfo{DType::kI8, {3}}};
    const bool took = FastOutputShape(kind_, at_ >= 0 ? &params_[at_] : nullptr, in, constants, cs_, &fast);
    std::string where = op_;
    for (const auto& o : run) where += " " + ir::ShapeToString(o.shape);
    if (!st.ok()) {
      EXPECT_FALSE(took) << where << ": the inference refuses (" << st.message() << ") but the fast way gives "
                         << (fast.empty() ? "" : ir::ShapeToString(fast[0].shape));
      return false;
    }
    if (!took) return false;
    EXPECT_EQ(fast.size(), generic.size()) << where;
    for (size_t i = 0; i < std::min(fast.size(), generic.size()); ++i) {
      EXPECT_EQ(fast[i].dtype, generic[i].dtype) << where;
      EXPECT_EQ(fast[i].shape, generic[i].shape) << where << ": fast " << ir::ShapeToString(fast[i].shape)
                                                 << ", inferred " << ir::ShapeToString(generic[i].shape);
    }
    return true;
  }

 private:
  static void Infos(const std::vector<Operand>& ops, std::vector<TensorInfo>* in,
                    std::vector<const ir::TensorData*>* constants) {
    for (const auto& o : ops) {
      in->push_back(TensorInfo{o.dtype, o.shape});
      constants->push_back(o.value.get());
    }
  }

  std::string op_;
  Attrs attrs_;
  const OpDef* def_ = nullptr;
  format::StepDesc step_;
  CheckedStep cs_;
  std::vector<const void*> weights_;
  std::vector<int64_t> params_;
  int32_t at_ = -1;
  FastShape kind_ = FastShape::kNone;
  int outputs_ = 1;
};

Operand F(Shape s) { return Operand{DType::kF32, std::move(s), nullptr}; }
Operand Of(DType dt, Shape s) { return Operand{dt, std::move(s), nullptr}; }
Operand Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Operand{DType::kI64, {n}, I64({n}, std::move(v))};
}

Shape RandomShape(std::mt19937& rng, size_t rank, std::initializer_list<int64_t> dims) {
  const std::vector<int64_t> d(dims);
  Shape s(rank);
  for (auto& x : s) x = d[rng() % d.size()];
  return s;
}

TEST(FastShape, UnaryOpsKeepInputZerosShape) {
  for (const char* op : {"Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Exp", "Sqrt", "Neg", "Softmax"}) {
    FastStep s(op, A(), {F({1, 8, 16})});
    EXPECT_EQ(s.kind(), FastShape::kSameAsInput0) << op;
    for (Shape x : {Shape{1, 3, 16}, Shape{1, 0, 16}, Shape{2, 8, 5}, Shape{1, 1, 1}}) EXPECT_TRUE(s.Check({F(x)})) << op;
  }
  FastStep cast("Cast", A().I("to", static_cast<int64_t>(DType::kI64)), {F({4, 6})});
  EXPECT_EQ(cast.kind(), FastShape::kSameAsInput0);
  EXPECT_TRUE(cast.Check({F({9, 1})}));
}

TEST(FastShape, BroadcastOpsMatchTheInferenceOnRandomShapes) {
  std::mt19937 rng(7);
  for (const char* op : {"Add", "Mul", "Sub", "Div", "Pow", "Max"}) {
    FastStep s(op, A(), {F({2, 1, 5}), F({3, 1})});
    ASSERT_EQ(s.kind(), FastShape::kBroadcast) << op;
    int took = 0, refused = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const Shape a = RandomShape(rng, 1 + rng() % 4, {0, 1, 2, 3});
      const Shape b = RandomShape(rng, 1 + rng() % 4, {0, 1, 2, 3});
      took += s.Check({F(a), F(b)});
      std::vector<TensorInfo> outs;
      std::vector<TensorInfo> in{TensorInfo{DType::kF32, a}, TensorInfo{DType::kF32, b}};
      std::vector<const ir::TensorData*> none(2, nullptr);
      refused += !InferOutputs(*FindOp(op), InferContext{op, A(), in, none, 1}, &outs).ok();
    }
    EXPECT_GT(took, 50) << op;
    EXPECT_GT(refused, 20) << op;  // the refusals were tried too
  }
  FastStep cmp("Equal", A(), {Of(DType::kI64, {4, 1}), Of(DType::kI64, {1, 6})});
  ASSERT_EQ(cmp.kind(), FastShape::kBroadcast);
  EXPECT_TRUE(cmp.Check({Of(DType::kI64, {2, 1}), Of(DType::kI64, {1, 9})}));
  EXPECT_FALSE(cmp.Check({Of(DType::kI64, {2, 3}), Of(DType::kI64, {1, 9})}));
  FastStep where("Where", A(), {Of(DType::kBool, {1, 1, 4, 4}), F({1}), F({1, 2, 4, 4})});
  ASSERT_EQ(where.kind(), FastShape::kBroadcast);
  EXPECT_TRUE(where.Check({Of(DType::kBool, {1, 1, 9, 9}), F({1}), F({1, 2, 9, 9})}));
  EXPECT_TRUE(where.Check({Of(DType::kBool, {1, 1, 1, 9}), F({1}), F({1, 2, 9, 1})}));
  EXPECT_FALSE(where.Check({Of(DType::kBool, {1, 1, 8, 8}), F({1}), F({1, 2, 9, 9})}));
}

TEST(FastShape, MatMulMatchesTheInferenceOnRandomShapes) {
  std::mt19937 rng(11);
  FastStep s("MatMul", A(), {F({2, 4, 8, 16}), F({2, 4, 16, 8})});
  ASSERT_EQ(s.kind(), FastShape::kMatMul);
  int took = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Shape a = RandomShape(rng, 1 + rng() % 4, {1, 2, 3});
    Shape b = RandomShape(rng, 1 + rng() % 4, {1, 2, 3});
    if (rng() % 2) b[b.size() == 1 ? 0 : b.size() - 2] = a.back();  // K agrees half the time
    took += s.Check({F(a), F(b)});
  }
  EXPECT_GT(took, 100);
  EXPECT_TRUE(s.Check({F({2, 4, 0, 16}), F({2, 4, 16, 8})}));
  EXPECT_FALSE(s.Check({F({2, 4, 5, 16}), F({2, 4, 15, 8})}));
}

TEST(FastShape, TransposeTakesThePermutation) {
  FastStep s("Transpose", A().Is("perm", {0, 2, 1, 3}), {F({1, 5, 7, 2})});
  ASSERT_EQ(s.kind(), FastShape::kTranspose);
  for (Shape x : {Shape{1, 9, 7, 2}, Shape{3, 1, 0, 2}, Shape{1, 1, 1, 1}}) EXPECT_TRUE(s.Check({F(x)}));
  FastStep reversed("Transpose", A(), {F({2, 3, 4})});
  ASSERT_EQ(reversed.kind(), FastShape::kTranspose);
  EXPECT_TRUE(reversed.Check({F({5, 3, 1})}));
  FastStep negative("Transpose", A().Is("perm", {-1, 0, 1}), {F({2, 3, 4})});
  ASSERT_EQ(negative.kind(), FastShape::kTranspose);
  EXPECT_TRUE(negative.Check({F({6, 3, 9})}));
}

TEST(FastShape, LayerNormalizationOnlyWhereTheNormalizedDimsKeepTheirSize) {
  const Operand scale{DType::kF32, {8}, nullptr}, bias{DType::kF32, {8}, nullptr};
  FastStep s("LayerNormalization", A().I("axis", -1), {F({1, 5, 8}), scale, bias});
  ASSERT_EQ(s.kind(), FastShape::kLayerNorm);
  EXPECT_TRUE(s.Check({F({1, 9, 8}), scale, bias}));
  EXPECT_TRUE(s.Check({F({4, 0, 8}), scale, bias}));
  EXPECT_FALSE(s.Check({F({1, 9, 7}), scale, bias}));  // refused by the inference: Scale does not match
  FastStep two("LayerNormalization", A().I("axis", 1), {F({3, 2, 4}), Operand{DType::kF32, {2, 4}, nullptr}});
  ASSERT_EQ(two.kind(), FastShape::kLayerNorm);
  EXPECT_TRUE(two.Check({F({7, 2, 4}), Operand{DType::kF32, {2, 4}, nullptr}}));
  EXPECT_FALSE(two.Check({F({7, 1, 4}), Operand{DType::kF32, {2, 4}, nullptr}}));
}

TEST(FastShape, UnsqueezeWithConstantAxes) {
  FastStep s("Unsqueeze", A(), {F({1, 6}), Ints({1, -1})}, {false, true});
  ASSERT_EQ(s.kind(), FastShape::kUnsqueeze);
  for (Shape x : {Shape{1, 9}, Shape{3, 0}, Shape{1, 1}}) EXPECT_TRUE(s.Check({F(x), Ints({1, -1})}));
  // Axes that are not a weight may change with the sizes: the inference runs.
  FastStep computed("Unsqueeze", A(), {F({1, 6}), Ints({0})}, {false, false});
  EXPECT_EQ(computed.kind(), FastShape::kNone);
  FastStep attr("Unsqueeze", A().Is("axes", {0, 3}), {F({5, 6})});
  ASSERT_EQ(attr.kind(), FastShape::kUnsqueeze);
  EXPECT_TRUE(attr.Check({F({2, 7})}));
}

TEST(FastShape, ReshapeMatchesTheInferenceOnRandomTargets) {
  std::mt19937 rng(5);
  FastStep s("Reshape", A(), {F({2, 3, 4}), Ints({0, -1, 2})});
  ASSERT_EQ(s.kind(), FastShape::kReshape);
  int took = 0, refused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Shape x = RandomShape(rng, 3, {0, 1, 2, 3, 4, 6});
    std::vector<int64_t> t(3);
    for (auto& d : t) d = std::vector<int64_t>{-2, -1, -1, 0, 0, 1, 2, 3, 4, 6, 12}[rng() % 11];
    const bool ok = s.Check({F(x), Ints(t)});
    took += ok;
    std::vector<TensorInfo> outs, in{TensorInfo{DType::kF32, x}, TensorInfo{DType::kI64, {3}}};
    auto target = I64({3}, t);
    std::vector<const ir::TensorData*> constants{nullptr, target.get()};
    refused += !InferOutputs(*FindOp("Reshape"), InferContext{"Reshape", A(), in, constants, 1}, &outs).ok();
  }
  EXPECT_GT(took, 50);
  EXPECT_GT(refused, 100);
  // A target of another length than at the bound, or int32: the inference runs.
  EXPECT_FALSE(s.Check({F({2, 3, 4}), Ints({24})}));
  EXPECT_FALSE(s.Check({F({2, 3, 4}), Operand{DType::kI32, {3}, I32({3}, {0, -1, 2})}}));
  FastStep allowzero("Reshape", A().I("allowzero", 1), {F({2, 3, 4}), Ints({2, -1, 4})});
  EXPECT_EQ(allowzero.kind(), FastShape::kNone);
}

TEST(FastShape, ConcatMatchesTheInferenceOnRandomShapes) {
  std::mt19937 rng(3);
  for (int64_t axis : {0, 1, -1}) {
    FastStep s("Concat", A().I("axis", axis), {F({2, 3, 4}), F({2, 3, 4}), F({2, 3, 4})});
    ASSERT_EQ(s.kind(), FastShape::kConcat);
    int took = 0;
    for (int trial = 0; trial < 200; ++trial) {
      const Shape base = RandomShape(rng, 3, {0, 1, 2, 3});
      std::vector<Operand> run;
      for (int i = 0; i < 3; ++i) {
        Shape x = base;
        if (rng() % 2) x[static_cast<size_t>((axis + 3) % 3)] = static_cast<int64_t>(rng() % 4);  // the axis differs
        if (rng() % 8 == 0) x[rng() % 3] += 1;                                                  // another dim may too
        run.push_back(F(x));
      }
      took += s.Check(run);
    }
    EXPECT_GT(took, 50) << axis;
  }
}

TEST(FastShape, GatherTakesTheIndicesShape) {
  FastStep s("Gather", A(), {F({100, 8}), Of(DType::kI64, {1, 5})});
  ASSERT_EQ(s.kind(), FastShape::kGather);
  for (Shape idx : {Shape{1, 9}, Shape{1, 0}, Shape{3, 1}}) EXPECT_TRUE(s.Check({F({100, 8}), Of(DType::kI64, idx)}));
  FastStep axis1("Gather", A().I("axis", -1), {F({2, 6, 7}), Of(DType::kI64, {})});
  ASSERT_EQ(axis1.kind(), FastShape::kGather);
  EXPECT_TRUE(axis1.Check({F({3, 6, 9}), Of(DType::kI64, {})}));
  EXPECT_TRUE(axis1.Check({F({3, 6, 9}), Of(DType::kI32, {2, 2})}));
}

TEST(FastShape, SliceMatchesTheInferenceOnRandomBounds) {
  std::mt19937 rng(13);
  const std::vector<int64_t> ends{-9, -4, -2, -1, 0, 1, 2, 3, 5, 9, INT64_MAX, INT64_MIN};
  // starts and ends; with axes; with axes and steps (negative ones too).
  int refused = 0;
  for (int form = 0; form < 3; ++form) {
    std::vector<Operand> bound{F({4, 5, 6}), Ints({0, 1}), Ints({2, 3})};
    if (form >= 1) bound.push_back(Ints({0, -1}));
    if (form >= 2) bound.push_back(Ints({1, 2}));
    FastStep s("Slice", A(), bound);
    ASSERT_EQ(s.kind(), FastShape::kSlice) << form;
    int took = 0;
    for (int trial = 0; trial < 600; ++trial) {
      const size_t n = 1 + rng() % 2;
      std::vector<int64_t> st(n), en(n), ax(n), sp(n);
      for (size_t i = 0; i < n; ++i) {
        st[i] = ends[rng() % ends.size()], en[i] = ends[rng() % ends.size()];
        ax[i] = std::vector<int64_t>{-4, -3, -1, 0, 1, 2, 3}[rng() % 7];
        sp[i] = std::vector<int64_t>{-3, -1, 0, 1, 1, 2, INT64_MIN}[rng() % 7];
      }
      std::vector<Operand> run{F(RandomShape(rng, 3, {0, 1, 2, 4, 7})), Ints(st), Ints(en)};
      if (form >= 1) run.push_back(Ints(ax));
      if (form >= 2) run.push_back(Ints(sp));
      if (rng() % 16 == 0) run[2] = Ints({1});  // ends of another length
      const bool ok = s.Check(run);
      took += ok;
      std::vector<TensorInfo> outs, in;
      std::vector<const ir::TensorData*> constants;
      for (const auto& o : run) in.push_back(TensorInfo{o.dtype, o.shape}), constants.push_back(o.value.get());
      refused += !InferOutputs(*FindOp("Slice"), InferContext{"Slice", A(), in, constants, 1}, &outs).ok();
    }
    EXPECT_GT(took, 100) << form;
  }
  EXPECT_GT(refused, 30);  // the refusals were tried too
  // int32 bounds, or bounds not known at the run: the inference reads them.
  FastStep s("Slice", A(), {F({4, 3}), Ints({1}), Ints({3})});
  EXPECT_FALSE(s.Check({F({4, 3}), Operand{DType::kI32, {1}, I32({1}, {1})}, Ints({3})}));
  EXPECT_FALSE(s.Check({F({4, 3}), Ints({1}), Of(DType::kI64, {1})}));
}

TEST(FastShape, ExpandAndConstantOfShapeTakeTheirShapeValue) {
  std::mt19937 rng(17);
  FastStep expand("Expand", A(), {F({1, 3, 1}), Ints({2, 3, 4})});
  ASSERT_EQ(expand.kind(), FastShape::kExpand);
  int took = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Shape x = RandomShape(rng, 1 + rng() % 3, {0, 1, 2, 3});
    const Shape t = RandomShape(rng, 1 + rng() % 4, {-1, 0, 1, 2, 3});
    took += expand.Check({F(x), Ints(t)});
  }
  EXPECT_GT(took, 50);
  EXPECT_FALSE(expand.Check({F({1, 3, 1}), Ints({int64_t{1} << 40, int64_t{1} << 40, 1})}));  // too large
  FastStep fill("ConstantOfShape", A(), {Ints({2, 3})});
  ASSERT_EQ(fill.kind(), FastShape::kConstantOfShape);
  EXPECT_TRUE(fill.Check({Ints({7, 0})}));
  EXPECT_TRUE(fill.Check({Ints({1, 9})}));
  EXPECT_FALSE(fill.Check({Ints({-1, 9})}));
  EXPECT_FALSE(fill.Check({Ints({4})}));  // another rank than at the bound: the inference gives it
}

TEST(FastShape, IntegerRangeCountsExactly) {
  auto scalar = [](int64_t v) { return Operand{DType::kI64, {}, I64({}, {v})}; };
  FastStep s("Range", A(), {scalar(0), scalar(8), scalar(1)});
  ASSERT_EQ(s.kind(), FastShape::kRange);
  for (int64_t start : {-7, 0, 3, 10})
    for (int64_t limit : {-5, 0, 1, 8, 11})
      for (int64_t delta : {-3, -1, 1, 2, 5}) EXPECT_TRUE(s.Check({scalar(start), scalar(limit), scalar(delta)}));
  EXPECT_FALSE(s.Check({scalar(0), scalar(8), scalar(0)}));                 // refused by the inference
  EXPECT_FALSE(s.Check({scalar(INT64_MIN), scalar(INT64_MAX), scalar(1)}));  // too many elements
  auto scalar32 = [](int32_t v) { return Operand{DType::kI32, {}, I32({}, {v})}; };
  FastStep s32("Range", A(), {scalar32(0), scalar32(8), scalar32(1)});
  ASSERT_EQ(s32.kind(), FastShape::kRange);
  EXPECT_TRUE(s32.Check({scalar32(5), scalar32(-4), scalar32(-2)}));
  EXPECT_FALSE(s32.Check({scalar32(5), scalar(9), scalar32(1)}));  // mixed dtypes: refused by the inference
}

TEST(FastShape, SplitWithFixedSizesWhereTheAxisKeepsItsSize) {
  FastStep s("Split", A().I("axis", -1), {F({1, 5, 12}), Ints({3, 4, 5})}, {false, true}, 3);
  ASSERT_EQ(s.kind(), FastShape::kSplit);
  for (Shape x : {Shape{1, 9, 12}, Shape{4, 0, 12}, Shape{1, 1, 12}}) EXPECT_TRUE(s.Check({F(x), Ints({3, 4, 5})})) << x[1];
  EXPECT_FALSE(s.Check({F({1, 5, 13}), Ints({3, 4, 5})}));  // the axis changed: the inference refuses or gives it
  FastStep equal("Split", A().I("axis", 1), {F({2, 6, 3})}, {}, 2);
  ASSERT_EQ(equal.kind(), FastShape::kSplit);
  EXPECT_TRUE(equal.Check({F({7, 6, 1})}));
  EXPECT_FALSE(equal.Check({F({7, 8, 1})}));
  // Sizes computed from the shapes may change: the inference runs.
  EXPECT_EQ(FastStep("Split", A(), {F({6, 2}), Ints({2, 4})}, {false, false}, 2).kind(), FastShape::kNone);
  EXPECT_EQ(FastStep("Softmax", A(), {F({4, 3})}).kind(), FastShape::kSameAsInput0);
  EXPECT_EQ(FastStep("Pad", A(), {F({4, 3}), Ints({0, 0, 1, 1})}).kind(), FastShape::kNone);
}

}  // namespace
}  // namespace fcb::ops::testing
