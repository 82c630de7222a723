// RunDefaultPasses: the pass order and what each optimization level enables.
#include "passes/passes.h"

namespace fcb::passes {

Status RunDefaultPasses(ir::Graph& g, int optimization_level, bool quantize_int8) {
  if (quantize_int8 && optimization_level < 1)
    return InvalidArgument("precision int8 needs optimization_level 1 or higher");
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
    FCB_RETURN_IF_ERROR(FuseLayerNorm(g).Annotate("fusing layer normalization"));
    FCB_RETURN_IF_ERROR(FuseGelu(g).Annotate("fusing GELU"));
    FCB_RETURN_IF_ERROR(FuseMatMulBias(g).Annotate("fusing MatMul bias"));
    FCB_RETURN_IF_ERROR(FuseActivations(g).Annotate("fusing activations"));
    FCB_RETURN_IF_ERROR(FuseQuantized(g).Annotate("fusing quantized operators"));
    FCB_RETURN_IF_ERROR(FoldConstants(g).Annotate("constant folding"));
  }
  FCB_RETURN_IF_ERROR(EliminateDeadNodes(g).Annotate("dead node elimination"));
  return g.Validate().Annotate("after graph passes");
}

}  // namespace fcb::passes
