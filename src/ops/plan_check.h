// The one checker of a compiled plan (format::ContextDesc), shared by the
// compiler, which runs it on every plan it writes so that a plan it cannot
// load is refused at compile time, and by the loader, which runs it on every
// plan it reads from a (possibly hostile) file before preparing kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fcb/status.h"
#include "format/file_desc.h"
#include "ir/symbolic.h"
#include "ops/op.h"

namespace fcb::ops {

// The weight pool the plan refers to.
class PlanWeights {
 public:
  virtual ~PlanWeights() = default;
  virtual size_t count() const = 0;
  virtual uint64_t size(int32_t blob) const = 0;
  virtual const void* data(int32_t blob) const = 0;
  // Called once per weight tensor whose bytes the checker reads now (small
  // constants handed to shape inference) or which can steer control flow or
  // addressing (every non-floating tensor); the loader verifies the blob's
  // checksum here, before anything reads it.
  virtual Status Verify(int32_t blob, const std::string& tensor) = 0;
};

struct CheckedStep {
  const OpDef* def = nullptr;
  std::string where;  // "step 3 (ConvNhwc, node 'conv1')"
  Attrs attrs;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<const ir::TensorData*> constants;  // small constant inputs, else null
  std::vector<const void*> data;                 // weight bytes per input, else null
  uint64_t scratch = 0;                          // per-thread bytes (OpDef::scratch)
  CreateContext create_context() const {
    return CreateContext{def->name, attrs, inputs, outputs, constants, &data};
  }
};

struct CheckedPlan {
  std::vector<TensorInfo> infos;      // per tensor
  std::vector<uint64_t> bytes;        // per tensor
  std::vector<const void*> weights;   // per tensor: the weight's bytes, null for arena tensors
  std::vector<std::shared_ptr<ir::TensorData>> small_constants;  // per tensor, or null
  const std::shared_ptr<ir::TensorData>& value(int32_t t) const { return small_constants[t]; }
  // Plans with symbols, per step: its outputs were computed from the shapes
  // (their values are in small_constants), so a run need not compute them
  // again; `needed` per tensor: some step not so computed, or the method's
  // outputs, read it (a computed step whose outputs none reads need not run).
  std::vector<bool> computed_steps;
  // Per step: its guard (StepDesc::guard) fails at these sizes, so it does not run.
  std::vector<bool> guarded_off;
  std::vector<bool> computed_tensors;
  std::vector<bool> needed;
  std::vector<CheckedStep> steps;
  // Per-thread scratch the steps need: the largest, rounded up to 64 bytes.
  uint64_t scratch_bytes = 0;
  // Plans with symbols (what ResolvePlan walks): the steps a change of the
  // inputs' sizes can reach (reading a method input or a reached step's
  // output), in order, with their input tensors flat (step reach_steps[k]'s
  // are reach_inputs[reach_offsets[k] .. reach_offsets[k + 1]]); of the
  // others, the largest scratch (rounded up to 64 bytes).
  std::vector<int32_t> reach_steps, reach_offsets, reach_inputs;
  // Per reached step (as reach_steps): which of its inputs' values, where
  // they are computed from the shapes, can change its output shapes (bit i:
  // input i; ValueShapedInputs), and kShapeOfRank where its output shapes
  // depend on its input's rank alone (Shape, Size). A step whose changed
  // operands are none of these and whose inputs keep their shapes keeps its
  // outputs' shapes: ResolvePlan does not infer it again.
  static constexpr uint32_t kShapeOfRank = 1u << 31;
  std::vector<uint32_t> reach_shape_deps;
  // Per reached step: how ResolvePlan may work out its output shapes without
  // the op's generic inference (FastShape, as uint8_t; kNone: it may not),
  // and where its parameters start in reach_params (a Transpose's
  // permutation, a LayerNormalization's axis), or -1.
  std::vector<uint8_t> reach_fast;
  std::vector<int32_t> reach_param_at;
  std::vector<int64_t> reach_params;
  uint64_t unreached_scratch = 0;
  // Plans with symbols, flat (a resolution reads these instead of the
  // scattered per-step and per-tensor structures above, which are cold by
  // then): per tensor its shape as checked, tensor t's dims being
  // dims[dim_at[t] .. dim_at[t + 1]], and its dtype; per reached step (as
  // reach_steps) its output tensors (reach_outputs[reach_out_offsets[k] ..
  // reach_out_offsets[k + 1]]), its op and what it is (kReach* bits).
  std::vector<int32_t> dim_at;
  std::vector<int64_t> dims;
  std::vector<ir::DType> dtypes;
  std::vector<int32_t> reach_out_offsets, reach_outputs;
  std::vector<const OpDef*> reach_defs;
  // kReachValueUnread (set by CompileComputedValues): a step whose values the
  // value program gives and which no step evaluated or run reads (only other
  // such steps, which take theirs from the program too, whatever their
  // operands): where the program evaluates, a resolution passes it by
  // without working its values out.
  static constexpr uint8_t kReachScratch = 1, kReachGuard = 2, kReachComputed = 4, kReachValueUnread = 8;
  // Set with them: the reached steps (as indices into reach_steps) that a
  // resolution where the program evaluates walks, and the outputs of the
  // program's steps it passes by (it marks them unread without visiting
  // their steps): those kReachValueUnread, and those whose values are read
  // only by steps it does not walk (the proven ones below) at inputs whose
  // contents no kernel reads (ReadsInputContents: a Reshape's target shape).
  std::vector<int32_t> reach_walk, unread_tensors;
  size_t unread_steps = 0;
  // Set with them too: the reached steps whose output shapes follow from
  // their operands' at every size without a check (their op's inference
  // cannot refuse there: CompileComputedValues' ProvenOutputs), as step
  // indices, their largest scratch (rounded up to 64 bytes) and their
  // outputs; the flat dims of those outputs that are not constants (indices
  // into `dims`) and the program's slots that give them; and every dim of
  // the walked steps' outputs that proven steps read, with the slots that
  // give their symbolic shapes, which a resolution compares with the walk's
  // (a difference: it resolves again walking every step). walk_compiled:
  // reach_walk and these hold (the walk skips the proven and unread steps
  // where the program evaluates).
  std::vector<int32_t> proven_step_index, proven_tensors, proven_dim_index, proven_dim_slot;
  uint64_t proven_scratch = 0;
  // The proven steps with a guard (StepDesc::guard of 3 values), kProvenGuard
  // values each: the step, its output 0 (of rank 4), then the guard's; a
  // resolution evaluates them over the proven shapes (GuardHolds).
  static constexpr size_t kProvenGuard = 5;
  std::vector<int64_t> proven_guards;
  std::vector<int32_t> verify_tensor, verify_dim, verify_slot;
  bool walk_compiled = false;
  std::vector<uint8_t> reach_flags;
  std::vector<uint64_t> reach_scratch;  // per reached step: its scratch at the bound (CheckedStep::scratch)
  // Where CompileComputedValues ran (the runtime's loader): the elements of
  // the values computed from the shapes that the symbolic plan knows, as one
  // program over the method's symbols; per reached step (as reach_steps),
  // where its outputs' elements start among the program's outputs (each
  // output row-major, in order), or -1: ResolvePlan evaluates the program
  // once at each new size and takes those steps' values from it instead of
  // evaluating the steps.
  ir::DimProgram value_program;
  std::vector<int32_t> reach_value_at;
  // The program's value outputs at the bound (every symbol at its upper
  // end; the first outputs, before the proven shapes'): a value the program
  // gives as at the bound keeps the bound's value.
  std::vector<int64_t> value_program_bound;
};

// Checks every tensor (dtype, element count, arena bounds and alignment,
// weight blob and its size), the method's inputs and outputs (arena tensors),
// and every step: a known op, operand indices in range, outputs in the
// arena, its shape inference agreeing with the declared outputs, and its
// scratch. Errors are InvalidArgument naming the tensor or step; the compiler
// reports them as Internal, the loader as CorruptFile.
//
// A plan with symbols (ContextDesc::dynamic) is checked at the bound, where
// every inferred shape must equal the declared one, unless `input_shapes`
// gives the method's inputs other shapes (one per input, the sizes a run
// chose; the caller checked them against the symbols' ranges): then every
// step's outputs are inferred from those, must keep the declared dtype and
// rank and fit the bytes planned at the bound, and `infos` holds the shapes
// of this run. In such a plan the small values computed from shapes alone
// (a Shape or Size step, and steps whose inputs are all such values or small
// weights and whose outputs are planned small at the bound, see
// kMaxShapeValueBytes) are evaluated here, so that the steps reading them (a Reshape's
// shape, a Slice's ends) infer and create as if they were constants; they
// still run as steps. Which steps those are does not depend on the sizes.
//
// `weight_constants` (per tensor, as a CheckedPlan of the same plan holds in
// small_constants) lets a resolution share the small weights' contents read
// once at load instead of copying them again.
Result<CheckedPlan> CheckPlan(const format::ContextDesc& c, PlanWeights& weights,
                              const std::vector<ir::Shape>* input_shapes = nullptr,
                              const std::vector<std::shared_ptr<ir::TensorData>>* weight_constants = nullptr);

// An operand's dims (rank n) and dtype at a resolution, read in place (an
// absent optional input: no dims, kUndefined).
struct DimsRef {
  const int64_t* d = nullptr;
  size_t n = 0;
  ir::DType dtype = ir::DType::kUndefined;
  bool present() const { return dtype != ir::DType::kUndefined; }
};
// The most outputs (a Split's) and operands FastOutputDims works out; past
// them it declines.
inline constexpr size_t kMaxFastOutputs = 64, kMaxFastOperands = 64;

// A plan with symbols at the input shapes of one run, resolved from its check
// at the bound (`bound`, CheckPlan without input shapes) instead of from
// scratch: only the steps that read a tensor whose shape or computed value
// differs from the bound's are inferred again (in step order, so a change
// propagates to exactly the steps it reaches); every other step keeps the
// bound's CheckedStep, shapes, values and scratch. It refuses what CheckPlan
// with the same input shapes refuses, with the same messages (dtype or rank
// changed, an output outgrowing its planned bytes, a guard on a step without
// an [N, H, W, C] output, a value from the shapes that cannot be evaluated),
// and gives the same shapes, values, guards and scratch: the runtime resolves
// with it at each new combination of sizes, where the tensors' and operands'
// structure (checked once at load) need not be checked again.
struct ResolvedPlan {
  const CheckedPlan* bound = nullptr;
  // Per step: where its shapes or the values it reads differ from the
  // bound's at these sizes (changed), an index into `steps`, else -1 (the
  // bound's step holds). Its operands and outputs are the resolution's
  // shapes and values (dims_of, value, create_context). A Step is
  // ResolvePlan's own: the storage of a step's outputs where its op's
  // inference (or something that needs them whole) works them out, left
  // over otherwise; dims_of holds every shape.
  struct Step {
    std::vector<TensorInfo> outputs;
  };
  std::vector<int32_t> step_slot;
  // At least one per step reached (those past the ones changed are left over from
  // an earlier resolution into this one: ResolvePlan reuses their storage).
  std::vector<Step> steps;
  // Every tensor's shape at these sizes, flat as the bound's (CheckedPlan::
  // dim_at): a copy of the bound's dims over which a resolution writes the
  // shapes that differ (changed_tensors) and puts back those an earlier
  // resolution wrote (a proven shape's constant dims are never written). A
  // resolution writes each shape here and nowhere else: kernels read them in
  // place (RunContext::shapes), so a change of sizes builds no shape objects.
  std::vector<int64_t> dims;
  // ResolvePlan's own: the tensors whose dims it wrote (but the proven
  // shapes'), and whether it wrote the proven shapes' (CheckedPlan::
  // proven_tensors): what the next resolution into this one puts back to the
  // bound's before it writes its own, so that `dims` always holds every
  // tensor's dims at the sizes resolved (spans into it stay valid).
  std::vector<int32_t> dims_written;
  bool proven_written = false;
  // ResolvePlan's own, likewise: the steps walked given a slot in step_slot
  // and the tensors it marked kUnread while walking (put back to -1 by the
  // next resolution into this one; what a compiled walk sets at every size,
  // while proven_written, is kept where the next is compiled too).
  std::vector<int32_t> slotted_steps, unread_marked;
  // Per tensor: its value computed from the shapes at these sizes where it
  // differs from the bound's small_constants (index into `values`), else -1,
  // or kUnread for a value nothing reads, not worked out (CheckedPlan::
  // kReachValueUnread): value() is null there.
  static constexpr int32_t kUnread = -2;
  std::vector<int32_t> value_slot;
  std::vector<std::shared_ptr<ir::TensorData>> values;
  // Per step, as in CheckedPlan. Which steps are computed from the shapes,
  // and so which tensors are needed, does not depend on the sizes
  // (ComputedFromShapes): those are the bound's (bound->computed_steps,
  // computed_tensors, needed).
  std::vector<bool> guarded_off;
  std::vector<int32_t> value_tensors;  // per entry of `values`: its tensor
  // ResolvePlan's own: per tensor whether it differs from the bound's; the
  // values of an earlier resolution into this one by tensor (each tensor's
  // next value is written into its last one's storage), and the one handed
  // to the step being evaluated.
  std::vector<uint8_t> changed_tensors;
  std::vector<std::pair<int32_t, std::shared_ptr<ir::TensorData>>> prior;
  std::vector<std::shared_ptr<ir::TensorData>> spare;
  // ResolvePlan's own: one step's operands, a set per operand count (their
  // shapes' storage reused from step to step, and from an earlier resolution).
  std::vector<std::vector<TensorInfo>> operand_sets;
  // ResolvePlan's own: one step's output dims worked out in place
  // (FastOutputDims), before they are checked.
  std::vector<int64_t> fast_dims;
  std::vector<size_t> fast_ranks;
  std::vector<DimsRef> fast_refs;
  std::vector<const ir::TensorData*> fast_values;
  uint64_t scratch_bytes = 0;
  // How the steps walked again got their output shapes: the bound's kept
  // (only values they ignore changed), FastShape, the op's inference; how
  // many computed steps took their values from the bound's value_program;
  // and how many steps' shapes were proven (CheckedPlan::proven_step_index:
  // from the program, not walked).
  uint32_t shapes_kept = 0, shapes_fast = 0, shapes_inferred = 0, values_compiled = 0, shapes_proven = 0;
  // ResolvePlan's own: the symbols' values at these sizes and the value
  // program's slots.
  std::vector<int64_t> symbol_values, program_slots;

