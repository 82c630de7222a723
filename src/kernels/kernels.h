// Compute kernels: the contract between the runtime and the per-target code.
//
// Kernels are written once on Highway (kernels_hwy.cc) and compiled for every
// target; a target's KernelTable holds its function pointers, and its
// KernelBundle (kernels/bundle.h) that table with the int8 one. The runtime
// picks the bundle once, when a program is loaded, and then calls the
// functions directly (Highway's advice: hoist dispatch, never per call).
//
// Kernels are pure: no allocation, no globals, no CPU probing. Every kernel
// processes a half-open range [begin, end) of its outermost work items so the
// runtime can split work across threads without the kernel knowing.
//
// Activations of 4-D convolution-family ops are NHWC. Weights are packed at
// compile time into a target-neutral layout (see packing.h): panels of
// kPanel = 16 output channels, one AVX-512 vector, two AVX2 vectors, four SSE
// vectors, so every target reads the same stored bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/target.h"
#include "kernels/nbits.h"    // NBitsGeom
#include "kernels/packing.h"  // kPanel

namespace fcb::kernels {

// Largest input channel count of the Winograd conv: its input transform for
// one block of tiles lives in per-thread scratch (36 * 24 * 256 floats).
inline constexpr int64_t kWinogradMaxIc = 256;
// Tiles per block of the Winograd conv: each block streams the packed weights
// of its column range once, so a 14x14 map (16 tiles) takes one pass.
inline constexpr int64_t kWinogradBlockTiles = 24;

// Per-thread scratch (floats) the kernels below need, for every target (the
// kernels static_assert that their blocks fit). Kernels keep no large buffer
// on the stack: the runtime hands each thread its part of the execution's
// arena (ops::RunContext::scratch), planned at compile time.
//   gemm, and conv when it runs as a GEMM (1x1 / im2col): a packed block of A,
//   10 row tiles of up to 12 rows by 256 reduction steps.
inline constexpr int64_t kGemmScratchFloats = 10 * 12 * 256;
//   winograd: the input transform of one block of tiles (36 positions x
//   kWinogradBlockTiles x kWinogradMaxIc) and its products for one column
//   block (x 32 columns).
inline constexpr int64_t kWinogradScratchFloats = 36 * kWinogradBlockTiles * (kWinogradMaxIc + 32);

// Activation fused into the epilogue of conv/gemm, and standalone unary ops.
enum class Act : int32_t {
  kNone = 0,
  kRelu = 1,
  kClip = 2,         // min(max(x, a), b)
  kSigmoid = 3,
  kHardSigmoid = 4,  // max(0, min(1, a*x + b))
  kHardSwish = 5,    // x * max(0, min(1, x/6 + 0.5))
  kTanh = 6,
  kLeakyRelu = 7,    // x >= 0 ? x : a*x
  kSilu = 8,         // x * sigmoid(x)
  kGelu = 9,         // x/2 * (1 + erf(x / sqrt(2)))
  kLast = kGelu,
};

struct Epilogue {
  Act act = Act::kNone;
  float a = 0.f;
  float b = 0.f;
};

// Geometry of an NHWC convolution. Input [n][ih][iw][ic], output [n][oh][ow][oc].
// Channels of group g are [g*icg, (g+1)*icg) on input and [g*ocg, (g+1)*ocg) on output.
struct ConvGeom {
  int64_t n, ih, iw, ic;
  int64_t oh, ow, oc;
  int64_t kh, kw;
  int64_t sh, sw;
  int64_t dh, dw;
  int64_t pad_top, pad_left;  // bottom/right padding is implied by oh/ow
  int64_t groups;
  // Row strides in floats of the input and output pixel (>= ic / oc), letting a
  // conv read or write a channel slice of a wider tensor (Concat without copy).
  int64_t in_pixel_stride, out_pixel_stride;
  // Pixel stride of the residual tensor; 0 means the same as out_pixel_stride.
  int64_t residual_pixel_stride = 0;
  // Depthwise only: floats from one tap's packed weights to the next's; 0
  // means ceil(oc / 16) * 16 (PackDepthwise of oc channels). A conv over a
  // channel slice of a wider packed tensor passes the wider one's.
  int64_t dw_tap_stride = 0;
  // The input is NCHW, [n][ic][ih][iw], not NHWC (in_pixel_stride unused).
  // Only convs PlanarConvApplies accepts may set it: they copy their input
  // rows into planes either way, so a stem reads the model's NCHW input with
  // no transpose step.
  bool in_nchw = false;
};

// The few-input-channel conv path (the RGB stems, ConvGeom::in_nchw): per
// run of output pixels of one row, it copies the input rows the window
// needs into ic * kh * sw planes in the thread's scratch (kGemmScratchFloats).
inline constexpr int64_t kPlaneMaxTaps = 512;  // kh * kw * ic
inline constexpr int64_t kPlaneMaxRows = 16;   // rows of a register tile, every target
inline constexpr int64_t kPlaneTargetFloats = 8192;  // planes kept in L1 when they can be

// Slack at a plane's end: a last tile of up to kPlaneMaxRows rows, and the
// taps' shift along the row.
inline int64_t PlaneSlack(const ConvGeom& g) { return kPlaneMaxRows + (g.kw - 1) * g.dw / g.sw + 1; }

// Output pixels per plane fill, 0 when not even a few fit the scratch.
inline int64_t PlaneSegment(const ConvGeom& g) {
  const int64_t planes = g.ic * g.kh * g.sw;
  if (planes < 1 || g.ow < 1) return 0;
  const int64_t most = kGemmScratchFloats / planes - PlaneSlack(g);
  const int64_t want = std::max<int64_t>(32, kPlaneTargetFloats / planes - PlaneSlack(g));
  const int64_t seg = std::min({g.ow, want, most});
  return seg >= std::min<int64_t>(g.ow, 8) ? seg : 0;
}

inline int64_t PlaneLength(const ConvGeom& g, int64_t seg) { return seg + PlaneSlack(g); }

// Whether the few-input-channel path takes g (ungrouped, 1..4 input channels).
inline bool PlanarConvApplies(const ConvGeom& g) {
  return g.groups == 1 && g.ic >= 1 && g.ic <= 4 && g.kh >= 1 && g.kw >= 1 && g.sw >= 1 &&
         g.kh * g.kw * g.ic <= kPlaneMaxTaps && PlaneSegment(g) > 0;
}

// Geometry of an NHWC pooling window op.
struct PoolGeom {
  int64_t n, ih, iw, c;
  int64_t oh, ow;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pad_top, pad_left;
  bool count_include_pad;  // AveragePool only
  // Bottom/right padding, which bounds the window count_include_pad counts;
  // -1 means implied by oh/ow: max(0, (oh-1)*sh + (kh-1)*dh + 1 - ih - pad_top).
  int64_t pad_bottom = -1, pad_right = -1;
};

// One query row of an attention (KernelTable::attention): keys
// k[j * k_stride .. + head) and values v[j * v_stride .. + vhead) for j in
// [0, n); score_j = scale * q.k_j, then softcap * tanh(score_j / softcap)
// when softcap > 0, then + add[j] when add is not null; out = softmax(score) .
// v, the softmax in float32 with the maximum subtracted.
struct AttentionRow {
  const float* q;
  const float* k;
  const float* v;
  int64_t k_stride, v_stride;
  int64_t n;
  const float* add;
  float scale, softcap;
  float* out;
  int64_t head, vhead;
};
// Scratch floats of KernelTable::attention for rows of up to n keys and
// values of vhead floats: the scores (rounded up to whole 64-byte lines), then
// the value sums.
inline int64_t AttentionScoreFloats(int64_t n) { return (n + 15) / 16 * 16; }
inline int64_t AttentionScratchFloats(int64_t n, int64_t vhead) { return AttentionScoreFloats(n) + vhead + 16; }

enum class BinaryOp : int32_t { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3, kMax = 4, kMin = 5, kPow = 6 };

struct KernelTable {
  const char* isa;  // Highway target name, for diagnostics

