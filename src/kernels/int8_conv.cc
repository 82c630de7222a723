// The int8 drivers and packing (layouts and arithmetic in int8.h), and the
// choice of dot-product code per target.
#include "kernels/int8.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/int8_internal.h"
#include "kernels/kernel_table_internal.h"

namespace fcb::kernels {
namespace {

constexpr int64_t kPanelBytes = 64;  // one reduction group (4 steps) of a 16-column panel


// memcpy for the short runs of im2col (a few taps of a few channels): fixed
// 16-byte copies the compiler inlines, where a libc call costs more than the copy.
inline void CopyBytes(uint8_t* dst, const uint8_t* src, int64_t n) {
  for (; n >= 16; n -= 16, dst += 16, src += 16) std::memcpy(dst, src, 16);
  if (n >= 8) {
    std::memcpy(dst, src, 8);
    dst += 8, src += 8, n -= 8;
  }
  if (n >= 4) {
    std::memcpy(dst, src, 4);
    dst += 4, src += 4, n -= 4;
  }
  for (; n > 0; --n) *dst++ = *src++;
}

// Rows of A handled per pass over the weights: a block small enough that it
// stays in cache while every column panel of B streams past it.
constexpr int64_t kRowBlock = 8 * kQTileRows;

// A GEMM on packed int8 weights: rows of A (uint8, K4 readable bytes per row;
// the bytes in [K, K4) may hold anything, the packed weights are zero there)
// times B (PackQGemmB, n columns), out[m * ldy + col] of the output type.
struct QGemmArgs {
  int64_t n = 0, k = 0;  // columns, reduction length
  const int8_t* b = nullptr;
  QEpilogue ep;
  int64_t ldy = 0;  // elements between output rows
};

// An int8 weight as the packed layouts hold it: uint8 shifted by -128.
inline int8_t ShiftedWeight(const void* w, bool w_unsigned, int64_t i) {
  return static_cast<int8_t>(w_unsigned ? static_cast<int32_t>(static_cast<const uint8_t*>(w)[i]) - 128
                                        : static_cast<const int8_t*>(w)[i]);
}

void GemmRows(const QKernelTable& t, const QGemmArgs& a, const uint8_t* A, int64_t lda, int64_t rows, void* y0) {
  const int64_t k4 = QRoundK(a.k);
  const int64_t panels = PanelCount(a.n);
  const int64_t pstride = k4 / 4 * kPanelBytes;
  const int64_t esize = QOutBytes(a.ep.out);
  alignas(64) int32_t raw[kQTileRows * kQRawStride];
  std::array<int32_t, kRowBlock> rowsum{};
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t rb = std::min(kRowBlock, rows - r0);
    if (a.ep.b_zp != nullptr)
      for (int64_t r = 0; r < rb; ++r) {
        const uint8_t* row = A + (r0 + r) * lda;
        int32_t s = 0;
        for (int64_t k = 0; k < a.k; ++k) s += row[k];
        rowsum[r] = s;
      }
    for (int64_t p = 0; p < panels; p += kQTilePanels) {
      const int np = static_cast<int>(std::min<int64_t>(kQTilePanels, panels - p));
      const int64_t count = std::min<int64_t>(a.n - p * kPanel, np * kPanel);
      for (int64_t m = 0; m < rb; m += kQTileRows) {
        const int tr = static_cast<int>(std::min<int64_t>(kQTileRows, rb - m));
        t.tile(A + (r0 + m) * lda, lda, tr, k4, a.b + p * pstride, pstride, np, raw);
        t.epilogue(a.ep, raw, kQRawStride, tr, count, p * kPanel, rowsum.data() + m,
                   static_cast<char*>(y0) + (r0 + m) * a.ldy * esize, a.ldy);
      }
    }
  }
}

}  // namespace

