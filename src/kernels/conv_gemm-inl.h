// Dense/grouped convolution, GEMM with packed B, and plain MatMul, all built on
// the register tile of tile-inl.h. Included once per Highway target.

#if defined(FCB_KERNELS_CONV_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_CONV_GEMM_INL_H_
#undef FCB_KERNELS_CONV_GEMM_INL_H_
#else
#define FCB_KERNELS_CONV_GEMM_INL_H_
#endif

#include <algorithm>

#include "hwy/highway.h"
#include "kernels/common-inl.h"
#include "kernels/tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::HWY_NAMESPACE {

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
  for (int r = 0; r < MR; ++r) {
    const int64_t p = p0 + std::min(r, rows - 1);
    const int64_t b = p / ohw, q = p % ohw;
    img[r] = in + b * g.ih * g.iw * g.in_pixel_stride + ic0;
    iy0[r] = (q / g.ow) * g.sh - g.pad_top;
    ix0[r] = (q % g.ow) * g.sw - g.pad_left;
    op[r] = out + p * g.out_pixel_stride + oc0;
    rp[r] = residual ? residual + p * res_stride + oc0 : nullptr;
  }
  VF acc[MR][NV];
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

// Output pixels [pb, pe) for one column block of NV vectors.
template <int NV>
HWY_INLINE void ConvColumn(const ConvGeom& g, const float* in, const float* wp,
                           int64_t panel_stride, const float* bias, const float* residual,
                           float* out, const Epilogue& ep, int64_t pb, int64_t pe, int64_t ic0,
                           int64_t oc0, int64_t ncols) {
  for (int64_t p0 = pb; p0 < pe; p0 += kMR) {
    const int64_t rem = pe - p0;
    if (rem > kMRSmall) {
      ConvTile<kMR, NV>(g, in, wp, panel_stride, bias, residual, out, ep, p0,
                        static_cast<int>(std::min<int64_t>(rem, kMR)), ic0, oc0, ncols);
    } else {
      ConvTile<kMRSmall, NV>(g, in, wp, panel_stride, bias, residual, out, ep, p0,
                             static_cast<int>(rem), ic0, oc0, ncols);
    }
  }
}

struct RowMap;
HWY_NOINLINE void GemmRows(int64_t N, int64_t K, const RowMap& rm, const float* packed_b,
                           const float* bias, const Epilogue& ep, int64_t begin, int64_t end);
bool Conv1x1AsGemm(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                   const float* residual, float* out, const Epilogue& ep, int64_t begin,
                   int64_t end);

