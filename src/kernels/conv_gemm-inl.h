// Dense/grouped convolution, GEMM with packed B, and plain MatMul, all built on
// the register tile of tile-inl.h. Included once per Highway target.

#if defined(FCB_KERNELS_CONV_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_CONV_GEMM_INL_H_
#undef FCB_KERNELS_CONV_GEMM_INL_H_
#else
#define FCB_KERNELS_CONV_GEMM_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/kernel_ns.h"
#include "kernels/common-inl.h"
#include "kernels/tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

// Taps that fall into the padding read from this block of zeros instead of
// the input, so the tile's inner loop stays branch-free. Channels beyond its
// length are reduced in chunks of kZeroLen.
inline constexpr int64_t kZeroLen = 512;
alignas(64) static const float kZeros[kZeroLen] = {};

// One conv tile: `rows` output pixels starting at p0 (the last one repeated to
// fill MR) times NV vectors of output channels starting at column col0 of the
// group. wp points at the tile's first packed panel, bias at its first column.
template <int MR, int NV>
HWY_NOINLINE void ConvTile(const ConvGeom& g, const float* in, const float* wp,
                           int64_t panel_stride, const float* bias, const float* residual,
                           float* out, const Epilogue& ep, int64_t p0, int rows, int64_t ic0,
                           int64_t oc0, int64_t ncols) {
  const DF d;
  const int64_t ohw = g.oh * g.ow;
  const int64_t icg = g.ic / g.groups;
  const int64_t res_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  const float* img[MR];
  int64_t iy0[MR], ix0[MR];
  float* op[MR];
  const float* rp[MR];
  // Coordinates of the first pixel by division, the others by stepping: with
  // few input channels (K = 16..32) three 64-bit divisions per row cost more
  // than the tile's FMAs.
  int64_t b = p0 / ohw, oy = (p0 % ohw) / g.ow, ox = (p0 % ohw) % g.ow;
  for (int r = 0; r < MR; ++r) {
    const int64_t p = p0 + std::min(r, rows - 1);
    img[r] = in + b * g.ih * g.iw * g.in_pixel_stride + ic0;
    iy0[r] = oy * g.sh - g.pad_top;
    ix0[r] = ox * g.sw - g.pad_left;
    op[r] = out + p * g.out_pixel_stride + oc0;
    rp[r] = residual ? residual + p * res_stride + oc0 : nullptr;
    if (r + 1 < rows && ++ox == g.ow) {  // padding rows repeat the last pixel
      ox = 0;
      if (++oy == g.oh) oy = 0, ++b;
    }
  }
  VReg acc[MR][NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) {
    const VF bv = hn::LoadU(d, bias + v * kN);
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) acc[r][v] = bv;
  }
  // With unit dilation along x and pixels holding exactly the group's channels,
  // one kernel row's taps (kx, c) are contiguous in both the input and the
  // packed weights: reduce over them in one run of kw*icg (a 7x7 conv over 3
  // channels would otherwise run 49 reductions of length 3).
  const bool merge_row = g.dw == 1 && g.in_pixel_stride == icg && g.kw > 1;
  // Most tiles have every pixel's whole window inside the image: then each
  // kernel row's operands are the pixels' window origins plus a fixed offset,
  // with no bounds to check (a 3x3 stem over 3 channels spent as long on
  // those checks as on its 9-step reductions).
  bool inside = true;
  for (int r = 0; r < MR; ++r)
    inside &= iy0[r] >= 0 && iy0[r] + (g.kh - 1) * g.dh < g.ih && ix0[r] >= 0 &&
              ix0[r] + (g.kw - 1) * g.dw < g.iw;
  if (inside) {
    const float* origin[MR];
    for (int r = 0; r < MR; ++r) origin[r] = img[r] + (iy0[r] * g.iw + ix0[r]) * g.in_pixel_stride;
    const int64_t row_step = g.dh * g.iw * g.in_pixel_stride, tap_step = g.dw * g.in_pixel_stride;
    const float* wt = wp;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const float* ap[MR];
      for (int r = 0; r < MR; ++r) ap[r] = origin[r] + ky * row_step;
      if (merge_row) {
        MicroKernel<MR, NV>(d, ap, g.kw * icg, wt, kPanel, panel_stride, acc);
        wt += g.kw * icg * kPanel;
        continue;
      }
      for (int64_t kx = 0; kx < g.kw; ++kx, wt += icg * kPanel) {
        MicroKernel<MR, NV>(d, ap, icg, wt, kPanel, panel_stride, acc);
        for (int r = 0; r < MR; ++r) ap[r] += tap_step;
      }
    }
    StoreTile<MR, NV>(d, acc, rows, ncols, residual ? rp : nullptr, op, ep);
    return;
  }
  const float* wt = wp;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    if (merge_row) {
      bool all_in = true;
      const float* ap[MR];
      for (int r = 0; r < MR; ++r) {
        const int64_t iy = iy0[r] + ky * g.dh;
        all_in &= iy >= 0 && iy < g.ih && ix0[r] >= 0 && ix0[r] + g.kw <= g.iw;
        ap[r] = img[r] + (iy * g.iw + ix0[r]) * g.in_pixel_stride;
      }
      if (all_in) {
        MicroKernel<MR, NV>(d, ap, g.kw * icg, wt, kPanel, panel_stride, acc);
        wt += g.kw * icg * kPanel;
        continue;
      }
    }
    for (int64_t kx = 0; kx < g.kw; ++kx, wt += icg * kPanel) {
      const float* ap[MR];
      int valid = 0;
      for (int r = 0; r < MR; ++r) {
        const int64_t iy = iy0[r] + ky * g.dh, ix = ix0[r] + kx * g.dw;
        const bool in_bounds = iy >= 0 && iy < g.ih && ix >= 0 && ix < g.iw;
        ap[r] = in_bounds ? img[r] + (iy * g.iw + ix) * g.in_pixel_stride : nullptr;
        valid += in_bounds;
      }
      if (valid == 0) continue;  // the whole tile reads padding here
      if (valid == MR) {
        MicroKernel<MR, NV>(d, ap, icg, wt, kPanel, panel_stride, acc);
        continue;
      }
      for (int64_t c0 = 0; c0 < icg; c0 += kZeroLen) {
        const float* ac[MR];
        for (int r = 0; r < MR; ++r) ac[r] = ap[r] ? ap[r] + c0 : kZeros;
        MicroKernel<MR, NV>(d, ac, std::min(kZeroLen, icg - c0), wt + c0 * kPanel, kPanel,
                            panel_stride, acc);
      }
    }
  }
  StoreTile<MR, NV>(d, acc, rows, ncols, residual ? rp : nullptr, op, ep);
}

