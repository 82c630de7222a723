// Int8 kernels: 8-bit matrix products with 32-bit accumulation and a
// dequantizing or requantizing epilogue, for the quantized operators
// (QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger and the
// DequantizeLinear -> Conv/MatMul/Gemm -> QuantizeLinear patterns the
// FuseQuantized pass turns into QConvNhwc steps).
//
// Arithmetic. Every product is formed as unsigned 8-bit activation times
// signed 8-bit weight: an int8 activation is shifted by +128 (and its zero
// point with it), a uint8 weight by -128 at packing time (and its zero point).
// The shifts change no result:
//   sum_k (a - za)(b - zb) = sum_k a'b' - za' * colsum(b') - zb' * rowsum(a') + K za' zb'
// with a' = a (+128), b' = b (-128). The kernels form sum_k a'b' exactly in
// int32 (products <= 255 * 128, so no instruction sequence here saturates);
// the column terms are computed per run (`col_add`), the row term only when
// some weight zero point is nonzero (`b_zp`). Results equal the plain
// definition bit for bit, as ONNX requires of MatMulInteger and ConvInteger.
//
// Weights are packed once at compile time into target-neutral panels:
// [ceil(n/16)][K4/4][16][4] bytes, K4 = K rounded up to 4, so that one
// 64-byte row of a panel holds four reduction steps of 16 columns, the
// operand shape of x86's VPDPBUSD (AVX512-VNNI, AVX-VNNI) and of AArch64's
// SDOT/UDOT; every target reads the same stored bytes.
//
// Dot-product code per target, chosen when the kernel table is built:
//   x86-64-v4: AVX512-VNNI when the host has it, else AVX-512BW VPMADDWD;
//   x86-64-v3: AVX-VNNI (VEX) when the host has it, else AVX2 VPMADDWD;
//   x86-64-v2: SSE4 PMADDWD; generic: portable C++;
//   AArch64: SDOT (the armv8.2-a dot product) when the host has it, else NEON
//   widening multiply-accumulate (portable Highway code).
// VNNI is a feature inside the x86 levels rather than a target of its own:
// the packed weights and the plan are the same either way, so a file gains
// nothing from naming it, and a v4 host without VNNI still runs v4 code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/target.h"
#include "kernels/kernels.h"

