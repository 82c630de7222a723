// Ops and variants the ONNX 1.12 node tests do not reach (Mish and
// GroupNormalization are opset 18, LpPool has no 1.12 test, 1-D Conv, TopK
// ties) against references computed here, plus the error paths: out-of-range
// indices fail the run, shape-determining inputs must be constants.
#include <cmath>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

TEST(CoverageOps, Mish) {
  const std::vector<float> x = {-3.f, -0.5f, 0.f, 0.7f, 4.f, 25.f};
  std::vector<float> want;
  for (float v : x) want.push_back(static_cast<float>(v * std::tanh(std::log1p(std::exp(double{v})))));
  Check("Mish", A(), {F32({6}, x)}, {F32({6}, want)});
}

TEST(CoverageOps, GroupNormalizationPerGroupScale) {
  const Shape s = {1, 4, 3};
  const auto x = Rand(12, 7);
  const std::vector<float> scale = {2.f, -1.f}, bias = {0.5f, 1.f};
  std::vector<float> want(12);
  for (int g = 0; g < 2; ++g) {  // channels 2g, 2g+1 = elements [6g, 6g + 6)
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += x[6 * g + i];
    mean /= 6;
    for (int i = 0; i < 6; ++i) var += (x[6 * g + i] - mean) * (x[6 * g + i] - mean);
    var /= 6;
    for (int i = 0; i < 6; ++i)
      want[6 * g + i] = static_cast<float>((x[6 * g + i] - mean) / std::sqrt(var + 1e-5) * scale[g] + bias[g]);
  }
  Check("GroupNormalization", A().I("num_groups", 2), {F32(s, x), F32({2}, scale), F32({2}, bias)},
        {F32(s, want)}, 1e-4);
}

// Long rows with a large mean and a small spread (the case blocked float
// sums get wrong): statistics keep double accuracy; several rows run in
// parallel (Check runs 1, 2 and 3 threads on every target).
TEST(CoverageOps, InstanceNormalizationLongRowsWithALargeMean) {
  const int64_t c = 3, len = 100003;  // not a multiple of the 64-element block
  std::vector<float> x(c * len);
  for (int64_t i = 0; i < c * len; ++i) x[i] = 1000.f * (1 + i / len) + 0.01f * std::sin(0.37f * i);
  const std::vector<float> scale = {1.5f, -0.5f, 2.f}, bias = {0.1f, 0.f, -0.3f};
  std::vector<float> want(x.size());
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < len; ++i) mean += x[ch * len + i];
    mean /= len;
    for (int64_t i = 0; i < len; ++i) var += (x[ch * len + i] - mean) * (x[ch * len + i] - mean);
    var /= len;
    for (int64_t i = 0; i < len; ++i)
      want[ch * len + i] =
          static_cast<float>((x[ch * len + i] - mean) / std::sqrt(var + 1e-5) * scale[ch] + bias[ch]);
  }
  Check("InstanceNormalization", A(), {F32({1, c, len}, x), F32({c}, scale), F32({c}, bias)},
        {F32({1, c, len}, want)}, 1e-3);
}

TEST(CoverageOps, LpPool1d) {
  const std::vector<float> x = {1.f, -2.f, 3.f, 4.f};
  Check("LpPool", A().Is("kernel_shape", {2}).I("p", 2), {F32({1, 1, 4}, x)},
        {F32({1, 1, 3}, {std::sqrt(5.f), std::sqrt(13.f), 5.f})});
  Check("LpPool", A().Is("kernel_shape", {2}).I("p", 1).Is("strides", {2}), {F32({1, 1, 4}, x)},
        {F32({1, 1, 2}, {3.f, 7.f})});
}

TEST(CoverageOps, Conv1dWithPadsAndGroups) {
  // Two groups of one channel each; pads 1 on both sides.
  const std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40};
  const std::vector<float> w = {1, 0, -1, 0.5f, 0.5f, 0.5f};
  std::vector<float> want;
  for (int g = 0; g < 2; ++g)
    for (int o = 0; o < 4; ++o) {
      float acc = 0;
      for (int k = 0; k < 3; ++k) {
        const int i = o - 1 + k;
        if (i >= 0 && i < 4) acc += x[g * 4 + i] * w[g * 3 + k];
      }
      want.push_back(acc);
    }
  Check("Conv", A().I("group", 2).Is("pads", {1, 1}), {F32({1, 2, 4}, x), F32({2, 1, 3}, w)},
        {F32({1, 2, 4}, want)});
}

TEST(CoverageOps, TopKTiesGoToTheLowerIndex) {
  const auto x = F32({1, 5}, {3, 1, 3, 2, 5});
  Check("TopK", A(), {x, I64({1}, {3})}, {F32({1, 3}, {5, 3, 3}), I64({1, 3}, {4, 0, 2})});
  Check("TopK", A().I("largest", 0), {x, I64({1}, {2})}, {F32({1, 2}, {1, 2}), I64({1, 2}, {1, 3})});
}

TEST(CoverageOps, OutOfRangeIndicesFailTheRun) {
  const auto data = F32({2, 2}, {1, 2, 3, 4});
  EXPECT_REFUSED(Fails("GatherElements", A(), {data, I64({2, 2}, {0, 1, 2, 0})}), StatusCode::kInvalidArgument, "index 2 is out of range for a dimension of size 2");
  EXPECT_REFUSED(Fails("GatherND", A(), {data, I64({1, 2}, {0, -3})}), StatusCode::kInvalidArgument, "index -3 is out of range for a dimension of size 2");
  EXPECT_REFUSED(Fails("ScatterND", A(), {data, I64({1, 1}, {5}), F32({1, 2}, {0, 0})}), StatusCode::kInvalidArgument, "index 5 is out of range for a dimension of size 2");
}

TEST(CoverageOps, ShapeInputsMustBeConstants) {
  const auto x = F32({1, 1, 2, 2}, {1, 2, 3, 4});
  Status s = Fails("Resize", A(), {x, nullptr, F32({4}, {1, 1, 2, 2})}, 1, {true, true, false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  s = Fails("OneHot", A(), {I64({2}, {0, 1}), I64({}, {3}), F32({2}, {0, 1})}, 1, {true, false, true});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
}

}  // namespace
}  // namespace fcb::ops::testing
