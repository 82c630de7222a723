// The loaded program behind fcb::Program: the verified mapping, the chosen
// target's kernel table, and per method the validated plan with prepared
// kernels. Immutable after Load; shared by every execution.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/target.h"
#include "fcb/fcb.h"
#include "format/fcb_file.h"
#include "kernels/bundle.h"
#include "ops/op.h"
#include "ops/plan_check.h"
#include "ops/symbolic_plan.h"
#include "runtime/pool_check.h"

namespace fcb {

struct PreparedStep {
  std::unique_ptr<ops::Kernel> kernel;
  std::vector<int32_t> inputs, outputs;  // tensor indices (-1 = absent)
  std::string where;                      // "step 3 (ConvNhwc, node 'conv1')"
  uint64_t flops = 0;                     // OpDef::flops, 0 where not defined
};

// How a run treats each step of a plan with symbols: its kernel runs, or
// (a value computed from the shapes, known before the run) its outputs are
// copied from `values` where a step reads them, or it is skipped where none
// does. Plans without symbols run every kernel.
struct ShapeValues {
  enum class Action : uint8_t { kRun, kCopy, kSkip };
  std::vector<Action> actions;  // per step (empty: run all)
  // Per tensor: the value a kCopy step writes to it, else null. Owned by the
  // plan this was made from (the method's bound_plan, or the ResolvedMethod's
  // plan beside it): one vector of pointers, no per-step allocation at each
  // new size.
  std::vector<const ir::TensorData*> values;
  // From a plan checked at the bound (`bound`) or resolved at other sizes
  // from it (`p`: ops::CheckedPlan or ops::ResolvedPlan, their guards and
  // values; which steps are computed from the shapes and which tensors are
  // needed are the bound's at every size), into this one, its vectors'
  // storage reused.
  template <typename Plan>
  void Fill(const format::ContextDesc& c, const ops::CheckedPlan& bound, const Plan& p) {
    actions.clear();
    values.clear();
    if (!c.dynamic()) return;
    actions.assign(c.steps.size(), Action::kRun);
    values.assign(c.tensors.size(), nullptr);
    for (size_t si = 0; si < c.steps.size(); ++si) {
      const auto& out = c.steps[si].outputs;
      SetStep(si, out.data(), out.data() + out.size(), bound.computed_steps[si], bound, p);
    }
    set_steps.clear();
    set_tensors.clear();
    unread_nulled = false;
  }
  // The same for a resolution `p` of a plan with symbols, from the bound's
  // (`at_bound`, Fill of the bound), into storage that may hold an earlier
  // resolution's (whose differences from the bound's, set_steps and
  // set_tensors, are put back first): only the steps a change of sizes
  // reaches can differ (their guards, their values), so only those are
  // looked at, through the bound's flat index of them. Where `p` took the
  // compiled walk (ResolvedPlan::proven_written), which steps are computed
  // and needed is the bound's, so only the guarded steps and the values
  // `p` holds or passed by unread can differ.
  void FillResolved(const ShapeValues& at_bound, const ops::CheckedPlan& bound, const ops::ResolvedPlan& p) {
    if (actions.size() != at_bound.actions.size() || values.size() != at_bound.values.size()) {
      actions.assign(at_bound.actions.begin(), at_bound.actions.end());
      values.assign(at_bound.values.begin(), at_bound.values.end());
      unread_nulled = false;
    } else {
      for (int32_t si : set_steps) actions[static_cast<size_t>(si)] = at_bound.actions[static_cast<size_t>(si)];
      for (int32_t t : set_tensors) values[static_cast<size_t>(t)] = at_bound.values[static_cast<size_t>(t)];
    }
    set_steps.clear();
    set_tensors.clear();
    if (actions.empty()) return;
    // The values a compiled walk passes by (the same at every size, so left
    // null from one such resolution to the next).
    const bool compiled = p.proven_written;
    if (unread_nulled != compiled)
      for (int32_t t : bound.unread_tensors)
        values[static_cast<size_t>(t)] = compiled ? nullptr : at_bound.values[static_cast<size_t>(t)];
    unread_nulled = compiled;
    if (compiled) {
      for (size_t j = 0; j < p.values.size() && j < p.value_tensors.size(); ++j) {
        values[static_cast<size_t>(p.value_tensors[j])] = p.values[j].get();
        set_tensors.push_back(p.value_tensors[j]);
      }
    }
    const uint8_t visit = compiled ? ops::CheckedPlan::kReachGuard
                                   : (ops::CheckedPlan::kReachGuard | ops::CheckedPlan::kReachComputed);
    for (size_t k = 0; k < bound.reach_steps.size(); ++k) {
      const uint8_t flags = bound.reach_flags[k];
      if (!(flags & visit)) continue;
      SetStep(static_cast<size_t>(bound.reach_steps[k]), bound.reach_outputs.data() + bound.reach_out_offsets[k],
              bound.reach_outputs.data() + bound.reach_out_offsets[k + 1],
              (flags & ops::CheckedPlan::kReachComputed) != 0, bound, p);
    }
  }
  // The steps and tensors whose action or value FillResolved set (it puts
  // them back to the bound's at the next resolution into this storage), and
  // whether the values the compiled walk passes by (CheckedPlan::
  // unread_tensors) are null.
  std::vector<int32_t> set_steps, set_tensors;
  bool unread_nulled = false;

