// Depthwise convolution and pooling over NHWC tensors, vectorized over
// channels (one pixel at a time, kBlockVecs vectors of channels per pass).
// Included once per Highway target.

#if defined(FCB_KERNELS_SPATIAL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_SPATIAL_INL_H_
#undef FCB_KERNELS_SPATIAL_INL_H_
#else
#define FCB_KERNELS_SPATIAL_INL_H_
#endif

#include <algorithm>
#include <limits>

#include "hwy/highway.h"
#include "kernels/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::HWY_NAMESPACE {

// Channel vectors per pass: enough independent accumulators to hide the
// latency of the adds, few enough to stay in registers on every target.
inline constexpr int kBlockVecs = 4;

// Calls fn.template operator()<B>(c0, n) over channel blocks: full blocks of
// kBlockVecs vectors, then single vectors, the last one with n < kN lanes.
template <class Fn>
HWY_INLINE void ForChannelBlocks(int64_t c, const Fn& fn) {
  int64_t c0 = 0;
  for (; c0 + kBlockVecs * kN <= c; c0 += kBlockVecs * kN) fn.template operator()<kBlockVecs>(c0, kBlockVecs * kN);
  for (; c0 < c; c0 += kN) fn.template operator()<1>(c0, c - c0);
}

struct PixelPos {
  int64_t b, iy0, ix0;
};
template <class G>
HWY_INLINE PixelPos Locate(const G& g, int64_t p) {
  const int64_t ohw = g.oh * g.ow, q = p % ohw;
  return {p / ohw, (q / g.ow) * g.sh - g.pad_top, (q % g.ow) * g.sw - g.pad_left};
}

// kDwPixels output pixels of one output row, one vector of channels at a time:
// the pixels' accumulators are independent chains (a single pixel's taps form
// one dependent chain of FMAs, latency-bound when the channels fill only one
// or two vectors) and each weight vector is loaded once for all of them.
inline constexpr int kDwPixels = 8;

HWY_INLINE void DepthwiseRowGroup(const ConvGeom& g, const float* in, const float* packed_w,
                                  const float* bias, const float* residual, float* out,
                                  const Epilogue& ep, int64_t p, int64_t res_stride) {
  const DF d;
  const int64_t c = g.oc, cpad = (c + kPanel - 1) / kPanel * kPanel;
  const PixelPos pos = Locate(g, p);
  const float* img = in + pos.b * g.ih * g.iw * g.in_pixel_stride;
  for (int64_t c0 = 0; c0 < c; c0 += kN) {
    const int64_t n = c - c0;
    VF acc[kDwPixels];
    const VF bv = hn::LoadU(d, bias + c0);
    HWY_UNROLL(8)
    for (int j = 0; j < kDwPixels; ++j) acc[j] = bv;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = pos.iy0 + ky * g.dh;
      if (iy < 0 || iy >= g.ih) continue;
      const float* row = img + iy * g.iw * g.in_pixel_stride + c0;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const VF wv = hn::LoadU(d, packed_w + (ky * g.kw + kx) * cpad + c0);
        const int64_t ix0 = pos.ix0 + kx * g.dw;
        if (ix0 >= 0 && ix0 + (kDwPixels - 1) * g.sw < g.iw) {  // all pixels inside
          HWY_UNROLL(8)
          for (int j = 0; j < kDwPixels; ++j)
            acc[j] = hn::MulAdd(LoadN(d, row + (ix0 + j * g.sw) * g.in_pixel_stride, n), wv, acc[j]);
        } else {
          HWY_UNROLL(8)
          for (int j = 0; j < kDwPixels; ++j) {
            const int64_t ix = ix0 + j * g.sw;
            if (ix >= 0 && ix < g.iw)
              acc[j] = hn::MulAdd(LoadN(d, row + ix * g.in_pixel_stride, n), wv, acc[j]);
          }
        }
      }
    }
    HWY_UNROLL(8)
    for (int j = 0; j < kDwPixels; ++j) {
      VF x = acc[j];
      if (residual) x = hn::Add(x, LoadN(d, residual + (p + j) * res_stride + c0, n));
      StoreN(ApplyAct(d, x, ep), d, out + (p + j) * g.out_pixel_stride + c0, n);
    }
  }
}

void Depthwise(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
               const float* residual, float* out, const Epilogue& ep, int64_t begin,
               int64_t end) {
  const DF d;
  const int64_t c = g.oc, cpad = (c + kPanel - 1) / kPanel * kPanel;
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  for (int64_t p = begin; p < end; ++p) {
    // With fewer channels than one block of kBlockVecs vectors, a pixel's taps
    // would form one or two long dependent chains: a run of kDwPixels pixels
    // within one output row takes the grouped path instead. (With more
    // channels the blocks below already have independent chains, and measured
    // faster than the grouped path.)
    if (c < kBlockVecs * kN && p + kDwPixels <= end && (p % g.ow) + kDwPixels <= g.ow) {
      DepthwiseRowGroup(g, in, packed_w, bias, residual, out, ep, p, res_stride);
      p += kDwPixels - 1;
      continue;
    }
    const PixelPos pos = Locate(g, p);
    const float* img = in + pos.b * g.ih * g.iw * g.in_pixel_stride;
    float* o = out + p * g.out_pixel_stride;
    const float* res = residual ? residual + p * res_stride : nullptr;
    ForChannelBlocks(c, [&]<int B>(int64_t c0, int64_t n) {
      VF acc[B];
      for (int v = 0; v < B; ++v) acc[v] = hn::LoadU(d, bias + c0 + v * kN);
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const int64_t iy = pos.iy0 + ky * g.dh;
        if (iy < 0 || iy >= g.ih) continue;
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t ix = pos.ix0 + kx * g.dw;
          if (ix < 0 || ix >= g.iw) continue;
          const float* ip = img + (iy * g.iw + ix) * g.in_pixel_stride + c0;
          const float* wt = packed_w + (ky * g.kw + kx) * cpad + c0;
          for (int v = 0; v < B; ++v)
            acc[v] = hn::MulAdd(LoadN(d, ip + v * kN, n - v * kN), hn::LoadU(d, wt + v * kN),
                                acc[v]);
        }
      }
      for (int v = 0; v < B; ++v) {
        VF x = acc[v];
        if (res) x = hn::Add(x, LoadN(d, res + c0 + v * kN, n - v * kN));
        StoreN(ApplyAct(d, x, ep), d, o + c0 + v * kN, n - v * kN);
      }
    });
  }
}

