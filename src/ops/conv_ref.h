// Reference (NCHW, any spatial rank) Conv, MaxPool and AveragePool: what runs
// when the layout pass leaves such a node in ONNX form (1-D/3-D inputs,
// weights computed at run time, MaxPool's Indices output, storage_order).
// nn.cc's ONNX-form OpDefs delegate to these; conv_ref.cc also registers
// ConvTranspose and LpPool, which only exist in this form.
#pragma once

#include "ops/op.h"

namespace fcb::ops {

// op is "Conv", "MaxPool", "AveragePool" or "LpPool" (taken from the context).
Status InferWindowRef(const InferContext& c, std::vector<TensorInfo>* outs);
Result<std::unique_ptr<Kernel>> CreateWindowRef(const CreateContext& c);

}  // namespace fcb::ops
