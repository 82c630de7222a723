// Reductions, Softmax/LogSoftmax and ArgMax/ArgMin against scalar references.
#include <cmath>
#include <functional>
#include <limits>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

// Reference reduction of a float tensor over `axes` (sorted, non-negative).
TensorPtr RefReduce(const TensorPtr& x, const std::vector<int64_t>& axes, bool keep,
                    const std::function<double(const std::vector<double>&)>& f) {
  Shape out_keep = x->shape, out;
  for (int64_t a : axes) out_keep[a] = 1;
  for (size_t d = 0; d < x->shape.size(); ++d) {
    const bool red = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!red) out.push_back(x->shape[d]);
    else if (keep) out.push_back(1);
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(ir::NumElements(out_keep)));
  for (int64_t i = 0; i < x->numel(); ++i) {
    auto idx = Unravel(i, x->shape);
    for (int64_t a : axes) idx[a] = 0;
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o = o * out_keep[d] + idx[d];
    groups[o].push_back(x->GetDouble(i));
  }
  auto y = ir::TensorData::Make(x->dtype, out);
  for (size_t o = 0; o < groups.size(); ++o) {
    const double v = f(groups[o]);
    if (x->dtype == DType::kF32) y->mutable_data<float>()[o] = static_cast<float>(v);
    else y->mutable_data<int64_t>()[o] = static_cast<int64_t>(v);
  }
  return y;
}

double Sum(const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s; }

TEST(Reduce, AllKindsAllPatterns) {
  const std::vector<std::pair<std::string, std::function<double(const std::vector<double>&)>>> kinds = {
      {"ReduceSum", Sum},
      {"ReduceMean", [](const auto& v) { return Sum(v) / v.size(); }},
      {"ReduceMax", [](const auto& v) { return *std::max_element(v.begin(), v.end()); }},
      {"ReduceMin", [](const auto& v) { return *std::min_element(v.begin(), v.end()); }},
      {"ReduceProd", [](const auto& v) { double p = 1; for (double x : v) p *= x; return p; }},
      {"ReduceL1", [](const auto& v) { double s = 0; for (double x : v) s += std::fabs(x); return s; }},
      {"ReduceL2", [](const auto& v) { double s = 0; for (double x : v) s += x * x; return std::sqrt(s); }},
      {"ReduceSumSquare", [](const auto& v) { double s = 0; for (double x : v) s += x * x; return s; }},
      {"ReduceLogSum", [](const auto& v) { return std::log(Sum(v)); }},
      {"ReduceLogSumExp", [](const auto& v) { double s = 0; for (double x : v) s += std::exp(x); return std::log(s); }},
  };
  auto x = F32({2, 3, 4, 5}, Rand(120, 3, 0.5f, 1.5f));
  const std::vector<std::vector<int64_t>> axes_sets = {
      {3}, {2, 3}, {1}, {0}, {0, 2}, {1, 3}, {0, 1, 2, 3}, {0, 1}, {0, 3}};
  for (const auto& [op, f] : kinds)
    for (const auto& axes : axes_sets)
      for (int keep : {0, 1}) {
        SCOPED_TRACE(op + " keep=" + std::to_string(keep) + " axes[0]=" + std::to_string(axes[0]) +
                     " n=" + std::to_string(axes.size()));
        auto want = RefReduce(x, axes, keep, f);
        // Opset-18 input form, with negative axes.
        std::vector<int64_t> neg;
        for (int64_t a : axes) neg.push_back(a - 4);
        Check(op, A().I("keepdims", keep), {x, I64({static_cast<int64_t>(axes.size())}, neg)}, {want}, 1e-5);
        // Attribute form (older opsets).
        Check(op, A().I("keepdims", keep).Is("axes", axes), {x}, {want}, 1e-5);
      }
}

