// Resize (nearest / linear / cubic, every coordinate transformation mode of
// opsets 10-18) and Upsample (Resize with asymmetric coordinates and floor
// rounding; import also rewrites it, this entry keeps `fcb ops` honest).
//
// The interpolation is separable: per axis and output coordinate, create()
// computes the input taps (index, weight) following the ONNX reference
// (neighbours of the original coordinate, edge values beyond the border,
// exclude_outside renormalization); Run takes the tensor product of the
// taps. Scales / sizes / roi must be compile-time constants: they fix the
// output shape.
#include <array>
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/resize.h"

namespace fcb::ops {
namespace resize {
namespace {

using ir::DType;

Status ReadFloats(const InferContext& c, size_t i, std::vector<double>* v, bool* present) {
  *present = false;
  const TensorInfo& t = Input(c, i);
  if (!t.present() || t.numel() == 0) return Status::Ok();
  const ir::TensorData* d = Constant(c, i);
  if (!d) return OpUnsupported(c.op, "input " + std::to_string(i) + " must be a compile-time constant");
  v->clear();
  for (int64_t k = 0; k < d->numel(); ++k) v->push_back(d->GetDouble(k));
  *present = true;
  return Status::Ok();
}

}  // namespace

Status Parse(const InferContext& c, Params* p) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (x.dtype != DType::kF32) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  const size_t r = x.shape.size();
  const bool upsample = c.op == "Upsample";
  p->mode = c.attrs.GetString("mode", "nearest");
  if (p->mode == "bilinear" || p->mode == "trilinear") p->mode = "linear";
  if (p->mode != "nearest" && p->mode != "linear" && p->mode != "cubic")
    return OpUnsupported(c.op, "mode '" + p->mode + "'");
  p->coord = upsample ? "asymmetric" : c.attrs.GetString("coordinate_transformation_mode", "half_pixel");
  static const char* kCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                  "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  bool known = false;
  for (const char* k : kCoords) known = known || p->coord == k;
  if (!known) return OpUnsupported(c.op, "coordinate_transformation_mode '" + p->coord + "'");
  p->nearest = upsample ? "floor" : c.attrs.GetString("nearest_mode", "round_prefer_floor");
  if (p->nearest != "round_prefer_floor" && p->nearest != "round_prefer_ceil" && p->nearest != "floor" &&
      p->nearest != "ceil")
    return OpUnsupported(c.op, "nearest_mode '" + p->nearest + "'");
  p->cubic_a = c.attrs.GetFloat("cubic_coeff_a", -0.75f);
  p->exclude_outside = c.attrs.GetInt("exclude_outside", 0) != 0;
  p->extrapolation = c.attrs.GetFloat("extrapolation_value", 0.f);
  if (c.attrs.GetInt("antialias", 0) != 0) return OpUnsupported(c.op, "antialias=1");
  if (c.attrs.Has("axes")) return OpUnsupported(c.op, "the axes attribute");
  if (c.attrs.GetString("keep_aspect_ratio_policy", "stretch") != "stretch")
    return OpUnsupported(c.op, "keep_aspect_ratio_policy other than stretch");

  std::vector<double> scales, sizes;
  bool has_scales = false, has_sizes = false, has_roi = false;
  if (upsample) {
    if (c.attrs.Has("scales")) {
      for (float f : c.attrs.GetFloats("scales")) scales.push_back(f);
      has_scales = true;
    } else {
      FCB_RETURN_IF_ERROR(ReadFloats(c, 1, &scales, &has_scales));
    }
  } else {
    FCB_RETURN_IF_ERROR(ReadFloats(c, 2, &scales, &has_scales));
    FCB_RETURN_IF_ERROR(ReadFloats(c, 3, &sizes, &has_sizes));
    if (p->coord == "tf_crop_and_resize") FCB_RETURN_IF_ERROR(ReadFloats(c, 1, &p->roi, &has_roi));
  }
  if (has_scales == has_sizes) return OpError(c.op, "exactly one of scales and sizes must be given");
  if ((has_scales ? scales.size() : sizes.size()) != r)
    return OpError(c.op, "scales/sizes must have one value per input dim");
  if (p->coord == "tf_crop_and_resize" && (!has_roi || p->roi.size() != 2 * r))
    return OpError(c.op, "tf_crop_and_resize needs a roi of 2 * rank values");
  p->out.resize(r);
  p->scales.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const double in = static_cast<double>(x.shape[i]);
    if (has_scales) {
      if (!(scales[i] > 0) || scales[i] > 65536) return OpError(c.op, "scales must be positive");
      const double crop = p->coord == "tf_crop_and_resize" ? p->roi[i + r] - p->roi[i] : 1.0;
      p->out[i] = static_cast<int64_t>(std::floor(in * crop * scales[i]));
      p->scales[i] = scales[i];
    } else {
      if (sizes[i] < 0 || sizes[i] > static_cast<double>(kMaxElements)) return OpError(c.op, "sizes out of range");
      p->out[i] = static_cast<int64_t>(sizes[i]);
      p->scales[i] = in > 0 ? sizes[i] / in : 1.0;
    }
  }
  return CheckShape(c.op, p->out, "output");
}

