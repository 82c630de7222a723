// Every kernel of every target this host can run, against the scalar
// references of kernels_reference.h, on shapes that reach the remainder and
// edge paths (partial panels, padding on every side, strided pixels, work
// ranges split mid-row).

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"
#include "kernels/int8.h"
#include "kernels/kernels.h"
#include "kernels/kernels_reference.h"
#include "kernels/packing.h"
#include "test_util.h"

namespace fcb::kernels {
namespace {

using test_support::Random;
using test_support::RunnableHere;

constexpr float kSentinel = 777.f;  // fills channels a kernel must not write

Epilogue EpFor(Act act) {
  Epilogue ep{act, 0.f, 0.f};
  if (act == Act::kClip) ep = {act, -0.5f, 0.7f};
  if (act == Act::kHardSigmoid) ep = {act, 0.2f, 0.5f};
  if (act == Act::kLeakyRelu) ep = {act, 0.1f, 0.f};
  return ep;
}
constexpr Act kAllActs[] = {Act::kNone,        Act::kRelu,      Act::kClip,
                            Act::kSigmoid,     Act::kHardSigmoid, Act::kHardSwish,
                            Act::kTanh,        Act::kLeakyRelu, Act::kSilu,  Act::kGelu};

// Compares the first `valid` floats of each of `rows` rows of `stride` floats
// and requires the rest of each row to still hold kSentinel.
void ExpectRowsClose(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                     int64_t stride, int64_t valid, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::vector<float> g, w;
  int64_t clobbered = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < stride; ++j) {
      const size_t i = static_cast<size_t>(r * stride + j);
      if (j < valid) {
        g.push_back(got[i]);
        w.push_back(want[i]);
      } else {
        clobbered += got[i] != kSentinel;
      }
    }
  const testing::Diff d = testing::Compare(g, w);
  EXPECT_LE(d.rel_l2, 1e-5) << what;
  EXPECT_LE(d.max_abs, 1e-4) << what;
  EXPECT_EQ(clobbered, 0) << what << ": wrote outside the valid channels";
}

class KernelTest : public ::testing::TestWithParam<TargetId> {
 protected:
  const KernelTable& K() const { return GetKernelTable(GetParam()); }
};

// ---------------------------------------------------------------------------
// Convolution

struct ConvCase {
  int64_t n, ih, iw, ic, oc, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups, in_extra, out_extra;
};

std::string Describe(const ConvCase& c, Act act, bool res) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "n%lld %lldx%lldx%lld->%lld k%lldx%lld s%lld,%lld d%lld,%lld pad%lld,%lld,%lld,%lld g%lld "
                "strides+%lld/+%lld act%d res%d",
                (long long)c.n, (long long)c.ih, (long long)c.iw, (long long)c.ic, (long long)c.oc,
                (long long)c.kh, (long long)c.kw, (long long)c.sh, (long long)c.sw, (long long)c.dh,
                (long long)c.dw, (long long)c.pt, (long long)c.pl, (long long)c.pb, (long long)c.pr,
                (long long)c.groups, (long long)c.in_extra, (long long)c.out_extra,
                static_cast<int>(act), res ? 1 : 0);
  return buf;
}

