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
#include "kernels/kernel_ns.h"
#include "kernels/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

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

// Depthwise convolution: P output pixels of one output row at a time, one
// vector of channels at a time. Each channel's taps form one dependent chain
// of FMAs (4-cycle latency), so a pass over one pixel is latency-bound; P
// pixels give P independent chains, and each weight vector is loaded once
// for all of them (a tap costs P + 1 loads for P FMAs, not 2P).
inline constexpr int kDwPixels = 8;
// DepthwiseRows runs a group of kDwPixels for the last kDwMinCount or more
// pixels of a run, storing only those (the work of 8 for 5 to 7 pixels,
// against two or three smaller groups that reload every weight).
inline constexpr int kDwMinCount = 5;

// The taps [lo, hi) of a k-tap window starting at coordinate o0 (taps d
// apart) that fall inside [0, extent); empty (lo == hi) when none does.
HWY_INLINE void TapsInside(int64_t o0, int64_t k, int64_t d, int64_t extent, int64_t& lo,
                           int64_t& hi) {
  lo = 0, hi = k;
  while (lo < hi && o0 + lo * d < 0) ++lo;
  while (hi > lo && o0 + (hi - 1) * d >= extent) --hi;
}

// Floats between taps of packed depthwise weights (ConvGeom::dw_tap_stride).
HWY_INLINE int64_t DwTapStride(const ConvGeom& g) {
  return g.dw_tap_stride ? g.dw_tap_stride : RoundUpToPanel(g.oc);
}

// Output columns [x_lo, x_hi) whose window lies inside the row horizontally.
HWY_INLINE void InteriorColumns(const ConvGeom& g, int64_t& x_lo, int64_t& x_hi) {
  x_lo = std::min(g.ow, (g.pad_left + g.sw - 1) / g.sw);
  const int64_t reach = (g.kw - 1) * g.dw - g.pad_left;  // last tap's offset from x * sw
  x_hi = std::max(x_lo, std::min(g.ow, g.iw - reach > 0 ? (g.iw - 1 - reach) / g.sw + 1 : 0));
}

// Stores the first `count` of P pixels' accumulators of channels [c0, c0 + n):
// residual, then the activation (chosen once for the group; the long ones
// after the store, see IsLongAct).
template <int P>
HWY_INLINE void StoreDwPixels(DF d, const VReg (&acc)[P], const ConvGeom& g, const float* residual,
                              float* out, const Epilogue& ep, int64_t p, int64_t c0, int64_t n,
                              int64_t res_stride, int count = P) {
  WithRegAct(ep, [&]<Act A>() __attribute__((always_inline)) {
    HWY_UNROLL(8)
    for (int j = 0; j < P; ++j) {
      if (j >= count) break;
      VF x = acc[j];
      if (residual) x = hn::Add(x, LoadN(d, residual + (p + j) * res_stride + c0, n));
      float* o = out + (p + j) * g.out_pixel_stride + c0;
      if (n >= kN) hn::StoreU(ApplyActT<A>(d, x, ep), d, o);
      else StoreN(ApplyActT<A>(d, x, ep), d, o, n);
    }
    if constexpr (A == Act::kNone)
      if (IsLongAct(ep.act)) {
        float* rows[P];
        for (int j = 0; j < count; ++j) rows[j] = out + (p + j) * g.out_pixel_stride + c0;
        UnaryRows(ep, rows, count, std::min<int64_t>(n, kN));
      }
  });
}

