// Block-quantized weights (4 or 8 bits, per-block float scale and uint8 zero
// point; ONNX Runtime's MatMulNBits): a matrix-vector product that reads the
// packed weights once and dequantizes them in registers, block by block,
// never materializing float weights. Included once per Highway target.
//
// Layout (PackNBits, kernels/packing.h): panels of kPanel = 16 columns; in a
// panel, for 8 bits one byte per (k, column) [k][16]; for 4 bits one byte per
// (k pair, column) [k/2][16], the low nibble holding k even, the high nibble
// k odd. Scales and zero points are [panel][block][16]. The panel's 16
// columns are kPanel / kN vectors, so a block's scales and zero points are
// applied to whole vectors of columns at once:
//   y[n] += scale[b][n] * (sum_k q[k][n] a[k] - zp[b][n] * sum_k a[k])
// with both sums over block b's k.

#if defined(FCB_KERNELS_NBITS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_NBITS_INL_H_
#undef FCB_KERNELS_NBITS_INL_H_
#else
#define FCB_KERNELS_NBITS_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/common-inl.h"
#include "kernels/kernel_ns.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

namespace nbits {

using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
inline constexpr int kV = kPanel / kN;  // vectors per panel row

// kN bytes at p as floats (0..255).
HWY_INLINE VF Bytes(const uint8_t* p) {
  const DF d;
  const DI di;
  const DU8 du8;
  return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(du8, p)));
}

// Block [k0, k1) of one panel of 4-bit pairs (k0 even), into acc: q is the
// panel's first byte.
HWY_INLINE void Block4(const uint8_t* q, const float* a, int64_t k0, int64_t k1, VReg* acc) {
  const DF d;
  const DI di;
  const DU8 du8;
  const auto mask = hn::Set(di, 15);
  // Two accumulator sets (low and high nibbles), two pairs at a time when a
  // panel row is one or two vectors: enough independent FMA chains to hide
  // their latency.
  constexpr int P = kV <= 1 ? 2 : 1;
  VReg lo[P][kV], hi[P][kV];
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < kV; ++v) lo[p][v] = hi[p][v] = hn::Zero(d);
  int64_t k = k0;
  for (; k + 2 * P <= k1; k += 2 * P) {
    HWY_UNROLL(2)
    for (int p = 0; p < P; ++p) {
      const VF a0 = hn::Set(d, a[k + 2 * p]), a1 = hn::Set(d, a[k + 2 * p + 1]);
      const uint8_t* row = q + (k + 2 * p) / 2 * kPanel;
      HWY_UNROLL(4)
      for (int v = 0; v < kV; ++v) {
        const auto w = hn::PromoteTo(di, hn::LoadU(du8, row + v * kN));
        lo[p][v] = hn::MulAdd(hn::ConvertTo(d, hn::And(w, mask)), a0, VF(lo[p][v]));
        hi[p][v] = hn::MulAdd(hn::ConvertTo(d, hn::ShiftRight<4>(w)), a1, VF(hi[p][v]));
      }
    }
  }
  for (; k < k1; k += 2) {
    const uint8_t* row = q + k / 2 * kPanel;
    const VF a0 = hn::Set(d, a[k]);
    const bool pair = k + 1 < k1;
    const VF a1 = hn::Set(d, pair ? a[k + 1] : 0.0f);
    for (int v = 0; v < kV; ++v) {
      const auto w = hn::PromoteTo(di, hn::LoadU(du8, row + v * kN));
      lo[0][v] = hn::MulAdd(hn::ConvertTo(d, hn::And(w, mask)), a0, VF(lo[0][v]));
      if (pair) hi[0][v] = hn::MulAdd(hn::ConvertTo(d, hn::ShiftRight<4>(w)), a1, VF(hi[0][v]));
    }
  }
  for (int v = 0; v < kV; ++v) {
    VF s = hn::Add(VF(lo[0][v]), VF(hi[0][v]));
    for (int p = 1; p < P; ++p) s = hn::Add(s, hn::Add(VF(lo[p][v]), VF(hi[p][v])));
    acc[v] = s;
  }
}

