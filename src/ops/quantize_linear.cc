// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: float tensors to
// uint8/int8 and back, per tensor or per axis. The rounding, saturation and
// float-step rules shared with the integer operators are in quant.h.
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "kernels/int8.h"
#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/quant.h"

namespace fcb::ops {
namespace {

using namespace quant;

// ------------------------------------------------------------- dtypes

using ir::IsInt8Type;

// Element `i` of a float32 / float16 / bfloat16 tensor as float.
inline float FloatAt(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::kF16: return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: return BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// ONNX's name of an element-type code, for the codes fcb has no DType for.
std::string OnnxTypeCodeName(int64_t code) {
  switch (code) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    default: break;
  }
  const char* n = ir::DTypeName(static_cast<DType>(code));
  return std::string(n) == "undefined" ? "type code " + std::to_string(code) : n;
}

// Block quantization (opset 21) is refused.
Status RefuseBlocked(const InferContext& c) {
  const int64_t bs = c.attrs.GetInt("block_size", 0);
  if (bs != 0)
    return OpUnsupported(c.op, "block quantization (block_size=" + std::to_string(bs) + ") is not supported");
  return Status::Ok();
}

// ------------------------------------------------------------- per-tensor / per-axis parameters

// How QuantizeLinear / DequantizeLinear apply their scale and zero point:
// x viewed as [outer, channels, inner], parameter c for channel c (per-axis),
// or channels = 1 (per-tensor).
struct AxisLayout {
  int64_t channels = 1, inner = 1;
};

// The spec: a scalar scale (or, as ONNX Runtime reads it, any one-element
// tensor) is per-tensor; a 1-D scale is per-axis along `axis` (default 1,
// negative counts from the back) and must have x.shape[axis] elements; the
// zero point has the scale's shape.
Status ResolveAxis(const InferContext& c, const TensorInfo& x, const TensorInfo& scale,
                   const TensorInfo& zp, const char* scale_name, const char* zp_name, AxisLayout* l) {
  FCB_RETURN_IF_ERROR(RefuseBlocked(c));
  if (scale.shape.size() > 1)
    return OpUnsupported(c.op, std::string(scale_name) + " of shape " + ir::ShapeToString(scale.shape) +
                                   " (block quantization) is not supported; it must be a scalar or 1-D");
  if (zp.present() && (zp.shape.size() > 1 || zp.numel() != scale.numel()))
    return OpError(c.op, std::string(zp_name) + " " + ir::ShapeToString(zp.shape) + " must have the shape of " +
                             scale_name + " " + ir::ShapeToString(scale.shape));
  *l = AxisLayout{};
  if (scale.numel() == 1) return Status::Ok();  // per-tensor
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t attr = c.attrs.GetInt("axis", 1);
  int64_t axis;
  if (rank == 0) return OpError(c.op, "per-axis " + std::string(scale_name) + " needs x of rank >= 1");
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, attr, rank, &axis));
  if (scale.shape[0] != x.shape[axis])
    return OpError(c.op, std::string(scale_name) + " has " + std::to_string(scale.shape[0]) +
                             " elements; per-axis quantization along axis " + std::to_string(attr) +
                             " needs " + std::to_string(x.shape[axis]) + " (x is " +
                             ir::ShapeToString(x.shape) + ")");
  l->channels = x.shape[axis];
  l->inner = SafeProduct(x.shape, axis + 1, x.shape.size());
  return Status::Ok();
}

// Runs f(begin, end, channel) over [0, numel) in segments of one channel each,
// split over the pool.
template <typename F>
void ForChannelSegments(const RunContext& ctx, int64_t numel, const AxisLayout& l, F&& f) {
  ctx.pool->ParallelFor(numel, 16384, [&](int64_t s, int64_t e) {
    if (l.channels == 1) return f(s, e, int64_t{0});
    while (s < e) {
      const int64_t block = l.inner > 0 ? s / l.inner : 0;
      const int64_t seg_end = std::min(e, (block + 1) * l.inner);
      f(s, seg_end, block % l.channels);
      s = seg_end;
    }
  });
}

// ------------------------------------------------------------- QuantizeLinear

