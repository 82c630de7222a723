// Elementwise ops (broadcast binary, variadic, compare, logic, Where, unary,
// Clip, Cast) against scalar references, on every runnable target.
#include <cmath>
#include <functional>
#include <limits>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

// Reference broadcast of f over float inputs a, b.
TensorPtr RefBinary(const TensorPtr& a, const TensorPtr& b, const std::function<float(float, float)>& f) {
  const size_t r = std::max(a->shape.size(), b->shape.size());
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t da = d < r - a->shape.size() ? 1 : a->shape[d - (r - a->shape.size())];
    const int64_t db = d < r - b->shape.size() ? 1 : b->shape[d - (r - b->shape.size())];
    out[d] = da == 1 ? db : da;
  }
  auto y = ir::TensorData::Make(DType::kF32, out);
  for (int64_t i = 0; i < y->numel(); ++i) {
    const auto idx = Unravel(i, out);
    y->mutable_data<float>()[i] = f(a->data<float>()[BroadcastOffset(idx, a->shape)],
                                    b->data<float>()[BroadcastOffset(idx, b->shape)]);
  }
  return y;
}

struct Case {
  Shape a, b;
};

const Case kBroadcastCases[] = {
    {{3, 5, 7}, {3, 5, 7}},     // same shape
    {{3, 5, 7}, {}},            // scalar right
    {{}, {2, 9}},               // scalar left
    {{3, 5, 7}, {7}},           // row
    {{3, 5, 7}, {3, 5, 1}},     // column
    {{3, 5, 7}, {1, 5, 1}},     // middle dim
    {{3, 1, 7}, {5, 1}},        // both sides
    {{1, 4, 1, 3}, {2, 1, 5, 1}},  // both sides, interleaved
    {{2, 70001}, {70001}},      // long runs split into pieces
    // A short row repeated over many rows (NHWC x per-channel): several
    // 4096-float tiles of the row per chunk, and a partial last one; the
    // repeated row on either side (Sub, Div, Pow are not symmetric).
    {{1, 40, 30, 24}, {24}},
    {{37}, {130, 37}},
    {{2, 9, 11, 48}, {1, 1, 1, 48}},
    {{1}, {1}},
    {{0, 3}, {3}},              // empty output
};

TEST(Binary, F32BroadcastMatchesReference) {
  const std::vector<std::pair<std::string, std::function<float(float, float)>>> ops = {
      {"Add", [](float x, float y) { return x + y; }},
      {"Sub", [](float x, float y) { return x - y; }},
      {"Mul", [](float x, float y) { return x * y; }},
      {"Div", [](float x, float y) { return x / y; }},
      {"Max", [](float x, float y) { return std::max(x, y); }},
      {"Min", [](float x, float y) { return std::min(x, y); }},
      {"Pow", [](float x, float y) { return std::pow(std::fabs(x), y); }},
  };
  int seed = 1;
  for (const auto& c : kBroadcastCases) {
    auto a = F32(c.a, Rand(ir::NumElements(c.a), seed++, 0.5f, 3.f));
    auto b = F32(c.b, Rand(ir::NumElements(c.b), seed++, 0.5f, 3.f));
    for (const auto& [name, f] : ops) {
      SCOPED_TRACE(ir::ShapeToString(c.a) + " " + name + " " + ir::ShapeToString(c.b));
      Check(name, A(), {a, b}, {RefBinary(a, b, f)}, 1e-5);
    }
  }
}