// P pixels whose taps all lie inside their rows (every pixel but those at the
// image's left and right edges, see Depthwise): the tap loop has no bounds
// checks and the P accumulators stay in registers. Rows [ky0, ky1) are the
// kernel rows inside the image.
template <int P, int KW>  // KW: the kernel width when known at compile time (3), else 0
HWY_NOINLINE void DepthwiseInterior(const ConvGeom& g, const float* img, const float* packed_w,
                                    const float* bias, const float* residual, float* out,
                                    const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0,
                                    int64_t ky0, int64_t ky1, int64_t res_stride) {
  const DF d;
  const int64_t c = g.oc, cpad = DwTapStride(g);
  const int64_t kw = KW ? KW : g.kw;
  const int64_t pix = g.sw * g.in_pixel_stride, tap = g.dw * g.in_pixel_stride;
  const float* base = img + ((iy0 + ky0 * g.dh) * g.iw + ix0) * g.in_pixel_stride;
  const int64_t row_step = g.dh * g.iw * g.in_pixel_stride;
  for (int64_t c0 = 0; c0 < c; c0 += kN) {
    const int64_t n = c - c0;
    VReg acc[P];
    const VF bv = hn::LoadU(d, bias + c0);
    HWY_UNROLL(8)
    for (int j = 0; j < P; ++j) acc[j] = bv;
    const float* row = base + c0;
    const float* wrow = packed_w + ky0 * kw * cpad + c0;
    for (int64_t ky = ky0; ky < ky1; ++ky, row += row_step, wrow += kw * cpad) {
      const float* ip = row;
      if (n >= kN) {
        HWY_UNROLL(3)
        for (int64_t kx = 0; kx < kw; ++kx, ip += tap) {
          const VF wv = hn::LoadU(d, wrow + kx * cpad);
          HWY_UNROLL(8)
          for (int j = 0; j < P; ++j) acc[j] = hn::MulAdd(hn::LoadU(d, ip + j * pix), wv, acc[j]);
        }
      } else {  // the last, partial channel vector: no reads past the channels
        for (int64_t kx = 0; kx < kw; ++kx, ip += tap) {
          const VF wv = hn::LoadU(d, wrow + kx * cpad);
          HWY_UNROLL(8)
          for (int j = 0; j < P; ++j) acc[j] = hn::MulAdd(LoadN(d, ip + j * pix, n), wv, acc[j]);
        }
      }
    }
    StoreDwPixels<P>(d, acc, g, residual, out, ep, p, c0, n, res_stride);
  }
}

// P pixels of one output row, all taps inside the row, for a KW-wide kernel
// at stride S without dilation along x (3x3 and 5x5 at strides 1 and 2: the
// MobileNet and EfficientNet family). Along a kernel row, the P pixels read
// the (P - 1) * S + KW input columns from the first one's on; each column is
// loaded once and feeds every accumulator whose window covers it (KW FMAs per
// load at stride 1, against one per load above). The KW weights of a kernel
// row stay in registers. Measured on AMD EPYC (Zen 5), kernels_bench
// dw3x3_56x56x144: 45 -> 55 GFLOP/s; in mobilenet_v2 the 112x112x32 and
// 56x56x144 depthwise steps went from 31 and 47 to 43 and 64 GFLOP/s.
// kEdge: the P pixels may reach past the row's left or right edge, and only
// the first `count` are stored (the interior form stores all P); columns
// outside the image are skipped (their taps read padding, zero), so the
// pixels at the edges keep the same loads-per-FMA as the interior (one pixel
// at a time, every tap costs a weight load as well).
template <int P, int KW, int S, bool kEdge>
HWY_NOINLINE void DepthwiseRows(const ConvGeom& g, const float* img, const float* packed_w,
                                const float* bias, const float* residual, float* out,
                                const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0,
                                int64_t ky0, int64_t ky1, int64_t res_stride, int count) {
  const DF d;
  const int64_t c = g.oc, cpad = DwTapStride(g);
  const int64_t col = g.in_pixel_stride;  // floats from one input column to the next
  constexpr int kCols = (P - 1) * S + KW;
  // Columns [m_lo, m_hi) of the kCols lie inside the row; base is column m_lo's.
  const int64_t m_lo = kEdge ? std::max<int64_t>(0, -ix0) : 0;
  const int64_t m_hi = kEdge ? std::min<int64_t>(kCols, g.iw - ix0) : kCols;
  const float* base = img + ((iy0 + ky0 * g.dh) * g.iw + ix0 + m_lo) * g.in_pixel_stride;
  const int64_t row_step = g.dh * g.iw * g.in_pixel_stride;
  // V channel vectors at a time: P accumulators per vector, so groups of 1
  // or 2 pixels (the edges, short runs) still have 4 independent FMA chains
  // (one chain per accumulator is bound by the FMA latency).
  const auto channels = [&]<int V, bool kFull>(int64_t c0) __attribute__((always_inline)) {
    const int64_t n = c - c0;  // only read when !kFull (then V == 1)
    VReg acc[V][P];
    HWY_UNROLL(4)
    for (int v = 0; v < V; ++v) {
      const VF bv = hn::LoadU(d, bias + c0 + v * kN);
      HWY_UNROLL(8)
      for (int j = 0; j < P; ++j) acc[v][j] = bv;
    }
    const float* row = base + c0;
    const float* wrow = packed_w + ky0 * KW * cpad + c0;
    for (int64_t ky = ky0; ky < ky1; ++ky, row += row_step, wrow += KW * cpad) {
      VReg wv[V][KW];
      HWY_UNROLL(4)
      for (int v = 0; v < V; ++v)
        HWY_UNROLL(8)
        for (int kx = 0; kx < KW; ++kx) wv[v][kx] = hn::LoadU(d, wrow + kx * cpad + v * kN);
      HWY_UNROLL(32)
      for (int m = 0; m < kCols; ++m) {
        if (kEdge && (m < m_lo || m >= m_hi)) continue;
        const float* ip = row + (m - m_lo) * col;
        HWY_UNROLL(4)
        for (int v = 0; v < V; ++v) {
          const VF x = kFull ? hn::LoadU(d, ip + v * kN) : LoadPartial(d, ip, n);
          HWY_UNROLL(8)
          for (int kx = 0; kx < KW; ++kx) {
            // Pixel j reads column j * S + kx.
            const int t = m - kx;
            if (t < 0 || t % S != 0 || t / S >= P) continue;
            acc[v][t / S] = hn::MulAdd(x, wv[v][kx], acc[v][t / S]);
          }
        }
      }
    }
    HWY_UNROLL(4)
    for (int v = 0; v < V; ++v)
      StoreDwPixels<P>(d, acc[v], g, residual, out, ep, p, c0 + v * kN, kFull ? kN : n, res_stride,
                       kEdge ? count : P);
  };
  constexpr int kV = P >= 4 ? 1 : 4 / P;
  int64_t c0 = 0;
  if constexpr (kV > 1)
    for (; c0 + kV * kN <= c; c0 += kV * kN) channels.template operator()<kV, true>(c0);
  for (; c0 + kN <= c; c0 += kN) channels.template operator()<1, true>(c0);
  if (c0 < c) channels.template operator()<1, false>(c0);
}