 private:
  // Step `si` (outputs [out, out_end)): skipped where its guard is off (the
  // other variant of its node runs at these sizes); a step computed from the
  // shapes copies its value where some step or the method's outputs read it,
  // else is skipped; any other runs.
  template <typename Plan>
  void SetStep(size_t si, const int32_t* out, const int32_t* out_end, bool computed, const ops::CheckedPlan& bound,
               const Plan& p) {
    set_steps.push_back(static_cast<int32_t>(si));
    if (p.guarded_off[si]) {
      actions[si] = Action::kSkip;
      return;
    }
    if (!computed) {
      actions[si] = Action::kRun;
      return;
    }
    bool needed = false;
    for (const int32_t* t = out; t != out_end; ++t) needed = needed || bound.needed[*t];
    actions[si] = needed ? Action::kCopy : Action::kSkip;
    for (const int32_t* t = out; t != out_end; ++t) {
      values[*t] = p.value(*t).get();
      set_tensors.push_back(*t);
    }
  }
};

// A method with ranges at one combination of sizes: every step's kernel
// made for those shapes, and the shapes of the method's outputs.
struct ResolvedMethod {
  ops::ResolvedPlan plan;  // the shapes and values at these sizes (only the steps that change are inferred)
  ShapeValues shape_values;
  // Per step: its kernel, the bound's where the step's shapes and the values
  // it reads from the shapes are the bound's (kernels are immutable), else
  // one of `made`.
  std::vector<const ops::Kernel*> kernels;
  std::vector<std::unique_ptr<ops::Kernel>> made;
  // The kernels made for the sizes this resolution held before (resolved
  // over, ResolveMethod): freeing them (a few hundred cold frees for a
  // large model) is left out of the first run at new sizes, whose latency
  // counts, to the next kernels made for exactly one size
  // (ExecutionImpl::SpecializeCurrent), or to the next time this one is
  // resolved over: at most one generation is kept.
  std::vector<std::unique_ptr<ops::Kernel>> retired;
  // Per step: where its kernel is the bound's run at these sizes (one that
  // adapts, ops::Kernel::adapts), the index in `shapes` of its operands'
  // shapes (ops::RunContext::shapes), else -1: PreparedMethod::
  // adapt_shapes_at, but -1 where a kernel made for exactly these sizes
  // replaced the bound's (SpecializeMethod). `shapes` are spans into the
  // plan's flat dims (which always hold every shape at the sizes resolved,
  // ops::ResolvedPlan::dims), made once for this storage (ReserveResolution)
  // and valid at every size resolved into it.
  std::vector<int32_t> shapes_at;
  std::vector<std::span<const int64_t>> shapes;
  // The steps whose kernel or shapes_at differ from the bound's (a kernel
  // made here or by SpecializeMethod): put back at the next resolution into
  // this storage.
  std::vector<int32_t> kernels_set;
  std::vector<std::vector<int64_t>> output_shapes;    // per method output
};

// A state variable of the program (ContextDesc::state): one buffer per
// State, shared by every method that binds an input of this name.
struct StateVar {
  std::string name;  // the bound input's name
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

// One state binding of a method: input `input` and output `output` (method
// positions) are variable `var`'s buffer. Where the step writing it reads its
// valid length from a method input (GroupQueryAttention's seqlens_k), Run
// checks that length against the capacity before any step runs.
struct PreparedState {
  size_t input = 0, output = 0;
  int32_t var = -1;
  int32_t seqlens_input = -1;  // method input position of seqlens_k, or -1
  int64_t capacity = 0;        // rows the buffer holds (dim 2: [B, heads, capacity, head])
  // A growing cache (KvAppend): the input is the valid rows (dim 2 chosen at
  // each run from the State's valid length), the output those plus the new.
  bool grows = false;
};

struct PreparedMethod {
  MethodInfo info;
  std::vector<PreparedState> state;  // empty: the method has no state
  // Per input, per dim: the index of the symbol it is in context->symbols, or -1.
  std::vector<std::vector<int32_t>> input_symbols;
  ShapeValues shape_values;  // at the bound
  // Plans with symbols: the plan as checked at the bound (shapes, values
  // computed from shapes, small weights' contents, each step's parsed
  // attributes), from which a resolution infers again only the steps whose
  // operands change (ops::ResolvePlan) and remakes only their kernels.
  std::unique_ptr<const ops::CheckedPlan> bound_plan;
  // Plans with symbols, per step (flat, for a resolution): its kernel (as in
  // `steps`).
  std::vector<const ops::Kernel*> bound_kernels;
  // Plans with symbols, from the bound's flat index of the steps a change of
  // sizes reaches: per step reached whose kernel adapts and that is not
  // computed from the shapes, the index in adapt_operands of its operands'
  // tensors (inputs then outputs, -1 for an absent one), else -1 (every
  // resolution passes such a step its operands' shapes, ResolvedMethod::
  // shapes); and the reached steps (indices into reach_steps) whose kernels
  // do not adapt and are not computed from the shapes (remade where their
  // operands change).
  std::vector<int32_t> adapt_shapes_at, adapt_operands, remade_reach;
  // Plans with symbols: the relations between the symbols every run must
  // meet (ops::SymbolicPlan::requires_equal, over context->symbols), checked
  // at each new combination of sizes before the plan is resolved, so that
  // inputs that disagree are refused naming the inputs and the relation.
  std::vector<std::pair<ir::DimExpr, ir::DimExpr>> requirements;
  bool dynamic() const { return context && context->dynamic(); }
  // The inputs' shapes at the bound with each symbol's dims at
  // symbol_values[symbol] (one value per symbol of context->symbols).
  std::vector<ir::Shape> InputShapesAt(const std::vector<int64_t>& symbol_values) const {
    std::vector<ir::Shape> shapes;
    for (size_t i = 0; i < info.inputs.size(); ++i) {
      ir::Shape s = info.inputs[i].shape;
      for (size_t d = 0; d < s.size() && i < input_symbols.size() && d < input_symbols[i].size(); ++d)
        if (input_symbols[i][d] >= 0) s[d] = symbol_values.at(static_cast<size_t>(input_symbols[i][d]));
      shapes.push_back(std::move(s));
    }
    return shapes;
  }
  const format::ContextDesc* context = nullptr;
  std::vector<PreparedStep> steps;
  std::vector<const void*> weights;  // per tensor: mapped bytes for weights, null for arena tensors
  std::vector<uint64_t> bytes;       // per tensor
  std::vector<int32_t> input_tensors, output_tensors;
};

class ProgramImpl {
 public:
  std::unique_ptr<format::LoadedFile> file;
  TargetId target = TargetId::kGeneric;
  std::string target_name;
  const kernels::KernelBundle* kernels = nullptr;
  std::vector<std::string> targets_in_file;
  std::vector<PreparedMethod> methods;
  std::vector<StateVar> state_vars;  // every method's, by name (a State holds one buffer each)
  uint64_t memory_limit = 0;  // LoadOptions::max_memory_bytes, or the host's available memory
  bool memory_limit_from_options = false;
  // Declared last: destroyed first, so its thread stops before `file` goes.
  PoolCheck pool_check;