void QConv(const QKernelTable& t, const ConvGeom& g, const QConvArgs& a, const uint8_t* x, int64_t begin,
           int64_t end, void* scratch) {
  if (end <= begin) return;
  const int64_t icg = g.ic / g.groups, ocg = g.oc / g.groups, ocg_pad = RoundUpToPanel(ocg);
  const int64_t K = g.kh * g.kw * icg, k4 = QRoundK(K);
  const int64_t esize = QOutBytes(a.ep.out);
  const uint8_t zpad = static_cast<uint8_t>(a.x_zp + (a.x_signed ? 128 : 0));
  const uint8_t flip = a.x_signed ? 0x80 : 0;
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0 &&
                         g.oh == g.ih && g.ow == g.iw;
  const bool direct = pointwise && !a.x_signed && icg % 4 == 0;
  const int64_t wbytes = PackedQGemmBytes(K, ocg);
  const int64_t block = direct ? end - begin : std::max<int64_t>(1, std::min<int64_t>(kQScratchBytes / k4, 1024));
  auto* col = static_cast<uint8_t*>(scratch);
  for (int64_t p0 = begin; p0 < end; p0 += block) {
    const int64_t rows = std::min(block, end - p0);
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const uint8_t* A;
      int64_t lda;
      if (direct) {
        A = x + p0 * g.in_pixel_stride + gi * icg;
        lda = g.in_pixel_stride;
      } else {
        // im2col: row r holds taps (ky, kx, c) of output pixel p0 + r;
        // padding taps hold the input zero point (they add nothing).
        int64_t ox = p0 % g.ow, oy = (p0 / g.ow) % g.oh, b = p0 / (g.ow * g.oh);
        for (int64_t r = 0; r < rows; ++r) {
          if (r > 0 && ++ox == g.ow) {
            ox = 0;
            if (++oy == g.oh) oy = 0, ++b;
          }
          uint8_t* dst = col + r * k4;
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            const int64_t iy = oy * g.sh - g.pad_top + ky * g.dh;
            const int64_t ix0 = ox * g.sw - g.pad_left;
            if (flip == 0 && g.dw == 1 && g.groups == 1 && iy >= 0 && iy < g.ih && ix0 >= 0 && ix0 + g.kw <= g.iw &&
                g.in_pixel_stride == icg) {
              // The row's taps are kw neighbouring pixels: one copy.
              CopyBytes(dst, x + ((b * g.ih + iy) * g.iw + ix0) * icg, g.kw * icg);
              dst += g.kw * icg;
              continue;
            }
            for (int64_t kx = 0; kx < g.kw; ++kx, dst += icg) {
              const int64_t ix = ox * g.sw - g.pad_left + kx * g.dw;
              if (iy < 0 || iy >= g.ih || ix < 0 || ix >= g.iw) {
                std::memset(dst, zpad, static_cast<size_t>(icg));
                continue;
              }
              const uint8_t* src = x + ((b * g.ih + iy) * g.iw + ix) * g.in_pixel_stride + gi * icg;
              if (flip == 0) {
                CopyBytes(dst, src, icg);
              } else {
                for (int64_t c = 0; c < icg; ++c) dst[c] = src[c] ^ flip;
              }
            }
          }
          std::memset(dst, 0, static_cast<size_t>(k4 - K));
        }
        A = col;
        lda = k4;
      }
      QGemmArgs ga;
      ga.n = ocg;
      ga.k = K;
      ga.b = a.w + gi * wbytes;
      ga.ep = a.ep;
      const int64_t c0 = gi * ocg_pad;
      ga.ep.col_add += c0;
      if (ga.ep.b_zp) ga.ep.b_zp += c0;
      if (ga.ep.mult) ga.ep.mult += c0;
      if (ga.ep.bias) ga.ep.bias += c0;
      ga.ldy = g.out_pixel_stride;
      GemmRows(t, ga, A, lda, rows, static_cast<char*>(a.y) + (p0 * g.out_pixel_stride + gi * ocg) * esize);
    }
  }
}