// One output pixel whose window crosses the image's left or right edge. Its
// taps inside the image form the ranges [ky0, ky1) x [kx0, kx1), found once
// for all channels; channels then go kEdgeVecs vectors at a time, so the FMA
// chains are independent (one pixel, one vector at a time is a single chain
// per tap, bound by the FMA latency). With 5x5 kernels on 7x7 and 14x14 maps
// (EfficientNet) most or many pixels are edge pixels.
inline constexpr int kEdgeVecs = 4;

HWY_NOINLINE void DepthwiseEdgePixel(const ConvGeom& g, const float* img, const float* packed_w,
                                     const float* bias, const float* residual, float* out,
                                     const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0,
                                     int64_t res_stride) {
  const DF d;
  const int64_t c = g.oc, cpad = DwTapStride(g);
  int64_t ky0, ky1, kx0, kx1;
  TapsInside(iy0, g.kh, g.dh, g.ih, ky0, ky1);
  TapsInside(ix0, g.kw, g.dw, g.iw, kx0, kx1);
  const int64_t tap = g.dw * g.in_pixel_stride, row_step = g.dh * g.iw * g.in_pixel_stride;
  const float* first = img + ((iy0 + ky0 * g.dh) * g.iw + ix0 + kx0 * g.dw) * g.in_pixel_stride;
  const float* residual_px = residual ? residual + p * res_stride : nullptr;
  float* out_px = out + p * g.out_pixel_stride;
  // Channel blocks of V vectors (bias and weights are padded to whole panels).
  const auto block = [&]<int V>(int64_t c0) {
    VReg acc[V];
    HWY_UNROLL(4)
    for (int v = 0; v < V; ++v) acc[v] = hn::LoadU(d, bias + c0 + v * kN);
    const float* row = first + c0;
    for (int64_t ky = ky0; ky < ky1; ++ky, row += row_step) {
      const float* ip = row;
      const float* wp = packed_w + (ky * g.kw + kx0) * cpad + c0;
      for (int64_t kx = kx0; kx < kx1; ++kx, ip += tap, wp += cpad) {
        HWY_UNROLL(4)
        for (int v = 0; v < V; ++v) {
          // Blocks of several vectors are whole; a single one may be the partial last.
          const VF x = V > 1 ? hn::LoadU(d, ip + v * kN) : LoadN(d, ip + v * kN, c - c0 - v * kN);
          acc[v] = hn::MulAdd(x, hn::LoadU(d, wp + v * kN), acc[v]);
        }
      }
    }
    WithAct(ep, [&]<Act A>() {
      HWY_UNROLL(4)
      for (int v = 0; v < V; ++v) {
        const int64_t n = c - c0 - v * kN;
        VF x = acc[v];
        if (residual_px) x = hn::Add(x, LoadN(d, residual_px + c0 + v * kN, n));
        StoreN(ApplyActT<A>(d, x, ep), d, out_px + c0 + v * kN, n);
      }
    });
  };
  int64_t c0 = 0;
  for (; c0 + kEdgeVecs * kN <= c; c0 += kEdgeVecs * kN) block.template operator()<kEdgeVecs>(c0);
  for (; c0 < c; c0 += kN) block.template operator()<1>(c0);
}