// The direct conv's register tile. On AVX-512 it is 8 rows x 3 vectors, not
// the GEMM's 12 x 2: ConvTile reads each row from its own input pixel, and 12
// row pointers do not fit the 16 general registers beside the loop's own (the
// compiler parked them in vector registers and on the stack, putting moves on
// the FMA port). 8 x 3 also needs fewer loads per FMA (11 per 24 vs 14).
inline constexpr int kConvMR = kN == 16 ? 8 : kMR;
inline constexpr int kConvNV = kN == 16 ? 3 : kNV;

// Panels of 16 columns the next column tile of a direct conv takes when `rem`
// are left: AVX-512 takes 3 per 8x3 tile, but never leaves a single panel
// behind (4 panels run as 2 + 2 in 12x2 tiles, not 3 + 1); other targets 1.
inline int64_t ConvTilePanels(int64_t rem) {
  constexpr int kTilePanels = kConvNV * kN / static_cast<int>(kPanel);
  return kTilePanels == 1 ? 1 : rem >= 3 && rem % 3 != 1 ? 3 : rem >= 2 ? 2 : 1;
}

// Output pixels [pb, pe) for one column block of NV vectors, in tiles of MR rows.
template <int MR, int NV>
HWY_INLINE void ConvColumn(const ConvGeom& g, const float* in, const float* wp,
                           int64_t panel_stride, const float* bias, const float* residual,
                           float* out, const Epilogue& ep, int64_t pb, int64_t pe, int64_t ic0,
                           int64_t oc0, int64_t ncols) {
  for (int64_t p0 = pb; p0 < pe; p0 += MR) {
    const int64_t rem = pe - p0;
    if (rem > kMRSmall) {
      ConvTile<MR, NV>(g, in, wp, panel_stride, bias, residual, out, ep, p0,
                       static_cast<int>(std::min<int64_t>(rem, MR)), ic0, oc0, ncols);
    } else {
      ConvTile<kMRSmall, NV>(g, in, wp, panel_stride, bias, residual, out, ep, p0,
                             static_cast<int>(rem), ic0, oc0, ncols);
    }
  }
}

// ---------------------------------------------------------------------------
// Pointwise convs (1x1, stride 1, no padding, ungrouped): output pixel m reads
// input pixel m, so the conv is a GEMM whose rows of A are the input's pixels,
// read in place at a fixed stride. With few input channels (K = 16..64, the
// expansions and projections of mobile networks) a tile's reduction is as
// short as its set-up, so this path keeps the set-up minimal: no window
// coordinates or bounds (ConvTile), no packing of A (GemmRows), and the
// activation fixed per call, so that the whole tile, epilogue included, stays
// in registers. Measured on a 1x1 conv 16 -> 48 channels at 45x45 (output in
// L2): 66 -> 168 GFLOP/s on a Zen 5 at x86-64-v4.

struct PointwiseArgs {
  const float* in;
  int64_t lda;  // input pixel stride
  const float* res;
  int64_t ldr;  // residual pixel stride
  float* out;
  int64_t ldc;  // output pixel stride
  int64_t K;    // input channels
  int64_t panel_stride;  // floats from one packed panel to the next (K * 16)
};

// Pixels [begin, end) times the NV vectors of columns [col0, col0 + ncols),
// whose packed weights start at wp and bias at bp, in tiles of MR rows; a
// last partial tile repeats its last row.
template <int MR, int NV, Act A>
HWY_NOINLINE void PointwiseColumn(const PointwiseArgs& p, const float* wp, const float* bp,
                                  int64_t col0, int64_t ncols, int64_t begin, int64_t end,
                                  const Epilogue& ep) {
  const DF d;
  VReg bias[NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) bias[v] = hn::LoadU(d, bp + v * kN);  // padded per PackConvBias
  int64_t row_off[MR];
  HWY_UNROLL(16)
  for (int r = 0; r < MR; ++r) row_off[r] = r * p.lda;
  for (int64_t m0 = begin; m0 < end; m0 += MR) {
    const int rows = static_cast<int>(std::min<int64_t>(MR, end - m0));
    const float* a = p.in + m0 * p.lda;
    const float* ap[MR];
    float* op[MR];
    const float* rp[MR];
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      const int64_t rr = std::min(r, rows - 1);
      ap[r] = rows == MR ? a + row_off[r] : a + rr * p.lda;
      op[r] = p.out + (m0 + rr) * p.ldc + col0;
      rp[r] = p.res ? p.res + (m0 + rr) * p.ldr + col0 : nullptr;
    }
    VReg acc[MR][NV];
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) acc[r][v] = bias[v];
    }
    MicroKernel<MR, NV>(d, ap, p.K, wp, kPanel, p.panel_stride, acc);
    StoreTileT<MR, NV, A>(d, acc, rows, ncols, p.res ? rp : nullptr, op, ep);
  }
}

