// The quantization operators (quantize_linear.cc, integer_quant.cc) against oracles written here straight
// from the ONNX operator text: plain loops, rounding with std::nearbyint under
// FE_TONEAREST (the implementation rounds without the floating-point
// environment), products accumulated in int64. Every case runs through
// constant folding's Evaluate and every runnable target with 1 and 3 threads,
// once with scales and zero points known at compile time and once fed at run
// time. The float steps the oracles share with ONNX Runtime (division by the
// scale in float32; the requantization multiplier (s_x * s_w) / s_y in float32
// applied to float(acc)) are the ones the ONNX node tests were made with.
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

// ---------------------------------------------------------------- helpers

// Deterministic pseudo-random integers in [lo, hi].
std::vector<int32_t> RandInts(int64_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  uint32_t s = seed * 2246822519u + 977u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(hi - lo + 1));
  }
  return v;
}

// A uint8 / int8 / int32 tensor from int32 values.
TensorPtr Ints(DType t, Shape s, const std::vector<int32_t>& v) {
  if (t == DType::kU8) return U8(std::move(s), std::vector<uint8_t>(v.begin(), v.end()));
  if (t == DType::kI8) return I8(std::move(s), std::vector<int8_t>(v.begin(), v.end()));
  return I32(std::move(s), v);
}

int32_t QMin(DType t) { return t == DType::kU8 ? 0 : -128; }
int32_t QMax(DType t) { return t == DType::kU8 ? 255 : 127; }

// The spec's rounding: to nearest, ties to even.
double RoundEven(double v) {
  const int old = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const double r = std::nearbyint(v);
  std::fesetround(old);
  return r;
}

// saturate(round(v) + zp) into the range of t (v NaN -> zp, see quant.h).
int32_t SaturateQ(double v, int32_t zp, DType t) {
  if (std::isnan(v)) return zp;
  const double r = RoundEven(v) + zp;
  return static_cast<int32_t>(std::min<double>(QMax(t), std::max<double>(QMin(t), r)));
}

// Runs through Evaluate and every target x {1, 3} threads (Check), then again
// with the inputs flagged in `runtime` unknown at compile time.
void CheckBoth(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& inputs,
               const std::vector<TensorPtr>& want, const std::vector<bool>& runtime) {
  Check(op, attrs, inputs, want, 0);
  std::vector<bool> constant(inputs.size(), true);
  for (size_t i = 0; i < runtime.size() && i < constant.size(); ++i) constant[i] = !runtime[i];
  for (TargetId t : fcb::testing::RunnableTargetIds()) {
    for (int threads : {1, 3}) {
      auto r = RunWith(op, attrs, inputs, static_cast<int>(want.size()), kernels::GetKernelTable(t), threads,
                       constant);
      ASSERT_TRUE(r.ok()) << TargetName(t) << ": " << r.status().ToString();
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(Same(*(*r)[i], *want[i], 0)) << op << " runtime-fed, " << TargetName(t) << " threads="
                                                 << threads << " output " << i;
    }
  }
}

// Index of channel `c` along `axis` of row-major element i of shape s.
int64_t ChannelOf(int64_t i, const Shape& s, int64_t axis) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  return (i / inner) % s[axis];
}

// ---------------------------------------------------------------- QuantizeLinear

// The spec: y = saturate(round(x / y_scale) + y_zero_point), division in float32.
std::vector<int32_t> OracleQuantize(const std::vector<float>& x, const Shape& s, const std::vector<float>& scale,
                                    const std::vector<int32_t>& zp, int64_t axis, DType t) {
  std::vector<int32_t> y;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const int64_t c = scale.size() == 1 ? 0 : ChannelOf(i, s, axis);
    const float q = x[i] / scale[c];
    y.push_back(SaturateQ(q, zp.empty() ? 0 : zp[c], t));
  }
  return y;
}

TEST(QuantOps, QuantizeTiesRoundHalfToEvenAndSaturate) {
  // x / 2 = 2.5, 3.5, -2.5, -3.5, 0.5, -0.5, 1.5 round to 2, 4, -2, -4, 0, 0, 2.
  const std::vector<float> x = {5, 7, -5, -7, 1, -1, 3, 1000, -1000, 255, -300, 2.9f};
  const Shape s = {12};
  for (DType t : {DType::kU8, DType::kI8}) {
    const int32_t zp = t == DType::kU8 ? 128 : -1;
    const auto want = OracleQuantize(x, s, {2.f}, {zp}, 0, t);
    CheckBoth("QuantizeLinear", A(), {F32(s, x), F32({}, {2.f}), Ints(t, {}, {zp})}, {Ints(t, s, want)},
              {false, true, true});
  }
  // The values written out once: uint8, zero point 128.
  Check("QuantizeLinear", A(), {F32(s, x), F32({}, {2.f}), U8({}, {128})},
        {U8(s, {130, 132, 126, 124, 128, 128, 130, 255, 0, 255, 0, 129})}, 0);
  // int8 saturation at both ends, zero point 0.
  Check("QuantizeLinear", A(), {F32({4}, {254.f, 255.f, -256.f, -258.f}), F32({1}, {2.f}), I8({1}, {0})},
        {I8({4}, {127, 127, -128, -128})}, 0);
}

TEST(QuantOps, QuantizeManyTies) {
  // Every half-integer in [-140, 140] with scale 1 and 0.5 (then x/scale is an
  // integer or a tie), into both types with a zero point of each parity.
  std::vector<float> x;
  for (int i = -280; i <= 280; ++i) x.push_back(i * 0.5f);
  const Shape s = {static_cast<int64_t>(x.size())};
  for (DType t : {DType::kU8, DType::kI8})
    for (int32_t zp : {0, 3, t == DType::kU8 ? 128 : -7})
      for (float scale : {1.f, 0.5f, 0.25f}) {
        const auto want = OracleQuantize(x, s, {scale}, {zp}, 0, t);
        Check("QuantizeLinear", A(), {F32(s, x), F32({}, {scale}), Ints(t, {}, {zp})}, {Ints(t, s, want)}, 0);
      }
}

TEST(QuantOps, QuantizeWithoutZeroPointIsUint8) {
  const std::vector<float> x = {-1.f, 0.f, 2.5f, 3.5f, 300.f, std::nanf("")};
  Check("QuantizeLinear", A(), {F32({6}, x), F32({}, {1.f})}, {U8({6}, {0, 0, 2, 4, 255, 0})}, 0);
}

