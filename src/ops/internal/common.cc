// Checks and helpers shared by the internal operators (ops/internal/internal.h).
#include <cstring>

#include "core/half.h"
#include "ops/conv_geom.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops::internal {

OpDef LoweredOp(std::string_view name, int min_inputs, int max_inputs, InferFn infer, CreateFn create,
                ScratchFn scratch) {
  OpDef d;
  d.name = std::string(name);
  d.internal = true;
  d.min_inputs = min_inputs, d.max_inputs = max_inputs;
  d.infer = infer;
  d.create = create;
  d.scratch = scratch;
  return d;
}

Status ExpectWeights(std::string_view op, const TensorInfo& t, const char* what) {
  if (t.dtype != ir::DType::kF32 && t.dtype != ir::DType::kBF16)
    return OpError(op, std::string(what) + " must be float32 or bfloat16, got " + ir::DTypeName(t.dtype));
  return Status::Ok();
}

Status ExpectPacked(std::string_view op, const TensorInfo& t, const char* what, int64_t floats) {
  if (t.shape != ir::Shape{floats})
    return OpError(op, std::string(what) + " have shape " + ir::ShapeToString(t.shape) + ", expected [" +
                       std::to_string(floats) + "]");
  return Status::Ok();
}

Status ExpectNhwc(std::string_view op, const TensorInfo& t, const char* what) {
  FCB_RETURN_IF_ERROR(ExpectF32(op, t, what));
  if (t.shape.size() != 4)
    return OpError(op, std::string(what) + " must have rank 4, got shape " + ir::ShapeToString(t.shape));
  for (int64_t d : t.shape)
    if (d < 1 || d > (int64_t{1} << 31))
      return OpError(op, std::string(what) + " has an invalid dimension in " + ir::ShapeToString(t.shape));
  return CheckedNumel(t.shape).status();
}

Result<bool> CheckResidual(std::string_view op, const std::vector<TensorInfo>& in, size_t i,
                           const ir::Shape& out) {
  if (in.size() <= i || !in[i].present()) return false;
  FCB_RETURN_IF_ERROR(ExpectF32(op, in[i], "residual"));
  if (in[i].shape != out)
    return OpError(op, "residual shape " + ir::ShapeToString(in[i].shape) + " does not match the output " +
                       ir::ShapeToString(out));
  return true;
}

uint64_t ConvFlops(const kernels::ConvGeom& g) {
  const double f = 2.0 * static_cast<double>(g.n) * static_cast<double>(g.oh) * static_cast<double>(g.ow) *
                   static_cast<double>(g.oc) * static_cast<double>(g.kh) * static_cast<double>(g.kw) *
                   static_cast<double>(g.groups > 0 ? g.ic / g.groups : 0);
  return f > 0 && f < 1.8e19 ? static_cast<uint64_t>(f) : 0;
}

Result<std::vector<float>> WidenIfBf16(std::string_view op, const CreateContext& c, size_t i) {
  if (c.inputs[i].dtype != ir::DType::kBF16) return std::vector<float>{};
  const void* data = c.input_data ? (*c.input_data)[i] : nullptr;
  if (!data) return Unsupported(std::string(op) + ": bfloat16 weights must be stored in the file");
  const int64_t n = c.inputs[i].numel();
  std::vector<float> out(static_cast<size_t>(n));
  const auto* src = static_cast<const uint16_t*>(data);
  for (int64_t k = 0; k < n; ++k) out[k] = BFloat16ToFloat(src[k]);
  return out;
}

Status WindowOutput(std::string_view op, int64_t ih, int64_t iw, const std::array<int64_t, 2>& k,
                    const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& d,
                    const std::array<int64_t, 4>& pads, bool ceil_mode, int64_t* oh, int64_t* ow) {
  *oh = WindowOutputSize(ih, pads[0], pads[2], (k[0] - 1) * d[0] + 1, s[0], ceil_mode);
  *ow = WindowOutputSize(iw, pads[1], pads[3], (k[1] - 1) * d[1] + 1, s[1], ceil_mode);
  if (*oh < 1 || *ow < 1)
    return OpError(op, "the window does not fit the padded input " + std::to_string(ih) + "x" + std::to_string(iw));
  return Status::Ok();
}