// True when g is a pointwise conv this path takes; then computes output
// pixels [begin, end).
bool Pointwise(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
               const float* residual, float* out, const Epilogue& ep, int64_t begin,
               int64_t end) {
  if (g.groups != 1 || g.kh != 1 || g.kw != 1 || g.sh != 1 || g.sw != 1 || g.pad_top != 0 ||
      g.pad_left != 0 || g.oh != g.ih || g.ow != g.iw || g.ic < 1)
    return false;
  const PointwiseArgs p{in,  g.in_pixel_stride, residual, g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride,
                        out, g.out_pixel_stride, g.ic, g.ic * kPanel};
  const int64_t panels = PanelCount(g.oc);
  constexpr int kTilePanels = kConvNV * kN / static_cast<int>(kPanel);
  WithRegAct(ep, [&]<Act A>() {
    for (int64_t pn = 0, step = 0; pn < panels; pn += step) {
      step = ConvTilePanels(panels - pn);
      const int64_t col0 = pn * kPanel;
      const int64_t ncols = std::min<int64_t>(g.oc - col0, step * kPanel);
      const float* wp = packed_w + pn * p.panel_stride;
      if (step == kTilePanels) {
        PointwiseColumn<kConvMR, kConvNV, A>(p, wp, bias + col0, col0, ncols, begin, end, ep);
      } else if (step == 2) {  // AVX-512 only
        PointwiseColumn<kMR, 2 * kVecPerPanel, A>(p, wp, bias + col0, col0, ncols, begin, end, ep);
      } else {  // AVX-512 only: a single panel
        PointwiseColumn<kMR, kVecPerPanel, A>(p, wp, bias + col0, col0, ncols, begin, end, ep);
      }
    }
  });
  return true;
}

struct RowMap;
HWY_NOINLINE void GemmRows(int64_t N, int64_t K, const RowMap& rm, const float* packed_b,
                           const float* bias, const Epilogue& ep, int64_t begin, int64_t end,
                           float* scratch);
bool ConvAsGemm(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                const float* residual, float* out, const Epilogue& ep, int64_t begin,
                int64_t end, float* scratch);
bool SmallChannelConv(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                      const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end,
                      float* scratch);