TEST(QuantOps, QuantizeRandomPerTensorLarge) {
  // More elements than one thread chunk, so threads split the range.
  const int64_t n = 50000;
  const auto x = Rand(n, 11, -300.f, 300.f);
  for (DType t : {DType::kU8, DType::kI8}) {
    const int32_t zp = t == DType::kU8 ? 100 : 5;
    const auto want = OracleQuantize(x, {n}, {0.73f}, {zp}, 0, t);
    CheckBoth("QuantizeLinear", A(), {F32({n}, x), F32({}, {0.73f}), Ints(t, {}, {zp})}, {Ints(t, {n}, want)},
              {false, true, true});
  }
}

TEST(QuantOps, QuantizePerAxisIncludingNegativeAxis) {
  // The ONNX example (axis 1 of [1, 3, 3, 2]).
  const std::vector<float> ex = {-162, 10, -100, 232, -20, -50, -76, 0, 0, 252, 32, -44, 245, -485, -960, -270, -375, -470};
  Check("QuantizeLinear", A(), {F32({1, 3, 3, 2}, ex), F32({3}, {2, 4, 5}), U8({3}, {84, 24, 196})},
        {U8({1, 3, 3, 2}, {3, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32, 13, 245, 99, 4, 142, 121, 102})}, 0);
  const Shape s = {2, 3, 4, 5};
  const auto x = Rand(120, 3, -200.f, 200.f);
  struct Case {
    int64_t axis_attr, axis;
  };
  for (Case cs : {Case{1, 1}, Case{-3, 1}, Case{-1, 3}, Case{0, 0}, Case{-2, 2}}) {
    const int64_t ch = s[cs.axis];
    std::vector<float> scale;
    std::vector<int32_t> zpu, zpi;
    for (int64_t c = 0; c < ch; ++c) {
      scale.push_back(0.5f + 0.75f * c);
      zpu.push_back(static_cast<int32_t>(20 + 40 * c));
      zpi.push_back(static_cast<int32_t>(-30 + 17 * c));
    }
    SCOPED_TRACE("axis " + std::to_string(cs.axis_attr));
    for (DType t : {DType::kU8, DType::kI8}) {
      const auto& zp = t == DType::kU8 ? zpu : zpi;
      const auto want = OracleQuantize(x, s, scale, zp, cs.axis, t);
      CheckBoth("QuantizeLinear", A().I("axis", cs.axis_attr), {F32(s, x), F32({ch}, scale), Ints(t, {ch}, zp)},
                {Ints(t, s, want)}, {false, true, true});
    }
  }
}

TEST(QuantOps, QuantizePerAxisLargeCrossesChunks) {
  // Channels of 3000 elements: thread chunks start and end inside channels.
  const Shape s = {2, 5, 3000};
  const int64_t n = 30000;
  const auto x = Rand(n, 17, -100.f, 100.f);
  const std::vector<float> scale = {0.3f, 0.7f, 1.1f, 0.05f, 2.f};
  const std::vector<int32_t> zp = {0, 50, 128, 200, 255};
  CheckBoth("QuantizeLinear", A().I("axis", -2), {F32(s, x), F32({5}, scale), Ints(DType::kU8, {5}, zp)},
            {Ints(DType::kU8, s, OracleQuantize(x, s, scale, zp, 1, DType::kU8))}, {false, true, true});
}

TEST(QuantOps, QuantizeInt32AndFloat16Inputs) {
  // int32 x: x / scale in float64 (NumPy's promotion in the ONNX reference).
  Check("QuantizeLinear", A(), {I32({5}, {5, 7, -5, 1000, 16777217}), F32({}, {2.f}), I8({}, {1})},
        {I8({5}, {3, 5, -1, 127, 127})}, 0);
  // float16 x (2.5, -3.5, 1.0) with a float32 scale and with a float16 scale (opset 19).
  const std::vector<uint16_t> xh = {0x4100, 0xc300, 0x3c00};
  Check("QuantizeLinear", A(), {Typed(DType::kF16, {3}, xh), F32({}, {1.f}), U8({}, {10})}, {U8({3}, {12, 6, 11})},
        0);
  Check("QuantizeLinear", A(), {Typed(DType::kF16, {3}, xh), Typed(DType::kF16, {}, std::vector<uint16_t>{0x3800}),
                                U8({}, {10})},
        {U8({3}, {15, 3, 12})}, 0);  // scale 0.5: 5, -7, 2
}

// ---------------------------------------------------------------- DequantizeLinear

TEST(QuantOps, DequantizePerTensorAndPerAxis) {
  // The ONNX examples.
  Check("DequantizeLinear", A(), {U8({4}, {0, 3, 128, 255}), F32({}, {2.f}), U8({}, {128})},
        {F32({4}, {-256, -250, 0, 254})}, 0);
  const Shape s = {2, 3, 4};
  const auto xv = RandInts(24, 5, -128, 127);
  for (DType t : {DType::kU8, DType::kI8}) {
    std::vector<int32_t> x = xv;
    if (t == DType::kU8)
      for (auto& v : x) v += 128;
    for (int64_t axis_attr : {1, -2, -1, 0}) {
      const int64_t axis = axis_attr < 0 ? axis_attr + 3 : axis_attr;
      const int64_t ch = s[axis];
      std::vector<float> scale;
      std::vector<int32_t> zp;
      for (int64_t c = 0; c < ch; ++c) {
        scale.push_back(0.125f * (c + 1) + 0.01f);
        zp.push_back(static_cast<int32_t>(t == DType::kU8 ? 100 + 10 * c : -20 + 9 * c));
      }
      std::vector<float> want;
      for (int64_t i = 0; i < 24; ++i) {
        const int64_t c = ChannelOf(i, s, axis);
        want.push_back(static_cast<float>(x[i] - zp[c]) * scale[c]);
      }
      CheckBoth("DequantizeLinear", A().I("axis", axis_attr), {Ints(t, s, x), F32({ch}, scale), Ints(t, {ch}, zp)},
                {F32(s, want)}, {false, true, true});
    }
    // Without a zero point.
    std::vector<float> want;
    for (int32_t v : x) want.push_back(static_cast<float>(v) * 0.37f);
    Check("DequantizeLinear", A(), {Ints(t, s, x), F32({1}, {0.37f})}, {F32(s, want)}, 0);
  }
}

