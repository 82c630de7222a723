// MatMulNBitsPacked: A times a block-quantized constant matrix (4 or 8 bits)
// whose weights stay quantized in the pool, packed once at compile time.
//
//   MatMulNBitsPacked(A[..., k], weights, scales, zero_points[, bias[n]]) -> Y[..., n]
//   params: columns (n), bits (4 or 8), block_size (a power of two in [16, 2^16]),
//           accuracy_level (optional, 0..4; 4: ONNX Runtime's int8 arithmetic, below).
//   weights: uint8, NBitsWeightBytes; scales: float32, NBitsBlockParams;
//   zero_points: uint8, NBitsBlockParams (PackNBits' layout, kernels/nbits.h:
//   panels of 16 columns, the same bytes for every target).
//
// Run: one row (decode) is the target's gemv_nbits kernel over panels of
// columns split across threads, dequantizing in registers; the weights are
// read once. More rows (prefill) dequantize two panels at a time into the
// thread's scratch ([2][k][16] floats, PackGemmB's layout) and multiply them
// with the target's gemm kernel, so the weights are still read once and the
// arithmetic runs at GEMM speed. Up to kGemvRows rows take the GEMV per row.
//
// accuracy_level 4: A is quantized to int8 per block of block_size values of
// a row the way ONNX Runtime's MLAS does (kernels::QuantizeBlocksI8: scale
// max|a| / 127, round half to even) and each block's dot product with the
// 4- or 8-bit weights is an exact integer (the target's gemm_nbits_i8), scaled
// by both scales and summed in float; every row count takes this path, the
// weights read once per group of kI8Rows rows. One or two rows unpack the
// weights in registers per row; more unpack each block of a panel once (less
// its zero points, as int16 pairs) and multiply it with register tiles of rows
// (kernels/nbits-inl.h, PanelRowsI8). ONNX Runtime does this when
// its CPU has an int8 kernel for the configuration (x86 with AVX2 or later,
// ARM with dot products; block sizes 16-256, uint8 or no zero points, no
// g_idx); the lowering records level 4 only for those configurations, and
// the others compute in float like ONNX Runtime's fallback.
//
// Lowering: a com.microsoft MatMulNBits node whose B and scales are
// constants, whose zero points are absent or constant uint8, and whose g_idx
// is absent or the identity grouping (ops/matmul_nbits.cc refuses any other).
// Float zero points keep the ONNX operator's reference kernel.
#include <algorithm>
#include <cstring>
#include <optional>

#include "kernels/nbits.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::NBitsGeom;
constexpr std::string_view kOp = opname::MatMulNBitsPacked;
constexpr std::string_view kFrom = "com.microsoft.MatMulNBits";
// Rows up to which a GEMV per row beats dequantizing for the GEMM.
constexpr int64_t kGemvRows = 2;
// Panels dequantized per GEMM call on the prefill path.
constexpr int64_t kChunkPanels = 2;
// Largest k: the prefill path's scratch holds kChunkPanels * k * 16 floats.
constexpr int64_t kMaxK = int64_t{1} << 16;
// Rows quantized (and multiplied per panel) at a time on the int8 path.
constexpr int64_t kI8Rows = 32;
// Largest block of ONNX Runtime's int8 (CompInt8) kernels.
constexpr int64_t kI8MaxBlock = 256;

struct Params {
  int64_t columns = 1, bits = 4, block_size = 32;
  std::optional<int64_t> accuracy_level;  // absent: 0
  template <typename V>
  void Fields(V& v) {
    v.Int(attr::kColumns, columns, 1, kMaxChannels);
    v.Int(attr::kBits, bits, 4, 8);
    v.Int(attr::kBlockSize, block_size, 16, int64_t{1} << 16);
    v.OptionalInt(attr::kAccuracyLevel, accuracy_level);
  }
};

struct Config {
  int64_t m = 0;
  NBitsGeom g;
  bool has_bias = false;
  bool int8 = false;  // accuracy_level 4: A quantized to int8 per block
};

