// The Winograd F(4x4, 3x3) conv of every target this host can run, against
// the direct double-precision reference conv over the original ONNX weights
// (so a packing mistake cannot cancel a kernel mistake). Shapes reach partial
// tiles at the bottom/right edges, padding on each side, partial channel
// vectors and panels, strided pixels, a residual, and work ranges split at
// tiles that are not multiples of the register tile.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"
#include "kernels/kernels.h"
#include "kernels/kernels_reference.h"
#include "kernels/packing.h"
#include "test_util.h"

namespace fcb::kernels {
namespace {

using test_support::Random;
using test_support::RunnableHere;

constexpr float kSentinel = 777.f;

struct WinoCase {
  int64_t n, ih, iw, ic, oc, pt, pl, pb, pr, in_extra, out_extra;
  Act act;
  bool residual;
};

class WinogradTest : public ::testing::TestWithParam<TargetId> {};

void RunCase(const KernelTable& k, const WinoCase& c, uint32_t seed) {
  ConvGeom g{};
  g.n = c.n, g.ih = c.ih, g.iw = c.iw, g.ic = c.ic, g.oc = c.oc;
  g.kh = g.kw = 3, g.sh = g.sw = g.dh = g.dw = 1, g.groups = 1;
  g.pad_top = c.pt, g.pad_left = c.pl;
  g.oh = c.ih + c.pt + c.pb - 2;
  g.ow = c.iw + c.pl + c.pr - 2;
  g.in_pixel_stride = c.ic + c.in_extra;
  g.out_pixel_stride = c.oc + c.out_extra;
  g.residual_pixel_stride = c.out_extra % 2 ? c.oc : 0;
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  const int64_t pixels = g.n * g.oh * g.ow;
  const int64_t tiles = g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4);
  const auto in = Random(g.n * g.ih * g.iw * g.in_pixel_stride, seed);
  const auto w = Random(c.oc * c.ic * 9, seed + 1);
  const auto bias = Random(c.oc, seed + 2);
  const auto res = Random(pixels * res_stride, seed + 3);
  const std::vector<float> packed = PackWinograd(w.data(), c.oc, c.ic);
  ASSERT_EQ(static_cast<int64_t>(packed.size()), PackedWinogradFloats(c.oc, c.ic));
  const std::vector<float> pbias = PackConvBias(bias.data(), c.oc, 1);
  Epilogue ep{c.act, 0.f, 0.f};
  if (c.act == Act::kClip) ep = {c.act, -0.5f, 0.7f};
  const float* rp = c.residual ? res.data() : nullptr;
  std::vector<float> got(static_cast<size_t>(pixels * g.out_pixel_stride), kSentinel), want = got;
  // Split as threads would: at a tile that is not a multiple of any tile
  // height, and the second range's channels at a panel that is not a multiple
  // of a column block (the op cuts at pairs of panels).
  const int64_t mid = std::min(tiles, tiles / 2 + 1);
  const int64_t panels = PanelCount(c.oc), pmid = panels / 2 + panels % 2;
  test_support::Scratch scratch(kWinogradScratchFloats);
  k.winograd(g, in.data(), packed.data(), pbias.data(), rp, got.data(), ep, 0, mid, 0, panels, scratch.get());
  k.winograd(g, in.data(), packed.data(), pbias.data(), rp, got.data(), ep, mid, tiles, 0, pmid, scratch.get());
  k.winograd(g, in.data(), packed.data(), pbias.data(), rp, got.data(), ep, mid, tiles, pmid, panels, scratch.get());
  reference::Conv(g, in.data(), w.data(), bias.data(), rp, res_stride, ep, want.data());
  std::vector<float> gv, wv;
  int64_t clobbered = 0;
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t j = 0; j < g.out_pixel_stride; ++j) {
      const size_t i = static_cast<size_t>(p * g.out_pixel_stride + j);
      if (j < c.oc) {
        gv.push_back(got[i]);
        wv.push_back(want[i]);
      } else {
        clobbered += got[i] != kSentinel;
      }
    }
  char what[160];
  std::snprintf(what, sizeof(what), "%s n%lld %lldx%lldx%lld->%lld pad%lld,%lld,%lld,%lld act%d res%d",
                k.isa, (long long)c.n, (long long)c.ih, (long long)c.iw, (long long)c.ic,
                (long long)c.oc, (long long)c.pt, (long long)c.pl, (long long)c.pb, (long long)c.pr,
                static_cast<int>(c.act), c.residual ? 1 : 0);
  const testing::Diff d = testing::Compare(gv, wv);
  // F(4x4, 3x3) amplifies rounding by its transform constants; the bound is
  // still far below the 1e-4 the model tests allow end to end.
  EXPECT_LE(d.rel_l2, 2e-6 * std::sqrt(static_cast<double>(c.ic)) + 1e-6) << what;
  EXPECT_LE(d.max_abs, 1e-4 * std::sqrt(static_cast<double>(c.ic))) << what;
  EXPECT_EQ(clobbered, 0) << what << ": wrote outside the valid channels";
}