// The output type: the zero point's; without one, output_dtype (opset 21) or uint8.
Status QuantizeOutputType(const InferContext& c, const TensorInfo& zp, DType* out) {
  const int64_t code = c.attrs.GetInt("output_dtype", 0);
  if (code != 0 && code != static_cast<int64_t>(DType::kU8) && code != static_cast<int64_t>(DType::kI8))
    return OpUnsupported(c.op, "output_dtype " + OnnxTypeCodeName(code) +
                                   " is not supported; fcb quantizes to uint8 and int8");
  if (zp.present()) {
    if (!IsInt8Type(zp.dtype))
      return OpUnsupported(c.op, std::string("y_zero_point has element type ") + ir::DTypeName(zp.dtype) +
                                     "; only uint8 and int8 outputs are supported");
    if (code != 0 && code != static_cast<int64_t>(zp.dtype))
      return OpError(c.op, "output_dtype " + OnnxTypeCodeName(code) + " differs from y_zero_point's type " +
                               ir::DTypeName(zp.dtype));
    *out = zp.dtype;
  } else {
    *out = code != 0 ? static_cast<DType>(code) : DType::kU8;
  }
  return Status::Ok();
}

struct QuantizePlan {
  DType x = DType::kF32, scale = DType::kF32, y = DType::kU8;
  AxisLayout l;
  bool has_zp = false;
};

Status ResolveQuantize(const InferContext& c, QuantizePlan* p) {
  const TensorInfo &x = Input(c, 0), &scale = Input(c, 1), &zp = Input(c, 2);
  if (!x.present() || !scale.present()) return OpError(c.op, "x and y_scale are required");
  if (x.dtype != DType::kF32 && !IsHalf(x.dtype) && x.dtype != DType::kI32)
    return OpUnsupported(c.op, std::string("x has element type ") + ir::DTypeName(x.dtype) +
                                   "; QuantizeLinear takes float32, float16, bfloat16 or int32");
  // float32 scales; a 16-bit float x may also have a scale of its own type (opset 19).
  if (scale.dtype != DType::kF32 && !(IsHalf(x.dtype) && scale.dtype == x.dtype))
    return OpUnsupported(c.op, std::string("y_scale has element type ") + ir::DTypeName(scale.dtype) +
                                   " for x of type " + ir::DTypeName(x.dtype));
  FCB_RETURN_IF_ERROR(QuantizeOutputType(c, zp, &p->y));
  FCB_RETURN_IF_ERROR(ResolveAxis(c, x, scale, zp, "y_scale", "y_zero_point", &p->l));
  p->x = x.dtype;
  p->scale = scale.dtype;
  p->has_zp = zp.present();
  return Status::Ok();
}

Status InferQuantize(const InferContext& c, std::vector<TensorInfo>* outs) {
  QuantizePlan p;
  FCB_RETURN_IF_ERROR(ResolveQuantize(c, &p));
  outs->push_back(TensorInfo{p.y, Input(c, 0).shape});
  return Status::Ok();
}

// One channel segment: y[i] = saturate(round(x[i] / scale) + zp). float32 and
// 16-bit x divide in float32 (as ONNX Runtime); int32 x in float64 (as the
// ONNX reference's NumPy promotion does; ONNX Runtime has no int32 kernel).
template <typename Q>
void QuantizeSegment(DType xt, const void* x, Q* y, int64_t b, int64_t e, float scale, int32_t zp) {
  switch (xt) {
    case DType::kF32: {
      const float* xf = static_cast<const float*>(x);
      for (int64_t i = b; i < e; ++i) y[i] = Quantize<Q>(xf[i] / scale, zp);
      break;
    }
    case DType::kI32: {
      const int32_t* xi = static_cast<const int32_t*>(x);
      const double s = scale;
      for (int64_t i = b; i < e; ++i) y[i] = Quantize<Q>(static_cast<double>(xi[i]) / s, zp);
      break;
    }
    default:
      for (int64_t i = b; i < e; ++i) y[i] = Quantize<Q>(FloatAt(xt, x, i) / scale, zp);
      break;
  }
}

