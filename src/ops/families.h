// Registration hooks of the op families (one file each), called by registry.cc.
#pragma once

#include <vector>

#include "ops/op.h"

namespace fcb::ops {

void RegisterElementwiseOps(std::vector<OpDef>* ops);  // elementwise.cc: unary, binary (broadcast), compare, logic, Where, Cast
void RegisterTensorOps(std::vector<OpDef>* ops);       // tensor.cc: Reshape, Transpose, Concat, Gather, Slice, Shape, ...
void RegisterReduceOps(std::vector<OpDef>* ops);       // reduce.cc: Reduce*, Softmax, ArgMax, ...
void RegisterMatMulOps(std::vector<OpDef>* ops);       // matmul.cc: MatMul, Gemm (variable operands)
void RegisterNnOps(std::vector<OpDef>* ops);           // nn.cc: Conv, pools, BatchNormalization and their NHWC/packed forms

}  // namespace fcb::ops