void Conv(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
          const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end) {
  if (Conv1x1AsGemm(g, in, packed_w, bias, residual, out, ep, begin, end)) return;
  const int64_t icg = g.ic / g.groups, ocg = g.oc / g.groups;
  const int64_t panels = (ocg + kPanel - 1) / kPanel;
  const int64_t panel_stride = g.kh * g.kw * icg * kPanel;
  constexpr int kTilePanels = kNV * kN / static_cast<int>(kPanel);
  // A block of pixels is swept once per column block, so its input stays in
  // cache while every panel of weights passes over it; each block streams all
  // the weights once. Blocks are therefore as large as an L2-resident input
  // allows (~512 KiB), and the range is split evenly so that no block is a
  // sliver (49 pixels would otherwise run as 48 + 1, streaming 9 MiB of a
  // 7x7x512 layer's weights twice).
  const int64_t in_floats = std::max<int64_t>(1, g.ic * g.sh * g.sw);
  const int64_t max_block = std::clamp<int64_t>(131072 / in_floats, 4 * kMR, 1024);
  const int64_t nblocks = (end - begin + max_block - 1) / max_block;
  const int64_t block =
      nblocks > 0 ? ((end - begin + nblocks - 1) / nblocks + kMR - 1) / kMR * kMR : 1;
  for (int64_t pb = begin; pb < end; pb += block) {
    const int64_t pe = std::min(end, pb + block);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* wg = packed_w + grp * panels * panel_stride;
      const float* bg = bias + grp * panels * kPanel;
      for (int64_t p = 0; p < panels; p += kTilePanels) {
        const int64_t col0 = p * kPanel;
        const int64_t ncols = std::min<int64_t>(ocg - col0, kTilePanels * kPanel);
        const float* wp = wg + p * panel_stride;
        if (panels - p >= kTilePanels) {
          ConvColumn<kNV>(g, in, wp, panel_stride, bg + col0, residual, out, ep, pb, pe,
                          grp * icg, grp * ocg + col0, ncols);
        } else {  // AVX-512 only: one panel left over
          ConvColumn<kVecPerPanel>(g, in, wp, panel_stride, bg + col0, residual, out, ep, pb,
                                   pe, grp * icg, grp * ocg + col0, ncols);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// GEMM with B packed as [ceil(N/16)][K][16].

// Blocking in the GotoBLAS manner, turned around for a kernel that broadcasts
// A and vector-loads B: the reduction is split into blocks of kKC and the rows
// into blocks of kMC. A block of A (kMC x kKC, 60 KiB, stays in L2) is copied
// once into a stack buffer laid out per row tile as [k][row], so the
// broadcasts read one contiguous stream (rows of A that lie a multiple of
// 4 KiB apart would otherwise compete for the same L1 sets). Then each column
// tile's sliver of B (kKC x 32 floats, 16 KiB) is swept over every row tile
// of the block while it sits in L1, instead of streaming B from L2 once per
// row tile.
inline constexpr int64_t kKC = 256;
inline constexpr int64_t kMC = 10 * kMR;

// acc[r][v] += sum_k apk[k * MR + r] * w[k * kPanel + VecOffset(v)].
template <int MR, int NV>
HWY_INLINE void MicroKernelPackedA(DF d, const float* apk, int64_t kc, const float* w,
                                   int64_t panel_stride, VF (&acc)[MR][NV]) {
  int64_t off[NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) off[v] = (v * kN / kPanel) * panel_stride + (v * kN) % kPanel;
  for (int64_t k = 0; k < kc; ++k, apk += MR, w += kPanel) {
    VF wv[NV];
    HWY_UNROLL(16)
    for (int v = 0; v < NV; ++v) wv[v] = hn::LoadU(d, w + off[v]);
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      const VF b = hn::Set(d, apk[r]);
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
                           int64_t col0, int64_t ncols, int64_t k0, int64_t kc) {
  const DF d;
  VF acc[MR][NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) {
    const int64_t n = ncols - v * kN;
    for (int r = 0; r < MR; ++r) {
      if (k0 > 0) {  // continue the partial sums of earlier blocks
        acc[r][v] = n > 0 && r < rows ? LoadN(d, cp[r] + col0 + v * kN, n) : hn::Zero(d);
      } else {
        acc[r][v] = bias && n > 0 ? LoadN(d, bias + col0 + v * kN, n) : hn::Zero(d);
      }
    }
  }
  MicroKernelPackedA<MR, NV>(d, apk, kc, bp + k0 * kPanel, K * kPanel, acc);
  float* op[MR];
  const float* res[MR];
  for (int r = 0; r < MR; ++r) {
    op[r] = cp[r] + col0;
    res[r] = rp ? rp[r] + col0 : nullptr;
  }
  const Epilogue no_act{};
  const bool last = k0 + kc >= K;  // residual and activation apply to the finished sum
  StoreTile<MR, NV>(d, acc, rows, ncols, last && rp ? res : nullptr, op, last ? ep : no_act);
}

// Where the rows of A, C and the residual lie: plain strided rows (GEMM), or
// the output pixels of a 1x1 convolution, whose A row is the input pixel
// (b, oy*sh, ox*sw).
struct RowMap {
  const float* a;
  int64_t lda;
  float* c;
  int64_t ldc;
  const float* res = nullptr;  // residual rows (ldr apart), or null
  int64_t ldr = 0;
  int64_t ow = 0, ohw = 0, sh = 1, sw = 1, iw = 0, ihw = 0;  // ow == 0: plain rows
  const float* ARow(int64_t m) const {
    if (ow == 0) return a + m * lda;
    const int64_t b = m / ohw, q = m % ohw;
    return a + (b * ihw + (q / ow) * sh * iw + (q % ow) * sw) * lda;
  }
};

// Row tiles of one block: the main tile, then smaller ones for the remainder.
struct RowTile {
  int64_t m0;
  int rows, mr;   // valid rows, tile height (kMR, kMRSmall or 1)
  int64_t apk;    // offset of its packed A in the block buffer
};

template <int MR>
HWY_INLINE void PackATile(const RowMap& rm, int64_t m0, int rows, int64_t k0, int64_t kc,
                          float* apk) {
  for (int r = 0; r < MR; ++r) {
    const float* a = rm.ARow(m0 + std::min(r, rows - 1)) + k0;  // pad with the last row
    for (int64_t k = 0; k < kc; ++k) apk[k * MR + r] = a[k];
  }
}

template <int MR, int NV>
HWY_INLINE void GemmTileAt(const RowTile& t, int64_t K, const float* apk, const float* bp,
                           const float* bias, const RowMap& rm, const Epilogue& ep,
                           int64_t col0, int64_t ncols, int64_t k0, int64_t kc) {
  float* cp[MR];
  const float* rp[MR];
  for (int r = 0; r < MR; ++r) {
    const int64_t m = t.m0 + std::min(r, t.rows - 1);
    cp[r] = rm.c + m * rm.ldc;
    rp[r] = rm.res ? rm.res + m * rm.ldr : nullptr;
  }
  GemmTile<MR, NV>(K, apk + t.apk, bp, bias, cp, rm.res ? rp : nullptr, ep, t.rows, col0, ncols,
                   k0, kc);
}

template <int NV>
HWY_INLINE void GemmColumnTile(const RowTile* tiles, int ntiles, int64_t K, const float* apk,
                               const float* bp, const float* bias, const RowMap& rm,
                               const Epilogue& ep, int64_t col0, int64_t ncols, int64_t k0,
                               int64_t kc) {
  for (int i = 0; i < ntiles; ++i) {
    const RowTile& t = tiles[i];
    if (t.mr == kMR) {
      GemmTileAt<kMR, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc);
    } else if (t.mr == kMRSmall) {
      GemmTileAt<kMRSmall, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc);
    } else {
      GemmTileAt<1, NV>(t, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc);
    }
  }
}

// Rows [begin, end) of C = act(A B + bias [+ residual]) for K >= 1.
HWY_NOINLINE void GemmRows(int64_t N, int64_t K, const RowMap& rm, const float* packed_b,
                           const float* bias, const Epilogue& ep, int64_t begin, int64_t end) {
  HWY_ALIGN float apk[kMC * kKC];
  RowTile tiles[kMC];
  const int64_t panels = (N + kPanel - 1) / kPanel;
  constexpr int kTilePanels = kNV * kN / static_cast<int>(kPanel);
  for (int64_t k0 = 0; k0 < K; k0 += kKC) {
    const int64_t kc = std::min(kKC, K - k0);
    for (int64_t mb = begin; mb < end; mb += kMC) {
      const int64_t me = std::min(end, mb + kMC);
      int ntiles = 0;
      int64_t off = 0;
      for (int64_t m0 = mb; m0 < me;) {
        const int64_t rem = me - m0;
        RowTile& t = tiles[ntiles++];
        t.m0 = m0;
        t.mr = rem > kMRSmall ? kMR : rem > 1 ? kMRSmall : 1;
        t.rows = static_cast<int>(std::min<int64_t>(rem, t.mr));
        t.apk = off;
        if (t.mr == kMR) {
          PackATile<kMR>(rm, m0, t.rows, k0, kc, apk + off);
        } else if (t.mr == kMRSmall) {
          PackATile<kMRSmall>(rm, m0, t.rows, k0, kc, apk + off);
        } else {
          PackATile<1>(rm, m0, t.rows, k0, kc, apk + off);
        }
        off += t.mr * kc;
        m0 += t.rows;
      }
      for (int64_t p = 0; p < panels; p += kTilePanels) {
        const int64_t col0 = p * kPanel;
        const int64_t ncols = std::min<int64_t>(N - col0, kTilePanels * kPanel);
        const float* bp = packed_b + p * K * kPanel;
        if (panels - p >= kTilePanels) {
          GemmColumnTile<kNV>(tiles, ntiles, K, apk, bp, bias, rm, ep, col0, ncols, k0, kc);
        } else {  // AVX-512 only: one panel left over
          GemmColumnTile<kVecPerPanel>(tiles, ntiles, K, apk, bp, bias, rm, ep, col0, ncols, k0,
                                       kc);
        }
      }
    }
  }
}

// An ungrouped 1x1 conv without padding is a GEMM over output pixels whose
// packed weights ([panel][ic][16]) already are PackGemmB's layout. The GEMM
// path copies blocks of input pixels into a contiguous [k][row] buffer: read
// in place, pixels of 1024 channels (4 KiB) or strided pixels would all map
// to the same L1 sets. Returns false when the conv is not of that kind.
bool Conv1x1AsGemm(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                   const float* residual, float* out, const Epilogue& ep, int64_t begin,
                   int64_t end) {
  if (g.kh != 1 || g.kw != 1 || g.groups != 1 || g.pad_top != 0 || g.pad_left != 0 ||
      (g.oh - 1) * g.sh >= g.ih || (g.ow - 1) * g.sw >= g.iw || g.ic < 1 ||
      (residual != nullptr && residual == out))
    return false;
  RowMap rm{in, g.in_pixel_stride, out, g.out_pixel_stride};
  rm.res = residual;
  rm.ldr = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
  rm.ow = g.ow, rm.ohw = g.oh * g.ow, rm.sh = g.sh, rm.sw = g.sw, rm.iw = g.iw;
  rm.ihw = g.ih * g.iw;
  GemmRows(g.oc, g.ic, rm, packed_w, bias, ep, begin, end);
  return true;
}

void Gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* packed_b,
          const float* bias, float* C, int64_t ldc, const Epilogue& ep, int64_t begin,
          int64_t end) {
  if (K == 0) {  // no reduction: C = act(bias)
    const DF d;
    for (int64_t m = begin; m < end; ++m)
      for (int64_t n = 0; n < N; n += kN)
        StoreN(ApplyAct(d, bias ? LoadN(d, bias + n, N - n) : hn::Zero(d), ep), d,
               C + m * ldc + n, N - n);
    return;
  }
  RowMap rm{A, lda, C, ldc};
  GemmRows(N, K, rm, packed_b, bias, ep, begin, end);
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
  VF acc[MR][NV];
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

}  // namespace fcb::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_CONV_GEMM_INL_H_
