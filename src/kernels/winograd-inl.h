// Winograd F(4x4, 3x3) convolution (Lavin & Gray), NHWC, for 3x3 stride-1
// dilation-1 ungrouped convs. Included once per Highway target.
//
// A block of MR output tiles (4x4 pixels each; MR is the register tile's row
// count) goes through three phases, in the calling thread's scratch (from the
// execution's arena) so Run stays allocation-free and thread-safe:
//   1. input transform  V[pos][t][c] = (B^T d B)[pos] for each 6x6 input tile
//      d, vectorized over channels (contiguous in NHWC);
//   2. 36 small GEMMs   M[pos][t][o] = sum_c V[pos][t][c] U[pos][c][o], on the
//      same register tile and packed panels as the direct conv;
//   3. output transform Y = A^T M A (+ bias, residual, activation).
// The multiply count per output drops from 9 to 36/16 = 2.25 per (ic, oc).

#if defined(FCB_KERNELS_WINOGRAD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_WINOGRAD_INL_H_
#undef FCB_KERNELS_WINOGRAD_INL_H_
#else
#define FCB_KERNELS_WINOGRAD_INL_H_
#endif

#include <algorithm>

#include "hwy/highway.h"
#include "kernels/kernel_ns.h"
#include "kernels/common-inl.h"
#include "kernels/tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

inline constexpr int kWinoA = 6;                  // input tile side (4 + 3 - 1)
inline constexpr int kWinoPos = kWinoA * kWinoA;  // 36 transformed positions
inline constexpr int kWinoCols = kNV * kN;        // output channels per column block

// y = B^T x for one 6-vector (x and y may not alias).
HWY_INLINE void WinoInput6(DF d, const VReg* x, VReg* y) {
  const VF four = hn::Set(d, 4.f), five = hn::Set(d, 5.f), two = hn::Set(d, 2.f);
  y[0] = hn::MulAdd(four, x[0], hn::NegMulAdd(five, x[2], x[4]));
  y[1] = hn::NegMulAdd(four, hn::Add(x[1], x[2]), hn::Add(x[3], x[4]));
  y[2] = hn::MulAdd(four, hn::Sub(x[1], x[2]), hn::Sub(x[4], x[3]));
  y[3] = hn::MulAdd(two, hn::Sub(x[3], x[1]), hn::Sub(x[4], x[2]));
  y[4] = hn::MulAdd(two, hn::Sub(x[1], x[3]), hn::Sub(x[4], x[2]));
  y[5] = hn::MulAdd(four, x[1], hn::NegMulAdd(five, x[3], x[5]));
}

// y = A^T m for one 6-vector, y has 4 entries.
HWY_INLINE void WinoOutput6(DF d, const VReg* m, VReg* y) {
  const VF a = hn::Add(m[1], m[2]), b = hn::Sub(m[1], m[2]);
  const VF c = hn::Add(m[3], m[4]), e = hn::Sub(m[3], m[4]);
  y[0] = hn::Add(hn::Add(m[0], a), c);
  y[1] = hn::MulAdd(hn::Set(d, 2.f), e, b);
  y[2] = hn::MulAdd(hn::Set(d, 4.f), c, a);
  y[3] = hn::Add(hn::MulAdd(hn::Set(d, 8.f), e, b), m[5]);
}

// Top-left input pixel of tile t and its image.
struct WinoTile {
  const float* img;
  float* out_img;
  const float* res_img;
  int64_t y0, x0;  // output coordinates of the tile's first pixel
};

HWY_INLINE WinoTile LocateTile(const ConvGeom& g, const float* in, const float* residual,
                               float* out, int64_t res_stride, int64_t t) {
  const int64_t th = (g.oh + 3) / 4, tw = (g.ow + 3) / 4;
  const int64_t b = t / (th * tw), q = t % (th * tw);
  WinoTile w;
  w.img = in + b * g.ih * g.iw * g.in_pixel_stride;
  w.out_img = out + b * g.oh * g.ow * g.out_pixel_stride;
  w.res_img = residual ? residual + b * g.oh * g.ow * res_stride : nullptr;
  w.y0 = (q / tw) * 4;
  w.x0 = (q % tw) * 4;
  return w;
}