Result<std::unique_ptr<Kernel>> CreateQuantize(const CreateContext& c) {
  QuantizePlan p;
  FCB_RETURN_IF_ERROR(ResolveQuantize(AsInfer(c), &p));
  const int64_t numel = c.inputs[0].numel();
  return MakeKernel([p, numel](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    DispatchQuant(p.y, [&](auto tag) {
      using Q = decltype(tag);
      Q* y = static_cast<Q*>(out[0]);
      const void* zp = p.has_zp ? in[2] : nullptr;
      const kernels::QKernelTable& qt = ctx.k->i8;
      ForChannelSegments(ctx, numel, p.l, [&](int64_t b, int64_t e, int64_t ch) {
        const float scale = FloatAt(p.scale, in[1], ch);
        if (p.x == DType::kF32) {  // the vector kernel: the same division and rounding
          qt.quantize(static_cast<const float*>(in[0]) + b, e - b, scale, IntAt(p.y, zp, ch),
                      std::is_signed_v<Q>, y + b);
          return;
        }
        QuantizeSegment<Q>(p.x, in[0], y, b, e, scale, IntAt(p.y, zp, ch));
      });
    });
    return Status::Ok();
  });
}

// ------------------------------------------------------------- DequantizeLinear

struct DequantizePlan {
  DType x = DType::kU8, y = DType::kF32;
  AxisLayout l;
  bool has_zp = false;
};

Status ResolveDequantize(const InferContext& c, DequantizePlan* p) {
  const TensorInfo &x = Input(c, 0), &scale = Input(c, 1), &zp = Input(c, 2);
  if (!x.present() || !scale.present()) return OpError(c.op, "x and x_scale are required");
  if (!IsInt8Type(x.dtype) && x.dtype != DType::kI32)
    return OpUnsupported(c.op, std::string("x has element type ") + ir::DTypeName(x.dtype) +
                                   "; DequantizeLinear takes uint8, int8 or int32");
  // The output has the scale's type: float32 (opsets 10-18), float16 or bfloat16 (opset 19).
  if (scale.dtype != DType::kF32 && !IsHalf(scale.dtype))
    return OpUnsupported(c.op, std::string("x_scale has element type ") + ir::DTypeName(scale.dtype) +
                                   "; float32, float16 and bfloat16 are supported");
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, zp, x.dtype, "x_zero_point"));
  FCB_RETURN_IF_ERROR(ResolveAxis(c, x, scale, zp, "x_scale", "x_zero_point", &p->l));
  if (x.dtype == DType::kI32 && zp.present()) {
    // The spec: an int32 x has no zero point, or 0.
    if (const ir::TensorData* z = Constant(c, 2))
      for (int64_t i = 0; i < z->numel(); ++i)
        if (z->GetInt(i) != 0)
          return OpError(c.op, "x_zero_point must be 0 for int32 x, got " + std::to_string(z->GetInt(i)));
  }
  p->x = x.dtype;
  p->y = scale.dtype;
  p->has_zp = zp.present();
  return Status::Ok();
}

Status InferDequantize(const InferContext& c, std::vector<TensorInfo>* outs) {
  DequantizePlan p;
  FCB_RETURN_IF_ERROR(ResolveDequantize(c, &p));
  outs->push_back(TensorInfo{p.y, Input(c, 0).shape});
  return Status::Ok();
}