TEST(QuantOps, DequantizeInt32NeedsZeroZeroPoint) {
  Check("DequantizeLinear", A(), {I32({3}, {-100000, 0, 16777217}), F32({}, {0.5f}), I32({}, {0})},
        {F32({3}, {-50000.f, 0.f, static_cast<float>(16777217) * 0.5f})}, 0);
  Check("DequantizeLinear", A(), {I32({2}, {7, -9}), F32({}, {2.f})}, {F32({2}, {14.f, -18.f})}, 0);
  // A constant nonzero zero point is refused when compiling ...
  Status st = Fails("DequantizeLinear", A(), {I32({2}, {7, -9}), F32({}, {2.f}), I32({}, {3})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("x_zero_point must be 0 for int32"), std::string::npos) << st.ToString();
  // ... and a runtime-fed one when running.
  st = Fails("DequantizeLinear", A(), {I32({2}, {7, -9}), F32({}, {2.f}), I32({}, {3})}, 1, {true, true, false});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("got 3"), std::string::npos) << st.ToString();
}

TEST(QuantOps, DequantizeToFloat16) {
  // A float16 scale (opset 19) makes a float16 output: (3 - 1) * 0.5 = 1, (0 - 1) * 0.5 = -0.5.
  Check("DequantizeLinear", A(), {U8({2}, {3, 0}), Typed(DType::kF16, {}, std::vector<uint16_t>{0x3800}), U8({}, {1})},
        {Typed(DType::kF16, {2}, std::vector<uint16_t>{0x3c00, 0xb800})}, 0);
}

// ---------------------------------------------------------------- DynamicQuantizeLinear

// The spec's function body, in float32 as the ONNX example computes it; an
// all-zero range gives scale 1 (ONNX Runtime).
void CheckDynamic(const Shape& s, const std::vector<float>& x) {
  float mn = 0, mx = 0;
  for (float v : x) {
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  const float zf = (0.0f - mn) / scale;
  const int32_t zp = static_cast<int32_t>(std::min(255.0, std::max(0.0, RoundEven(zf))));
  std::vector<int32_t> y;
  for (float v : x) y.push_back(SaturateQ(v / scale, zp, DType::kU8));
  Check("DynamicQuantizeLinear", A(), {F32(s, x)},
        {Ints(DType::kU8, s, y), F32({}, {scale}), U8({}, {static_cast<uint8_t>(zp)})}, 0);
}

TEST(QuantOps, DynamicQuantize) {
  // The ONNX examples: scale 0.0196078438 zero point 153, 0.0156862754 / 255, 0.0156862754 / 0.
  Check("DynamicQuantizeLinear", A(), {F32({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f})},
        {U8({6}, {153, 255, 0, 26, 221, 179}), F32({}, {0.0196078438f}), U8({}, {153})}, 0);
  Check("DynamicQuantizeLinear", A(), {F32({6}, {-1.0f, -2.1f, -1.3f, -2.5f, -3.34f, -4.0f})},
        {U8({6}, {191, 121, 172, 96, 42, 0}), F32({}, {0.01568627543747425f}), U8({}, {255})}, 0);
  Check("DynamicQuantizeLinear", A(),
        {F32({3, 4}, {1, 2.1f, 1.3f, 2.5f, 3.34f, 4.0f, 1.5f, 2.6f, 3.9f, 4.0f, 3.0f, 2.345f})},
        {U8({3, 4}, {64, 134, 83, 159, 213, 255, 96, 166, 249, 255, 191, 149}), F32({}, {0.01568627543747425f}),
         U8({}, {0})},
        0);
  CheckDynamic({6}, {-1.0f, -2.1f, -1.3f, -2.5f, -3.34f, -4.0f});
  CheckDynamic({3, 4}, {1, 2.1f, 1.3f, 2.5f, 3.34f, 4.0f, 1.5f, 2.6f, 3.9f, 4.0f, 3.0f, 2.345f});
  // All zeros: scale 1, zero point 0 (ONNX Runtime), not a division by zero.
  Check("DynamicQuantizeLinear", A(), {F32({4}, {0, 0, -0.f, 0})},
        {U8({4}, {0, 0, 0, 0}), F32({}, {1.f}), U8({}, {0})}, 0);
  CheckDynamic({0}, {});
  // Large: the min/max reduction is split over threads.
  CheckDynamic({70000}, Rand(70000, 9, -3.f, 7.f));
  CheckDynamic({2, 40000}, Rand(80000, 10, 0.5f, 9.f));
}

TEST(QuantOps, DynamicQuantizeOnlyY) {
  // scale 2/255, zero point round(127.49999) = 127.
  Check("DynamicQuantizeLinear", A(), {F32({3}, {-1.f, 0.f, 1.f})}, {U8({3}, {0, 127, 254})}, 0);
}

// ---------------------------------------------------------------- MatMulInteger and QLinearMatMul

// Operands of a matrix product test, with the spec's zero point forms.
struct MMCase {
  Shape a, b;
  DType ta, tb;
  Shape za, zb;  // {} with has_* = scalar; shapes as the spec allows
  bool has_za = true, has_zb = true;
};

// y[.., m, n] = sum_k (A[.., m, k] - za[.., m]) * (B[.., k, n] - zb[.., n]),
// NumPy matmul broadcasting, in int64. The zero points are indexed the way the
// spec describes them: one value, a vector over rows / columns, or [.., M, 1] /
// [.., 1, N] broadcast over the batch.
struct MMResult {
  Shape y;
  std::vector<int64_t> v;
};
MMResult OracleMatMul(const MMCase& c, const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                      const std::vector<int32_t>& za, const std::vector<int32_t>& zb) {
  Shape as = c.a, bs = c.b;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const size_t nb = std::max(as.size(), bs.size()) - 2;
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t da = i + as.size() - 2 >= nb ? as[i + as.size() - 2 - nb] : 1;
    const int64_t db = i + bs.size() - 2 >= nb ? bs[i + bs.size() - 2 - nb] : 1;
    batch[i] = std::max(da, db);
  }
  MMResult r;
  r.y = batch;
  if (c.a.size() > 1) r.y.push_back(M);
  if (c.b.size() > 1) r.y.push_back(N);
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const auto idx = Unravel(bi, batch);
    const int64_t ao = BroadcastOffset(idx, ab), bo = BroadcastOffset(idx, bb);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        auto zero_a = [&]() -> int64_t {
          if (!c.has_za) return 0;
          if (za.size() == 1) return za[0];
          if (c.za.size() == 1) return za[m];
          std::vector<int64_t> full = idx;
          full.push_back(m);
          full.push_back(0);
          return za[BroadcastOffset(full, c.za)];
        };
        auto zero_b = [&]() -> int64_t {
          if (!c.has_zb) return 0;
          if (zb.size() == 1) return zb[0];
          if (c.zb.size() == 1) return zb[n];
          std::vector<int64_t> full = idx;
          full.push_back(0);
          full.push_back(n);
          return zb[BroadcastOffset(full, c.zb)];
        };
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (a[ao * M * K + m * K + k] - zero_a()) * (b[bo * K * N + k * N + n] - zero_b());
        r.v.push_back(acc);
      }
  }
  return r;
}

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<int32_t> RandQ(DType t, int64_t n, uint32_t seed) { return RandInts(n, seed, QMin(t), QMax(t)); }