// Depthwise convs DepthwiseRows takes: 3x3 and 5x5 at strides 1 and 2, no
// dilation along x.
HWY_INLINE bool DwRowsApply(const ConvGeom& g) {
  return g.dw == 1 && (g.sw == 1 || g.sw == 2) && (g.kw == 3 || g.kw == 5);
}

// P pixels from column ix0 on; inside their rows horizontally unless kEdge
// (DepthwiseRows only, see DwRowsApply), of which the first `count` are
// stored (DepthwiseRows only: the rest lie past the row's end).
template <int P, bool kEdge>
HWY_INLINE void DepthwiseGroup(const ConvGeom& g, const float* img, const float* packed_w,
                               const float* bias, const float* residual, float* out,
                               const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0,
                               int64_t res_stride, int count = P) {
  int64_t ky0, ky1;
  TapsInside(iy0, g.kh, g.dh, g.ih, ky0, ky1);
  if (DwRowsApply(g)) {
    const auto rows = [&]<int KW, int S>() {
      DepthwiseRows<P, KW, S, kEdge>(g, img, packed_w, bias, residual, out, ep, p, iy0, ix0, ky0, ky1, res_stride,
                                     count);
    };
    if (g.kw == 3)
      g.sw == 1 ? rows.template operator()<3, 1>() : rows.template operator()<3, 2>();
    else
      g.sw == 1 ? rows.template operator()<5, 1>() : rows.template operator()<5, 2>();
    return;
  }
  if constexpr (!kEdge) {
    if (g.kw == 3)
      DepthwiseInterior<P, 3>(g, img, packed_w, bias, residual, out, ep, p, iy0, ix0, ky0, ky1, res_stride);
    else
      DepthwiseInterior<P, 0>(g, img, packed_w, bias, residual, out, ep, p, iy0, ix0, ky0, ky1, res_stride);
  }
}