TEST(Binary, IntegerArithmeticWrapsAndDividesLikeOrt) {
  // Division truncates toward zero; division by zero yields 0 instead of trapping.
  Check("Div", A(), {I64({5}, {7, -7, 7, -7, 5}), I64({5}, {2, 2, -2, -2, 0})},
        {I64({5}, {3, -3, -3, 3, 0})});
  Check("Div", A(), {I32({2}, {std::numeric_limits<int32_t>::min(), 9}), I32({1}, {-1})},
        {I32({2}, {std::numeric_limits<int32_t>::min(), -9})});
  Check("Add", A(), {I32({2}, {std::numeric_limits<int32_t>::max(), 1}), I32({}, {1})},
        {I32({2}, {std::numeric_limits<int32_t>::min(), 2})});
  Check("Mul", A(), {I64({2, 1}, {3, -4}), I64({3}, {1, 2, 3})}, {I64({2, 3}, {3, 6, 9, -4, -8, -12})});
  Check("Sub", A(), {U8({2}, {1, 200}), U8({2}, {2, 100})}, {U8({2}, {255, 100})});
  // Mod: fmod=0 takes the divisor's sign (Python), fmod=1 the dividend's (C).
  Check("Mod", A(), {I64({4}, {7, -7, 7, -7}), I64({4}, {3, 3, -3, -3})}, {I64({4}, {1, 2, -2, -1})});
  Check("Mod", A().I("fmod", 1), {I32({4}, {7, -7, 7, -7}), I32({4}, {3, 3, -3, -3})},
        {I32({4}, {1, -1, 1, -1})});
  Check("Mod", A().I("fmod", 1), {F32({2}, {5.5f, -5.5f}), F32({}, {2.f})}, {F32({2}, {1.5f, -1.5f})});
  Check("Max", A(), {I64({3}, {1, 5, -2}), I64({1}, {0})}, {I64({3}, {1, 5, 0})});
  Check("Add", A(), {F64({2}, {0.1, 0.2}), F64({2}, {1.0, 2.0})}, {F64({2}, {1.1, 2.2})}, 1e-12);
  // Pow with mixed dtypes: float base, integer exponent; integer base.
  Check("Pow", A(), {F32({3}, {2.f, -3.f, 0.5f}), I64({1}, {3})}, {F32({3}, {8.f, -27.f, 0.125f})});
  Check("Pow", A(), {I64({3}, {2, -3, 10}), I64({3}, {10, 3, 0})}, {I64({3}, {1024, -27, 1})});
}

TEST(Binary, VariadicSumMeanMaxMin) {
  auto a = F32({2, 3}, Rand(6, 1));
  auto b = F32({3}, Rand(3, 2));
  auto c = F32({2, 1}, Rand(2, 3));
  auto ref = [&](const std::function<float(float, float, float)>& f) {
    auto y = ir::TensorData::Make(DType::kF32, {2, 3});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        y->mutable_data<float>()[i * 3 + j] =
            f(a->data<float>()[i * 3 + j], b->data<float>()[j], c->data<float>()[i]);
    return y;
  };
  Check("Sum", A(), {a, b, c}, {ref([](float x, float y, float z) { return x + y + z; })});
  Check("Mean", A(), {a, b, c}, {ref([](float x, float y, float z) { return (x + y + z) / 3; })});
  Check("Max", A(), {a, b, c}, {ref([](float x, float y, float z) { return std::max({x, y, z}); })});
  Check("Min", A(), {c, b, a}, {ref([](float x, float y, float z) { return std::min({x, y, z}); })});
  Check("Sum", A(), {b}, {b});
  Check("Max", A(), {I32({2}, {1, 9}), I32({2, 1}, {5, 0})}, {I32({2, 2}, {5, 9, 1, 9})});
}

TEST(Binary, CompareLogicWhere) {
  auto a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = F32({3}, {2, 2, 7});
  Check("Equal", A(), {a, b}, {Bool({2, 3}, {0, 1, 0, 0, 0, 0})});
  Check("Less", A(), {a, b}, {Bool({2, 3}, {1, 0, 1, 0, 0, 1})});
  Check("Greater", A(), {a, b}, {Bool({2, 3}, {0, 0, 0, 1, 1, 0})});
  Check("LessOrEqual", A(), {a, b}, {Bool({2, 3}, {1, 1, 1, 0, 0, 1})});
  Check("GreaterOrEqual", A(), {a, b}, {Bool({2, 3}, {0, 1, 0, 1, 1, 0})});
  Check("Equal", A(), {I64({2, 1}, {1, 2}), I64({2}, {2, 1})}, {Bool({2, 2}, {0, 1, 1, 0})});
  Check("Equal", A(), {Bool({2}, {1, 0}), Bool({2}, {1, 1})}, {Bool({2}, {1, 0})});
  Check("Less", A(), {I32({3}, {-1, 0, 1}), I32({}, {0})}, {Bool({3}, {1, 0, 0})});
  auto p = Bool({4}, {0, 0, 1, 1}), q = Bool({4}, {0, 1, 0, 1});
  Check("And", A(), {p, q}, {Bool({4}, {0, 0, 0, 1})});
  Check("Or", A(), {p, q}, {Bool({4}, {0, 1, 1, 1})});
  Check("Xor", A(), {p, q}, {Bool({4}, {0, 1, 1, 0})});
  Check("Not", A(), {p}, {Bool({4}, {1, 1, 0, 0})});
  // Where broadcasts all three inputs.
  Check("Where", A(), {Bool({2, 1}, {1, 0}), F32({3}, {1, 2, 3}), F32({2, 3}, {-1, -2, -3, -4, -5, -6})},
        {F32({2, 3}, {1, 2, 3, -4, -5, -6})});
  Check("Where", A(), {Bool({3}, {1, 0, 1}), I64({}, {7}), I64({2, 1}, {0, 1})},
        {I64({2, 3}, {7, 0, 7, 7, 1, 7})});
}