void CheckMatMulInteger(const MMCase& c, uint32_t seed) {
  const auto a = RandQ(c.ta, Numel(c.a), seed), b = RandQ(c.tb, Numel(c.b), seed + 1);
  const auto za = RandQ(c.ta, Numel(c.za), seed + 2), zb = RandQ(c.tb, Numel(c.zb), seed + 3);
  const MMResult r = OracleMatMul(c, a, b, za, zb);
  std::vector<int32_t> want;
  for (int64_t v : r.v) want.push_back(static_cast<int32_t>(v));
  std::vector<TensorPtr> in = {Ints(c.ta, c.a, a), Ints(c.tb, c.b, b)};
  if (c.has_za || c.has_zb) in.push_back(c.has_za ? Ints(c.ta, c.za, za) : nullptr);
  if (c.has_zb) in.push_back(Ints(c.tb, c.zb, zb));
  SCOPED_TRACE(ir::ShapeToString(c.a) + " x " + ir::ShapeToString(c.b) + " " + ir::DTypeName(c.ta) + "/" +
               ir::DTypeName(c.tb) + " za " + ir::ShapeToString(c.za) + " zb " + ir::ShapeToString(c.zb));
  CheckBoth("MatMulInteger", A(), in, {I32(r.y, want)}, {false, false, true, true});
}

TEST(QuantOps, MatMulIntegerExample) {
  Check("MatMulInteger", A(),
        {U8({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}), U8({3, 2}, {1, 4, 2, 5, 3, 6}), U8({1}, {12}),
         U8({1}, {0})},
        {I32({4, 2}, {-38, -83, -44, -98, -50, -113, -56, -128})}, 0);
}

TEST(QuantOps, MatMulIntegerTypeMixesAndZeroPointForms) {
  const DType u = DType::kU8, i = DType::kI8;
  uint32_t seed = 1;
  for (auto [ta, tb] : {std::pair{u, u}, std::pair{u, i}, std::pair{i, u}, std::pair{i, i}}) {
    CheckMatMulInteger({{5, 7}, {7, 3}, ta, tb, {}, {}}, seed++);             // per-tensor
    CheckMatMulInteger({{5, 7}, {7, 3}, ta, tb, {1}, {1}}, seed++);           // per-tensor as [1]
    CheckMatMulInteger({{5, 7}, {7, 3}, ta, tb, {5}, {3}}, seed++);           // per row / per column
    CheckMatMulInteger({{5, 7}, {7, 3}, ta, tb, {5, 1}, {1, 3}}, seed++);     // [M, 1] / [1, N]
    CheckMatMulInteger({{5, 7}, {7, 3}, ta, tb, {}, {}, false, false}, seed++);  // no zero points
    CheckMatMulInteger({{5, 7}, {7, 3}, ta, tb, {}, {3}, false, true}, seed++);  // only b's
    // Batches with broadcasting, per-row / per-column zero points per batch.
    CheckMatMulInteger({{2, 3, 4, 6}, {3, 6, 5}, ta, tb, {2, 3, 4, 1}, {3, 1, 5}}, seed++);
    CheckMatMulInteger({{2, 1, 4, 6}, {3, 6, 5}, ta, tb, {2, 1, 4, 1}, {1, 1, 5}}, seed++);
    CheckMatMulInteger({{4, 6}, {2, 6, 5}, ta, tb, {4}, {2, 1, 5}}, seed++);
    CheckMatMulInteger({{3, 1, 4, 6}, {1, 2, 6, 5}, ta, tb, {1, 1, 4, 1}, {1, 2, 1, 5}}, seed++);
    // Vectors.
    CheckMatMulInteger({{6}, {6, 5}, ta, tb, {}, {5}}, seed++);
    CheckMatMulInteger({{4, 6}, {6}, ta, tb, {4}, {}}, seed++);
    CheckMatMulInteger({{2, 4, 6}, {6}, ta, tb, {2, 4, 1}, {1}}, seed++);
    CheckMatMulInteger({{6}, {6}, ta, tb, {}, {}}, seed++);
  }
  // Many rows and columns: several row blocks and threads.
  CheckMatMulInteger({{2, 70, 33}, {33, 40}, u, i, {2, 70, 1}, {40}}, 99);
  // K = 0: all zeros.
  CheckMatMulInteger({{3, 0}, {0, 2}, u, u, {}, {}}, 100);
}

TEST(QuantOps, MatMulIntegerAccumulatesIn32Bits) {
  // 2^16 products of 255 * 255 exceed int32: the result wraps like int32
  // arithmetic (the spec allows overflow only in the 32-bit accumulation).
  const int64_t K = 65536;
  const std::vector<int32_t> a(K, 255), b(K, 255);
  int64_t exact = 255LL * 255 * K;
  const auto want = static_cast<int32_t>(static_cast<uint32_t>(exact));
  Check("MatMulInteger", A(), {Ints(DType::kU8, {1, K}, a), Ints(DType::kU8, {K, 1}, b)}, {I32({1, 1}, {want})}, 0);
  // Exact when the result fits, even where partial sums do not: (0 - 255) * (255 - 255)
  // over 2^16 terms is 0, while the products of the shifted A with the raw B and the
  // zero-point correction each reach -4.26e9.
  Check("MatMulInteger", A(),
        {Ints(DType::kU8, {1, K}, std::vector<int32_t>(K, 0)), Ints(DType::kU8, {K, 1}, b), U8({}, {255}),
         U8({}, {255})},
        {I32({1, 1}, {0})}, 0);
  // Near the int32 limits without wrapping: (0 - 255) * (255 - 0) * 33000 = -2145825000.
  const int64_t K2 = 33000;
  exact = -255LL * 255 * K2;
  Check("MatMulInteger", A(),
        {Ints(DType::kU8, {1, K2}, std::vector<int32_t>(K2, 0)), Ints(DType::kU8, {K2, 1}, std::vector<int32_t>(K2, 255)),
         U8({}, {255}), U8({}, {0})},
        {I32({1, 1}, {static_cast<int32_t>(exact)})}, 0);
}

