// Reference NCHW convolution, transposed convolution and pooling for any
// spatial rank (see conv_ref.h). Straight loops over output positions with a
// precomputed list of kernel offsets; correctness first, these are not the
// paths the supported CNNs take (those become ConvNhwc / *PoolNhwc).
#include "ops/conv_ref.h"
#include "ops/conv_geom.h"
#include "ops/params.h"

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;
constexpr int kMaxSpatial = 8;

struct Window {
  int rank = 0;  // spatial dims
  std::array<int64_t, kMaxSpatial> in{}, k{}, s{}, d{}, pb{}, pe{}, out{}, opad{};
};

bool IsPool(std::string_view op) { return op == "MaxPool" || op == "AveragePool" || op == "LpPool"; }

Status ReadVec(const InferContext& c, const char* name, int rank, int64_t def, int64_t lo,
               std::array<int64_t, kMaxSpatial>* v, int count = 0) {
  const int n = count ? count : rank;
  for (int i = 0; i < n; ++i) (*v)[i] = def;
  if (!c.attrs.Has(name)) return Status::Ok();
  const auto got = c.attrs.GetInts(name);
  if (static_cast<int>(got.size()) != n)
    return OpError(c.op, std::string(name) + " must have " + std::to_string(n) + " values");
  for (int i = 0; i < n; ++i) {
    if (got[i] < lo || got[i] > (int64_t{1} << 31))
      return OpError(c.op, std::string(name) + " value " + std::to_string(got[i]) + " is out of range");
    (*v)[i] = got[i];
  }
  return Status::Ok();
}

// Resolves the geometry of Conv / ConvTranspose / pools from x (and w).
Status Resolve(const InferContext& c, Window* w) {
  const TensorInfo& x = Input(c, 0);
  const int r = static_cast<int>(x.shape.size()) - 2;
  if (r < 1 || r > kMaxSpatial) return OpUnsupported(c.op, "input rank " + std::to_string(x.shape.size()));
  w->rank = r;
  for (int i = 0; i < r; ++i) w->in[i] = x.shape[i + 2];
  const bool transposed = c.op == "ConvTranspose";
  if (c.attrs.Has("kernel_shape")) {
    FCB_RETURN_IF_ERROR(ReadVec(c, "kernel_shape", r, 1, 1, &w->k));
  } else if (!IsPool(c.op)) {
    for (int i = 0; i < r; ++i) w->k[i] = Input(c, 1).shape[i + 2];
  } else {
    return OpError(c.op, "kernel_shape is required");
  }
  FCB_RETURN_IF_ERROR(ReadVec(c, "strides", r, 1, 1, &w->s));
  FCB_RETURN_IF_ERROR(ReadVec(c, "dilations", r, 1, 1, &w->d));
  std::array<int64_t, kMaxSpatial * 2> pads{};
  if (c.attrs.Has("pads")) {
    const auto p = c.attrs.GetInts("pads");
    if (static_cast<int>(p.size()) != 2 * r) return OpError(c.op, "pads must have 2 values per spatial dim");
    for (int i = 0; i < 2 * r; ++i) {
      if (p[i] < 0 || p[i] > (int64_t{1} << 31)) return OpError(c.op, "pads must be non-negative");
      pads[i] = p[i];
    }
  }
  const std::string auto_pad = c.attrs.GetString("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID")
    return OpError(c.op, "auto_pad '" + auto_pad + "' is not valid");
  const bool ceil_mode = c.attrs.GetInt("ceil_mode", 0) != 0;
  if (transposed) FCB_RETURN_IF_ERROR(ReadVec(c, "output_padding", r, 0, 0, &w->opad));
  std::array<int64_t, kMaxSpatial> oshape{};
  const bool has_oshape = transposed && c.attrs.Has("output_shape");
  if (has_oshape) {
    auto os = c.attrs.GetInts("output_shape");
    if (static_cast<int>(os.size()) == r + 2) os.erase(os.begin(), os.begin() + 2);
    if (static_cast<int>(os.size()) != r) return OpError(c.op, "output_shape must have one value per spatial dim");
    for (int i = 0; i < r; ++i) oshape[i] = os[i];
  }
  for (int i = 0; i < r; ++i) {
    const int64_t ek = (w->k[i] - 1) * w->d[i] + 1;  // dilated kernel extent
    if (transposed) {
      if (has_oshape || same) {
        const int64_t out = has_oshape ? oshape[i] : w->in[i] * w->s[i];
        // total < 0 (output_shape larger than the natural size) pads the end, as
        // in the ONNX reference, so halves are floored, not truncated.
        const int64_t total = w->s[i] * (w->in[i] - 1) + w->opad[i] + ek - out;
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        const bool upper = auto_pad == "SAME_UPPER";
        w->pb[i] = upper ? half : total - half;
        w->pe[i] = total - w->pb[i];
        w->out[i] = out;
      } else {
        w->pb[i] = auto_pad == "VALID" ? 0 : pads[i];
        w->pe[i] = auto_pad == "VALID" ? 0 : pads[i + r];
        w->out[i] = w->s[i] * (w->in[i] - 1) + w->opad[i] + ek - w->pb[i] - w->pe[i];
      }
    } else if (same) {
      const SamePadding p = SamePad(w->in[i], ek, w->s[i], auto_pad == "SAME_UPPER");
      w->pb[i] = p.pad_begin;
      w->pe[i] = p.pad_end;
      w->out[i] = p.out;
    } else {
      w->pb[i] = auto_pad == "VALID" ? 0 : pads[i];
      w->pe[i] = auto_pad == "VALID" ? 0 : pads[i + r];
      if (w->in[i] + w->pb[i] + w->pe[i] - ek < 0) return OpError(c.op, "the kernel is larger than the padded input");
      w->out[i] = WindowOutputSize(w->in[i], w->pb[i], w->pe[i], ek, w->s[i], ceil_mode);
    }
    if (w->out[i] < 1) return OpError(c.op, "output would be empty");
  }
  return Status::Ok();
}

}  // namespace

