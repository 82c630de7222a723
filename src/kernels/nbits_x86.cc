// MatMulNBits at accuracy_level 4 (gemm_nbits_i8, kernels.h) with x86's
// VPDPBUSD: four unsigned bytes times four signed bytes summed into each
// 32-bit lane, exactly (the non-saturating form). The 4- or 8-bit weights are
// the unsigned operand as they are stored (0..15 or 0..255), the activations
// (int8 values, held as int16 by QuantizeBlocksI8) the signed one; the zero
// points come out afterwards as zp * sum(a) per block, which a_sums holds.
// Every dot product is the same exact integer as the portable kernel's
// (nbits-inl.h, PMADDWD pairs), and the float steps are the same operations
// in the same order (out += (scale * a_scale) * float(dot), block by block,
// then + bias), so the results are bit-identical to it: kernels_test checks
// both variants against one scalar reference.
//
// Like int8_x86.cc, each function carries its own target attribute; nothing
// here runs unless NBitsI8Variants (int8_conv.cc) found AVX512-VNNI or
// AVX-VNNI on the host.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/int8_internal.h"
#include "kernels/nbits.h"

// GCC 12's intrinsic headers build some conversions on _mm512_undefined_*,
// which -Wmaybe-uninitialized reports at every inlined use (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace fcb::kernels::internal {
namespace {

constexpr int kRows = 8;      // rows per register tile (many-row path)
constexpr int64_t kFewRows = 2;
// How far ahead of its loads the few-rows path prefetches the weights (which
// stream from DRAM once per token in a decode step: one thread alone does not
// keep enough lines in flight for the bandwidth). Reads past the end of the
// weights are prefetches, which never fault.
constexpr int64_t kPrefetchBytes = 1024;  // up to here the weights are not unpacked into a buffer (VBMI path)

// A 32-bit lane per panel column c holding weights (k, c) .. (k + 3, c) as
// bytes, for k = k0 + 4j: the quads of one whole panel, [kp / 4][16] int32,
// written into w. 4 bits: packed row i holds k = 2i in the low nibble and
// 2i + 1 in the high one; 8 bits: row k holds weight k.
#define FCB_VNNI512 __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define FCB_VNNI256 __attribute__((target("avx2,fma,avxvnni")))

FCB_VNNI512 inline __m512i Quad512(int bits, const uint8_t* q, int64_t j) {
  if (bits == 4) {
    const __m512i lo = _mm512_set1_epi32(0x0F), hi = _mm512_set1_epi32(0xF0);
    const __m512i x0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2 * j * 16)));
    const __m512i x1 =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + (2 * j + 1) * 16)));
    const __m512i t0 = _mm512_or_si512(_mm512_and_si512(x0, lo), _mm512_slli_epi32(_mm512_and_si512(x0, hi), 4));
    const __m512i t1 = _mm512_or_si512(_mm512_and_si512(x1, lo), _mm512_slli_epi32(_mm512_and_si512(x1, hi), 4));
    return _mm512_or_si512(t0, _mm512_slli_epi32(t1, 16));
  }
  const uint8_t* r = q + 4 * j * 16;
  const __m512i x0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)));
  const __m512i x1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 16)));
  const __m512i x2 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 32)));
  const __m512i x3 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 48)));
  return _mm512_or_si512(_mm512_or_si512(x0, _mm512_slli_epi32(x1, 8)),
                         _mm512_or_si512(_mm512_slli_epi32(x2, 16), _mm512_slli_epi32(x3, 24)));
}

inline int32_t Quad(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return v;
}

// The activations as bytes (QuantizeBlocksI8 keeps them as int16), in a
// per-thread buffer reused across calls.
FCB_VNNI512 const int8_t* Bytes512(const int16_t* qa, int64_t n) {
  thread_local std::vector<int8_t> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf.data() + i),
                        _mm512_cvtepi16_epi8(_mm512_loadu_si512(qa + i)));
  for (; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<int8_t>(qa[i]);
  return buf.data();
}

// The last steps every 512-bit tile of R rows shares. Block b of the rows'
// exact integer dots acc: out[r] += (scale * a_scale) * float(acc[r] -
// zp * sum(a)), 16 columns.
template <int R>
FCB_VNNI512 __attribute__((always_inline)) inline void AddBlock512(const __m512i* acc, int64_t b, int64_t blocks,
                                                                   const float* a_scales, const int32_t* a_sums,
                                                                   const float* sc, const uint8_t* zp, __m512* out) {
  const __m512 s = _mm512_loadu_ps(sc + b * 16);
  const __m512i z = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zp + b * 16)));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512i dot = _mm512_sub_epi32(acc[r], _mm512_mullo_epi32(z, _mm512_set1_epi32(a_sums[r * blocks + b])));
    const __m512 sr = _mm512_mul_ps(s, _mm512_set1_ps(a_scales[r * blocks + b]));
    out[r] = _mm512_fmadd_ps(sr, _mm512_cvtepi32_ps(dot), out[r]);
  }
}