// The spec formula in ONNX Runtime's float steps: multiplier (a_scale *
// b_scale) / y_scale in float32, applied to float(acc), rounded half to even,
// plus y_zero_point, saturated.
int32_t OracleRequant(int64_t acc, float sa, float sb, float sy, int32_t zy, DType ty) {
  const float mult = sa * sb / sy;
  return SaturateQ(static_cast<float>(static_cast<int32_t>(acc)) * mult, zy, ty);
}

TEST(QuantOps, QLinearMatMulExamples) {
  const std::vector<uint8_t> a = {208, 236, 0, 238, 3, 214, 255, 29};
  const std::vector<uint8_t> b = {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247};
  auto in = [&](Shape as, Shape bs, int reps) {
    std::vector<uint8_t> ar, br;
    for (int r = 0; r < reps; ++r) {
      ar.insert(ar.end(), a.begin(), a.end());
      br.insert(br.end(), b.begin(), b.end());
    }
    return std::vector<TensorPtr>{U8(as, ar), F32({1}, {0.0066f}), U8({1}, {113}), U8(bs, br),
                                  F32({1}, {0.00705f}), U8({1}, {114}), F32({1}, {0.0107f}), U8({1}, {118})};
  };
  CheckBoth("QLinearMatMul", A(), in({2, 4}, {4, 3}, 1), {U8({2, 3}, {168, 115, 255, 1, 66, 151})},
            {false, true, true, false, true, true, true, true});
  CheckBoth("QLinearMatMul", A(), in({2, 2, 4}, {2, 4, 3}, 2),
            {U8({2, 2, 3}, {168, 115, 255, 1, 66, 151, 168, 115, 255, 1, 66, 151})},
            {false, true, true, false, true, true, true, true});
}

TEST(QuantOps, QLinearMatMulTiesAndSaturation) {
  // a_scale * b_scale / y_scale = 0.5: acc 5, 7, -5, -7 -> 2.5, 3.5, -2.5, -3.5 -> 2, 4, -2, -4.
  // a = [[5], [7], [-5], [-7]] (int8), b = [[1]] (uint8), zero points 0; y int8 zero point 1.
  const auto ins = [](Shape as, std::vector<int8_t> av) {
    return std::vector<TensorPtr>{I8(as, std::move(av)), F32({}, {1.f}), I8({}, {0}), U8({1, 1}, {1}),
                                  F32({}, {0.5f}), U8({}, {0}), F32({}, {1.f}), I8({}, {1})};
  };
  Check("QLinearMatMul", A(), ins({4, 1}, {5, 7, -5, -7}), {I8({4, 1}, {3, 5, -1, -3})}, 0);
  Check("QLinearMatMul", A(), ins({2, 1}, {127, -128}), {I8({2, 1}, {65, -63})}, 0);
  // Saturation: y_scale 0.01.
  Check("QLinearMatMul", A(),
        {I8({2, 1}, {100, -100}), F32({}, {1.f}), I8({}, {0}), U8({1, 1}, {1}), F32({}, {1.f}), U8({}, {0}),
         F32({}, {0.01f}), U8({}, {7})},
        {U8({2, 1}, {255, 0})}, 0);
}

TEST(QuantOps, QLinearMatMulRandomWithPerRowAndPerColumnParameters) {
  const DType u = DType::kU8, i = DType::kI8;
  uint32_t seed = 300;
  for (auto [ta, tb] : {std::pair{u, u}, std::pair{u, i}, std::pair{i, u}, std::pair{i, i}})
    for (DType ty : {u, i})
      for (int form = 0; form < 3; ++form) {
        // form 0: per-tensor; 1: per-row a, per-column b (vectors); 2: batched [.., M, 1] / [.., 1, N].
        MMCase c{{2, 9, 13}, {2, 13, 6}, ta, tb, {}, {}};
        if (form == 1) c.za = {9}, c.zb = {6};
        if (form == 2) c.za = {2, 9, 1}, c.zb = {2, 1, 6};
        const auto a = RandQ(ta, Numel(c.a), seed), b = RandQ(tb, Numel(c.b), seed + 1);
        const auto za = RandQ(ta, Numel(c.za), seed + 2), zb = RandQ(tb, Numel(c.zb), seed + 3);
        seed += 4;
        const MMResult r = OracleMatMul(c, a, b, za, zb);
        std::vector<float> sa, sb;
        for (int64_t k = 0; k < Numel(c.za); ++k) sa.push_back(0.01f + 0.003f * k);
        for (int64_t k = 0; k < Numel(c.zb); ++k) sb.push_back(0.02f - 0.001f * k);
        const float sy = 0.37f;
        const int32_t zy = ty == u ? 120 : -3;
        // Per output element, the row's a-scale and the column's b-scale.
        std::vector<int32_t> want;
        const int64_t M = 9, N = 6;
        for (size_t e = 0; e < r.v.size(); ++e) {
          const int64_t bi = e / (M * N), m = (e / N) % M, n = e % N;
          const float fa = sa.size() == 1 ? sa[0] : form == 1 ? sa[m] : sa[bi * M + m];
          const float fb = sb.size() == 1 ? sb[0] : form == 1 ? sb[n] : sb[bi * N + n];
          want.push_back(OracleRequant(r.v[e], fa, fb, sy, zy, ty));
        }
        SCOPED_TRACE("form " + std::to_string(form));
        CheckBoth("QLinearMatMul", A(),
                  {Ints(ta, c.a, a), F32(c.za, sa), Ints(ta, c.za, za), Ints(tb, c.b, b), F32(c.zb, sb),
                   Ints(tb, c.zb, zb), F32({}, {sy}), Ints(ty, {}, {zy})},
                  {Ints(ty, r.y, want)}, {false, true, true, false, true, true, true, true});
      }
}

