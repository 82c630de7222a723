// com.microsoft MatMulNBits (ONNX Runtime's contrib operator, version 1): a
// MatMul by a block-quantized constant matrix, as ONNX Runtime's CPU kernel
// defines it:
//
//   inputs   A            [..., K] float32 (float16 models are widened to
//                         float32 by the importer, as for every arithmetic op)
//            B            uint8 [N, k_blocks, blob_size], k_blocks =
//                         ceil(K / block_size), blob_size = block_size * bits / 8;
//                         column n's quantized values along K, block by block
//                         (4 bits: element 2i in the low nibble of byte i)
//            scales       float32, N * k_blocks elements ([N * k_blocks] or
//                         [N, k_blocks])
//            zero_points  optional: uint8 packed like B, N * ceil(k_blocks *
//                         bits / 8) elements; or float32, N * k_blocks
//                         elements. Absent: 2^(bits - 1) (8 or 128)
//            g_idx        optional int32 [K]: the block of each k (act-order
//                         quantization). Only the identity grouping, g_idx[k] =
//                         k / block_size, known at compile time and without
//                         zero points, is accepted (it changes nothing); any
//                         other is Unsupported
//            bias         optional float32 [N]
//   attrs    K, N (>= 1), bits (4 or 8; ONNX Runtime's 2 is Unsupported),
//            block_size (a power of two in [16, 2^16]), accuracy_level
//   output   Y [..., N] = A * W + bias, W[k][n] = scale[n][b] * (B[n][k] -
//            zp[n][b]), b = k / block_size; K need not be a multiple of
//            block_size (the last block's padding is ignored).
//
// accuracy_level: every value is accepted. At levels 0-3 fcb computes in
// float32 with the exactly dequantized weights, as ONNX Runtime does for
// float32 A. At level 4 (where its MLAS has int8 kernels: x86 AVX2 and later,
// ARM dot products) ONNX Runtime quantizes A to int8 per block (symmetric,
// scale = max|a| / 127 per block of block_size values of a row, round half to
// even) and accumulates int8 x int4/int8 products in int32; the packed form
// (MatMulNBitsPacked, accuracy_level 4) does the same, so outputs match to
// ~2e-7 rather than the 5e-3 to 1.3e-2 relative L2 the float arithmetic
// differs by. ONNX Runtime's float zero-point and g_idx paths stay in float32
// at level 4, and so do this reference kernel and the lowering.
//
// Kernels. This operator's own kernel is the reference: it dequantizes each
// block of a column as it reads it and multiplies in float32, for any
// zero-point form; it runs when the quantized operands are not constants or
// the zero points are float. With constant B, scales and uint8 (or no) zero
// points the lowering rule of MatMulNBitsPacked (ops/internal/
// matmul_nbits_packed.cc) packs the weights once into the target-neutral
// layout of kernels/nbits.h instead.
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr char kOp[] = "com.microsoft.MatMulNBits";
// Largest K and N (a weight matrix of 2^24 x 2^24 elements is far past any model).
constexpr int64_t kMaxDim = int64_t{1} << 24;

struct Plan {
  int64_t m = 0, k = 0, n = 0, bits = 4, block = 32, blocks = 0;
  int zp = 0;  // 0 none, 1 uint8 packed, 2 float
  bool bias = false;
};

// Whether g_idx holds k / block for every k (act-order with the plain order).
bool TrivialGroups(const ir::TensorData* t, int64_t k, int64_t block) {
  if (!t || t->dtype != DType::kI32 || t->numel() != k) return false;
  const int32_t* g = t->data<int32_t>();
  for (int64_t i = 0; i < k; ++i)
    if (g[i] != i / block) return false;
  return true;
}