// y[r][c0 .. c0 + 16) (the columns below n) = out[r] (+ bias).
template <int R>
FCB_VNNI512 __attribute__((always_inline)) inline void Store512(const NBitsGeom& g, const __m512* out,
                                                                const float* bias, float* y, int64_t ldy, int64_t c0) {
  const int64_t cols = std::min<int64_t>(16, g.n - c0);
  const __mmask16 m = static_cast<__mmask16>((1u << cols) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + c0) : _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 o = bias ? _mm512_add_ps(out[r], bv) : out[r];
    _mm512_mask_storeu_ps(y + r * ldy + c0, m, o);
  }
}

// Rows [r, r + R) of the panel whose quads are wq (one block = bq quads):
// out (R registers, 16 columns each) accumulates every block in order.
template <int R>
FCB_VNNI512 inline void Tile512(const int32_t* wq, int64_t blocks, int64_t bq, const int8_t* a8, int64_t kp,
                                const float* a_scales, const int32_t* a_sums, const float* sc, const uint8_t* zp,
                                __m512* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    const int32_t* w = wq + b * bq * 16;
    const int8_t* a = a8 + b * bq * 4;
    for (int64_t j = 0; j < bq; ++j) {
      const __m512i wv = _mm512_load_si512(w + j * 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_dpbusd_epi32(acc[r], wv, _mm512_set1_epi32(Quad(a + r * kp + 4 * j)));
    }
    AddBlock512<R>(acc, b, blocks, a_scales, a_sums, sc, zp, out);
  }
}

template <int R>
FCB_VNNI512 inline void Rows512(const NBitsGeom& g, const int32_t* wq, const int8_t* a8, const float* a_scales,
                                const int32_t* a_sums, const float* sc, const uint8_t* zp, const float* bias,
                                float* y, int64_t ldy, int64_t c0) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  __m512 out[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = _mm512_setzero_ps();
  Tile512<R>(wq, blocks, g.block_size / 4, a8, kp, a_scales, a_sums, sc, zp, out);
  Store512<R>(g, out, bias, y, ldy, c0);
}

// Few rows without VBMI: the quads built in registers as the weights stream
// past (Quad512), nothing stored in between.
template <int R>
FCB_VNNI512 inline void FewRows512(const NBitsGeom& g, const uint8_t* q, const int8_t* a8, const float* a_scales,
                                   const int32_t* a_sums, const float* sc, const uint8_t* zp, const float* bias,
                                   float* y, int64_t ldy, int64_t c0) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size, bq = g.block_size / 4;
  __m512 out[R];
  for (int r = 0; r < R; ++r) out[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    for (int64_t j = b * bq; j < (b + 1) * bq; ++j) {
      const __m512i wv = Quad512(static_cast<int>(g.bits), q, j);
      for (int r = 0; r < R; ++r) acc[r] = _mm512_dpbusd_epi32(acc[r], wv, _mm512_set1_epi32(Quad(a8 + r * kp + 4 * j)));
    }
    AddBlock512<R>(acc, b, blocks, a_scales, a_sums, sc, zp, out);
  }
  Store512<R>(g, out, bias, y, ldy, c0);
}

// ---- AVX512-VBMI hosts: a panel's 64-byte row groups transposed by one
// byte permute (VPERMB) into a 32-bit lane per column. For 8 bits, rows k ..
// k + 3 give lane c = weights (k .. k + 3, c) in order. For 4 bits, rows i ..
// i + 3 hold k = 2i .. 2i + 7: the low nibbles give lane c = (k0, k0 + 2,
// k0 + 4, k0 + 6) and the high ones (k0 + 1, k0 + 3, ...), so the activations
// are stored in that order too (PermutedBytes: per 8 values the even ones,
// then the odd ones). The products are the same; only the order of the
// additions inside one exact integer sum differs.
#define FCB_VBMI512 __attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi")))

FCB_VBMI512 inline __m512i TransposeIndex() {
  alignas(64) uint8_t idx[64];
  for (int c = 0; c < 16; ++c)
    for (int t = 0; t < 4; ++t) idx[4 * c + t] = static_cast<uint8_t>(16 * t + c);
  return _mm512_load_si512(idx);
}