// A run of `count` pixels of one output row, every tap inside the row, for a
// 3x3 kernel at stride S (1 or 2) without dilation along x; R = ky1 - ky0
// kernel rows lie inside the image. One channel vector at a time sweeps the
// whole run: its 3R weights stay in registers and so does the window of input
// columns the next pixel shares with this one, so each pixel loads only its
// new columns (R at stride 1, 2R at stride 2) for 3R FMAs. Consecutive pixels
// are independent chains, which out-of-order execution overlaps; each pixel's
// rows are summed in two partial chains to shorten them. DepthwiseRows'
// groups of 8 pixels reload each column for every tap that reads it (the
// compiler folds the loads into the FMAs): measured on AMD EPYC (Zen 5), one
// thread, interior 3x3 stride 1 at 112x112x32, 56x56x144 and 14x14x576:
// 59, 67 and 87 GFLOP/s there, against 137, 105 and 88 for this sweep in a
// stand-alone test of the same loop.
template <int R, int S>
HWY_NOINLINE void DepthwiseSweep3(const ConvGeom& g, const float* img, const float* packed_w,
                                  const float* bias, const float* residual, float* out,
                                  const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0, int64_t ky0,
                                  int64_t res_stride, int64_t count) {
  static_assert(R >= 1 && R <= 3 && (S == 1 || S == 2));
  const DF d;
  const int64_t c = g.oc, cpad = DwTapStride(g), col = g.in_pixel_stride;
  const int64_t row_step = g.dh * g.iw * col, pix = S * col;
  const float* base = img + ((iy0 + ky0 * g.dh) * g.iw + ix0) * col;
  const float* wbase = packed_w + ky0 * 3 * cpad;
  WithRegAct(ep, [&]<Act A>() __attribute__((always_inline)) {
    const auto channels = [&]<bool kFull>(int64_t c0) __attribute__((always_inline)) {
      const int64_t n = c - c0;  // read only when !kFull
      const auto load = [&](const float* q) __attribute__((always_inline)) {
        return kFull ? hn::LoadU(d, q) : LoadPartial(d, q, n);
      };
      VReg w[R][3];
      const float* ip[R];
      VReg x0[R], x1[R];  // columns 0 and 1 of the next pixel's window (x1: stride 1 only)
      HWY_UNROLL(3)
      for (int r = 0; r < R; ++r) {
        HWY_UNROLL(3)
        for (int kx = 0; kx < 3; ++kx) w[r][kx] = hn::LoadU(d, wbase + (r * 3 + kx) * cpad + c0);
        ip[r] = base + r * row_step + c0;
        x0[r] = load(ip[r]);
        if constexpr (S == 1) x1[r] = load(ip[r] + col);
      }
      const VF bv = hn::LoadU(d, bias + c0);
      float* o = out + p * g.out_pixel_stride + c0;
      const float* res = residual ? residual + p * res_stride + c0 : nullptr;
      // Pixel j's sum (bias, taps, residual), the window moved on by one pixel.
      const auto pixel = [&](int64_t j) __attribute__((always_inline)) {
        VReg x2[R];
        HWY_UNROLL(3)
        for (int r = 0; r < R; ++r) {
          if constexpr (S == 2) x1[r] = load(ip[r] + j * pix + col);
          x2[r] = load(ip[r] + j * pix + 2 * col);
        }
        VF s0 = hn::MulAdd(x0[0], w[0][0], bv);
        s0 = hn::MulAdd(x1[0], w[0][1], s0);
        s0 = hn::MulAdd(x2[0], w[0][2], s0);
        if constexpr (R >= 2) {
          VF s1 = hn::Mul(x0[1], w[1][0]);
          s1 = hn::MulAdd(x1[1], w[1][1], s1);
          s1 = hn::MulAdd(x2[1], w[1][2], s1);
          if constexpr (R == 3) {
            s0 = hn::MulAdd(x0[2], w[2][0], s0);
            s0 = hn::MulAdd(x1[2], w[2][1], s0);
            s0 = hn::MulAdd(x2[2], w[2][2], s0);
          }
          s0 = hn::Add(s0, s1);
        }
        if (res) {
          s0 = hn::Add(s0, load(res));
          res += res_stride;
        }
        HWY_UNROLL(3)
        for (int r = 0; r < R; ++r) {
          if constexpr (S == 1) {
            x0[r] = x1[r];
            x1[r] = x2[r];
          } else {
            x0[r] = x2[r];
          }
        }
        return s0;
      };
      const auto store = [&](VF v, float* q) __attribute__((always_inline)) {
        if (kFull) hn::StoreU(v, d, q);
        else StoreN(v, d, q, n);
      };
      // kActVectors pixels at a time, their activations taken abreast
      // (ApplyActN): one pixel's SiLU is a chain of ~25 dependent operations,
      // and one pixel at a time ran it at 3.8 G values/s where the 1x1
      // conv's tiles reach 6.9 (AMD EPYC Zen 5, 112x112x32).
      constexpr int U = kActVectors;
      int64_t j = 0;
      for (; j + U <= count; j += U, o += U * g.out_pixel_stride) {
        VReg v[U];
        HWY_UNROLL(4)
        for (int u = 0; u < U; ++u) v[u] = pixel(j + u);
        ApplyActN<A, U>(d, v, ep);
        HWY_UNROLL(4)
        for (int u = 0; u < U; ++u) store(v[u], o + u * g.out_pixel_stride);
        if constexpr (A == Act::kNone)
          if (IsLongAct(ep.act)) {
            float* rows[U];
            for (int u = 0; u < U; ++u) rows[u] = o + u * g.out_pixel_stride;
            UnaryRows(ep, rows, U, kFull ? kN : n);
          }
      }
      for (; j < count; ++j, o += g.out_pixel_stride) {
        store(ApplyActT<A>(d, pixel(j), ep), o);
        if constexpr (A == Act::kNone)
          if (IsLongAct(ep.act)) Unary(ep, o, o, 0, kFull ? kN : n);
      }
    };
    int64_t c0 = 0;
    for (; c0 + kN <= c; c0 += kN) channels.template operator()<true>(c0);
    if (c0 < c) channels.template operator()<false>(c0);
  });
}

// Runs DepthwiseSweep3 over `count` interior pixels from ix0 on; false when
// the conv is not one it takes (3x3, stride 1 or 2 along x, no dilation
// along x).
HWY_INLINE bool DwSweepApply(const ConvGeom& g) {
  return g.kh == 3 && g.kw == 3 && g.dw == 1 && (g.sw == 1 || g.sw == 2);
}
// Interior runs shorter than this go in DepthwiseRows' groups: the sweep's
// setup per channel vector (3R weight and 2R column loads) is paid once per
// run, and on short runs it cost more than it saved. Measured as above: rows
// of 14 (12 interior pixels) 89 -> 86 GFLOP/s and of 7 (5) 103 -> 65 with
// the sweep; from 28 (27 interior pixels at stride 2) on, the sweep gains.
inline constexpr int64_t kDwSweepMin = 16;