Status Resolve(const InferContext& c, Plan* p) {
  const TensorInfo &a = Input(c, 0), &b = Input(c, 1), &s = Input(c, 2), &zp = Input(c, 3), &gi = Input(c, 4),
                   &bias = Input(c, 5);
  if (!a.present() || !b.present() || !s.present()) return OpError(c.op, "needs A, B and scales");
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, a, "A"));
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, s, "scales"));
  for (const char* name : {"K", "N", "bits", "block_size"})
    if (!c.attrs.Has(name)) return OpError(c.op, std::string("attribute ") + name + " is required");
  p->k = c.attrs.GetInt("K", 0);
  p->n = c.attrs.GetInt("N", 0);
  p->bits = c.attrs.GetInt("bits", 4);
  p->block = c.attrs.GetInt("block_size", 0);
  if (p->k < 1 || p->k > kMaxDim || p->n < 1 || p->n > kMaxDim)
    return OpError(c.op, "K (" + std::to_string(p->k) + ") and N (" + std::to_string(p->n) + ") must be in [1, " +
                             std::to_string(kMaxDim) + "]");
  if (p->bits == 2) return OpUnsupported(c.op, "bits = 2 is not supported (only 4 and 8)");
  if (p->bits != 4 && p->bits != 8) return OpError(c.op, "bits must be 4 or 8, not " + std::to_string(p->bits));
  if (p->block < 16 || p->block > (int64_t{1} << 16) || (p->block & (p->block - 1)) != 0)
    return OpError(c.op, "block_size must be a power of two in [16, 65536], not " + std::to_string(p->block));
  (void)c.attrs.GetInt("accuracy_level", 0);  // any level; level 4 is the packed form's (see the header)
  if (SafeProduct(ir::Shape{p->k, p->n}, 0, 2) < 0) return OpError(c.op, "K x N is too large");
  p->blocks = (p->k + p->block - 1) / p->block;
  if (a.shape.empty() || a.shape.back() != p->k)
    return OpError(c.op, "A " + ir::ShapeToString(a.shape) + " must have K = " + std::to_string(p->k) +
                             " as its last dimension");
  p->m = SafeProduct(a.shape, 0, a.shape.size() - 1);
  if (p->m < 0) return OpError(c.op, "A has too many elements");
  const int64_t blob = p->block * p->bits / 8;
  if (b.dtype != DType::kU8 || b.shape != ir::Shape{p->n, p->blocks, blob})
    return OpError(c.op, std::string("B must be uint8 [N, k_blocks, blob_size] = ") +
                             ir::ShapeToString(ir::Shape{p->n, p->blocks, blob}) + ", not " +
                             ir::DTypeName(b.dtype) + " " + ir::ShapeToString(b.shape));
  const ir::Shape flat{p->n * p->blocks}, two{p->n, p->blocks};
  if (s.shape != flat && s.shape != two)
    return OpError(c.op, "scales " + ir::ShapeToString(s.shape) + " must be " + ir::ShapeToString(flat) + " or " +
                             ir::ShapeToString(two));
  if (zp.present()) {
    if (zp.dtype == DType::kU8) {
      const int64_t row = (p->blocks * p->bits + 7) / 8;
      if (zp.shape != ir::Shape{p->n * row} && zp.shape != ir::Shape{p->n, row})
        return OpError(c.op, "uint8 zero_points " + ir::ShapeToString(zp.shape) + " must hold N x " +
                                 std::to_string(row) + " packed bytes");
      p->zp = 1;
    } else if (zp.dtype == DType::kF32) {
      if (zp.shape != flat && zp.shape != two)
        return OpError(c.op, "float zero_points " + ir::ShapeToString(zp.shape) + " must be shaped like scales");
      p->zp = 2;
    } else {
      return OpUnsupported(c.op, std::string("zero_points of type ") + ir::DTypeName(zp.dtype) +
                                     " are not supported (uint8 or float32)");
    }
  }
  if (gi.present()) {
    if (gi.dtype != DType::kI32 || gi.shape != ir::Shape{p->k})
      return OpError(c.op, "g_idx must be int32 [K]");
    if (!TrivialGroups(Constant(c, 4), p->k, p->block))
      return OpUnsupported(c.op, "g_idx (act-order block indices) is not supported unless it is a constant "
                                 "equal to k / block_size for every k");
    // ONNX Runtime's CPU kernel ignores uint8 zero points when g_idx is given
    // (its act-order path dequantizes with the default 8), so no result here
    // could match both its definition and its outputs.
    if (zp.present())
      return OpUnsupported(c.op, "g_idx together with zero_points is not supported");
  }
  if (bias.present()) {
    FCB_RETURN_IF_ERROR(SupportedF32(c.op, bias, "bias"));
    if (bias.shape != ir::Shape{p->n}) return OpError(c.op, "bias must be [N] = [" + std::to_string(p->n) + "]");
    p->bias = true;
  }
  return Status::Ok();
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* outs) {
  Plan p;
  FCB_RETURN_IF_ERROR(Resolve(c, &p));
  ir::Shape y = Input(c, 0).shape;
  y.back() = p.n;
  outs->push_back(TensorInfo{DType::kF32, y});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  Plan p;
  FCB_RETURN_IF_ERROR(Resolve(AsInfer(c), &p));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* a = static_cast<const float*>(in[0]);
    const uint8_t* b = static_cast<const uint8_t*>(in[1]);
    const float* scales = static_cast<const float*>(in[2]);
    const void* zp = p.zp ? in[3] : nullptr;
    const float* bias = p.bias ? static_cast<const float*>(in[5]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const int64_t blob = p.block * p.bits / 8, zp_row = (p.blocks * p.bits + 7) / 8;
    const float def_zp = static_cast<float>(1 << (p.bits - 1));
    // Columns split across threads; each column's blocks are dequantized as
    // they are read and applied to every row of A.
    ctx.pool->ParallelFor(p.n, GrainFor(p.m * p.k), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t r = 0; r < p.m; ++r) y[r * p.n + n] = bias ? bias[n] : 0.0f;
        for (int64_t blk = 0; blk < p.blocks; ++blk) {
          const float scale = scales[n * p.blocks + blk];
          float z = def_zp;
          if (p.zp == 2) {
            z = static_cast<const float*>(zp)[n * p.blocks + blk];
          } else if (p.zp == 1) {
            const uint8_t* zr = static_cast<const uint8_t*>(zp) + n * zp_row;
            z = static_cast<float>(p.bits == 8 ? zr[blk] : (zr[blk / 2] >> ((blk & 1) * 4)) & 15);
          }
          const uint8_t* q = b + (n * p.blocks + blk) * blob;
          const int64_t k0 = blk * p.block, len = std::min(p.block, p.k - k0);
          for (int64_t r = 0; r < p.m; ++r) {
            const float* ar = a + r * p.k + k0;
            float acc = 0.0f;
            for (int64_t i = 0; i < len; ++i) {
              const int v = p.bits == 8 ? q[i] : (q[i / 2] >> ((i & 1) * 4)) & 15;
              acc += (static_cast<float>(v) - z) * scale * ar[i];
            }
            y[r * p.n + n] += acc;
          }
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterMatMulNBitsOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<Infer, Create>(kOp, 3, 6));
}

}  // namespace fcb::ops
