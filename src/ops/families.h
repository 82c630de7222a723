// Registration hooks of the op families (one file each), called by registry.cc.
#pragma once

#include <vector>

#include "ops/op.h"

namespace fcb::ops {

void RegisterElementwiseOps(std::vector<OpDef>* ops);  // elementwise.cc: unary, binary (broadcast), compare, logic, Where, Cast
void RegisterTensorOps(std::vector<OpDef>* ops);       // tensor.cc: Reshape, Transpose, Concat, Gather, Slice, Shape, ...
void RegisterReduceOps(std::vector<OpDef>* ops);       // reduce.cc: Reduce*, Softmax, ArgMax, ...
void RegisterMatMulOps(std::vector<OpDef>* ops);       // matmul.cc: MatMul, Gemm (variable operands)
void RegisterNnOps(std::vector<OpDef>* ops);           // nn.cc: Conv, pools, BatchNormalization (ONNX forms)
// The internal operators register through FCB_INTERNAL_OPS (ops/names.h).

// Sub-families, called from the family hooks above (ops engineer's files).
void RegisterUnaryOps(std::vector<OpDef>* ops);        // unary.cc: unary math, Clip, Cast, Identity, Dropout (from elementwise)
void RegisterTransposeOps(std::vector<OpDef>* ops);    // transpose.cc: Transpose (from tensor)
void RegisterCopyOps(std::vector<OpDef>* ops);         // copy_ops.cc: Concat, Split, Gather, Slice (from tensor)
void RegisterPadTileOps(std::vector<OpDef>* ops);      // pad_tile.cc: Pad, Tile, Expand, Trilu (from tensor)
void RegisterSoftmaxOps(std::vector<OpDef>* ops);      // softmax.cc: Softmax, LogSoftmax (from reduce)
void RegisterLayerNormOps(std::vector<OpDef>* ops);    // layernorm.cc: LayerNormalization (from matmul)

// Conformance coverage (one file each; conformance engineer's files).
void RegisterActivationExtraOps(std::vector<OpDef>* ops);  // activations_extra.cc: PRelu, Celu, Mish, ThresholdedRelu, Shrink, trig, IsNaN, IsInf
void RegisterRecurrentOps(std::vector<OpDef>* ops);       // recurrent.cc: RNN, GRU, LSTM
void RegisterScanOneHotOps(std::vector<OpDef>* ops);       // scan_onehot.cc: CumSum, OneHot
void RegisterGatherScatterOps(std::vector<OpDef>* ops);    // gather_scatter.cc: GatherElements, GatherND, ScatterElements, ScatterND
void RegisterSpaceDepthOps(std::vector<OpDef>* ops);       // space_depth.cc: DepthToSpace, SpaceToDepth
void RegisterNormOps(std::vector<OpDef>* ops);             // norm.cc: InstanceNormalization, GroupNormalization, LRN
void RegisterConvRefOps(std::vector<OpDef>* ops);          // conv_ref.cc: ConvTranspose, LpPool (+ reference Conv/pools for nn.cc)
void RegisterResizeOps(std::vector<OpDef>* ops);           // resize.cc: Resize, Upsample
void RegisterEinsumOps(std::vector<OpDef>* ops);           // einsum.cc: Einsum
void RegisterTopKHardmaxOps(std::vector<OpDef>* ops);      // topk_hardmax.cc: TopK, Hardmax
void RegisterQuantizeLinearOps(std::vector<OpDef>* ops);   // quantize_linear.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void RegisterIntegerQuantOps(std::vector<OpDef>* ops);     // integer_quant.cc: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv
void RegisterTensorExtraOps(std::vector<OpDef>* ops);      // tensor_extra.cc: EyeLike, ReverseSequence, MaxUnpool, Det, MeanVarianceNormalization
void RegisterSamplingOps(std::vector<OpDef>* ops);         // sampling.cc: GridSample, RoiAlign
void RegisterRandomOps(std::vector<OpDef>* ops);           // random.cc: Bernoulli, RandomUniform(Like), RandomNormal(Like)
void RegisterDataShapeOps(std::vector<OpDef>* ops);        // data_shape.cc: Compress, NonZero, Unique (shape-deciding input constant)
void RegisterSignalOps(std::vector<OpDef>* ops);           // signal.cc: DFT, STFT, Hann/Hamming/BlackmanWindow, MelWeightMatrix
void RegisterControlFlowOps(std::vector<OpDef>* ops);      // control_flow.cc: If, Loop, Scan (expanded at import, never steps)

}  // namespace fcb::ops