std::vector<Taps> AxisTaps(const Params& p, size_t axis, int64_t in, int64_t out) {
  const double scale = p.scales[axis];
  const double out_f = scale * static_cast<double>(in);  // as the ONNX reference computes it
  const size_t r = p.scales.size();
  std::vector<Taps> taps(out);
  for (int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o);
    double xo;
    if (p.coord == "align_corners") {
      xo = out_f == 1 ? 0.0 : x * (in - 1) / (out_f - 1);
    } else if (p.coord == "asymmetric") {
      xo = x / scale;
    } else if (p.coord == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else if (p.coord == "tf_crop_and_resize") {
      const double s = p.roi[axis], e = p.roi[axis + r];
      xo = out_f == 1 ? (e - s) * (in - 1) / 2 : x * (e - s) * (in - 1) / (out_f - 1);
      xo += s * (in - 1);
      if (xo < 0 || xo > in - 1) continue;  // n = 0
    } else if (p.coord == "pytorch_half_pixel") {
      xo = out_f == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else {
      xo = (x + 0.5) / scale - 0.5;
    }
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    // Neighbours as in the reference: for an integral xo the pair is (xo-1, xo).
    const int64_t base = static_cast<int64_t>(fl) - (xo == fl ? 1 : 0);
    std::array<double, 4> coef{};
    std::array<int64_t, 4> at{};
    int n;
    if (p.mode == "cubic") {
      n = 4;
      const double a = p.cubic_a, t = ratio, u = 1 - ratio;
      coef = {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
              ((a + 2) * t - (a + 3)) * t * t + 1, ((a + 2) * u - (a + 3)) * u * u + 1,
              ((a * (u + 1) - 5 * a) * (u + 1) + 8 * a) * (u + 1) - 4 * a};
      for (int k = 0; k < 4; ++k) at[k] = base - 1 + k;
    } else {
      n = 2;
      at = {base, base + 1, 0, 0};
      if (p.mode == "linear") {
        coef = {1 - ratio, ratio, 0, 0};
      } else {
        bool hi;
        if (xo == fl) hi = true;
        else if (p.nearest == "round_prefer_floor") hi = ratio > 0.5;
        else if (p.nearest == "round_prefer_ceil") hi = ratio >= 0.5;
        else hi = p.nearest == "ceil";
        coef = {hi ? 0.0 : 1.0, hi ? 1.0 : 0.0, 0, 0};
      }
    }
    if (p.exclude_outside) {
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        if (at[k] < 0 || at[k] >= in) coef[k] = 0;
        sum += coef[k];
      }
      if (sum != 0)
        for (int k = 0; k < n; ++k) coef[k] /= sum;
    }
    Taps& tp = taps[o];
    for (int k = 0; k < n; ++k) {
      if (coef[k] == 0) continue;
      tp.idx[tp.n] = std::clamp<int64_t>(at[k], 0, in - 1);  // edge values beyond the border
      tp.w[tp.n] = coef[k];
      ++tp.n;
    }
    if (tp.n == 0) {  // all weights cancelled: keep the nearest sample
      tp.n = 1;
      tp.idx[0] = std::clamp<int64_t>(static_cast<int64_t>(std::llround(xo)), 0, in - 1);
      tp.w[0] = 0;
    }
  }
  return taps;
}