FCB_VBMI512 const int8_t* PermutedBytes(const int16_t* qa, int64_t n, int bits) {
  if (bits != 4) return Bytes512(qa, n);
  thread_local std::vector<int8_t> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += 8)  // n is a multiple of the block size (>= 16)
    for (int t = 0; t < 4; ++t) {
      buf[static_cast<size_t>(i + t)] = static_cast<int8_t>(qa[i + 2 * t]);
      buf[static_cast<size_t>(i + 4 + t)] = static_cast<int8_t>(qa[i + 2 * t + 1]);
    }
  return buf.data();
}

// Quads j = 0 .. kp / 4 of one panel (the order PermutedBytes expects) into wq.
FCB_VBMI512 inline void PanelQuadsVbmi(int bits, const uint8_t* q, int64_t kp, int32_t* wq) {
  const __m512i idx = TransposeIndex();
  if (bits == 4) {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    for (int64_t g = 0; g < kp / 8; ++g) {
      const __m512i v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(q + g * 64));
      _mm512_store_si512(wq + 2 * g * 16, _mm512_and_si512(v, nib));
      _mm512_store_si512(wq + (2 * g + 1) * 16, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
    }
  } else {
    for (int64_t j = 0; j < kp / 4; ++j)
      _mm512_store_si512(wq + j * 16, _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(q + j * 64)));
  }
}

// Few rows: the weights transposed in registers as they stream past, each
// vector feeding every row (nothing stored in between).
template <int R>
FCB_VBMI512 inline void FewRowsVbmi(const NBitsGeom& g, const uint8_t* q, const int8_t* a8, const float* a_scales,
                                    const int32_t* a_sums, const float* sc, const uint8_t* zp, const float* bias,
                                    float* y, int64_t ldy, int64_t c0) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  const __m512i idx = TransposeIndex();
  const __m512i nib = _mm512_set1_epi8(0x0F);
  __m512 out[R];
  for (int r = 0; r < R; ++r) out[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    const int64_t k0 = b * g.block_size;
    _mm_prefetch(reinterpret_cast<const char*>(sc + b * 16) + kPrefetchBytes, _MM_HINT_T0);
    if (g.bits == 4) {
      const uint8_t* src = q + k0 / 2 * 16;
      for (int64_t k = 0; k < g.block_size; k += 8) {
        _mm_prefetch(reinterpret_cast<const char*>(src + k * 8 + kPrefetchBytes), _MM_HINT_T0);
        const __m512i v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(src + k * 8));
        const __m512i lo = _mm512_and_si512(v, nib), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
        for (int r = 0; r < R; ++r) {
          const int8_t* a = a8 + r * kp + k0 + k;
          acc[r] = _mm512_dpbusd_epi32(acc[r], lo, _mm512_set1_epi32(Quad(a)));
          acc[r] = _mm512_dpbusd_epi32(acc[r], hi, _mm512_set1_epi32(Quad(a + 4)));
        }
      }
    } else {
      const uint8_t* src = q + k0 * 16;
      for (int64_t k = 0; k < g.block_size; k += 4) {
        _mm_prefetch(reinterpret_cast<const char*>(src + k * 16 + kPrefetchBytes), _MM_HINT_T0);
        const __m512i v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(src + k * 16));
        for (int r = 0; r < R; ++r)
          acc[r] = _mm512_dpbusd_epi32(acc[r], v, _mm512_set1_epi32(Quad(a8 + r * kp + k0 + k)));
      }
    }
    AddBlock512<R>(acc, b, blocks, a_scales, a_sums, sc, zp, out);
  }
  Store512<R>(g, out, bias, y, ldy, c0);
}

// ---- AVX-VNNI (VEX, 256 bits): a panel's 16 columns are two registers.

FCB_VNNI256 inline void Quad256(int bits, const uint8_t* q, int64_t j, __m256i* w) {
  for (int h = 0; h < 2; ++h) {
    if (bits == 4) {
      const __m256i lo = _mm256_set1_epi32(0x0F), hi = _mm256_set1_epi32(0xF0);
      const __m256i x0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 2 * j * 16 + 8 * h)));
      const __m256i x1 =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + (2 * j + 1) * 16 + 8 * h)));
      const __m256i t0 = _mm256_or_si256(_mm256_and_si256(x0, lo), _mm256_slli_epi32(_mm256_and_si256(x0, hi), 4));
      const __m256i t1 = _mm256_or_si256(_mm256_and_si256(x1, lo), _mm256_slli_epi32(_mm256_and_si256(x1, hi), 4));
      w[h] = _mm256_or_si256(t0, _mm256_slli_epi32(t1, 16));
    } else {
      const uint8_t* r = q + 4 * j * 16 + 8 * h;
      const __m256i x0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r)));
      const __m256i x1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + 16)));
      const __m256i x2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + 32)));
      const __m256i x3 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + 48)));
      w[h] = _mm256_or_si256(_mm256_or_si256(x0, _mm256_slli_epi32(x1, 8)),
                             _mm256_or_si256(_mm256_slli_epi32(x2, 16), _mm256_slli_epi32(x3, 24)));
    }
  }
}