HWY_INLINE void DepthwiseSweep(const ConvGeom& g, const float* img, const float* packed_w,
                               const float* bias, const float* residual, float* out, const Epilogue& ep,
                               int64_t p, int64_t iy0, int64_t ix0, int64_t res_stride, int64_t count) {
  int64_t ky0, ky1;
  TapsInside(iy0, g.kh, g.dh, g.ih, ky0, ky1);
  const auto sweep = [&]<int R>() {
    if (g.sw == 1)
      DepthwiseSweep3<R, 1>(g, img, packed_w, bias, residual, out, ep, p, iy0, ix0, ky0, res_stride, count);
    else
      DepthwiseSweep3<R, 2>(g, img, packed_w, bias, residual, out, ep, p, iy0, ix0, ky0, res_stride, count);
  };
  switch (ky1 - ky0) {
    case 3: return sweep.template operator()<3>();
    case 2: return sweep.template operator()<2>();
    case 1: return sweep.template operator()<1>();
    default: break;
  }
  // No kernel row inside the image (padding taller than the kernel): the
  // bias alone, through the general path.
  for (int64_t j = 0; j < count; ++j)
    DepthwiseGroup<1, false>(g, img, packed_w, bias, residual, out, ep, p + j, iy0, ix0 + j * g.sw, res_stride);
}

void Depthwise(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
               const float* residual, float* out, const Epilogue& ep, int64_t begin,
               int64_t end) {
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  const int64_t ohw = g.oh * g.ow;
  // Output columns [x_lo, x_hi) have every tap inside the row. Groups that
  // reach past them run DepthwiseRows' edge form where it applies; the
  // pixels outside go one at a time otherwise (DepthwiseEdgePixel).
  int64_t x_lo, x_hi;
  InteriorColumns(g, x_lo, x_hi);
  const bool rows_edge = DwRowsApply(g);
  // Rows of up to 16 pixels (7x7 and 14x14 maps, where edge pixels are
  // 4 in 7 or in 14) run in groups of 8 that may span the edges; wider rows
  // keep their interior in unchecked groups and only their few edge pixels
  // in the edge form (a group of 8 in the edge form costs more than one
  // without checks: 56x56 3x3 measured 10 % slower with edge-spanning groups).
  const bool narrow = rows_edge && g.ow <= 2 * kDwPixels;
  // Wider rows' interior runs of kDwSweepMin or more 3x3 pixels: DepthwiseSweep3.
  const bool sweep = !narrow && DwSweepApply(g);
  for (int64_t p = begin; p < end;) {
    // One run of pixels within an output row: coordinates by division once.
    const int64_t b = p / ohw, q = p % ohw, oy = q / g.ow, ox = q % g.ow;
    const int64_t run = std::min(g.ow - ox, end - p);
    const float* img = in + b * g.ih * g.iw * g.in_pixel_stride;
    const int64_t iy0 = oy * g.sh - g.pad_top;
    for (int64_t i = 0; i < run;) {
      const int64_t x = ox + i, ix0 = x * g.sw - g.pad_left;
      // A group of P pixels from x on, the first `count` stored: the
      // unchecked form when all P lie in [x_lo, x_hi), else the edge form
      // (DepthwiseRows only; elsewhere groups stay inside).
      const auto group = [&]<int P>(int count) {
        if (count == P && x >= x_lo && x + P <= x_hi)
          DepthwiseGroup<P, false>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, res_stride);
        else if (rows_edge)
          DepthwiseGroup<P, true>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, res_stride, count);
        i += count;
      };
      if (sweep && x >= x_lo && x < x_hi) {
        const int64_t count = std::min(run - i, x_hi - x);
        if (count >= kDwSweepMin) {
          DepthwiseSweep(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, res_stride, count);
          i += count;
          continue;
        }
      }
      if (narrow && run - i >= kDwMinCount) {
        // A group of kDwPixels, all stored unless the run ends sooner: a
        // 7-pixel row is one group, every weight load feeding up to 7 FMAs.
        group.template operator()<kDwPixels>(static_cast<int>(std::min<int64_t>(kDwPixels, run - i)));
        continue;
      }
      if (!rows_edge && (x < x_lo || x >= x_hi)) {
        DepthwiseEdgePixel(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, res_stride);
        ++i;
        continue;
      }
      // Pixels from x on on the same side of x_lo and x_hi (narrow rows: the
      // last few of a run, any side).
      const int64_t left =
          narrow ? run - i : std::min(run - i, x < x_lo ? x_lo - x : x < x_hi ? x_hi - x : g.ow - x);
      if (left >= kDwPixels) {
        group.template operator()<kDwPixels>(kDwPixels);
      } else if (left >= 4) {
        group.template operator()<4>(4);
      } else if (left >= 2) {
        group.template operator()<2>(2);
      } else {
        group.template operator()<1>(1);
      }
    }
    p += run;
  }
}

