// FuseResidualAdd: folds a residual connection into the convolution that
// produces one of its operands.
//
//   y = ConvNhwc(x, W, B)            (no activation)
//   z = Add(y, r)  [z = Relu(z)]     (same shape, no broadcast)
// becomes
//   z = ConvNhwc(x, W, B, r) with activation Relu when the Relu was there,
// since the kernels compute act(conv + bias + residual) in their epilogue. The
// sum then costs no extra pass over memory. Runs after AssignLayouts (it
// matches the NHWC forms); y must have no other use and not be a graph output.
#pragma once

#include "fcb/status.h"
#include "ir/ir.h"

namespace fcb::passes {

Status FuseResidualAdd(ir::Graph& g);

}  // namespace fcb::passes
