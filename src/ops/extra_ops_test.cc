// The opset-16/17 additions (tensor_extra.cc, sampling.cc, random.cc,
// data_shape.cc, signal.cc) on cases the ONNX 1.12 node tests do not reach,
// against plain references written here from the operator specifications,
// plus their error paths. The node tests themselves run through
// conformance/run.sh.
#include <algorithm>
#include <cmath>
#include <complex>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

// ---------------------------------------------------------------- GridSample

// The spec's padding rules, written as "fold until inside" loops.
double RefReflect(double v, double lo, double hi) {
  if (hi <= lo) return lo;
  for (int guard = 0; guard < 1000 && (v < lo || v > hi); ++guard) v = v < lo ? 2 * lo - v : 2 * hi - v;
  return v;
}

// Keys' cubic convolution kernel, a = -0.75, as a function of distance.
double Keys(double d) {
  const double a = -0.75;
  d = std::fabs(d);
  if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
  if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
  return 0;
}

std::vector<float> RefGridSample(const std::vector<float>& x, int64_t N, int64_t C, int64_t H, int64_t W,
                                 const std::vector<float>& grid, int64_t Ho, int64_t Wo, const std::string& mode,
                                 const std::string& pad, bool align) {
  std::vector<float> y;
  const double lox = align ? 0 : -0.5, hix = align ? W - 1 : W - 0.5;
  const double loy = align ? 0 : -0.5, hiy = align ? H - 1 : H - 0.5;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          const double gx = grid[((n * Ho + i) * Wo + j) * 2], gy = grid[((n * Ho + i) * Wo + j) * 2 + 1];
          // Pixel coordinates of the normalized point.
          double px = align ? (gx + 1) * 0.5 * (W - 1) : (gx + 1) * 0.5 * W - 0.5;
          double py = align ? (gy + 1) * 0.5 * (H - 1) : (gy + 1) * 0.5 * H - 0.5;
          if (mode == "nearest") {
            px = std::nearbyint(px);
            py = std::nearbyint(py);
          }
          if (pad == "border") {
            if (px < lox || px > hix) px = std::min(std::max(px, 0.0), W - 1.0);
            if (py < loy || py > hiy) py = std::min(std::max(py, 0.0), H - 1.0);
          } else if (pad == "reflection") {
            px = RefReflect(px, lox, hix);
            py = RefReflect(py, loy, hiy);
          }
          auto at = [&](int64_t r, int64_t col) -> double {
            if (pad == "zeros") {
              if (r < 0 || r >= H || col < 0 || col >= W) return 0;
            } else if (pad == "border") {
              r = std::min<int64_t>(std::max<int64_t>(r, 0), H - 1);
              col = std::min<int64_t>(std::max<int64_t>(col, 0), W - 1);
            } else {
              r = static_cast<int64_t>(RefReflect(static_cast<double>(r), loy, hiy));
              col = static_cast<int64_t>(RefReflect(static_cast<double>(col), lox, hix));
            }
            return x[((n * C + c) * H + r) * W + col];
          };
          double v = 0;
          if (mode == "nearest") {
            v = at(static_cast<int64_t>(py), static_cast<int64_t>(px));
          } else {
            // Sum over the neighbourhood of weight(dx) * weight(dy) * pixel.
            const int64_t x0 = static_cast<int64_t>(std::floor(px)), y0 = static_cast<int64_t>(std::floor(py));
            const int reach = mode == "bilinear" ? 1 : 2;
            for (int64_t r = y0 - reach + 1; r <= y0 + reach; ++r)
              for (int64_t col = x0 - reach + 1; col <= x0 + reach; ++col) {
                const double dx = px - col, dy = py - r;
                const double w = mode == "bilinear" ? (1 - std::fabs(dx)) * (1 - std::fabs(dy)) : Keys(dx) * Keys(dy);
                v += w * at(r, col);
              }
          }
          y.push_back(static_cast<float>(v));
        }
  return y;
}

