// The int8 kernels of every target this host runs, with every dot-product
// code it can run for that target (VNNI and the portable one), against a
// plain scalar evaluation of the definition in int8.h: exact for integer
// outputs, on shapes that reach the edges (partial panels, reduction lengths
// that are not a multiple of 4, padding, strides, groups, signed and
// unsigned operands, nonzero weight zero points, split work ranges).
#include "kernels/int8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"
#include "kernels/bundle.h"
#include "kernels/kernels_reference.h"

namespace fcb::kernels {
namespace {

struct Case {
  int64_t n = 1, ih = 5, iw = 6, ic = 8, oc = 20, kh = 3, kw = 3, sh = 1, sw = 1, pad = 1, dil = 1, groups = 1;
  bool x_signed = false, w_unsigned = false, w_zp = false, depthwise = false;
  QOut out = QOut::kInt32;
  Act act = Act::kNone;
};

std::string Name(const Case& c) {
  return "n" + std::to_string(c.n) + " " + std::to_string(c.ih) + "x" + std::to_string(c.iw) + "x" +
         std::to_string(c.ic) + " -> oc " + std::to_string(c.oc) + " k" + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " s" + std::to_string(c.sh) + " pad" + std::to_string(c.pad) + " g" +
         std::to_string(c.groups) + (c.x_signed ? " x:s8" : " x:u8") + (c.w_unsigned ? " w:u8" : " w:s8") +
         (c.w_zp ? " wzp" : "") + (c.depthwise ? " dw" : "") + " out" + std::to_string(static_cast<int>(c.out));
}

float RoundHalfEven(float v) {
  float r = std::round(v);
  if (std::fabs(r - v) == 0.5f) r = 2.f * std::round(v * 0.5f);
  return r;
}

void RunCase(TargetId target, const QKernelTable& t, const Case& c) {
  SCOPED_TRACE(std::string(TargetName(target)) + " " + t.dot + ": " + Name(c));
  std::mt19937 rng(1234 + static_cast<unsigned>(c.ic * 7 + c.oc));
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t icg = c.ic / c.groups, ocg = c.oc / c.groups;
  ConvGeom g{};
  g.n = c.n, g.ih = c.ih, g.iw = c.iw, g.ic = c.ic, g.oc = c.oc, g.kh = c.kh, g.kw = c.kw;
  g.sh = c.sh, g.sw = c.sw, g.dh = c.dil, g.dw = c.dil, g.pad_top = c.pad, g.pad_left = c.pad, g.groups = c.groups;
  g.oh = (c.ih + 2 * c.pad - (c.kh - 1) * c.dil - 1) / c.sh + 1;
  g.ow = (c.iw + 2 * c.pad - (c.kw - 1) * c.dil - 1) / c.sw + 1;
  g.in_pixel_stride = c.ic, g.out_pixel_stride = c.oc;
  const int64_t pixels = g.n * g.oh * g.ow;

  std::vector<uint8_t> x(static_cast<size_t>(g.n * g.ih * g.iw * g.ic));
  for (auto& v : x) v = static_cast<uint8_t>(byte(rng));
  std::vector<uint8_t> w(static_cast<size_t>(c.oc * icg * c.kh * c.kw));
  for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
  const int32_t x_zp = c.x_signed ? byte(rng) - 128 : byte(rng);
  auto xval = [&](int64_t i) -> int32_t { return c.x_signed ? static_cast<int8_t>(x[i]) : x[i]; };
  auto wval = [&](int64_t i) -> int32_t { return c.w_unsigned ? w[i] : static_cast<int8_t>(w[i]); };
  std::vector<int32_t> wzp(static_cast<size_t>(c.oc), 0);
  if (c.w_zp)
    for (auto& v : wzp) v = c.w_unsigned ? byte(rng) : byte(rng) - 128;
  std::vector<int32_t> bias_i(static_cast<size_t>(c.oc));
  for (auto& v : bias_i) v = byte(rng) * 37 - 4000;
  std::vector<float> mult(static_cast<size_t>(c.oc)), bias_f(static_cast<size_t>(c.oc));
  for (int64_t o = 0; o < c.oc; ++o) mult[o] = 1e-3f * (1 + o % 7), bias_f[o] = 0.01f * (o % 5) - 0.02f;
  const float q_scale = 0.37f;
  const int32_t q_zp = c.out == QOut::kUint8 ? 100 : -5;

  // The reference, straight from the definition.
  const size_t esize = c.out == QOut::kInt32 || c.out == QOut::kFloat ? 4 : 1;
  std::vector<double> want(static_cast<size_t>(pixels * c.oc));
  for (int64_t p = 0; p < pixels; ++p) {
    const int64_t ox = p % g.ow, oy = (p / g.ow) % g.oh, b = p / (g.ow * g.oh);
    for (int64_t o = 0; o < c.oc; ++o) {
      const int64_t gi = o / ocg;
      int32_t s = 0;
      for (int64_t ci = 0; ci < icg; ++ci)
        for (int64_t ky = 0; ky < c.kh; ++ky)
          for (int64_t kx = 0; kx < c.kw; ++kx) {
            const int64_t iy = oy * c.sh - c.pad + ky * c.dil, ix = ox * c.sw - c.pad + kx * c.dil;
            if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) continue;
            const int32_t xv = xval(((b * c.ih + iy) * c.iw + ix) * c.ic + gi * icg + ci);
            const int32_t wv = wval(((o * icg + ci) * c.kh + ky) * c.kw + kx);
            s += (xv - x_zp) * (wv - wzp[o]);
          }
      s += bias_i[o];
      double r = s;
      if (c.out != QOut::kInt32) {
        float v = static_cast<float>(s) * mult[o];
        v = v + bias_f[o];
        if (c.act == Act::kRelu) v = std::max(v, 0.f);
        r = v;
        if (c.out != QOut::kFloat) {
          const float lo = c.out == QOut::kUint8 ? 0.f : -128.f, hi = c.out == QOut::kUint8 ? 255.f : 127.f;
          r = std::min(hi, std::max(lo, RoundHalfEven(v / q_scale) + q_zp));
        }
      }
      want[static_cast<size_t>(p * c.oc + o)] = r;
    }
  }

