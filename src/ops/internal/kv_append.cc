// KvAppend: a growing KV cache's "present = Concat(past, new, axis 2)" kept
// in place in a State buffer (docs/design.md section 14, form b).
//
//   KvAppend(past [B, kv, P, D], new [B, kv, S, D]) -> present [B, kv, P + S, D]
//   params: row_capacity N (rows per head of the buffer, 1..2^24)
//
// The step runs only bound to a State: past and present are the same buffer
// [B, kv, N, D] (head stride N * D), past's P rows per head are the valid
// rows already there, and the step writes the S new rows of each head at row
// P, nothing else. The present as a tensor is that buffer with P + S valid
// rows per head: only AttentionFused steps of the same row_capacity read it
// (ops::CheckStateBinding refuses any other reader). A step whose P + S
// passes N is refused before it writes (the runtime checks that before any
// step runs, so a refused run leaves the cache as it was).
//
// Made by passes::FuseKvCacheAttention from a Concat whose first operand is
// a past input of a state pair when the spec gives kv_capacity.
#include <cstring>

#include "ops/internal/internal.h"

namespace fcb::ops {
namespace {

constexpr std::string_view kOp = opname::KvAppend;
constexpr int64_t kMaxRows = int64_t{1} << 24;

struct Params {
  int64_t row_capacity = 1;
  template <typename V>
  void Fields(V& v) {
    v.Int(attr::kRowCapacity, row_capacity, 1, kMaxRows);
  }
};

struct Geom {
  int64_t b = 0, kv = 0, past = 0, seq = 0, d = 0, cap = 0;
};

Result<Geom> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  if (in.size() != 2) return OpError(kOp, "needs past and new");
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[0], "past"));
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[1], "new"));
  const ir::Shape &ps = in[0].shape, &ns = in[1].shape;
  if (ps.size() != 4 || ns.size() != 4 || ps[0] != ns[0] || ps[1] != ns[1] || ps[3] != ns[3] || ps[0] < 1 ||
      ps[1] < 1 || ps[3] < 1 || ns[2] < 1 || ps[2] < 0 || ps[2] > kMaxRows || ns[2] > kMaxRows)
    return OpError(kOp, "past " + ir::ShapeToString(ps) + " and new " + ir::ShapeToString(ns) +
                            " must be [B, heads, rows, head size] with one B, heads and head size (new rows >= 1)");
  FCB_RETURN_IF_ERROR(CheckedNumel({ps[0], ps[1], p.row_capacity, ps[3]}).status());
  return Geom{ps[0], ps[1], ps[2], ns[2], ps[3], p.row_capacity};
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Geom g, Resolve(c.attrs, c.inputs));
  out->push_back({ir::DType::kF32, {g.b, g.kv, g.past + g.seq, g.d}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Geom g, Resolve(c.attrs, c.inputs));
  return MakeKernel([g](const RunContext&, const void* const* in, void* const* out) -> Status {
    if (out[0] != in[0])
      return InvalidArgument(std::string(kOp) + ": the cache must be bound to a State (past and present one buffer)");
    if (g.past + g.seq > g.cap)
      return InvalidArgument(std::string(kOp) + ": " + std::to_string(g.past) + " valid rows plus " +
                             std::to_string(g.seq) + " new ones pass the capacity of " + std::to_string(g.cap) +
                             " rows; nothing was written");
    float* buf = static_cast<float*>(out[0]);
    const float* src = static_cast<const float*>(in[1]);
    const size_t rows = static_cast<size_t>(g.seq * g.d) * sizeof(float);
    for (int64_t h = 0; h < g.b * g.kv; ++h)
      std::memcpy(buf + (h * g.cap + g.past) * g.d, src + h * g.seq * g.d, rows);
    return Status::Ok();
  });
}

}  // namespace

OpDef DefineKvAppend() { return internal::LoweredOp(kOp, 2, 2, Infer, Create); }

}  // namespace fcb::ops