// Block [k0, k1) of one panel of 8-bit rows, into acc: q is the panel's first byte.
HWY_INLINE void Block8(const uint8_t* q, const float* a, int64_t k0, int64_t k1, VReg* acc) {
  const DF d;
  constexpr int P = kV >= 4 ? 1 : 4 / kV;
  VReg s[P][kV];
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < kV; ++v) s[p][v] = hn::Zero(d);
  int64_t k = k0;
  for (; k + P <= k1; k += P) {
    HWY_UNROLL(4)
    for (int p = 0; p < P; ++p) {
      const VF ak = hn::Set(d, a[k + p]);
      const uint8_t* row = q + (k + p) * kPanel;
      HWY_UNROLL(4)
      for (int v = 0; v < kV; ++v) s[p][v] = hn::MulAdd(Bytes(row + v * kN), ak, VF(s[p][v]));
    }
  }
  for (; k < k1; ++k) {
    const VF ak = hn::Set(d, a[k]);
    for (int v = 0; v < kV; ++v) s[0][v] = hn::MulAdd(Bytes(q + k * kPanel + v * kN), ak, VF(s[0][v]));
  }
  for (int v = 0; v < kV; ++v) {
    VF t = VF(s[0][v]);
    for (int p = 1; p < P; ++p) t = hn::Add(t, VF(s[p][v]));
    acc[v] = t;
  }
}

}  // namespace nbits

HWY_NOINLINE void GemvNBits(const NBitsGeom& g, const float* a, const float* a_block_sums, const uint8_t* qw,
                            const float* scales, const uint8_t* zero_points, const float* bias, float* y,
                            int64_t panel_begin, int64_t panel_end) {
  using namespace nbits;
  const DF d;
  const int64_t blocks = NBitsBlocks(g);
  const int64_t panel_bytes = NBitsPanelBytes(g);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* q = qw + p * panel_bytes;
    const float* sc = scales + p * blocks * kPanel;
    const uint8_t* zp = zero_points + p * blocks * kPanel;
    VReg out[kV];
    for (int v = 0; v < kV; ++v) out[v] = hn::Zero(d);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k0 = b * g.block_size, k1 = std::min(g.k, k0 + g.block_size);
      VReg acc[kV];
      if (g.bits == 4) {
        Block4(q, a, k0, k1, acc);
      } else {
        Block8(q, a, k0, k1, acc);
      }
      const VF asum = hn::Set(d, a_block_sums[b]);
      for (int v = 0; v < kV; ++v) {
        const VF s = hn::LoadU(d, sc + b * kPanel + v * kN);
        const VF z = Bytes(zp + b * kPanel + v * kN);
        out[v] = hn::MulAdd(s, hn::NegMulAdd(z, asum, VF(acc[v])), VF(out[v]));
      }
    }
    const int64_t c0 = p * kPanel;
    for (int v = 0; v < kV; ++v) {
      const int64_t c = c0 + v * kN;
      if (c >= g.n) break;
      VF r = VF(out[v]);
      if (bias) r = hn::Add(r, LoadN(d, bias + c, g.n - c));
      StoreN(r, d, y + c, g.n - c);
    }
  }
}