// Grouped convolution with few channels per group (ResNeXt: 4, 8 or 16), where
// a group is too narrow for the dense kernel's tiles (one 16-column panel per
// group, 4 of whose 16 columns do work at 4 channels per group). Here the
// vector runs over output channels of several groups at once, as in a
// depthwise conv: lane l (output channel c0 + l, of group (c0 + l) / s) needs
// input channel j of its own group, which is lane (l / s) * s + j of the input
// vector loaded at c0 (groups never straddle a vector: s divides kN or kN
// divides s). So each tap and j costs one lane permutation and one FMA per
// pixel when s < kN, and one broadcast and one FMA when s >= kN (every lane in
// one group). Weights: PackGroupedSmall, [c / 16][tap][j][16].
inline constexpr int kGroupedPixels = kN == 16 ? 8 : 4;

template <int P, int S>  // S: channels per group
HWY_NOINLINE void GroupedSmallPixels(const ConvGeom& g, const float* img, const float* packed_w,
                                     const float* bias, const float* residual, float* out,
                                     const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0,
                                     int64_t ky0, int64_t ky1, int64_t kx0, int64_t kx1,
                                     int64_t res_stride) {
  const DF d;
  constexpr bool kPermute = S < kN;  // else every lane of a vector is in one group: a broadcast
  constexpr int64_t s = S;
  const int64_t c = g.oc, taps = g.kh * g.kw;
  const int64_t pix = g.sw * g.in_pixel_stride;
  // The lane indices of each j, made once. SVE's index vectors are sizeless
  // and cannot form an array: there they are made from the table where used.
  HWY_ALIGN int32_t lanes[kPermute ? S * kN : 1];
  if constexpr (kPermute) {
    for (int j = 0; j < S; ++j)
      for (int l = 0; l < kN; ++l) lanes[j * kN + l] = static_cast<int32_t>(l / S * S + j);
  }
#if !HWY_HAVE_SCALABLE
  using Idx = decltype(hn::SetTableIndices(d, lanes));
  Idx idx_of[kPermute ? S : 1];
  if constexpr (kPermute) {
    for (int j = 0; j < S; ++j) idx_of[j] = hn::SetTableIndices(d, lanes + j * kN);
  }
#endif
  for (int64_t c0 = 0; c0 < c; c0 += kN) {
    const int64_t n = std::min<int64_t>(kN, c - c0);
    const int64_t gbase = c0 / s * s - c0;  // broadcast mode: the group's first channel, from c0
    // Fewer than 4 pixels are too few independent FMA chains to hide the
    // FMA latency: the channels j of a tap then alternate between A sets of
    // accumulators, summed at the end.
    constexpr int A = P >= 4 ? 1 : (S < 4 / P ? S : 4 / P);
    VReg acc[A][P];
    const VF bv = hn::LoadU(d, bias + c0);
    HWY_UNROLL(8)
    for (int q = 0; q < P; ++q) {
      acc[0][q] = bv;
      HWY_UNROLL(4)
      for (int a = 1; a < A; ++a) acc[a][q] = hn::Zero(d);
    }
    const float* wblock = packed_w + (c0 / kPanel) * taps * s * kPanel + c0 % kPanel;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* row = img + ((iy0 + ky * g.dh) * g.iw + ix0) * g.in_pixel_stride + c0;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const float* ip = row + kx * g.dw * g.in_pixel_stride;
        const float* wp = wblock + (ky * g.kw + kx) * s * kPanel;
        if constexpr (kPermute) {
          VReg xv[P];
          HWY_UNROLL(8)
          for (int q = 0; q < P; ++q) xv[q] = LoadN(d, ip + q * pix, n);
          HWY_UNROLL(16)
          for (int j = 0; j < S; ++j) {
            const VF wv = hn::LoadU(d, wp + j * kPanel);
#if HWY_HAVE_SCALABLE
            const auto idx = hn::SetTableIndices(d, lanes + j * kN);
#else
            const auto idx = idx_of[j];
#endif
            HWY_UNROLL(8)
            for (int q = 0; q < P; ++q)
              acc[j % A][q] = hn::MulAdd(hn::TableLookupLanes(VF(xv[q]), idx), wv, acc[j % A][q]);
          }
        } else {
          HWY_UNROLL(16)
          for (int j = 0; j < S; ++j) {
            const VF wv = hn::LoadU(d, wp + j * kPanel);
            HWY_UNROLL(8)
            for (int q = 0; q < P; ++q)
              acc[j % A][q] = hn::MulAdd(hn::Set(d, ip[q * pix + gbase + j]), wv, acc[j % A][q]);
          }
        }
      }
    }
    HWY_UNROLL(8)
    for (int q = 0; q < P; ++q) {
      HWY_UNROLL(4)
      for (int a = 1; a < A; ++a) acc[0][q] = hn::Add(acc[0][q], acc[a][q]);
    }
    StoreDwPixels<P>(d, acc[0], g, residual, out, ep, p, c0, n, res_stride);
  }
}