// ---------------------------------------------------------------- ConvInteger and QLinearConv

struct ConvCase {
  Shape x, w;
  DType tx = DType::kU8, tw = DType::kU8;
  std::vector<int64_t> strides, dilations, pads;  // empty: the attribute is absent
  std::string auto_pad;
  int64_t group = 1;
  bool w_zp_per_channel = false;
};

A ConvAttrs(const ConvCase& c) {
  A a;
  if (!c.strides.empty()) a.Is("strides", c.strides);
  if (!c.dilations.empty()) a.Is("dilations", c.dilations);
  if (!c.pads.empty()) a.Is("pads", c.pads);
  if (!c.auto_pad.empty()) a.S("auto_pad", c.auto_pad);
  if (c.group != 1) a.I("group", c.group);
  return a;
}

// The spec's convolution: output sizes from the pads (or auto_pad: SAME_UPPER
// puts the extra padding at the end, SAME_LOWER at the beginning; VALID none),
// y[b, oc, o] = sum over the group's input channels and kernel positions inside
// the input of (x - x_zero_point) * (w - w_zero_point[oc]) in int64.
MMResult OracleConv(const ConvCase& c, const std::vector<int32_t>& x, const std::vector<int32_t>& w, int32_t xz,
                    const std::vector<int32_t>& wz) {
  const int r = static_cast<int>(c.x.size()) - 2;
  const int64_t N = c.x[0], C = c.x[1], M = c.w[0], G = c.group, CG = C / G, MG = M / G;
  std::vector<int64_t> in(r), k(r), s(r, 1), d(r, 1), pb(r, 0), pe(r, 0), out(r);
  for (int i = 0; i < r; ++i) {
    in[i] = c.x[i + 2];
    k[i] = c.w[i + 2];
    if (!c.strides.empty()) s[i] = c.strides[i];
    if (!c.dilations.empty()) d[i] = c.dilations[i];
    if (!c.pads.empty()) pb[i] = c.pads[i], pe[i] = c.pads[i + r];
    const int64_t ek = (k[i] - 1) * d[i] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * s[i] + ek - in[i]);
      pb[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else {
      if (c.auto_pad == "VALID") pb[i] = pe[i] = 0;
      out[i] = (in[i] + pb[i] + pe[i] - ek) / s[i] + 1;
    }
  }
  MMResult res;
  res.y = {N, M};
  for (int i = 0; i < r; ++i) res.y.push_back(out[i]);
  const Shape out_s(out.begin(), out.end()), k_s(k.begin(), k.end()), in_s(in.begin(), in.end());
  const int64_t out_sp = Numel(out_s), k_sp = Numel(k_s), in_sp = Numel(in_s);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t oc = 0; oc < M; ++oc)
      for (int64_t o = 0; o < out_sp; ++o) {
        const auto oi = Unravel(o, out_s);
        int64_t acc = 0;
        for (int64_t ic = 0; ic < CG; ++ic)
          for (int64_t kk = 0; kk < k_sp; ++kk) {
            const auto ki = Unravel(kk, k_s);
            int64_t off = 0;
            bool inside = true;
            for (int i = 0; i < r; ++i) {
              const int64_t pos = oi[i] * s[i] - pb[i] + ki[i] * d[i];
              inside = inside && pos >= 0 && pos < in[i];
              off = off * in[i] + pos;
            }
            if (!inside) continue;
            const int64_t xc = (oc / MG) * CG + ic;
            acc += (x[(b * C + xc) * in_sp + off] - xz) *
                   (w[(oc * CG + ic) * k_sp + kk] - wz[wz.size() == 1 ? 0 : oc]);
          }
        res.v.push_back(acc);
      }
  return res;
}

