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
#include <string>
#include <string_view>
#include <vector>

#include "core/target.h"
#include "fcb/status.h"
#include "format/file_desc.h"
#include "ir/ir.h"
#include "kernels/kernels.h"

namespace fcb::ops {

// What a lowering rule may ask of the target it compiles for.
struct LowerTarget {
  TargetId target = TargetId::kGeneric;
  int optimization_level = 2;
  bool bf16_weights = false;  // precision "bf16": packed conv/GEMM weights stored as bfloat16
  bool int8 = false;          // precision "int8" (float depthwise weights stored as int8, see ConvNhwc)
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
  // Packed conv/GEMM weights: fp32, or bfloat16 when target().bf16_weights
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
};

// Makes step `s` write its output into channels [offset, offset + its
// channels) of a tensor of `channels` channels per pixel (the caller then
// points the step's output at that tensor). True for the conv steps that
// can (ConvNhwc, ConvWinogradNhwc); false, and `s` unchanged, otherwise.
bool WriteIntoChannelSlice(format::StepDesc* s, int64_t offset, int64_t channels);

// Makes the ConvNhwc step `s` read its input as NCHW of shape `nchw` (the
// input of a Transpose to NHWC the caller then drops): true for a conv the
// few-input-channel path takes (kernels::PlanarConvApplies, the RGB stems);
// false, and `s` unchanged, otherwise.
bool ReadNchwInput(format::StepDesc* s, const ir::Shape& nchw);

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
};

}  // namespace fcb::ops
