// The register-tiled inner loop shared by conv, gemm and matmul, and the tile
// shapes chosen per target. Included once per Highway target.
//
// A tile is MR rows (output pixels, or rows of A) times NV vectors of output
// columns, held in MR*NV accumulator registers. Each step over the reduction
// index k loads NV weight vectors once and broadcasts one input value per row,
// so a tile does MR*NV fused multiply-adds per MR+NV loads.

#if defined(FCB_KERNELS_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_TILE_INL_H_
#undef FCB_KERNELS_TILE_INL_H_
#else
#define FCB_KERNELS_TILE_INL_H_
#endif

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/kernel_ns.h"
#include "kernels/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

// eltwise-inl.h: y = act(x) over [begin, end), in place when y == x (out of
// line: the long activations after a tile's store call it, see IsLongAct).
void Unary(const Epilogue& op, const float* x, float* y, int64_t begin, int64_t end);
// The same in place over the first ncols floats of each of nrows rows.
void UnaryRows(const Epilogue& op, float* const* rows, int nrows, int64_t ncols);

// Vectors in one packed panel of 16 columns.
inline constexpr int kVecPerPanel = static_cast<int>(kPanel) / kN;
// Main tile width in vectors: two panels on AVX-512 (32 registers leave room
// for 12x2 accumulators), one panel elsewhere.
inline constexpr int kNV = kN == 16 ? 2 : kVecPerPanel;
// Rows of the main tile, sized so accumulators + weights + one broadcast fit the
// register file: AVX-512 12x2 (of 32), AVX2 6x2 (of 16), SSE4 3x4 (of 16).
inline constexpr int kMR = kN == 16 ? 12 : kN == 8 ? 6 : kN == 4 ? 3 : 1;
// A smaller tile for the last rows of a range, so a short remainder does not
// repeat a whole main tile's work.
inline constexpr int kMRSmall = kN == 16 ? 4 : kN == 8 ? 2 : 1;

// Offset of vector v of a tile from the tile's first column: panels of 16
// columns lie panel_stride floats apart (plain row-major operands pass 16).
template <int V>
HWY_INLINE int64_t VecOffset(int64_t panel_stride) {
  return (V * kN / kPanel) * panel_stride + (V * kN) % kPanel;
}

// Weights stream once per run from DRAM or L3 (a model's weights do not fit
// the caches), one 64-byte line per panel per reduction step, in the 4 KiB
// pages of the file mapping, where the hardware prefetcher stops at every page
// boundary. The inner loops ask for each panel's line this many steps ahead:
// measured resnet18 -9 %, resnet50 -5 % at 1 thread (64 steps: the same).
inline constexpr int64_t kWeightPrefetchSteps = 32;

// acc[r][v] += sum_{k < kc} a[r][k] * w[k * w_kstride + VecOffset(v)].
template <int MR, int NV>
HWY_INLINE void MicroKernel(DF d, const float* const* a, int64_t kc, const float* w,
                            int64_t w_kstride, int64_t panel_stride, VReg (&acc)[MR][NV]) {
  int64_t off[NV];
  HWY_UNROLL(16)
  for (int v = 0; v < NV; ++v) off[v] = (v * kN / kPanel) * panel_stride + (v * kN) % kPanel;
  const float* ap[MR];
  HWY_UNROLL(16)
  for (int r = 0; r < MR; ++r) ap[r] = a[r];
  for (int64_t k = 0; k < kc; ++k) {
    VReg wv[NV];
    HWY_UNROLL(16)
    for (int v = 0; v < NV; ++v) {
      if ((v * kN) % kPanel == 0) hwy::Prefetch(w + off[v] + kWeightPrefetchSteps * w_kstride);
      wv[v] = hn::LoadU(d, w + off[v]);
    }
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      const VF b = hn::Set(d, ap[r][k]);
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(b, wv[v], acc[r][v]);
    }
    w += w_kstride;
  }
}

// Epilogue of one tile: out[r][col0 + j] = act(acc + residual) for the `rows`
// valid rows and the `ncols` valid columns (may be fewer than NV*kN).
// The same with the activation A fixed at compile time: a caller that
// dispatches once per call (WithRegAct) gets the whole tile inlined, its
// accumulators never leaving the registers. A is WithRegAct's: the long
// activations come as kNone and are applied after the store, by Unary.
template <int MR, int NV, Act A>
HWY_INLINE void StoreTileT(DF d, VReg (&acc)[MR][NV], int rows, int64_t ncols,
                           const float* const* res, float* const* out, const Epilogue& ep) {
  if (rows == MR && ncols == NV * kN) {  // a full tile: no bounds per vector
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) {
        VF x = acc[r][v];
        if (res != nullptr) x = hn::Add(x, hn::LoadU(d, res[r] + v * kN));
        hn::StoreU(ApplyActT<A>(d, x, ep), d, out[r] + v * kN);
      }
    }
  } else {
    HWY_UNROLL(16)
    for (int r = 0; r < MR; ++r) {
      if (r >= rows) break;
      HWY_UNROLL(16)
      for (int v = 0; v < NV; ++v) {
        const int64_t n = ncols - v * kN;
        if (n <= 0) break;
        VF x = acc[r][v];
        if (res != nullptr) x = hn::Add(x, LoadN(d, res[r] + v * kN, n));
        StoreN(ApplyActT<A>(d, x, ep), d, out[r] + v * kN, n);
      }
    }
  }
  if constexpr (A == Act::kNone)
    if (IsLongAct(ep.act))
      UnaryRows(ep, out, rows, ncols);
}

template <int MR, int NV>
HWY_INLINE void StoreTile(DF d, VReg (&acc)[MR][NV], int rows, int64_t ncols,
                          const float* const* res, float* const* out, const Epilogue& ep) {
  WithRegAct(ep, [&]<Act A>() { StoreTileT<MR, NV, A>(d, acc, rows, ncols, res, out, ep); });
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_TILE_INL_H_