  // The kernel's operands, as the QConvNhwc step prepares them.
  const int64_t ocp = RoundUpToPanel(ocg), K = c.kh * c.kw * icg;
  const int32_t za = x_zp + (c.x_signed ? 128 : 0);
  std::vector<int8_t> packed;
  std::vector<int32_t> col_add(static_cast<size_t>(c.groups * ocp), 0), bzp(col_add.size(), 0), wzp_dw;
  std::vector<float> mult_p(col_add.size(), 0.f), bias_p(col_add.size(), 0.f);
  if (c.depthwise) {
    packed = PackQDepthwise(w.data(), c.w_unsigned, c.oc, c.kh, c.kw);
    wzp_dw.assign(static_cast<size_t>(RoundUpToPanel(c.oc)), 0);
    for (int64_t o = 0; o < c.oc; ++o) wzp_dw[o] = wzp[o] - (c.w_unsigned ? 128 : 0);
    for (int64_t o = 0; o < c.oc; ++o) col_add[o] = bias_i[o];
  } else {
    packed = PackQConv(w.data(), c.w_unsigned, c.oc, icg, c.kh, c.kw, c.groups);
    ASSERT_EQ(static_cast<int64_t>(packed.size()), PackedQConvBytes(c.oc, icg, c.kh, c.kw, c.groups));
    const std::vector<int32_t> colsum = QPackedColumnSums(packed.data(), K, ocg, c.groups);
    for (int64_t gi = 0; gi < c.groups; ++gi)
      for (int64_t o = 0; o < ocg; ++o) {
        const size_t i = static_cast<size_t>(gi * ocp + o);
        const int32_t zb = wzp[gi * ocg + o] - (c.w_unsigned ? 128 : 0);
        bzp[i] = zb;
        col_add[i] = -za * colsum[i] + static_cast<int32_t>(K) * za * zb + bias_i[gi * ocg + o];
      }
  }
  // Per-column arrays: per group, padded to whole panels (depthwise: one flat row of channels).
  const int64_t gstride = c.depthwise ? 1 : ocp;
  for (int64_t gi = 0; gi < c.groups; ++gi)
    for (int64_t o = 0; o < ocg; ++o) {
      mult_p[gi * gstride + o] = mult[gi * ocg + o];
      bias_p[gi * gstride + o] = bias_f[gi * ocg + o];
    }
  QConvArgs a;
  a.x_zp = x_zp;
  a.x_signed = c.x_signed;
  a.w = packed.data();
  a.ep.out = c.out;
  a.ep.col_add = col_add.data();
  a.ep.b_zp = c.w_zp && !c.depthwise ? bzp.data() : nullptr;
  a.ep.mult = mult_p.data();
  a.ep.bias = bias_p.data();
  a.ep.act = Epilogue{c.act, 0.f, 0.f};
  a.ep.q_scale = q_scale;
  a.ep.q_zp = q_zp;
  std::vector<uint8_t> y(static_cast<size_t>(pixels * c.oc) * esize, 0xAB);
  a.y = y.data();
  std::vector<uint8_t> scratch(static_cast<size_t>(kQScratchBytes) + 64);
  void* sp = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  const int64_t mid = pixels / 2 + 1;
  for (auto [b0, e0] : {std::pair<int64_t, int64_t>{0, mid}, {mid, pixels}}) {
    if (c.depthwise) {
      t.depthwise(g, a, wzp_dw.data(), x.data(), b0, e0, static_cast<int32_t*>(sp));
    } else {
      QConv(t, g, a, x.data(), b0, e0, sp);
    }
  }
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double got;
    switch (c.out) {
      case QOut::kInt32: got = reinterpret_cast<const int32_t*>(y.data())[i]; break;
      case QOut::kFloat: got = reinterpret_cast<const float*>(y.data())[i]; break;
      case QOut::kUint8: got = y[i]; break;
      default: got = static_cast<int8_t>(y[i]); break;
    }
    const double tol = c.out == QOut::kFloat ? 1e-5 * std::max(1.0, std::fabs(want[i])) : 0.0;
    if (std::fabs(got - want[i]) > tol && bad++ < 5)
      ADD_FAILURE() << "output " << i << " (pixel " << i / c.oc << ", channel " << i % c.oc << "): got " << got
                    << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0);
}

