// Reference (NCHW, any spatial rank) Conv, MaxPool and AveragePool: what runs
// when the layout pass leaves such a node in ONNX form (1-D/3-D inputs,
// weights computed at run time, MaxPool's Indices output, storage_order).
// nn.cc's ONNX-form OpDefs delegate to these; conv_ref.cc also registers
// ConvTranspose and LpPool, which only exist in this form.
#pragma once

#include <string_view>
#include <vector>

#include "ops/op.h"

namespace fcb::ops {

// op is "Conv", "MaxPool", "AveragePool" or "LpPool" (taken from the context).
Status InferWindowRef(const InferContext& c, std::vector<TensorInfo>* outs);
Result<std::unique_ptr<Kernel>> CreateWindowRef(const CreateContext& c);

// The resolved geometry of a 2-D ConvTranspose (x NCHW [n, ic, ih, iw], w
// [ic, oc/group, kh, kw]) with its attributes: output_shape, auto_pad and
// output_padding folded into begin/end pads, which may be negative (an
// output_shape larger than the natural size pads the end).
struct ConvTranspose2d {
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pad_t, pad_l, pad_b, pad_r;  // output = s * (in - 1) + (k - 1) * d + 1 - pad_begin - pad_end
  int64_t oh, ow;
};
Result<ConvTranspose2d> ResolveConvTranspose2d(const Attrs& attrs, const ir::Shape& x, const ir::Shape& w);

// The geometry of a convolution of X [n, c, d_1..d_r] with W [m, c/group, k_1..k_r] for any
// spatial rank r in [1, 8], resolved from Conv's attributes (kernel_shape, strides, dilations,
// pads, auto_pad) exactly as the reference Conv resolves them; kernel_shape must match W.
// Per spatial dim: input size, kernel size, stride, dilation, begin/end padding, output size.
// Used by the integer convolutions (integer_quant.cc); `op` names the operator in messages.
struct ConvNdGeometry {
  int rank = 0;
  std::vector<int64_t> in, k, s, d, pad_begin, pad_end, out;
};
Result<ConvNdGeometry> ResolveConvNd(std::string_view op, const Attrs& attrs, const ir::Shape& x,
                                     const ir::Shape& w);

}  // namespace fcb::ops