// Phase 1 for one tile into slot `r` of v (layout [pos][slots][vstride]).
HWY_INLINE void WinoInputTile(DF d, const ConvGeom& g, const WinoTile& tile, float* v, int r,
                              int64_t slots, int64_t vstride) {
  const float* px[kWinoA][kWinoA];
  for (int i = 0; i < kWinoA; ++i) {
    const int64_t iy = tile.y0 - g.pad_top + i;
    for (int j = 0; j < kWinoA; ++j) {
      const int64_t ix = tile.x0 - g.pad_left + j;
      const bool in = iy >= 0 && iy < g.ih && ix >= 0 && ix < g.iw;
      px[i][j] = in ? tile.img + (iy * g.iw + ix) * g.in_pixel_stride : nullptr;
    }
  }
  for (int64_t c0 = 0; c0 < g.ic; c0 += kN) {
    const int64_t nc = g.ic - c0;
    VReg rows[kWinoA][kWinoA];  // d B^T... row-transformed input, rows[i][nu]
    for (int i = 0; i < kWinoA; ++i) {
      VReg x[kWinoA];
      HWY_UNROLL(6)
      for (int j = 0; j < kWinoA; ++j) x[j] = px[i][j] ? LoadN(d, px[i][j] + c0, nc) : hn::Zero(d);
      WinoInput6(d, x, rows[i]);
    }
    HWY_UNROLL(6)
    for (int nu = 0; nu < kWinoA; ++nu) {
      VReg col[kWinoA], y[kWinoA];
      HWY_UNROLL(6)
      for (int i = 0; i < kWinoA; ++i) col[i] = rows[i][nu];
      WinoInput6(d, col, y);
      HWY_UNROLL(6)
      for (int xi = 0; xi < kWinoA; ++xi)
        hn::Store(y[xi], d, v + ((xi * kWinoA + nu) * slots + r) * vstride + c0);
    }
  }
}

// Phase 3 for one tile (slot r of m, layout [pos][slots][kWinoCols]) and the
// column block's `ncols` channels starting at oc0.
HWY_INLINE void WinoOutputTile(DF d, const ConvGeom& g, const WinoTile& tile, const float* m, int r,
                               int64_t slots, const float* bias, int64_t oc0, int64_t ncols,
                               int64_t res_stride, const Epilogue& ep) {
  for (int64_t c0 = 0; c0 < ncols; c0 += kN) {
    const int64_t nc = ncols - c0;
    VReg s[kWinoA][4];  // A^T applied along nu: s[xi][x]
    for (int xi = 0; xi < kWinoA; ++xi) {
      VReg x[kWinoA];
      HWY_UNROLL(6)
      for (int nu = 0; nu < kWinoA; ++nu)
        x[nu] = hn::Load(d, m + ((xi * kWinoA + nu) * slots + r) * kWinoCols + c0);
      WinoOutput6(d, x, s[xi]);
    }
    const VF bv = hn::LoadU(d, bias + c0);  // bias is padded to whole panels
    for (int x = 0; x < 4; ++x) {
      const int64_t ox = tile.x0 + x;
      if (ox >= g.ow) break;
      VReg col[kWinoA], y[4];
      HWY_UNROLL(6)
      for (int xi = 0; xi < kWinoA; ++xi) col[xi] = s[xi][x];
      WinoOutput6(d, col, y);
      for (int yy = 0; yy < 4; ++yy) {
        const int64_t oy = tile.y0 + yy;
        if (oy >= g.oh) break;
        const int64_t p = oy * g.ow + ox;
        VF o = hn::Add(y[yy], bv);
        if (tile.res_img) o = hn::Add(o, LoadN(d, tile.res_img + p * res_stride + oc0 + c0, nc));
        StoreN(ApplyAct(d, o, ep), d, tile.out_img + p * g.out_pixel_stride + oc0 + c0, nc);
      }
    }
  }
}

// Register-tile heights the GEMM phase picks from: the main tile, a middle
// one and the small one (AVX-512: 12, 8, 4 rows).
inline constexpr int kWinoMRMid = kN == 16 ? 8 : kN == 8 ? 4 : kN == 4 ? 2 : 1;

// Rows [slot0, slot0 + rows) of one position's GEMM, rows <= MR: rows past
// `rows` repeat the last one (their products are not stored).
template <int MR, int NV>
HWY_INLINE void WinoGemmRows(DF d, const float* v, int64_t vstride, int slot0, int rows, int64_t ic,
                             const float* w, int64_t panel_stride, float* m) {
  const float* ap[MR];
  HWY_UNROLL(16)
  for (int r = 0; r < MR; ++r) ap[r] = v + (slot0 + std::min(r, rows - 1)) * vstride;
  VReg acc[MR][NV];
  HWY_UNROLL(16)
  for (int r = 0; r < MR; ++r)
    HWY_UNROLL(16)
    for (int nv = 0; nv < NV; ++nv) acc[r][nv] = hn::Zero(d);
  MicroKernel<MR, NV>(d, ap, ic, w, kPanel, panel_stride, acc);
  HWY_UNROLL(16)
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) break;
    HWY_UNROLL(16)
    for (int nv = 0; nv < NV; ++nv) hn::Store(acc[r][nv], d, m + (slot0 + r) * kWinoCols + nv * kN);
  }
}