// packing: 0 PackConv (KernelTable::conv), 1 PackDepthwise (depthwise), 2
// PackGroupedSmall (grouped_small).
// nchw: the kernel reads an NCHW copy of the input (ConvGeom::in_nchw).
void RunConv(const KernelTable& k, const ConvCase& c, Act act, bool with_res, int packing,
             uint32_t seed, bool nchw = false) {
  const bool depthwise = packing == 1, grouped_small = packing == 2;
  ConvGeom g{};
  g.n = c.n, g.ih = c.ih, g.iw = c.iw, g.ic = c.ic, g.oc = c.oc, g.kh = c.kh, g.kw = c.kw;
  g.sh = c.sh, g.sw = c.sw, g.dh = c.dh, g.dw = c.dw, g.pad_top = c.pt, g.pad_left = c.pl;
  g.groups = c.groups;
  g.oh = (c.ih + c.pt + c.pb - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
  g.ow = (c.iw + c.pl + c.pr - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
  g.in_pixel_stride = c.ic + c.in_extra;
  g.out_pixel_stride = c.oc + c.out_extra;
  // Odd out_extra: the residual has its own (dense) stride; otherwise it shares the output's.
  g.residual_pixel_stride = c.out_extra % 2 ? c.oc : 0;
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  const int64_t icg = c.ic / c.groups, pixels = g.n * g.oh * g.ow;
  const auto in = Random(g.n * g.ih * g.iw * g.in_pixel_stride, seed);
  const auto w = Random(c.oc * icg * c.kh * c.kw, seed + 1);
  const auto bias = Random(c.oc, seed + 2);
  const auto res = Random(pixels * res_stride, seed + 3);
  const std::vector<float> packed =
      depthwise       ? PackDepthwise(w.data(), c.oc, c.kh, c.kw)
      : grouped_small ? PackGroupedSmall(w.data(), c.oc, icg, c.kh, c.kw)
                      : PackConv(w.data(), c.oc, icg, c.kh, c.kw, c.groups);
  const std::vector<float> pbias = depthwise || grouped_small ? PackDepthwiseBias(bias.data(), c.oc)
                                                              : PackConvBias(bias.data(), c.oc, c.groups);
  if (grouped_small) ASSERT_EQ(static_cast<int64_t>(packed.size()), PackedGroupedSmallFloats(c.oc, icg, c.kh, c.kw));
  if (packing == 0) ASSERT_EQ(static_cast<int64_t>(packed.size()), PackedConvFloats(c.oc, icg, c.kh, c.kw, c.groups));
  const Epilogue ep = EpFor(act);
  const float* rp = with_res ? res.data() : nullptr;
  std::vector<float> got(static_cast<size_t>(pixels * g.out_pixel_stride), kSentinel), want = got;
  test_support::Scratch scratch(kGemmScratchFloats);
  ConvGeom gk = g;  // what the kernel is told
  std::vector<float> in_planar;
  if (nchw) {
    ASSERT_TRUE(PlanarConvApplies(g)) << Describe(c, act, with_res);
    gk.in_nchw = true;
    in_planar.resize(static_cast<size_t>(g.n * g.ic * g.ih * g.iw));
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t ch = 0; ch < g.ic; ++ch)
        for (int64_t y = 0; y < g.ih; ++y)
          for (int64_t x = 0; x < g.iw; ++x)
            in_planar[((b * g.ic + ch) * g.ih + y) * g.iw + x] =
                in[((b * g.ih + y) * g.iw + x) * g.in_pixel_stride + ch];
  }
  const float* kin = nchw ? in_planar.data() : in.data();
  auto fn = [&](int64_t begin, int64_t end) {
    if (depthwise) {
      k.depthwise(g, in.data(), packed.data(), pbias.data(), rp, got.data(), ep, begin, end);
    } else if (grouped_small) {
      k.grouped_small(g, in.data(), packed.data(), pbias.data(), rp, got.data(), ep, begin, end);
    } else {
      k.conv(gk, kin, packed.data(), pbias.data(), rp, got.data(), ep, begin, end, scratch.get());
    }
  };
  // Two calls, split at a pixel that is usually mid-row, as threads would.
  const int64_t mid = std::min(pixels, pixels / 2 + 1);
  fn(0, mid);
  fn(mid, pixels);
  reference::Conv(g, in.data(), w.data(), bias.data(), rp, res_stride, ep, want.data());
  ExpectRowsClose(got, want, pixels, g.out_pixel_stride, c.oc,
                  std::string(k.isa) + (depthwise ? " depthwise " : grouped_small ? " grouped_small " : " conv ") +
                      (nchw ? "nchw " : "") + Describe(c, act, with_res));
}

// n, ih, iw, ic, oc, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups, in_extra, out_extra
const ConvCase kConvCases[] = {
    {1, 5, 7, 3, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    {2, 9, 8, 17, 33, 3, 3, 2, 2, 1, 1, 0, 1, 2, 1, 1, 3, 5},
    {1, 10, 10, 16, 32, 5, 5, 1, 1, 2, 2, 2, 3, 4, 1, 1, 0, 2},
    {1, 1, 1, 33, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0},
    {2, 1, 1, 5, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
    {1, 12, 11, 4, 6, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 2, 0, 0},
    {1, 6, 6, 34, 34, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 3},
    {1, 14, 14, 64, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    {1, 4, 4, 600, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},  // channels > the zero block
    {3, 7, 7, 8, 16, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0, 0},
    {1, 6, 5, 5, 5, 3, 3, 1, 2, 1, 1, 2, 0, 1, 2, 5, 0, 0},  // groups == channels via conv
    {1, 3, 3, 2, 40, 3, 3, 1, 1, 1, 1, 5, 5, 5, 5, 1, 0, 0},  // padding wider than the input
    {2, 13, 9, 3, 64, 7, 7, 2, 2, 1, 1, 3, 2, 3, 4, 1, 1, 0},
    {2, 9, 7, 300, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 3, 1},  // 1x1 as GEMM: K blocks + residual
    {1, 5, 5, 16, 17, 1, 1, 2, 2, 1, 1, 0, 0, 2, 2, 1, 0, 0},   // 1x1 reaching into the padding
    {1, 6, 6, 1024, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0}, // 4 KiB pixels
    {1, 4, 5, 8, 260, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 2},   // 1x1 as GEMM for many columns
    {2, 20, 19, 3, 40, 7, 7, 2, 2, 1, 1, 3, 3, 2, 3, 1, 0, 0},  // RGB stem: gathered windows, > 1 row block
    {1, 13, 15, 4, 20, 5, 5, 1, 1, 2, 2, 4, 4, 4, 4, 1, 0, 1},  // gathered windows with dilation
};

TEST_P(KernelTest, Conv) {
  int i = 0;
  for (const ConvCase& c : kConvCases) {
    RunConv(K(), c, kAllActs[i % 9], i % 2 == 1, false, 100 + i);
    ++i;
  }
}

// Pointwise convs (1x1, stride 1, no padding) with up to 128 input channels
// take their own path: every column tiling it makes (1, 2, 3 panels and their
// mixes, a partial last panel), tails of rows shorter than a tile, channel
// slices of wider tensors, the residual and the activations.
TEST_P(KernelTest, Pointwise) {
  int i = 0;
  for (int64_t oc : {5, 16, 32, 48, 64, 80, 100, 112, 130})
    for (int64_t ic : {1, 16, 37, 128}) {
      const ConvCase c{1 + i % 2, 3 + i % 4, 5 + i % 3, ic, oc, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, i % 3, (i / 3) % 3};
      RunConv(K(), c, kAllActs[i % 10], i % 2 == 0, false, 300 + i);
      ++i;
    }
}

// Convs over 1 to 4 input channels (the RGB stems) copy the input rows of a
// run of output pixels into planes, from an NHWC or an NCHW input: strides
// (column phases), dilation, padding on every side, a batch, channel slices
// of wider tensors, tails of rows, rows longer than one plane fill (the
// 300-wide and the 11x11 stride-4 cases), every column tiling, the residual.
TEST_P(KernelTest, SmallChannelWindows) {
  const ConvCase cases[] = {
      // n, ih, iw, ic, oc, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups, in_extra, out_extra
      {1, 23, 21, 3, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0},
      {2, 11, 13, 3, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 3},
      {1, 9, 10, 1, 33, 5, 5, 1, 2, 2, 1, 2, 3, 4, 1, 1, 2, 0},
      {1, 14, 9, 4, 100, 3, 3, 2, 1, 1, 2, 0, 2, 1, 0, 1, 0, 1},
      {1, 17, 17, 2, 40, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 1, 1, 0},
      {1, 19, 25, 3, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0},
      {2, 8, 30, 3, 16, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1, 0, 1},
      {1, 9, 300, 4, 40, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 1, 0, 0},
      {1, 15, 200, 4, 20, 11, 11, 4, 4, 1, 1, 2, 2, 2, 2, 1, 0, 0},
      {1, 12, 31, 2, 8, 3, 5, 1, 2, 1, 3, 1, 4, 1, 2, 1, 0, 2},
      {1, 6, 7, 1, 1, 2, 2, 3, 3, 1, 1, 0, 0, 2, 2, 1, 0, 0},
  };
  int i = 0;
  for (const ConvCase& c : cases) {
    RunConv(K(), c, kAllActs[(3 * i) % 10], i % 2 == 1, false, 400 + i);
    RunConv(K(), c, kAllActs[(3 * i + 1) % 10], i % 2 == 0, false, 500 + i, /*nchw=*/true);
    ++i;
  }
  ConvGeom wide{};  // 5 input channels: not this path
  wide.n = 1, wide.ih = wide.iw = wide.oh = wide.ow = 8, wide.ic = 5, wide.oc = 8, wide.kh = wide.kw = 3;
  wide.sh = wide.sw = wide.dh = wide.dw = 1, wide.groups = 1;
  EXPECT_FALSE(PlanarConvApplies(wide));
  wide.ic = 4;
  EXPECT_TRUE(PlanarConvApplies(wide));
  wide.groups = 2;
  EXPECT_FALSE(PlanarConvApplies(wide));
}

TEST_P(KernelTest, ConvEveryActivationWithAndWithoutResidual) {
  const ConvCase c{2, 5, 4, 6, 19, 3, 3, 1, 1, 1, 1, 1, 0, 1, 2, 1, 1, 2};
  for (Act act : kAllActs)
    for (bool res : {false, true}) RunConv(K(), c, act, res, false, 7);
}

// Few channels per group, every s the kernel takes (2, 4, 8, 16): fewer
// channels per group than a vector's lanes (a lane permutation per input
// channel) and as many or more (a broadcast); strides, dilations, asymmetric
// padding, a partial last vector, channel slices of wider tensors (in_extra,
// out_extra) and the residual. Each case also goes through the dense kernel's
// grouped path (PackConv), the same reference.
TEST_P(KernelTest, GroupedSmall) {
  // n, ih, iw, ic, oc, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups, in_extra, out_extra
  const ConvCase cases[] = {
      {1, 9, 21, 128, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32, 0, 0},  // ResNeXt stage 1: s = 4
      {2, 8, 11, 64, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8, 0, 0},     // s = 8, stride 2
      {1, 7, 12, 48, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 1},     // s = 16, strided pixels
      {1, 10, 13, 40, 40, 5, 3, 1, 2, 2, 1, 3, 1, 2, 0, 20, 0, 2},   // s = 2, 40 channels: a partial vector
      {1, 6, 17, 24, 24, 3, 3, 1, 1, 1, 1, 0, 2, 1, 1, 6, 1, 0},     // s = 4, 24 channels, asymmetric pads
      {1, 1, 1, 32, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 4, 0, 0},      // 1x1, one pixel
      {1, 3, 3, 16, 16, 3, 3, 1, 1, 1, 1, 4, 4, 4, 4, 8, 0, 0},      // padding wider than the input
  };
  int i = 0;
  for (const ConvCase& c : cases) {
    ASSERT_TRUE(GroupedSmallFits(c.oc, c.groups));
    RunConv(K(), c, kAllActs[i % 9], i % 2 == 0, 2, 300 + i);
    RunConv(K(), c, kAllActs[(i + 4) % 9], i % 2 == 1, 0, 400 + i);
    ++i;
  }
  EXPECT_FALSE(GroupedSmallFits(96, 32));  // s = 3 does not divide 16
  EXPECT_FALSE(GroupedSmallFits(64, 2));   // s = 32
  EXPECT_FALSE(GroupedSmallFits(64, 64));  // depthwise
}

TEST_P(KernelTest, Depthwise) {
  const ConvCase cases[] = {
      {1, 5, 6, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
      {2, 7, 7, 3, 3, 3, 3, 2, 2, 1, 1, 0, 1, 2, 1, 3, 2, 1},
      {1, 9, 8, 17, 17, 5, 5, 1, 1, 2, 2, 3, 4, 4, 2, 17, 0, 3},
      {1, 8, 8, 33, 33, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 33, 1, 0},
      {1, 10, 9, 64, 64, 7, 7, 1, 2, 1, 1, 3, 3, 3, 3, 64, 0, 0},
      {1, 1, 1, 80, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 80, 0, 2},
      // Rows wide enough for the grouped path (runs of 8 pixels, few channels).
      {2, 6, 21, 24, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 24, 0, 0},
      {1, 7, 37, 12, 12, 3, 3, 2, 2, 2, 1, 2, 1, 0, 2, 12, 3, 1},
      // Groups of pixels reaching past the left or right edge (DepthwiseRows'
      // edge form): small maps where every pixel is an edge pixel, rows
      // narrower than the kernel, asymmetric and oversized padding, groups of
      // 8 at both ends of a wide row, partial channel vectors.
      {1, 7, 7, 40, 40, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 40, 0, 0},
      {2, 14, 13, 24, 24, 5, 5, 2, 2, 1, 1, 1, 2, 2, 1, 24, 1, 0},
      {1, 9, 9, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 16, 0, 1},
      {1, 4, 3, 20, 20, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 20, 0, 0},
      {1, 3, 1, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 7, 0, 0},
      {1, 5, 20, 32, 32, 5, 5, 1, 1, 1, 1, 2, 2, 1, 1, 32, 0, 0},
      {1, 6, 11, 18, 18, 3, 3, 1, 1, 1, 1, 0, 3, 0, 3, 18, 2, 0},
      {1, 5, 12, 8, 8, 5, 5, 1, 2, 1, 1, 2, 0, 2, 4, 8, 0, 0},
      // Groups of 1 and 2 pixels over several channel vectors at once.
      {1, 6, 5, 72, 72, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 72, 0, 0},
      {1, 4, 3, 100, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 100, 4, 0},
      // 3x3 rows wider than 16 (DepthwiseSweep3): strides 1 and 2, partial
      // channel vectors, no left padding and double right padding, odd
      // widths, pixel strides wider than the channels, and dilation along y
      // with tall padding, so that output rows see 3, 2, 1 and no kernel rows
      // inside the image. The test's two calls split a row, leaving runs
      // shorter than kDwSweepMin to the groups.
      {1, 4, 40, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 20, 0, 0},
      {1, 3, 30, 16, 16, 3, 3, 1, 1, 1, 1, 1, 0, 1, 2, 16, 1, 1},
      {2, 6, 41, 37, 37, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 37, 2, 3},
      {1, 3, 50, 48, 48, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 48, 0, 0},
      {1, 2, 45, 9, 9, 3, 3, 1, 1, 2, 1, 3, 1, 3, 1, 9, 0, 0},
      {1, 5, 36, 33, 33, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1, 33, 0, 0},
  };
  int i = 0;
  for (const ConvCase& c : cases) {
    for (bool res : {false, true}) RunConv(K(), c, kAllActs[(i * 2 + res) % 9], res, true, 300 + i);
    ++i;
  }
}

// Every activation through DepthwiseSweep3, which takes its pixels'
// activations kActVectors abreast and the rest of a run one at a time: output
// rows of 40 pixels at stride 1 (the test's two calls split one of them) and
// of 23 at stride 2, whose interior runs leave remainders after the groups.
TEST_P(KernelTest, DepthwiseSweepEveryActivation) {
  const ConvCase cases[] = {
      {1, 3, 40, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 20, 0, 0},
      {1, 4, 45, 33, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 33, 0, 1},
  };
  int i = 0;
  for (const ConvCase& c : cases)
    for (Act act : kAllActs)
      for (bool res : {false, true}) RunConv(K(), c, act, res, true, 900 + i++);
}

// ---------------------------------------------------------------------------
// GEMM and MatMul

void RunGemm(const KernelTable& k, int64_t M, int64_t N, int64_t K, bool bias_on, Act act,
             bool transposed_b, uint32_t seed) {
  const int64_t lda = K + 3, ldc = N + 2;
  const auto A = Random(M * lda, seed);
  const auto B = Random(K * N, seed + 1);  // logical [K][N] row-major
  const auto bias = Random(N, seed + 2);
  std::vector<float> packed;
  if (transposed_b) {  // store B^T [N][K] and pack it with ldb=1, ldcol=K
    std::vector<float> bt(static_cast<size_t>(K * N));
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t n = 0; n < N; ++n) bt[n * K + kk] = B[kk * N + n];
    packed = PackGemmB(bt.data(), K, N, 1, K);
  } else {
    packed = PackGemmB(B.data(), K, N, N, 1);
  }
  const Epilogue ep = EpFor(act);
  const float* bp = bias_on ? bias.data() : nullptr;
  std::vector<float> got(static_cast<size_t>(M * ldc), kSentinel), want = got;
  const int64_t mid = M / 2;
  test_support::Scratch scratch(kGemmScratchFloats);
  k.gemm(M, N, K, A.data(), lda, packed.data(), bp, got.data(), ldc, ep, 0, mid, scratch.get());
  k.gemm(M, N, K, A.data(), lda, packed.data(), bp, got.data(), ldc, ep, mid, M, scratch.get());
  reference::Gemm(M, N, K, A.data(), lda, B.data(), N, bp, ep, want.data(), ldc);
  ExpectRowsClose(got, want, M, ldc, N,
                  std::string(k.isa) + " gemm M" + std::to_string(M) + " N" + std::to_string(N) +
                      " K" + std::to_string(K) + " bias" + std::to_string(bias_on) + " act" +
                      std::to_string(static_cast<int>(act)) + " bT" + std::to_string(transposed_b));
}

constexpr int64_t kSizes[] = {1, 5, 16, 17, 33, 100};

TEST_P(KernelTest, Gemm) {
  int i = 0;
  for (int64_t M : kSizes)
    for (int64_t N : kSizes)
      for (int64_t K : kSizes) {
        RunGemm(this->K(), M, N, K, i % 2 == 0, kAllActs[i % 9], i % 3 == 0, 500 + i);
        ++i;
      }
  // Reductions longer than one K block, and an empty one.
  RunGemm(this->K(), 17, 33, 300, true, Act::kRelu, false, 1);
  RunGemm(this->K(), 13, 48, 600, false, Act::kTanh, true, 2);
  RunGemm(this->K(), 3, 20, 0, true, Act::kSigmoid, false, 3);
  // Calls of more rows than one row block (kMC): equal blocks of whole tiles
  // (150 rows per call run as 84 + 66, 129 as 72 + 57), over several K blocks.
  RunGemm(this->K(), 300, 40, 520, true, Act::kRelu, true, 6);
  RunGemm(this->K(), 258, 33, 70, false, Act::kNone, false, 7);
  // Ranges of 12 k + 1 and 12 k + 2 rows end in one tile of 13 or 14 rows
  // where the registers allow (kMRWide): 26 rows run as two calls of 13, 98
  // as two of 49 over two K blocks, 100 as two of 50; column tails of one
  // panel and of a partial one.
  RunGemm(this->K(), 26, 40, 33, true, Act::kHardSwish, false, 8);
  RunGemm(this->K(), 98, 40, 300, true, Act::kRelu, true, 9);
  RunGemm(this->K(), 100, 17, 260, false, Act::kGelu, false, 10);
  // One row (the matrix-vector path): a partial group of 4 panels over two K
  // blocks, and whole groups with partial panels left over.
  RunGemm(this->K(), 1, 50, 300, true, Act::kSilu, false, 4);
  RunGemm(this->K(), 1, 130, 40, false, Act::kNone, true, 5);
}

TEST_P(KernelTest, MatMul) {
  int i = 0;
  for (int64_t M : kSizes)
    for (int64_t N : kSizes)
      for (int64_t Kd : kSizes) {
        const int64_t lda = Kd + 1, ldb = N + 3, ldc = N + 1;
        const auto A = Random(M * lda, 900 + i);
        const auto B = Random(Kd * ldb, 901 + i);
        std::vector<float> got(static_cast<size_t>(M * ldc), kSentinel), want = got;
        const int64_t mid = (M + 1) / 2;
        K().matmul(M, N, Kd, A.data(), lda, B.data(), ldb, got.data(), ldc, 0, mid);
        K().matmul(M, N, Kd, A.data(), lda, B.data(), ldb, got.data(), ldc, mid, M);
        reference::Gemm(M, N, Kd, A.data(), lda, B.data(), ldb, nullptr, Epilogue{}, want.data(), ldc);
        ExpectRowsClose(got, want, M, ldc, N,
                        std::string(K().isa) + " matmul M" + std::to_string(M) + " N" +
                            std::to_string(N) + " K" + std::to_string(Kd));
        ++i;
      }
}

// ---------------------------------------------------------------------------
// Tables

// The manifest's columns the fp32 tables follow from.
struct CodeRow {
  TargetId id;
  TargetArch arch;
  const char* hwy;
  bool variant;
};
constexpr CodeRow kCodeRows[] = {
#define FCB_TARGET(id, name, arch, score, hwy, variant, ...) {TargetId::id, TargetArch::k##arch, #hwy, sizeof(variant) > 1},
#include "core/targets.def"
#undef FCB_TARGET
};

// ---------------------------------------------------------------------------
// MatMulNBits at accuracy_level 4 (gemm_nbits_i8)

// Scalar reference of gemm_nbits_i8 from ONNX Runtime's operands (QuantOf,
// ZeroPointOf): the integer dot product of each block, less zp * sum(qa),
// scaled by (scale * a_scale) and summed over the blocks in order.
std::vector<float> NBitsI8Reference(const NBitsGeom& g, int64_t m, const std::vector<int16_t>& qa,
                                    const std::vector<float>& as, const std::vector<int32_t>& asum,
                                    const std::vector<uint8_t>& b, const std::vector<float>& scales,
                                    const uint8_t* zp, const float* bias, int64_t ldy) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  std::vector<float> y(static_cast<size_t>(m * ldy), kSentinel);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < g.n; ++c) {
      float out = 0.0f;
      for (int64_t blk = 0; blk < blocks; ++blk) {
        int64_t dot = 0;
        for (int64_t k = blk * g.block_size; k < std::min(g.k, (blk + 1) * g.block_size); ++k)
          dot += int64_t{QuantOf(g, b.data(), k, c)} * qa[static_cast<size_t>(r * kp + k)];
        dot -= int64_t{ZeroPointOf(g, zp, blk, c)} * asum[static_cast<size_t>(r * blocks + blk)];
        out += (scales[static_cast<size_t>(c * blocks + blk)] * as[static_cast<size_t>(r * blocks + blk)]) *
               static_cast<float>(dot);
      }
      if (bias) out += bias[c];
      y[static_cast<size_t>(r * ldy + c)] = out;
    }
  return y;
}

// exact: unit scales and k <= 512, so every sum is an integer below 2^24 and
// the kernel's result must equal the reference bit for bit.
// Every gemm_nbits_i8 code this host runs for the target (NBitsI8VariantsForTesting:
// VNNI where present, and the portable one) against the reference, and each
// bit for bit equal to the first (they compute the same integers and the same
// float operations in the same order).
void RunNBitsI8(TargetId target, const NBitsGeom& g, int64_t m, bool with_zp, bool with_bias, bool exact,
                uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size, ldy = g.n + 3;
  std::vector<uint8_t> b(static_cast<size_t>(g.n * blocks * g.block_size * g.bits / 8));
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  std::vector<uint8_t> zp(static_cast<size_t>(g.n * ((blocks * g.bits + 7) / 8)));
  for (auto& x : zp) x = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  std::vector<float> scales(static_cast<size_t>(g.n * blocks), 1.0f), as(static_cast<size_t>(m * blocks), 1.0f);
  if (!exact) {
    for (auto& x : scales) x = u(rng);
    for (auto& x : as) x = u(rng);
  }
  std::vector<float> bias(static_cast<size_t>(g.n));
  for (auto& x : bias) x = exact ? static_cast<float>(static_cast<int>(rng() % 200) - 100) : u(rng) - 0.025f;
  // qa: int8 values (-127..127) in int16, zero past k; sums per block.
  std::vector<int16_t> qa(static_cast<size_t>(m * kp), 0);
  std::vector<int32_t> asum(static_cast<size_t>(m * blocks), 0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t k = 0; k < g.k; ++k) {
      const int v = static_cast<int>(rng() % 255) - 127;
      qa[static_cast<size_t>(r * kp + k)] = static_cast<int16_t>(v);
      asum[static_cast<size_t>(r * blocks + k / g.block_size)] += v;
    }
  const uint8_t* zpp = with_zp ? zp.data() : nullptr;
  const float* bp = with_bias ? bias.data() : nullptr;
  const PackedNBits packed = PackNBits(g, b.data(), scales.data(), zpp);
  const std::vector<float> want = NBitsI8Reference(g, m, qa, as, asum, b, scales, zpp, bp, ldy);
  const std::vector<NBitsI8Variant> variants = NBitsI8VariantsForTesting(target);
  ASSERT_FALSE(variants.empty()) << TargetName(target);
  std::vector<float> first;
  for (const NBitsI8Variant& var : variants) {
    std::vector<float> got(static_cast<size_t>(m * ldy), kSentinel);
    // Two work ranges split at a panel boundary.
    const int64_t panels = NBitsPanels(g), split = panels / 2;
    for (auto [p0, p1] : {std::pair<int64_t, int64_t>{0, split}, {split, panels}})
      var.fn(g, m, qa.data(), as.data(), asum.data(), packed.weights.data(), packed.scales.data(),
             packed.zero_points.data(), bp, got.data(), ldy, p0, p1);
    char what[220];
    std::snprintf(what, sizeof(what), "%s/%s gemm_nbits_i8 bits %lld block %lld m %lld k %lld n %lld zp %d bias %d",
                  TargetName(target), var.dot, (long long)g.bits, (long long)g.block_size, (long long)m,
                  (long long)g.k, (long long)g.n, with_zp, with_bias);
    // Inexact: FMA targets round the per-block sums once where the reference
    // rounds twice, so the tolerance is relative to the outputs' magnitude.
    float peak = 1.0f;
    for (float x : want) peak = std::max(peak, std::fabs(x));
    const float tol = exact ? 0.0f : 1e-5f * peak;
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - want[i]) <= tol);  // sentinels included
    EXPECT_EQ(bad, 0) << what << (exact ? ": differs from the exact integer reference" : ": beyond tolerance");
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
          << what << ": not bit-identical to " << variants.front().dot;
    }
  }
}

