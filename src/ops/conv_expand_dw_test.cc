// ConvExpandDwNhwc (internal/conv_expand_dw.cc): a 1x1 ConvNhwc feeding a depthwise ConvNhwc, run
// in bands without the intermediate tensor. On every runnable target and with
// 1, 2 and 3 threads it must match the two ConvNhwc steps run one after the
// other, for geometries that cut the map into many bands (wide rows), that
// carry rows from band to band (stride 1, 3x3 and 5x5), that skip rows
// (stride 2), with padding wider than the reach, a batch of 2, activations
// on both halves and, on few rows with many channels, slices of the channels
// per thread; and its shape inference must refuse what the kernel cannot
// run, since it also checks untrusted files at load.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/packing.h"
#include "ops/ops_test_util.h"

namespace fcb::ops {
namespace {

using namespace fcb::ops::testing;  // NOLINT

struct Case {
  int64_t n, h, w, c, e, k, stride, pad, dil;
};

// The depthwise half's attributes (those of a depthwise ConvNhwc); the fused
// op takes the same plus expand_activation.
internal::ConvParams DwParams(const Case& t, kernels::Act act) {
  internal::ConvParams p;
  p.kernel = {t.k, t.k}, p.strides = {t.stride, t.stride}, p.dilations = {t.dil, t.dil};
  p.pads = {t.pad, t.pad, t.pad, t.pad};
  p.group = t.e, p.out_channels = t.e, p.depthwise = 1;
  p.ep = {act, 0.f, 6.f};
  return p;
}
A DwAttrs(const Case& t, kernels::Act act) { return A(EncodeParams(DwParams(t, act))); }
// The fused op's: the depthwise half's plus the 1x1 conv's activation.
A FusedAttrs(const Case& t, kernels::Act act, int64_t expand_act) {
  return DwAttrs(t, act)
      .I(attr::kExpandActivation, expand_act)
      .F(attr::kExpandActivationAlpha, 0.f)
      .F(attr::kExpandActivationBeta, 0.f);
}

class ConvExpandDwOnTarget : public fcb::testing::PerTarget {};
FCB_INSTANTIATE_PER_TARGET(ConvExpandDwOnTarget, fcb::testing::LayerTargets());

TEST_P(ConvExpandDwOnTarget, MatchesTheTwoConvs) {
  const std::vector<Case> cases = {
      {1, 9, 7, 5, 24, 3, 1, 1, 1},      // small: one band
      {2, 13, 11, 8, 40, 3, 2, 1, 1},    // stride 2, batch 2
      {1, 37, 150, 16, 96, 3, 1, 1, 1},  // wide rows: many bands, rows carried over
      {1, 30, 131, 24, 144, 5, 2, 2, 1}, // 5x5 stride 2 (EfficientNet)
      {1, 12, 20, 6, 33, 3, 1, 3, 2},    // dilation 2, padding beyond the reach
      // Few rows, many channels: at 2 and 3 threads the channels are split
      // (slices of 32, the last one partial: 200 = 6 x 32 + 8).
      {1, 7, 9, 24, 200, 3, 1, 1, 1},
      {1, 14, 14, 40, 240, 5, 2, 2, 1},
      {2, 4, 6, 16, 224, 3, 1, 1, 1},
  };
  const int64_t silu = static_cast<int64_t>(kernels::Act::kSilu);
  const kernels::Act clip = kernels::Act::kClip;
  uint32_t seed = 1;
  for (const Case& t : cases) {
    const std::string what = "case " + std::to_string(t.h) + "x" + std::to_string(t.w) + "x" +
                             std::to_string(t.c) + "->" + std::to_string(t.e) + " k" +
                             std::to_string(t.k) + " s" + std::to_string(t.stride);
    auto x = F32({t.n, t.h, t.w, t.c}, Rand(t.n * t.h * t.w * t.c, seed++));
    const auto w1 = Rand(t.e * t.c, seed++, -0.5f, 0.5f), b1 = Rand(t.e, seed++);
    const auto w2 = Rand(t.e * t.k * t.k, seed++, -0.5f, 0.5f), b2 = Rand(t.e, seed++);
    const auto pw1 = kernels::PackConv(w1.data(), t.e, t.c, 1, 1, 1);
    const auto pb1 = kernels::PackConvBias(b1.data(), t.e, 1);
    const auto pw2 = kernels::PackDepthwise(w2.data(), t.e, t.k, t.k);
    const auto pb2 = kernels::PackDepthwiseBias(b2.data(), t.e);
    auto W1 = F32({static_cast<int64_t>(pw1.size())}, pw1), B1 = F32({static_cast<int64_t>(pb1.size())}, pb1);
    auto W2 = F32({static_cast<int64_t>(pw2.size())}, pw2), B2 = F32({static_cast<int64_t>(pb2.size())}, pb2);
    internal::ConvParams ep;
    ep.out_channels = t.e;
    ep.ep.act = kernels::Act::kSilu;
    const Attrs expand = A(EncodeParams(ep));
    const Attrs dw = DwAttrs(t, clip);
    const Attrs fused = FusedAttrs(t, clip, silu);
    const auto& table = kernels::GetKernelTable(target_id());
    auto mid = RunWith(opname::ConvNhwc, expand, {x, W1, B1}, 1, table, 1);
    ASSERT_TRUE(mid.ok()) << mid.status().message();
    auto want = RunWith(opname::ConvNhwc, dw, {mid.value()[0], W2, B2}, 1, table, 1);
    ASSERT_TRUE(want.ok()) << want.status().message();
    for (int threads : {1, 2, 3}) {
      auto got = RunWith(opname::ConvExpandDwNhwc, fused, {x, W1, B1, W2, B2}, 1, table, threads);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_TRUE(Same(*got.value()[0], *want.value()[0], 1e-5)) << what << ", threads " << threads;
    }
  }
}

TEST(ConvExpandDwNhwc, InferenceRefusesWhatTheKernelCannotRun) {
  const Case t{1, 8, 8, 4, 32, 3, 1, 1, 1};
  auto Z = [](Shape s) { return ir::TensorData::Make(DType::kF32, std::move(s)); };
  auto x = Z({1, 8, 8, 4});
  auto w1 = Z({kernels::PackedConvFloats(32, 4, 1, 1, 1)}), b1 = Z({32});
  auto w2 = Z({9 * 32}), b2 = Z({32});
  auto infer = [](const Attrs& a, std::vector<TensorPtr> in) {
    return InferOnly(opname::ConvExpandDwNhwc, a, in);
  };
  EXPECT_TRUE(infer(FusedAttrs(t, kernels::Act::kNone, 0), {x, w1, b1, w2, b2}).ok());
  EXPECT_REFUSED(infer(FusedAttrs(t, kernels::Act::kNone, 0), {x, Z({7}), b1, w2, b2}), StatusCode::kInvalidArgument, "packed 1x1 weights have shape 7, expected") << "1x1 weight size";
  EXPECT_REFUSED(infer(FusedAttrs(t, kernels::Act::kNone, 0), {x, w1, Z({31}), w2, b2}), StatusCode::kInvalidArgument, "packed 1x1 bias have shape 31, expected") << "1x1 bias size";
  EXPECT_REFUSED(infer(FusedAttrs(t, kernels::Act::kNone, 0), {x, w1, b1, Z({10}), b2}), StatusCode::kInvalidArgument, "packed depthwise weights have shape 10, expected") << "depthwise weight size";
  EXPECT_REFUSED(infer(FusedAttrs(t, kernels::Act::kNone, 0), {x, w1, b1, w2}), StatusCode::kInvalidArgument, "ConvExpandDwNhwc takes 5 to 5 inputs, got 4") << "four inputs";
  EXPECT_REFUSED(infer(FusedAttrs(t, kernels::Act::kNone, 0), {Z({1, 8, 8}), w1, b1, w2, b2}), StatusCode::kInvalidArgument, "input must have rank 4, got shape 1x8x8") << "rank 3";
  const Attrs bad_act = FusedAttrs(t, kernels::Act::kNone, 99);
  EXPECT_REFUSED(infer(bad_act, {x, w1, b1, w2, b2}), StatusCode::kInvalidArgument, "attribute 'expand_activation' is 99, outside [0, 9]") << "expand_activation code";
  // Rows too wide for the band buffer (3 rows of 4096 x 32 floats).
  auto wide = Z({1, 8, 4096, 4});
  EXPECT_REFUSED(infer(FusedAttrs(t, kernels::Act::kNone, 0), {wide, w1, b1, w2, b2}), StatusCode::kInvalidArgument, "3 rows of 131072 floats exceed the band buffer") << "rows beyond the band buffer";
}


// Output channel slices (out_channel_offset / out_pixel_channels, set by the
// lowering on a Concat's producers): ConvNhwc in each of its packings (dense,
// grouped, depthwise, small groups) and ConvWinogradNhwc write exactly the
// dense conv's values into channels [offset, offset + oc) of every pixel of
// the wider tensor, with and without a residual (which keeps its own dense
// stride), leave the other channels alone, on every target and at 1 and 2
// threads; shape inference refuses slices that do not fit.
struct SliceCase {
  const char* what;
  int64_t h, w, c, oc, k, group, depthwise;  // depthwise: the packing, as ConvParams
  bool winograd;
};

class ConvOutputSliceOnTarget : public fcb::testing::PerTarget {};
FCB_INSTANTIATE_PER_TARGET(ConvOutputSliceOnTarget, fcb::testing::LayerTargets());

TEST_P(ConvOutputSliceOnTarget, WritesTheDenseResultIntoItsChannels) {
  const std::vector<SliceCase> cases = {
      {"pointwise", 6, 7, 12, 20, 1, 1, 0, false},
      {"3x3 dense", 5, 9, 7, 33, 3, 1, 0, false},
      {"3x3 grouped", 5, 6, 8, 12, 3, 2, 0, false},
      {"one channel per group", 6, 5, 24, 24, 3, 24, 1, false},
      {"small groups", 5, 7, 16, 16, 3, 4, 2, false},
      {"winograd", 12, 13, 16, 24, 3, 1, 0, true},
  };
  uint32_t seed = 50;
  for (const SliceCase& t : cases) {
    const int64_t icg = t.c / t.group;
    auto x = F32({1, t.h, t.w, t.c}, Rand(t.h * t.w * t.c, seed++));
    const auto wt = Rand(t.oc * icg * t.k * t.k, seed++, -0.5f, 0.5f), bt = Rand(t.oc, seed++);
    const std::vector<float> pw =
        t.winograd         ? kernels::PackWinograd(wt.data(), t.oc, t.c)
        : t.depthwise == 1 ? kernels::PackDepthwise(wt.data(), t.oc, t.k, t.k)
        : t.depthwise == 2 ? kernels::PackGroupedSmall(wt.data(), t.oc, icg, t.k, t.k)
                           : kernels::PackConv(wt.data(), t.oc, icg, t.k, t.k, t.group);
    const std::vector<float> pb = t.depthwise ? kernels::PackDepthwiseBias(bt.data(), t.oc)
                                              : kernels::PackConvBias(bt.data(), t.oc, t.group);
    auto W = F32({static_cast<int64_t>(pw.size())}, pw), B = F32({static_cast<int64_t>(pb.size())}, pb);
    auto R = F32({1, t.h, t.w, t.oc}, Rand(t.h * t.w * t.oc, seed++));
    internal::ConvParams p;
    p.kernel = {t.k, t.k}, p.strides = {1, 1}, p.dilations = {1, 1};
    const int64_t pad = t.k / 2;
    p.pads = {pad, pad, pad, pad};
    p.group = t.group, p.out_channels = t.oc, p.depthwise = t.depthwise;
    p.ep = {kernels::Act::kRelu, 0.f, 0.f};
    const std::string op(t.winograd ? opname::ConvWinogradNhwc : opname::ConvNhwc);
    const int64_t offset = 5, channels = t.oc + 9;
    const Attrs dense = A(EncodeParams(p));
    const Attrs slice = A(EncodeParams(p)).I(attr::kOutChannelOffset, offset).I(attr::kOutPixelChannels, channels);
    for (bool residual : {false, true}) {
      std::vector<TensorPtr> in = {x, W, B};
      if (residual) in.push_back(R);
      const auto& table = kernels::GetKernelTable(target_id());
      auto want = RunWith(op, dense, in, 1, table, 1);
      ASSERT_TRUE(want.ok()) << t.what << ": " << want.status().message();
      for (int threads : {1, 2}) {
        auto got = RunWith(op, slice, in, 1, table, threads);
        ASSERT_TRUE(got.ok()) << t.what << ": " << got.status().message();
        const ir::TensorData& g = *got.value()[0];
        ASSERT_EQ(g.shape, (Shape{1, t.h, t.w, channels})) << t.what;
        const float* gp = g.data<float>();
        const float* wp = want.value()[0]->data<float>();
        int bad = 0;
        uint32_t untouched;
        std::memset(&untouched, 0xA5, sizeof(untouched));
        for (int64_t px = 0; px < t.h * t.w && bad < 5; ++px)
          for (int64_t ch = 0; ch < channels; ++ch) {
            const float v = gp[px * channels + ch];
            if (ch >= offset && ch < offset + t.oc) {
              const float e = wp[px * t.oc + ch - offset];
              if (!(std::fabs(v - e) <= 1e-5f * (1 + std::fabs(e))))
                ADD_FAILURE() << t.what << " " << target_name() << " threads " << threads << " residual " << residual
                              << ": pixel " << px << " channel " << ch << " is " << v << ", want " << e, ++bad;
            } else {
              uint32_t bits;
              std::memcpy(&bits, &v, sizeof(bits));
              if (bits != untouched)
                ADD_FAILURE() << t.what << " " << target_name() << ": channel " << ch << " of pixel " << px
                              << " outside the slice was written", ++bad;
            }
          }
      }
    }
    // The slice must lie within the output's channels, and both attributes come together.
    EXPECT_REFUSED(InferOnly(op, A(EncodeParams(p)).I(attr::kOutChannelOffset, 10).I(attr::kOutPixelChannels, t.oc + 9), {x, W, B}), StatusCode::kInvalidArgument, "do not lie within the output's") << t.what;
    EXPECT_REFUSED(InferOnly(op, A(EncodeParams(p)).I(attr::kOutChannelOffset, -1).I(attr::kOutPixelChannels, t.oc + 9), {x, W, B}), StatusCode::kInvalidArgument, "do not lie within the output's") << t.what;
    EXPECT_REFUSED(InferOnly(op, A(EncodeParams(p)).I(attr::kOutChannelOffset, 0), {x, W, B}), StatusCode::kInvalidArgument, "attributes 'out_channel_offset' and 'out_pixel_channels' come together") << t.what;
    EXPECT_REFUSED(InferOnly(op, A(EncodeParams(p)).I(attr::kOutPixelChannels, t.oc + 9), {x, W, B}), StatusCode::kInvalidArgument, "attributes 'out_channel_offset' and 'out_pixel_channels' come together") << t.what;
    EXPECT_TRUE(InferOnly(op, A(EncodeParams(p)).I(attr::kOutChannelOffset, 9).I(attr::kOutPixelChannels, t.oc + 9), {x, W, B}).ok()) << t.what;
  }
}

}  // namespace
}  // namespace fcb::ops
