// The whole pass order, in one place: the graph passes (what each
// optimization level enables), then layout assignment and the passes that
// work on NHWC graphs. The compiler runs OptimizeGraph; tests may stop after
// the graph passes (RunDefaultPasses).
#include "passes/fuse_residual.h"
#include "passes/layout.h"
#include "passes/passes.h"

namespace fcb::passes {
Status RunDefaultPasses(ir::Graph& g, int optimization_level, const GraphPrecision& precision) {
  const bool quantize_int8 = precision.precision == ops::Precision::kInt8;
  const bool quantize_int4 = precision.precision == ops::Precision::kInt4;
  if ((quantize_int8 || quantize_int4) && optimization_level < 1)
    return InvalidArgument(std::string("precision ") + ops::PrecisionName(precision.precision) +
                           " needs optimization_level 1 or higher");
  // Dequantized int8 weights stay int8 until FuseQuantized has seen them.
  FCB_RETURN_IF_ERROR(FoldConstants(g, optimization_level >= 1).Annotate("constant folding"));
  FCB_RETURN_IF_ERROR(RemoveIdentities(g).Annotate("removing identities"));
  // At every level: it is about exactness, not speed.
  FCB_RETURN_IF_ERROR(ExactQdqGlobalAveragePool(g).Annotate("exact quantized global average pool"));
  if (optimization_level >= 1) {
    // BN first: it needs the producer before an activation is fused into it.
    FCB_RETURN_IF_ERROR(FoldBatchNorm(g).Annotate("folding BatchNormalization"));
    // After BN folding (the folded weights are the ones quantized), before
    // activation fusion (which would hide a Conv's Relu inside the float op).
    if (quantize_int8) FCB_RETURN_IF_ERROR(QuantizeInt8(g).Annotate("quantizing to int8"));
    // Before FuseMatMulBias (which would hide a MatMul inside a Gemm) and
    // FuseActivations (which would hide it behind an epilogue).
    if (quantize_int4)
      FCB_RETURN_IF_ERROR(QuantizeInt4(g, precision.int4_head, precision.int4_float_activations).Annotate("quantizing weights to int4"));
    FCB_RETURN_IF_ERROR(FuseLayerNorm(g).Annotate("fusing layer normalization"));
    FCB_RETURN_IF_ERROR(FuseGelu(g).Annotate("fusing GELU"));
    FCB_RETURN_IF_ERROR(FuseMatMulBias(g).Annotate("fusing MatMul bias"));
    FCB_RETURN_IF_ERROR(FuseActivations(g).Annotate("fusing activations"));
    FCB_RETURN_IF_ERROR(Conv1dAs2d(g, /*quantized=*/true).Annotate("quantized 1-D convolutions as 2-D"));
    FCB_RETURN_IF_ERROR(FuseQuantized(g).Annotate("fusing quantized operators"));
    // After FuseQuantized (which takes QDQ MatMuls whole), before the folding
    // that turns the remaining dequantized weights into float32.
    FCB_RETURN_IF_ERROR(WeightOnlyInt8MatMul(g).Annotate("weight-only int8 MatMul"));
    FCB_RETURN_IF_ERROR(FoldConstants(g).Annotate("constant folding"));
  }
  FCB_RETURN_IF_ERROR(EliminateDeadNodes(g).Annotate("dead node elimination"));
  return g.Validate().Annotate("after graph passes");
}

Status OptimizeGraph(ir::Graph& g, int optimization_level, const GraphPrecision& precision) {
  FCB_RETURN_IF_ERROR(RunDefaultPasses(g, optimization_level, precision));
  // Scaled dot-product attention written out (MatMul, Softmax, MatMul) as one
  // step over dense K and V (a cache kept in place was fused before).
  if (optimization_level >= 1)
    FCB_RETURN_IF_ERROR(FuseKvCacheAttention(g, 0, {}, true).Annotate("fusing attention"));
  // Layout: 1-D convolutions first become 2-D ones, which the NHWC forms take.
  FCB_RETURN_IF_ERROR(Conv1dAs2d(g).Annotate("1-D convolutions as 2-D"));
  FCB_RETURN_IF_ERROR(AssignLayouts(g));
  // On NHWC convolutions: a residual Add folds into the conv that feeds it.
  if (optimization_level >= 1) FCB_RETURN_IF_ERROR(FuseResidualAdd(g));
  return g.Validate();
}

}  // namespace fcb::passes