// Non-finite activations (a fuzzed file's weights can make them): the
// quantizer never converts them to int (undefined behaviour), and every
// variant's output for the rows they are in is NaN, the others unchanged.
TEST_P(KernelTest, GemmNBitsI8NonFiniteActivations) {
  NBitsGeom g;
  g.bits = 4;
  g.block_size = 32;
  g.k = 80;  // three blocks, the last partial
  g.n = 20;
  const int64_t m = 4, blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(m * g.k));
  for (auto& x : a) x = u(rng);
  a[static_cast<size_t>(0 * g.k + 5)] = std::numeric_limits<float>::quiet_NaN();
  a[static_cast<size_t>(1 * g.k + 40)] = std::numeric_limits<float>::infinity();
  a[static_cast<size_t>(2 * g.k + 79)] = -std::numeric_limits<float>::infinity();
  // Row 3 finite, its middle block subnormal (no finite inverse scale: zero codes).
  for (int64_t k = 32; k < 64; ++k) a[static_cast<size_t>(3 * g.k + k)] = (k % 3 - 1) * 1e-39f;
  std::vector<int16_t> qa(static_cast<size_t>(m * kp), 99);
  std::vector<float> as(static_cast<size_t>(m * blocks));
  std::vector<int32_t> asum(static_cast<size_t>(m * blocks));
  QuantizeBlocksI8(g, a.data(), m, qa.data(), as.data(), asum.data());
  const int64_t poisoned[3] = {0, 1, 2};  // the block of each bad value
  for (int64_t r = 0; r < 3; ++r) {
    const int64_t b = poisoned[r];
    EXPECT_TRUE(std::isnan(as[static_cast<size_t>(r * blocks + b)])) << "row " << r << " block " << b;
    EXPECT_EQ(asum[static_cast<size_t>(r * blocks + b)], 0);
    for (int64_t k = b * g.block_size; k < (b + 1) * g.block_size; ++k)
      EXPECT_EQ(qa[static_cast<size_t>(r * kp + k)], 0) << "row " << r << " k " << k;
  }
  for (int64_t b = 0; b < blocks; ++b) EXPECT_TRUE(std::isfinite(as[static_cast<size_t>(3 * blocks + b)]));
  for (int64_t k = 32; k < 64; ++k) EXPECT_EQ(qa[static_cast<size_t>(3 * kp + k)], 0) << "subnormal k " << k;
  EXPECT_EQ(asum[static_cast<size_t>(3 * blocks + 1)], 0);
  std::vector<uint8_t> w(static_cast<size_t>(g.n * kp * g.bits / 8));
  for (auto& x : w) x = static_cast<uint8_t>(rng());
  std::vector<float> scales(static_cast<size_t>(g.n * blocks), 0.01f);
  const PackedNBits packed = PackNBits(g, w.data(), scales.data(), nullptr);
  for (const NBitsI8Variant& var : NBitsI8VariantsForTesting(GetParam())) {
    std::vector<float> y(static_cast<size_t>(m * g.n), kSentinel);
    var.fn(g, m, qa.data(), as.data(), asum.data(), packed.weights.data(), packed.scales.data(),
           packed.zero_points.data(), nullptr, y.data(), g.n, 0, NBitsPanels(g));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < g.n; ++c) {
        const float v = y[static_cast<size_t>(r * g.n + c)];
        if (r < 3)
          EXPECT_TRUE(std::isnan(v)) << TargetName(GetParam()) << "/" << var.dot << " row " << r << " col " << c;
        else
          EXPECT_TRUE(std::isfinite(v) && v != kSentinel) << var.dot << " row 3 col " << c;
      }
  }
}