  const PreparedMethod* Find(const std::string& name) const {
    for (const auto& m : methods)
      if (m.info.name == name) return &m;
    return nullptr;
  }
};

// How the runtime (Execution) and developer tools reach a Program's internals;
// the public header only names this struct as a friend.
struct ProgramAccess {
  static const ProgramImpl& Of(const Program& p) { return *p.impl_; }
};

// The bytes one execution allocates (arena + threads x scratch), saturating.
uint64_t ExecutionBytes(uint64_t arena, uint64_t scratch, int threads);
// "method 'm' needs ..., more than the memory limit of ... bytes (...)".
std::string MemoryLimitError(const std::string& method, uint64_t arena, uint64_t scratch, int threads,
                             uint64_t limit, bool from_options);

// Storage for resolutions of method `m` (a plan with symbols): a
// ResolvedMethod sized as its first resolution would size it, holding the
// bound's shapes and kernels, which ResolveMethod resolves into (reuse)
// allocating next to nothing. An execution reserves its cache's when made.
std::unique_ptr<ResolvedMethod> ReserveResolution(const PreparedMethod& m);

// Kernels for a method with ranges at the input shapes `shapes` (checked by
// the caller against the ranges): its plan resolved at those sizes
// (ops::CheckPlan). Errors name the method and the step. `reuse`, where
// given, is a resolution of the same method no longer wanted (a cache's
// least recently used): it is overwritten and returned, its storage reused,
// so that replacing it frees and allocates less (its kernels are destroyed).
Result<std::unique_ptr<ResolvedMethod>> ResolveMethod(const ProgramImpl& program, const PreparedMethod& m,
                                                      const std::vector<ir::Shape>& shapes,
                                                      std::unique_ptr<ResolvedMethod> reuse = nullptr);

// Makes kernels for exactly a resolution's sizes where it runs the bound's
// kernels that adapt (shapes_at): an adapting kernel works out its walk at
// each run, which a second run at the same sizes no longer pays for.
Status SpecializeMethod(const PreparedMethod& m, ResolvedMethod* r);

// Arithmetic operations of step `step` at a resolution's sizes (profiles):
// its kernel's create context there, through its op's flops.
uint64_t ResolvedStepFlops(const PreparedMethod& m, const ResolvedMethod& r, size_t step);

// Context `c` of `file` (a plan with symbols) read symbolically: its plan
// checked at the bound as a load checks it (blobs not verified again), then
// ops::InferSymbolicPlan. What `fcb inspect` shows of a method's ranges.
Result<ops::SymbolicPlan> SymbolicPlanOf(const format::LoadedFile& file, const format::ContextDesc& c);

// Loads, verifies and prepares; used by Program::Load.
Result<std::unique_ptr<ProgramImpl>> LoadProgram(const std::string& path, const LoadOptions& options);

}  // namespace fcb
