// Layout assignment: convolution-family ops run on NHWC activations (channels
// innermost, so weight panels of 16 output channels vectorize on every
// target); everything else keeps ONNX's NCHW.
//
// Hands each ONNX node on a 4-D float input to the NHWC form that registered a
// layout rule for its op (OpDef::layouts: Conv, ConvTranspose, MaxPool,
// AveragePool, GlobalAveragePool today), lets layout-agnostic ops (traits
// kTraitElementwise / kTraitBroadcast, and Concat) follow their inputs'
// layout, and
// inserts explicit Transpose nodes wherever a value must change layout. Values
// switched to NHWC have their shape replaced by the physical NHWC shape. Graph
// inputs and outputs keep their ONNX layout and names.
//
// ConvNhwc keeps the ONNX weight [oc][icg][kh][kw] and bias [oc] as inputs;
// lowering packs them per target options.
#pragma once

#include "fcb/status.h"
#include "ir/ir.h"

namespace fcb::passes {

Status AssignLayouts(ir::Graph& g);

}  // namespace fcb::passes