std::vector<Case> Cases() {
  std::vector<Case> cs;
  Case base;
  cs.push_back(base);                                         // 3x3 pad 1, 20 channels (partial panel)
  Case c = base;
  c.ic = 5, c.oc = 37, c.sh = c.sw = 2, c.x_signed = true;   // K = 45, three panels, stride 2
  cs.push_back(c);
  c = base;
  c.kh = c.kw = 1, c.pad = 0, c.ic = 16, c.oc = 48, c.ih = 7, c.iw = 9;  // 1x1 read in place
  cs.push_back(c);
  c.ic = 6;                                                    // 1x1 with K % 4 != 0 (copied)
  cs.push_back(c);
  c = base;
  c.groups = 2, c.ic = 12, c.oc = 40, c.w_unsigned = true, c.w_zp = true;  // groups, uint8 weights, zero points
  cs.push_back(c);
  c = base;
  c.w_zp = true, c.x_signed = true, c.dil = 2, c.pad = 2, c.ih = 9, c.iw = 8;  // dilation, s8 x, weight zps
  cs.push_back(c);
  c = base;
  c.n = 2, c.ic = 64, c.oc = 70, c.ih = c.iw = 4;               // two images, K = 576
  cs.push_back(c);
  c = base;
  c.depthwise = true, c.groups = c.ic = c.oc = 24, c.w_zp = true;  // depthwise
  cs.push_back(c);
  c.x_signed = true, c.w_unsigned = true, c.sh = c.sw = 2, c.ic = c.oc = c.groups = 19;
  cs.push_back(c);
  std::vector<Case> all;
  for (const Case& k : cs)
    for (QOut o : {QOut::kInt32, QOut::kFloat, QOut::kUint8, QOut::kInt8}) {
      Case v = k;
      v.out = o;
      if (o != QOut::kInt32) v.act = Act::kRelu;
      all.push_back(v);
    }
  return all;
}

// The int8 tests that run once per target this host runs (each target's
// every dot-product variant, or its bundle's table).
class QKernelsOnTarget : public ::testing::TestWithParam<TargetId> {};

TEST_P(QKernelsOnTarget, EveryDotProductCodeMatchesTheDefinition) {
  const std::vector<QKernelTable> variants = QKernelVariantsForTesting(GetParam());
  ASSERT_FALSE(variants.empty()) << TargetName(GetParam()) << " has no int8 table";
  for (const QKernelTable& t : variants)
    for (const Case& c : Cases()) RunCase(GetParam(), t, c);
}