void Conv(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
          const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end,
          float* scratch) {
  if (g.in_nchw) {  // only convs the plane path takes are lowered with an NCHW input
    SmallChannelConv(g, in, packed_w, bias, residual, out, ep, begin, end, scratch);
    return;
  }
  if (g.ic <= 128 && Pointwise(g, in, packed_w, bias, residual, out, ep, begin, end)) return;
  if (SmallChannelConv(g, in, packed_w, bias, residual, out, ep, begin, end, scratch)) return;
  if (ConvAsGemm(g, in, packed_w, bias, residual, out, ep, begin, end, scratch)) return;
  if (Pointwise(g, in, packed_w, bias, residual, out, ep, begin, end)) return;
  const int64_t icg = g.ic / g.groups, ocg = g.oc / g.groups;
  const int64_t panels = PanelCount(ocg);
  const int64_t panel_stride = g.kh * g.kw * icg * kPanel;
  constexpr int kTilePanels = kConvNV * kN / static_cast<int>(kPanel);
  // A block of pixels is swept once per column block, so its input stays in
  // cache while every panel of weights passes over it; each block streams all
  // the weights once. Blocks are therefore as large as an L2-resident input
  // allows (~512 KiB), and the range is split evenly so that no block is a
  // sliver (49 pixels would otherwise run as 48 + 1, streaming 9 MiB of a
  // 7x7x512 layer's weights twice).
  const int64_t in_floats = std::max<int64_t>(1, g.ic * g.sh * g.sw);
  const int64_t max_block = std::clamp<int64_t>(131072 / in_floats, 4 * kConvMR, 1024);
  const int64_t nblocks = (end - begin + max_block - 1) / max_block;
  const int64_t block =
      nblocks > 0 ? ((end - begin + nblocks - 1) / nblocks + kConvMR - 1) / kConvMR * kConvMR : 1;
  for (int64_t pb = begin; pb < end; pb += block) {
    const int64_t pe = std::min(end, pb + block);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* wg = packed_w + grp * panels * panel_stride;
      const float* bg = bias + grp * panels * kPanel;
      for (int64_t p = 0, step = 0; p < panels; p += step) {
        step = ConvTilePanels(panels - p);
        const int64_t col0 = p * kPanel;
        const int64_t ncols = std::min<int64_t>(ocg - col0, step * kPanel);
        const float* wp = wg + p * panel_stride;
        if (step == kTilePanels) {
          ConvColumn<kConvMR, kConvNV>(g, in, wp, panel_stride, bg + col0, residual, out, ep,
                                       pb, pe, grp * icg, grp * ocg + col0, ncols);
        } else if (step == 2) {  // AVX-512 only
          ConvColumn<kMR, 2 * kVecPerPanel>(g, in, wp, panel_stride, bg + col0, residual, out,
                                            ep, pb, pe, grp * icg, grp * ocg + col0, ncols);
        } else {  // AVX-512 only: a single panel
          ConvColumn<kMR, kVecPerPanel>(g, in, wp, panel_stride, bg + col0, residual, out, ep,
                                        pb, pe, grp * icg, grp * ocg + col0, ncols);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// GEMM with B packed as [ceil(N/16)][K][16].

// Blocking in the GotoBLAS manner, turned around for a kernel that broadcasts
// A and vector-loads B: the reduction is split into blocks of kKC and the rows
// into blocks of kMC. A block of A (kMC x kKC, 120 KiB, stays in L2) is
// copied once into the thread's scratch (kGemmScratchFloats), each row tile as [row][kKC] (a plain copy
// per row; rows of A that lie a multiple of 4 KiB apart would otherwise
// compete for the same L1 sets, and rows at a compile-time distance need one
// address register, not one per row). Then each column tile's sliver of B
// (kKC x 32 floats, 32 KiB) is swept over every row tile of the block while
// it sits in L1, instead of streaming B from L2 once per row tile. kKC = 256
// measured faster than 128 (half the tile set-up and partial-sum traffic).
inline constexpr int64_t kKC = 256;
inline constexpr int64_t kMC = 10 * kMR;

// acc[r][v] += sum_k apk[r * kKC + k] * w[k * kPanel + VecOffset(v)]. The
// rows of the packed tile lie a compile-time kKC floats apart, so one base and
// one index register address all MR broadcasts (MR row pointers would not fit
// the general registers), and packing is a plain copy of each row.
// kNext: instead of prefetching this sliver of B ahead, ask for the same
// lines of the next sliver (next: its start, same panel stride) into L2, so
// that the next column tile's first row tile does not wait on L3 or DRAM.
// A prefetch past the end of B (a last, one-panel column tile) cannot fault.
template <int MR, int NV, bool kNext>
HWY_INLINE void MicroKernelPackedA(DF d, const float* apk, int64_t kc, const float* w,
                                   int64_t panel_stride, const float* next, VReg (&acc)[MR][NV]) {
  int64_t off[NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) off[v] = (v * kN / kPanel) * panel_stride + (v * kN) % kPanel;
  // Two reduction steps per iteration: the loop's pointer and counter updates
  // compete with the FMAs for execution ports, so halving them is worth ~3 %.
  int64_t k = 0;
  for (; k + 2 <= kc; k += 2, w += 2 * kPanel) {
    HWY_UNROLL(2)
    for (int u = 0; u < 2; ++u) {
      VReg wv[NV];
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) {
        if ((v * kN) % kPanel == 0) {
          if constexpr (kNext) {
            __builtin_prefetch(next + (k + u) * kPanel + off[v], 0, 2);
          } else {
            hwy::Prefetch(w + u * kPanel + off[v] + kWeightPrefetchSteps * kPanel);
          }
        }
        wv[v] = hn::LoadU(d, w + u * kPanel + off[v]);
      }
      HWY_UNROLL(16)
      for (int r = 0; r < MR; ++r) {
        const VF b = hn::Set(d, apk[r * kKC + k + u]);
        HWY_UNROLL(16)
        for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(b, wv[v], acc[r][v]);
      }
    }
  }
  if (k < kc) {
    VReg wv[NV];
    HWY_UNROLL(16)
    for (int v = 0; v < NV; ++v) wv[v] = hn::LoadU(d, w + off[v]);
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      const VF b = hn::Set(d, apk[r * kKC + k]);
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(b, wv[v], acc[r][v]);
    }
  }
}

// One MR x NV tile of C for reduction block [k0, k0 + kc): starts from the
// bias (first block) or C's partial sums, applies the activation after the
// last block. cp: the tile's MR row pointers (padding rows repeat the last).
template <int MR, int NV>
HWY_NOINLINE void GemmTile(int64_t K, const float* apk, const float* bp, const float* bias,
                           float* const* cp, const float* const* rp, const Epilogue& ep, int rows,
                           int64_t col0, int64_t ncols, int64_t k0, int64_t kc, const float* next) {
  const DF d;
  VReg acc[MR][NV];
  const bool full = rows == MR && ncols == NV * kN;
  const bool last = k0 + kc >= K;  // residual and activation apply to the finished sum
  // Every loop over the accumulators is unrolled, so that they stay in
  // registers: a loop the compiler keeps puts them on the stack for the whole
  // tile (with K = 16, a 1x1 conv over 16 channels, that cost as much as the
  // FMAs).
  if (k0 == 0) {  // the first reduction block starts from the bias
    HWY_UNROLL(16)
    for (int v = 0; v < NV; ++v) {
      const int64_t n = ncols - v * kN;
      const VF bv = bias == nullptr || n <= 0 ? hn::Zero(d)
                    : n >= kN                 ? hn::LoadU(d, bias + col0 + v * kN)
                                              : LoadN(d, bias + col0 + v * kN, n);
      HWY_UNROLL(16)
      for (int r = 0; r < MR; ++r) acc[r][v] = bv;
    }
  } else if (full) {  // continue the partial sums of earlier blocks
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::LoadU(d, cp[r] + col0 + v * kN);
    }
  } else {
    HWY_UNROLL(16)
    for (int v = 0; v < NV; ++v) {
      const int64_t n = ncols - v * kN;
      HWY_UNROLL(16)
      for (int r = 0; r < MR; ++r)
        acc[r][v] = n > 0 && r < rows ? LoadN(d, cp[r] + col0 + v * kN, n) : hn::Zero(d);
    }
  }
  if (next != nullptr) {
    MicroKernelPackedA<MR, NV, true>(d, apk, kc, bp + k0 * kPanel, K * kPanel, next, acc);
  } else {
    MicroKernelPackedA<MR, NV, false>(d, apk, kc, bp + k0 * kPanel, K * kPanel, nullptr, acc);
  }
  float* op[MR];
  const float* res[MR];
  for (int r = 0; r < MR; ++r) {
    op[r] = cp[r] + col0;
    res[r] = rp ? rp[r] + col0 : nullptr;
  }
  // The epilogue inlined for each activation: out of line, the tile's
  // accumulators pass through the stack (bert_encoder -6 % at one thread;
  // the same in ConvTile made ResNet-50's convs slower).
  const Epilogue& e = last ? ep : Epilogue{};
  const float* const* r = last && rp ? res : nullptr;
  WithRegAct(e, [&]<Act A>() __attribute__((always_inline)) { StoreTileT<MR, NV, A>(d, acc, rows, ncols, r, op, e); });
}

// Where the rows of A, C and the residual lie: plain strided rows (GEMM), or
// the output pixels of an ungrouped convolution read through an implicit
// im2col: A[m][k] is channel k % ic of tap k / ic of output pixel m's window
// (zeros where the tap falls into the padding).
struct RowMap {
  const float* a;
  int64_t lda;
  float* c;
  int64_t ldc;
  const float* res = nullptr;  // residual rows (ldr apart), or null
  int64_t ldr = 0;
  int64_t ow = 0;  // 0: plain rows; else the conv geometry below
  int64_t ohw = 0, ih = 0, iw = 0, ic = 0, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  // K splits into segments of this many columns that a reduction block must
  // not straddle (one conv tap); 0: no segments.
  int64_t seg = 0;
  // Instead of reading A in place, gather each row's whole window (K =
  // kh*kw*ic <= kKC - kN, one reduction block) when packing: convs with few
  // input channels (the RGB stem), where a tap is too short a reduction.
  bool gather = false;
  int64_t kh = 1;
  const float* a_end = nullptr;  // end of the input tensor (gather reads stop there)
  // Points at A[m][k]; the next kc <= kKC values are A[m][k .. k + kc).
  const float* ARow(int64_t m, int64_t k) const {
    if (ow == 0) return a + m * lda + k;
    const int64_t b = m / ohw, q = m % ohw, tap = k / ic;
    const int64_t iy = (q / ow) * sh - pt + (tap / kw) * dh;
    const int64_t ix = (q % ow) * sw - pl + (tap % kw) * dw;
    if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) return kZeros;
    return a + ((b * ih + iy) * iw + ix) * lda + k % ic;
  }
};

