// Target-independent graph passes, run on an imported (fully shaped) graph
// before lowering. Each pass keeps the graph valid (ir::Graph::Validate), keeps
// graph input/output value names, and does not change results (except
// ExactQdqGlobalAveragePool, which makes them exact).
#pragma once

#include <set>
#include <string>

#include "fcb/status.h"
#include "ir/ir.h"
#include "ops/lowering.h"

namespace fcb::passes {

// Evaluates every node whose inputs are all constant (outputs up to 16 M
// elements) with ops::Evaluate; its outputs become constants and it is removed.
Status FoldConstants(ir::Graph& g, bool keep_weight_dequantize = false);

// Removes Identity, Dropout, and Reshape/Flatten that do not change the shape,
// rewiring consumers. A graph output keeps its value (and name): its producer
// writes it directly when that is possible, otherwise the node stays.
Status RemoveIdentities(ir::Graph& g);

// BatchNormalization whose input comes from Conv (constant W, optional
// constant B), Gemm (constant B, C) or 2-D MatMul (constant B) with no other
// use: scales the weights per output channel/column and folds the shift into
// the bias (computed in double, rounded once). MatMul becomes Gemm.
Status FoldBatchNorm(ir::Graph& g);

// An activation (Relu, Clip with constant bounds, Sigmoid, HardSigmoid,
// HardSwish, Tanh, LeakyRelu) after a producer that carries an epilogue in
// every form it runs in (an op with kTraitTakesActivation, such as Conv, or a
// Gemm/MatMul that GemmPacked's lowering always takes) whose output has no
// other use: sets the producer's fused activation (ops::SetNodeEpilogue),
// which then writes the activation's output value. Also SiLU as exported (Mul(x, Sigmoid(x)) where x
// has just those two uses) becomes the kSilu epilogue.
Status FuseActivations(ir::Graph& g);

// The decomposed layer normalization of opsets < 17 (ReduceMean, Sub,
// Pow(2) or Mul(d, d), ReduceMean, Add(eps), Sqrt, Div [, Mul(gamma)]
// [, Add(beta)] over the last axis, intermediates used only there) becomes
// one LayerNormalization node (fuse_layernorm.cc).
Status FuseLayerNorm(ir::Graph& g);

// GELU as written before opset 20, x/2 * (1 + Erf(x / sqrt(2))) in any of its
// associations (intermediates used only there), becomes one Gelu node
// (fuse_gelu.cc), which FuseActivations may then fold into a GEMM epilogue.
Status FuseGelu(ir::Graph& g);

// 1-D Conv / ConvTranspose (float32, constant weights) as 2-D ones of height
// 1 between an Unsqueeze and a Squeeze, so the layout pass gives them the
// NHWC kernels; consecutive ones stay 4-D between them (conv1d_as_2d.cc).
// Run by OptimizeGraph before AssignLayouts. With `quantized`, the same for
// 1-D ConvInteger and QLinearConv with constant 3-D int8/uint8 weights
// instead, so FuseQuantized gives them the int8 NHWC convolution (run by
// RunDefaultPasses just before it).
Status Conv1dAs2d(ir::Graph& g, bool quantized = false);

// MatMul(A, constant B [K, N]) + constant row bias [N] becomes Gemm(A, B, bias)
// (A of rank > 2 through Reshapes to [M, K] and back, which lowering makes
// views); an activation reading only the sum moves next to the Gemm so that
// FuseActivations folds it too (fuse_matmul_bias.cc).
Status FuseMatMulBias(ir::Graph& g);

// Removes nodes none of whose outputs is used, then every value no node or
// graph input/output refers to (compacting the value table and remapping ids).
Status EliminateDeadNodes(ir::Graph& g);

// DequantizeLinear -> GlobalAveragePool -> QuantizeLinear, all per tensor with
// constant float32 scales and zero points (what QDQ models such as PyTorch's
// and ONNX Runtime's quantizers write around a global pool), evaluated in
// integers the way ONNX Runtime's fused QLinearGlobalAveragePool does:
// acc = sum(x) - x_zero_point * n (int32, exact), then
// QuantizeLinear(float(acc) * m, 1, y_zero_point) with the float32 multiplier
// m = x_scale / (y_scale * n). The only pass that changes results, on
// purpose: the mean of n integers is often exactly halfway between two
// quantized values (2 of 64 channels in a typical 8x8 pool), where the float
// evaluation's summation error picks a side at random and the exact sum
// rounds half to even as the ONNX formula says. Rewritten into Cast,
// ReduceSum, Add, Cast, Mul and QuantizeLinear nodes; the
// DequantizeLinear is left for EliminateDeadNodes.
Status ExactQdqGlobalAveragePool(ir::Graph& g);

// Quantized patterns -> one int8 kernel node each (QConv / QConvNhwc):
// QLinearConv, QLinearMatMul; ConvInteger / MatMulInteger with constant
// weights, alone (int32 output) or followed by Cast(float) -> Mul(per-tensor
// or per-channel multiplier) [-> Add(constant bias)] [-> Relu/Clip] as
// dynamic quantization writes them; DequantizeLinear(activation) and
// DequantizeLinear(constant int8/uint8 weights, per-tensor or per-channel)
// -> Conv / MatMul / Gemm [-> Relu/Clip] [-> QuantizeLinear], the QDQ form.
// Weights must be constants; anything else keeps its ONNX nodes.
Status FuseQuantized(ir::Graph& g);

// MatMul(A, DequantizeLinear(constant int8/uint8 W)), W [K, N] or through a
// Transpose before or after the DequantizeLinear (W [N, K]), per-tensor or
// per-column (along N) scale and zero point: becomes com.microsoft.MatMulNBits
// (8 bits), which lowering packs into MatMulNBitsPacked, so the weight stays
// 8-bit (weight_only_matmul.cc). Taken when W has more than
// `fold_limit` elements (constant folding leaves it, so it would be
// dequantized every run), or when A has at most 2 rows (at the bound), where
// the 8-bit GEMV beats the float one; a smaller weight under more rows folds
// to float32, whose GEMM is faster there.
inline constexpr int64_t kWeightOnlyFoldLimit = int64_t{16} << 20;  // FoldConstants' kMaxFoldElements
Status WeightOnlyInt8MatMul(ir::Graph& g, int64_t fold_limit = kWeightOnlyFoldLimit);

// Precision "int8" (src/passes/quantize_int8.cc): every Conv (1-D or 2-D,
// any group), MatMul (A of rank >= 2) and Gemm (transA = 0) with a float32
// constant weight and a float32 input becomes ONNX Runtime's dynamic-
// quantization form: DynamicQuantizeLinear (one per distinct input value) ->
// ConvInteger / MatMulInteger (int8 weights quantized per output channel,
// symmetric, zero point 0) -> Cast(float) -> Mul(., Mul(x_scale, w_scale))
// [-> Add(., bias)]. Gemm's alpha is folded into the weights before
// quantizing, beta into C; transB is undone on the constant. The float
// weights are left unused for EliminateDeadNodes. Changes results (by the
// quantization error), on request.
Status QuantizeInt8(ir::Graph& g);

// Precision "int4" (src/passes/quantize_int4.cc, quantize_int4.h): weight-
// only. Every MatMul (A float32, B a float32 constant [K, N] or the
// Transpose of a constant [N, K]) and Gemm
// (transA = 0) becomes com.microsoft.MatMulNBits, 4 bits, block 32, symmetric,
// no zero points, accuracy_level 4 (or 0, see below); Gemm's C an Add after it. The LM head (a
// MatMul/Gemm whose output reaches a graph output through single-reader
// Reshape/Squeeze/Unsqueeze/Flatten/Identity/Add/Mul/Div/Tanh nodes) and
// embedding tables (Gather axis 0 of a float32 constant [V, H] by non-constant
// ids) at 8 bits, or 4 with `int4_head`; tables become GatherRowsNBits.
// Weights under kInt4MinElements elements, non-finite ones, and K > 2^16 stay
// float. Changes results (by the quantization error), on request.
inline constexpr int64_t kInt4MinElements = 1024;
// `float_activations`: accuracy_level 0 (float arithmetic) instead of 4
// (int8 activations per block, exact integer dot products).
Status QuantizeInt4(ir::Graph& g, bool int4_head = false, bool float_activations = false);

// The precision the graph passes compile for: fp32 (also bf16's graph),
// int8, or int4 with its head option.
struct GraphPrecision {
  ops::Precision precision = ops::Precision::kFp32;
  bool int4_head = false;
  bool int4_float_activations = false;  // int4_activations "float"
};

// Level 0: FoldConstants, RemoveIdentities, ExactQdqGlobalAveragePool, EliminateDeadNodes.
// Level >= 1: also FoldBatchNorm and FuseActivations, and QuantizeInt8 between
// them when quantize_int8 is set (precision "int8", which needs level >= 1).
// QuantizeInt4 in the same place for precision "int4" (level >= 1 too).
Status RunDefaultPasses(ir::Graph& g, int optimization_level, const GraphPrecision& precision);
inline Status RunDefaultPasses(ir::Graph& g, int optimization_level, bool quantize_int8 = false) {
  GraphPrecision p;
  if (quantize_int8) p.precision = ops::Precision::kInt8;
  return RunDefaultPasses(g, optimization_level, p);
}

// The whole pipeline the compiler runs (pipeline.cc, the one list of passes in
// order): RunDefaultPasses, Conv1dAs2d, AssignLayouts (passes/layout.h) and,
// at level >= 1, FuseResidualAdd (passes/fuse_residual.h); then validates.
Status OptimizeGraph(ir::Graph& g, int optimization_level, const GraphPrecision& precision);
inline Status OptimizeGraph(ir::Graph& g, int optimization_level, ops::Precision precision) {
  GraphPrecision p;
  p.precision = precision;
  return OptimizeGraph(g, optimization_level, p);
}

// A growing KV cache kept in place (fuse_kv_attention.cc; the compiler runs it
// after OptimizeGraph when the spec gives kv_capacity): Concat(past, new,
// axis 2) of a past input named in `past_inputs` becomes KvAppend {capacity};
// then scaled dot-product attention (MatMul, Transpose, scale, optional
// additive mask, Softmax(-1), MatMul, grouped KV heads repeated by
// Unsqueeze/Expand/Reshape) becomes one AttentionFused node: only where K and
// V are KvAppend outputs, or anywhere with `dense`. Counts what it rewrote.
Status FuseKvCacheAttention(ir::Graph& g, int64_t capacity, const std::set<std::string>& past_inputs, bool dense,
                            int* appends = nullptr, int* fused = nullptr);

}  // namespace fcb::passes
