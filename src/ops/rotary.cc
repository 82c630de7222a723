// com.microsoft RotaryEmbedding (ONNX Runtime's contrib operator, version 1),
// as its CPU kernel defines it:
//
//   inputs   input         [batch, seq, hidden] or [batch, num_heads, seq, head_size], float32
//            position_ids  int64: one element (the position of token 0; token s
//                          is at position_ids[0] + s) or [batch, seq]
//            cos_cache     [max_positions, rotary_dim / 2], float32
//            sin_cache     the same shape
//   attrs    interleaved (0), num_heads (0: hidden / head_size),
//            rotary_embedding_dim (0: the whole head, head_size = 2 *
//            cos_cache's last dimension; otherwise num_heads is required and
//            head_size = hidden / num_heads), scale (only used by ONNX
//            Runtime to extend the caches, which its CPU kernel refuses to do;
//            ignored here too), is_packed_batching (refused when 1)
//
// For each head of each token at position p, the first rotary_dim elements x
// of the head rotate with c = cos_cache[p], s = sin_cache[p]:
//   not interleaved: pairs (x[i], x[i + d/2]) -> (x[i] c[i] - x[i + d/2] s[i],
//                                                 x[i + d/2] c[i] + x[i] s[i])
//   interleaved:     pairs (x[2i], x[2i + 1]) -> (x[2i] c[i] - x[2i + 1] s[i],
//                                                 x[2i + 1] c[i] + x[2i] s[i])
// and the remaining head_size - rotary_dim elements are copied unchanged.
// A sequence longer than the caches is refused (as ONNX Runtime does); a
// position outside the caches is an error at run time (ONNX Runtime does not
// check it).
#include <cstring>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr char kOp[] = "com.microsoft.RotaryEmbedding";

struct RopePlan {
  int64_t batch = 0, seq = 0, heads = 0, head = 0, rot = 0, positions = 0;
  bool interleaved = false, bnsh = false;  // bnsh: 4-D input [batch, heads, seq, head]
  bool offset_ids = false;                 // position_ids holds one element
};

Status Resolve(const InferContext& c, RopePlan* p) {
  const TensorInfo &x = Input(c, 0), &ids = Input(c, 1), &cs = Input(c, 2), &sn = Input(c, 3);
  if (!x.present() || !ids.present() || !cs.present() || !sn.present())
    return OpError(c.op, "needs input, position_ids, cos_cache and sin_cache");
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, x, "input"));
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, cs, "cos_cache"));
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, sn, "sin_cache"));
  if (ids.dtype != DType::kI64)
    return OpUnsupported(c.op, std::string("position_ids must be int64, not ") + ir::DTypeName(ids.dtype));
  const int64_t interleaved = c.attrs.GetInt("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return OpError(c.op, "interleaved must be 0 or 1");
  p->interleaved = interleaved == 1;
  if (c.attrs.GetInt("is_packed_batching", 0) != 0)
    return OpUnsupported(c.op, "is_packed_batching = 1 is not supported");
  const int64_t num_heads = c.attrs.GetInt("num_heads", 0);
  const int64_t rot_attr = c.attrs.GetInt("rotary_embedding_dim", 0);
  if (num_heads < 0 || rot_attr < 0) return OpError(c.op, "num_heads and rotary_embedding_dim must be >= 0");
  if (x.shape.size() != 3 && x.shape.size() != 4)
    return OpError(c.op, "input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], not " +
                             ir::ShapeToString(x.shape));
  if (cs.shape.size() != 2 || cs.shape != sn.shape)
    return OpError(c.op, "cos_cache " + ir::ShapeToString(cs.shape) + " and sin_cache " +
                             ir::ShapeToString(sn.shape) + " must be 2-D and of one shape");
  p->bnsh = x.shape.size() == 4;
  p->batch = x.shape[0];
  p->seq = p->bnsh ? x.shape[2] : x.shape[1];
  const int64_t hidden = p->bnsh ? SafeProduct(x.shape, 1, 2) * x.shape[3] : x.shape[2];
  p->positions = cs.shape[0];
  const int64_t half = cs.shape[1];
  if (rot_attr == 0) {
    p->head = 2 * half;
    p->rot = p->head;
  } else {
    if (num_heads == 0) return OpError(c.op, "num_heads must be given with rotary_embedding_dim");
    if (hidden % num_heads != 0)
      return OpError(c.op, "hidden size " + std::to_string(hidden) + " is not a multiple of num_heads " +
                               std::to_string(num_heads));
    p->head = hidden / num_heads;
    p->rot = rot_attr;
    if (p->rot > p->head)
      return OpError(c.op, "rotary_embedding_dim " + std::to_string(p->rot) + " exceeds the head size " +
                               std::to_string(p->head));
    if (p->rot != 2 * half)
      return OpError(c.op, "cos_cache's last dimension " + std::to_string(half) +
                               " must be rotary_embedding_dim / 2 = " + std::to_string(p->rot / 2));
  }
  if (p->head <= 0 || hidden % p->head != 0)
    return OpError(c.op, "hidden size " + std::to_string(hidden) + " is not a multiple of the head size " +
                             std::to_string(p->head) + " (2 * cos_cache's last dimension)");
  p->heads = hidden / p->head;
  if (num_heads != 0 && num_heads != p->heads)
    return OpError(c.op, "num_heads " + std::to_string(num_heads) + " does not match hidden size " +
                             std::to_string(hidden) + " / head size " + std::to_string(p->head));
  if (p->bnsh && (x.shape[3] != p->head || x.shape[1] != p->heads))
    return OpError(c.op, "4-D input " + ir::ShapeToString(x.shape) + " must be [batch, heads, seq, " +
                             std::to_string(p->head) + "]");
  if (p->seq > p->positions)
    return OpUnsupported(c.op, "the sequence (" + std::to_string(p->seq) + ") is longer than the caches (" +
                                   std::to_string(p->positions) + " positions); extending them is not supported");
  if (ids.numel() == 1 && ids.shape.size() <= 1) {
    p->offset_ids = true;
  } else if (ids.shape != ir::Shape{p->batch, p->seq}) {
    return OpError(c.op, "position_ids " + ir::ShapeToString(ids.shape) + " must hold one element or be [batch, seq] = " +
                             ir::ShapeToString(ir::Shape{p->batch, p->seq}));
  }
  return Status::Ok();
}

