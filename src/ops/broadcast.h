// A precomputed NumPy-broadcast walk over up to three inputs.
//
// Make() aligns every input to the output shape, drops size-1 output dims and
// merges adjacent dims that every input walks the same way, so the walk ends
// in a contiguous innermost *run* in which each input advances by 0 (broadcast)
// or 1 element. That run is what kernels::KernelTable::binary consumes. Long
// runs are cut into pieces so a single huge run still spreads over threads.
// ForRuns() uses only stack memory: Run paths call it without allocating.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "ops/op_util.h"

namespace fcb::ops {

struct BroadcastPlan {
  static constexpr int kMaxInputs = 3;
  int num_inputs = 0;
  PlanDims dims;                                  // outer dims (run excluded)
  std::array<PlanDims, kMaxInputs> strides;       // per input, per outer dim
  std::array<int64_t, kMaxInputs> run_stride{};               // 0 or 1 per input
  int64_t run = 1;     // elements per run
  int64_t rows = 0;    // number of runs (0 when the output is empty)
  int64_t piece = 1;   // elements per work item (a run is cut into pieces)
  int64_t pieces_per_run = 1;

  int64_t items() const { return rows * pieces_per_run; }

  // `ins` broadcast (multidirectionally or into) `out`; every input dim must be
  // 1 or equal to out's. Rejects more than kMaxRank dims after merging.
  static Status Make(std::string_view op, std::initializer_list<const ir::Shape*> ins, const ir::Shape& out,
                     BroadcastPlan* plan);
  // The same on dims read in place (n_ins of them).
  static Status Make(std::string_view op, const std::span<const int64_t>* ins, size_t n_ins,
                     std::span<const int64_t> out, BroadcastPlan* plan);
  // The plan of a kernel that adapts (Kernel::adapts) at a run: `made` where
  // the run is at the shapes it was made for, else the plan of the run's
  // shapes of the same operands (RunContext::shapes: inputs 0 to
  // made.num_inputs - 1 into the output after them), made in `*at`. Those
  // shapes passed the op's infer, so it does not fail unless the plan was
  // corrupted.
  static Status AtRun(const RunContext& ctx, const BroadcastPlan& made, BroadcastPlan* at, const BroadcastPlan** plan);

  // Calls f(off, y_off, n) for work items [begin, end): off[i] is the element
  // offset of input i, y_off the output's, n the piece length.
  template <typename F>
  void ForRuns(int64_t begin, int64_t end, F&& f) const {
    if (begin >= end) return;
    const int rank = static_cast<int>(dims.size());
    std::array<int64_t, kMaxRank> idx{};
    std::array<int64_t, kMaxInputs> base{};
    int64_t row = begin / pieces_per_run;
    int64_t piece_i = begin % pieces_per_run;
    // Position the counters at `row`.
    int64_t rem = row;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
      for (int i = 0; i < num_inputs; ++i) base[i] += idx[d] * strides[i][d];
    }
    std::array<int64_t, kMaxInputs> off{};
    for (int64_t item = begin; item < end; ++item) {
      const int64_t start = piece_i * piece;
      const int64_t n = std::min(piece, run - start);
      for (int i = 0; i < num_inputs; ++i) off[i] = base[i] + start * run_stride[i];
      if (n > 0) f(off.data(), row * run + start, n);
      if (++piece_i == pieces_per_run) {
        piece_i = 0;
        ++row;
        for (int d = rank - 1; d >= 0; --d) {
          for (int i = 0; i < num_inputs; ++i) base[i] += strides[i][d];
          if (++idx[d] < dims[d]) break;
          for (int i = 0; i < num_inputs; ++i) base[i] -= idx[d] * strides[i][d];
          idx[d] = 0;
        }
      }
    }
  }
};

}  // namespace fcb::ops
