// The operator registry: one definition per operator, shared by the compiler
// (shape inference, constant folding) and the runtime (validation, execution).
//
// Each op family lives in its own file (elementwise.cc, conv.cc, ...) and adds
// OpDefs through a Register*() function called from registry.cc. An op has:
//   infer  - output dtypes/shapes from input dtypes/shapes, attributes and any
//            compile-time-constant inputs. Also run at load time on every step
//            of a (possibly hostile) file, so it must validate everything and
//            never crash on nonsense.
//   create - a prepared Kernel for fixed shapes; validates again and parses
//            attributes once so Run does no parsing and no allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "fcb/status.h"
#include "format/file_desc.h"
#include "ir/ir.h"
#include "kernels/bundle.h"

namespace fcb::ops {

struct TensorInfo {
  ir::DType dtype = ir::DType::kUndefined;  // kUndefined = absent optional input
  ir::Shape shape;
  bool present() const { return dtype != ir::DType::kUndefined; }
  int64_t numel() const { return ir::NumElements(shape); }
  int64_t bytes() const { return numel() * static_cast<int64_t>(ir::DTypeSize(dtype)); }
};

// Attributes of one op instance (same representation as stored in .fcb steps).
class Attrs {
 public:
  Attrs() = default;
  explicit Attrs(std::vector<format::AttrDesc> a) : a_(std::move(a)) {}
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  int64_t GetInt(std::string_view name, int64_t def) const;
  float GetFloat(std::string_view name, float def) const;
  std::string GetString(std::string_view name, const std::string& def) const;
  std::vector<int64_t> GetInts(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(std::string_view name, std::vector<float> def = {}) const;
  const format::AttrDesc* Find(std::string_view name) const;
  const std::vector<format::AttrDesc>& list() const { return a_; }
  std::vector<format::AttrDesc>& mutable_list() { return a_; }

 private:
  std::vector<format::AttrDesc> a_;
};

// Converts an IR node's attributes (int, float, string, ints, floats; a tensor
// attribute becomes its elements as ints or floats).
Attrs AttrsFromNode(const ir::Node& node);

// Constant inputs up to this size are given to infer/create (at compile time and
// at load time alike); larger ones (weights) are passed as null.
inline constexpr size_t kMaxInferConstantBytes = 65536;

struct InferContext {
  std::string_view op;
  const Attrs& attrs;
  const std::vector<TensorInfo>& inputs;
  // Same length as inputs; non-null where the input's contents are known at
  // compile time (e.g. Reshape's shape). At load time this holds the weight
  // blobs' contents (constant inputs stored in the file).
  const std::vector<const ir::TensorData*>& constants;
  int num_outputs;
};

struct RunContext {
  // The target's kernels (fp32 and int8), chosen once when the program loaded.
  const kernels::KernelBundle* k = nullptr;
  ThreadPool* pool = nullptr;  // never null at run time (a pool may have one thread)
  // Per-thread scratch memory of the execution (planned at compile time,
  // allocated with its arena): thread t of the
  // pool (ThreadPool::ParallelForThreads gives t) owns the scratch_stride
  // bytes at scratch + t * scratch_stride, 64-byte aligned. At least the
  // bytes the step's OpDef::scratch asked for (the method's largest); null
  // when no step of the method needs scratch.
  uint8_t* scratch = nullptr;
  size_t scratch_stride = 0;
  void* ThreadScratch(int thread) const { return scratch + static_cast<size_t>(thread) * scratch_stride; }
  // Null where the step runs at the operand shapes its kernel was made for.
  // Else (a plan resolved at a run's sizes reusing the bound's kernel, which
  // adapts: Kernel::adapts) the step's shapes at this run, one per input
  // (empty for an absent optional input) followed by one per output, each
  // its dims read in place.
  const std::span<const int64_t>* shapes = nullptr;
  // Operand `i`'s shape at this run (inputs first, then outputs), or `made`,
  // the shape its kernel was made for.
  std::span<const int64_t> ShapeOf(size_t i, const ir::Shape& made) const {
    return shapes ? shapes[i] : std::span<const int64_t>(made);
  }
};

// A prepared operator for fixed shapes. Immutable after creation; Run may be
// called concurrently from several executions.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // inputs[i] / outputs[i] point at tensor bytes laid out densely, row-major,
  // with the dtypes and shapes given to create (absent optional inputs: null).
  virtual Status Run(const RunContext& ctx, const void* const* inputs,
                     void* const* outputs) const = 0;
  // True where Run also computes at other operand shapes, given in
  // RunContext::shapes: any shapes the op's infer accepts for the same
  // dtypes, ranks and attributes, and any contents of its inputs (the kernel
  // kept nothing of a constant input's value, nor a choice that only holds at
  // the shapes it was made for). A plan resolved at a run's sizes then runs
  // this kernel (the bound's) instead of making one per size (docs/design.md §13).
  virtual bool adapts() const { return false; }
  // Where it adapts: whether a kernel made for exactly one run's sizes runs
  // faster than this one given them (its walk worked out once, not at each
  // run), so that repeated runs at those sizes are worth making one for
  // (runtime SpecializeMethod). False where it works out next to nothing
  // per run (a convolution's geometry).
  virtual bool worth_specializing() const { return true; }
};

struct CreateContext {
  std::string_view op;
  const Attrs& attrs;
  const std::vector<TensorInfo>& inputs;
  const std::vector<TensorInfo>& outputs;
  const std::vector<const ir::TensorData*>& constants;  // as in InferContext
  // Bytes of inputs stored in the file (weights) or constant-folded inputs,
  // whatever their size; null entries (or a null vector) where unknown. Lets a
  // kernel convert weights once at load (e.g. bf16 -> fp32).
  const std::vector<const void*>* input_data = nullptr;
  // True where `outputs` are what this op's infer gave for exactly these
  // inputs just before (a plan resolved at a run's sizes, ops::ResolvePlan;
  // a value evaluated from inferred shapes): create need not infer them again.
  bool outputs_inferred = false;
};

using InferFn = Status (*)(const InferContext& ctx, std::vector<TensorInfo>* outputs);
using CreateFn = Result<std::unique_ptr<Kernel>> (*)(const CreateContext& ctx);
// Bytes of per-thread scratch a step needs at run time (0: none), from the
// same context as create; the compiler plans it into the arena.
using ScratchFn = Result<uint64_t> (*)(const CreateContext& ctx);
// Arithmetic operations one run of the step performs (2 per multiply-add),
// for profiles' GFLOP/s; 0 where not defined. Same context as create.
using FlopsFn = uint64_t (*)(const CreateContext& ctx);

class LowerContext;  // ops/lowering.h
class LayoutContext;
// A lowering rule: turns graph node `node` (and any nodes it claims) into
// plan steps. Returns false when it does not apply, and the next rule for the
// node's op is tried; the last resort emits the node as one step unchanged.
using LowerFn = Result<bool> (*)(LowerContext& ctx, int node);
// A layout rule: rewrites an ONNX node whose first input is NHWC-capable into
// its NHWC form (ops/lowering.h). Returns false when it does not apply.
using LayoutFn = Result<bool> (*)(LayoutContext& ctx, const ir::Node& node);

// What passes may assume of an op, instead of knowing op names.
enum OpTraits : uint32_t {
  kTraitNone = 0,
  // Elementwise, one tensor operand (input 0), every output shaped like it:
  // any layout of input 0 gives the same layout out.
  kTraitElementwise = 1,
  // Elementwise over broadcast operands: layout-agnostic when every operand is
  // 4-D or a constant that can be permuted alike.
  kTraitBroadcast = 2,
  // Carries a fused activation (activation, activation_alpha/_beta) in every
  // form it runs in (graph nodes of other ops may, see Lowering below).
  kTraitTakesActivation = 4,
  // May carry a fused residual input (input 3) added before the activation.
  kTraitTakesResidual = 8,
  // Elementwise on input 0 when every other operand holds one element (per
  // tensor quantization parameters: QuantizeLinear, DequantizeLinear; and
  // DynamicQuantizeLinear, whose parameters come from the whole tensor's
  // range): then any layout of input 0 gives the same layout out. Per-axis
  // forms depend on the layout.
  kTraitPerTensorElementwise = 16,
  // Concatenates its operands along attribute `axis`: layout-agnostic when
  // every operand is 4-D (the axis follows the layout), and its operands may
  // be written in place by producers that can write a channel slice
  // (OpDef::write_channel_slice; compile/lower.cc).
  kTraitConcat = 32,
  // Output 0 holds input 0's bytes unchanged, only its shape differs
  // (Reshape, Flatten, Squeeze, Unsqueeze, Identity): lowering may make it a
  // view of the input (a second tensor over the same arena bytes).
  kTraitView = 64,
  // Its scratch (OpDef::scratch) is the same whatever the operands' shapes:
  // a plan resolved at other sizes keeps the bound's without asking again.
  kTraitFixedScratch = 128,
};

// How a window over the two spatial dims of a 4-D input 0 (an NHWC
// convolution or pooling) shapes its one output, [N, OH, OW, C]: N is input
// 0's dim 0, C the channels it has at the bound, and along each spatial dim
// of size D, OH = floor((D + pad_begin + pad_end - extent) / stride) + 1
// (ceil_mode: what WindowOutputSize gives), or 1 where `global`.
struct WindowShape {
  int64_t h_axis = 1, w_axis = 2;  // input 0's spatial dims (an NCHW read: 2, 3)
  int64_t pad_begin[2] = {0, 0}, pad_end[2] = {0, 0};  // per spatial dim
  int64_t extent[2] = {1, 1};      // (kernel - 1) * dilation + 1
  int64_t stride[2] = {1, 1};
  bool ceil_mode = false, global = false;
  int32_t residual = -1;  // the input that must have the output's shape, or -1
};
// OpDef::window_shape: the op's window at a step whose operands are `inputs`
// and attributes `attrs` (false where it has none). The promise it makes: its
// inference accepts input 0 with other sizes along dims 0, h_axis and w_axis
// (the same dtype and its other dims) wherever those are at least 1, OH and
// OW are at least 1 and
// the residual, if any, has the output's shape, every other operand as in
// `inputs`; and gives the output above.
using WindowShapeFn = bool (*)(const Attrs& attrs, const std::vector<TensorInfo>& inputs, WindowShape* w);

struct OpDef {
  std::string name;       // ONNX op_type, "<domain>.<op_type>" (RegistryName), or an internal name (ops/names.h)
  bool internal = false;  // true: created by passes, not accepted from ONNX
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  InferFn infer = nullptr;
  CreateFn create = nullptr;
  ScratchFn scratch = nullptr;  // null: the op needs no scratch
  FlopsFn flops = nullptr;      // null: no operation count (profiles show none)
  uint32_t traits = kTraitNone;
  // Bit i: the contents of input i only shape the output (a Reshape's target
  // shape, an Unsqueeze's axes, a ConstantOfShape's shape, a Range's limit):
  // its kernel reads them neither when it is made nor when it runs, so a
  // plan resolved at other sizes may leave such a value unwritten where the
  // output's shape is known without it (ReadsInputContents).
  uint32_t shape_only_inputs = 0;
  // Rules that produce this op from graph nodes of op `from`, tried in
  // descending priority across every op that registers one for `from`.
  struct Lowering {
    std::string_view from;
    int priority = 0;
    LowerFn fn = nullptr;
    // Non-null when this rule always applies to the nodes it accepts and the
    // op it makes carries a fused activation: then FuseActivations may fuse
    // one into such a node of op `from` (the predicate must be target-neutral).
    bool (*carries_activation)(const ir::Graph& g, const ir::Node& n) = nullptr;
  };
  std::vector<Lowering> lowerings;
  // Layout rules for ONNX nodes of op `from` whose input 0 is a 4-D
  // activation: most make this (NHWC) op; an ONNX op's own rule may rewrite
  // the node into simpler ones (BatchNormalization into Mul and Add).
  struct Layout {
    std::string_view from;
    LayoutFn fn = nullptr;
    // The rule sees inputs of any element type (QConv's uint8/int8 input);
    // otherwise only float32 ones.
    bool any_dtype = false;
  };
  std::vector<Layout> layouts;
  // What the lowering driver (compile/lower.cc) may ask of a step of this op
  // once emitted; null: the op cannot.
  //   write_channel_slice - make step `s` write its output into channels
  //     [offset, offset + its channels) of a tensor of `channels` channels per
  //     pixel (the driver then points the output at that tensor: a Concat's
  //     producers writing in place). False, `s` unchanged, when it cannot.
  //   read_nchw_input - make step `s` read its input 0 as NCHW of shape
  //     `nchw` (the driver then drops the Transpose to NHWC before it). False,
  //     `s` unchanged, when it cannot.
  bool (*write_channel_slice)(format::StepDesc* s, int64_t offset, int64_t channels) = nullptr;
  bool (*read_nchw_input)(format::StepDesc* s, const ir::Shape& nchw) = nullptr;
  // A window op's output shape at other input sizes (WindowShape), which a
  // plan resolved at other sizes works out without the op's inference.
  WindowShapeFn window_shape = nullptr;
};

// Whether a step of op `def` reads the contents of its input `input` when its
// kernel is made or run (not those that only shape its output:
// OpDef::shape_only_inputs).
inline bool ReadsInputContents(const OpDef& def, size_t input) {
  return input >= 32 || !((def.shape_only_inputs >> input) & 1);
}

// The registry's name of operator `op_type` of ONNX domain `domain`: op_type
// itself for the default domain ("" or "ai.onnx"), "<domain>.<op_type>" for
// another (ops/names.h, namespace domain).
std::string RegistryName(std::string_view domain, std::string_view op_type);

// nullptr if unknown.
const OpDef* FindOp(std::string_view name);
// Every registered op, sorted by name.
const std::vector<OpDef>& AllOps();

// Checks the input/output counts against `def`, then runs its infer.
Status InferOutputs(const OpDef& def, const InferContext& ctx, std::vector<TensorInfo>* outputs);

// Evaluates an op on constant inputs with the generic kernels, single-threaded
// (constant folding). Absent optional inputs are null.
Result<std::vector<std::shared_ptr<ir::TensorData>>> Evaluate(
    std::string_view op, const Attrs& attrs, const std::vector<const ir::TensorData*>& inputs,
    int num_outputs);
// The same with the inputs' and outputs' types and shapes already inferred
// (InferOutputs on these inputs), which it does not infer again.
Result<std::vector<std::shared_ptr<ir::TensorData>>> Evaluate(const OpDef& def, const Attrs& attrs,
                                                              const std::vector<const ir::TensorData*>& inputs,
                                                              const std::vector<TensorInfo>& in_info,
                                                              const std::vector<TensorInfo>& out_info);

}  // namespace fcb::ops
