// ops::EvaluateDirect (the values computed from shapes that a resolution at a
// new size evaluates without making kernels) against the ops' generic kernels
// (ops::Evaluate): the same dtype, shape and bytes for every op it takes, with
// broadcasting, negative and int32 indices, wrapping arithmetic and bools that
// are neither 0 nor 1; and it declines (so the generic kernel runs and reports
// the error) what it does not take.
#include <gtest/gtest.h>

#include <limits>

#include "ops/ops_test_util.h"
#include "ops/plan_check.h"

namespace fcb::ops::testing {
namespace {

// Infers `op` on constant `inputs`, evaluates it both ways and compares.
// Returns whether the direct evaluation took it.
bool DirectMatchesGeneric(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& inputs) {
  const OpDef* def = FindOp(op);
  EXPECT_NE(def, nullptr) << op;
  if (!def) return false;
  std::vector<TensorInfo> in_info;
  std::vector<const ir::TensorData*> constants;
  for (const auto& t : inputs) {
    in_info.push_back(TensorInfo{t->dtype, t->shape});
    constants.push_back(t.get());
  }
  std::vector<TensorInfo> outs;
  Status st = InferOutputs(*def, InferContext{op, attrs, in_info, constants, 1}, &outs);
  EXPECT_TRUE(st.ok()) << op << ": " << st.message();
  if (!st.ok()) return false;
  std::vector<std::shared_ptr<ir::TensorData>> direct;
  if (!EvaluateDirect(*def, attrs, constants, outs, &direct)) {
    EXPECT_TRUE(direct.empty()) << op;
    return false;
  }
  auto generic = Evaluate(*def, attrs, constants, in_info, outs);
  EXPECT_TRUE(generic.ok()) << op << ": " << generic.status().message();
  if (!generic.ok()) return true;
  EXPECT_EQ(direct.size(), 1u) << op;
  EXPECT_EQ(generic.value().size(), 1u) << op;
  if (direct.size() != 1 || generic.value().size() != 1) return true;
  const ir::TensorData& a = *direct[0];
  const ir::TensorData& b = *generic.value()[0];
  EXPECT_EQ(a.dtype, b.dtype) << op;
  EXPECT_EQ(a.shape, b.shape) << op;
  EXPECT_EQ(a.bytes, b.bytes) << op << " " << ir::ShapeToString(a.shape);
  return true;
}

TEST(EvaluateDirect, ViewsAndCastToTheSameDtypeKeepTheBytes) {
  const auto x = I64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(DirectMatchesGeneric("Reshape", A(), {x, I64({2}, {3, -1})}));
  EXPECT_TRUE(DirectMatchesGeneric("Unsqueeze", A(), {x, I64({2}, {0, -1})}));
  EXPECT_TRUE(DirectMatchesGeneric("Squeeze", A(), {I64({1, 3, 1}, {7, 8, 9}), I64({1}, {2})}));
  EXPECT_TRUE(DirectMatchesGeneric("Flatten", A().I("axis", 1), {x}));
  EXPECT_TRUE(DirectMatchesGeneric("Identity", A(), {Bool({3}, {0, 1, 1})}));
  EXPECT_TRUE(DirectMatchesGeneric("Cast", A().I("to", static_cast<int64_t>(DType::kI64)), {x}));
  // A Cast to another dtype goes through its kernel.
  EXPECT_FALSE(DirectMatchesGeneric("Cast", A().I("to", static_cast<int64_t>(DType::kI32)), {x}));
}

TEST(EvaluateDirect, ConcatGatherRangeConstantOfShape) {
  EXPECT_TRUE(DirectMatchesGeneric("Concat", A().I("axis", 0), {I64({1}, {1}), I64({0}, {}), I64({2}, {-1, 64})}));
  EXPECT_TRUE(DirectMatchesGeneric("Concat", A().I("axis", -1),
                                   {I32({2, 1}, {1, 2}), I32({2, 3}, {3, 4, 5, 6, 7, 8})}));
  const auto shape = I64({4}, {1, 4, 7, 16});
  EXPECT_TRUE(DirectMatchesGeneric("Gather", A(), {shape, I64({}, {2})}));
  EXPECT_TRUE(DirectMatchesGeneric("Gather", A(), {shape, I64({2}, {-1, 0})}));
  EXPECT_TRUE(DirectMatchesGeneric("Gather", A().I("axis", 1), {I64({2, 3}, {1, 2, 3, 4, 5, 6}), I32({2, 2}, {2, 0, -3, 1})}));
  // Out of range: declined, the generic kernel reports it.
  EXPECT_FALSE(DirectMatchesGeneric("Gather", A(), {shape, I64({1}, {4})}));
  EXPECT_TRUE(DirectMatchesGeneric("Range", A(), {I64({}, {0}), I64({}, {7}), I64({}, {1})}));
  EXPECT_TRUE(DirectMatchesGeneric("Range", A(), {I64({}, {10}), I64({}, {-3}), I64({}, {-4})}));
  EXPECT_TRUE(DirectMatchesGeneric("Range", A(), {I32({}, {5}), I32({}, {5}), I32({}, {2})}));
  EXPECT_TRUE(DirectMatchesGeneric("Range", A(), {I32({}, {std::numeric_limits<int32_t>::max() - 2}),
                                                  I32({}, {std::numeric_limits<int32_t>::max()}), I32({}, {1})}));
  EXPECT_FALSE(DirectMatchesGeneric("Range", A(), {F32({}, {0.f}), F32({}, {3.f}), F32({}, {1.f})}));
  EXPECT_TRUE(DirectMatchesGeneric("ConstantOfShape", A(), {I64({2}, {2, 3})}));
  format::AttrDesc value;
  value.name = "value";
  value.ints = {-7};
  EXPECT_TRUE(DirectMatchesGeneric("ConstantOfShape", Attrs({value}), {I64({1}, {5})}));
  value.ints.clear();
  value.floats = {1.f};
  format::AttrDesc dtype;
  dtype.name = "value.dtype";
  dtype.ints = {static_cast<int64_t>(DType::kBool)};
  EXPECT_TRUE(DirectMatchesGeneric("ConstantOfShape", Attrs({value, dtype}), {I64({2}, {1, 4})}));
}

TEST(EvaluateDirect, BroadcastArithmeticComparisonsLogicWhereExpand) {
  const auto a = I64({2, 1}, {5, std::numeric_limits<int64_t>::max()});
  const auto b = I64({3}, {1, -2, 5});
  for (const char* op : {"Add", "Sub", "Mul", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(DirectMatchesGeneric(op, A(), {a, b}));
    EXPECT_TRUE(DirectMatchesGeneric(op, A(), {I32({}, {3}), I32({2, 2}, {1, 3, -4, std::numeric_limits<int32_t>::min()})}));
  }
  // Bools as bytes: any nonzero byte is true.
  const auto p = Bool({2, 2}, {0, 1, 2, 0});
  const auto q = Bool({2}, {3, 0});
  for (const char* op : {"And", "Or", "Xor", "Equal"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(DirectMatchesGeneric(op, A(), {p, q}));
  }
  EXPECT_TRUE(DirectMatchesGeneric("Not", A(), {p}));
  EXPECT_TRUE(DirectMatchesGeneric("Where", A(), {p, I64({2, 1}, {10, 20}), I64({}, {-1})}));
  EXPECT_TRUE(DirectMatchesGeneric("Where", A(), {Bool({3}, {1, 0, 5}), F32({3}, {1.5f, 2.5f, 3.5f}), F32({1}, {0.f})}));
  EXPECT_TRUE(DirectMatchesGeneric("Expand", A(), {I64({3, 1}, {1, 2, 3}), I64({3}, {2, 1, 4})}));
  EXPECT_TRUE(DirectMatchesGeneric("Expand", A(), {Bool({1}, {1}), I64({2}, {2, 3})}));
  // Floating arithmetic and integer division go through their kernels.
  EXPECT_FALSE(DirectMatchesGeneric("Add", A(), {F32({2}, {1.f, 2.f}), F32({2}, {3.f, 4.f})}));
  EXPECT_FALSE(DirectMatchesGeneric("Div", A(), {I64({2}, {7, -7}), I64({}, {2})}));
}

}  // namespace
}  // namespace fcb::ops::testing