Status ExpectBytes(const TensorInfo& t, const char* what, ir::DType dtype, int64_t count) {
  if (t.dtype != dtype || t.shape != ir::Shape{count})
    return OpError(kOp, std::string(what) + " must be " + ir::DTypeName(dtype) + " [" + std::to_string(count) +
                            "], got " + ir::DTypeName(t.dtype) + " " + ir::ShapeToString(t.shape));
  return Status::Ok();
}

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, x, "input"));
  if (x.shape.empty()) return OpError(kOp, "input must have rank >= 1");
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  if (p.bits != 4 && p.bits != 8) return OpError(kOp, "bits must be 4 or 8");
  if ((p.block_size & (p.block_size - 1)) != 0) return OpError(kOp, "block_size must be a power of two");
  if (p.accuracy_level && (*p.accuracy_level < 0 || *p.accuracy_level > 4))
    return OpError(kOp, "accuracy_level must be in [0, 4], got " + std::to_string(*p.accuracy_level));
  if (p.accuracy_level == 4 && p.block_size > kI8MaxBlock)
    return OpError(kOp, "accuracy_level 4 needs block_size <= " + std::to_string(kI8MaxBlock) + ", got " +
                            std::to_string(p.block_size));
  Config c;
  c.g.k = x.shape.back();
  c.g.n = p.columns;
  c.g.bits = p.bits;
  c.g.block_size = p.block_size;
  c.int8 = p.accuracy_level == 4;
  if (c.g.k < 1 || c.g.k > kMaxK)
    return OpError(kOp, "reduction size " + std::to_string(c.g.k) + " must be in [1, " + std::to_string(kMaxK) + "]");
  FCB_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(x.shape));
  c.m = numel / c.g.k;
  if (in.size() < 4) return OpError(kOp, "needs input, weights, scales and zero points");
  FCB_RETURN_IF_ERROR(ExpectBytes(in[1], "packed weights", ir::DType::kU8, kernels::NBitsWeightBytes(c.g)));
  FCB_RETURN_IF_ERROR(ExpectBytes(in[2], "packed scales", ir::DType::kF32, kernels::NBitsBlockParams(c.g)));
  FCB_RETURN_IF_ERROR(ExpectBytes(in[3], "packed zero points", ir::DType::kU8, kernels::NBitsBlockParams(c.g)));
  if (in.size() > 4 && in[4].present()) {
    FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[4], "bias"));
    if (in[4].shape != ir::Shape{c.g.n}) return OpError(kOp, "bias must have shape [" + std::to_string(c.g.n) + "]");
    c.has_bias = true;
  }
  FCB_RETURN_IF_ERROR(CheckedNumel({c.m, c.g.n}).status());
  return c;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  ir::Shape s = c.inputs[0].shape;
  s.back() = g.g.n;
  out->push_back({ir::DType::kF32, s});
  return Status::Ok();
}

// Panels [p0, p1) of the packed weights as PackGemmB panels ([panel][k][16]
// floats) at out.
void Dequantize(const NBitsGeom& g, const uint8_t* qw, const float* scales, const uint8_t* zp, int64_t p0,
                int64_t p1, float* out) {
  const int64_t blocks = kernels::NBitsBlocks(g), panel_bytes = kernels::NBitsPanelBytes(g);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* q = qw + p * panel_bytes;
    float* o = out + (p - p0) * g.k * kPanel;
    for (int64_t b = 0; b < blocks; ++b) {
      const float* s = scales + (p * blocks + b) * kPanel;
      const uint8_t* z = zp + (p * blocks + b) * kPanel;
      float zs[kPanel];
      for (int c = 0; c < kPanel; ++c) zs[c] = -static_cast<float>(z[c]) * s[c];
      const int64_t k1 = std::min(g.k, (b + 1) * g.block_size);
      for (int64_t k = b * g.block_size; k < k1; ++k) {
        float* row = o + k * kPanel;
        if (g.bits == 8) {
          const uint8_t* r = q + k * kPanel;
          for (int c = 0; c < kPanel; ++c) row[c] = static_cast<float>(r[c]) * s[c] + zs[c];
        } else {
          const uint8_t* r = q + k / 2 * kPanel;
          const int shift = (k & 1) * 4;
          for (int c = 0; c < kPanel; ++c) row[c] = static_cast<float>((r[c] >> shift) & 15) * s[c] + zs[c];
        }
      }
    }
  }
}