TEST(Binary, Errors) {
  EXPECT_REFUSED(Fails("Add", A(), {F32({3}, {1, 2, 3}), F32({2}, {1, 2})}), StatusCode::kInvalidArgument, "shapes 3 and 2 cannot be broadcast");  // incompatible
  EXPECT_REFUSED(Fails("Add", A(), {F32({3}, {1, 2, 3}), I64({3}, {1, 2, 3})}), StatusCode::kInvalidArgument, "inputs have different dtypes (float32, int64)");  // mixed dtypes
  EXPECT_REFUSED(Fails("And", A(), {F32({1}, {1}), F32({1}, {1})}), StatusCode::kUnsupported, "And: dtype float32");
  EXPECT_REFUSED(Fails("Sum", A(), {I64({1}, {1}), I64({1}, {1})}), StatusCode::kUnsupported, "Sum: dtype int64");
  EXPECT_REFUSED(Fails("Mod", A(), {F32({1}, {1}), F32({1}, {1})}), StatusCode::kInvalidArgument, "fmod must be 1 for floating-point inputs");  // float needs fmod=1
  EXPECT_REFUSED(Fails("Where", A(), {F32({1}, {1}), F32({1}, {1}), F32({1}, {1})}), StatusCode::kInvalidArgument, "condition must be bool");
  EXPECT_REFUSED(Fails("Add", A(), {F32({1}, {1})}), StatusCode::kInvalidArgument, "Add takes 2 to 2 inputs, got 1");
  // A hostile shape is rejected by inference, not allocated.
  std::vector<TensorInfo> in = {{DType::kF32, {-1, 3}}, {DType::kF32, {3}}};
  std::vector<const ir::TensorData*> consts(2, nullptr);
  std::vector<TensorInfo> outs;
  Attrs attrs;
  EXPECT_REFUSED(InferOutputs(*FindOp("Add"), InferContext{"Add", attrs, in, consts, 1}, &outs), StatusCode::kInvalidArgument, "input 0 has a negative dim (-1x3)");
  in[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_REFUSED(InferOutputs(*FindOp("Add"), InferContext{"Add", attrs, in, consts, 1}, &outs), StatusCode::kInvalidArgument, "input 0 has too many elements");
}

// --- unary ------------------------------------------------------------------------

float Erf(float x) { return std::erf(x); }

TEST(Unary, FloatOpsMatchReference) {
  const std::vector<float> xs = Rand(1001, 7, -4.f, 4.f);
  auto x = F32({7, 11, 13}, xs);
  auto pos = F32({1001}, Rand(1001, 8, 0.1f, 5.f));
  const float kSeluA = 1.67326319217681884765625f, kSeluG = 1.05070102214813232421875f;
  struct U {
    std::string op;
    Attrs attrs;
    std::function<float(float)> f;
    bool positive;
  };
  const std::vector<U> cases = {
      {"Relu", A(), [](float v) { return std::max(v, 0.f); }, false},
      {"LeakyRelu", A().F("alpha", 0.1f), [](float v) { return v >= 0 ? v : 0.1f * v; }, false},
      {"LeakyRelu", A(), [](float v) { return v >= 0 ? v : 0.01f * v; }, false},
      {"Sigmoid", A(), [](float v) { return 1.f / (1.f + std::exp(-v)); }, false},
      {"HardSigmoid", A(), [](float v) { return std::clamp(0.2f * v + 0.5f, 0.f, 1.f); }, false},
      {"HardSigmoid", A().F("alpha", 0.3f).F("beta", 0.4f), [](float v) { return std::clamp(0.3f * v + 0.4f, 0.f, 1.f); }, false},
      {"HardSwish", A(), [](float v) { return v * std::clamp(v / 6 + 0.5f, 0.f, 1.f); }, false},
      {"Tanh", A(), [](float v) { return std::tanh(v); }, false},
      {"Elu", A().F("alpha", 0.7f), [](float v) { return v >= 0 ? v : 0.7f * (std::exp(v) - 1); }, false},
      {"Selu", A(), [&](float v) { return v > 0 ? kSeluG * v : kSeluG * kSeluA * (std::exp(v) - 1); }, false},
      {"Softplus", A(), [](float v) { return std::log(1 + std::exp(v)); }, false},
      {"Softsign", A(), [](float v) { return v / (1 + std::fabs(v)); }, false},
      {"Gelu", A(), [](float v) { return 0.5f * v * (1 + std::erf(v / std::sqrt(2.f))); }, false},
      {"Gelu", A().S("approximate", "tanh"), [](float v) { return 0.5f * v * (1 + std::tanh(std::sqrt(2 / 3.14159265f) * (v + 0.044715f * v * v * v))); }, false},
      {"Erf", A(), Erf, false},
      {"Exp", A(), [](float v) { return std::exp(v); }, false},
      {"Log", A(), [](float v) { return std::log(v); }, true},
      {"Sqrt", A(), [](float v) { return std::sqrt(v); }, true},
      {"Neg", A(), [](float v) { return -v; }, false},
      {"Abs", A(), [](float v) { return std::fabs(v); }, false},
      {"Reciprocal", A(), [](float v) { return 1 / v; }, true},
      {"Floor", A(), [](float v) { return std::floor(v); }, false},
      {"Ceil", A(), [](float v) { return std::ceil(v); }, false},
      {"Round", A(), [](float v) { return std::nearbyint(v); }, false},
      {"Sin", A(), [](float v) { return std::sin(v); }, false},
      {"Cos", A(), [](float v) { return std::cos(v); }, false},
      {"Sign", A(), [](float v) { return v > 0 ? 1.f : v < 0 ? -1.f : 0.f; }, false},
  };
  for (const auto& u : cases) {
    const auto& in = u.positive ? pos : x;
    auto want = ir::TensorData::Make(DType::kF32, in->shape);
    for (int64_t i = 0; i < in->numel(); ++i) want->mutable_data<float>()[i] = u.f(in->data<float>()[i]);
    Check(u.op, u.attrs, {in}, {want}, 2e-5);
  }
  // Round is half to even.
  Check("Round", A(), {F32({4}, {0.5f, 1.5f, 2.5f, -0.5f})}, {F32({4}, {0.f, 2.f, 2.f, -0.f})});
  EXPECT_REFUSED(Fails("Gelu", A().S("approximate", "fast"), {x}), StatusCode::kInvalidArgument, "approximate must be none or tanh");
  EXPECT_REFUSED(Fails("Exp", A(), {I64({1}, {1})}), StatusCode::kUnsupported, "Exp: dtype int64");
}

TEST(Unary, IntegerVariants) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Check("Relu", A(), {I64({3}, {-5, 0, 5})}, {I64({3}, {0, 0, 5})});
  Check("Neg", A(), {I64({3}, {-5, kMin, 5})}, {I64({3}, {5, kMin, -5})});
  Check("Abs", A(), {I32({3}, {-5, 0, 5})}, {I32({3}, {5, 0, 5})});
  Check("Sign", A(), {I8({3}, {-5, 0, 5})}, {I8({3}, {-1, 0, 1})});
  Check("Neg", A(), {F64({2}, {1.5, -2})}, {F64({2}, {-1.5, 2})});
}

