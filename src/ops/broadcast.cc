#include "ops/broadcast.h"

namespace fcb::ops {

namespace {
// Pieces of about this many elements keep per-call overhead small while
// letting one long run use every thread.
constexpr int64_t kPiece = 32768;
}  // namespace

Status BroadcastPlan::Make(std::string_view op, std::initializer_list<const ir::Shape*> ins,
                           const ir::Shape& out, BroadcastPlan* plan) {
  if (ins.size() == 0 || ins.size() > static_cast<size_t>(kMaxInputs))
    return Internal(std::string(op) + ": broadcast of " + std::to_string(ins.size()) + " inputs");
  std::span<const int64_t> dims[kMaxInputs];
  size_t n = 0;
  for (const ir::Shape* x : ins) dims[n++] = *x;
  return Make(op, dims, n, out, plan);
}

Status BroadcastPlan::Make(std::string_view op, const std::span<const int64_t>* ins, size_t n_ins,
                           std::span<const int64_t> out, BroadcastPlan* plan) {
  if (n_ins == 0 || n_ins > static_cast<size_t>(kMaxInputs))
    return Internal(std::string(op) + ": broadcast of " + std::to_string(n_ins) + " inputs");
  // Kernels that adapt make a plan at each run at other sizes: the walk is
  // worked out on the stack, and the plan holds its dims in place.
  constexpr size_t kCap = 64;  // CheckShape's rank limit
  const size_t r = out.size();
  if (r > kCap) return OpUnsupported(op, "rank " + std::to_string(r));
  const int n_in = static_cast<int>(n_ins);
  const std::span<const int64_t>* in = ins;
  // Per output dim that is not 1: its size and each input's stride (0 where broadcast).
  int64_t dims[kCap];
  int64_t st[kMaxInputs][kCap];
  size_t nd = 0;
  int64_t in_stride[kMaxInputs] = {1, 1, 1};  // dense strides, innermost first
  for (int i = 0; i < n_in; ++i)
    if (in[i].size() > r) return OpError(op, "input has a higher rank than the output");
  // Walk dims from the innermost so dense strides accumulate, then reverse.
  int64_t rdims[kCap];
  int64_t rst[kMaxInputs][kCap];
  for (size_t k = 0; k < r; ++k) {
    const size_t d = r - 1 - k;
    const bool walks = out[d] != 1;  // a dim of 1 walks nothing
    int64_t s[kMaxInputs] = {0, 0, 0};
    for (int i = 0; i < n_in; ++i) {
      const size_t lead = r - in[i].size();
      if (d >= lead) {
        const int64_t in_dim = in[i][d - lead];
        if (walks) {
          if (in_dim == out[d]) s[i] = in_stride[i];
          else if (in_dim != 1)
            return OpError(op, "shape " + ir::ShapeToString(ir::Shape(in[i].begin(), in[i].end())) +
                                   " does not broadcast to " +
                                   ir::ShapeToString(ir::Shape(out.begin(), out.end())));
        }
        in_stride[i] *= in_dim;
      }
    }
    if (!walks) continue;
    rdims[nd] = out[d];
    for (int i = 0; i < n_in; ++i) rst[i][nd] = s[i];
    ++nd;
  }
  for (size_t k = 0; k < nd; ++k) {
    dims[k] = rdims[nd - 1 - k];
    for (int i = 0; i < n_in; ++i) st[i][k] = rst[i][nd - 1 - k];
  }
  // Merge dim d into the previous one when every input steps uniformly across both.
  int64_t md[kCap];
  int64_t ms[kMaxInputs][kCap];
  size_t nm = 0;
  for (size_t d = 0; d < nd; ++d) {
    bool merge = nm > 0;
    for (int i = 0; merge && i < n_in; ++i) merge = ms[i][nm - 1] == st[i][d] * dims[d];
    if (merge) {
      md[nm - 1] *= dims[d];
      for (int i = 0; i < n_in; ++i) ms[i][nm - 1] = st[i][d];
    } else {
      md[nm] = dims[d];
      for (int i = 0; i < n_in; ++i) ms[i][nm] = st[i][d];
      ++nm;
    }
  }
  const int64_t total = SafeProduct(out, 0, out.size());
  if (total < 0) return OpError(op, "output too large");
  BroadcastPlan p;
  p.num_inputs = n_in;
  if (nm > 0) {
    p.run = md[nm - 1];
    --nm;
    for (int i = 0; i < n_in; ++i) p.run_stride[i] = ms[i][nm];
  }
  if (nm > static_cast<size_t>(kMaxRank))
    return OpUnsupported(op, "broadcast pattern needs more than " + std::to_string(kMaxRank) + " dims");
  p.dims.assign(md, md + nm);
  for (int i = 0; i < n_in; ++i) p.strides[i].assign(ms[i], ms[i] + nm);
  p.rows = total == 0 ? 0 : total / p.run;
  p.pieces_per_run = p.run > 2 * kPiece ? (p.run + kPiece - 1) / kPiece : 1;
  p.piece = (p.run + p.pieces_per_run - 1) / p.pieces_per_run;
  *plan = std::move(p);
  return Status::Ok();
}

Status BroadcastPlan::AtRun(const RunContext& ctx, const BroadcastPlan& made, BroadcastPlan* at,
                            const BroadcastPlan** plan) {
  *plan = &made;
  if (!ctx.shapes) return Status::Ok();
  *plan = at;
  return Make("broadcast", ctx.shapes, static_cast<size_t>(made.num_inputs), ctx.shapes[made.num_inputs], at);
}

}  // namespace fcb::ops