  bool changed(size_t step) const { return step_slot[step] >= 0; }
  ir::DType dtype_of(int32_t t) const { return bound->dtypes[t]; }
  // Per tensor (changed_tensors): its shape, its value computed from the
  // shapes differs from the bound's.
  static constexpr uint8_t kShapeChanged = 1, kValueChanged = 2;
  // Tensor t's dims at these sizes, read in place (the flat dims).
  std::span<const int64_t> dims_of(int32_t t) const {
    const size_t at = static_cast<size_t>(bound->dim_at[t]), n = static_cast<size_t>(bound->dim_at[t + 1]) - at;
    return {dims.data() + at, n};
  }

  ResolvedPlan() = default;
  ResolvedPlan(const ResolvedPlan&) = delete;
  ResolvedPlan& operator=(const ResolvedPlan&) = delete;
  ResolvedPlan(ResolvedPlan&&) = default;
  ResolvedPlan& operator=(ResolvedPlan&&) = default;
  // Tensor t's contents where known (small weights, values computed from the shapes), else null.
  const std::shared_ptr<ir::TensorData>& value(int32_t t) const {
    static const std::shared_ptr<ir::TensorData> kNone;
    return value_slot[t] >= 0 ? values[value_slot[t]] : value_slot[t] == kUnread ? kNone : bound->small_constants[t];
  }
  // The create context of step `step` (`s`, its StepDesc) at these sizes,
  // walked again (changed(step)) and not computed from the shapes: its
  // operands and outputs are written into `inputs`, `outputs` and
  // `constants` (the caller's, reused from step to step; kernels keep
  // nothing of the context).
  CreateContext create_context(const format::StepDesc& s, size_t step, std::vector<TensorInfo>* inputs,
                               std::vector<TensorInfo>* outputs, std::vector<const ir::TensorData*>* constants) const {
    const CheckedStep& b = bound->steps[step];
    auto fill = [&](const std::vector<int32_t>& tensors, std::vector<TensorInfo>* infos) {
      infos->resize(tensors.size());
      for (size_t i = 0; i < tensors.size(); ++i) {
        const int32_t t = tensors[i];
        TensorInfo& in = (*infos)[i];
        if (t < 0) {
          in.dtype = ir::DType::kUndefined;
          in.shape.clear();
        } else {
          const std::span<const int64_t> d = dims_of(t);
          in.dtype = dtype_of(t);
          in.shape.assign(d.begin(), d.end());
        }
      }
    };
    fill(s.inputs, inputs);
    fill(s.outputs, outputs);
    constants->resize(s.inputs.size());
    for (size_t i = 0; i < s.inputs.size(); ++i) (*constants)[i] = s.inputs[i] < 0 ? nullptr : value(s.inputs[i]).get();
    return CreateContext{b.def->name, b.attrs, *inputs, *outputs, *constants, &b.data, true};
  }
};
//
// `out` may hold an earlier resolution of the same plan (at other sizes):
// it is overwritten, its vectors' storage reused (a cache replacing its
// least recently used resolution allocates less).
Status ResolvePlan(const format::ContextDesc& c, const CheckedPlan& bound, const std::vector<ir::Shape>& input_shapes,
                   ResolvedPlan* out);

// Sizes `out`'s storage for resolutions of plan `c` (checked at the bound as
// `bound`): what ResolvePlan allocates at the first resolution into it,
// every tensor's shape and step as at the bound. The runtime reserves its
// cache's resolutions when an execution is made, so that a run at new sizes
// allocates next to nothing.
void ReserveResolvedPlan(const format::ContextDesc& c, const CheckedPlan& bound, ResolvedPlan* out);

// Where a ResolvedPlan differs from what CheckPlan gives at the same input
// shapes (`full`): every tensor's dtype and shape, which values are computed
// from the shapes and their bytes, which steps are computed, guarded off or
// needed, and the scratch. Empty when they agree. The compiler checks this
// at the sizes it probes, and tests at many more.
// The inputs of an op whose values (where a plan computes them from the
// shapes) can change its output shapes: bit i for input i (Reshape's shape,
// Slice's starts and ends, Range's operands); every bit for an op not known
// to ignore them. Elementwise ops, Gather (its indices' shape, not their
// values), Concat, Cast, MatMul, Transpose,
// the normalizations: none (their outputs' shapes follow their inputs' shapes
// and attributes alone).
uint32_t ValueShapedInputs(std::string_view op);

// Ops whose output shapes a resolution works out in place (no allocation, no
// generic inference) from the operands' shapes at the run and the bound's
// check, with exactly their inference's result; where that would not hold
// (operands that do not broadcast, a normalized or reduced dim that changed)
// the generic inference runs and gives its refusal.
enum class FastShape : uint8_t {
  kNone = 0,
  kSameAsInput0,  // one output shaped like input 0 (unary elementwise, Cast, Softmax)
  kBroadcast,     // one output, every input broadcast (binary, variadic, Where)
  kTranspose,     // the permutation in reach_params
  kLayerNorm,     // one output; the axis in reach_params; the normalized dims as at the bound
  kGemmPacked,    // A's dims but the last (unchanged), then the bound's columns
  kMatMul,        // NumPy matmul of the two inputs (MatMulGeometry)
  kUnsqueeze,     // axes constant: reach_params holds their count, then them normalized
  kReshape,       // allowzero 0; the target is input 1's value at these sizes
  kConcat,        // the axis in reach_params; every input present
  kGather,        // the axis in reach_params
  kSlice,         // starts, ends (and axes, steps where given) int64 values known at these sizes
  kExpand,        // the shape an int64 value known at these sizes
  kConstantOfShape,  // the shape an int64 value known at these sizes
  kRange,         // integer start, limit and delta known at these sizes
  kSplit,         // the axis, the output count and each output's size along it (the axis keeps its size)
  kWindow,        // OpDef::window_shape's WindowShape, its fields as WindowParam lays them out
};
// Where a kWindow's parameters hold each field of its WindowShape (per
// spatial dim: H's, then W's one after).
enum WindowParam : size_t {
  kWinH = 0, kWinW, kWinPadBegin, kWinPadEnd = kWinPadBegin + 2, kWinExtent = kWinPadEnd + 2,
  kWinStride = kWinExtent + 2, kWinCeil = kWinStride + 2, kWinGlobal, kWinResidual, kWinParams
};
// Which way step `s`, checked at the bound as `cs`, is shaped (`weights`: per
// tensor, non-null for a weight); its parameters are appended to `params`,
// their start written to *at.
FastShape FastShapeOf(const format::StepDesc& s, const CheckedStep& cs, const std::vector<const void*>& weights,
                      std::vector<int64_t>* params, int32_t* at);
// What FastOutputShape reads of a step as checked at the bound: its op,
// output 0's dtype, input 0's and output 0's shapes (a resolution takes them
// from CheckedPlan's flat arrays; a CheckedStep gives them too).
struct FastShapeBound {
  std::string_view op;
  ir::DType dtype = ir::DType::kUndefined;
  const int64_t* in0 = nullptr;
  size_t in0_rank = 0;
  const int64_t* out0 = nullptr;
  size_t out0_rank = 0;
};
// The step's output shapes from its operands at a run (`in`, and the values
// known then in `constants`), written over `outs` (its storage reused):
// exactly what its inference gives where this returns true; false where the
// inference must run (it may then refuse).
bool FastOutputShape(FastShape kind, const int64_t* params, const std::vector<TensorInfo>& in,
                     const std::vector<const ir::TensorData*>& constants, const FastShapeBound& b,
                     std::vector<TensorInfo>* outs);
bool FastOutputShape(FastShape kind, const int64_t* params, const std::vector<TensorInfo>& in,
                     const std::vector<const ir::TensorData*>& constants, const CheckedStep& b,
                     std::vector<TensorInfo>* outs);
// What FastOutputShape does (the one implementation: it calls this), on
// operands read in place (`in`, n_in of them, input 0 present; `constants`
// one per operand, null where its value is not known) and into fixed
// storage: output i's dims at out + i * kMaxRank, its rank ranks[i] (out
// holds kMaxFastOutputs * kMaxRank dims, ranks kMaxFastOutputs), the count
// in *n_out and their dtype in *dtype. False, beside where FastOutputShape
// declines, where an output's rank would pass kMaxRank.
bool FastOutputDims(FastShape kind, const int64_t* params, const DimsRef* in, size_t n_in,
                    const ir::TensorData* const* constants, const FastShapeBound& b, int64_t* out, size_t* ranks,
                    size_t* n_out, ir::DType* dtype);

std::string ResolutionDifference(const format::ContextDesc& c, const CheckedPlan& full, const ResolvedPlan& r);

// A value computed from shapes, evaluated directly (what ops::ResolvePlan
// does for the ops shape arithmetic is made of: views, Cast to its own dtype,
// Concat, Gather, Range, ConstantOfShape, Expand, Where, Not, integer
// Add/Sub/Mul, integer comparisons, bool logic) instead of through the op's
// generic kernel (ops::Evaluate), with the same bytes. `outs` is what infer
// gave for these inputs. False (nothing appended) for any other op or an
// operand it does not expect, such as an index out of range: evaluate it
// through ops::Evaluate then, which reports the error.
// `spare`, where given, holds tensors no one else holds (use_count 1) that
// the values are written into (their storage reused) before new ones are made.
bool EvaluateDirect(const OpDef& def, const Attrs& attrs, const std::vector<const ir::TensorData*>& in,
                    const std::vector<TensorInfo>& outs, std::vector<std::shared_ptr<ir::TensorData>>* values,
                    std::vector<std::shared_ptr<ir::TensorData>>* spare = nullptr);
// A tensor of `dtype`, the shape [dims, dims_end) and `bytes` zero bytes:
// one of `spare` (its storage reused) where there is one, else a new one.
std::shared_ptr<ir::TensorData> SpareTensor(std::vector<std::shared_ptr<ir::TensorData>>* spare, ir::DType dtype,
                                            const int64_t* dims, const int64_t* dims_end, size_t bytes);

// Whether a step with guard `guard` (StepDesc::guard; empty: none) runs when
// its output 0 has shape `out0`.
bool GuardHolds(const std::vector<int64_t>& guard, const ir::Shape& out0);
// The same for a guard of 3 values {kind, tile, threshold} and an output of rank 4, read in place.
bool GuardHolds(const int64_t* guard, const int64_t* out0);

// The largest value (all outputs of a step, in bytes planned at the bound) a
// plan with symbols computes from the shapes at load and at each new size
// where no step's output shapes depend on it (planned, not at the sizes of a
// run: the same steps are computed at every size, and none is larger at a run
// than at the bound). The values shape inference reads (a Reshape's target, a
// Slice's ends, a Range's limit, and what they are computed from) are
// computed up to kMaxInferConstantBytes; larger values no shape depends on (a
// Range over the sequence, a causal mask made from it, a ConstantOfShape of
// the sequence's length) are made by their steps' kernels at each run, which
// costs a run what copying them in cost, and a change of sizes nothing.
inline constexpr uint64_t kMaxShapeValueBytes = 512;

// Whether step `s` of a plan with symbols is one of the values computed from
// shapes alone (see CheckPlan), given which of its inputs are, the bytes
// planned per tensor and which tensors' values some step's output shapes
// depend on (those are computed up to kMaxInferConstantBytes).
bool ComputedFromShapes(const format::StepDesc& s, const std::vector<bool>& computed,
                        const std::vector<std::shared_ptr<ir::TensorData>>& small_constants,
                        const std::vector<uint64_t>& planned_bytes, const std::vector<bool>& shapes_read);

// State binding `b` of plan `c` (format::ContextDesc::StateDesc; its indices
// and shapes already checked by the metadata checks): the output is written
// in place over the input's buffer by exactly one step that reads the input
// as its past and writes only the new rows (com.microsoft.GroupQueryAttention
// with a static buffer: past_key -> present_key, past_value ->
// present_value), and no other step reads the input (its bytes change under
// that step). Empty when it holds; else what is wrong, naming the tensors.
// `*step` gets the producing step's index.
std::string CheckStateBinding(const format::ContextDesc& c, const format::ContextDesc::StateDesc& b,
                              int32_t* step = nullptr);

}  // namespace fcb::ops