TEST(Unary, Clip) {
  auto x = F32({2, 3}, {-3, -1, 0, 1, 2, 9});
  Check("Clip", A(), {x, F32({}, {-1.5f}), F32({}, {1.5f})}, {F32({2, 3}, {-1.5f, -1, 0, 1, 1.5f, 1.5f})});
  Check("Clip", A(), {x, nullptr, F32({1}, {1.f})}, {F32({2, 3}, {-3, -1, 0, 1, 1, 1})});
  Check("Clip", A(), {x, F32({}, {0.f})}, {F32({2, 3}, {0, 0, 0, 1, 2, 9})});
  Check("Clip", A().F("min", -2.f).F("max", 2.f), {x}, {F32({2, 3}, {-2, -1, 0, 1, 2, 2})});
  Check("Clip", A(), {x}, {x});
  Check("Clip", A(), {I64({3}, {-9, 4, 9}), I64({}, {0}), I64({}, {5})}, {I64({3}, {0, 4, 5})});
  // min/max need not be constants: they are read at run time.
  auto r = RunWith("Clip", A(), {x, F32({}, {0.f}), F32({}, {1.f})}, 1,
                   kernels::GetKernelTable(TargetId::kGeneric), 1, {false, false, false});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<float>(*(*r)[0]), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_REFUSED(Fails("Clip", A(), {x, F32({2}, {0, 1})}), StatusCode::kInvalidArgument, "min/max must be scalars");
  EXPECT_REFUSED(Fails("Clip", A(), {x, I64({}, {0})}), StatusCode::kInvalidArgument, "min/max must have the input's dtype");
}