TEST_P(KernelTest, GemmNBitsI8) {
  // The VNNI codes are there where the host has them (so the loop below runs them).
  const HostFeatures& f = DetectHost();
  const std::vector<NBitsI8Variant> variants = NBitsI8VariantsForTesting(GetParam());
  ASSERT_FALSE(variants.empty());
  std::string have;
  for (const NBitsI8Variant& v : variants) have += std::string(v.dot) + " ";
  if (GetParam() == TargetId::kX86_64_V4 && f.avx512vnni && f.os_avx512)
    EXPECT_EQ(std::string(variants.front().dot), f.avx512vbmi ? "avx512vnni+vbmi" : "avx512vnni") << have;
  if (GetParam() == TargetId::kX86_64_V3 && f.avxvnni && f.os_avx)
    EXPECT_EQ(std::string(variants.front().dot), "avxvnni") << have;
  EXPECT_EQ(std::string(variants.back().dot), "portable") << have;
  std::mt19937 rng(1234);
  const int64_t block_sizes[] = {16, 32, 64, 128, 256};
  int i = 0;
  for (int64_t m = 1; m <= 40; ++m) {
    NBitsGeom g;
    g.bits = m % 3 == 0 ? 8 : 4;
    g.block_size = block_sizes[rng() % 5];
    g.k = 1 + static_cast<int64_t>(rng() % 500);
    g.n = 1 + static_cast<int64_t>(rng() % 70);
    RunNBitsI8(GetParam(), g, m, i % 2 == 0, i % 4 < 2, i % 3 == 0, 900 + i);
    ++i;
  }
  // Many rows (more than one chunk of rows), k not a multiple of the block,
  // partial panels.
  for (auto [m, k, n, bits, block] : {std::array<int64_t, 5>{130, 300, 50, 4, 32}, {37, 576, 33, 4, 128},
                                      {67, 200, 17, 8, 64}, {96, 100, 16, 4, 16}, {33, 700, 40, 8, 256}}) {
    NBitsGeom g;
    g.k = k;
    g.n = n;
    g.bits = bits;
    g.block_size = block;
    RunNBitsI8(GetParam(), g, m, i % 2 == 0, true, false, 900 + i);
    RunNBitsI8(GetParam(), g, m, i % 2 == 1, false, k <= 512, 950 + i);
    ++i;
  }
}