FCB_VNNI256 const int8_t* Bytes256(const int16_t* qa, int64_t n) {
  thread_local std::vector<int8_t> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<int8_t>(qa[i]);
  return buf.data();
}

template <int R>
FCB_VNNI256 inline void Rows256(const NBitsGeom& g, const int32_t* wq, const int8_t* a8, const float* a_scales,
                                const int32_t* a_sums, const float* sc, const uint8_t* zp, const float* bias,
                                float* y, int64_t ldy, int64_t c0) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size, bq = g.block_size / 4;
  __m256 out[R][2];
  for (int r = 0; r < R; ++r) out[r][0] = out[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i acc[R][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const int32_t* w = wq + b * bq * 16;
    const int8_t* a = a8 + b * bq * 4;
    for (int64_t j = 0; j < bq; ++j) {
      const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + j * 16));
      const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + j * 16 + 8));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i av = _mm256_set1_epi32(Quad(a + r * kp + 4 * j));
        acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], w0, av);
        acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], w1, av);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 s = _mm256_loadu_ps(sc + b * 16 + 8 * h);
      const __m256i z = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zp + b * 16 + 8 * h)));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i dot =
            _mm256_sub_epi32(acc[r][h], _mm256_mullo_epi32(z, _mm256_set1_epi32(a_sums[r * blocks + b])));
        const __m256 sr = _mm256_mul_ps(s, _mm256_set1_ps(a_scales[r * blocks + b]));
        out[r][h] = _mm256_fmadd_ps(sr, _mm256_cvtepi32_ps(dot), out[r][h]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) {
      alignas(32) float o[8];
      _mm256_store_ps(o, out[r][h]);
      for (int c = 0; c < 8; ++c) {
        const int64_t col = c0 + 8 * h + c;
        if (col >= g.n) break;
        y[r * ldy + col] = bias ? o[c] + bias[col] : o[c];
      }
    }
}

// Rows [0, m) of one panel, a tile of rows at a time: tiles of Big rows
// while Big rows remain, then at most one tile of each size in Rest (in
// descending order, the last 1), so each row is computed once, in order. A
// tile of R rows starting at row r is Tile::Run<R> with the row-major
// operands (activations, their scales and sums, y) advanced to row r; w (the
// panel's weights, packed or as quads) and the panel's scales, zero points
// and columns are the same for every tile. RowTiles and its lambda are
// always inlined: they have no target attribute, so only in the caller (the
// kernel, of the tiles' target) can the tile calls be inlined.
template <class Tile, int Big, int... Rest, class W>
__attribute__((always_inline)) inline void RowTiles(const NBitsGeom& g, int64_t m, W w, const int8_t* a8,
                                                    const float* a_scales, const int32_t* a_sums, const float* sc,
                                                    const uint8_t* zp, const float* bias, float* y, int64_t ldy,
                                                    int64_t c0) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  int64_t r = 0;
  auto tile = [&](auto rows) __attribute__((always_inline)) {
    constexpr int R = decltype(rows)::value;
    Tile::template Run<R>(g, w, a8 + r * kp, a_scales + r * blocks, a_sums + r * blocks, sc, zp, bias, y + r * ldy,
                          ldy, c0);
    r += R;
  };
  for (; r + Big <= m;) tile(std::integral_constant<int, Big>());
  ((r + Rest <= m ? tile(std::integral_constant<int, Rest>()) : void()), ...);
}

// The tile functions above as the types RowTiles takes (each with its target).
struct Rows512Tile {
  template <int R, class... A>
  FCB_VNNI512 static void Run(A... a) { Rows512<R>(a...); }
};
struct FewRows512Tile {
  template <int R, class... A>
  FCB_VNNI512 static void Run(A... a) { FewRows512<R>(a...); }
};
struct FewRowsVbmiTile {
  template <int R, class... A>
  FCB_VBMI512 static void Run(A... a) { FewRowsVbmi<R>(a...); }
};
struct Rows256Tile {
  template <int R, class... A>
  FCB_VNNI256 static void Run(A... a) { Rows256<R>(a...); }
};