  // Dense or grouped conv (groups may be 1). Weights packed by PackConv.
  // bias: padded per PackConvBias (never null; zeros when the model has none).
  // residual: optional tensor with the output's layout, added before the activation.
  // Work items: output pixels in [0, n*oh*ow). scratch: kGemmScratchFloats
  // floats of the calling thread, 64-byte aligned.
  void (*conv)(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
               const float* residual, float* out, const Epilogue& ep, int64_t begin, int64_t end,
               float* scratch);

  // Depthwise conv (groups == ic == oc). Weights packed by PackDepthwise.
  // Work items: output pixels in [0, n*oh*ow).
  void (*depthwise)(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                    const float* residual, float* out, const Epilogue& ep, int64_t begin,
                    int64_t end);

  // Grouped conv with s = ic / groups = oc / groups input and output channels
  // per group, 2 <= s <= 16 and s dividing 16. Weights packed by
  // PackGroupedSmall, bias by PackDepthwiseBias. Work items: output pixels in
  // [0, n*oh*ow).
  void (*grouped_small)(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                        const float* residual, float* out, const Epilogue& ep, int64_t begin,
                        int64_t end);

  // Winograd F(4x4, 3x3) conv: kh = kw = 3, unit strides and dilations,
  // groups == 1, 1 <= ic <= kWinogradMaxIc (otherwise it does nothing).
  // Weights packed by PackWinograd, bias by PackConvBias. Work items: 4x4
  // output tiles in [begin, end) of [0, n * ceil(oh/4) * ceil(ow/4)),
  // row-major per image, times the output panels (16 channels)
  // [panel_begin, panel_end) of [0, ceil(oc/16)): a few tiles with many
  // channels split across threads by channels.
  // scratch: kWinogradScratchFloats floats of the calling thread, 64-byte aligned.
  void (*winograd)(const ConvGeom& g, const float* in, const float* packed_w, const float* bias,
                   const float* residual, float* out, const Epilogue& ep, int64_t begin,
                   int64_t end, int64_t panel_begin, int64_t panel_end, float* scratch);

