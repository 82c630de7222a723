// The names of fcb's internal operators and of the attributes that encode
// their parameters in a plan: the one place either is spelled.
//
// Internal operators are what lowering emits (and, for the NHWC conv and pool
// forms, what the layout pass creates): they are not ONNX operators and a
// model cannot name them. Each has one home under ops/internal/ (see
// docs/adding-an-operator.md); FCB_INTERNAL_OPS is the list of them, and adding
// an operator adds one line here.
//
// X(Name, definition function): the definition function is declared by
// ops/internal/internal.h and defined in the operator's own file.
#pragma once

#include <cstdint>
#include <string_view>

#define FCB_INTERNAL_OPS(X)                          \
  X(ConvNhwc, DefineConvNhwc)                       \
  X(ConvWinogradNhwc, DefineConvWinogradNhwc)       \
  X(ConvExpandDwNhwc, DefineConvExpandDwNhwc)       \
  X(GemmPacked, DefineGemmPacked)                   \
  X(MaxPoolNhwc, DefineMaxPoolNhwc)                 \
  X(AvgPoolNhwc, DefineAvgPoolNhwc)                 \
  X(GlobalAvgPoolNhwc, DefineGlobalAvgPoolNhwc)     \
  X(ConvTransposeNhwc, DefineConvTransposeNhwc)     \
  X(ResizeNhwc, DefineResizeNhwc)                   \
  X(QConv, DefineQConv)                             \
  X(QConvNhwc, DefineQConvNhwc)                     \
  X(QLookup, DefineQLookup)                         \
  X(MatMulNBitsPacked, DefineMatMulNBitsPacked)     \
  X(GatherRowsNBits, DefineGatherRowsNBits)         \
  X(KvAppend, DefineKvAppend)                       \
  X(AttentionFused, DefineAttentionFused)

// Attributes of internal operators: X(constant, "spelling", internal_only).
// internal_only: not also an ONNX attribute name (tests/names_test.cc checks
// that no source file but this one spells those as string literals).
#define FCB_PLAN_ATTRS(X)                                      \
  X(kKernelShape, "kernel_shape", false)                       \
  X(kStrides, "strides", false)                                \
  X(kDilations, "dilations", false)                            \
  X(kPads, "pads", false)                                      \
  X(kGroup, "group", false)                                    \
  X(kCeilMode, "ceil_mode", false)                             \
  X(kCountIncludePad, "count_include_pad", false)              \
  X(kOutputPadding, "output_padding", false)                   \
  X(kOutChannels, "out_channels", true)                        \
  X(kDepthwise, "depthwise", true)                             \
  X(kColumns, "columns", true)                                 \
  X(kActivation, "activation", true)                           \
  /* also ONNX attributes of RNN, GRU and LSTM: */             \
  X(kActivationAlpha, "activation_alpha", false)               \
  X(kActivationBeta, "activation_beta", false)                 \
  X(kExpandActivation, "expand_activation", true)              \
  X(kExpandActivationAlpha, "expand_activation_alpha", true)   \
  X(kExpandActivationBeta, "expand_activation_beta", true)     \
  X(kMatrix, "matrix", true)                                   \
  X(kQuantMode, "quant_mode", true)                            \
  X(kOutChannelOffset, "out_channel_offset", true)             \
  X(kOutPixelChannels, "out_pixel_channels", true)            \
  X(kInputNchw, "input_nchw", true)                            \
  /* also attributes of com.microsoft MatMulNBits: */          \
  X(kBits, "bits", false)                                      \
  X(kBlockSize, "block_size", false)                           \
  X(kAccuracyLevel, "accuracy_level", false)                   \
  /* KvAppend / AttentionFused (a state-bound KV cache): */    \
  X(kRowCapacity, "row_capacity", true)                        \
  X(kScale, "scale", false)

namespace fcb::ops {

// Version of the plan encoding: the internal operators above, their
// parameters (FCB_PLAN_ATTRS and each operator's Params) and the packed
// weight layouts (kernels/packing.h). Bump it with any change an older
// runtime would misread; the loader refuses plans of another version with an
// error naming both (an older fcb a newer plan, a newer fcb an older one).
//   0: files written before plan versions were recorded (refused)
//   2: typed operator parameters (GemmPacked "columns"), per-thread scratch
//   3: QConvNhwc (int8 panels, kernels/int8.h), QLookup
//   4: the GELU activation (kernels::Act::kGelu) in epilogues
//   5: ConvNhwc depthwise = 2, the small-group packing (PackGroupedSmall)
//   6: ConvNhwc / ConvWinogradNhwc output channel slices (out_channel_offset,
//      out_pixel_channels): a Concat's producers write into its output
//   7: ConvNhwc input_nchw: a few-channel conv reads an NCHW input directly
//   8: dimensions chosen at each run (Context.symbols, input_symbols). A file
//      is written as version 8 only when a method has them: a plan of fixed
//      shapes is still version 7, and this runtime reads both.
//   9: state kept between runs (Context.state: a past input and its present
//      output as one buffer). Written only when a method has state: other
//      files stay version 7 or 8, and this runtime reads all three.
inline constexpr uint32_t kPlanVersion = 9;
inline constexpr uint32_t kPlanVersionSymbols = 8;      // a file with symbols but no state
inline constexpr uint32_t kPlanVersionFixedShapes = 7;  // what a file without symbols or state is written as

// Operator domains. The registry names an operator of the default ONNX domain
// ("" or "ai.onnx") by its op_type, and one of another domain fcb implements
// by "<domain>.<op_type>" (RegistryName, ops/op.h): ONNX op types contain no
// '.', so ONNX Runtime's com.microsoft Gelu ("com.microsoft.Gelu") never
// collides with ONNX's own Gelu, and a plan step records the qualified name.
namespace domain {
inline constexpr std::string_view kMicrosoft = "com.microsoft";
}  // namespace domain

namespace opname {
#define FCB_OPNAME(name, def) inline constexpr std::string_view name = #name;
FCB_INTERNAL_OPS(FCB_OPNAME)
#undef FCB_OPNAME
}  // namespace opname

namespace attr {
#define FCB_ATTRNAME(id, spelling, internal) inline constexpr std::string_view id = spelling;
FCB_PLAN_ATTRS(FCB_ATTRNAME)
#undef FCB_ATTRNAME
}  // namespace attr

}  // namespace fcb::ops