TEST(ExtraOps, GridSampleEveryModePaddingAndAlignment) {
  const int64_t N = 2, C = 2, H = 4, W = 5, Ho = 3, Wo = 4;
  const auto x = Rand(N * C * H * W, 11);
  // Points inside, on the edges and well outside [-1, 1].
  const auto grid = Rand(N * Ho * Wo * 2, 12, -1.8f, 1.8f);
  for (const std::string mode : {"nearest", "bilinear", "bicubic"})
    for (const std::string pad : {"zeros", "border", "reflection"})
      for (int align : {0, 1}) {
        SCOPED_TRACE(mode + " " + pad + " align_corners=" + std::to_string(align));
        const auto want = RefGridSample(x, N, C, H, W, grid, Ho, Wo, mode, pad, align != 0);
        Check("GridSample", A().S("mode", mode).S("padding_mode", pad).I("align_corners", align),
              {F32({N, C, H, W}, x), F32({N, Ho, Wo, 2}, grid)}, {F32({N, C, Ho, Wo}, want)}, 1e-4);
      }
}

TEST(ExtraOps, GridSampleRefusals) {
  const auto x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_REFUSED(InferOnly("GridSample", A().S("mode", "area"), {x, F32({1, 1, 1, 2}, {0, 0})}), StatusCode::kInvalidArgument, "unknown mode 'area'");
  EXPECT_REFUSED(InferOnly("GridSample", A(), {x, F32({1, 1, 1, 3}, {0, 0, 0})}), StatusCode::kInvalidArgument, "grid must be [N, H_out, W_out, 2] with X's N");
  EXPECT_REFUSED(InferOnly("GridSample", A(), {x, F32({2, 1, 1, 2}, {0, 0, 0, 0})}), StatusCode::kInvalidArgument, "grid must be [N, H_out, W_out, 2] with X's N");
}

// ---------------------------------------------------------------- RoiAlign

// Bilinear value of one sample, 0 beyond one pixel outside; in max mode the
// largest weighted corner (the ONNX reference's definition).
double RoiSample(const std::vector<float>& img, int64_t H, int64_t W, double y, double x, bool max_mode) {
  if (y < -1 || y > H || x < -1 || x > W) return 0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
  int64_t y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= H - 1) y0 = y1 = H - 1, y = static_cast<double>(H - 1);
  if (x0 >= W - 1) x0 = x1 = W - 1, x = static_cast<double>(W - 1);
  const double fy = y - y0, fx = x - x0;
  const double c[4] = {(1 - fy) * (1 - fx) * img[y0 * W + x0], (1 - fy) * fx * img[y0 * W + x1],
                       fy * (1 - fx) * img[y1 * W + x0], fy * fx * img[y1 * W + x1]};
  return max_mode ? *std::max_element(c, c + 4) : c[0] + c[1] + c[2] + c[3];
}

TEST(ExtraOps, RoiAlignModesAndCoordinateTransforms) {
  const int64_t N = 2, C = 3, H = 6, W = 7, oh = 3, ow = 2;
  const auto x = Rand(N * C * H * W, 21, -1.f, 3.f);
  // Boxes inside, partly outside, and two below one pixel.
  const std::vector<float> rois = {0.5f, 1.f, 5.5f, 4.f, -2.f, -1.f, 3.f, 8.f, 2.f, 2.f, 2.3f, 2.2f, 4.f, 3.f, 4.1f, 3.05f};
  const std::vector<int64_t> bi = {0, 1, 1, 0};
  const int64_t R = 4;
  for (const std::string mode : {"avg", "max"})
    for (const std::string ctm : {"half_pixel", "output_half_pixel"})
      for (int64_t ratio : {0, 2}) {
        SCOPED_TRACE(mode + " " + ctm + " sampling_ratio=" + std::to_string(ratio));
        const double scale = 0.8f;  // the attribute is a float
        std::vector<float> want;
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) {
            const std::vector<float> img(x.begin() + (bi[r] * C + c) * H * W, x.begin() + (bi[r] * C + c + 1) * H * W);
            const double off = ctm == "half_pixel" ? 0.5 : 0.0;
            const double x1 = rois[4 * r] * scale - off, y1 = rois[4 * r + 1] * scale - off;
            double rw = rois[4 * r + 2] * scale - off - x1, rh = rois[4 * r + 3] * scale - off - y1;
            if (ctm == "output_half_pixel") rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
            const int64_t gh = ratio ? ratio : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(rh / oh)));
            const int64_t gw = ratio ? ratio : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(rw / ow)));
            for (int64_t i = 0; i < oh; ++i)
              for (int64_t j = 0; j < ow; ++j) {
                std::vector<double> samples;
                for (int64_t a = 0; a < gh; ++a)
                  for (int64_t b = 0; b < gw; ++b)
                    samples.push_back(RoiSample(img, H, W, y1 + rh / oh * (i + (a + 0.5) / gh),
                                                x1 + rw / ow * (j + (b + 0.5) / gw), mode == "max"));
                double v = 0;
                if (mode == "max") v = *std::max_element(samples.begin(), samples.end());
                else {
                  for (double s : samples) v += s;
                  v /= static_cast<double>(samples.size());
                }
                want.push_back(static_cast<float>(v));
              }
          }
        Check("RoiAlign",
              A().S("mode", mode).S("coordinate_transformation_mode", ctm).I("output_height", oh).I("output_width", ow)
                  .I("sampling_ratio", ratio).F("spatial_scale", static_cast<float>(scale)),
              {F32({N, C, H, W}, x), F32({R, 4}, rois), I64({R}, bi)}, {F32({R, C, oh, ow}, want)}, 1e-4);
      }
}

