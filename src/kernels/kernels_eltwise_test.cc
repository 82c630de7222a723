// Pooling, activations, binary arithmetic and softmax on every target this
// host can run, against the scalar references of kernels_reference.h.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"
#include "kernels/kernels.h"
#include "kernels/kernels_reference.h"
#include "test_util.h"

namespace fcb::kernels {
namespace {

using test_support::Random;
using test_support::RunnableHere;

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  const testing::Diff d = testing::Compare(got, want);
  EXPECT_TRUE(d.shape_equal) << what;
  EXPECT_LE(d.rel_l2, 1e-5) << what;
  EXPECT_LE(d.max_abs, 1e-4) << what;
}

class EltwiseTest : public ::testing::TestWithParam<TargetId> {
 protected:
  const KernelTable& K() const { return GetKernelTable(GetParam()); }
};

struct PoolCase {
  int64_t n, ih, iw, c, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

TEST_P(EltwiseTest, Pools) {
  const PoolCase cases[] = {
      {1, 7, 7, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},    {2, 8, 9, 3, 2, 2, 2, 2, 1, 1, 0, 0, 0, 1},
      {1, 9, 8, 17, 3, 3, 1, 1, 2, 2, 2, 1, 0, 2},   {1, 6, 6, 33, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      {1, 5, 7, 80, 3, 2, 2, 1, 1, 1, 0, 1, 1, 0},   {3, 1, 1, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
  };
  int i = 0;
  for (const PoolCase& c : cases) {
    PoolGeom g{};
    g.n = c.n, g.ih = c.ih, g.iw = c.iw, g.c = c.c, g.kh = c.kh, g.kw = c.kw, g.sh = c.sh;
    g.sw = c.sw, g.dh = c.dh, g.dw = c.dw, g.pad_top = c.pt, g.pad_left = c.pl;
    g.oh = (c.ih + c.pt + c.pb - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
    g.ow = (c.iw + c.pl + c.pr - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
    const int64_t pixels = g.n * g.oh * g.ow, mid = pixels / 2 + 1;
    const auto in = Random(g.n * g.ih * g.iw * g.c, 40 + i);
    const std::string what = std::string(K().isa) + " pool case " + std::to_string(i);
    for (int mode = 0; mode < 4; ++mode) {  // max, avg, avg+count_include_pad (explicit / implied pads)
      g.count_include_pad = mode >= 2;
      g.pad_bottom = mode == 3 ? -1 : c.pb;
      g.pad_right = mode == 3 ? -1 : c.pr;
      std::vector<float> got(static_cast<size_t>(pixels * g.c)), want(got.size());
      auto fn = mode == 0 ? K().maxpool : K().avgpool;
      fn(g, in.data(), got.data(), 0, std::min(mid, pixels));
      fn(g, in.data(), got.data(), std::min(mid, pixels), pixels);
      // With implied pads (mode 3) the reference gets the pads the window actually reaches.
      const int64_t pb = mode == 3 ? std::max<int64_t>(0, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.ih - g.pad_top) : c.pb;
      const int64_t pr = mode == 3 ? std::max<int64_t>(0, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.iw - g.pad_left) : c.pr;
      reference::Pool(g, mode == 0, pb, pr, in.data(), want.data());
      ExpectClose(got, want, what + " mode " + std::to_string(mode));
    }
    ++i;
  }
}

TEST_P(EltwiseTest, GlobalAvgPool) {
  for (int64_t c : {1, 3, 17, 33, 80}) {
    const int64_t n = 3, hw = 49;
    const auto in = Random(n * hw * c, static_cast<uint32_t>(c));
    std::vector<float> got(static_cast<size_t>(n * c)), want(got.size());
    K().global_avgpool(n, hw, c, in.data(), got.data(), 0, 1);
    K().global_avgpool(n, hw, c, in.data(), got.data(), 1, n);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        double s = 0;
        for (int64_t i = 0; i < hw; ++i) s += in[(b * hw + i) * c + ch];
        want[b * c + ch] = static_cast<float>(s / hw);
      }
    ExpectClose(got, want, std::string(K().isa) + " global_avgpool c" + std::to_string(c));
  }
}

TEST_P(EltwiseTest, UnaryEveryActivationIsAccurate) {
  const Act acts[] = {Act::kNone,        Act::kRelu,      Act::kClip,
                      Act::kSigmoid,     Act::kHardSigmoid, Act::kHardSwish,
                      Act::kTanh,        Act::kLeakyRelu, Act::kSilu,  Act::kGelu};
  std::vector<float> x = Random(203, 5, -20.f, 20.f);
  for (float v : {0.f, -0.f, 1e-6f, -1e-6f, 88.f, -88.f, 100.f, -100.f, 1e-30f, 3.f, -3.f})
    x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  for (Act act : acts) {
    Epilogue ep{act, 0.f, 0.f};
    if (act == Act::kClip) ep = {act, -0.5f, 0.7f};
    if (act == Act::kHardSigmoid) ep = {act, 0.2f, 0.5f};
    if (act == Act::kLeakyRelu) ep = {act, 0.1f, 0.f};
    std::vector<float> got(x.size(), -1.f);
    // Ranges that start and end off a vector boundary.
    K().unary(ep, x.data(), got.data(), 0, 7);
    K().unary(ep, x.data(), got.data(), 7, n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = reference::Act(ep, x[i]);
      EXPECT_NEAR(got[i], want, 2e-6 * std::abs(want) + 1e-30)
          << K().isa << " act " << static_cast<int>(act) << " x=" << x[i];
    }
    std::vector<float> inplace = x;  // in place
    K().unary(ep, inplace.data(), inplace.data(), 0, n);
    EXPECT_EQ(inplace, got) << K().isa << " in-place act " << static_cast<int>(act);
  }
}

TEST_P(EltwiseTest, BinaryEveryOpAndBroadcast) {
  const BinaryOp ops[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv,
                          BinaryOp::kMax, BinaryOp::kMin, BinaryOp::kPow};
  for (int64_t n : {1, 5, 16, 37}) {
    const auto a = Random(n, 11, 0.5f, 2.f);  // positive: Pow stays real, Div stays finite
    const auto b = Random(n, 12, -2.f, 2.f);
    for (BinaryOp op : ops)
      for (int64_t sa : {0, 1})
        for (int64_t sb : {0, 1}) {
          std::vector<float> got(static_cast<size_t>(n), -7.f), want(got.size());
          K().binary(op, a.data(), sa, b.data(), sb, got.data(), n);
          for (int64_t i = 0; i < n; ++i)
            want[i] = static_cast<float>(reference::Binary(op, a[i * sa], b[i * sb]));
          ExpectClose(got, want,
                      std::string(K().isa) + " binary op" + std::to_string(static_cast<int>(op)) +
                          " n" + std::to_string(n) + " sa" + std::to_string(sa) + " sb" +
                          std::to_string(sb));
        }
  }
}

TEST_P(EltwiseTest, SoftmaxLargeValues) {
  for (int64_t cols : {1, 5, 16, 17, 100}) {
    const int64_t rows = 3;
    auto x = Random(rows * cols, static_cast<uint32_t>(cols), -30.f, 30.f);
    for (int64_t c = 0; c < cols; ++c) {
      x[c] += 1000.f;       // row 0 would overflow exp without the max shift
      x[cols + c] -= 1000.f;  // row 1 would underflow to 0/0
    }
    std::vector<float> got(x.size()), want(x.size());
    K().softmax(x.data(), got.data(), cols, 0, 1);
    K().softmax(x.data(), got.data(), cols, 1, rows);
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -1e300, s = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double{x[r * cols + c]});
      for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - mx);
      for (int64_t c = 0; c < cols; ++c)
        want[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c] - mx) / s);
    }
    ExpectClose(got, want, std::string(K().isa) + " softmax cols" + std::to_string(cols));
  }
}

