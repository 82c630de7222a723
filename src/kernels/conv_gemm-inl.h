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
  const float* wt = wp;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
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

void Conv(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
          const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end) {
  const int64_t icg = g.ic / g.groups, ocg = g.oc / g.groups;
  const int64_t panels = (ocg + kPanel - 1) / kPanel;
  const int64_t panel_stride = g.kh * g.kw * icg * kPanel;
  constexpr int kTilePanels = kNV * kN / static_cast<int>(kPanel);
  // A block of pixels is swept once per column block, so its input stays in
  // cache while every panel of weights passes over it.
  constexpr int64_t kBlock = 4 * kMR;
  for (int64_t pb = begin; pb < end; pb += kBlock) {
    const int64_t pe = std::min(end, pb + kBlock);
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

// The reduction is split into blocks of kKC. For each block and each tile of
// rows, the rows of A are copied once into a small stack buffer laid out
// [k][row], then every panel of B passes over it: the broadcasts read one
// contiguous stream (rows of A that lie a multiple of 4 KiB apart would
// otherwise compete for the same L1 sets) and a tile's slice of B
// (kKC x 32 floats) stays in L1.
inline constexpr int64_t kKC = 256;

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

template <int MR, int NV>
HWY_INLINE void GemmTile(int64_t K, const float* apk, const float* bp, const float* bias,
                         float* const* cp, const Epilogue& ep, int rows, int64_t col0,
                         int64_t ncols, int64_t k0, int64_t kc) {
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
  for (int r = 0; r < MR; ++r) op[r] = cp[r] + col0;
  const Epilogue no_act{};
  StoreTile<MR, NV>(d, acc, rows, ncols, nullptr, op, k0 + kc >= K ? ep : no_act);
}

// Rows [m0, m0 + rows) of C for reduction block [k0, k0 + kc), all columns.
template <int MR>
HWY_NOINLINE void GemmRows(int64_t N, int64_t K, const float* A, int64_t lda,
                           const float* packed_b, const float* bias, float* C, int64_t ldc,
                           const Epilogue& ep, int64_t m0, int rows, int64_t k0, int64_t kc) {
  HWY_ALIGN float apk[kKC * MR];
  float* cp[MR];
  for (int r = 0; r < MR; ++r) {
    const int64_t m = m0 + std::min(r, rows - 1);  // pad the tile with copies of its last row
    const float* a = A + m * lda + k0;
    for (int64_t k = 0; k < kc; ++k) apk[k * MR + r] = a[k];
    cp[r] = C + m * ldc;
  }
  const int64_t panels = (N + kPanel - 1) / kPanel;
  constexpr int kTilePanels = kNV * kN / static_cast<int>(kPanel);
  for (int64_t p = 0; p < panels; p += kTilePanels) {
    const int64_t col0 = p * kPanel;
    const int64_t ncols = std::min<int64_t>(N - col0, kTilePanels * kPanel);
    const float* bp = packed_b + p * K * kPanel;
    if (panels - p >= kTilePanels) {
      GemmTile<MR, kNV>(K, apk, bp, bias, cp, ep, rows, col0, ncols, k0, kc);
    } else {  // AVX-512 only: one panel left over
      GemmTile<MR, kVecPerPanel>(K, apk, bp, bias, cp, ep, rows, col0, ncols, k0, kc);
    }
  }
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
  for (int64_t k0 = 0; k0 < K; k0 += kKC) {
    const int64_t kc = std::min(kKC, K - k0);
    for (int64_t m0 = begin; m0 < end; m0 += kMR) {
      const int64_t rem = end - m0;
      if (rem > kMRSmall) {
        GemmRows<kMR>(N, K, A, lda, packed_b, bias, C, ldc, ep, m0,
                      static_cast<int>(std::min<int64_t>(rem, kMR)), k0, kc);
      } else if (rem > 1) {
        GemmRows<kMRSmall>(N, K, A, lda, packed_b, bias, C, ldc, ep, m0, static_cast<int>(rem),
                           k0, kc);
      } else {
        GemmRows<1>(N, K, A, lda, packed_b, bias, C, ldc, ep, m0, 1, k0, kc);
      }
    }
  }
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