template <int P>
HWY_INLINE void GroupedSmallRun(const ConvGeom& g, const float* img, const float* packed_w,
                                const float* bias, const float* residual, float* out,
                                const Epilogue& ep, int64_t p, int64_t iy0, int64_t ix0,
                                int64_t ky0, int64_t ky1, int64_t kx0, int64_t kx1,
                                int64_t res_stride) {
  const auto run = [&]<int S>() {
    GroupedSmallPixels<P, S>(g, img, packed_w, bias, residual, out, ep, p, iy0, ix0, ky0, ky1, kx0, kx1,
                                      res_stride);
  };
  switch (g.ic / g.groups) {
    case 2: run.template operator()<2>(); break;
    case 4: run.template operator()<4>(); break;
    case 8: run.template operator()<8>(); break;
    default: run.template operator()<16>(); break;
  }
}

void GroupedSmall(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                  const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end) {
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  const int64_t ohw = g.oh * g.ow;
  int64_t x_lo, x_hi;
  InteriorColumns(g, x_lo, x_hi);
  for (int64_t p = begin; p < end;) {
    const int64_t b = p / ohw, q = p % ohw, oy = q / g.ow, ox = q % g.ow;
    const int64_t run = std::min(g.ow - ox, end - p);
    const float* img = in + b * g.ih * g.iw * g.in_pixel_stride;
    const int64_t iy0 = oy * g.sh - g.pad_top;
    int64_t ky0, ky1;
    TapsInside(iy0, g.kh, g.dh, g.ih, ky0, ky1);
    for (int64_t i = 0; i < run;) {
      const int64_t x = ox + i, ix0 = x * g.sw - g.pad_left;
      if (x < x_lo || x >= x_hi) {
        int64_t kx0, kx1;
        TapsInside(ix0, g.kw, g.dw, g.iw, kx0, kx1);
        GroupedSmallRun<1>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, ky0, ky1, kx0, kx1, res_stride);
        ++i;
        continue;
      }
      const int64_t left = std::min(run - i, x_hi - x);
      if (left >= kGroupedPixels) {
        GroupedSmallRun<kGroupedPixels>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, ky0, ky1, 0, g.kw, res_stride);
        i += kGroupedPixels;
      } else if (left >= 4 && kGroupedPixels > 4) {
        GroupedSmallRun<4>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, ky0, ky1, 0, g.kw, res_stride);
        i += 4;
      } else if (left >= 2) {
        GroupedSmallRun<2>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, ky0, ky1, 0, g.kw, res_stride);
        i += 2;
      } else {
        GroupedSmallRun<1>(g, img, packed_w, bias, residual, out, ep, p + i, iy0, ix0, ky0, ky1, 0, g.kw, res_stride);
        i += 1;
      }
    }
    p += run;
  }
}

void MaxPool(const PoolGeom& g, const float* in, float* out, int64_t begin, int64_t end) {
  const DF d;
  for (int64_t p = begin; p < end; ++p) {
    const PixelPos pos = Locate(g, p);
    const float* img = in + pos.b * g.ih * g.iw * g.c;
    float* o = out + p * g.c;
    ForChannelBlocks(g.c, [&]<int B>(int64_t c0, int64_t n) {
      VReg acc[B];
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
      VReg acc[B];
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
      VReg acc[B];
      for (int v = 0; v < B; ++v) acc[v] = hn::Zero(d);
      for (int64_t i = 0; i < hw; ++i)
        for (int v = 0; v < B; ++v)
          acc[v] = hn::Add(acc[v], LoadN(d, img + i * c + c0 + v * kN, nn - v * kN));
      for (int v = 0; v < B; ++v) StoreN(hn::Mul(acc[v], scale), d, o + c0 + v * kN, nn - v * kN);
    });
  }
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_SPATIAL_INL_H_