namespace nbits {

#if HWY_TARGET == HWY_SCALAR
// The exact integer dot product of block [k0, k0 + block_size) of one panel
// column c with qa (int8 values in int16).
inline int32_t DotI8(const NBitsGeom& g, const uint8_t* q, const int16_t* qa, int64_t k0, int c) {
  int32_t s = 0;
  for (int64_t k = k0; k < k0 + g.block_size; ++k) {
    const int w = g.bits == 8 ? q[k * kPanel + c] : (q[k / 2 * kPanel + c] >> ((k & 1) * 4)) & 15;
    s += w * qa[k];
  }
  return s;
}
#else
using DI16 = hn::Repartition<int16_t, DI>;
using VI = hn::Vec<DI>;

// acc + per 32-bit lane (w.lo16 * a.lo16 + w.hi16 * a.hi16). The weights are
// 0..255 (-255..255 less their zero points) and a is -127..127, so each
// product fits 16 bits and no pair saturates (pmaddwd saturates only -32768 *
// -32768 pairs).
HWY_INLINE VI MulPairs(VI w, VI a, VI acc) {
  const DI di;
  const DI16 d16;
#if HWY_ARCH_X86 && HWY_TARGET != HWY_EMU128
  VI unused = hn::Zero(di);  // x86: pmaddwd, the pairs summed in sum0
  return hn::ReorderWidenMulAccumulate(di, hn::BitCast(d16, w), hn::BitCast(d16, a), acc, unused);
#else
  const VI p = hn::BitCast(di, hn::Mul(hn::BitCast(d16, w), hn::BitCast(d16, a)));
  return hn::Add(acc, hn::Add(hn::ShiftRight<16>(hn::ShiftLeft<16>(p)), hn::ShiftRight<16>(p)));
#endif
}

// The exact integer dot products of block [k0, k0 + block_size) of kN panel
// columns starting at column c0 with qa: pairs (k, k + 1) of weights in the
// low and high halves of each 32-bit lane against the pair (qa[k], qa[k + 1])
// in every lane.
HWY_INLINE VI DotI8(const NBitsGeom& g, const uint8_t* q, const int16_t* qa, int64_t k0, int c0) {
  const DI di;
  const DU8 du8;
  VI acc0 = hn::Zero(di), acc1 = hn::Zero(di);
  const int64_t k1 = k0 + g.block_size;  // block_size is even (>= 16)
  if (g.bits == 4) {
    const VI lo = hn::Set(di, 0x0F), hi = hn::Set(di, 0xF0);
    for (int64_t k = k0; k < k1; k += 4) {
      int32_t a01, a23;
      std::memcpy(&a01, qa + k, 4);
      std::memcpy(&a23, qa + k + 2, 4);
      const VI x0 = hn::PromoteTo(di, hn::LoadU(du8, q + k / 2 * kPanel + c0));
      const VI x1 = hn::PromoteTo(di, hn::LoadU(du8, q + (k / 2 + 1) * kPanel + c0));
      acc0 = MulPairs(hn::Or(hn::And(x0, lo), hn::ShiftLeft<12>(hn::And(x0, hi))), hn::Set(di, a01), acc0);
      acc1 = MulPairs(hn::Or(hn::And(x1, lo), hn::ShiftLeft<12>(hn::And(x1, hi))), hn::Set(di, a23), acc1);
    }
  } else {
    for (int64_t k = k0; k < k1; k += 4) {
      int32_t a01, a23;
      std::memcpy(&a01, qa + k, 4);
      std::memcpy(&a23, qa + k + 2, 4);
      const uint8_t* row = q + k * kPanel + c0;
      const VI x0 = hn::PromoteTo(di, hn::LoadU(du8, row));
      const VI x1 = hn::PromoteTo(di, hn::LoadU(du8, row + kPanel));
      const VI x2 = hn::PromoteTo(di, hn::LoadU(du8, row + 2 * kPanel));
      const VI x3 = hn::PromoteTo(di, hn::LoadU(du8, row + 3 * kPanel));
      acc0 = MulPairs(hn::Or(x0, hn::ShiftLeft<16>(x1)), hn::Set(di, a01), acc0);
      acc1 = MulPairs(hn::Or(x2, hn::ShiftLeft<16>(x3)), hn::Set(di, a23), acc1);
    }
  }
  return hn::Add(acc0, acc1);
}
#endif

#if HWY_TARGET != HWY_SCALAR
// The many-row path (GemmNBitsI8 with more than kI8GemvRows rows): each
// block of a panel is unpacked once into int16 pairs (UnpackPairs) and
// multiplied with a tile of rows at a time (TileBlock), so every weight
// vector loaded feeds kRowTile rows.
inline constexpr int64_t kI8GemvRows = 2;    // up to here: DotI8 per row
inline constexpr int64_t kI8MaxPairBlock = 256;  // largest block unpacked
inline constexpr int64_t kI8ChunkRows = 32;  // rows whose float sums stay in a stack buffer
// Rows per register tile: 8 accumulators of kV vectors with 512-bit vectors,
// 4 x 2 with 256-bit ones, 2 x 4 with 128-bit ones.
inline constexpr int kRowTile = kV >= 4 ? 2 : 8 / kV;
// An element of an array of int32 vectors (fixed-length SVE needs a sized
// type, as VReg for floats in common-inl.h; read one as VI(x) where a
// template deduces).
#if HWY_HAVE_SCALABLE && defined(__ARM_FEATURE_SVE_BITS) && __ARM_FEATURE_SVE_BITS > 0
typedef VI VIReg __attribute__((arm_sve_vector_bits(__ARM_FEATURE_SVE_BITS)));
#else
using VIReg = VI;
#endif

// Block [k0, k0 + block_size) of one panel (q its first byte) less its zero
// points zp as w [block_size / 2][kPanel] int32: lane c of pair j holds
// weight (k0 + 2j, c) - zp[c] in its low 16 bits and (k0 + 2j + 1, c) - zp[c]
// in its high ones (-255..255), so that sum_k (q - zp) a is one exact integer
// dot product: the one-row path's dot(q, a) - zp * sum(a).
HWY_INLINE void UnpackPairs(const NBitsGeom& g, const uint8_t* q, const uint8_t* zp, int64_t k0,
                            int32_t* HWY_RESTRICT w) {
  const DI di;
  const DI16 d16;
  const DU8 du8;
  const int64_t pairs = g.block_size / 2;
  VIReg z[kV];
  for (int v = 0; v < kV; ++v) {
    const VI z32 = hn::PromoteTo(di, hn::LoadU(du8, zp + v * kN));
    z[v] = hn::Or(z32, hn::ShiftLeft<16>(z32));
  }
  if (g.bits == 4) {
    const VI lo = hn::Set(di, 0x0F), hi = hn::Set(di, 0xF0);
    const uint8_t* src = q + k0 / 2 * kPanel;
    for (int64_t j = 0; j < pairs; ++j)
      for (int v = 0; v < kV; ++v) {
        const VI x = hn::PromoteTo(di, hn::LoadU(du8, src + j * kPanel + v * kN));
        const VI pair = hn::Or(hn::And(x, lo), hn::ShiftLeft<12>(hn::And(x, hi)));
        hn::Store(hn::BitCast(di, hn::Sub(hn::BitCast(d16, pair), hn::BitCast(d16, VI(z[v])))), di,
                  w + j * kPanel + v * kN);
      }
  } else {
    const uint8_t* src = q + k0 * kPanel;
    for (int64_t j = 0; j < pairs; ++j)
      for (int v = 0; v < kV; ++v) {
        const VI x0 = hn::PromoteTo(di, hn::LoadU(du8, src + 2 * j * kPanel + v * kN));
        const VI x1 = hn::PromoteTo(di, hn::LoadU(du8, src + (2 * j + 1) * kPanel + v * kN));
        const VI pair = hn::Or(x0, hn::ShiftLeft<16>(x1));
        hn::Store(hn::BitCast(di, hn::Sub(hn::BitCast(d16, pair), hn::BitCast(d16, VI(z[v])))), di,
                  w + j * kPanel + v * kN);
      }
  }
}

// R rows (the first at row r of qa) times block b of the unpacked panel w:
// the exact integer dot products (zero points included), scaled and added to
// out [R][kPanel] floats in the order of the one-row path (out += (scale *
// a_scale) * float(dot)).
template <int R>
HWY_INLINE void TileBlock(const NBitsGeom& g, const int32_t* HWY_RESTRICT w, const int16_t* qa, int64_t kp,
                          const float* a_scales, int64_t blocks, int64_t b, const float* sc,
                          float* HWY_RESTRICT out) {
  const DF d;
  const DI di;
  VIReg acc[R][kV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < kV; ++v) acc[r][v] = hn::Zero(di);
  const int64_t pairs = g.block_size / 2;
  const int16_t* a0 = qa + b * g.block_size;
  for (int64_t j = 0; j < pairs; ++j) {
    VIReg wv[kV];
    for (int v = 0; v < kV; ++v) wv[v] = hn::Load(di, w + j * kPanel + v * kN);
    HWY_UNROLL(8)
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a0 + r * kp + 2 * j, 4);
      const VI av = hn::Set(di, pair);
      for (int v = 0; v < kV; ++v) acc[r][v] = MulPairs(VI(wv[v]), av, VI(acc[r][v]));
    }
  }
  for (int r = 0; r < R; ++r) {
    const VF as = hn::Set(d, a_scales[r * blocks + b]);
    for (int v = 0; v < kV; ++v) {
      const VI dot = VI(acc[r][v]);
      const VF s = hn::Mul(hn::LoadU(d, sc + v * kN), as);
      float* o = out + r * kPanel + v * kN;
      hn::Store(hn::MulAdd(s, hn::ConvertTo(d, dot), hn::Load(d, o)), d, o);
    }
  }
}

