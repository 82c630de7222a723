// Registration hooks of the ONNX operator families, one file each, grouped by
// what the operators do. registry.cc calls every hook once; the internal
// operators register through FCB_INTERNAL_OPS (ops/names.h).
#pragma once

#include <vector>

#include "ops/op.h"

namespace fcb::ops {

// Elementwise math and activations.
void RegisterElementwiseOps(std::vector<OpDef>* ops);      // elementwise.cc: binary (broadcast), compare, logic, variadic Max/Min/Sum/Mean, Where
void RegisterUnaryOps(std::vector<OpDef>* ops);            // unary.cc: unary math, Clip, Cast, Identity, Dropout
void RegisterActivationExtraOps(std::vector<OpDef>* ops);  // activations_extra.cc: PRelu, Celu, Mish, ThresholdedRelu, Shrink, trig, IsNaN, IsInf

// Shapes, layout and data movement.
void RegisterTensorOps(std::vector<OpDef>* ops);           // tensor.cc: Reshape, Flatten, (Un)Squeeze, Shape, Size, ConstantOfShape, Range
void RegisterTransposeOps(std::vector<OpDef>* ops);        // transpose.cc: Transpose
void RegisterCopyOps(std::vector<OpDef>* ops);             // copy_ops.cc: Concat, Split, Gather, Slice
void RegisterPadTileOps(std::vector<OpDef>* ops);          // pad_tile.cc: Pad, Tile, Expand, Trilu
void RegisterGatherScatterOps(std::vector<OpDef>* ops);    // gather_scatter.cc: GatherElements, GatherND, ScatterElements, ScatterND
void RegisterSpaceDepthOps(std::vector<OpDef>* ops);       // space_depth.cc: DepthToSpace, SpaceToDepth
void RegisterTensorExtraOps(std::vector<OpDef>* ops);      // tensor_extra.cc: EyeLike, ReverseSequence, MaxUnpool, Det, MeanVarianceNormalization
void RegisterDataShapeOps(std::vector<OpDef>* ops);        // data_shape.cc: Compress, NonZero, Unique (shape-deciding input constant)

// Reductions, normalization, selection.
void RegisterReduceOps(std::vector<OpDef>* ops);           // reduce.cc: Reduce*, ArgMax, ArgMin
void RegisterSoftmaxOps(std::vector<OpDef>* ops);          // softmax.cc: Softmax, LogSoftmax
void RegisterLayerNormOps(std::vector<OpDef>* ops);        // layernorm.cc: LayerNormalization
void RegisterNormOps(std::vector<OpDef>* ops);             // norm.cc: InstanceNormalization, GroupNormalization, LRN
void RegisterTopKHardmaxOps(std::vector<OpDef>* ops);      // topk_hardmax.cc: TopK, Hardmax
void RegisterScanOneHotOps(std::vector<OpDef>* ops);       // scan_onehot.cc: CumSum, OneHot

// Products, convolutions, pooling, recurrences.
void RegisterMatMulOps(std::vector<OpDef>* ops);           // matmul.cc: MatMul, Gemm (variable operands)
void RegisterEinsumOps(std::vector<OpDef>* ops);           // einsum.cc: Einsum
void RegisterNnOps(std::vector<OpDef>* ops);               // nn.cc: Conv, pools, BatchNormalization (ONNX forms)
void RegisterConvRefOps(std::vector<OpDef>* ops);          // conv_ref.cc: ConvTranspose, LpPool (+ reference Conv/pools for nn.cc)
void RegisterRecurrentOps(std::vector<OpDef>* ops);        // recurrent.cc: RNN, GRU, LSTM

// Quantization.
void RegisterQuantizeLinearOps(std::vector<OpDef>* ops);   // quantize_linear.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void RegisterIntegerQuantOps(std::vector<OpDef>* ops);     // integer_quant.cc: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv

// Images, signals, random numbers.
void RegisterResizeOps(std::vector<OpDef>* ops);           // resize.cc: Resize, Upsample
void RegisterSamplingOps(std::vector<OpDef>* ops);         // sampling.cc: GridSample, RoiAlign
void RegisterSignalOps(std::vector<OpDef>* ops);           // signal.cc: DFT, STFT, Hann/Hamming/BlackmanWindow, MelWeightMatrix
void RegisterRandomOps(std::vector<OpDef>* ops);           // random.cc: Bernoulli, RandomUniform(Like), RandomNormal(Like)

// Control flow.
void RegisterControlFlowOps(std::vector<OpDef>* ops);      // control_flow.cc: If, Loop, Scan (expanded at import, never steps)

// ONNX Runtime's transformer operators (its exporters and transformer
// optimizer write them): com.microsoft ones are registered as
// "com.microsoft.<Op>" (RegistryName in op.h).
void RegisterTransformerNormOps(std::vector<OpDef>* ops);        // transformer_norm.cc: SimplifiedLayerNormalization (ORT's default-domain RMSNorm), com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization
void RegisterTransformerActivationOps(std::vector<OpDef>* ops);  // transformer_activations.cc: com.microsoft Gelu, FastGelu, BiasGelu, QuickGelu
void RegisterRotaryOps(std::vector<OpDef>* ops);                 // rotary.cc: com.microsoft RotaryEmbedding
void RegisterAttentionContribOps(std::vector<OpDef>* ops);       // attention_contrib.cc: com.microsoft GroupQueryAttention, MultiHeadAttention
void RegisterMatMulNBitsOps(std::vector<OpDef>* ops);            // matmul_nbits.cc: com.microsoft MatMulNBits (4/8-bit block-quantized weights)

}  // namespace fcb::ops
