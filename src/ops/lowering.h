// The interfaces through which an operator's own file takes part in
// compilation, without the ops layer depending on the compiler:
//
//   LayoutContext - the layout pass (passes/layout.cc) hands an ONNX node to
//                   the NHWC form that registered for its op (OpDef::layouts).
//   LowerContext  - the lowering driver (compile/lower.cc) hands a graph node
//                   to the rules that registered for its op (OpDef::lowerings)
//                   and gives them the weight pool and the plan to write to.
//
// A rule sees the graph, decides (its cost model lives beside it), packs the
// weights it needs and emits steps; the driver owns tensor numbering, the
// weight pool, the arena plan and the step check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/target.h"
#include "fcb/status.h"
#include "format/file_desc.h"
#include "ir/ir.h"
#include "kernels/kernels.h"

namespace fcb::ops {

// The numbers a target's compile computes with. Spelled "fp32", "bf16",
// "int8" and "int4" only where specs, the command line and stored options are read or
// written (ParsePrecision, PrecisionName); an enum everywhere else.
//   kFp32 - float32 throughout.
//   kBf16 - packed conv/GEMM weights stored as bfloat16, widened at load.
//   kInt8 - convolutions quantized to int8 (passes/quantize_int8.cc), float
//           depthwise weights stored as int8 (ConvNhwc).
//   kInt4 - weight-only: float MatMul/Gemm weights as 4-bit MatMulNBits
//           (block 32, symmetric), the LM head and embedding tables at 8 bits
//           (passes/quantize_int4.cc); activations stay float.
// bf16, int8 and int4 need the optimizing pipeline (optimization_level >= 1).
enum class Precision { kFp32, kBf16, kInt8, kInt4 };

inline const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kBf16: return "bf16";
    case Precision::kInt8: return "int8";
    case Precision::kInt4: return "int4";
    case Precision::kFp32: break;
  }
  return "fp32";
}

// The precision spelled `s`, or nullopt for anything else.
inline std::optional<Precision> ParsePrecision(std::string_view s) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kInt8, Precision::kInt4})
    if (s == PrecisionName(p)) return p;
  return std::nullopt;
}

// What a lowering rule may ask of the target it compiles for.
struct LowerTarget {
  TargetId target = TargetId::kGeneric;
  int optimization_level = 2;
  Precision precision = Precision::kFp32;
  // Packed conv/GEMM weights stored as bfloat16.
  bool bf16_weights() const { return precision == Precision::kBf16; }
  // Float depthwise weights stored as int8 (see ConvNhwc).
  bool int8() const { return precision == Precision::kInt8; }
};

class LowerContext {
 public:
  virtual ~LowerContext() = default;
  virtual const ir::Graph& graph() const = 0;
  virtual const LowerTarget& target() const = 0;

  // The plan tensor of graph value `v` (a weight for constants, an arena
  // tensor otherwise); -1 for -1.
  virtual int32_t Value(int v) = 0;
  // A weight tensor holding `floats` (fp32, 1-D).
  virtual int32_t Floats(const std::string& name, const std::vector<float>& floats) = 0;
  // Packed conv/GEMM weights: fp32, or bfloat16 when target().bf16_weights()
  // (the kernels widen them once at load).
  virtual int32_t PackedWeights(const std::string& name, const std::vector<float>& floats) = 0;
  // A 1-D weight tensor of `count` elements of `dtype` (int8 panels, int32 sums).
  virtual int32_t Weights(const std::string& name, ir::DType dtype, const void* data, int64_t count) = 0;
  // Appends a step; trailing absent (-1) inputs are dropped.
  virtual void Emit(std::string_view op, const std::string& node_name, std::vector<int32_t> inputs,
                    std::vector<int32_t> outputs, std::vector<format::AttrDesc> attrs) = 0;
  // Marks node `node` as lowered by the current rule: the driver skips it.
  virtual void Claim(int node) = 0;

  // Graph queries.
  const ir::Node& node(int i) const { return graph().nodes[i]; }
  const ir::Value& value(int v) const { return graph().values[v]; }
  // The constant data of input i of `n`, or null (absent or not constant).
  const ir::TensorData* Const(const ir::Node& n, size_t i) const {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return nullptr;
    return graph().values[n.inputs[i]].constant.get();
  }
  // The node that alone reads value `v` (not a graph output either), or -1.
  virtual int SoleReader(int v) const = 0;

  // Graphs with ranges (ir::Graph::dynamic): the shape of `v` with every
  // symbol at the low end of its range, where the compiler could tell it;
  // null otherwise (then decide by the bound's shape alone).
  virtual const ir::Shape* LowShape(int) const { return nullptr; }
  // Asks for a second variant of the node being lowered: the steps this rule
  // emitted get guard `mine` (format::StepDesc::guard), and the node is also
  // lowered by the rules after this one, whose steps get guard `others`. For
  // a choice that depends on a size which a range spans: each run picks the
  // variant its sizes call for. The rule still returns true.
  virtual void AlsoLowerByTheNextRules(std::vector<int64_t> mine, std::vector<int64_t> others) {
    (void)mine, (void)others;
  }
};

class LayoutContext {
 public:
  virtual ~LayoutContext() = default;
  virtual const ir::Graph& graph() const = 0;
  // The shape of `v` as plain NCHW shape inference gave it, whatever layout
  // `v` has by now: graph().values[v].shape is NHWC once a rule emitted `v`
  // in that layout, so rules read an input's dims through this.
  virtual ir::Shape LogicalShape(int v) const = 0;
  // Whether `v` is NHWC by now (an earlier rule emitted it in that layout).
  virtual bool IsNhwc(int v) const = 0;
  // The value holding `v` in NHWC layout (a Transpose is added once).
  virtual int ToNhwc(int v) = 0;
  // Appends `n`, whose output 0 is marked NHWC (its shape permuted).
  virtual void EmitNhwc(ir::Node n) = 0;
  // Appends `n` as it is: its outputs keep their layout (NCHW unless made by
  // NewValue(..., nhwc = true)) and its inputs are read in the layout they have.
  virtual void Emit(ir::Node n) = 0;
  // Lays out `n` as the pass does a graph node: another op's rule, the op's
  // traits, or NCHW (a rule that rewrites a node into simpler ones).
  virtual Status Place(ir::Node n) = 0;
  // A new value named after `base` (made unique): of NCHW shape `shape`, or,
  // with `nhwc`, of NHWC (physical) shape `shape`.
  virtual int NewValue(const std::string& base, ir::DType dtype, ir::Shape shape, bool nhwc) = 0;
  // A new constant (NCHW, as any constant).
  virtual int AddConstant(const std::string& name, ir::TensorPtr t) = 0;

  const ir::Value& value(int v) const { return graph().values[v]; }
  // The constant data of input i of `n`, or null (absent or not constant).
  const ir::TensorData* Const(const ir::Node& n, size_t i) const {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return nullptr;
    return graph().values[n.inputs[i]].constant.get();
  }
};

}  // namespace fcb::ops