// Rows [0, m) (m <= kI8ChunkRows) of one panel: p's weights q, scales sc,
// zero points zp; the result (plus bias) into y's columns c0...
HWY_INLINE void PanelRowsI8(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                            const uint8_t* q, const float* sc, const uint8_t* zp, const float* bias, float* y,
                            int64_t ldy, int64_t c0) {
  const DF d;
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  HWY_ALIGN int32_t w[kI8MaxPairBlock / 2 * kPanel];
  HWY_ALIGN float out[kI8ChunkRows * kPanel];
  for (int64_t i = 0; i < m * kPanel; ++i) out[i] = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    UnpackPairs(g, q, zp + b * kPanel, b * g.block_size, w);
    const float* sb = sc + b * kPanel;
    int64_t r = 0;
    for (; r + kRowTile <= m; r += kRowTile)
      TileBlock<kRowTile>(g, w, qa + r * kp, kp, a_scales + r * blocks, blocks, b, sb,
                          out + r * kPanel);
    if constexpr (kRowTile > 4) {
      if (r + 4 <= m) {
        TileBlock<4>(g, w, qa + r * kp, kp, a_scales + r * blocks, blocks, b, sb,
                     out + r * kPanel);
        r += 4;
      }
    }
    if constexpr (kRowTile > 2) {
      if (r + 2 <= m) {
        TileBlock<2>(g, w, qa + r * kp, kp, a_scales + r * blocks, blocks, b, sb,
                     out + r * kPanel);
        r += 2;
      }
    }
    if (r < m)
      TileBlock<1>(g, w, qa + r * kp, kp, a_scales + r * blocks, blocks, b, sb,
                   out + r * kPanel);
  }
  for (int64_t r = 0; r < m; ++r)
    for (int v = 0; v < kV; ++v) {
      const int64_t c = c0 + v * kN;
      if (c >= g.n) break;
      VF o = hn::Load(d, out + r * kPanel + v * kN);
      if (bias) o = hn::Add(o, LoadN(d, bias + c, g.n - c));
      StoreN(o, d, y + r * ldy + c, g.n - c);
    }
}
#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace nbits