class MatMulNBitsKernel : public Kernel {
 public:
  explicit MatMulNBitsKernel(Config c) : c_(c) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* a = static_cast<const float*>(in[0]);
    const uint8_t* qw = static_cast<const uint8_t*>(in[1]);
    const float* scales = static_cast<const float*>(in[2]);
    const uint8_t* zp = static_cast<const uint8_t*>(in[3]);
    const float* bias = c_.has_bias ? static_cast<const float*>(in[4]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const NBitsGeom& g = c_.g;
    const int64_t panels = kernels::NBitsPanels(g), blocks = kernels::NBitsBlocks(g);
    if (c_.int8) {
      const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, kernels::NBitsPanelBytes(g)));
      ctx.pool->ParallelForThreads(panels, grain, [&](int t, int64_t p0, int64_t p1) {
        // Each thread quantizes the rows it multiplies, kI8Rows at a time, in
        // its own scratch (I8Scratch): a few K per row against the row's
        // k * columns multiply-adds.
        int16_t* qa = static_cast<int16_t*>(ctx.ThreadScratch(t));
        const int64_t kp = blocks * g.block_size;
        float* as = reinterpret_cast<float*>(qa + kI8Rows * kp);
        int32_t* asum = reinterpret_cast<int32_t*>(as + kI8Rows * blocks);
        for (int64_t r0 = 0; r0 < c_.m; r0 += kI8Rows) {
          const int64_t rows = std::min(kI8Rows, c_.m - r0);
          kernels::QuantizeBlocksI8(g, a + r0 * g.k, rows, qa, as, asum);
          ctx.k->f32.gemm_nbits_i8(g, rows, qa, as, asum, qw, scales, zp, bias, y + r0 * g.n, g.n, p0, p1);
        }
      });
      return Status::Ok();
    }
    if (c_.m <= kGemvRows) {
      for (int64_t r = 0; r < c_.m; ++r) {
        const float* ar = a + r * g.k;
        // Panels of 16 columns in chunks of about 64 KiB of weights.
        const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, kernels::NBitsPanelBytes(g)));
        ctx.pool->ParallelForThreads(panels, grain, [&](int t, int64_t p0, int64_t p1) {
          // The block sums of the row, in this thread's scratch (k / 16 floats at most).
          float* sums = static_cast<float*>(ctx.ThreadScratch(t));
          for (int64_t b = 0; b < blocks; ++b) {
            float s = 0;
            for (int64_t k = b * g.block_size, k1 = std::min(g.k, (b + 1) * g.block_size); k < k1; ++k) s += ar[k];
            sums[b] = s;
          }
          ctx.k->f32.gemv_nbits(g, ar, sums, qw, scales, zp, bias, y + r * g.n, p0, p1);
        });
      }
      return Status::Ok();
    }
    const int64_t chunks = (panels + kChunkPanels - 1) / kChunkPanels;
    ctx.pool->ParallelForThreads(chunks, 1, [&](int t, int64_t c0, int64_t c1) {
      float* scratch = static_cast<float*>(ctx.ThreadScratch(t));
      float* gemm_scratch = scratch + DequantFloats(g);
      for (int64_t ch = c0; ch < c1; ++ch) {
        const int64_t p0 = ch * kChunkPanels, p1 = std::min(panels, p0 + kChunkPanels);
        Dequantize(g, qw, scales, zp, p0, p1, scratch);
        const int64_t col0 = p0 * kPanel, cols = std::min(g.n, p1 * kPanel) - col0;
        ctx.k->f32.gemm(c_.m, cols, g.k, a, g.k, scratch, bias ? bias + col0 : nullptr, y + col0, g.n,
                        kernels::Epilogue{}, 0, c_.m, gemm_scratch);
      }
    });
    return Status::Ok();
  }

  // Floats of the prefill path's dequantized panels (64-byte multiple).
  static int64_t DequantFloats(const NBitsGeom& g) { return kChunkPanels * g.k * kPanel; }
  // Bytes of the int8 path's quantized rows: kI8Rows rows of int16 values,
  // float scales and int32 sums per block (kp is even, so the floats are aligned).
  static uint64_t I8Scratch(const NBitsGeom& g) {
    const int64_t blocks = kernels::NBitsBlocks(g);
    return static_cast<uint64_t>(kI8Rows * (blocks * g.block_size * 2 + blocks * 8));
  }

 private:
  Config c_;
};

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  return std::unique_ptr<Kernel>(new MatMulNBitsKernel(g));
}