std::vector<ConvCase> ConvCases() {
  const DType u = DType::kU8, i = DType::kI8;
  std::vector<ConvCase> v;
  // 2-D: plain, padding, stride, dilation, groups (incl. depthwise), auto_pad.
  v.push_back({{1, 3, 6, 7}, {4, 3, 3, 3}, u, u});
  v.push_back({{2, 3, 6, 7}, {4, 3, 3, 3}, u, i, {}, {}, {1, 2, 0, 1}});
  v.push_back({{1, 4, 9, 8}, {6, 2, 3, 2}, i, u, {2, 3}, {}, {1, 1, 1, 1}, "", 2, true});
  v.push_back({{1, 2, 9, 9}, {3, 2, 3, 3}, i, i, {1, 2}, {2, 1}, {2, 0, 1, 3}, "", 1, true});
  v.push_back({{1, 4, 5, 6}, {4, 1, 3, 3}, u, i, {}, {}, {1, 1, 1, 1}, "", 4, true});  // depthwise
  v.push_back({{1, 3, 7, 5}, {2, 3, 2, 3}, u, u, {2, 2}, {}, {}, "SAME_UPPER"});
  v.push_back({{1, 3, 7, 5}, {2, 3, 2, 3}, i, u, {2, 1}, {1, 2}, {}, "SAME_LOWER", 1, true});
  v.push_back({{1, 3, 7, 5}, {2, 3, 3, 2}, u, i, {1, 2}, {}, {}, "VALID"});
  // 1-D and 3-D.
  v.push_back({{2, 2, 11}, {3, 2, 3}, u, u, {2}, {2}, {2, 1}, "", 1, true});
  v.push_back({{1, 4, 10}, {4, 2, 4}, i, i, {1}, {1}, {0, 3}, "", 2});
  v.push_back({{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, u, i, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, "", 1, true});
  v.push_back({{1, 4, 3, 4, 5}, {2, 2, 3, 3, 3}, i, u, {}, {}, {}, "SAME_UPPER", 2});
  // Large enough for several planes per thread.
  v.push_back({{2, 8, 12, 12}, {8, 4, 3, 3}, u, u, {}, {}, {1, 1, 1, 1}, "", 2, true});
  return v;
}

TEST(QuantOps, ConvIntegerExamples) {
  const auto x = U8({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  const auto w = U8({1, 1, 2, 2}, {1, 1, 1, 1});
  Check("ConvInteger", A(), {x, w, U8({}, {1})}, {I32({1, 1, 2, 2}, {12, 16, 24, 28})}, 0);
  Check("ConvInteger", A().Is("pads", {1, 1, 1, 1}), {x, w, U8({}, {1})},
        {I32({1, 1, 4, 4}, {1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9})}, 0);
}

TEST(QuantOps, ConvIntegerGeometryTypesAndPerChannelZeroPoints) {
  uint32_t seed = 500;
  for (const ConvCase& c : ConvCases()) {
    const auto x = RandQ(c.tx, Numel(c.x), seed), w = RandQ(c.tw, Numel(c.w), seed + 1);
    const int32_t xz = RandQ(c.tx, 1, seed + 2)[0];
    const auto wz = RandQ(c.tw, c.w_zp_per_channel ? c.w[0] : 1, seed + 3);
    seed += 4;
    const MMResult r = OracleConv(c, x, w, xz, wz);
    std::vector<int32_t> want(r.v.begin(), r.v.end());
    const Shape wz_shape = c.w_zp_per_channel ? Shape{c.w[0]} : Shape{};
    SCOPED_TRACE(ir::ShapeToString(c.x) + " * " + ir::ShapeToString(c.w) + " " + c.auto_pad);
    CheckBoth("ConvInteger", ConvAttrs(c), {Ints(c.tx, c.x, x), Ints(c.tw, c.w, w), Ints(c.tx, {}, {xz}),
                                            Ints(c.tw, wz_shape, wz)},
              {I32(r.y, want)}, {false, false, true, true});
  }
  // Without zero points, and with only x's.
  const ConvCase c{{1, 2, 5, 5}, {3, 2, 2, 2}, DType::kI8, DType::kU8, {}, {}, {1, 0, 0, 1}};
  const auto x = RandQ(c.tx, 50, 7), w = RandQ(c.tw, 24, 8);
  const MMResult r0 = OracleConv(c, x, w, 0, {0});
  Check("ConvInteger", ConvAttrs(c), {Ints(c.tx, c.x, x), Ints(c.tw, c.w, w)},
        {I32(r0.y, std::vector<int32_t>(r0.v.begin(), r0.v.end()))}, 0);
  const MMResult r1 = OracleConv(c, x, w, -3, {0});
  Check("ConvInteger", ConvAttrs(c), {Ints(c.tx, c.x, x), Ints(c.tw, c.w, w), I8({1}, {-3})},
        {I32(r1.y, std::vector<int32_t>(r1.v.begin(), r1.v.end()))}, 0);
}

TEST(QuantOps, QLinearConvExample) {
  const std::vector<uint8_t> x = {255, 174, 162, 25,  203, 168, 58,  15,  59,  237, 95,  129, 0,   64,  56,  242, 153,
                                  221, 168, 12,  166, 232, 178, 186, 195, 237, 162, 237, 188, 39,  124, 77,  80,  102,
                                  43,  127, 230, 21,  83,  41,  40,  134, 255, 154, 92,  141, 42,  148, 247};
  const std::vector<uint8_t> y = {0,   81,  93,  230, 52,  87,  197, 240, 196, 18,  160, 126, 255, 191, 199, 13,  102,
                                  34,  87,  243, 89,  23,  77,  69,  60,  18,  93,  18,  67,  216, 131, 178, 175, 153,
                                  212, 128, 25,  234, 172, 214, 215, 121, 0,   101, 163, 114, 213, 107, 8};
  CheckBoth("QLinearConv", A(),
            {U8({1, 1, 7, 7}, x), F32({}, {0.00369204697f}), U8({}, {132}), U8({1, 1, 1, 1}, {0}),
             F32({1}, {0.00172794575f}), U8({1}, {255}), F32({}, {0.00162681262f}), U8({}, {123})},
            {U8({1, 1, 7, 7}, y)}, {false, true, true, false, true, true, true, true});
}

TEST(QuantOps, QLinearConvBiasPerChannelScalesAndTies) {
  uint32_t seed = 700;
  for (const ConvCase& c : ConvCases()) {
    for (DType ty : {DType::kU8, DType::kI8}) {
      const int64_t M = c.w[0];
      const auto x = RandQ(c.tx, Numel(c.x), seed), w = RandQ(c.tw, Numel(c.w), seed + 1);
      const int32_t xz = RandQ(c.tx, 1, seed + 2)[0];
      const auto wz = RandQ(c.tw, c.w_zp_per_channel ? M : 1, seed + 3);
      const auto bias = RandInts(M, seed + 4, -3000, 3000);
      seed += 5;
      std::vector<float> ws;
      for (int64_t oc = 0; oc < (c.w_zp_per_channel ? M : 1); ++oc) ws.push_back(0.004f + 0.0013f * oc);
      const float xs = 0.021f, ys = 0.093f;
      const int32_t yz = ty == DType::kU8 ? 131 : -9;
      const MMResult r = OracleConv(c, x, w, xz, wz);
      const int64_t plane = Numel(r.y) / (r.y[0] * M);
      std::vector<int32_t> want;
      for (size_t e = 0; e < r.v.size(); ++e) {
        const int64_t oc = (e / plane) % M;
        want.push_back(OracleRequant(r.v[e] + bias[oc], xs, ws[ws.size() == 1 ? 0 : oc], ys, yz, ty));
      }
      const Shape pc = c.w_zp_per_channel ? Shape{M} : Shape{1};
      SCOPED_TRACE(ir::ShapeToString(c.x) + " * " + ir::ShapeToString(c.w) + " -> " + ir::DTypeName(ty));
      CheckBoth("QLinearConv", ConvAttrs(c),
                {Ints(c.tx, c.x, x), F32({}, {xs}), Ints(c.tx, {}, {xz}), Ints(c.tw, c.w, w), F32(pc, ws),
                 Ints(c.tw, pc, wz), F32({}, {ys}), Ints(ty, {}, {yz}), I32({M}, bias)},
                {Ints(ty, r.y, want)}, {false, true, true, false, true, true, true, true, true});
    }
  }
  // Exact ties: multiplier 1 * 0.5 / 1 = 0.5, x - xz = 1, w - wz = 1, bias 4, 6, -6, -8:
  // acc 5, 7, -5, -7 -> 2.5, 3.5, -2.5, -3.5 -> 2, 4, -2, -4 (+ y_zero_point 10).
  Check("QLinearConv", A(),
        {U8({1, 1, 1, 1}, {3}), F32({}, {1.f}), U8({}, {2}), I8({4, 1, 1, 1}, {1, 1, 1, 1}), F32({4}, {0.5f, 0.5f, 0.5f, 0.5f}),
         I8({4}, {0, 0, 0, 0}), F32({}, {1.f}), U8({}, {10}), I32({4}, {4, 6, -6, -8})},
        {U8({1, 4, 1, 1}, {12, 14, 8, 6})}, 0);
}

// ---------------------------------------------------------------- refusals

TEST(QuantOps, RefusesUnsupportedForms) {
  const auto x = F32({2, 3}, {0, 0, 0, 0, 0, 0});
  // Block quantization (opset 21).
  Status st = InferOnly("QuantizeLinear", A().I("block_size", 2), {x, F32({2, 2}, {1, 1, 1, 1}), U8({2, 2}, {0, 0, 0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  EXPECT_NE(st.message().find("block_size=2"), std::string::npos) << st.ToString();
  st = InferOnly("DequantizeLinear", A(), {U8({2, 4}, std::vector<uint8_t>(8)), F32({2, 2}, {1, 1, 1, 1})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  // Output types other than uint8 / int8.
  st = InferOnly("QuantizeLinear", A().I("output_dtype", 22), {x, F32({}, {1})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  EXPECT_NE(st.message().find("int4"), std::string::npos) << st.ToString();
  st = InferOnly("QuantizeLinear", A().I("output_dtype", 17), {x, F32({}, {1})});
  EXPECT_NE(st.message().find("float8e4m3fn"), std::string::npos) << st.ToString();
  st = InferOnly("QuantizeLinear", A(), {x, F32({}, {1}), Typed(DType::kU16, {}, std::vector<uint16_t>{0})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  // output_dtype agreeing with the zero point is fine; without one it picks the type.
  EXPECT_TRUE(InferOnly("QuantizeLinear", A().I("output_dtype", 3), {x, F32({}, {1}), I8({}, {0})}).ok());
  Check("QuantizeLinear", A().I("output_dtype", 3), {F32({2}, {-300.f, 3.f}), F32({}, {1.f})}, {I8({2}, {-128, 3})}, 0);
  st = InferOnly("QuantizeLinear", A().I("output_dtype", 2), {x, F32({}, {1}), I8({}, {0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  // saturate only concerns float8 outputs: accepted on integer ones.
  EXPECT_TRUE(InferOnly("QuantizeLinear", A().I("saturate", 0), {x, F32({}, {1}), U8({}, {0})}).ok());
  // Input types outside the spec.
  st = InferOnly("QuantizeLinear", A(), {F64({2}, {0, 0}), F32({}, {1})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  st = InferOnly("DequantizeLinear", A(), {Typed(DType::kI16, {2}, std::vector<int16_t>{0, 0}), F32({}, {1})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  st = InferOnly("MatMulInteger", A(), {I32({2, 2}, {0, 0, 0, 0}), U8({2, 2}, {0, 0, 0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  st = InferOnly("DynamicQuantizeLinear", A(), {F64({2}, {0, 0})}, 3);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
}

TEST(QuantOps, RefusesInvalidShapes) {
  const auto x = F32({2, 3}, {0, 0, 0, 0, 0, 0});
  // Per-axis scale of the wrong length, zero point not shaped like the scale.
  Status st = InferOnly("QuantizeLinear", A(), {x, F32({2}, {1, 1}), U8({2}, {0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("needs 3"), std::string::npos) << st.ToString();
  EXPECT_TRUE(InferOnly("QuantizeLinear", A().I("axis", 0), {x, F32({2}, {1, 1}), U8({2}, {0, 0})}).ok());
  st = InferOnly("QuantizeLinear", A().I("axis", 2), {x, F32({3}, {1, 1, 1})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = InferOnly("QuantizeLinear", A(), {x, F32({3}, {1, 1, 1}), U8({}, {0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = InferOnly("DequantizeLinear", A(), {U8({2}, {0, 0}), F32({}, {1}), I8({}, {0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();  // zero point type differs
  // MatMulInteger zero points that are neither per-tensor, per-row nor per-column.
  const auto a = U8({4, 3}, std::vector<uint8_t>(12)), b = U8({3, 2}, std::vector<uint8_t>(6));
  st = InferOnly("MatMulInteger", A(), {a, b, U8({3}, {0, 0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("a_zero_point"), std::string::npos) << st.ToString();
  st = InferOnly("MatMulInteger", A(), {a, b, U8({}, {0}), U8({1, 4}, {0, 0, 0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = InferOnly("MatMulInteger", A(), {a, U8({4, 2}, std::vector<uint8_t>(8))});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  // QLinearMatMul: y's parameters are per-tensor.
  st = InferOnly("QLinearMatMul", A(),
                 {a, F32({}, {1}), U8({}, {0}), b, F32({}, {1}), U8({}, {0}), F32({2}, {1, 1}), U8({2}, {0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  // Convolutions: zero points, channels, bias.
  const auto cx = U8({1, 2, 4, 4}, std::vector<uint8_t>(32)), cw = U8({3, 2, 2, 2}, std::vector<uint8_t>(24));
  st = InferOnly("ConvInteger", A(), {cx, cw, U8({2}, {0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = InferOnly("ConvInteger", A(), {cx, cw, U8({}, {0}), U8({2}, {0, 0})});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = InferOnly("ConvInteger", A().I("group", 2), {cx, cw});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = InferOnly("ConvInteger", A().Is("kernel_shape", {3, 3}), {cx, cw});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  const std::vector<TensorPtr> q = {cx, F32({}, {1}), U8({}, {0}), cw, F32({3}, {1, 1, 1}), U8({3}, {0, 0, 0}),
                                    F32({}, {1}), U8({}, {0})};
  EXPECT_TRUE(InferOnly("QLinearConv", A(), q).ok());
  auto with_bias = q;
  with_bias.push_back(F32({3}, {0, 0, 0}));
  st = InferOnly("QLinearConv", A(), with_bias);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  with_bias.back() = I32({2}, {0, 0});
  st = InferOnly("QLinearConv", A(), with_bias);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  auto bad_scale = q;
  bad_scale[4] = F32({2}, {1, 1});
  st = InferOnly("QLinearConv", A(), bad_scale);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

}  // namespace
}  // namespace fcb::ops::testing