Status InferRope(const InferContext& c, std::vector<TensorInfo>* outs) {
  RopePlan p;
  FCB_RETURN_IF_ERROR(Resolve(c, &p));
  outs->push_back(Input(c, 0));
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateRope(const CreateContext& c) {
  RopePlan p;
  FCB_RETURN_IF_ERROR(Resolve(AsInfer(c), &p));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const int64_t* ids = static_cast<const int64_t*>(in[1]);
    const float* cos_cache = static_cast<const float*>(in[2]);
    const float* sin_cache = static_cast<const float*>(in[3]);
    float* y = static_cast<float*>(out[0]);
    // Every position first: a bad one fails the step before anything is written.
    const int64_t n_ids = p.offset_ids ? 1 : p.batch * p.seq;
    for (int64_t i = 0; i < n_ids; ++i) {
      // The last position this id gives (the seq tokens from an offset), without overflow.
      const int64_t span = p.offset_ids ? p.seq - 1 : 0;
      if (ids[i] < 0 || ids[i] >= p.positions - span)
        return InvalidArgument(std::string(kOp) + ": position " + std::to_string(ids[i]) +
                               (span ? " + " + std::to_string(span) : std::string()) +
                               " is outside cos_cache and sin_cache (" + std::to_string(p.positions) +
                               " positions)");
    }
    const int64_t half = p.rot / 2;
    // Strides of the head, token and batch in elements.
    const int64_t head_stride = p.bnsh ? p.seq * p.head : p.head;
    const int64_t seq_stride = p.bnsh ? p.head : p.heads * p.head;
    const int64_t batch_stride = p.seq * p.heads * p.head;
    const int64_t items = p.batch * p.seq * p.heads;
    ctx.pool->ParallelFor(items, GrainFor(p.head), [&](int64_t b0, int64_t e0) {
      for (int64_t it = b0; it < e0; ++it) {
        const int64_t n = it % p.heads, s = (it / p.heads) % p.seq, b = it / (p.heads * p.seq);
        const int64_t off = b * batch_stride + s * seq_stride + n * head_stride;
        const float* xi = x + off;
        float* yi = y + off;
        const int64_t pos = p.offset_ids ? ids[0] + s : ids[b * p.seq + s];
        RotateHead(xi, yi, p.head, p.rot, p.interleaved, cos_cache + pos * half, sin_cache + pos * half);
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterRotaryOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferRope, CreateRope>(kOp, 4, 4));
}

void RotateHead(const float* x, float* y, int64_t head, int64_t rot, bool interleaved, const float* cosr,
                const float* sinr) {
  const int64_t half = rot / 2;
  if (interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * cosr[i] - b * sinr[i];
      y[2 * i + 1] = b * cosr[i] + a * sinr[i];
    }
  } else {
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      y[i] = a * cosr[i] - b * sinr[i];
      y[i + half] = b * cosr[i] + a * sinr[i];
    }
  }
  if (y != x && head > rot) std::memcpy(y + rot, x + rot, static_cast<size_t>(head - rot) * sizeof(float));
}

}  // namespace fcb::ops