Result<uint64_t> Scratch(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  if (g.int8) return MatMulNBitsKernel::I8Scratch(g.g);
  if (g.m <= kGemvRows) return static_cast<uint64_t>(kernels::NBitsBlocks(g.g)) * sizeof(float);
  return static_cast<uint64_t>(MatMulNBitsKernel::DequantFloats(g.g) + kernels::kGemmScratchFloats) * sizeof(float);
}

uint64_t Flops(const CreateContext& c) {
  auto cfg = Resolve(c.attrs, c.inputs);
  if (!cfg.ok()) return 0;
  return 2 * static_cast<uint64_t>(cfg.value().m) * static_cast<uint64_t>(cfg.value().g.n) *
         static_cast<uint64_t>(cfg.value().g.k);
}

// Whether g_idx (input 4) is absent or holds k / block_size for every k.
bool TrivialGroups(const ir::TensorData* t, bool present, int64_t k, int64_t block) {
  if (!present) return true;
  if (!t || t->dtype != ir::DType::kI32 || t->numel() != k) return false;
  for (int64_t i = 0; i < k; ++i)
    if (t->data<int32_t>()[i] != i / block) return false;
  return true;
}

Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  const ir::TensorData *b = c.Const(n, 1), *s = c.Const(n, 2), *zp = c.Const(n, 3), *gi = c.Const(n, 4);
  auto present = [&](size_t i) { return i < n.inputs.size() && n.inputs[i] >= 0; };
  NBitsGeom g;
  g.k = n.GetInt("K", 0);
  g.n = n.GetInt("N", 0);
  g.bits = n.GetInt("bits", 4);
  g.block_size = n.GetInt("block_size", 0);
  // Shapes were checked by the operator's inference (ops/matmul_nbits.cc); these
  // are the conditions of the packed form.
  if (!b || !s || b->dtype != ir::DType::kU8 || s->dtype != ir::DType::kF32) return false;
  if (present(3) && (!zp || zp->dtype != ir::DType::kU8)) return false;
  if (!TrivialGroups(gi, present(4), g.k, g.block_size)) return false;
  if ((g.bits != 4 && g.bits != 8) || g.k < 1 || g.k > kMaxK || g.n < 1 || g.n > kMaxChannels ||
      g.block_size < 16 || g.block_size > (int64_t{1} << 16))
    return false;
  const int64_t blocks = kernels::NBitsBlocks(g);
  if (b->numel() != g.n * blocks * g.block_size * g.bits / 8 || s->numel() != g.n * blocks ||
      (zp && zp->numel() != g.n * ((blocks * g.bits + 7) / 8)))
    return false;
  const ir::Value& a = c.value(n.inputs[0]);
  if (a.dtype != ir::DType::kF32 || a.shape.empty() || a.shape.back() != g.k) return false;
  kernels::PackedNBits packed =
      kernels::PackNBits(g, b->data<uint8_t>(), s->data<float>(), zp ? zp->data<uint8_t>() : nullptr);
  Params p;
  p.columns = g.n;
  p.bits = g.bits;
  p.block_size = g.block_size;
  // ONNX Runtime's int8 arithmetic where it has it (see the header); g_idx,
  // even the identity, keeps its unpacked float path.
  if (n.GetInt("accuracy_level", 0) == 4 && g.block_size <= kI8MaxBlock && !present(4)) p.accuracy_level = 4;
  const int32_t pw = c.Weights(n.name + ".qw", ir::DType::kU8, packed.weights.data(),
                               static_cast<int64_t>(packed.weights.size()));
  const int32_t ps = c.Floats(n.name + ".qscale", packed.scales);
  const int32_t pz = c.Weights(n.name + ".qzp", ir::DType::kU8, packed.zero_points.data(),
                               static_cast<int64_t>(packed.zero_points.size()));
  const int32_t pb = present(5) ? c.Value(n.inputs[5]) : -1;
  c.Emit(kOp, n.name, {c.Value(n.inputs[0]), pw, ps, pz, pb}, {c.Value(n.outputs[0])}, EncodeParams(p));
  return true;
}

}  // namespace

OpDef DefineMatMulNBitsPacked() {
  OpDef d = internal::LoweredOp(kOp, 4, 5, Infer, Create, Scratch);
  d.flops = Flops;
  d.lowerings = {{kFrom, 10, Lower}};
  return d;
}

}  // namespace fcb::ops