// The last tile of a row range may be this tall (AVX-512 and 512-bit SVE:
// 14 x 2 accumulators, 2 weight vectors and a broadcast fit 32 registers), so
// that 12 k + 1 and 12 k + 2 rows end in one tile, not in a tile of one or two
// rows that streams the block of B again for them alone (7x7 maps: 49 pixels,
// 12 k + 1; measured, those 1-row tiles were 4 % of mnasnet1_0 at one thread).
inline constexpr int kMRWide = kN == 16 ? kMR + 2 : kMR;

// Row tiles of one block: the main tile, then smaller ones for the remainder.
struct RowTile {
  int64_t m0;
  int rows, mr;   // valid rows, tile height (kMR, kMR + 1, kMRWide, kMRSmall or 1)
  int64_t apk;    // offset of its packed A in the block buffer
};

// Copies n floats from src to dst with whole vectors. It may write up to kN - 1
// floats past dst + n (the caller leaves room) and reads past src + n only
// while that stays before `src_end`.
HWY_INLINE void CopyRun(const float* src, int64_t n, const float* src_end, float* dst) {
  const DF d;
  int64_t i = 0;
  for (; i < n && src + i + kN <= src_end; i += kN) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
  for (; i < n; ++i) dst[i] = src[i];
}

// One row of the implicit im2col matrix, for the output pixel at (b, oy, ox):
// for each kernel row ky, kw*ic floats (a contiguous run of the NHWC input
// when the window lies inside the image), zeros where it falls into padding.
HWY_INLINE void GatherWindow(const RowMap& rm, int64_t b, int64_t oy, int64_t ox, float* dst) {
  const int64_t iy0 = oy * rm.sh - rm.pt, ix0 = ox * rm.sw - rm.pl;
  const int64_t run = rm.kw * rm.ic;
  const bool inside_x = rm.dw == 1 && rm.lda == rm.ic && ix0 >= 0 && ix0 + rm.kw <= rm.iw;
  for (int64_t ky = 0; ky < rm.kh; ++ky, dst += run) {
    const int64_t iy = iy0 + ky * rm.dh;
    if (iy < 0 || iy >= rm.ih) {
      std::memset(dst, 0, static_cast<size_t>(run) * sizeof(float));
      continue;
    }
    const float* row = rm.a + (b * rm.ih + iy) * rm.iw * rm.lda;
    if (inside_x) {
      CopyRun(row + ix0 * rm.ic, run, rm.a_end, dst);
      continue;
    }
    for (int64_t kx = 0; kx < rm.kw; ++kx) {
      const int64_t ix = ix0 + kx * rm.dw;
      for (int64_t c = 0; c < rm.ic; ++c)
        dst[kx * rm.ic + c] = ix < 0 || ix >= rm.iw ? 0.f : row[ix * rm.lda + c];
    }
  }
}

// Copies rows [m0, m0 + rows) x columns [k0, k0 + kc) of A to apk[r * kKC + k]
// (rows past `rows` repeat the last one); with rm.gather, each row's whole
// window (GatherWindow).
template <int MR>
HWY_INLINE void PackATile(const RowMap& rm, int64_t m0, int rows, int64_t k0, int64_t kc,
                          float* apk) {
  if (rm.gather) {  // walk the pixels in order: one division per tile, not per row
    int64_t b = m0 / rm.ohw, q = m0 % rm.ohw, oy = q / rm.ow, ox = q % rm.ow;
    for (int r = 0; r < MR; ++r) {
      if (r > 0 && r < rows && ++ox == rm.ow) {
        ox = 0;
        if (++oy * rm.ow == rm.ohw) oy = 0, ++b;
      }
      GatherWindow(rm, b, oy, ox, apk + r * kKC);
    }
    return;
  }
  for (int r = 0; r < MR; ++r) {
    const float* a = rm.ARow(m0 + std::min(r, rows - 1), k0);
    std::memcpy(apk + r * kKC, a, static_cast<size_t>(kc) * sizeof(float));
  }
}

template <int MR, int NV>
HWY_INLINE void GemmTileAt(const RowTile& t, int64_t K, const float* apk, const float* bp,
                           const float* bias, const RowMap& rm, const Epilogue& ep,
                           int64_t col0, int64_t ncols, int64_t k0, int64_t kc, const float* next) {
  float* cp[MR];
  const float* rp[MR];
  for (int r = 0; r < MR; ++r) {
    const int64_t m = t.m0 + std::min(r, t.rows - 1);
    cp[r] = rm.c + m * rm.ldc;
    rp[r] = rm.res ? rm.res + m * rm.ldr : nullptr;
  }
  GemmTile<MR, NV>(K, apk + t.apk, bp, bias, cp, rm.res ? rp : nullptr, ep, t.rows, col0, ncols,
                   k0, kc, next);
}

template <int NV>
HWY_INLINE void GemmColumnTile(const RowTile* tiles, int ntiles, int64_t K, const float* apk,
                               const float* bp, const float* bias, const RowMap& rm,
                               const Epilogue& ep, int64_t col0, int64_t ncols, int64_t k0,
                               int64_t kc, const float* next_sliver) {
  for (int i = 0; i < ntiles; ++i) {
    const RowTile& t = tiles[i];
    const float* next = i + 1 == ntiles ? next_sliver : nullptr;
    if (t.mr == kMR) {
      GemmTileAt<kMR, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc, next);
    } else if (kMRWide > kMR && t.mr == kMR + 1) {
      GemmTileAt<kMR + (kMRWide > kMR), NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc, next);
    } else if (kMRWide > kMR && t.mr == kMRWide) {
      GemmTileAt<kMRWide, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc, next);
    } else if (t.mr == kMRSmall) {
      GemmTileAt<kMRSmall, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc, next);
    } else {
      GemmTileAt<1, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc, next);
    }
  }
}

