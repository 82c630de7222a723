#include "ops/broadcast.h"

namespace fcb::ops {

namespace {
// Pieces of about this many elements keep per-call overhead small while
// letting one long run use every thread.
constexpr int64_t kPiece = 32768;
}  // namespace

Status BroadcastPlan::Make(std::string_view op, const std::vector<ir::Shape>& ins,
                           const ir::Shape& out, BroadcastPlan* plan) {
  if (ins.empty() || ins.size() > static_cast<size_t>(kMaxInputs))
    return Internal(std::string(op) + ": broadcast of " + std::to_string(ins.size()) + " inputs");
  BroadcastPlan p;
  p.num_inputs = static_cast<int>(ins.size());
  const size_t r = out.size();
  // Per output dim: its size and each input's stride (0 where broadcast).
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, kMaxInputs> st;
  std::array<std::vector<int64_t>, kMaxInputs> in_strides;
  for (int i = 0; i < p.num_inputs; ++i) {
    if (ins[i].size() > r) return OpError(op, "input has a higher rank than the output");
    in_strides[i] = DenseStrides(ins[i]);
  }
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == 1) continue;  // walks nothing
    dims.push_back(out[d]);
    for (int i = 0; i < p.num_inputs; ++i) {
      const size_t lead = r - ins[i].size();
      int64_t s = 0;
      if (d >= lead) {
        const int64_t in_dim = ins[i][d - lead];
        if (in_dim == out[d]) s = in_strides[i][d - lead];
        else if (in_dim != 1)
          return OpError(op, "shape " + ir::ShapeToString(ins[i]) + " does not broadcast to " +
                                 ir::ShapeToString(out));
      }
      st[i].push_back(s);
    }
  }
  // Merge dim d into the previous one when every input steps uniformly across both.
  std::vector<int64_t> md;
  std::array<std::vector<int64_t>, kMaxInputs> ms;
  for (size_t d = 0; d < dims.size(); ++d) {
    bool merge = !md.empty();
    for (int i = 0; merge && i < p.num_inputs; ++i)
      merge = ms[i].back() == st[i][d] * dims[d];
    if (merge) {
      md.back() *= dims[d];
      for (int i = 0; i < p.num_inputs; ++i) ms[i].back() = st[i][d];
    } else {
      md.push_back(dims[d]);
      for (int i = 0; i < p.num_inputs; ++i) ms[i].push_back(st[i][d]);
    }
  }
  const int64_t total = SafeProduct(out, 0, out.size());
  if (total < 0) return OpError(op, "output too large");
  if (!md.empty()) {
    p.run = md.back();
    md.pop_back();
    for (int i = 0; i < p.num_inputs; ++i) {
      p.run_stride[i] = ms[i].back();
      ms[i].pop_back();
    }
  }
  if (md.size() > static_cast<size_t>(kMaxRank))
    return OpUnsupported(op, "broadcast pattern needs more than " + std::to_string(kMaxRank) +
                                 " dims");
  p.dims = std::move(md);
  for (int i = 0; i < p.num_inputs; ++i) p.strides[i] = std::move(ms[i]);
  p.rows = total == 0 ? 0 : total / p.run;
  p.pieces_per_run = p.run > 2 * kPiece ? (p.run + kPiece - 1) / kPiece : 1;
  p.piece = (p.run + p.pieces_per_run - 1) / p.pieces_per_run;
  *plan = std::move(p);
  return Status::Ok();
}

}  // namespace fcb::ops
