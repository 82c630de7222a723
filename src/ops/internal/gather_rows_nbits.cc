// GatherRowsNBits: Gather along axis 0 of a block-quantized table, each
// gathered row dequantized as it is copied (precision "int4"'s embedding
// tables, passes/quantize_int4.cc).
//
//   GatherRowsNBits(table, scales, indices) -> Y[indices..., columns]
//   params:  columns (the row length H), bits (4 or 8), block_size (a power of
//            two in [16, 2^16])
//   table:   uint8 [V, blocks, block_size * bits / 8], blocks = ceil(H /
//            block_size): row v's values along H block by block, stored as
//            q + 2^(bits-1) (4 bits: element 2i in the low nibble of byte i),
//            MatMulNBits' B layout with rows for columns
//   scales:  float32 [V * blocks]
//   indices: int32 or int64, any shape; negative ones count from V; one
//            outside [-V, V) fails the run, naming it, before anything is written
//   Y[..., h] = scales[v * blocks + h / block_size] * (q[v][h] - 2^(bits-1)),
//   one float32 product (the value DequantizeLinear gives).
#include <cstring>

#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

constexpr std::string_view kOp = opname::GatherRowsNBits;

struct Params {
  int64_t columns = 1, bits = 8, block_size = 32;
  template <typename V>
  void Fields(V& v) {
    v.Int(attr::kColumns, columns, 1, kMaxChannels);
    v.Int(attr::kBits, bits, 4, 8);
    v.Int(attr::kBlockSize, block_size, 16, int64_t{1} << 16);
  }
};

struct Config {
  Params p;
  int64_t rows = 0, blocks = 0, blob = 0, n_idx = 0;
  bool i64 = true;
};

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() != 3) return OpError(kOp, "needs a table, scales and indices");
  Config c;
  FCB_ASSIGN_OR_RETURN(c.p, DecodeParams<Params>(kOp, a));
  if (c.p.bits != 4 && c.p.bits != 8) return OpError(kOp, "bits must be 4 or 8, not " + std::to_string(c.p.bits));
  if ((c.p.block_size & (c.p.block_size - 1)) != 0) return OpError(kOp, "block_size must be a power of two");
  c.blocks = (c.p.columns + c.p.block_size - 1) / c.p.block_size;
  c.blob = c.p.block_size * c.p.bits / 8;
  const TensorInfo &t = in[0], &s = in[1], &idx = in[2];
  if (t.dtype != ir::DType::kU8 || t.shape.size() != 3 || t.shape[1] != c.blocks || t.shape[2] != c.blob ||
      t.shape[0] < 1)
    return OpError(kOp, "table must be uint8 [rows, " + std::to_string(c.blocks) + ", " + std::to_string(c.blob) +
                            "], got " + ir::DTypeName(t.dtype) + " " + ir::ShapeToString(t.shape));
  c.rows = t.shape[0];
  if (s.dtype != ir::DType::kF32 || s.shape != ir::Shape{c.rows * c.blocks})
    return OpError(kOp, "scales must be float32 [" + std::to_string(c.rows * c.blocks) + "], got " +
                            ir::DTypeName(s.dtype) + " " + ir::ShapeToString(s.shape));
  if (idx.dtype != ir::DType::kI64 && idx.dtype != ir::DType::kI32)
    return OpError(kOp, std::string("indices must be int32 or int64, got ") + ir::DTypeName(idx.dtype));
  FCB_ASSIGN_OR_RETURN(c.n_idx, CheckedNumel(idx.shape));
  c.i64 = idx.dtype == ir::DType::kI64;
  FCB_RETURN_IF_ERROR(CheckedNumel({c.n_idx, c.p.columns}).status());
  return c;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  ir::Shape s = c.inputs[2].shape;
  s.push_back(g.p.columns);
  out->push_back({ir::DType::kF32, s});
  return Status::Ok();
}

template <typename I>
Status Run(const Config& c, const RunContext& ctx, const uint8_t* table, const float* scales, const I* idx,
           float* y) {
  for (int64_t j = 0; j < c.n_idx; ++j) {
    const int64_t v = idx[j];
    if (v < -c.rows || v >= c.rows)
      return InvalidArgument(std::string(kOp) + ": index " + std::to_string(v) + " (position " + std::to_string(j) +
                             ") is out of range for a table of " + std::to_string(c.rows) + " rows");
  }
  const int64_t h = c.p.columns, block = c.p.block_size;
  const float zero = static_cast<float>(1 << (c.p.bits - 1));
  const bool four = c.p.bits == 4;
  ctx.pool->ParallelFor(c.n_idx, GrainFor(h), [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      int64_t v = idx[j];
      if (v < 0) v += c.rows;
      const uint8_t* row = table + v * c.blocks * c.blob;
      const float* rs = scales + v * c.blocks;
      float* out = y + j * h;
      for (int64_t i = 0; i < h; ++i) {
        const int64_t blk = i / block, at = i % block;
        const uint8_t* q = row + blk * c.blob;
        const int u = four ? (q[at / 2] >> ((at & 1) * 4)) & 15 : q[at];
        out[i] = rs[blk] * (static_cast<float>(u) - zero);
      }
    }
  });
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  return MakeKernel([g](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const auto* t = static_cast<const uint8_t*>(in[0]);
    const auto* s = static_cast<const float*>(in[1]);
    float* y = static_cast<float*>(out[0]);
    return g.i64 ? Run(g, ctx, t, s, static_cast<const int64_t*>(in[2]), y)
                 : Run(g, ctx, t, s, static_cast<const int32_t*>(in[2]), y);
  });
}

}  // namespace

OpDef DefineGatherRowsNBits() { return internal::LoweredOp(kOp, 3, 3, Infer, Create); }

}  // namespace fcb::ops