Result<kernels::ConvGeom> ConvGeometry(std::string_view op, const ConvParams& p, const TensorInfo& x) {
  FCB_RETURN_IF_ERROR(ExpectNhwc(op, x, "input"));
  kernels::ConvGeom g{};
  g.n = x.shape[0], g.ih = x.shape[1], g.iw = x.shape[2], g.ic = x.shape[3];
  g.oc = p.out_channels;
  g.groups = p.group;
  if (g.ic % g.groups != 0 || g.oc % g.groups != 0)
    return OpError(op, "group " + std::to_string(g.groups) + " must divide input channels " + std::to_string(g.ic) +
                       " and output channels " + std::to_string(g.oc));
  FCB_RETURN_IF_ERROR(WindowOutput(op, g.ih, g.iw, p.kernel, p.strides, p.dilations, p.pads, false, &g.oh, &g.ow));
  g.kh = p.kernel[0], g.kw = p.kernel[1];
  g.sh = p.strides[0], g.sw = p.strides[1];
  g.dh = p.dilations[0], g.dw = p.dilations[1];
  g.pad_top = p.pads[0], g.pad_left = p.pads[1];
  g.in_pixel_stride = g.ic;
  g.out_pixel_stride = g.oc;
  FCB_RETURN_IF_ERROR(CheckedNumel({g.n, g.oh, g.ow, g.oc}).status());
  return g;
}

Result<OutputSlice> DecodeOutputSlice(std::string_view op, const SliceConvParams& p, int64_t oc) {
  OutputSlice s;
  const bool has_offset = p.out_channel_offset.has_value(), has_channels = p.out_pixel_channels.has_value();
  if (!has_offset && !has_channels) return s;
  if (!has_offset || !has_channels)
    return OpError(op, std::string("attributes '") + std::string(attr::kOutChannelOffset) + "' and '" +
                       std::string(attr::kOutPixelChannels) + "' come together");
  s.offset = *p.out_channel_offset;
  s.channels = *p.out_pixel_channels;
  if (s.offset < 0 || s.channels < 1 || s.channels > kMaxChannels || s.offset > s.channels - oc)
    return OpError(op, "output channels [" + std::to_string(s.offset) + ", " + std::to_string(s.offset) + " + " +
                       std::to_string(oc) + ") do not lie within the output's " + std::to_string(s.channels) +
                       " channels");
  return s;
}

void ApplyOutputSlice(const OutputSlice& s, kernels::ConvGeom* g) {
  if (s.channels == 0) return;
  g->out_pixel_stride = s.channels;
  g->residual_pixel_stride = g->oc;
}

Result<ConvOperands> ConstConvOperands(const LowerContext& c, const ir::Node& n) {
  ConvOperands o;
  o.w = c.Const(n, 1);
  if (!o.w || o.w->dtype != ir::DType::kF32 || o.w->shape.size() != 4)
    return Unsupported("Conv weights must be a float32 constant of rank 4");
  o.b = c.Const(n, 2);
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !o.b) return Unsupported("Conv bias must be a constant");
  FCB_ASSIGN_OR_RETURN(o.p, DecodeParams<ConvParams>(n.op_type, AttrsFromNode(n)));
  return o;
}

Result<bool> CheckConvOperands(std::string_view op, const std::vector<TensorInfo>& in, const kernels::ConvGeom& g,
                               int64_t packed_w, int64_t packed_b, bool bf16_ok) {
  FCB_RETURN_IF_ERROR(bf16_ok ? ExpectWeights(op, in[1], "packed weights") : ExpectF32(op, in[1], "packed weights"));
  FCB_RETURN_IF_ERROR(ExpectF32(op, in[2], "packed bias"));
  FCB_RETURN_IF_ERROR(ExpectPacked(op, in[1], "packed weights", packed_w));
  FCB_RETURN_IF_ERROR(ExpectPacked(op, in[2], "packed bias", packed_b));
  return CheckResidual(op, in, 3, {g.n, g.oh, g.ow, g.oc});
}

ir::Node NhwcNode(LayoutContext& c, const ir::Node& n, std::string_view op, std::vector<int> rest) {
  ir::Node r;
  r.name = n.name;
  r.op_type = std::string(op);
  r.domain = "fcb";
  r.inputs = {c.ToNhwc(n.inputs[0])};
  r.inputs.insert(r.inputs.end(), rest.begin(), rest.end());
  r.outputs = n.outputs;
  return r;
}

void EmitConvStep(LowerContext& c, std::string_view op, const ir::Node& n, int32_t packed_w, int32_t packed_b,
                  std::vector<format::AttrDesc> params) {
  c.Emit(op, n.name, {c.Value(n.inputs[0]), packed_w, packed_b, n.inputs.size() > 3 ? c.Value(n.inputs[3]) : -1},
         {c.Value(n.outputs[0])}, std::move(params));
}

const ir::TensorData* ConstConvWeights(const LowerContext& c, const ir::Node& n) {
  if (n.op_type != opname::ConvNhwc || n.inputs.empty()) return nullptr;
  if (n.inputs.size() > 3 && n.inputs[3] >= 0) return nullptr;  // residual
  const ir::TensorData* w = c.Const(n, 1);
  if (!w || w->dtype != ir::DType::kF32 || w->shape.size() != 4) return nullptr;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !c.Const(n, 2)) return nullptr;
  return w;
}

}  // namespace fcb::ops::internal