// n, ih, iw, ic, oc, pads t/l/b/r, in_extra, out_extra, act, residual
const WinoCase kCases[] = {
    {1, 8, 8, 16, 16, 1, 1, 1, 1, 0, 0, Act::kNone, false},
    {1, 7, 9, 3, 5, 1, 1, 1, 1, 0, 0, Act::kRelu, false},       // partial tiles, tiny channels
    {2, 14, 13, 17, 33, 1, 1, 1, 1, 3, 5, Act::kClip, true},    // strides, partial panels
    {1, 6, 6, 32, 48, 0, 0, 0, 0, 0, 0, Act::kNone, true},      // no padding, odd panel count
    {1, 5, 11, 8, 16, 2, 0, 1, 2, 0, 1, Act::kSilu, true},      // uneven padding
    {1, 28, 28, 64, 64, 1, 1, 1, 1, 0, 0, Act::kRelu, true},    // a ResNet-like layer
    {1, 10, 10, 256, 20, 1, 1, 1, 1, 0, 0, Act::kNone, false},  // the largest ic
    {3, 3, 3, 24, 40, 1, 1, 1, 1, 0, 0, Act::kRelu, false},     // one tile per image
    {1, 14, 14, 96, 80, 1, 1, 1, 1, 0, 0, Act::kRelu, true},    // 16 tiles: 8 + 8 rows or less
    {1, 40, 40, 24, 32, 1, 1, 1, 1, 0, 0, Act::kNone, false},   // 100 tiles: several blocks
    {2, 17, 23, 16, 16, 1, 1, 1, 1, 0, 0, Act::kRelu, false},   // blocks across images
};

TEST_P(WinogradTest, MatchesDirectConvolution) {
  const KernelTable& k = GetKernelTable(GetParam());
  uint32_t seed = 500;
  for (const WinoCase& c : kCases) RunCase(k, c, seed += 10);
}

TEST_P(WinogradTest, RefusesGeometryItCannotRun) {
  // Outside its contract the kernel must not write (nor overrun its stack buffers).
  const KernelTable& k = GetKernelTable(GetParam());
  ConvGeom g{};
  g.n = 1, g.ih = g.iw = 4, g.ic = kWinogradMaxIc + 16, g.oc = 16, g.kh = g.kw = 3;
  g.sh = g.sw = g.dh = g.dw = 1, g.groups = 1, g.oh = g.ow = 2;
  g.in_pixel_stride = g.ic, g.out_pixel_stride = g.oc;
  std::vector<float> in(static_cast<size_t>(16 * g.ic), 1.f);
  std::vector<float> w(static_cast<size_t>(PackedWinogradFloats(g.oc, g.ic)), 1.f);
  std::vector<float> b(16, 0.f), out(static_cast<size_t>(4 * g.oc), kSentinel);
  test_support::Scratch scratch(kWinogradScratchFloats);
  k.winograd(g, in.data(), w.data(), b.data(), nullptr, out.data(), Epilogue{}, 0, 1, 0, 1, scratch.get());
  for (float x : out) EXPECT_EQ(x, kSentinel);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(AllTargets, WinogradTest, ::testing::ValuesIn(RunnableHere()),
                         [](const ::testing::TestParamInfo<TargetId>& info) { return test_support::TargetTestName(info.param); });

}  // namespace fcb::kernels