TEST(ExtraOps, RoiAlignBadBatchIndexFailsTheRun) {
  Status s = Fails("RoiAlign", A(), {F32({1, 1, 2, 2}, {1, 2, 3, 4}), F32({1, 4}, {0, 0, 1, 1}), I64({1}, {1})});
  EXPECT_REFUSED(s, StatusCode::kInvalidArgument, "batch_indices[0] = 1 is outside [0, 1)");
  EXPECT_NE(s.message().find("batch_indices"), std::string::npos) << s.ToString();
}

// ---------------------------------------------------------------- Compress, NonZero, Unique

TEST(ExtraOps, CompressWithRunTimeDataAndConstantCondition) {
  // int32 data [2, 3, 2], axis 1, condition picks rows 0 and 2 (shorter than
  // the axis is allowed: missing entries are false).
  std::vector<int32_t> x(12);
  for (int i = 0; i < 12; ++i) x[i] = 10 * i;
  const auto data = I32({2, 3, 2}, x);
  Check("Compress", A().I("axis", 1), {data, Bool({3}, {1, 0, 1})}, {I32({2, 2, 2}, {0, 10, 40, 50, 60, 70, 100, 110})});
  Check("Compress", A().I("axis", -1), {data, Bool({1}, {1})}, {I32({2, 3, 1}, {0, 20, 40, 60, 80, 100})});
  Check("Compress", A(), {data, Bool({4}, {0, 1, 1, 0})}, {I32({2}, {10, 20})});
  Check("Compress", A(), {data, Bool({2}, {0, 0})}, {I32({0}, {})});
  // A true entry past the axis is an error.
  EXPECT_REFUSED(Fails("Compress", A().I("axis", 0), {data, Bool({3}, {0, 0, 1})}), StatusCode::kInvalidArgument, "condition selects index 2 beyond the input's 2");
}