namespace internal {

// By value and restrict-qualified: a uint8 store may alias anything, which
// would otherwise make the compiler reload every pointer per element.
void QLookupScalar(const uint8_t* __restrict x, const uint8_t* __restrict t, uint8_t* __restrict y, int64_t n,
                   uint8_t flip) {
  uint8_t table[256];
  std::memcpy(table, t, 256);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint8_t a = table[x[i] ^ flip], b = table[x[i + 1] ^ flip], c = table[x[i + 2] ^ flip],
                  d = table[x[i + 3] ^ flip];
    y[i] = a, y[i + 1] = b, y[i + 2] = c, y[i + 3] = d;
  }
  for (; i < n; ++i) y[i] = table[x[i] ^ flip];
}

}  // namespace internal

// ---- packing

int64_t PackedQGemmBytes(int64_t k, int64_t n) { return PanelCount(n) * QRoundK(k) * kPanel; }

std::vector<int8_t> PackQGemmB(const void* b, bool b_unsigned, int64_t k, int64_t n, int64_t ldb, int64_t ldcol) {
  const int64_t k4 = QRoundK(k), panels = PanelCount(n);
  std::vector<int8_t> out(static_cast<size_t>(PackedQGemmBytes(k, n)), 0);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k4; kk += 4)
      for (int64_t j = 0; j < kPanel; ++j)
        for (int64_t q = 0; q < 4; ++q) {
          const int64_t col = p * kPanel + j, kr = kk + q;
          if (col >= n || kr >= k) continue;
          out[static_cast<size_t>(p * k4 * kPanel + kk * kPanel + j * 4 + q)] =
              ShiftedWeight(b, b_unsigned, kr * ldb + col * ldcol);
        }
  return out;
}

int64_t PackedQConvBytes(int64_t oc, int64_t icg, int64_t kh, int64_t kw, int64_t groups) {
  return groups * PackedQGemmBytes(kh * kw * icg, oc / groups);
}

