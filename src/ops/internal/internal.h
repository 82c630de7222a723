// The internal operators' definitions, one file each under ops/internal/ (the
// list is FCB_INTERNAL_OPS in ops/names.h), and what the files of one family
// share. registry.cc adds every Define*() to the op registry.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernels.h"
#include "ops/conv_geom.h"
#include "ops/names.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/params.h"
#include "ops/quant_nodes.h"

namespace fcb::ops {

#define FCB_DECLARE_INTERNAL(name, def) OpDef def();
FCB_INTERNAL_OPS(FCB_DECLARE_INTERNAL)
#undef FCB_DECLARE_INTERNAL

namespace internal {

// ---- checks shared by every internal operator ------------------------------

// `what` of `op` must be float32 (op_util.h).
using ops::ExpectF32;
// Packed weights: float32, or bfloat16 for targets compiled with precision "bf16".
Status ExpectWeights(std::string_view op, const TensorInfo& t, const char* what);
// `t` must be the 1-D tensor of `floats` elements (a packed-size formula).
Status ExpectPacked(std::string_view op, const TensorInfo& t, const char* what, int64_t floats);
// An NHWC activation: float32, rank 4, every dim in [1, 2^31].
Status ExpectNhwc(std::string_view op, const TensorInfo& t, const char* what);
// Optional residual input `i`: absent, or float32 shaped like the output.
Result<bool> CheckResidual(std::string_view op, const std::vector<TensorInfo>& in, size_t i,
                           const ir::Shape& out);
// bf16 weights of input i widened to fp32 once, when the kernel is prepared
// at load (the file and the page cache hold half the bytes); empty for fp32.
Result<std::vector<float>> WidenIfBf16(std::string_view op, const CreateContext& c, size_t i);

// The operator's definition with the fields every internal operator sets.
OpDef LoweredOp(std::string_view name, int min_inputs, int max_inputs, InferFn infer, CreateFn create,
                ScratchFn scratch = nullptr);

// The explicit 2-D window of the window-based operators' parameters:
// kernel, strides, dilations, pads (top, left, bottom, right; at least
// `min_pad`, which is negative only for ConvTranspose's output_shape).
struct WindowParams {
  std::array<int64_t, 2> kernel{1, 1}, strides{1, 1}, dilations{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};
  template <typename V>
  void Fields(V& v, int64_t min_pad = 0) {
    v.Ints(attr::kKernelShape, kernel, 1, kMaxWindow);
    v.Ints(attr::kStrides, strides, 1, kMaxWindow);
    v.Ints(attr::kDilations, dilations, 1, kMaxWindow);
    v.Ints(attr::kPads, pads, min_pad, kMaxWindow);
  }
  // From an ONNX node's resolved window (ResolveWindow2d).
  void Set(const Window2d& w) {
    kernel = {w.kh, w.kw}, strides = {w.sh, w.sw}, dilations = {w.dh, w.dw};
    pads = {w.pad_t, w.pad_l, w.pad_b, w.pad_r};
  }
  // Its pads, extents and strides as OpDef::window_shape gives them.
  void ToWindowShape(WindowShape* w) const {
    for (size_t i = 0; i < 2; ++i) {
      w->pad_begin[i] = pads[i];
      w->pad_end[i] = pads[i + 2];
      w->extent[i] = (kernel[i] - 1) * dilations[i] + 1;
      w->stride[i] = strides[i];
    }
  }
};

// ---- the NHWC convolution family (ConvNhwc, ConvWinogradNhwc, ConvExpandDwNhwc)

// Parameters of an NHWC convolution, in graph nodes (made by the layout pass
// from ONNX Conv) and plan steps alike. `depthwise` says which packing the
// plan's weights have (PackDepthwise, else PackConv); graph nodes hold ONNX
// weights and depthwise 0.
struct ConvParams : WindowParams {
  // depthwise: the weights' packing: 0 PackConv, 1 PackDepthwise, 2 PackGroupedSmall.
  int64_t group = 1, out_channels = 1, depthwise = 0;
  kernels::Epilogue ep;
  template <typename V>
  void Fields(V& v) {
    WindowParams::Fields(v);
    v.Int(attr::kGroup, group, 1, kMaxChannels);
    v.Int(attr::kOutChannels, out_channels, 1, kMaxChannels);
    v.Int(attr::kDepthwise, depthwise, 0, 2);
    v.Epilogue(attr::kActivation, attr::kActivationAlpha, attr::kActivationBeta, ep);
  }
};

// The parameters of a conv step that can write its oc output channels into
// channels [offset, offset + oc) of each pixel of an output tensor of
// `channels` channels (ConvNhwc, ConvWinogradNhwc): ConvParams plus the
// optional out_channel_offset and out_pixel_channels, which the lowering
// sets when the step's output is a slice of a Concat's output
// (WriteChannelSlice, OpDef::write_channel_slice); absent, the output is the
// conv's own [n,oh,ow,oc].
struct SliceConvParams : ConvParams {
  std::optional<int64_t> out_channel_offset, out_pixel_channels;
  template <typename V>
  void Fields(V& v) {
    ConvParams::Fields(v);
    v.OptionalInt(attr::kOutChannelOffset, out_channel_offset);
    v.OptionalInt(attr::kOutPixelChannels, out_pixel_channels);
  }
};
struct OutputSlice {
  int64_t offset = 0, channels = 0;  // channels 0: no slice
};
// Validates the slice of a step with oc output channels.
Result<OutputSlice> DecodeOutputSlice(std::string_view op, const SliceConvParams& p, int64_t oc);
// Makes g write the slice: the output pixel stride becomes the slice's
// tensor's, the residual keeps its own dense stride (oc). The caller offsets
// the output pointer by s.offset.
void ApplyOutputSlice(const OutputSlice& s, kernels::ConvGeom* g);
// OpDef::write_channel_slice of the ops whose parameters P derive from
// SliceConvParams: sets the slice fields of step `s` and encodes P again
// (false, `s` unchanged, when it does not decode or already has a slice).
template <typename P>
bool WriteChannelSlice(format::StepDesc* s, int64_t offset, int64_t channels) {
  auto p = DecodeParams<P>(s->op, Attrs(s->attrs));
  if (!p.ok() || p.value().out_channel_offset || p.value().out_pixel_channels) return false;
  p.value().out_channel_offset = offset;
  p.value().out_pixel_channels = channels;
  s->attrs = EncodeParams(p.value());
  return true;
}

// The geometry of `p` on NHWC input x (validated: groups divide the
// channels, the window fits, the output's size is sane).
Result<kernels::ConvGeom> ConvGeometry(std::string_view op, const ConvParams& p, const TensorInfo& x);
// A conv kernel's geometry at a run (RunContext::shapes, where it adapts):
// `made`'s, its batch and sizes those of input 0 (NHWC, or NCHW where
// in_nchw) and output 0 (at shapes[n_inputs]) there.
inline kernels::ConvGeom ConvGeomAt(const RunContext& ctx, size_t n_inputs, const kernels::ConvGeom& made) {
  kernels::ConvGeom g = made;
  if (!ctx.shapes) return g;
  const std::span<const int64_t> x = ctx.shapes[0], y = ctx.shapes[n_inputs];
  g.n = x[0];
  g.ih = g.in_nchw ? x[2] : x[1];
  g.iw = g.in_nchw ? x[3] : x[2];
  g.oh = y[1];
  g.ow = y[2];
  return g;
}
// A convolution's arithmetic: 2 x N x OH x OW x OC x KH x KW x IC/groups
// (the direct form's, whatever algorithm runs it), for OpDef::flops.
uint64_t ConvFlops(const kernels::ConvGeom& g);

// Output rows (oh) and columns (ow) of a window over ih x iw, or an error.
Status WindowOutput(std::string_view op, int64_t ih, int64_t iw, const std::array<int64_t, 2>& k,
                    const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& d,
                    const std::array<int64_t, 4>& pads, bool ceil_mode, int64_t* oh, int64_t* ow);

// A graph conv node's constant operands and parameters: weights (fp32, rank
// 4), bias (null when absent); Unsupported when they are not constants.
struct ConvOperands {
  const ir::TensorData* w = nullptr;
  const ir::TensorData* b = nullptr;
  ConvParams p;
};
Result<ConvOperands> ConstConvOperands(const LowerContext& c, const ir::Node& n);

// The packed operands of a convolution step with geometry g: weights (fp32,
// or bf16 where `bf16_ok`) and bias of the sizes its packing gives, and the
// optional residual (input 3). Returns whether the residual is present.
Result<bool> CheckConvOperands(std::string_view op, const std::vector<TensorInfo>& in, const kernels::ConvGeom& g,
                               int64_t packed_w, int64_t packed_b, bool bf16_ok);

// The NHWC form of ONNX node `n` as a graph node of internal op `op`: input 0
// converted to NHWC, then `rest`; the same outputs (the layout rule sets the
// parameters and hands it to LayoutContext::EmitNhwc).
ir::Node NhwcNode(LayoutContext& c, const ir::Node& n, std::string_view op, std::vector<int> rest = {});

// Emits a convolution step of op `op` for graph node `n`: its input, the
// packed weights and bias, and its residual (input 3) when it has one.
void EmitConvStep(LowerContext& c, std::string_view op, const ir::Node& n, int32_t packed_w, int32_t packed_b,
                  std::vector<format::AttrDesc> params);

// A graph ConvNhwc node whose weights (4-D fp32) and bias (if any) are
// constants and which has no residual: its weights, else null.
const ir::TensorData* ConstConvWeights(const LowerContext& c, const ir::Node& n);

// ---- QConvNhwc (qconv_nhwc.cc, which documents the modes; made by passes/fuse_quantized.cc)

// The modes: ops/quant_nodes.h.
using ::fcb::ops::QConvMode;
using ::fcb::ops::kQInt32;
using ::fcb::ops::kQScaled;
using ::fcb::ops::kQMultiplier;
using ::fcb::ops::kQQdq;
using ::fcb::ops::kQLinear;

// The NHWC convolutions' parameters, whether the input is a matrix (rows of
// any leading shape, a 1x1 convolution over them) and the mode.
struct QConvParams : ConvParams {
  int64_t matrix = 0, mode = kQInt32;
  template <typename V>
  void Fields(V& v) {
    ConvParams::Fields(v);
    v.Int(attr::kMatrix, matrix, 0, 1);
    v.Int(attr::kQuantMode, mode, 0, kQLinear);
  }
};

// ---- ConvTransposeNhwc (conv_transpose_nhwc.cc)

// ONNX ConvTranspose weights [ic][ocg][kh][kw] -> the packed layout the
// kernel reads (see conv_transpose_nhwc.cc); groups * ceil(ocg/16) * kh * kw
// * 16 * (ic / groups) floats.
std::vector<float> PackConvTranspose(const float* w, int64_t ic, int64_t ocg, int64_t kh, int64_t kw,
                                     int64_t groups);

}  // namespace internal
}  // namespace fcb::ops
