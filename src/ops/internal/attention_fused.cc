// AttentionFused: scaled dot-product attention as plain exporters write it
// (MatMul(Q, K^T) * scale [+ mask] -> Softmax(-1) -> MatMul(., V), the keys
// and values of grouped heads repeated), in one step, without a score matrix.
//
//   AttentionFused(Q [B, H, S, D], K [B, kv, T, D], V [B, kv, T, Dv]
//                  [, mask]) -> Y [B, H, S, Dv]
//   params: scale (float), row_capacity (0: K and V dense; N > 0: K and V
//           are KvAppend buffers of N rows per head, of which the first T are
//           valid)
//   H a multiple of kv: query head h reads key/value head h / (H / kv) (what
//   Unsqueeze -> Expand -> Reshape repeating each KV head H / kv times gives).
//   mask: float32, rank <= 4, broadcastable to [B, H, S, T] with its last
//   dim T, added to the scaled scores before the softmax.
//
// Each query row runs through the target's attention kernel
// (KernelTable::attention, kernels/attention-inl.h): scores over the T valid
// keys in the thread's scratch, a float32 softmax with the maximum
// subtracted, the weighted sum of the value rows. Made by
// passes::FuseKvCacheAttention.
#include <algorithm>
#include <array>
#include <cmath>

#include "ops/internal/internal.h"

namespace fcb::ops {
namespace {

constexpr std::string_view kOp = opname::AttentionFused;
constexpr int64_t kMaxRows = int64_t{1} << 24;

struct Params {
  float scale = 1.f;
  int64_t row_capacity = 0;
  template <typename V>
  void Fields(V& v) {
    v.Float(attr::kScale, scale);
    v.Int(attr::kRowCapacity, row_capacity, 0, kMaxRows);
  }
};

struct Geom {
  int64_t b = 0, h = 0, kv = 0, s = 0, t = 0, d = 0, dv = 0, rows = 0;  // rows: per head of K/V
  float scale = 1.f;
  bool mask = false;
  std::array<int64_t, 3> mstride{};  // mask element strides over B, H, S (0: broadcast)
};

Result<Geom> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  if (in.size() < 3) return OpError(kOp, "needs Q, K and V");
  for (int i = 0; i < 3; ++i) FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[i], i == 0 ? "Q" : i == 1 ? "K" : "V"));
  const ir::Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  if (q.size() != 4 || k.size() != 4 || v.size() != 4 || k[0] != q[0] || v[0] != q[0] || k[1] != v[1] ||
      k[2] != v[2] || k[3] != q[3] || k[1] < 1 || q[1] % k[1] != 0 || q[2] < 1 || k[2] < 1 || q[3] < 1 ||
      v[3] < 1 || k[2] > kMaxRows)
    return OpError(kOp, "Q " + ir::ShapeToString(q) + ", K " + ir::ShapeToString(k) + ", V " + ir::ShapeToString(v) +
                            " must be [B, H, S, D], [B, kv, T, D], [B, kv, T, Dv] with H a multiple of kv");
  if (!std::isfinite(p.scale)) return OpError(kOp, "scale must be finite");
  Geom g{q[0], q[1], k[1], q[2], k[2], q[3], v[3], p.row_capacity ? p.row_capacity : k[2], p.scale};
  if (in.size() > 3 && in[3].present()) {
    FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[3], "mask"));
    const ir::Shape& m = in[3].shape;
    if (m.empty() || m.size() > 4 || m.back() != g.t)
      return OpError(kOp, "mask " + ir::ShapeToString(m) + " must have rank 1..4 and last dim " + std::to_string(g.t));
    const std::array<int64_t, 3> want{g.b, g.h, g.s};
    std::array<int64_t, 3> dims{1, 1, 1};
    for (size_t i = 0; i + 1 < m.size(); ++i) dims[3 - (m.size() - 1) + i] = m[i];
    int64_t stride = g.t;
    for (int i = 2; i >= 0; --i) {
      if (dims[i] != 1 && dims[i] != want[i])
        return OpError(kOp, "mask " + ir::ShapeToString(m) + " does not broadcast to [" + std::to_string(g.b) + ", " +
                                std::to_string(g.h) + ", " + std::to_string(g.s) + ", " + std::to_string(g.t) + "]");
      g.mstride[i] = dims[i] == 1 ? 0 : stride;
      stride *= dims[i];
    }
    g.mask = true;
  }
  FCB_RETURN_IF_ERROR(CheckedNumel({g.b, g.kv, g.rows, std::max(g.d, g.dv)}).status());
  return g;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Geom g, Resolve(c.attrs, c.inputs));
  out->push_back({ir::DType::kF32, {g.b, g.h, g.s, g.dv}});
  return Status::Ok();
}

Result<uint64_t> Scratch(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Geom g, Resolve(c.attrs, c.inputs));
  return static_cast<uint64_t>(kernels::AttentionScratchFloats(g.t, g.dv) + 16) * sizeof(float);
}

uint64_t Flops(const CreateContext& c) {
  auto g = Resolve(c.attrs, c.inputs);
  if (!g.ok()) return 0;
  const Geom& x = g.value();
  return static_cast<uint64_t>(2 * x.b * x.h * x.s * x.t * (x.d + x.dv));
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Geom g, Resolve(c.attrs, c.inputs));
  return MakeKernel([g](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    if (g.t > g.rows)
      return InvalidArgument(std::string(kOp) + ": " + std::to_string(g.t) + " keys pass the capacity of " +
                             std::to_string(g.rows) + " rows");
    const float* q = static_cast<const float*>(in[0]);
    const float* k = static_cast<const float*>(in[1]);
    const float* v = static_cast<const float*>(in[2]);
    const float* mask = g.mask ? static_cast<const float*>(in[3]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const int64_t group = g.h / g.kv;
    const auto attention = ctx.k->f32.attention;
    ctx.pool->ParallelForThreads(g.b * g.h * g.s, 1, [&](int t, int64_t r0, int64_t r1) {
      float* scratch = static_cast<float*>(ctx.ThreadScratch(t));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t s = r % g.s, n = (r / g.s) % g.h, b = r / (g.s * g.h);
        const int64_t head = b * g.kv + n / group;
        const float* add = mask ? mask + b * g.mstride[0] + n * g.mstride[1] + s * g.mstride[2] : nullptr;
        const kernels::AttentionRow row{q + r * g.d, k + head * g.rows * g.d, v + head * g.rows * g.dv,
                                        g.d,         g.dv,                    g.t,
                                        add,         g.scale,                 0.f,
                                        y + r * g.dv, g.d,                    g.dv};
        attention(row, scratch);
      }
    });
    return Status::Ok();
  });
}

}  // namespace

OpDef DefineAttentionFused() {
  OpDef d = internal::LoweredOp(kOp, 3, 4, Infer, Create, Scratch);
  d.flops = Flops;
  return d;
}

}  // namespace fcb::ops