// Rows [begin, end) of C = act(A B + bias [+ residual]) for K >= 1.
HWY_NOINLINE void GemmRows(int64_t N, int64_t K, const RowMap& rm, const float* packed_b,
                           const float* bias, const Epilogue& ep, int64_t begin, int64_t end,
                           float* scratch) {
  static_assert(kMC * kKC <= kGemmScratchFloats, "a block of packed A must fit the scratch");
  float* HWY_RESTRICT apk = scratch;  // kMC x kKC, the caller's per-thread scratch
  RowTile tiles[kMC];
  const int64_t panels = PanelCount(N);
  constexpr int kTilePanels = kNV * kN / static_cast<int>(kPanel);
  static_assert(kKC <= kZeroLen, "a reduction block of padding reads kZeros");
  // Row blocks outermost: a block's rows of C (kMC x N) stay in L2 while every
  // reduction block adds into them. With reduction blocks outermost, all of C
  // would pass through L3 once per block (4 MiB per pass at M = N = 1024).
  // Row blocks of equal size (whole tiles), not kMC and a remainder: every
  // row block streams all of B, and B does not stay in cache when it is a
  // transformer's weights (7 MiB for 768 x 2304), so a remainder block of 8
  // rows (M = 128: 120 + 8) would pay a whole pass over B for 8 rows of work,
  // bound by memory. 128 rows run as 72 + 56.
  const int64_t nblocks = (end - begin + kMC - 1) / kMC;
  const int64_t mc = nblocks > 0 ? ((end - begin + nblocks - 1) / nblocks + kMR - 1) / kMR * kMR : kMC;
  for (int64_t mb = begin; mb < end; mb += mc) {
    const int64_t me = std::min(end, mb + mc);
    for (int64_t k0 = 0, kc = 0; k0 < K; k0 += kc) {
      kc = std::min(kKC, rm.seg ? rm.seg - k0 % rm.seg : K - k0);
      int ntiles = 0;
      int64_t off = 0;
      for (int64_t m0 = mb; m0 < me;) {
        const int64_t rem = me - m0;
        RowTile& t = tiles[ntiles++];
        t.m0 = m0;
        t.mr = rem > kMR && rem <= kMRWide ? static_cast<int>(rem) : rem > kMRSmall ? kMR : rem > 1 ? kMRSmall : 1;
        t.rows = static_cast<int>(std::min<int64_t>(rem, t.mr));
        t.apk = off;
        if (t.mr == kMR) {
          PackATile<kMR>(rm, m0, t.rows, k0, kc, apk + off);
        } else if (kMRWide > kMR && t.mr == kMR + 1) {
          PackATile<kMR + (kMRWide > kMR)>(rm, m0, t.rows, k0, kc, apk + off);
        } else if (kMRWide > kMR && t.mr == kMRWide) {
          PackATile<kMRWide>(rm, m0, t.rows, k0, kc, apk + off);
        } else if (t.mr == kMRSmall) {
          PackATile<kMRSmall>(rm, m0, t.rows, k0, kc, apk + off);
        } else {
          PackATile<1>(rm, m0, t.rows, k0, kc, apk + off);
        }
        off += t.mr * kKC;
        m0 += t.rows;
      }
      for (int64_t p = 0; p < panels; p += kTilePanels) {
        const int64_t col0 = p * kPanel;
        const int64_t ncols = std::min<int64_t>(N - col0, kTilePanels * kPanel);
        const float* bp = packed_b + p * K * kPanel;
        // The last row tile asks for the next column tile's sliver of B.
        const float* next = p + kTilePanels < panels ? packed_b + (p + kTilePanels) * K * kPanel + k0 * kPanel
                            : k0 + kc < K            ? packed_b + (k0 + kc) * kPanel
                                                     : nullptr;
        if (panels - p >= kTilePanels) {
          GemmColumnTile<kNV>(tiles, ntiles, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc, next);
        } else {  // AVX-512 only: one panel left over
          GemmColumnTile<kVecPerPanel>(tiles, ntiles, K, apk, bp, bias, rm, ep, col0, ncols, k0,
                                       kc, next);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Convs over few input channels (the RGB stems: a 3x3 stride-2 conv has
// K = 27, a 7x7 one K = 147). Read in place (ConvTile), a tile keeps one
// input pointer per row and runs a short reduction per kernel row; gathered
// per window (im2col), the copy costs as much as the FMAs. Here the input
// rows a run of output pixels needs are copied once into "planes": for input
// channel c, kernel row ky and column phase f < sw, plane[t] holds input
// column (ox0 + t) * sw + f - pad_left of row oy * sh + ky * dh - pad_top,
// zero where that lies in the padding. Tap (ky, kx, c) of output pixel
// ox0 + t then reads plane (c, ky, (kx * dw) % sw) at t + (kx * dw) / sw, so
// the MR pixels of a tile read MR consecutive floats at a fixed offset from
// one pointer per tap: no bounds, no row pointers, the broadcasts folded into
// the FMAs. The copy is about one float per output pixel and plane; the
// FMAs are K per pixel and output vector. The input may be NHWC or NCHW
// (ConvGeom::in_nchw), which lets the stem read the model's NCHW input
// without a transpose step.

template <int MR, int NV, Act A>
HWY_NOINLINE void PlaneColumn(const float* const* taps, int64_t K, const float* wp,
                              int64_t panel_stride, const float* bias, int64_t len, float* out,
                              int64_t ldo, const float* res, int64_t ldr, int64_t ncols,
                              const Epilogue& ep) {
  const DF d;
  int64_t off[NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) off[v] = (v * kN / kPanel) * panel_stride + (v * kN) % kPanel;
  VReg bv[NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) bv[v] = hn::LoadU(d, bias + v * kN);  // padded per PackConvBias
  for (int64_t x0 = 0; x0 < len; x0 += MR) {
    const int rows = static_cast<int>(std::min<int64_t>(MR, len - x0));
    VReg acc[MR][NV];
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) acc[r][v] = bv[v];
    }
    const float* w = wp;
    for (int64_t k = 0; k < K; ++k, w += kPanel) {
      const float* a = taps[k] + x0;
      // Opaque to the optimizer: otherwise it keeps x0 + r for every row in
      // a register of its own (12 of them, spilled) instead of addressing
      // the MR floats at fixed offsets from a.
      __asm__("" : "+r"(a));
      VReg wv[NV];
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) wv[v] = hn::LoadU(d, w + off[v]);
      HWY_UNROLL(16)
      for (int r = 0; r < MR; ++r) {
        const VF b = hn::Set(d, a[r]);
        HWY_UNROLL(16)
        for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(b, wv[v], acc[r][v]);
      }
    }
    float* op[MR];
    const float* rp[MR];
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      const int64_t x = x0 + std::min(r, rows - 1);
      op[r] = out + x * ldo;
      rp[r] = res ? res + x * ldr : nullptr;
    }
    StoreTileT<MR, NV, A>(d, acc, rows, ncols, res ? rp : nullptr, op, ep);
  }
}

// dst[t] = src[t * step] for t < n.
HWY_INLINE void CopyStrided(float* HWY_RESTRICT dst, const float* HWY_RESTRICT src, int64_t n,
                            int64_t step) {
  if (step == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  int64_t t = 0;
#if HWY_TARGET != HWY_SCALAR
  {
    const DF d;
    if (step == 2) {  // a stride-2 conv over NCHW rows: the even lanes of two vectors
      for (; t + kN < n; t += kN)
        hn::StoreU(hn::ConcatEven(d, hn::LoadU(d, src + 2 * t + kN), hn::LoadU(d, src + 2 * t)), d, dst + t);
    } else {
      const hn::RebindToSigned<DF> di;
      const auto idx = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(step)));
      for (; t + kN <= n; t += kN) hn::StoreU(hn::GatherIndex(d, src + t * step, idx), d, dst + t);
    }
  }
#endif
  for (; t < n; ++t) dst[t] = src[t * step];
}

// Fills the planes of output pixels [ox0, ox0 + plane_len) of row oy of image
// b (see above); plane i = (c * kh + ky) * sw + f starts at buf + i * plane_len.
inline void FillPlanes(const ConvGeom& g, const float* in, int64_t b, int64_t oy, int64_t ox0,
                       int64_t plane_len, float* buf) {
  const int64_t ps = g.in_nchw ? 1 : g.in_pixel_stride;         // pixel stride
  const int64_t cs = g.in_nchw ? g.ih * g.iw : 1;              // channel stride
  const int64_t is = g.in_nchw ? g.ic * g.ih * g.iw : g.ih * g.iw * ps;  // image stride
  for (int64_t c = 0; c < g.ic; ++c) {
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.sh - g.pad_top + ky * g.dh;
      for (int64_t f = 0; f < g.sw; ++f) {
        float* dst = buf + ((c * g.kh + ky) * g.sw + f) * plane_len;
        if (iy < 0 || iy >= g.ih) {
          std::memset(dst, 0, static_cast<size_t>(plane_len) * sizeof(float));
          continue;
        }
        // Input column of plane entry t: x0 + t * sw; valid for t in [lo, hi).
        const int64_t x0 = ox0 * g.sw + f - g.pad_left;
        const int64_t lo = std::clamp<int64_t>((-x0 + g.sw - 1) / g.sw, 0, plane_len);
        const int64_t hi = std::clamp<int64_t>(x0 >= g.iw ? 0 : (g.iw - x0 + g.sw - 1) / g.sw, lo, plane_len);
        std::fill(dst, dst + lo, 0.f);
        std::fill(dst + hi, dst + plane_len, 0.f);
        const float* src = in + b * is + c * cs + iy * g.iw * ps + (x0 + lo * g.sw) * ps;
        CopyStrided(dst + lo, src, hi - lo, g.sw * ps);
      }
    }
  }
}