Result<ConvTranspose2d> ResolveConvTranspose2d(const Attrs& attrs, const ir::Shape& x, const ir::Shape& w) {
  if (x.size() != 4 || w.size() != 4) return InvalidArgument("ConvTranspose2d needs 4-D input and weights");
  const std::vector<TensorInfo> in = {{DType::kF32, x}, {DType::kF32, w}};
  const std::vector<const ir::TensorData*> consts(2, nullptr);
  InferContext c{"ConvTranspose", attrs, in, consts, 1};
  Window win;
  FCB_RETURN_IF_ERROR(Resolve(c, &win));
  ConvTranspose2d g;
  g.kh = win.k[0], g.kw = win.k[1], g.sh = win.s[0], g.sw = win.s[1], g.dh = win.d[0], g.dw = win.d[1];
  g.pad_t = win.pb[0], g.pad_l = win.pb[1];
  // output_padding enlarges the end: fold it into the end pads.
  g.pad_b = win.pe[0] - win.opad[0], g.pad_r = win.pe[1] - win.opad[1];
  g.oh = win.out[0], g.ow = win.out[1];
  return g;
}

Result<ConvNdGeometry> ResolveConvNd(std::string_view op, const Attrs& attrs, const ir::Shape& x,
                                     const ir::Shape& w) {
  if (x.size() < 3 || w.size() != x.size())
    return OpError(op, "X " + ir::ShapeToString(x) + " and W " + ir::ShapeToString(w) +
                           " must have the same rank, at least 3");
  const std::vector<TensorInfo> in = {{DType::kF32, x}, {DType::kF32, w}};
  const std::vector<const ir::TensorData*> consts(2, nullptr);
  InferContext c{op, attrs, in, consts, 1};
  Window win;
  FCB_RETURN_IF_ERROR(Resolve(c, &win));
  ConvNdGeometry g;
  g.rank = win.rank;
  for (int i = 0; i < win.rank; ++i) {
    if (w[i + 2] != win.k[i]) return OpError(op, "kernel_shape does not match W " + ir::ShapeToString(w));
    g.in.push_back(win.in[i]);
    g.k.push_back(win.k[i]);
    g.s.push_back(win.s[i]);
    g.d.push_back(win.d[i]);
    g.pad_begin.push_back(win.pb[i]);
    g.pad_end.push_back(win.pe[i]);
    g.out.push_back(win.out[i]);
  }
  return g;
}

