// Target-independent graph passes, run on an imported (fully shaped) graph
// before lowering. Each pass keeps the graph valid (ir::Graph::Validate), keeps
// graph input/output value names, and does not change results.
#pragma once

#include "fcb/status.h"
#include "ir/ir.h"

namespace fcb::passes {

// Evaluates every node whose inputs are all constant (outputs up to 16 M
// elements) with ops::Evaluate; its outputs become constants and it is removed.
Status FoldConstants(ir::Graph& g);

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

// Removes nodes none of whose outputs is used, then every value no node or
// graph input/output refers to (compacting the value table and remapping ids).
Status EliminateDeadNodes(ir::Graph& g);

// Level 0: FoldConstants, RemoveIdentities, EliminateDeadNodes.
// Level >= 1: also FoldBatchNorm and FuseActivations.
Status RunDefaultPasses(ir::Graph& g, int optimization_level);

}  // namespace fcb::passes