template <Act A>
HWY_NOINLINE void PlaneConv(const ConvGeom& g, const float* in, const float* packed_w,
                            const float* bias, const float* residual, float* out,
                            const Epilogue& ep, int64_t begin, int64_t end, float* buf) {
  const int64_t seg = PlaneSegment(g);
  const int64_t plane_len = PlaneLength(g, seg);
  const int64_t K = g.kh * g.kw * g.ic, panel_stride = K * kPanel;
  const int64_t panels = PanelCount(g.oc);
  constexpr int kTilePanels = kConvNV * kN / static_cast<int>(kPanel);
  const int64_t ldr = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  // Tap k = (ky * kw + kx) * ic + c, the order of the packed weights.
  const float* taps[kPlaneMaxTaps];
  for (int64_t ky = 0, k = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx)
      for (int64_t c = 0; c < g.ic; ++c, ++k) {
        const int64_t q = kx * g.dw;
        taps[k] = buf + ((c * g.kh + ky) * g.sw + q % g.sw) * plane_len + q / g.sw;
      }
  const int64_t ohw = g.oh * g.ow;
  for (int64_t p = begin; p < end;) {
    const int64_t b = p / ohw, oy = (p % ohw) / g.ow, ox0 = p % g.ow;
    const int64_t len = std::min({g.ow - ox0, end - p, seg});
    FillPlanes(g, in, b, oy, ox0, plane_len, buf);
    float* o = out + p * g.out_pixel_stride;
    const float* r = residual ? residual + p * ldr : nullptr;
    for (int64_t pn = 0, step = 0; pn < panels; pn += step) {
      step = ConvTilePanels(panels - pn);
      const int64_t col0 = pn * kPanel;
      const int64_t ncols = std::min<int64_t>(g.oc - col0, step * kPanel);
      const float* wp = packed_w + pn * panel_stride;
      const float* rc = r ? r + col0 : nullptr;
      if (step == kTilePanels) {
        PlaneColumn<kConvMR, kConvNV, A>(taps, K, wp, panel_stride, bias + col0, len, o + col0,
                                         g.out_pixel_stride, rc, ldr, ncols, ep);
      } else if (step == 2) {  // AVX-512 only
        PlaneColumn<kMR, 2 * kVecPerPanel, A>(taps, K, wp, panel_stride, bias + col0, len,
                                              o + col0, g.out_pixel_stride, rc, ldr, ncols, ep);
      } else {  // AVX-512 only: a single panel
        PlaneColumn<kMR, kVecPerPanel, A>(taps, K, wp, panel_stride, bias + col0, len, o + col0,
                                          g.out_pixel_stride, rc, ldr, ncols, ep);
      }
    }
    p += len;
  }
}

