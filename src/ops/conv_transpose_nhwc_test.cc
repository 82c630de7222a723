// ConvTransposeNhwc (internal/conv_transpose_nhwc.cc) against the reference
// ONNX ConvTranspose kernel (conv_ref.cc, NCHW, scalar: an independent
// path), on every runnable target and with 1 and 3 threads, over strides,
// dilations, pads, output_padding, groups and channel counts that are not
// multiples of 16; and its shape inference refusing what it cannot run.

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "ops/conv_ref.h"
#include "ops/ops_test_util.h"

namespace fcb::ops {
namespace {

using namespace fcb::ops::testing;  // NOLINT

struct Case {
  int64_t n, ic, ih, iw, ocg, group, kh, kw, sh, sw, dh, dw;
  std::vector<int64_t> pads;      // ONNX order: begins then ends
  std::vector<int64_t> out_pad;   // output_padding
};

std::vector<float> NchwToNhwc(const std::vector<float>& v, int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<float> out(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) out[((b * h + y) * w + x) * c + ch] = v[((b * c + ch) * h + y) * w + x];
  return out;
}

Attrs OnnxAttrs(const Case& t) {
  return A()
      .Is("kernel_shape", {t.kh, t.kw})
      .Is("strides", {t.sh, t.sw})
      .Is("dilations", {t.dh, t.dw})
      .Is("pads", t.pads)
      .Is("output_padding", t.out_pad)
      .I("group", t.group);
}

Attrs NhwcAttrs(const ConvTranspose2d& g, int64_t group, int64_t oc, kernels::Act act = kernels::Act::kNone) {
  return A()
      .Is(attr::kKernelShape, {g.kh, g.kw})
      .Is(attr::kStrides, {g.sh, g.sw})
      .Is(attr::kDilations, {g.dh, g.dw})
      .Is(attr::kPads, {g.pad_t, g.pad_l, g.pad_b, g.pad_r})
      .I(attr::kGroup, group)
      .I(attr::kOutChannels, oc)
      .I(attr::kActivation, static_cast<int64_t>(act))
      .F(attr::kActivationAlpha, 0.f)
      .F(attr::kActivationBeta, 0.f);
}

class ConvTransposeNhwcOnTarget : public fcb::testing::PerTarget {};
FCB_INSTANTIATE_PER_TARGET(ConvTransposeNhwcOnTarget, fcb::testing::LayerTargets());

TEST_P(ConvTransposeNhwcOnTarget, MatchesTheReference) {
  const std::vector<Case> cases = {
      {1, 8, 5, 6, 12, 1, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {1, 1}},    // 2x upsampling, output_padding
      {2, 20, 4, 3, 17, 1, 4, 4, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0}},   // batch 2, 17 channels (2 blocks)
      {1, 6, 7, 5, 5, 3, 3, 2, 1, 2, 2, 1, {0, 1, 2, 0}, {0, 1}},     // groups, dilation, uneven pads
      {1, 4, 3, 3, 40, 2, 2, 2, 3, 3, 1, 1, {0, 0, 0, 0}, {2, 1}},    // stride > kernel: gaps
      {1, 33, 9, 9, 3, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, {0, 0}},    // 1x1: a plain GEMM
  };
  uint32_t seed = 1;
  for (const Case& t : cases) {
    const int64_t oc = t.ocg * t.group;
    const auto xv = Rand(t.n * t.ic * t.ih * t.iw, seed++);
    const auto wv = Rand(t.ic * t.ocg * t.kh * t.kw, seed++, -0.5f, 0.5f);
    const auto bv = Rand(oc, seed++);
    auto x = F32({t.n, t.ic, t.ih, t.iw}, xv);
    auto w = F32({t.ic, t.ocg, t.kh, t.kw}, wv);
    auto b = F32({oc}, bv);
    auto want = RunWith("ConvTranspose", OnnxAttrs(t), {x, w, b}, 1, kernels::GetKernelTable(TargetId::kGeneric), 1);
    ASSERT_TRUE(want.ok()) << want.status().message();
    const ir::Shape ys = want.value()[0]->shape;  // NCHW
    auto geom = ResolveConvTranspose2d(OnnxAttrs(t), x->shape, w->shape);
    ASSERT_TRUE(geom.ok()) << geom.status().message();
    ASSERT_EQ(geom.value().oh, ys[2]);
    ASSERT_EQ(geom.value().ow, ys[3]);
    const auto want_nhwc = F32({ys[0], ys[2], ys[3], ys[1]}, NchwToNhwc(Values<float>(*want.value()[0]), ys[0], ys[1], ys[2], ys[3]));
    const auto packed = internal::PackConvTranspose(wv.data(), t.ic, t.ocg, t.kh, t.kw, t.group);
    const std::vector<TensorPtr> in = {F32({t.n, t.ih, t.iw, t.ic}, NchwToNhwc(xv, t.n, t.ic, t.ih, t.iw)),
                                       F32({static_cast<int64_t>(packed.size())}, packed), b};
    const Attrs attrs = NhwcAttrs(geom.value(), t.group, oc);
    for (int threads : {1, 3}) {
      auto got = RunWith(opname::ConvTransposeNhwc, attrs, in, 1, kernels::GetKernelTable(target_id()), threads);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_TRUE(Same(*got.value()[0], *want_nhwc, 1e-4))
          << "threads " << threads << ", ic " << t.ic << " ocg " << t.ocg << " group " << t.group;
    }
  }
}

TEST(ConvTransposeNhwc, FusedActivationMatchesReluAfterwards) {
  const Case t{1, 8, 4, 4, 16, 1, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {1, 1}};
  const auto xv = Rand(t.ic * t.ih * t.iw, 7), wv = Rand(t.ic * t.ocg * 9, 8, -0.5f, 0.5f), bv = Rand(t.ocg, 9);
  auto geom = ResolveConvTranspose2d(OnnxAttrs(t), {1, t.ic, t.ih, t.iw}, {t.ic, t.ocg, 3, 3});
  ASSERT_TRUE(geom.ok());
  const auto packed = internal::PackConvTranspose(wv.data(), t.ic, t.ocg, 3, 3, 1);
  const std::vector<TensorPtr> in = {F32({1, t.ih, t.iw, t.ic}, NchwToNhwc(xv, 1, t.ic, t.ih, t.iw)),
                                     F32({static_cast<int64_t>(packed.size())}, packed), F32({t.ocg}, bv)};
  const auto& table = kernels::GetKernelTable(TargetId::kGeneric);
  auto plain = RunWith(opname::ConvTransposeNhwc, NhwcAttrs(geom.value(), 1, t.ocg), in, 1, table, 1);
  auto relu = RunWith(opname::ConvTransposeNhwc, NhwcAttrs(geom.value(), 1, t.ocg, kernels::Act::kRelu), in, 1, table, 1);
  ASSERT_TRUE(plain.ok() && relu.ok());
  std::vector<float> want = Values<float>(*plain.value()[0]);
  for (float& v : want) v = std::max(v, 0.f);
  EXPECT_TRUE(Same(*relu.value()[0], *F32(plain.value()[0]->shape, want), 0));
}

TEST(ConvTransposeNhwc, InferenceRefusesWhatTheKernelCannotRun) {
  ConvTranspose2d g{3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0};
  auto Z = [](Shape s) { return ir::TensorData::Make(DType::kF32, std::move(s)); };
  const int64_t ic = 8, oc = 12;
  const auto x = Z({1, 5, 5, ic});
  const auto w = Z({static_cast<int64_t>(internal::PackConvTranspose(std::vector<float>(ic * oc * 9).data(), ic, oc, 3, 3, 1).size())});
  const auto b = Z({oc});
  auto infer = [](const Attrs& a, std::vector<TensorPtr> in) { return InferOnly(opname::ConvTransposeNhwc, a, in); };
  EXPECT_TRUE(infer(NhwcAttrs(g, 1, oc), {x, w, b}).ok());
  EXPECT_REFUSED(infer(NhwcAttrs(g, 1, oc), {x, Z({7}), b}), StatusCode::kInvalidArgument, "packed weights have shape 7, expected") << "weight size";
  EXPECT_REFUSED(infer(NhwcAttrs(g, 1, oc), {x, w, Z({oc + 1})}), StatusCode::kInvalidArgument, "bias have shape 13, expected") << "bias size";
  EXPECT_REFUSED(infer(NhwcAttrs(g, 5, oc), {x, w, b}), StatusCode::kInvalidArgument, "group 5 must divide input channels 8 and output channels 12") << "group does not divide";
  EXPECT_REFUSED(infer(NhwcAttrs(g, 1, oc), {Z({1, 5, 5}), w, b}), StatusCode::kInvalidArgument, "input must have rank 4, got shape 1x5x5") << "rank 3";
  ConvTranspose2d empty = g;
  empty.pad_t = empty.pad_b = 20;
  EXPECT_REFUSED(infer(NhwcAttrs(empty, 1, oc), {x, w, b}), StatusCode::kInvalidArgument, "the pads leave no output (or too large a one)") << "pads leave no output";
  ConvTranspose2d huge = g;
  huge.kh = huge.kw = 64;
  EXPECT_REFUSED(infer(NhwcAttrs(huge, 1, oc), {x, w, b}), StatusCode::kInvalidArgument, "a 64x64 kernel exceeds the column buffer") << "kernel beyond the column buffer";
}

}  // namespace
}  // namespace fcb::ops