// One panel's weights as quads in a per-thread buffer (64-byte aligned).
int32_t* QuadBuffer(int64_t ints) {
  thread_local std::vector<int32_t> buf;
  if (static_cast<int64_t>(buf.size()) < ints + 16) buf.resize(static_cast<size_t>(ints + 16));
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<int32_t*>((p + 63) & ~static_cast<uintptr_t>(63));
}

}  // namespace

FCB_VNNI512 void GemmNBitsI8Avx512Vnni(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                                       const int32_t* a_sums, const uint8_t* qw, const float* scales,
                                       const uint8_t* zero_points, const float* bias, float* y, int64_t ldy,
                                       int64_t panel_begin, int64_t panel_end) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size, quads = kp / 4;
  const int64_t panel_bytes = NBitsPanelBytes(g);
  const int8_t* a8 = Bytes512(qa, m * kp);
  int32_t* wq = m > kFewRows ? QuadBuffer(quads * 16) : nullptr;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* q = qw + p * panel_bytes;
    const float* sc = scales + p * blocks * kPanel;
    const uint8_t* zp = zero_points + p * blocks * kPanel;
    const int64_t c0 = p * kPanel;
    if (m <= kFewRows) {
      RowTiles<FewRows512Tile, kFewRows, 1>(g, m, q, a8, a_scales, a_sums, sc, zp, bias, y, ldy, c0);
      continue;
    }
    for (int64_t j = 0; j < quads; ++j) _mm512_store_si512(wq + j * 16, Quad512(static_cast<int>(g.bits), q, j));
    RowTiles<Rows512Tile, kRows, 4, 2, 1>(g, m, wq, a8, a_scales, a_sums, sc, zp, bias, y, ldy, c0);
  }
}

FCB_VBMI512 void GemmNBitsI8Avx512VnniVbmi(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                                           const int32_t* a_sums, const uint8_t* qw, const float* scales,
                                           const uint8_t* zero_points, const float* bias, float* y, int64_t ldy,
                                           int64_t panel_begin, int64_t panel_end) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size, quads = kp / 4;
  const int64_t panel_bytes = NBitsPanelBytes(g);
  const int8_t* a8 = PermutedBytes(qa, m * kp, static_cast<int>(g.bits));
  int32_t* wq = m > kFewRows ? QuadBuffer(quads * 16) : nullptr;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* q = qw + p * panel_bytes;
    const float* sc = scales + p * blocks * kPanel;
    const uint8_t* zp = zero_points + p * blocks * kPanel;
    const int64_t c0 = p * kPanel;
    if (m <= kFewRows) {
      RowTiles<FewRowsVbmiTile, kFewRows, 1>(g, m, q, a8, a_scales, a_sums, sc, zp, bias, y, ldy, c0);
      continue;
    }
    PanelQuadsVbmi(static_cast<int>(g.bits), q, kp, wq);
    RowTiles<Rows512Tile, kRows, 4, 2, 1>(g, m, wq, a8, a_scales, a_sums, sc, zp, bias, y, ldy, c0);
  }
}

FCB_VNNI256 void GemmNBitsI8AvxVnni(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                                    const int32_t* a_sums, const uint8_t* qw, const float* scales,
                                    const uint8_t* zero_points, const float* bias, float* y, int64_t ldy,
                                    int64_t panel_begin, int64_t panel_end) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size, quads = kp / 4;
  const int64_t panel_bytes = NBitsPanelBytes(g);
  const int8_t* a8 = Bytes256(qa, m * kp);
  int32_t* wq = QuadBuffer(quads * 16);
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const uint8_t* q = qw + p * panel_bytes;
    for (int64_t j = 0; j < quads; ++j) {
      __m256i w[2];
      Quad256(static_cast<int>(g.bits), q, j, w);
      _mm256_store_si256(reinterpret_cast<__m256i*>(wq + j * 16), w[0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(wq + j * 16 + 8), w[1]);
    }
    const float* sc = scales + p * blocks * kPanel;
    const uint8_t* zp = zero_points + p * blocks * kPanel;
    const int64_t c0 = p * kPanel;
    RowTiles<Rows256Tile, 4, 2, 1>(g, m, wq, a8, a_scales, a_sums, sc, zp, bias, y, ldy, c0);
  }
}

}  // namespace fcb::kernels::internal
#endif