// True when g is a conv this path takes; then computes output pixels [begin, end).
bool SmallChannelConv(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                      const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end,
                      float* scratch) {
  // A tile reads its pixels' residual before it writes them, so the residual
  // may be the output itself.
  if (!PlanarConvApplies(g)) return false;
  static_assert(kMR <= kPlaneMaxRows && kConvMR <= kPlaneMaxRows, "a tile's rows must fit a plane's slack");
  WithRegAct(ep, [&]<Act A>() { PlaneConv<A>(g, in, packed_w, bias, residual, out, ep, begin, end, scratch); });
  return true;
}

// An ungrouped conv is a GEMM over output pixels (an implicit im2col, see
// RowMap) whose packed weights ([panel][ky][kx][ic][16]) already are
// PackGemmB's layout with K = kh*kw*ic; used for 1x1 convs. The GEMM path copies blocks of the
// input into a contiguous [k][row] buffer; read in place (ConvTile), the rows
// of a tile lie >= 2 KiB apart when pixels are wide or strided and map onto
// few L1 sets. The copy pays off then, or when many column tiles reuse it
// (oc >= 256). Returns false for the convs left to ConvTile.
bool ConvAsGemm(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                const float* residual, float* out, const Epilogue& ep, int64_t begin,
                int64_t end, float* scratch) {
  if (g.groups != 1 || g.ic < 1 || (residual != nullptr && residual == out)) return false;
  // Few input channels (5 to 7; 1 to 4 take the plane path, PlaneConv) and
  // a large window: ConvTile would run a short reduction per tap, mostly loop
  // overhead, so the whole window is gathered into one reduction block
  // (im2col per row block, in L2). Measured when ResNet's 7x7 RGB stem took
  // it: 2.2 -> 2.0 ms; 3x3 windows (K = 27) got slower, their packing is not
  // repaid by so short a reduction.
  const int64_t K = g.kh * g.kw * g.ic;
  const bool gather = g.ic < 8 && K >= 64 && K + kN <= kKC;
  // Measured on ResNets: for 3x3 convs with many channels the copy (9x the
  // input) costs more than ConvTile's in-place reads lose, so otherwise only
  // 1x1 convs take this path.
  if (!gather) {
    if (g.kh != 1 || g.kw != 1) return false;
    if (g.oc < 256 && g.in_pixel_stride * g.sw < 512) return false;
  }
  RowMap rm{in, g.in_pixel_stride, out, g.out_pixel_stride};
  rm.res = residual;
  rm.ldr = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  rm.ow = g.ow, rm.ohw = g.oh * g.ow, rm.ih = g.ih, rm.iw = g.iw, rm.ic = g.ic, rm.kw = g.kw;
  rm.sh = g.sh, rm.sw = g.sw, rm.dh = g.dh, rm.dw = g.dw, rm.pt = g.pad_top, rm.pl = g.pad_left;
  rm.seg = gather ? 0 : g.ic;
  rm.gather = gather, rm.kh = g.kh;
  rm.a_end = in + g.n * g.ih * g.iw * g.in_pixel_stride;
  GemmRows(g.oc, K, rm, packed_w, bias, ep, begin, end, scratch);
  return true;
}

void Gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* packed_b,
          const float* bias, float* C, int64_t ldc, const Epilogue& ep, int64_t begin,
          int64_t end, float* scratch) {
  if (K == 0) {  // no reduction: C = act(bias)
    const DF d;
    for (int64_t m = begin; m < end; ++m)
      for (int64_t n = 0; n < N; n += kN)
        StoreN(ApplyAct(d, bias ? LoadN(d, bias + n, N - n) : hn::Zero(d), ep), d,
               C + m * ldc + n, N - n);
    return;
  }
  RowMap rm{A, lda, C, ldc};
  GemmRows(N, K, rm, packed_b, bias, ep, begin, end, scratch);
}

// ---------------------------------------------------------------------------
// Plain row-major MatMul: B is read in place, vectorized along its rows.

template <int MR, int NV>
HWY_NOINLINE void MatMulTile(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                             float* C, int64_t ldc, int64_t m0, int rows, int64_t n0) {
  const DF d;
  const float* ap[MR];
  float* cp[MR];
  for (int r = 0; r < MR; ++r) {
    const int64_t m = m0 + std::min(r, rows - 1);
    ap[r] = A + m * lda;
    cp[r] = C + m * ldc + n0;
  }
  VReg acc[MR][NV];
  HWY_UNROLL(16)
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::Zero(d);
  // panel_stride = kPanel makes VecOffset(v) = v * kN: plain consecutive columns.
  MicroKernel<MR, NV>(d, ap, K, B + n0, ldb, kPanel, acc);
  const Epilogue no_act{};
  StoreTile<MR, NV>(d, acc, rows, NV * kN, nullptr, cp, no_act);
}

template <int NV>
HWY_INLINE void MatMulColumn(int64_t K, const float* A, int64_t lda, const float* B,
                             int64_t ldb, float* C, int64_t ldc, int64_t begin, int64_t end,
                             int64_t n0) {
  for (int64_t m0 = begin; m0 < end; m0 += kMR) {
    const int64_t rem = end - m0;
    if (rem > kMRSmall) {
      MatMulTile<kMR, NV>(K, A, lda, B, ldb, C, ldc, m0,
                          static_cast<int>(std::min<int64_t>(rem, kMR)), n0);
    } else {
      MatMulTile<kMRSmall, NV>(K, A, lda, B, ldb, C, ldc, m0, static_cast<int>(rem), n0);
    }
  }
}

void MatMul(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
            int64_t ldb, float* C, int64_t ldc, int64_t begin, int64_t end) {
  int64_t n0 = 0;
  for (; n0 + kNV * kN <= N; n0 += kNV * kN)
    MatMulColumn<kNV>(K, A, lda, B, ldb, C, ldc, begin, end, n0);
  for (; n0 + kN <= N; n0 += kN) MatMulColumn<1>(K, A, lda, B, ldb, C, ldc, begin, end, n0);
  // Fewer than one vector of columns left: a full-width load of B's last row
  // would read past it, so finish these columns with scalar code.
  for (int64_t m = begin; m < end; ++m) {
    for (int64_t n = n0; n < N; ++n) {
      float s = 0.f;
      for (int64_t k = 0; k < K; ++k) s += A[m * lda + k] * B[k * ldb + n];
      C[m * ldc + n] = s;
    }
  }
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_CONV_GEMM_INL_H_
