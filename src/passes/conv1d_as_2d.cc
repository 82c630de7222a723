// Conv1dAs2d: 1-D Conv and ConvTranspose become 2-D ones of height 1, so the
// layout pass gives them the NHWC kernels (packed GEMM, depthwise, col2im)
// that 2-D convolutions have, instead of the reference kernel.
//
//   Y = Conv(X [N,C,W], W [M,C/g,k], B)
// becomes
//   X4 = Unsqueeze(X, axes=[2])                 [N,C,1,W]
//   Y4 = Conv(X4, W4 [M,C/g,1,k], B)            kernel [1,k], strides [1,s],
//                                               dilations [1,d], pads [0,b,0,e]
//   Y  = Squeeze(Y4, axes=[2])                  the original value and name
// (ConvTranspose alike, with output_padding [0,p] and output_shape [1,L]).
// W4 is the same bytes as W. When X is itself the Squeeze of such a rewrite,
// the convolution reads the 4-D value directly, so a chain of 1-D
// convolutions stays 4-D (and NHWC) between them; Squeezes left without a
// reader are removed. Only float32 convolutions with constant weights (and
// bias) are rewritten: the ones the NHWC forms take.
//
// Quantized form (`quantized`, run before FuseQuantized): ConvInteger(X, W,
// x_zero_point, w_zero_point) and QLinearConv(X, xs, xz, W, ws, wz, ys, yz,
// B) with X int8/uint8 [N,C,W] and W a constant int8/uint8 [M,C/g,k] are
// rewritten the same way (W at input 1 or 3; zero points, scales and the
// int32 bias are per output channel or per tensor, unchanged by the new
// axis), so FuseQuantized takes them into the int8 NHWC convolution
// (QConvNhwc) as it takes 2-D ones: e.g. Whisper's two int8 1-D front-end
// convolutions, which the reference ConvInteger kernel ran ~200x slower.
#include <map>

#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

// A per-axis attribute of the 1-D form in its 2-D form: `fill` for the new
// height axis (pads: [b, e] -> [fill, b, fill, e]).
void WidenInts(ir::Node& n, const char* attr, int64_t fill, bool pads) {
  if (!n.Has(attr)) return;
  std::vector<int64_t> v = n.GetInts(attr);
  if (pads && v.size() == 2) v = {fill, v[0], fill, v[1]};
  else if (!pads && v.size() == 1) v = {fill, v[0]};
  n.SetInts(attr, v);
}

bool IsQuantized(ir::DType t) { return t == ir::DType::kU8 || t == ir::DType::kI8; }

// The weight's input position when `n` is rewritten in this form, else -1.
int RewritableWeight(const ir::Graph& g, const ir::Node& n, bool quantized) {
  if (!n.domain.empty()) return -1;
  int wi;
  if (quantized) {
    if (n.op_type == "ConvInteger") wi = 1;
    else if (n.op_type == "QLinearConv") wi = 3;
    else return -1;
  } else {
    if (n.op_type != "Conv" && n.op_type != "ConvTranspose") return -1;
    wi = 1;
  }
  if (static_cast<int>(n.inputs.size()) <= wi || n.inputs[0] < 0 || n.inputs[wi] < 0 || n.outputs.size() != 1)
    return -1;
  const ir::Value& x = g.values[n.inputs[0]];
  const ir::Value& w = g.values[n.inputs[wi]];
  const bool dtypes_ok = quantized ? IsQuantized(x.dtype) && IsQuantized(w.dtype)
                                   : x.dtype == ir::DType::kF32 && w.dtype == ir::DType::kF32;
  if (x.is_constant() || !dtypes_ok || x.shape.size() != 3) return -1;
  if (!w.is_constant() || w.shape.size() != 3) return -1;
  // Every other operand (bias, scales, zero points) a constant or, for the
  // quantized forms, a per-tensor run-time value (a dynamic quantization's
  // scale and zero point): none has a spatial axis.
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (static_cast<int>(i) == wi || n.inputs[i] < 0) continue;
    const ir::Value& v = g.values[n.inputs[i]];
    if (!v.is_constant() && !(quantized && v.shape.size() <= 1)) return -1;
  }
  return g.values[n.outputs[0]].shape.size() == 3 ? wi : -1;
}

}  // namespace

Status Conv1dAs2d(ir::Graph& g, bool quantized) {
  bool any = false;
  for (const auto& n : g.nodes) any = any || RewritableWeight(g, n, quantized) >= 0;
  if (!any) return Status::Ok();
  const int axes = g.AddConstant(g.UniqueName("conv1d_axes"), ir::TensorData::FromInts({1}, {2}));
  std::map<int, int> squeezed_from;  // 3-D value -> the 4-D value it is a Squeeze of
  std::vector<ir::Node> out;
  out.reserve(g.nodes.size() + 8);
  // An Unsqueeze or Squeeze of axis 2 (the height of the 2-D form).
  auto reshape = [&](const std::string& name, const char* op, int from, int to) {
    ir::Node r;
    r.name = g.UniqueName(name);
    r.op_type = op;
    r.inputs = {from, axes};
    r.outputs = {to};
    return r;
  };
  for (ir::Node& n : g.nodes) {
    const int wi = RewritableWeight(g, n, quantized);
    if (wi < 0) {
      out.push_back(std::move(n));
      continue;
    }
    const int x = n.inputs[0], y = n.outputs[0];
    int x4;
    if (auto it = squeezed_from.find(x); it != squeezed_from.end()) {
      x4 = it->second;
    } else {
      const ir::Shape& xs = g.values[x].shape;
      x4 = NewValue(g, g.values[x].name + "/as_2d", g.values[x].dtype, {xs[0], xs[1], 1, xs[2]});
      out.push_back(reshape(n.name + "/unsqueeze", "Unsqueeze", x, x4));
    }
    const ir::TensorData& w = *g.values[n.inputs[wi]].constant;
    auto w4 = std::make_shared<ir::TensorData>(w);
    w4->shape = {w.shape[0], w.shape[1], 1, w.shape[2]};
    const int w4_id = g.AddConstant(g.UniqueName(g.values[n.inputs[wi]].name + "/as_2d"), std::move(w4));
    const ir::Shape& ys = g.values[y].shape;
    const int y4 = NewValue(g, g.values[y].name + "/as_2d", g.values[y].dtype, {ys[0], ys[1], 1, ys[2]});
    n.inputs[0] = x4;
    n.inputs[wi] = w4_id;
    n.outputs[0] = y4;
    WidenInts(n, "kernel_shape", 1, false);
    WidenInts(n, "strides", 1, false);
    WidenInts(n, "dilations", 1, false);
    WidenInts(n, "output_padding", 0, false);
    WidenInts(n, "output_shape", 1, false);
    WidenInts(n, "pads", 0, true);
    ir::Node s = reshape(n.name + "/squeeze", "Squeeze", y4, y);
    out.push_back(std::move(n));
    out.push_back(std::move(s));
    squeezed_from[y] = y4;
  }
  g.nodes = std::move(out);
  // Squeezes whose only readers were rewritten convolutions.
  const ir::UseIndex index(g);
  std::vector<bool> erase(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    erase[i] = n.op_type == "Squeeze" && n.outputs.size() == 1 && squeezed_from.count(n.outputs[0]) &&
               index.Uses(n.outputs[0]) == 0;
  }
  EraseNodes(g, erase);
  return g.Validate();
}

}  // namespace fcb::passes