namespace {

std::array<int64_t, kMaxSpatial> Strides(const std::array<int64_t, kMaxSpatial>& dims, int r) {
  std::array<int64_t, kMaxSpatial> st{};
  int64_t s = 1;
  for (int i = r - 1; i >= 0; --i) {
    st[i] = s;
    s *= dims[i];
  }
  return st;
}

int64_t Prod(const std::array<int64_t, kMaxSpatial>& dims, int r) {
  int64_t p = 1;
  for (int i = 0; i < r; ++i) p *= dims[i];
  return p;
}

// Kernel positions as per-dim offsets (dilated), precomputed once.
std::vector<int64_t> KernelTaps(const Window& w) {
  const int64_t taps = Prod(w.k, w.rank);
  std::vector<int64_t> t(taps * w.rank);
  for (int64_t j = 0; j < taps; ++j) {
    int64_t rem = j;
    for (int i = w.rank - 1; i >= 0; --i) {
      t[j * w.rank + i] = (rem % w.k[i]) * w.d[i];
      rem /= w.k[i];
    }
  }
  return t;
}

Result<kernels::Epilogue> Epi(const Attrs& a) { return OptionalEpilogue("Conv", a); }

// ---------------------------------------------------------------- Conv

Status InferConvLike(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& w = Input(c, 1);
  if (!x.present() || !w.present()) return OpError(c.op, "X and W are required");
  if (x.dtype != DType::kF32 || w.dtype != DType::kF32)
    return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (w.shape.size() != x.shape.size()) return OpError(c.op, "W must have X's rank");
  Window win;
  FCB_RETURN_IF_ERROR(Resolve(c, &win));
  for (int i = 0; i < win.rank; ++i)
    if (w.shape[i + 2] != win.k[i]) return OpError(c.op, "kernel_shape does not match W");
  const int64_t g = c.attrs.GetInt("group", 1);
  const int64_t ch = x.shape[1];
  int64_t m;
  if (c.op == "ConvTranspose") {
    if (g < 1 || ch % g != 0 || w.shape[0] != ch) return OpError(c.op, "W's first dim must equal X's channels");
    m = w.shape[1] * g;
  } else {
    if (g < 1 || ch % g != 0 || w.shape[0] % g != 0 || w.shape[1] * g != ch)
      return OpError(c.op, "W " + ir::ShapeToString(w.shape) + " does not fit X's channels with group " +
                               std::to_string(g));
    m = w.shape[0];
  }
  const TensorInfo& b = Input(c, 2);
  if (b.present() && (b.dtype != DType::kF32 || b.shape != ir::Shape{m}))
    return OpError(c.op, "B must be float32 of shape [" + std::to_string(m) + "]");
  ir::Shape s = {x.shape[0], m};
  for (int i = 0; i < win.rank; ++i) s.push_back(win.out[i]);
  outs->push_back(TensorInfo{DType::kF32, std::move(s)});
  return Status::Ok();
}

struct ConvPlan {
  Window w;
  int64_t n = 0, ch = 0, m = 0, g = 1;
  bool transposed = false, has_bias = false;
  kernels::Epilogue ep;
  std::vector<int64_t> taps;
};

using Pos = std::array<int64_t, kMaxSpatial>;

// The origin of the window at flat position `flat` of a grid of `grid`
// positions per dim: position * stride - leading pad, per dim.
Pos WindowOrigin(const Window& w, const Pos& grid, int64_t flat) {
  Pos base{};
  for (int i = w.rank - 1; i >= 0; --i) {
    base[i] = (flat % grid[i]) * w.s[i] - w.pb[i];
    flat /= grid[i];
  }
  return base;
}

// The flat offset (strides `st`) of tap `tap` of the window at `base` in a
// tensor of `dims`, or -1 when the tap lies outside it (padding).
int64_t TapOffset(int r, const Pos& base, const int64_t* tap, const Pos& dims, const Pos& st) {
  int64_t off = 0;
  for (int i = 0; i < r; ++i) {
    const int64_t pos = base[i] + tap[i];
    if (pos < 0 || pos >= dims[i]) return -1;
    off += pos * st[i];
  }
  return off;
}

void RunConv(const ConvPlan& p, const float* x, const float* wt, const float* bias, float* y) {
  const Window& w = p.w;
  const int r = w.rank;
  const int64_t in_sp = Prod(w.in, r), out_sp = Prod(w.out, r), ntaps = Prod(w.k, r);
  const auto ist = Strides(w.in, r), ost = Strides(w.out, r);
  const int64_t cg = p.ch / p.g, mg = p.m / p.g;
  if (!p.transposed) {
    for (int64_t b = 0; b < p.n; ++b)
      for (int64_t oc = 0; oc < p.m; ++oc) {
        const int64_t grp = oc / mg;
        for (int64_t o = 0; o < out_sp; ++o) {
          const Pos base = WindowOrigin(w, w.out, o);
          double acc = p.has_bias ? bias[oc] : 0.0;
          for (int64_t t = 0; t < ntaps; ++t) {
            const int64_t off = TapOffset(r, base, &p.taps[t * r], w.in, ist);
            if (off < 0) continue;
            for (int64_t ic = 0; ic < cg; ++ic)
              acc += static_cast<double>(x[(b * p.ch + grp * cg + ic) * in_sp + off]) *
                     wt[(oc * cg + ic) * ntaps + t];
          }
          y[(b * p.m + oc) * out_sp + o] = static_cast<float>(acc);
        }
      }
    return;
  }
  // Transposed: every input position scatters into the output.
  for (int64_t i = 0; i < p.n * p.m * out_sp; ++i)
    y[i] = p.has_bias ? bias[(i / out_sp) % p.m] : 0.0f;
  for (int64_t b = 0; b < p.n; ++b)
    for (int64_t ic = 0; ic < p.ch; ++ic) {
      const int64_t grp = ic / cg;
      for (int64_t q = 0; q < in_sp; ++q) {
        const Pos base = WindowOrigin(w, w.in, q);
        const float xv = x[(b * p.ch + ic) * in_sp + q];
        for (int64_t t = 0; t < ntaps; ++t) {
          const int64_t off = TapOffset(r, base, &p.taps[t * r], w.out, ost);
          if (off < 0) continue;
          for (int64_t om = 0; om < mg; ++om)
            y[(b * p.m + grp * mg + om) * out_sp + off] += xv * wt[(ic * mg + om) * ntaps + t];
        }
      }
    }
}

Result<std::unique_ptr<Kernel>> CreateConvLike(const CreateContext& c) {
  ConvPlan p;
  FCB_RETURN_IF_ERROR(Resolve(AsInfer(c), &p.w));
  p.n = c.inputs[0].shape[0];
  p.ch = c.inputs[0].shape[1];
  p.m = c.outputs[0].shape[1];
  p.g = c.attrs.GetInt("group", 1);
  p.transposed = c.op == "ConvTranspose";
  p.has_bias = c.inputs.size() > 2 && c.inputs[2].present();
  FCB_ASSIGN_OR_RETURN(p.ep, Epi(c.attrs));
  p.taps = KernelTaps(p.w);
  const int64_t total = c.outputs[0].numel();
  return MakeKernel([p = std::move(p), total](const RunContext& ctx, const void* const* in,
                                              void* const* out) -> Status {
    float* y = static_cast<float*>(out[0]);
    RunConv(p, static_cast<const float*>(in[0]), static_cast<const float*>(in[1]),
            p.has_bias ? static_cast<const float*>(in[2]) : nullptr, y);
    if (p.ep.act != kernels::Act::kNone) ctx.k->f32.unary(p.ep, y, y, 0, total);
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- pools

Status InferPoolRef(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  // MaxPool also takes integer tensors (it only compares).
  if (x.dtype != DType::kF32 && !(c.op == "MaxPool" && IsNumeric(x.dtype)))
    return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  Window win;
  FCB_RETURN_IF_ERROR(Resolve(c, &win));
  if (c.op == "LpPool" && c.attrs.GetInt("p", 2) < 1) return OpError(c.op, "p must be >= 1");
  const int64_t so = c.attrs.GetInt("storage_order", 0);
  if (so != 0 && so != 1) return OpError(c.op, "storage_order must be 0 or 1");
  if (c.num_outputs > 1 && c.op != "MaxPool") return OpError(c.op, "has one output");
  ir::Shape s = {x.shape[0], x.shape[1]};
  for (int i = 0; i < win.rank; ++i) s.push_back(win.out[i]);
  outs->push_back(TensorInfo{x.dtype, s});
  if (c.num_outputs > 1) outs->push_back(TensorInfo{DType::kI64, s});
  return Status::Ok();
}

struct PoolPlan {
  Window w;
  int64_t nc = 0;
  int kind = 0;  // 0 max, 1 average, 2 Lp
  bool include_pad = false, col_major = false, indices = false;
  double p = 2;
  std::vector<int64_t> taps;
};

template <typename T>
void RunPool(const PoolPlan& p, const T* x, T* y, int64_t* ind) {
  const Window& w = p.w;
  const int r = w.rank;
  const int64_t in_sp = Prod(w.in, r), out_sp = Prod(w.out, r), ntaps = Prod(w.k, r);
  const auto ist = Strides(w.in, r);
  // Column-major strides for storage_order=1 indices.
  std::array<int64_t, kMaxSpatial> cst{};
  for (int i = 0, s = 1; i < r; ++i) {
    cst[i] = s;
    s *= static_cast<int>(w.in[i]);
  }
  for (int64_t ncx = 0; ncx < p.nc; ++ncx)
    for (int64_t o = 0; o < out_sp; ++o) {
      const Pos base = WindowOrigin(w, w.out, o);
      double acc = p.kind == 0 ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t count = 0, best = -1;
      for (int64_t t = 0; t < ntaps; ++t) {
        const int64_t off = TapOffset(r, base, &p.taps[t * r], w.in, ist);
        if (off < 0) continue;
        const int64_t coff = p.col_major ? TapOffset(r, base, &p.taps[t * r], w.in, cst) : 0;
        const double v = x[ncx * in_sp + off];
        ++count;
        if (p.kind == 0) {
          if (v > acc || best < 0) {
            acc = v;
            best = ncx * in_sp + (p.col_major ? coff : off);
          }
        } else if (p.kind == 1) {
          acc += v;
        } else {
          acc += std::pow(std::fabs(v), p.p);
        }
      }
      if (p.kind == 1) {
        int64_t div = count;
        if (p.include_pad) {  // the window clipped to the padded input
          div = 1;
          for (int i = 0; i < r; ++i) {
            const int64_t lo = base[i], hi = base[i] + (w.k[i] - 1) * w.d[i];
            const int64_t clo = std::max(lo, -w.pb[i]), chi = std::min(hi, w.in[i] + w.pe[i] - 1);
            div *= (chi - clo) / w.d[i] + 1;
          }
        }
        acc = div > 0 ? acc / div : 0.0;
      } else if (p.kind == 2) {
        acc = std::pow(acc, 1.0 / p.p);
      }
      // A max window wholly in the padding has no value: -inf for floats,
      // the type's lowest for integers (-inf does not convert to them).
      if constexpr (std::is_integral_v<T>)
        if (p.kind == 0 && count == 0) acc = static_cast<double>(std::numeric_limits<T>::lowest());
      y[ncx * out_sp + o] = static_cast<T>(acc);
      if (p.indices) ind[ncx * out_sp + o] = best;
    }
}

Result<std::unique_ptr<Kernel>> CreatePoolRef(const CreateContext& c) {
  PoolPlan p;
  FCB_RETURN_IF_ERROR(Resolve(AsInfer(c), &p.w));
  p.nc = c.inputs[0].shape[0] * c.inputs[0].shape[1];
  p.kind = c.op == "MaxPool" ? 0 : c.op == "AveragePool" ? 1 : 2;
  p.include_pad = c.attrs.GetInt("count_include_pad", 0) != 0;
  p.col_major = c.attrs.GetInt("storage_order", 0) == 1;
  p.indices = c.outputs.size() > 1;
  p.p = static_cast<double>(c.attrs.GetInt("p", 2));
  p.taps = KernelTaps(p.w);
  const DType dt = c.inputs[0].dtype;
  return MakeKernel([p = std::move(p), dt](const RunContext&, const void* const* in, void* const* out) -> Status {
    DispatchNumeric(dt, [&](auto tag) {
      using T = decltype(tag);
      RunPool(p, static_cast<const T*>(in[0]), static_cast<T*>(out[0]),
              p.indices ? static_cast<int64_t*>(out[1]) : nullptr);
    });
    return Status::Ok();
  });
}

}  // namespace

Status InferWindowRef(const InferContext& c, std::vector<TensorInfo>* outs) {
  return IsPool(c.op) ? InferPoolRef(c, outs) : InferConvLike(c, outs);
}

Result<std::unique_ptr<Kernel>> CreateWindowRef(const CreateContext& c) {
  return IsPool(c.op) ? CreatePoolRef(c) : CreateConvLike(c);
}

void RegisterConvRefOps(std::vector<OpDef>* ops) {
  // The reference kernel applies a fused activation, and so does the NHWC form.
  ops->push_back(Def<InferConvLike, CreateConvLike>("ConvTranspose", 2, 3, 1, 1, kTraitTakesActivation));
  ops->push_back(Def<InferPoolRef, CreatePoolRef>("LpPool", 1, 1));
}

}  // namespace fcb::ops