// A masked attention row: entries far below the row's maximum (-100, -inf)
// give 0 or a tiny normal float, never a subnormal (whose arithmetic is slow
// on x86), and
// the others stay accurate; a NaN still poisons its row.
TEST_P(EltwiseTest, SoftmaxMaskedRowsGiveZeroNotSubnormal) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t cols : {2, 17, 49, 100}) {
    auto x = Random(3 * cols, static_cast<uint32_t>(cols) + 40, -3.f, 3.f);
    for (int64_t c = 0; c < cols; c += 2) x[c] -= 100.f;  // row 0: every other entry masked
    for (int64_t c = 1; c < cols; c += 3) x[cols + c] = -inf;  // row 1: -inf masks
    x[2 * cols + cols / 2] = std::numeric_limits<float>::quiet_NaN();  // row 2: a NaN
    std::vector<float> got(x.size(), -1.f);
    K().softmax(x.data(), got.data(), cols, 0, 3);
    for (int64_t r = 0; r < 2; ++r) {
      double mx = -1e300, s = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double{x[r * cols + c]});
      for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - mx);
      for (int64_t c = 0; c < cols; ++c) {
        const double want = std::exp(x[r * cols + c] - mx) / s;
        const float g = got[r * cols + c];
        EXPECT_NE(std::fpclassify(g), FP_SUBNORMAL) << K().isa << " cols " << cols << " row " << r << " col " << c;
        if (want < 1e-30) EXPECT_LE(std::abs(g), 1e-37f) << K().isa << " cols " << cols << " row " << r << " col " << c;
        else EXPECT_NEAR(g, want, 2e-6 * want) << K().isa << " cols " << cols << " row " << r << " col " << c;
      }
    }
    for (int64_t c = 0; c < cols; ++c) EXPECT_TRUE(std::isnan(got[2 * cols + c])) << K().isa << " NaN row col " << c;
  }
}

