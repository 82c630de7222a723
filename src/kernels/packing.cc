// Target-neutral weight packing (layouts documented in packing.h).

#include "kernels/packing.h"

#include "kernels/kernels.h"

namespace fcb::kernels {

int64_t PackedConvFloats(int64_t oc, int64_t icg, int64_t kh, int64_t kw, int64_t groups) {
  return groups * PanelCount(oc / groups) * kh * kw * icg * kPanel;
}

std::vector<float> PackConv(const float* w, int64_t oc, int64_t icg, int64_t kh, int64_t kw,
                            int64_t groups) {
  const int64_t ocg = oc / groups, panels = PanelCount(ocg);
  std::vector<float> out(static_cast<size_t>(PackedConvFloats(oc, icg, kh, kw, groups)), 0.f);
  float* dst = out.data();
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx)
          for (int64_t c = 0; c < icg; ++c, dst += kPanel)
            for (int64_t j = 0; j < kPanel; ++j) {
              const int64_t o = p * kPanel + j;  // output channel within the group
              if (o < ocg) dst[j] = w[(((g * ocg + o) * icg + c) * kh + ky) * kw + kx];
            }
  return out;
}

std::vector<float> PackConvBias(const float* bias, int64_t oc, int64_t groups) {
  const int64_t ocg = oc / groups, padded = RoundUpToPanel(ocg);
  std::vector<float> out(static_cast<size_t>(groups * padded), 0.f);
  if (bias != nullptr)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t o = 0; o < ocg; ++o) out[g * padded + o] = bias[g * ocg + o];
  return out;
}

std::vector<float> PackDepthwise(const float* w, int64_t c, int64_t kh, int64_t kw) {
  const int64_t cpad = RoundUpToPanel(c);
  std::vector<float> out(static_cast<size_t>(kh * kw * cpad), 0.f);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) out[(ky * kw + kx) * cpad + ch] = w[(ch * kh + ky) * kw + kx];
  return out;
}

std::vector<float> PackDepthwiseBias(const float* bias, int64_t c) {
  std::vector<float> out(static_cast<size_t>(RoundUpToPanel(c)), 0.f);
  if (bias != nullptr)
    for (int64_t ch = 0; ch < c; ++ch) out[ch] = bias[ch];
  return out;
}

bool GroupedSmallFits(int64_t c, int64_t groups) {
  if (groups < 2 || c % groups != 0) return false;
  const int64_t s = c / groups;
  return s >= 2 && s <= kPanel && kPanel % s == 0;
}

int64_t PackedGroupedSmallFloats(int64_t c, int64_t s, int64_t kh, int64_t kw) {
  return PanelCount(c) * kh * kw * s * kPanel;
}

std::vector<float> PackGroupedSmall(const float* w, int64_t c, int64_t s, int64_t kh, int64_t kw) {
  const int64_t taps = kh * kw;
  std::vector<float> out(static_cast<size_t>(PackedGroupedSmallFloats(c, s, kh, kw)), 0.f);
  for (int64_t o = 0; o < c; ++o)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t t = 0; t < taps; ++t)
        out[(((o / kPanel) * taps + t) * s + j) * kPanel + o % kPanel] = w[(o * s + j) * taps + t];
  return out;
}

int64_t PackedWinogradFloats(int64_t oc, int64_t ic) { return 36 * PanelCount(oc) * ic * kPanel; }

std::vector<float> PackWinograd(const float* w, int64_t oc, int64_t ic) {
  // G of F(4x4, 3x3) with interpolation points 0, -1, 1, -2, 2 and infinity;
  // computed in double so the packed weights carry no extra rounding.
  static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                      {0, 0, 1}};
  const int64_t panels = PanelCount(oc);
  std::vector<float> out(static_cast<size_t>(PackedWinogradFloats(oc, ic)), 0.f);
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t c = 0; c < ic; ++c) {
      const float* g = w + (o * ic + c) * 9;
      double t[6][3];  // G g
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 3; ++j)
          t[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          const double u = t[i][0] * kG[j][0] + t[i][1] * kG[j][1] + t[i][2] * kG[j][2];
          const int64_t pos = i * 6 + j;
          out[((pos * panels + o / kPanel) * ic + c) * kPanel + o % kPanel] = static_cast<float>(u);
        }
    }
  return out;
}

std::vector<float> PackGemmB(const float* b, int64_t k, int64_t n, int64_t ldb, int64_t ldcol) {
  const int64_t panels = PanelCount(n);
  std::vector<float> out(static_cast<size_t>(panels * k * kPanel), 0.f);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t col = p * kPanel + j;
        if (col < n) out[(p * k + kk) * kPanel + j] = b[kk * ldb + col * ldcol];
      }
  return out;
}

}  // namespace fcb::kernels