std::vector<int8_t> PackQConv(const void* w, bool w_unsigned, int64_t oc, int64_t icg, int64_t kh, int64_t kw,
                              int64_t groups) {
  const int64_t ocg = oc / groups, K = kh * kw * icg;
  std::vector<int8_t> out;
  out.reserve(static_cast<size_t>(PackedQConvBytes(oc, icg, kh, kw, groups)));
  for (int64_t g = 0; g < groups; ++g) {
    // The group's weights as a [K][ocg] matrix: element (k, o) with
    // k = (ky*kw + kx)*icg + c lives at ONNX index ((o*icg + c)*kh + ky)*kw + kx.
    std::vector<uint8_t> m(static_cast<size_t>(K * ocg));
    const auto* src = static_cast<const uint8_t*>(w) + g * ocg * icg * kh * kw;
    for (int64_t o = 0; o < ocg; ++o)
      for (int64_t c = 0; c < icg; ++c)
        for (int64_t ky = 0; ky < kh; ++ky)
          for (int64_t kx = 0; kx < kw; ++kx)
            m[static_cast<size_t>(((ky * kw + kx) * icg + c) * ocg + o)] = src[((o * icg + c) * kh + ky) * kw + kx];
    std::vector<int8_t> p = PackQGemmB(m.data(), w_unsigned, K, ocg, ocg, 1);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

std::vector<int32_t> QPackedColumnSums(const int8_t* packed, int64_t k, int64_t ocg, int64_t groups) {
  const int64_t k4 = QRoundK(k), panels = PanelCount(ocg), pad = panels * kPanel;
  std::vector<int32_t> out(static_cast<size_t>(groups * pad), 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int8_t* base = packed + g * PackedQGemmBytes(k, ocg);
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t kk = 0; kk < k4; kk += 4)
        for (int64_t j = 0; j < kPanel; ++j)
          for (int64_t q = 0; q < 4; ++q)
            out[static_cast<size_t>(g * pad + p * kPanel + j)] += base[p * k4 * kPanel + kk * kPanel + j * 4 + q];
  }
  return out;
}

std::vector<int8_t> PackQDepthwise(const void* w, bool w_unsigned, int64_t c, int64_t kh, int64_t kw) {
  const int64_t cp = RoundUpToPanel(c);
  std::vector<int8_t> out(static_cast<size_t>(kh * kw * cp), 0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t t = 0; t < kh * kw; ++t) {
      out[static_cast<size_t>(t * cp + ch)] = ShiftedWeight(w, w_unsigned, ch * kh * kw + t);
    }
  return out;
}

// ---- the tables

namespace {

// The host-feature int8 code a target may take (the manifest's i8_dot column).
enum class QDot { kNone, kAvxVnni, kAvx512, kSdot };

QDot DotOf(TargetId target) {
  switch (target) {
#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, march, i8_hwy, i8_dot, ...) \
  case TargetId::id: return QDot::k##i8_dot;
#include "core/targets.def"
#undef FCB_TARGET
  }
  return QDot::kNone;
}

}  // namespace

std::vector<QKernelTable> internal::QKernelVariants(TargetId target) {
  std::vector<QKernelTable> v;
  QKernelTable base{};
  if (!internal::FillQKernelTable(target, &base)) return v;
  const HostFeatures& f = DetectHost();
  auto add = [&](QTileFn tile, const char* dot) {
    QKernelTable t = base;
    t.tile = tile;
    t.dot = dot;
    v.push_back(t);
  };
  switch (DotOf(target)) {
    case QDot::kNone: break;
#if defined(__x86_64__) || defined(_M_X64)
    case QDot::kAvx512:
      // The table lookup is not a dot product: every variant takes VBMI where
      // the host has it.
      if (f.avx512vbmi && f.os_avx512) base.lookup = internal::QLookupVbmi;
      if (f.avx512vnni && f.os_avx512) add(internal::QTileAvx512Vnni, "avx512vnni");
      break;
    case QDot::kAvxVnni:
      if (f.avxvnni && f.os_avx) add(internal::QTileAvxVnni, "avxvnni");
      break;
#endif
#if defined(__aarch64__)
    case QDot::kSdot:
      // The dot-product extension is optional before armv8.4-a, so it is a
      // host feature here as VNNI is on x86.
      if (f.asimddp) add(internal::QTileNeonDot, "sdot");
      break;
#endif
    default: break;  // another CPU family's code, which this build has no rows for
  }
  (void)f;
  v.push_back(base);
  return v;
}

std::vector<QKernelTable> QKernelVariantsForTesting(TargetId target) { return internal::QKernelVariants(target); }

std::vector<NBitsI8Variant> internal::NBitsI8Variants(TargetId target,
                                                      decltype(KernelTable::gemm_nbits_i8) portable) {
  std::vector<NBitsI8Variant> v;
  const HostFeatures& f = DetectHost();
  switch (DotOf(target)) {
#if defined(__x86_64__) || defined(_M_X64)
    case QDot::kAvx512:
      if (f.avx512vnni && f.avx512vbmi && f.os_avx512)
        v.push_back({"avx512vnni+vbmi", internal::GemmNBitsI8Avx512VnniVbmi});
      if (f.avx512vnni && f.os_avx512) v.push_back({"avx512vnni", internal::GemmNBitsI8Avx512Vnni});
      break;
    case QDot::kAvxVnni:
      if (f.avxvnni && f.os_avx) v.push_back({"avxvnni", internal::GemmNBitsI8AvxVnni});
      break;
#endif
    default: break;
  }
  (void)f;
  if (portable) v.push_back({"portable", portable});
  return v;
}

std::vector<NBitsI8Variant> NBitsI8VariantsForTesting(TargetId target) {
  KernelTable t{};  // the target's own (portable) code, as the bundle had it before choosing
  if (internal::FillKernelTable(target, &t) == 0) return {};
  return internal::NBitsI8Variants(target, t.gemm_nbits_i8);
}

}  // namespace fcb::kernels