// The manifest's int8 columns: the Highway target of a row's portable code
// and the host-feature dot-product code beside it.
struct Int8Row {
  TargetId id;
  const char* i8_hwy;
  const char* i8_dot;
};
constexpr Int8Row kInt8Rows[] = {
#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, march, i8_hwy, i8_dot, ...) \
  {TargetId::id, #i8_hwy, #i8_dot},
#include "core/targets.def"
#undef FCB_TARGET
};

TEST(QKernels, DotProductCodeIsChosenWhereTheHostHasIt) {
  const HostFeatures& f = DetectHost();
  for (const Int8Row& r : kInt8Rows) {
    if (!HostCanRun(r.id)) continue;
    const std::string dot = r.i8_dot, hwy = r.i8_hwy;
    std::vector<std::string> want;
    if (dot == "Avx512" && f.avx512vnni && f.os_avx512) want.push_back("avx512vnni");
    if (dot == "AvxVnni" && f.avxvnni && f.os_avx) want.push_back("avxvnni");
    if (dot == "Sdot" && f.asimddp) want.push_back("sdot");
    want.push_back(hwy == "SCALAR" ? "scalar" : hwy == "NEON" ? "neon" : "pmaddwd");
    std::vector<std::string> got;
    for (const QKernelTable& t : QKernelVariantsForTesting(r.id)) got.push_back(t.dot);
    EXPECT_EQ(got, want) << TargetName(r.id);
    // The bundle holds the best of them.
    EXPECT_EQ(std::string(GetKernelBundle(r.id).i8.dot), want.front()) << TargetName(r.id);
    EXPECT_EQ(GetKernelBundle(r.id).i8.tile, QKernelVariantsForTesting(r.id).front().tile) << TargetName(r.id);
  }
}

TEST_P(QKernelsOnTarget, TableLookupOfEveryVariantMatchesTheTable) {
  std::mt19937 rng(7);
  std::vector<uint8_t> table(256), x(1000);
  for (auto& v : table) v = static_cast<uint8_t>(rng());
  for (auto& v : x) v = static_cast<uint8_t>(rng());
  for (const QKernelTable& t : QKernelVariantsForTesting(GetParam()))
    for (uint8_t flip : {0, 0x80})
      for (int64_t n : {0, 1, 63, 64, 65, 130, 1000}) {
        std::vector<uint8_t> y(static_cast<size_t>(n) + 1, 0xEE);
        t.lookup(x.data(), table.data(), y.data(), n, flip);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(y[i], table[x[i] ^ flip]) << TargetName(GetParam()) << " " << t.dot << " n " << n << " i " << i;
        EXPECT_EQ(y[n], 0xEE) << "wrote past the end";
      }
}

// quantize() of every target against the definition with a true division:
// saturate(round_half_even(x / scale) + zp), NaN to the zero point. The
// vector code divides through the reciprocal where the target has a fused
// multiply-add; values within an ulp or two of every half-integer quotient,
// infinities, quotients that overflow, and scales whose reciprocal is
// subnormal or infinite check that it still rounds exactly as the division.
TEST_P(QKernelsOnTarget, QuantizeEqualsTheDivisionDefinition) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const float scales[] = {1.f, 0.0173f, 3.7e-3f, 0.5f, 0.1f, 255.f / 7.f, 6.1e-5f, 1e-30f, 0x1p-130f, 3e38f, 2e-39f};
  {  // one block, so that the body reads as it did over every target
    const TargetInfo& info = TargetInfoOf(GetParam());
    const QKernelTable& t = GetKernelBundle(info.id).i8;
    for (float scale : scales)
      for (auto [to_signed, zp] : {std::pair{false, 0}, {false, 3}, {false, 128}, {false, 255}, {true, -128},
                                   {true, 0}, {true, 5}}) {
        std::vector<float> x;
        for (int k = -300; k <= 300; ++k) {
          float tie = (static_cast<float>(k) + 0.5f) * scale;
          uint32_t b;
          std::memcpy(&b, &tie, 4);
          for (int d = -2; d <= 2; ++d) {
            uint32_t bd = b + static_cast<uint32_t>(d);
            float v;
            std::memcpy(&v, &bd, 4);
            x.push_back(v);
          }
        }
        for (int i = 0; i < 2000; ++i) x.push_back(u(rng) * 300.f * scale);
        for (float v : {INFINITY, -INFINITY, NAN, 3e38f, -3e38f, 0.f, -0.f, 1e-45f}) x.push_back(v);
        for (size_t n : {x.size(), size_t{1}, size_t{15}, size_t{17}}) {
          std::vector<uint8_t> y(n + 1, 0xEE);
          t.quantize(x.data(), static_cast<int64_t>(n), scale, zp, to_signed, y.data());
          const float lo = to_signed ? -128.f : 0.f, hi = to_signed ? 127.f : 255.f;
          for (size_t i = 0; i < n; ++i) {
            const float q = x[i] / scale;
            float want = std::isnan(q) ? static_cast<float>(zp)
                                       : std::clamp(RoundHalfEven(q) + static_cast<float>(zp), lo, hi);
            if (std::isinf(q)) want = q > 0 ? hi : lo;
            const int got = to_signed ? static_cast<int>(static_cast<int8_t>(y[i])) : static_cast<int>(y[i]);
            ASSERT_EQ(got, static_cast<int>(want)) << info.name << " x " << x[i] << " (" << std::hexfloat << x[i]
                                                   << std::defaultfloat << ") scale " << scale << " zp " << zp;
          }
          EXPECT_EQ(y[n], 0xEE) << "wrote past the end";
        }
      }
  }
}