namespace fcb::kernels {

// Bytes of per-thread scratch the int8 conv kernels use (im2col rows, or the
// depthwise kernel's sums of a block of pixels), 64-byte aligned.
inline constexpr int64_t kQScratchBytes = 256 * 1024;

// Output element type of an int8 kernel.
enum class QOut : int32_t { kInt32 = 0, kFloat = 1, kUint8 = 2, kInt8 = 3 };
constexpr int64_t QOutBytes(QOut o) { return o == QOut::kInt32 || o == QOut::kFloat ? 4 : 1; }

// The epilogue applied to each exact int32 sum s of output (row m, column n):
//   kInt32:  y = s + col_add[n] - b_zp[n] * rowsum[m]
//   other:   v = float(that) * mult[n] + bias[n] (bias may be null), then act;
//            kFloat stores v, kUint8/kInt8 store saturate(round_half_even(v / q_scale) + q_zp).
// mult and bias are indexed by column; col_add/b_zp by column too (b_zp null
// when every weight zero point is zero).
struct QEpilogue {
  QOut out = QOut::kFloat;
  const int32_t* col_add = nullptr;  // [n], never null
  const int32_t* b_zp = nullptr;     // [n] or null
  const float* mult = nullptr;       // [n] (float and quantized outputs)
  const float* bias = nullptr;       // [n] or null
  Epilogue act;
  float q_scale = 1.f;
  int32_t q_zp = 0;
};

// A convolution on NHWC uint8 input (after the +128 shift for int8 input,
// done by the kernel when `x_signed`). Geometry in g (in_pixel_stride and
// out_pixel_stride in elements); weights PackQConv (per group, K = kh*kw*icg).
struct QConvArgs {
  int32_t x_zp = 0;       // the input zero point (before the shift)
  bool x_signed = false;  // input is int8
  const int8_t* w = nullptr;
  // Per group: col_add/b_zp/mult/bias of its ocg columns start at g * ocg_padded.
  QEpilogue ep;
  void* y = nullptr;
};

// Raw dot-product tile: raw[r][j] = sum_{k < k4} a[r*lda + k] * b(k, j) for
// rows r < rows (<= kQTileRows) and columns j < 16 * panels (panels 1 to
// kQTilePanels, panel p at b + p * panel_stride bytes); raw has a row stride
// of kQRawStride.
inline constexpr int kQTileRows = 6;
inline constexpr int kQTilePanels = 4;
inline constexpr int kQRawStride = 16 * kQTilePanels;
using QTileFn = void (*)(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b,
                         int64_t panel_stride, int panels, int32_t* raw);

struct QKernelTable {
  const char* isa = nullptr;  // Highway target name
  const char* dot = nullptr;  // which dot-product code: "avx512vnni", "avxvnni", "pmaddwd", "sdot", "neon", "scalar"
  QTileFn tile = nullptr;
  // Applies the epilogue to the raw sums of a tile: raw[r * raw_stride + j]
  // is column col0 + j (j < count) of row r < rows, written to row r of the
  // output, y_row0 + r * ldy elements; rowsum[r] is row r's sum of a' (used
  // when ep.b_zp; may be null otherwise). raw rows are readable up to the
  // count rounded up to 16.
  void (*epilogue)(const QEpilogue& ep, const int32_t* raw, int64_t raw_stride, int rows, int64_t count,
                   int64_t col0, const int32_t* rowsum, void* y_row0, int64_t ldy) = nullptr;
  // Depthwise int8 conv (groups == ic == oc), NHWC; weights PackQDepthwise,
  // w_zp per channel (padded). Work items: output pixels. scratch:
  // kQScratchBytes.
  void (*depthwise)(const ConvGeom& g, const QConvArgs& a, const int32_t* w_zp, const uint8_t* x,
                    int64_t begin, int64_t end, int32_t* scratch) = nullptr;
  // QuantizeLinear of n floats with one scale and zero point: saturate(
  // round_half_even(x / scale) + zp) to int8 (`to_signed`) or uint8; NaN -> zp.
  void (*quantize)(const float* x, int64_t n, float scale, int32_t zp, bool to_signed, void* y) = nullptr;
  // DequantizeLinear of n int8/uint8 values: float(x - zp) * scale.
  void (*dequantize)(const void* x, bool x_signed, int64_t n, float scale, int32_t zp, float* y) = nullptr;
  // Smallest and largest of n floats, NaN skipped (+inf / -inf when none).
  void (*minmax)(const float* x, int64_t n, float* mn, float* mx) = nullptr;
  // y[i] = table[x[i] ^ flip] for n bytes (flip 0x80 maps int8 x to its
  // index x + 128). Byte permutes (AVX512-VBMI) where the host has them.
  void (*lookup)(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n, uint8_t flip) = nullptr;
};

// Every kernel of QKernelTable: its member and the function each target's
// portable int8 code (int8_hwy.cc) fills it with; kernel_table.cc checks that
// no member stayed null.
#define FCB_I8_KERNELS(X)                                                                                \
  X(tile, Tile) X(epilogue, Epilogue) X(depthwise, Depthwise) X(quantize, Quantize) X(dequantize, Dequantize) \
  X(minmax, MinMax) X(lookup, Lookup)
static_assert(sizeof(QKernelTable) == 2 * sizeof(const char*) + (0 FCB_I8_KERNELS(FCB_COUNT_KERNEL)) * sizeof(void (*)()),
              "every QKernelTable member is in FCB_I8_KERNELS");

// The int8 table of a target is its bundle's (GetKernelBundle(target).i8, the
// dot-product code chosen for this host). Every dot-product code this host
// can run for `target` (the chosen one first): tests compare each against the
// scalar reference.
std::vector<QKernelTable> QKernelVariantsForTesting(TargetId target);

// The gemm_nbits_i8 codes (kernels.h) this host can run for `target`, the one
// its bundle's fp32 table takes first: on x86-64-v4 VPDPBUSD on ZMM where the
// host has AVX512-VNNI (with VPERMB transposing the weights where it has
// AVX512-VBMI too), on x86-64-v3 the VEX form where it has AVX-VNNI
// (nbits_x86.cc), and always the target's portable code. Tests compare each
// against the scalar reference; the results are bit-identical.
struct NBitsI8Variant {
  const char* dot;  // "avx512vnni+vbmi", "avx512vnni", "avxvnni", or "portable"
  decltype(KernelTable::gemm_nbits_i8) fn;
};
std::vector<NBitsI8Variant> NBitsI8VariantsForTesting(TargetId target);

// The convolution driver (int8_conv.cc), the same for every target: it runs
// im2col (or reads 1x1 input in place), splits rows into tiles and calls the
// table's tile and epilogue; a matrix product is a 1x1 convolution over
// rows. Work items: output pixels in [begin, end). scratch: kQScratchBytes.
void QConv(const QKernelTable& t, const ConvGeom& g, const QConvArgs& a, const uint8_t* x, int64_t begin,
           int64_t end, void* scratch);

// ---- packing (compile time; the column sums at load)

inline int64_t QRoundK(int64_t k) { return (k + 3) / 4 * 4; }
// B logical [k][n] (element (k, j) at b[k*ldb + j*ldcol]), int8 or uint8
// (`b_unsigned`: shifted by -128) -> [ceil(n/16)][K4/4][16][4] int8.
std::vector<int8_t> PackQGemmB(const void* b, bool b_unsigned, int64_t k, int64_t n, int64_t ldb, int64_t ldcol);
int64_t PackedQGemmBytes(int64_t k, int64_t n);
// Conv weights ONNX [oc][icg][kh][kw] -> per group g, PackQGemmB of the
// [K = kh*kw*icg][ocg] matrix with k = (ky*kw + kx)*icg + c.
std::vector<int8_t> PackQConv(const void* w, bool w_unsigned, int64_t oc, int64_t icg, int64_t kh, int64_t kw,
                              int64_t groups);
int64_t PackedQConvBytes(int64_t oc, int64_t icg, int64_t kh, int64_t kw, int64_t groups);
// Column sums of the packed (shifted) weights, per group [g][ceil(ocg/16)*16].
std::vector<int32_t> QPackedColumnSums(const int8_t* packed, int64_t k, int64_t ocg, int64_t groups);
// Depthwise weights [c][1][kh][kw] -> [ky][kx][ceil(c/16)*16] int8 (uint8 shifted by -128).
std::vector<int8_t> PackQDepthwise(const void* w, bool w_unsigned, int64_t c, int64_t kh, int64_t kw);

}  // namespace fcb::kernels