// Phase 2 + 3 for one column block of NV vectors (panels starting at p) and
// the block's `slots` tiles. Positions go outermost: one position's packed
// weights for the column block (ic x NV vectors, 32 KiB at ic 256 on
// AVX-512) stay in L1 while every row tile of the block reads them, so the
// weights stream from memory once per block of tiles, not once per 12.
template <int NV>
HWY_INLINE void WinoColumn(DF d, const ConvGeom& g, const WinoTile* tiles, int slots,
                           const float* v, int64_t vstride, float* m, const float* packed_w,
                           const float* bias, int64_t p, int64_t res_stride, const Epilogue& ep) {
  const int64_t panels = PanelCount(g.oc);
  const int64_t panel_stride = g.ic * kPanel;
  const int64_t pos_stride = panels * panel_stride;
  const int64_t oc0 = p * kPanel;
  const int64_t ncols = std::min<int64_t>(g.oc - oc0, NV * kN);
  for (int pos = 0; pos < kWinoPos; ++pos) {
    const float* vp = v + pos * slots * vstride;
    const float* wp = packed_w + pos * pos_stride + p * panel_stride;
    float* mp = m + pos * slots * kWinoCols;
    // Main tiles, then one middle or small tile: at most kMRSmall - 1 rows
    // computed in vain.
    for (int s0 = 0; s0 < slots;) {
      const int rows = std::min(kMR, slots - s0);
      if (rows > kWinoMRMid) {
        WinoGemmRows<kMR, NV>(d, vp, vstride, s0, rows, g.ic, wp, panel_stride, mp);
      } else if (rows > kMRSmall) {
        WinoGemmRows<kWinoMRMid, NV>(d, vp, vstride, s0, rows, g.ic, wp, panel_stride, mp);
      } else {
        WinoGemmRows<kMRSmall, NV>(d, vp, vstride, s0, rows, g.ic, wp, panel_stride, mp);
      }
      s0 += rows;
    }
  }
  for (int r = 0; r < slots; ++r)
    WinoOutputTile(d, g, tiles[r], m, r, slots, bias + oc0, oc0, ncols, res_stride, ep);
}

// Tiles [t0, t0 + slots) and output panels [p0, p1), slots <= kWinogradBlockTiles.
HWY_NOINLINE void WinoBlock(const ConvGeom& g, const float* in, const float* packed_w,
                            const float* bias, const float* residual, float* out,
                            const Epilogue& ep, int64_t t0, int slots, int64_t p0, int64_t p1,
                            float* scratch) {
  const DF d;
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  const int64_t vstride = (g.ic + kN - 1) / kN * kN;
  static_assert(kWinoPos * kWinogradBlockTiles * (kWinogradMaxIc + kWinoCols) <= kWinogradScratchFloats,
                "a block's transforms must fit the scratch");
  float* HWY_RESTRICT v = scratch;  // [kWinoPos][slots][vstride]
  float* HWY_RESTRICT m = scratch + kWinoPos * kWinogradBlockTiles * kWinogradMaxIc;  // [kWinoPos][slots][kWinoCols]
  WinoTile tiles[kWinogradBlockTiles];
  for (int r = 0; r < slots; ++r) {
    tiles[r] = LocateTile(g, in, residual, out, res_stride, t0 + r);
    WinoInputTile(d, g, tiles[r], v, r, slots, vstride);
  }
  constexpr int kTilePanels = kNV * kN / static_cast<int>(kPanel);
  for (int64_t p = p0; p < p1; p += kTilePanels) {
    if (p1 - p >= kTilePanels) {
      WinoColumn<kNV>(d, g, tiles, slots, v, vstride, m, packed_w, bias, p, res_stride, ep);
    } else {  // AVX-512 only: one panel left over
      WinoColumn<kVecPerPanel>(d, g, tiles, slots, v, vstride, m, packed_w, bias, p, res_stride, ep);
    }
  }
}

void Winograd(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
              const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end,
              int64_t panel_begin, int64_t panel_end, float* scratch) {
  // The op validates the geometry; refusing here as well keeps a misuse from
  // overrunning the scratch buffers.
  if (g.kh != 3 || g.kw != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1 ||
      g.groups != 1 || g.ic < 1 || g.ic > kWinogradMaxIc)
    return;
  panel_begin = std::max<int64_t>(panel_begin, 0);
  panel_end = std::min<int64_t>(panel_end, PanelCount(g.oc));
  if (panel_begin >= panel_end) return;
  // The last up to kWinogradBlockTiles tiles of the range (all of a 14x14
  // map) are one block: the weights stream once for them. Before them, blocks
  // of kMR tiles: on 56x56 maps, where the transforms outweigh the weights,
  // blocks of 24 measured 6-9 % slower than blocks of 12 (kernels_bench
  // winograd3x3_56x56*, AMD EPYC Zen 5), their transforms no longer fitting
  // L1 and L2 as well.
  for (int64_t t0 = begin; t0 < end;) {
    const int64_t n = end - t0 <= kWinogradBlockTiles ? end - t0 : kMR;
    WinoBlock(g, in, packed_w, bias, residual, out, ep, t0, static_cast<int>(n), panel_begin, panel_end, scratch);
    t0 += n;
  }
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_WINOGRAD_INL_H_