TEST(KernelTableTest, EachTargetHasItsOwnCode) {
#if defined(__x86_64__)
  constexpr TargetArch kHere = TargetArch::kX86_64;
#elif defined(__aarch64__)
  constexpr TargetArch kHere = TargetArch::kAArch64;
#else
  constexpr TargetArch kHere = TargetArch::kAny;
#endif
  const int bits = DetectHost().sve_bits;
  for (const CodeRow& r : kCodeRows) {
    const KernelTable& t = GetKernelTable(r.id);
    const bool sve = TargetInfoOf(r.id).sve_lengths != 0;
    if ((r.arch != TargetArch::kAny && r.arch != kHere) || (sve && !SveTargetHasLength(r.id, bits))) {
      EXPECT_STREQ(t.isa, "unavailable") << TargetName(r.id);
      continue;
    }
    // The Highway target the row names; an SVE target's code is the one for
    // this thread's vector length, and Highway has targets of their own for
    // two (family, length) pairs.
    const std::map<std::pair<std::string, int>, std::string> kByLength = {{{"SVE", 256}, "SVE_256"},
                                                                          {{"SVE2", 128}, "SVE2_128"}};
    const auto sized = kByLength.find({r.hwy, bits});
    EXPECT_EQ(std::string(t.isa), sized == kByLength.end() ? std::string(r.hwy) : sized->second) << TargetName(r.id);
  }
  // Two targets share functions exactly when both are the same pass of
  // kernels_hwy.cc; a row with a variant is a compilation of its own (e.g.
  // armv8.2-a: NEON again, with FP16 and dot product enabled).
  int compared = 0;
  for (const CodeRow& a : kCodeRows)
    for (const CodeRow& b : kCodeRows) {
      const KernelTable &ta = GetKernelTable(a.id), &tb = GetKernelTable(b.id);
      if (a.id >= b.id || ta.conv == nullptr || tb.conv == nullptr) continue;
      const bool same_pass = !a.variant && !b.variant && std::string(a.hwy) == b.hwy;
      EXPECT_EQ(ta.conv == tb.conv, same_pass) << TargetName(a.id) << " and " << TargetName(b.id);
      EXPECT_EQ(ta.gemm == tb.gemm, same_pass) << TargetName(a.id) << " and " << TargetName(b.id);
      ++compared;
    }
  EXPECT_GT(compared, 0) << "no two targets of this build have code";
}