void MaxPool(const PoolGeom& g, const float* in, float* out, int64_t begin, int64_t end) {
  const DF d;
  for (int64_t p = begin; p < end; ++p) {
    const PixelPos pos = Locate(g, p);
    const float* img = in + pos.b * g.ih * g.iw * g.c;
    float* o = out + p * g.c;
    ForChannelBlocks(g.c, [&]<int B>(int64_t c0, int64_t n) {
      VF acc[B];
      for (int v = 0; v < B; ++v) acc[v] = hn::Set(d, -std::numeric_limits<float>::infinity());
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const int64_t iy = pos.iy0 + ky * g.dh;
        if (iy < 0 || iy >= g.ih) continue;
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t ix = pos.ix0 + kx * g.dw;
          if (ix < 0 || ix >= g.iw) continue;
          const float* ip = img + (iy * g.iw + ix) * g.c + c0;
          for (int v = 0; v < B; ++v) acc[v] = hn::Max(acc[v], LoadN(d, ip + v * kN, n - v * kN));
        }
      }
      for (int v = 0; v < B; ++v) StoreN(acc[v], d, o + c0 + v * kN, n - v * kN);
    });
  }
}

void AvgPool(const PoolGeom& g, const float* in, float* out, int64_t begin, int64_t end) {
  const DF d;
  const int64_t pad_bottom =
      g.pad_bottom >= 0 ? g.pad_bottom
                        : std::max<int64_t>(0, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.ih - g.pad_top);
  const int64_t pad_right =
      g.pad_right >= 0 ? g.pad_right
                       : std::max<int64_t>(0, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.iw - g.pad_left);
  for (int64_t p = begin; p < end; ++p) {
    const PixelPos pos = Locate(g, p);
    // Divisor: taps inside the input, or (count_include_pad) inside the padded input.
    int64_t count = 0;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = pos.iy0 + ky * g.dh;
      const int64_t ylo = g.count_include_pad ? -g.pad_top : 0;
      const int64_t yhi = g.count_include_pad ? g.ih + pad_bottom : g.ih;
      if (iy < ylo || iy >= yhi) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t ix = pos.ix0 + kx * g.dw;
        const int64_t xlo = g.count_include_pad ? -g.pad_left : 0;
        const int64_t xhi = g.count_include_pad ? g.iw + pad_right : g.iw;
        count += ix >= xlo && ix < xhi;
      }
    }
    const VF scale = hn::Set(d, count > 0 ? 1.f / static_cast<float>(count) : 0.f);
    const float* img = in + pos.b * g.ih * g.iw * g.c;
    float* o = out + p * g.c;
    ForChannelBlocks(g.c, [&]<int B>(int64_t c0, int64_t n) {
      VF acc[B];
      for (int v = 0; v < B; ++v) acc[v] = hn::Zero(d);
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const int64_t iy = pos.iy0 + ky * g.dh;
        if (iy < 0 || iy >= g.ih) continue;
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t ix = pos.ix0 + kx * g.dw;
          if (ix < 0 || ix >= g.iw) continue;
          const float* ip = img + (iy * g.iw + ix) * g.c + c0;
          for (int v = 0; v < B; ++v) acc[v] = hn::Add(acc[v], LoadN(d, ip + v * kN, n - v * kN));
        }
      }
      for (int v = 0; v < B; ++v) StoreN(hn::Mul(acc[v], scale), d, o + c0 + v * kN, n - v * kN);
    });
  }
}

void GlobalAvgPool(int64_t n, int64_t hw, int64_t c, const float* in, float* out, int64_t begin,
                   int64_t end) {
  const DF d;
  const VF scale = hn::Set(d, hw > 0 ? 1.f / static_cast<float>(hw) : 0.f);
  for (int64_t b = begin; b < end; ++b) {
    const float* img = in + b * hw * c;
    float* o = out + b * c;
    ForChannelBlocks(c, [&]<int B>(int64_t c0, int64_t nn) {
      VF acc[B];
      for (int v = 0; v < B; ++v) acc[v] = hn::Zero(d);
      for (int64_t i = 0; i < hw; ++i)
        for (int v = 0; v < B; ++v)
          acc[v] = hn::Add(acc[v], LoadN(d, img + i * c + c0 + v * kN, nn - v * kN));
      for (int v = 0; v < B; ++v) StoreN(hn::Mul(acc[v], scale), d, o + c0 + v * kN, nn - v * kN);
    });
  }
}

}  // namespace fcb::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_SPATIAL_INL_H_