  // C[m][0..n) = A[m][0..k) * B + bias, B packed by PackGemmB (k x n, panels of 16 columns).
  // bias [N] (unpadded) may be null. Work items: rows m in [0, M).
  // scratch: kGemmScratchFloats floats of the calling thread, 64-byte aligned.
  void (*gemm)(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* packed_b,
               const float* bias, float* C, int64_t ldc, const Epilogue& ep, int64_t begin,
               int64_t end, float* scratch);

  // C[m][n] = sum_k A[m][k] * B[k][n] on plain row-major operands (both variable).
  // Work items: rows m in [0, M).
  void (*matmul)(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float* C, int64_t ldc, int64_t begin, int64_t end);

  // Pooling, NHWC. Work items: output pixels in [0, n*oh*ow).
  void (*maxpool)(const PoolGeom& g, const float* in, float* out, int64_t begin, int64_t end);
  void (*avgpool)(const PoolGeom& g, const float* in, float* out, int64_t begin, int64_t end);

  // in [n][hw][c] -> out [n][c], the mean over hw. Work items: images in [0, n).
  void (*global_avgpool)(int64_t n, int64_t hw, int64_t c, const float* in, float* out,
                         int64_t begin, int64_t end);

  // y[i] = act(x[i]) for i in [begin, end). In-place (x == y) allowed.
  void (*unary)(const Epilogue& op, const float* x, float* y, int64_t begin, int64_t end);

  // y[i] = a[i*sa] op b[i*sb] for i in [0, n), sa and sb each 0 (broadcast) or 1.
  void (*binary)(BinaryOp op, const float* a, int64_t sa, const float* b, int64_t sb, float* y,
                 int64_t n);

  // Softmax over the last axis of a [rows][cols] matrix. Work items: rows.
  void (*softmax)(const float* x, float* y, int64_t cols, int64_t begin, int64_t end);

  // LayerNormalization over the last axis of a [rows][cols] matrix:
  // y = (x - mean) / sqrt(var + eps) * scale + bias, scale and bias (bias may
  // be null) of length cols. mean and inv_std (1 / sqrt(var + eps)) per row are
  // also written where not null. Work items: rows.
  void (*layernorm)(const float* x, const float* scale, const float* bias, float* y, int64_t cols,
                    float eps, float* mean, float* inv_std, int64_t begin, int64_t end);
  // One attention row (AttentionRow). scratch: AttentionScratchFloats(n,
  // vhead) floats of the calling thread.
  void (*attention)(const AttentionRow& row, float* scratch);

  // y[0..n) = a[0..k) * W + bias for block-quantized W packed by PackNBits
  // (kernels/nbits.h), dequantized in registers. a_block_sums[b]: the sum of
  // a over block b's k. bias may be null. Work items: panels of 16 columns
  // in [0, NBitsPanels(g)).
  void (*gemv_nbits)(const NBitsGeom& g, const float* a, const float* a_block_sums, const uint8_t* qw,
                     const float* scales, const uint8_t* zero_points, const float* bias, float* y,
                     int64_t panel_begin, int64_t panel_end);
  // ONNX Runtime's accuracy_level 4 arithmetic: y[r][0..n) = sum over blocks b
  // of a_scales[r][b] * scales[b][col] * (dot(qa[r] block b, q[., col]) -
  // zp[b][col] * a_sums[r][b]) + bias, for rows r in [0, m), with A quantized
  // by QuantizeBlocksI8 (kernels/nbits.h): qa [m][blocks * block_size] int16
  // holding int8 values (the padding past k zero), a_scales and a_sums
  // [m][blocks]. The dot products are exact integers. Row stride of y: ldy.
  // Work items: panels of 16 columns, as gemv_nbits.
  void (*gemm_nbits_i8)(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                        const int32_t* a_sums, const uint8_t* qw, const float* scales, const uint8_t* zero_points,
                        const float* bias, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end);
};

// Every kernel of KernelTable: its member and the function each target's code
// defines for it. kernels_hwy.cc fills the table from this list and
// kernel_table.cc checks that no member stayed null.
#define FCB_F32_KERNELS(X)                                                                                      \
  X(conv, Conv) X(depthwise, Depthwise) X(grouped_small, GroupedSmall) X(winograd, Winograd) X(gemm, Gemm)      \
  X(matmul, MatMul) X(maxpool, MaxPool) X(avgpool, AvgPool) X(global_avgpool, GlobalAvgPool) X(unary, Unary) \
  X(binary, Binary) X(softmax, Softmax) X(layernorm, LayerNorm) X(attention, Attention) X(gemv_nbits, GemvNBits) \
  X(gemm_nbits_i8, GemmNBitsI8)
#define FCB_COUNT_KERNEL(member, fn) +1
static_assert(sizeof(KernelTable) == sizeof(const char*) + (0 FCB_F32_KERNELS(FCB_COUNT_KERNEL)) * sizeof(void (*)()),
              "every KernelTable member is in FCB_F32_KERNELS");

// The fp32 table of `target`'s bundle (GetKernelBundle(target).f32), for
// tests and benchmarks; operators take theirs from RunContext.
const KernelTable& GetKernelTable(TargetId target);

}  // namespace fcb::kernels