HWY_NOINLINE void GemmNBitsI8(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                              const int32_t* a_sums, const uint8_t* qw, const float* scales,
                              const uint8_t* zero_points, const float* bias, float* y, int64_t ldy,
                              int64_t panel_begin, int64_t panel_end) {
  using namespace nbits;
  const int64_t blocks = NBitsBlocks(g), panel_bytes = NBitsPanelBytes(g), kp = blocks * g.block_size;
#if HWY_TARGET != HWY_SCALAR
  if (m > kI8GemvRows && g.block_size <= kI8MaxPairBlock) {
    for (int64_t p = panel_begin; p < panel_end; ++p)
      for (int64_t r0 = 0; r0 < m; r0 += kI8ChunkRows)
        PanelRowsI8(g, std::min(kI8ChunkRows, m - r0), qa + r0 * kp, a_scales + r0 * blocks,
                    qw + p * panel_bytes, scales + p * blocks * kPanel, zero_points + p * blocks * kPanel, bias,
                    y + r0 * ldy, ldy, p * kPanel);
    return;
  }
#endif
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* q = qw + p * panel_bytes;
    const float* sc = scales + p * blocks * kPanel;
    const uint8_t* zp = zero_points + p * blocks * kPanel;
    const int64_t c0 = p * kPanel;
    for (int64_t r = 0; r < m; ++r) {
      const int16_t* ar = qa + r * kp;
      const float* as = a_scales + r * blocks;
      const int32_t* asum = a_sums + r * blocks;
      for (int v = 0; v < kV; ++v) {
        const int64_t c = c0 + v * kN;
        if (c >= g.n) break;
#if HWY_TARGET == HWY_SCALAR
        float out = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
          const int32_t dot = DotI8(g, q, ar, b * g.block_size, v) - zp[b * kPanel + v] * asum[b];
          out += (sc[b * kPanel + v] * as[b]) * static_cast<float>(dot);
        }
        if (bias) out += bias[c];
        y[r * ldy + c] = out;
#else
        const DF d;
        const DI di;
        const DU8 du8;
        VF out = hn::Zero(d);
        for (int64_t b = 0; b < blocks; ++b) {
          // dot - zp * sum(qa): an exact integer (|.| < 2^24 for blocks up to
          // 256), so its conversion to float is exact too.
          const VI z = hn::PromoteTo(di, hn::LoadU(du8, zp + b * kPanel + v * kN));
          const VI dot = hn::Sub(DotI8(g, q, ar, b * g.block_size, v * kN), hn::Mul(z, hn::Set(di, asum[b])));
          const VF s = hn::Mul(hn::LoadU(d, sc + b * kPanel + v * kN), hn::Set(d, as[b]));
          out = hn::MulAdd(s, hn::ConvertTo(d, dot), out);
        }
        if (bias) out = hn::Add(out, LoadN(d, bias + c, g.n - c));
        StoreN(out, d, y + r * ldy + c, g.n - c);
#endif
      }
    }
  }
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // include guard