TEST(ExtraOps, DataDependentShapesRefuseRunTimeInputs) {
  const auto x = F32({4}, {0, 1, 0, 2});
  Status s = Fails("Compress", A(), {x, Bool({4}, {1, 0, 1, 0})}, 1, {true, false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find("condition must be a compile-time constant"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("run-time data"), std::string::npos) << s.ToString();
  s = Fails("NonZero", A(), {x}, 1, {false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  s = Fails("Unique", A(), {x}, 4, {false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  s = Fails("HannWindow", A(), {I64({}, {8})}, 1, {false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  s = Fails("DFT", A(), {F32({1, 4, 1}, {1, 2, 3, 4}), I64({}, {4})}, 1, {true, false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  s = Fails("STFT", A(), {F32({1, 4, 1}, {1, 2, 3, 4}), I64({}, {1}), nullptr, I64({}, {2})}, 1,
            {true, false, false, true});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
}

TEST(ExtraOps, NonZeroOfEveryKindOfZero) {
  // -0.0 is zero, NaN is not; int64 and bool too.
  Check("NonZero", A(), {F32({2, 3}, {0.f, -0.f, NAN, 1.f, 0.f, -2.f})}, {I64({2, 3}, {0, 1, 1, 2, 0, 2})});
  Check("NonZero", A(), {I64({3}, {0, 5, int64_t{1} << 40})}, {I64({1, 2}, {1, 2})});
  Check("NonZero", A(), {Bool({2, 2}, {0, 0, 0, 0})}, {I64({2, 0}, {})});
}

TEST(ExtraOps, UniqueUnsortedWithAxisAndInt64) {
  // Rows of [[3, 1], [1, 2], [3, 1], [0, 0]] along axis 0, first-occurrence order.
  const auto x = I64({4, 2}, {3, 1, 1, 2, 3, 1, 0, 0});
  Check("Unique", A().I("axis", 0).I("sorted", 0), {x},
        {I64({3, 2}, {3, 1, 1, 2, 0, 0}), I64({3}, {0, 1, 3}), I64({4}, {0, 1, 0, 2}), I64({3}, {2, 1, 1})});
  // Sorted rows: [0, 0] < [1, 2] < [3, 1].
  Check("Unique", A().I("axis", 0), {x},
        {I64({3, 2}, {0, 0, 1, 2, 3, 1}), I64({3}, {3, 1, 0}), I64({4}, {2, 1, 2, 0}), I64({3}, {1, 1, 2})});
  // Flattened, only Y asked for.
  Check("Unique", A(), {x}, {I64({4}, {0, 1, 2, 3})});
}

// ---------------------------------------------------------------- random

std::vector<double> AsDoubles(const ir::TensorData& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetDouble(i));
  return v;
}

void MeanVar(const std::vector<double>& v, double* mean, double* var) {
  *mean = 0;
  for (double x : v) *mean += x;
  *mean /= static_cast<double>(v.size());
  *var = 0;
  for (double x : v) *var += (x - *mean) * (x - *mean);
  *var /= static_cast<double>(v.size());
}

// Runs on every runnable target with 1 and 3 threads; all must agree bit for bit.
TensorPtr RunEverywhere(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& in) {
  TensorPtr first;
  for (TargetId t : fcb::testing::RunnableTargetIds())
    for (int threads : {1, 3}) {
      auto r = RunWith(op, attrs, in, 1, kernels::GetKernelTable(t), threads);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) return nullptr;
      if (!first) first = (*r)[0];
      EXPECT_EQ((*r)[0]->bytes, first->bytes) << TargetName(t) << " threads=" << threads;
    }
  return first;
}

TEST(ExtraOps, RandomUniformStatisticsAndDeterminism) {
  const int64_t n = 200000;
  auto y = RunEverywhere("RandomUniform", A().Is("shape", {400, 500}).F("low", -3.f).F("high", 5.f).F("seed", 3.f), {});
  ASSERT_TRUE(y);
  EXPECT_EQ(y->dtype, DType::kF32);
  EXPECT_EQ(y->shape, (Shape{400, 500}));
  const auto v = AsDoubles(*y);
  for (double x : v) ASSERT_TRUE(x >= -3 && x < 5) << x;
  double mean, var;
  MeanVar(v, &mean, &var);
  // Uniform(-3, 5): mean 1, variance 64/12; the bounds are > 5 standard errors.
  EXPECT_NEAR(mean, 1.0, 5 * std::sqrt(64.0 / 12 / n));
  EXPECT_NEAR(var, 64.0 / 12, 0.05);
  // Same seed, same values (also through Evaluate); another seed, other values.
  auto again = Evaluate("RandomUniform", A().Is("shape", {400, 500}).F("low", -3.f).F("high", 5.f).F("seed", 3.f), {}, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0]->bytes, y->bytes);
  auto other = Evaluate("RandomUniform", A().Is("shape", {400, 500}).F("low", -3.f).F("high", 5.f).F("seed", 4.f), {}, 1);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)[0]->bytes, y->bytes);
}

TEST(ExtraOps, RandomNormalStatisticsAndDtypes) {
  const int64_t n = 100000;
  auto y = RunEverywhere("RandomNormal", A().Is("shape", {n}).F("mean", 2.f).F("scale", 0.5f).F("seed", 1.f)
                                             .I("dtype", static_cast<int64_t>(DType::kF64)), {});
  ASSERT_TRUE(y);
  EXPECT_EQ(y->dtype, DType::kF64);
  double mean, var;
  MeanVar(AsDoubles(*y), &mean, &var);
  EXPECT_NEAR(mean, 2.0, 5 * 0.5 / std::sqrt(static_cast<double>(n)));
  EXPECT_NEAR(var, 0.25, 0.01);
  // About 68.3 % within one standard deviation.
  int64_t within = 0;
  for (double x : AsDoubles(*y)) within += std::fabs(x - 2.0) < 0.5;
  EXPECT_NEAR(static_cast<double>(within) / n, 0.6827, 0.01);
  // RandomNormalLike takes the input's shape and dtype (float16 here).
  auto like = RunEverywhere("RandomNormalLike", A().F("seed", 2.f), {Typed<uint16_t>(DType::kF16, {3, 7}, std::vector<uint16_t>(21))});
  ASSERT_TRUE(like);
  EXPECT_EQ(like->dtype, DType::kF16);
  EXPECT_EQ(like->shape, (Shape{3, 7}));
  auto ulike = RunEverywhere("RandomUniformLike", A().F("seed", 2.f).I("dtype", static_cast<int64_t>(DType::kF32)),
                             {I64({5}, {0, 0, 0, 0, 0})});
  ASSERT_TRUE(ulike);
  EXPECT_EQ(ulike->dtype, DType::kF32);
  EXPECT_REFUSED(InferOnly("RandomNormal", A().Is("shape", {2}).I("dtype", static_cast<int64_t>(DType::kI32)), {}), StatusCode::kUnsupported, "output dtype code 6 (float16, bfloat16, float32 and float64 are");
  EXPECT_REFUSED(InferOnly("RandomUniform", A().Is("shape", {2}).F("low", 2.f).F("high", 1.f), {}), StatusCode::kInvalidArgument, "low must be <= high, both finite");
}

TEST(ExtraOps, BernoulliFrequencies) {
  const int64_t n = 50000;
  std::vector<float> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i % 2 ? 0.2f : 0.9f;
  for (int64_t dt : {static_cast<int64_t>(DType::kF32), static_cast<int64_t>(DType::kBool), static_cast<int64_t>(DType::kI32)}) {
    auto y = RunEverywhere("Bernoulli", A().F("seed", 9.f).I("dtype", dt), {F32({n}, p)});
    ASSERT_TRUE(y);
    EXPECT_EQ(static_cast<int64_t>(y->dtype), dt);
    double odd = 0, even = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = y->GetDouble(i);
      ASSERT_TRUE(v == 0 || v == 1);
      (i % 2 ? odd : even) += v;
    }
    const double half = n / 2.0;
    EXPECT_NEAR(odd / half, 0.2, 5 * std::sqrt(0.2 * 0.8 / half));
    EXPECT_NEAR(even / half, 0.9, 5 * std::sqrt(0.9 * 0.1 / half));
  }
  // p = 0 and p = 1 are certain.
  Check("Bernoulli", A().F("seed", 1.f), {F64({4}, {0, 1, 0, 1})}, {F64({4}, {0, 1, 0, 1})});
}

// ---------------------------------------------------------------- DFT, STFT, windows

std::vector<float> RefDft(const std::vector<std::complex<double>>& x, int64_t len, bool inverse, int64_t bins) {
  std::vector<float> out;
  for (int64_t k = 0; k < bins; ++k) {
    std::complex<double> acc = 0;
    for (int64_t j = 0; j < len && j < static_cast<int64_t>(x.size()); ++j)
      acc += x[j] * std::polar(1.0, (inverse ? 2 : -2) * M_PI * static_cast<double>(j * k) / static_cast<double>(len));
    if (inverse) acc /= static_cast<double>(len);
    out.push_back(static_cast<float>(acc.real()));
    out.push_back(static_cast<float>(acc.imag()));
  }
  return out;
}

TEST(ExtraOps, DftLengthsOnesidedComplexAndInverse) {
  const int64_t n = 6;
  const auto re = Rand(n, 31);
  std::vector<std::complex<double>> xr(re.begin(), re.end());
  std::vector<float> xin;
  for (float v : re) xin.push_back(v);
  // Real [1, 6, 1], padded to 8, truncated to 4, onesided.
  Check("DFT", A(), {F32({1, n, 1}, xin), I64({}, {8})}, {F32({1, 8, 2}, RefDft(xr, 8, false, 8))}, 1e-4);
  Check("DFT", A(), {F32({1, n, 1}, xin), I64({}, {4})}, {F32({1, 4, 2}, RefDft(xr, 4, false, 4))}, 1e-4);
  Check("DFT", A().I("onesided", 1), {F32({1, n, 1}, xin)}, {F32({1, 4, 2}, RefDft(xr, 6, false, 4))}, 1e-4);
  // Complex input, inverse, along axis 0 of a [6, 2] (no batch) signal.
  const auto ci = Rand(2 * n, 32);
  std::vector<std::complex<double>> xc;
  for (int64_t j = 0; j < n; ++j) xc.push_back({ci[2 * j], ci[2 * j + 1]});
  Check("DFT", A().I("axis", 0).I("inverse", 1), {F32({n, 2}, ci)}, {F32({n, 2}, RefDft(xc, n, true, n))}, 1e-4);
  // The last dimension holds the complex parts: not an axis.
  EXPECT_REFUSED(InferOnly("DFT", A().I("axis", 2), {F32({1, n, 1}, xin)}), StatusCode::kInvalidArgument, "axis 2 is out of range (the last dimension holds the complex parts)");
}

TEST(ExtraOps, StftWithWindowAgainstFrameByFrameDft) {
  const int64_t len = 20, step = 3, flen = 6;
  const auto sig = Rand(2 * len, 41);
  std::vector<float> win(flen);
  for (int64_t i = 0; i < flen; ++i) win[i] = 0.5f + 0.1f * static_cast<float>(i);
  const int64_t frames = (len - flen) / step + 1;
  for (int onesided : {0, 1}) {
    const int64_t bins = onesided ? flen / 2 + 1 : flen;
    std::vector<float> want;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t f = 0; f < frames; ++f) {
        std::vector<std::complex<double>> fr;
        for (int64_t j = 0; j < flen; ++j) fr.push_back(static_cast<double>(sig[b * len + f * step + j]) * win[j]);
        const auto d = RefDft(fr, flen, false, bins);
        want.insert(want.end(), d.begin(), d.end());
      }
    Check("STFT", A().I("onesided", onesided), {F32({2, len, 1}, sig), I64({}, {step}), F32({flen}, win), nullptr},
          {F32({2, frames, bins, 2}, want)}, 1e-4);
  }
}

TEST(ExtraOps, SymmetricAndPeriodicWindows) {
  const int64_t n = 7;
  for (int periodic : {0, 1}) {
    const double d = periodic ? n : n - 1;
    std::vector<double> hann, hamming, blackman;
    for (int64_t i = 0; i < n; ++i) {
      hann.push_back(std::pow(std::sin(M_PI * i / d), 2));  // = 0.5 - 0.5 cos(2 pi i / d)
      hamming.push_back(0.54347826086956519 - 0.45652173913043476 * std::cos(2 * M_PI * i / d));
      blackman.push_back(0.42 - 0.5 * std::cos(2 * M_PI * i / d) + 0.08 * std::cos(4 * M_PI * i / d));
    }
    Check("HannWindow", A().I("periodic", periodic).I("output_datatype", static_cast<int64_t>(DType::kF64)),
          {I32({}, {static_cast<int32_t>(n)})}, {F64({n}, hann)}, 1e-12);
    Check("HammingWindow", A().I("periodic", periodic).I("output_datatype", static_cast<int64_t>(DType::kF64)),
          {I64({}, {n})}, {F64({n}, hamming)}, 1e-12);
    Check("BlackmanWindow", A().I("periodic", periodic).I("output_datatype", static_cast<int64_t>(DType::kF64)),
          {I64({}, {n})}, {F64({n}, blackman)}, 1e-12);
  }
}

// ---------------------------------------------------------------- Det, MaxUnpool, ReverseSequence, EyeLike, MVN

double Cofactor(const std::vector<double>& a, int64_t m) {  // Laplace expansion along row 0
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t j = 0; j < m; ++j) {
    std::vector<double> minor;
    for (int64_t r = 1; r < m; ++r)
      for (int64_t c = 0; c < m; ++c)
        if (c != j) minor.push_back(a[r * m + c]);
    det += (j % 2 ? -1 : 1) * a[j] * Cofactor(minor, m - 1);
  }
  return det;
}

TEST(ExtraOps, DetAgainstCofactorExpansion) {
  for (int64_t m : {1, 3, 5}) {
    const int64_t batch = 4;
    auto x = Rand(batch * m * m, static_cast<uint32_t>(50 + m));
    if (m == 3) {  // make the last matrix singular: row 2 = row 0 + row 1
      for (int64_t c = 0; c < 3; ++c) x[3 * 9 + 6 + c] = x[3 * 9 + c] + x[3 * 9 + 3 + c];
    }
    std::vector<float> want;
    for (int64_t b = 0; b < batch; ++b)
      want.push_back(static_cast<float>(Cofactor(std::vector<double>(x.begin() + b * m * m, x.begin() + (b + 1) * m * m), m)));
    Check("Det", A(), {F32({2, 2, m, m}, x)}, {F32({2, 2}, want)}, 1e-4);
  }
  EXPECT_REFUSED(InferOnly("Det", A(), {F32({2, 3}, std::vector<float>(6))}), StatusCode::kInvalidArgument, "input must be [..., M, M]");
}

TEST(ExtraOps, MaxUnpoolOutputShapeAndBadIndices) {
  // 1-D: X [1, 2, 2] from kernel 2 stride 2 on length 4; placed in length 6.
  const auto x = F32({1, 2, 2}, {5, 6, 7, 8});
  const auto idx = I64({1, 2, 2}, {1, 2, 4, 7});  // flat offsets into [1, 2, 4]
  Check("MaxUnpool", A().Is("kernel_shape", {2}).Is("strides", {2}), {x, idx},
        {F32({1, 2, 4}, {0, 5, 6, 0, 7, 0, 0, 8})});
  Check("MaxUnpool", A().Is("kernel_shape", {2}).Is("strides", {2}), {x, idx, I64({3}, {1, 2, 6})},
        {F32({1, 2, 6}, {0, 5, 6, 0, 0, 0, 7, 0, 0, 8, 0, 0})});
  EXPECT_REFUSED(Fails("MaxUnpool", A().Is("kernel_shape", {2}).Is("strides", {2}), {x, I64({1, 2, 2}, {1, 2, 4, 8})}), StatusCode::kInvalidArgument, "an index in I is outside the output");
}

TEST(ExtraOps, ReverseSequenceChecksLengths) {
  const auto x = F32({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});  // [time, batch, 2]
  // Batch 0 reverses its first 3 steps, batch 1 its first 2.
  Check("ReverseSequence", A(), {x, I64({2}, {3, 2})},
        {F32({3, 2, 2}, {9, 10, 7, 8, 5, 6, 3, 4, 1, 2, 11, 12})});
  EXPECT_REFUSED(Fails("ReverseSequence", A(), {x, I64({2}, {4, 1})}), StatusCode::kInvalidArgument, "sequence_lens[0] = 4 is outside [0, 3]");
}

TEST(ExtraOps, EyeLikeNegativeKAndBool) {
  Check("EyeLike", A().I("k", -1).I("dtype", static_cast<int64_t>(DType::kBool)), {F32({3, 2}, std::vector<float>(6))},
        {Bool({3, 2}, {0, 0, 1, 0, 0, 1})});
  Check("EyeLike", A().I("k", 5), {I32({2, 2}, {7, 7, 7, 7})}, {I32({2, 2}, {0, 0, 0, 0})});
}

TEST(ExtraOps, MeanVarianceNormalizationOverOtherAxes) {
  const Shape s = {2, 3, 4};
  const auto x = Rand(24, 61);
  std::vector<float> want(24);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 4; ++k) {  // axes {1}: groups (b, k) over the 3 channels
      double m = 0, q = 0;
      for (int64_t c = 0; c < 3; ++c) m += x[(b * 3 + c) * 4 + k], q += double{x[(b * 3 + c) * 4 + k]} * x[(b * 3 + c) * 4 + k];
      m /= 3;
      const double sd = std::sqrt(q / 3 - m * m);
      for (int64_t c = 0; c < 3; ++c) want[(b * 3 + c) * 4 + k] = static_cast<float>((x[(b * 3 + c) * 4 + k] - m) / (sd + 1e-9));
    }
  Check("MeanVarianceNormalization", A().Is("axes", {1}), {F32(s, x)}, {F32(s, want)}, 1e-4);
}

}  // namespace
}  // namespace fcb::ops::testing
