// Multi-threaded splits of ConvNhwc and GemmPacked over output channels
// (internal/): with few output pixels (rows) the threads take ranges of weight
// panels instead of ranges of pixels. On every runnable target and with 1, 2
// and 3 threads the result must match a plain loop, including a last range
// that ends inside a panel (output channels not a multiple of 32), a fused
// residual and an activation.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/packing.h"
#include "ops/ops_test_util.h"

namespace fcb::ops {
namespace {

using namespace fcb::ops::testing;  // NOLINT

// NHWC conv, stride 1, pad `pad`, then + residual, then ReLU.
std::vector<float> ConvLoop(const std::vector<float>& x, const std::vector<float>& w,
                            const std::vector<float>& b, const std::vector<float>& res, int64_t h,
                            int64_t wd, int64_t ic, int64_t oc, int64_t k, int64_t pad) {
  std::vector<float> y(h * wd * oc);
  for (int64_t oy = 0; oy < h; ++oy)
    for (int64_t ox = 0; ox < wd; ++ox)
      for (int64_t o = 0; o < oc; ++o) {
        double acc = b[o];
        for (int64_t ky = 0; ky < k; ++ky)
          for (int64_t kx = 0; kx < k; ++kx) {
            const int64_t iy = oy + ky - pad, ix = ox + kx - pad;
            if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
            for (int64_t c = 0; c < ic; ++c)
              acc += double{x[(iy * wd + ix) * ic + c]} * w[((o * ic + c) * k + ky) * k + kx];
          }
        const int64_t i = (oy * wd + ox) * oc + o;
        y[i] = std::max(0.f, static_cast<float>(acc + res[i]));
      }
  return y;
}

void CheckConv(TargetId target, int64_t h, int64_t wd, int64_t ic, int64_t oc, int64_t k) {
  const int64_t pad = k / 2;
  const auto xv = Rand(h * wd * ic, 11);
  const auto wv = Rand(oc * ic * k * k, 12, -0.5f, 0.5f);
  const auto bv = Rand(oc, 13);
  const auto rv = Rand(h * wd * oc, 14);
  const auto want = F32({1, h, wd, oc}, ConvLoop(xv, wv, bv, rv, h, wd, ic, oc, k, pad));
  const auto pw = kernels::PackConv(wv.data(), oc, ic, k, k, 1);
  const auto pb = kernels::PackConvBias(bv.data(), oc, 1);
  internal::ConvParams p;
  p.kernel = {k, k}, p.pads = {pad, pad, pad, pad}, p.out_channels = oc;
  p.ep.act = kernels::Act::kRelu;
  const Attrs attrs = A(EncodeParams(p));
  const std::vector<TensorPtr> in = {F32({1, h, wd, ic}, xv), F32({static_cast<int64_t>(pw.size())}, pw),
                                     F32({static_cast<int64_t>(pb.size())}, pb), F32({1, h, wd, oc}, rv)};
  for (int threads : {1, 2, 3}) {
    auto got = RunWith(opname::ConvNhwc, attrs, in, 1, kernels::GetKernelTable(target), threads);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(Same(*got.value()[0], *want, 1e-4)) << threads << " threads, " << k << "x" << k << " oc " << oc;
  }
}

class ChannelSplit : public fcb::testing::PerTarget {};
FCB_INSTANTIATE_PER_TARGET(ChannelSplit, fcb::testing::LayerTargets());

// 3x3 on 3x3 pixels: the weights dwarf the input, so threads split channels;
// 200 = 6 units of 32 + 8.
TEST_P(ChannelSplit, ConvOverChannels3x3) { CheckConv(target_id(), 3, 3, 24, 200, 3); }

// 1x1 with 264 channels (the GEMM path at full width, ConvTile per range).
TEST_P(ChannelSplit, ConvOverChannels1x1) { CheckConv(target_id(), 2, 3, 40, 264, 1); }

// Many pixels: still split over pixels (the same answer either way).
TEST_P(ChannelSplit, ConvOverPixels) { CheckConv(target_id(), 12, 10, 8, 40, 3); }

// GemmPacked's parameters: its column count, no activation.
Attrs GemmAttrs(int64_t n) {
  return A()
      .I(attr::kColumns, n)
      .I(attr::kActivation, 0)
      .F(attr::kActivationAlpha, 0.f)
      .F(attr::kActivationBeta, 0.f);
}

TEST_P(ChannelSplit, GemmOneRowOverColumns) {
  for (int64_t m : {1, 3}) {
    const int64_t k = 37, n = 1000;
    const auto av = Rand(m * k, 21);
    const auto bv = Rand(k * n, 22, -0.5f, 0.5f);
    const auto biasv = Rand(n, 23);
    std::vector<float> want(m * n);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double acc = biasv[j];
        for (int64_t i = 0; i < k; ++i) acc += double{av[r * k + i]} * bv[i * n + j];
        want[r * n + j] = static_cast<float>(acc);
      }
    const auto pb = kernels::PackGemmB(bv.data(), k, n, n, 1);
    const std::vector<TensorPtr> in = {F32({m, k}, av), F32({static_cast<int64_t>(pb.size())}, pb),
                                       F32({n}, biasv)};
    const auto w = F32({m, n}, want);
    for (int threads : {1, 2, 3}) {
      auto got = RunWith(opname::GemmPacked, GemmAttrs(n), in, 1, kernels::GetKernelTable(target_id()), threads);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_TRUE(Same(*got.value()[0], *w, 1e-4)) << threads << " threads, m " << m;
    }
  }
}

}  // namespace
}  // namespace fcb::ops