TEST(KernelTableTest, RunnableTargetsHaveCode) {
  for (TargetId t : RunnableHere()) EXPECT_STRNE(GetKernelTable(t).isa, "unavailable") << TargetName(t);
}

TEST(KernelTableTest, TestsCoverEveryTargetOnThisHost) {
  // Every target of this host's architecture must have run the tests above:
  // on x86-64 that needs AVX-512 (the project's development machines have
  // it), on AArch64 qemu's `max` CPU (SVE2, the default 512-bit vectors).
  size_t ours = 0;
  for (const auto& t : KnownTargets()) {
#if defined(__x86_64__)
    ours += t.arch != TargetArch::kAArch64;
#elif defined(__aarch64__)
    ours += t.arch != TargetArch::kX86_64;
#endif
  }
  std::string missing;
  for (const auto& t : KnownTargets())
    if (!HostCanRun(t.id) && !WhyHostCannotRun(DetectHost(), t.id).starts_with("it holds"))
      missing += std::string(" ") + t.name + " (" + WhyHostCannotRun(DetectHost(), t.id) + ")";
  EXPECT_EQ(RunnableHere().size(), ours) << "targets of this architecture the tests did not exercise:" << missing;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(AllTargets, KernelTest, ::testing::ValuesIn(RunnableHere()),
                         [](const ::testing::TestParamInfo<TargetId>& info) { return test_support::TargetTestName(info.param); });

}  // namespace fcb::kernels
