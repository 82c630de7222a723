// Target-neutral weight packing (layouts documented in packing.h).

#include "kernels/packing.h"

#include "kernels/kernels.h"

namespace fcb::kernels {
namespace {
int64_t Panels(int64_t n) { return (n + kPanel - 1) / kPanel; }
}  // namespace

int64_t PackedConvFloats(int64_t oc, int64_t icg, int64_t kh, int64_t kw, int64_t groups) {
  return groups * Panels(oc / groups) * kh * kw * icg * kPanel;
}

std::vector<float> PackConv(const float* w, int64_t oc, int64_t icg, int64_t kh, int64_t kw,
                            int64_t groups) {
  const int64_t ocg = oc / groups, panels = Panels(ocg);
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
  const int64_t ocg = oc / groups, padded = Panels(ocg) * kPanel;
  std::vector<float> out(static_cast<size_t>(groups * padded), 0.f);
  if (bias != nullptr)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t o = 0; o < ocg; ++o) out[g * padded + o] = bias[g * ocg + o];
  return out;
}

std::vector<float> PackDepthwise(const float* w, int64_t c, int64_t kh, int64_t kw) {
  const int64_t cpad = Panels(c) * kPanel;
  std::vector<float> out(static_cast<size_t>(kh * kw * cpad), 0.f);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) out[(ky * kw + kx) * cpad + ch] = w[(ch * kh + ky) * kw + kx];
  return out;
}

std::vector<float> PackDepthwiseBias(const float* bias, int64_t c) {
  std::vector<float> out(static_cast<size_t>(Panels(c) * kPanel), 0.f);
  if (bias != nullptr)
    for (int64_t ch = 0; ch < c; ++ch) out[ch] = bias[ch];
  return out;
}

std::vector<float> PackGemmB(const float* b, int64_t k, int64_t n, int64_t ldb, int64_t ldcol) {
  const int64_t panels = Panels(n);
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