// minmax() of every target: the smallest and largest non-NaN value, NaN
// anywhere (first, last, inside the unrolled part, in the tail) never counts.
TEST_P(QKernelsOnTarget, MinMaxSkipsNaN) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-50.f, 50.f);
  {  // one block, so that the body reads as it did over every target
    const TargetInfo& info = TargetInfoOf(GetParam());
    const QKernelTable& t = GetKernelBundle(info.id).i8;
    for (int64_t n : {1, 3, 16, 63, 64, 65, 200, 1031}) {
      for (int nan_at : {-1, 0, 1, 17, 40, 63, 64, 130, 1030}) {
        std::vector<float> x(static_cast<size_t>(n));
        for (auto& v : x) v = u(rng);
        if (nan_at >= 0 && nan_at < n) x[nan_at] = NAN;
        if (n > 5) x[n / 2] = -INFINITY;
        float want_lo = HUGE_VALF, want_hi = -HUGE_VALF;
        for (float v : x)
          if (!std::isnan(v)) want_lo = std::min(want_lo, v), want_hi = std::max(want_hi, v);
        float lo = 0, hi = 0;
        t.minmax(x.data(), n, &lo, &hi);
        ASSERT_EQ(lo, want_lo) << info.name << " n " << n << " NaN at " << nan_at;
        ASSERT_EQ(hi, want_hi) << info.name << " n " << n << " NaN at " << nan_at;
      }
    }
  }
}

TEST(QKernels, PackingIsTargetNeutralAndPadsWithZeros) {
  // 5 x 3 uint8 matrix: shifted by -128, panel rows of 4 reduction steps.
  std::vector<uint8_t> b(15);
  for (int i = 0; i < 15; ++i) b[i] = static_cast<uint8_t>(120 + i);
  const std::vector<int8_t> p = PackQGemmB(b.data(), true, 5, 3, 3, 1);
  ASSERT_EQ(static_cast<int64_t>(p.size()), PackedQGemmBytes(5, 3));
  ASSERT_EQ(p.size(), 8u * 16u);
  EXPECT_EQ(p[0], 120 - 128);         // (k0, col0)
  EXPECT_EQ(p[1], 123 - 128);         // (k1, col0)
  EXPECT_EQ(p[4], 121 - 128);         // (k0, col1)
  EXPECT_EQ(p[64], 132 - 128);        // (k4, col0)
  EXPECT_EQ(p[65], 0);                // (k5, col0): reduction padding
  EXPECT_EQ(p[3 * 4], 0);             // (k0, col3): column padding
  const std::vector<int32_t> sums = QPackedColumnSums(p.data(), 5, 3, 1);
  EXPECT_EQ(sums[0], (120 + 123 + 126 + 129 + 132) - 5 * 128);
  EXPECT_EQ(sums[3], 0);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(AllTargets, QKernelsOnTarget, ::testing::ValuesIn(test_support::RunnableHere()),
                         [](const ::testing::TestParamInfo<TargetId>& info) {
                           return test_support::TargetTestName(info.param);
                         });

}  // namespace fcb::kernels