bool IsIdentity(const std::vector<Taps>& taps) {
  for (size_t o = 0; o < taps.size(); ++o)
    if (taps[o].n != 1 || taps[o].idx[0] != static_cast<int64_t>(o) || taps[o].w[0] != 1.0) return false;
  return true;
}

}  // namespace resize

namespace {

using ir::DType;
using resize::Params;
using resize::Parse;
using resize::Taps;
using resize::AxisTaps;
using resize::FlatTaps;

Status InferResize(const InferContext& c, std::vector<TensorInfo>* outs) {
  Params p;
  FCB_RETURN_IF_ERROR(Parse(c, &p));
  outs->push_back(TensorInfo{DType::kF32, p.out});
  return Status::Ok();
}

struct Plan {
  ir::Shape in, out;
  std::vector<int64_t> in_strides;
  std::vector<std::vector<Taps>> taps;  // per axis, per output coordinate
  float extrapolation = 0;
};

void RunResize(const Plan& p, const float* x, float* y) {
  const int r = static_cast<int>(p.out.size());
  const int64_t total = ir::NumElements(p.out);
  std::array<int64_t, kMaxRank> oc{};
  std::array<const Taps*, kMaxRank> tp{};
  std::array<int, kMaxRank> k{};
  for (int64_t e = 0; e < total; ++e) {
    bool outside = false;
    for (int d = 0; d < r; ++d) {
      tp[d] = &p.taps[d][oc[d]];
      outside = outside || tp[d]->n == 0;
    }
    if (outside) {
      y[e] = p.extrapolation;
    } else {
      // Sum over the tensor product of every axis' taps.
      double acc = 0;
      for (int d = 0; d < r; ++d) k[d] = 0;
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (int d = 0; d < r; ++d) {
          w *= tp[d]->w[k[d]];
          off += tp[d]->idx[k[d]] * p.in_strides[d];
        }
        acc += w * x[off];
        int d = r - 1;
        for (; d >= 0; --d) {
          if (++k[d] < tp[d]->n) break;
          k[d] = 0;
        }
        if (d < 0) break;
      }
      y[e] = static_cast<float>(acc);
    }
    for (int d = r - 1; d >= 0; --d) {
      if (++oc[d] < p.out[d]) break;
      oc[d] = 0;
    }
  }
}

// Whether only the last two axes change (the image case: N and C kept),
// every other axis mapping each coordinate to itself with weight 1.
bool OnlyLastTwoAxes(const Plan& p) {
  const size_t r = p.out.size();
  if (r < 2) return false;
  for (size_t d = 0; d + 2 < r; ++d)
    if (p.in[d] != p.out[d] || !resize::IsIdentity(p.taps[d])) return false;
  return true;
}