TEST(Reduce, EmptyAxesIntegersAndErrors) {
  auto x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Check("ReduceSum", A(), {x}, {F32({1, 1}, {21})});
  Check("ReduceSum", A().I("keepdims", 0), {x, I64({0}, {})}, {F32({}, {21})});
  Check("ReduceSum", A().I("noop_with_empty_axes", 1), {x, I64({0}, {})}, {x});
  Check("ReduceSum", A().Is("axes", {1}), {I64({2, 3}, {1, 2, 3, 4, 5, 6})}, {I64({2, 1}, {6, 15})});
  Check("ReduceMax", A().Is("axes", {0}).I("keepdims", 0), {I32({2, 3}, {1, 7, 3, 4, 5, -6})},
        {I32({3}, {4, 7, 3})});
  Check("ReduceProd", A().Is("axes", {0}), {I64({2, 2}, {3, -4, 5, 6})}, {I64({1, 2}, {15, -24})});
  Check("ReduceMean", A().Is("axes", {1}), {F32({2, 0}, {})}, {F32({2, 1}, {NAN, NAN})});
  Check("ReduceSum", A().Is("axes", {1}), {F32({2, 0}, {})}, {F32({2, 1}, {0, 0})});
  EXPECT_REFUSED(Fails("ReduceSum", A().Is("axes", {2}), {x}), StatusCode::kInvalidArgument, "axis 2 is out of range for rank 2");
  EXPECT_REFUSED(Fails("ReduceSum", A().Is("axes", {1, -1}), {x}), StatusCode::kInvalidArgument, "axes contain a duplicate");
  EXPECT_REFUSED(Fails("ReduceL2", A(), {I64({1}, {1})}), StatusCode::kUnsupported, "ReduceL2: dtype int64");
  EXPECT_REFUSED(Fails("ReduceMax", A().Is("axes", {1}), {F32({2, 0}, {})}), StatusCode::kInvalidArgument, "cannot reduce an empty dim");
  EXPECT_EQ(Fails("ReduceSum", A(), {x, I64({1}, {1})}, 1, {true, false}).code(), StatusCode::kUnsupported);
}

TensorPtr RefSoftmax(const TensorPtr& x, int64_t axis, bool log) {
  auto y = ir::TensorData::Make(DType::kF32, x->shape);
  const Shape& s = x->shape;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -1e300, sum = 0;
      for (int64_t a = 0; a < n; ++a) m = std::max<double>(m, x->data<float>()[(o * n + a) * inner + i]);
      for (int64_t a = 0; a < n; ++a) sum += std::exp(x->data<float>()[(o * n + a) * inner + i] - m);
      for (int64_t a = 0; a < n; ++a) {
        const double v = x->data<float>()[(o * n + a) * inner + i];
        y->mutable_data<float>()[(o * n + a) * inner + i] =
            static_cast<float>(log ? v - m - std::log(sum) : std::exp(v - m) / sum);
      }
    }
  return y;
}

TEST(Softmax, AxesAndLog) {
  auto x = F32({3, 5, 70}, Rand(1050, 11, -5.f, 5.f));  // inner 70 > one block of 64
  for (int64_t axis : {-1, 0, 1, 2})
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      Check(op, A().I("axis", axis), {x}, {RefSoftmax(x, axis < 0 ? axis + 3 : axis, op[0] == 'L')}, 1e-5);
    }
  Check("Softmax", A(), {F32({2, 1000}, Rand(2000, 4, -30.f, 30.f))},
        {RefSoftmax(F32({2, 1000}, Rand(2000, 4, -30.f, 30.f)), 1, false)}, 1e-5);
  EXPECT_REFUSED(Fails("Softmax", A().I("axis", 3), {x}), StatusCode::kInvalidArgument, "axis 3 is out of range for rank 3");
  EXPECT_REFUSED(Fails("Softmax", A(), {I64({1}, {1})}), StatusCode::kUnsupported, "Softmax: dtype int64");
}

TEST(ArgMax, KeepdimsAndLastIndex) {
  auto x = F32({2, 3}, {1, 5, 5, 7, 0, 7});
  Check("ArgMax", A().I("axis", 1), {x}, {I64({2, 1}, {1, 0})});
  Check("ArgMax", A().I("axis", 1).I("select_last_index", 1).I("keepdims", 0), {x}, {I64({2}, {2, 2})});
  Check("ArgMin", A().I("axis", 0), {x}, {I64({1, 3}, {0, 1, 0})});
  Check("ArgMin", A().I("axis", -2).I("keepdims", 0), {I64({2, 2}, {4, -1, 4, 2})}, {I64({2}, {0, 0})});
  Check("ArgMin", A().I("axis", 0).I("select_last_index", 1), {I32({2, 1}, {4, 4})}, {I64({1, 1}, {1})});
  EXPECT_REFUSED(Fails("ArgMax", A().I("axis", 2), {x}), StatusCode::kInvalidArgument, "axis 2 is out of range for rank 2");
  EXPECT_REFUSED(Fails("ArgMax", A(), {F32({0, 2}, {})}), StatusCode::kInvalidArgument, "cannot take the arg of an empty axis");
}

}  // namespace
}  // namespace fcb::ops::testing