// Rows of every length class (shorter than a vector, whole vectors, four
// vectors and a tail, transformer widths), with and without bias and the
// per-row statistics, split into two calls as threads split them; one row
// has a mean far from zero against its spread (the two-pass variance).
TEST_P(EltwiseTest, LayerNorm) {
  for (int64_t cols : {1, 3, 16, 17, 64, 100, 197, 768}) {
    const int64_t rows = 5;
    auto x = Random(rows * cols, static_cast<uint32_t>(cols) + 70, -3.f, 3.f);
    for (int64_t c = 0; c < cols; ++c) x[2 * cols + c] = 1000.f + 0.01f * x[2 * cols + c];
    const auto scale = Random(cols, 71, 0.5f, 1.5f), bias = Random(cols, 72);
    for (bool with_bias : {true, false}) {
      std::vector<float> got(x.size(), -7.f), want(x.size()), mean(rows, -7.f), inv(rows, -7.f);
      std::vector<float> want_mean(rows), want_inv(rows);
      const float* b = with_bias ? bias.data() : nullptr;
      K().layernorm(x.data(), scale.data(), b, got.data(), cols, 1e-5f, mean.data(), inv.data(), 0, 2);
      K().layernorm(x.data(), scale.data(), b, got.data(), cols, 1e-5f, mean.data(), inv.data(), 2, rows);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> y;
        double m, is;
        reference::LayerNormRow(x.data() + r * cols, scale.data(), b, cols, 1e-5, &y, &m, &is);
        for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = static_cast<float>(y[c]);
        want_mean[r] = static_cast<float>(m);
        want_inv[r] = static_cast<float>(is);
      }
      const std::string what = std::string(K().isa) + " layernorm cols" + std::to_string(cols) +
                               (with_bias ? " bias" : " no bias");
      ExpectClose(got, want, what);
      ExpectClose(mean, want_mean, what + " mean");
      for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(inv[r], want_inv[r], 1e-5 * want_inv[r]) << what << " row " << r;
    }
  }
}

// The fused attention row: key counts below, at and past a vector and the
// 4-key unrolling, head sizes with and without a tail, strided keys and
// values (rows of a wider [tokens, heads * head] tensor), softcap and
// additive terms (a masked key at -10000), against the double reference.
TEST_P(EltwiseTest, AttentionRow) {
  for (int64_t n : {1, 3, 4, 7, 16, 33, 130}) {
    for (int64_t head : {5, 16, 64}) {
      for (int variant = 0; variant < 3; ++variant) {
        const int64_t vhead = variant == 2 ? head + 3 : head, ks = 2 * head + 1, vs = 3 * vhead;
        const auto q = Random(head, 80, -2.f, 2.f), k = Random(n * ks, 81, -2.f, 2.f);
        const auto v = Random(n * vs, 82), add_src = Random(n, 83);
        std::vector<float> add(add_src);
        if (n > 2) add[1] = -10000.f;
        AttentionRow r{q.data(), k.data(), v.data(), ks, vs, n, variant == 1 ? add.data() : nullptr, 0.3f,
                       variant == 2 ? 1.5f : 0.f, nullptr, head, vhead};
        std::vector<float> got(static_cast<size_t>(vhead), -7.f), want(static_cast<size_t>(vhead));
        r.out = got.data();
        test_support::Scratch scratch(AttentionScratchFloats(n, vhead));
        K().attention(r, scratch.get());
        const auto ref = reference::AttentionRow(r);
        for (int64_t i = 0; i < vhead; ++i) want[static_cast<size_t>(i)] = static_cast<float>(ref[static_cast<size_t>(i)]);
        ExpectClose(got, want, std::string(K().isa) + " attention n" + std::to_string(n) + " head" +
                                   std::to_string(head) + " variant" + std::to_string(variant));
      }
    }
  }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(AllTargets, EltwiseTest, ::testing::ValuesIn(RunnableHere()),
                         [](const ::testing::TestParamInfo<TargetId>& info) { return test_support::TargetTestName(info.param); });

}  // namespace fcb::kernels