template <typename X>
void DequantizeSegment(const X* x, DType yt, void* y, int64_t b, int64_t e, float scale, int32_t zp) {
  // float32(x - zp) * scale: the integer difference is exact for 8-bit x; an
  // int32 x has zp = 0.
  if (yt == DType::kF32) {
    float* yf = static_cast<float*>(y);
    for (int64_t i = b; i < e; ++i) yf[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
    return;
  }
  uint16_t* yh = static_cast<uint16_t*>(y);
  for (int64_t i = b; i < e; ++i) {
    const float v = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
    yh[i] = yt == DType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
  }
}

Result<std::unique_ptr<Kernel>> CreateDequantize(const CreateContext& c) {
  DequantizePlan p;
  FCB_RETURN_IF_ERROR(ResolveDequantize(AsInfer(c), &p));
  const int64_t numel = c.inputs[0].numel();
  const int64_t nzp = p.has_zp ? c.inputs[2].numel() : 0;
  const std::string op(c.op);
  return MakeKernel([p, numel, nzp, op](const RunContext& ctx, const void* const* in,
                                        void* const* out) -> Status {
    const void* zp = p.has_zp ? in[2] : nullptr;
    if (p.x == DType::kI32)
      for (int64_t i = 0; i < nzp; ++i)
        if (IntAt(p.x, zp, i) != 0)
          return OpError(op, "x_zero_point must be 0 for int32 x, got " + std::to_string(IntAt(p.x, zp, i)));
    ForChannelSegments(ctx, numel, p.l, [&](int64_t b, int64_t e, int64_t ch) {
      const float scale = FloatAt(p.y, in[1], ch);
      const int32_t z = IntAt(p.x, zp, ch);
      if (p.y == DType::kF32 && p.x != DType::kI32) {  // the vector kernel: the same arithmetic
        ctx.k->i8.dequantize(static_cast<const uint8_t*>(in[0]) + b, p.x == DType::kI8, e - b, scale, z,
                             static_cast<float*>(out[0]) + b);
        return;
      }
      switch (p.x) {
        case DType::kU8: DequantizeSegment(static_cast<const uint8_t*>(in[0]), p.y, out[0], b, e, scale, z); break;
        case DType::kI8: DequantizeSegment(static_cast<const int8_t*>(in[0]), p.y, out[0], b, e, scale, z); break;
        default: DequantizeSegment(static_cast<const int32_t*>(in[0]), p.y, out[0], b, e, scale, z); break;
      }
    });
    return Status::Ok();
  });
}

// ------------------------------------------------------------- DynamicQuantizeLinear

Status InferDynamicQuantize(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "x is required");
  if (x.dtype != DType::kF32)
    return OpUnsupported(c.op, std::string("x has element type ") + ir::DTypeName(x.dtype) +
                                   "; DynamicQuantizeLinear takes float32");
  outs->push_back(TensorInfo{DType::kU8, x.shape});
  if (c.num_outputs > 1) outs->push_back(TensorInfo{DType::kF32, {}});
  if (c.num_outputs > 2) outs->push_back(TensorInfo{DType::kU8, {}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateDynamicQuantize(const CreateContext& c) {
  const int64_t numel = c.inputs[0].numel();
  const int nout = static_cast<int>(c.outputs.size());
  return MakeKernel([numel, nout](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const kernels::QKernelTable& qt = ctx.k->i8;
    // min and max over parts (NaN never compares, so it is skipped).
    constexpr int64_t kParts = 64;
    std::array<float, kParts> mins, maxs;
    const int64_t parts = std::clamp<int64_t>(numel / 16384, 1, kParts);
    ctx.pool->ParallelFor(parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        float mn, mx;
        const int64_t b = numel * p / parts, e = numel * (p + 1) / parts;
        qt.minmax(x + b, e - b, &mn, &mx);
        mins[p] = mn;
        maxs[p] = mx;
      }
    });
    float mn = 0, mx = 0;  // the range always holds 0
    for (int64_t p = 0; p < parts; ++p) {
      mn = std::min(mn, mins[p]);
      mx = std::max(mx, maxs[p]);
    }
    const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    const float zf = std::clamp(0.0f - mn / scale, 0.0f, 255.0f);
    const uint8_t zp = static_cast<uint8_t>(RoundHalfEven(zf));
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    ctx.pool->ParallelFor(numel, 16384, [&](int64_t b, int64_t e) {
      qt.quantize(x + b, e - b, scale, zp, false, y + b);
    });
    if (nout > 1) *static_cast<float*>(out[1]) = scale;
    if (nout > 2) *static_cast<uint8_t*>(out[2]) = zp;
    return Status::Ok();
  });
}
}  // namespace

void RegisterQuantizeLinearOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferQuantize, CreateQuantize>("QuantizeLinear", 2, 3, 1, 1, kTraitPerTensorElementwise));
  ops->push_back(Def<InferDequantize, CreateDequantize>("DequantizeLinear", 2, 3, 1, 1, kTraitPerTensorElementwise));
  ops->push_back(Def<InferDynamicQuantize, CreateDynamicQuantize>("DynamicQuantizeLinear", 1, 1, 1, 3,
                                                                  kTraitPerTensorElementwise));
}

}  // namespace fcb::ops