TEST(Unary, CastBetweenAllTypes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto f = F32({6}, {1.7f, -2.7f, 0.f, 300.f, -1e20f, nan});
  auto cast = [](DType to) { return A().I("to", static_cast<int64_t>(to)); };
  // Float -> int truncates toward zero, saturates out of range, NaN -> 0.
  Check("Cast", cast(DType::kI64), {f}, {I64({6}, {1, -2, 0, 300, std::numeric_limits<int64_t>::min(), 0})});
  Check("Cast", cast(DType::kI32), {f}, {I32({6}, {1, -2, 0, 300, std::numeric_limits<int32_t>::min(), 0})});
  Check("Cast", cast(DType::kU8), {f}, {U8({6}, {1, 0, 0, 255, 0, 0})});
  Check("Cast", cast(DType::kI8), {f}, {I8({6}, {1, -2, 0, 127, -128, 0})});
  Check("Cast", cast(DType::kBool), {f}, {Bool({6}, {1, 1, 0, 1, 1, 1})});
  Check("Cast", cast(DType::kF64), {F32({2}, {1.5f, -2.f})}, {F64({2}, {1.5, -2})});
  Check("Cast", cast(DType::kF32), {I64({3}, {1, -5, 1 << 20})}, {F32({3}, {1, -5, 1 << 20})});
  Check("Cast", cast(DType::kI32), {I64({2}, {int64_t{1} << 32 | 5, -1})}, {I32({2}, {5, -1})});
  Check("Cast", cast(DType::kF32), {Bool({3}, {1, 0, 7})}, {F32({3}, {1, 0, 1})});
  Check("Cast", cast(DType::kI64), {U8({2}, {255, 3})}, {I64({2}, {255, 3})});
  Check("Cast", cast(DType::kI64), {I8({2}, {-1, 3})}, {I64({2}, {-1, 3})});
  Check("Cast", cast(DType::kF32), {F64({1}, {0.25})}, {F32({1}, {0.25f})});
  Check("Cast", cast(DType::kF32), {f}, {f});
  Check("CastLike", A(), {F32({2}, {1.9f, -1.9f}), I64({0}, {})}, {I64({2}, {1, -1})});
  EXPECT_REFUSED(Fails("Cast", A(), {f}), StatusCode::kInvalidArgument, "attribute 'to' is required");                   // no 'to'
  EXPECT_REFUSED(Fails("Cast", A().I("to", 8), {f}), StatusCode::kUnsupported, "cast from float32 to string");        // string: unsupported
}

TEST(Unary, IdentityAndDropout) {
  auto x = F32({2, 2}, {1, 2, 3, 4});
  Check("Identity", A(), {x}, {x});
  Check("Identity", A(), {I64({1}, {9})}, {I64({1}, {9})});
  Check("Dropout", A(), {x, F32({}, {0.5f})}, {x});
  Check("Dropout", A(), {x}, {x, Bool({2, 2}, {1, 1, 1, 1})});
  EXPECT_REFUSED(Fails("Dropout", A(), {x, F32({}, {0.5f}), Bool({}, {1})}), StatusCode::kUnsupported, "training_mode=true (random dropout)");  // training
}

}  // namespace
}  // namespace fcb::ops::testing