// OnlyLastTwoAxes plans, separably in float32: output columns in chunks of
// kChunk; in each chunk, every input row an output row reads is interpolated
// horizontally once into a small cache (the rows stay the same for several
// output rows when upsampling), then each output row is the vertical
// combination of its cached rows (contiguous, vectorized). No allocation:
// the cache lives on the stack.
void RunResize2dSeparable(const Plan& p, const FlatTaps& ty, const FlatTaps& tx, const float* x, float* y,
                          int64_t begin, int64_t end) {
  constexpr int64_t kChunk = 256;
  const size_t r = p.out.size();
  const int64_t w = p.in[r - 1], oh = p.out[r - 2], ow = p.out[r - 1], h = p.in[r - 2];
  float cache[4][kChunk];
  int64_t cached_row[4];
  for (int64_t plane = begin; plane < end; ++plane) {
    const float* xp = x + plane * h * w;
    float* yp = y + plane * oh * ow;
    for (int64_t c0 = 0; c0 < ow; c0 += kChunk) {
      const int64_t cn = std::min(kChunk, ow - c0);
      for (int64_t& cr : cached_row) cr = -1;
      for (int64_t oy = 0; oy < oh; ++oy) {
        float* yr = yp + oy * ow + c0;
        const int na = ty.n[oy];
        if (na == 0) {
          for (int64_t c = 0; c < cn; ++c) yr[c] = p.extrapolation;
          continue;
        }
        // The cache slot of each tap row, interpolating rows not cached yet
        // into slots no tap of this output row uses.
        int slot[4] = {0, 0, 0, 0};
        bool used[4] = {false, false, false, false};
        for (int i = 0; i < na; ++i) {
          slot[i] = -1;
          for (int k = 0; k < 4; ++k)
            if (cached_row[k] == ty.idx[oy][i]) slot[i] = k;
          if (slot[i] >= 0) used[slot[i]] = true;
        }
        for (int i = 0; i < na; ++i) {
          if (slot[i] >= 0) continue;
          int k = 0;
          while (used[k]) ++k;
          used[k] = true;
          slot[i] = k;
          cached_row[k] = ty.idx[oy][i];
          const float* row = xp + ty.idx[oy][i] * w;
          float* dst = cache[k];
          for (int64_t c = 0; c < cn; ++c) {
            const int64_t ox = c0 + c;
            const int nb = tx.n[ox];
            float v = 0;
            for (int j = 0; j < nb; ++j) v += tx.w[ox][j] * row[tx.idx[ox][j]];
            dst[c] = v;
          }
        }
        const float w0 = ty.w[oy][0];
        const float* r0 = cache[slot[0]];
        if (na == 1) {
          for (int64_t c = 0; c < cn; ++c) yr[c] = w0 * r0[c];
        } else {
          const float w1 = ty.w[oy][1];
          const float* r1 = cache[slot[1]];
          for (int64_t c = 0; c < cn; ++c) yr[c] = w0 * r0[c] + w1 * r1[c];
          for (int i = 2; i < na; ++i) {
            const float wi = ty.w[oy][i];
            const float* ri = cache[slot[i]];
            for (int64_t c = 0; c < cn; ++c) yr[c] += wi * ri[c];
          }
        }
        // Columns outside the crop (tf_crop_and_resize) take the extrapolation value.
        for (int64_t c = 0; c < cn; ++c)
          if (tx.n[c0 + c] == 0) yr[c] = p.extrapolation;
      }
    }
  }
}

Result<std::unique_ptr<Kernel>> CreateResize(const CreateContext& c) {
  Params params;
  FCB_RETURN_IF_ERROR(Parse(AsInfer(c), &params));
  Plan plan;
  plan.in = c.inputs[0].shape;
  plan.out = params.out;
  if (plan.out.size() > static_cast<size_t>(kMaxRank)) return OpUnsupported(c.op, "rank above 16");
  plan.in_strides = DenseStrides(plan.in);
  plan.extrapolation = params.extrapolation;
  for (size_t d = 0; d < plan.out.size(); ++d) {
    if (plan.in[d] == 0 && plan.out[d] > 0) return OpError(c.op, "cannot resize an empty dim");
    plan.taps.push_back(AxisTaps(params, d, plan.in[d], plan.out[d]));
  }
  if (OnlyLastTwoAxes(plan)) {
    const size_t r = plan.out.size();
    const int64_t planes = ir::NumElements(plan.out) / std::max<int64_t>(1, plan.out[r - 2] * plan.out[r - 1]);
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plan.out[r - 2] * plan.out[r - 1]));
    FlatTaps ty(plan.taps[r - 2]), tx(plan.taps[r - 1]);
    return MakeKernel([plan = std::move(plan), ty = std::move(ty), tx = std::move(tx), planes, grain](
                          const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      const float* x = static_cast<const float*>(in[0]);
      float* y = static_cast<float*>(out[0]);
      ctx.pool->ParallelFor(planes, grain,
                            [&](int64_t b, int64_t e) { RunResize2dSeparable(plan, ty, tx, x, y, b, e); });
      return Status::Ok();
    });
  }
  return MakeKernel([plan = std::move(plan)](const RunContext&, const void* const* in,
                                             void* const* out) -> Status {
    RunResize(plan, static_cast<const float*>(in[0]), static_cast<float*>(out[0]));
    return Status::Ok();
  });
}

}  // namespace

void RegisterResizeOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferResize, CreateResize>("Resize", 1, 4));
  ops->push_back(Def<InferResize, CreateResize>("Upsample", 1, 2));
}

}  // namespace fcb::ops
