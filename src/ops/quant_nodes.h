// Graph nodes of the fused quantized operators, made by
// passes/fuse_quantized.cc and defined by the operators' own files
// (ops/internal/qconv_nhwc.cc, ops/internal/qlookup.cc), so that the pass
// needs no internal header: the attributes each node carries are its op's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "kernels/kernels.h"

namespace fcb::ops {

// How a quantized convolution's int32 sums become its output (the modes are
// documented in ops/internal/qconv_nhwc.cc).
enum QConvMode : int64_t { kQInt32 = 0, kQScaled = 1, kQMultiplier = 2, kQQdq = 3, kQLinear = 4 };

// A graph QConv node (a quantized convolution in ONNX layout, which the
// layout pass makes QConvNhwc) in place of ONNX conv node `from`: its window
// attributes, `mode` and fused activation `ep`; inputs as QConvNhwc's.
ir::Node MakeQConvNode(const ir::Node& from, QConvMode mode, std::vector<int> inputs, int output,
                       const kernels::Epilogue& ep);

// A graph QConvNhwc node computing the matrix product of node `from` as a 1x1
// convolution over the rows of its input, with `columns` output columns.
ir::Node MakeQMatMulNode(const ir::Node& from, QConvMode mode, std::vector<int> inputs, int output,
                         int64_t columns, const kernels::Epilogue& ep);

// A graph QLookup node named `name`: output = table[x] (a constant [256]
// table of the output's type).
ir::Node MakeQLookupNode(const std::string& name, int x, int table, int output);

}  // namespace fcb::ops
