// GridSample (opset 16) and RoiAlign (opset 16): scalar reference kernels,
// computed in double, shared by every target.
//
// GridSample: X [N, C, H, W], grid [N, Ho, Wo, 2] holding normalized (x, y)
// in [-1, 1]; Y [N, C, Ho, Wo]. A grid point is denormalized to pixel units
// (align_corners: (g + 1) / 2 * (size - 1), else ((g + 1) * size - 1) / 2);
// `nearest` rounds it half to even; a point outside the border box
// ([0, size - 1] with align_corners, [-0.5, size - 0.5] without) is clamped to
// [0, size - 1] (`border`) or reflected into the box (`reflection`), each
// coordinate on its own; then the
// pixels are read with the padding rule (zeros: 0 outside; border: clamped;
// reflection: reflected) and interpolated: nearest, bilinear (2 x 2) or
// bicubic (4 x 4, Keys' kernel with a = -0.75). The opset-20 spellings
// `linear` and `cubic` are accepted too. These are the rules of the ONNX
// reference and ONNX Runtime.
//
// RoiAlign: X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2 in input units before
// spatial_scale), batch_indices [R]; Y [R, C, output_height, output_width].
// Each output bin averages (mode avg) or takes the maximum (mode max) of
// sampling_ratio^2 bilinear samples (sampling_ratio 0: ceil(roi size / bins)
// per axis). half_pixel shifts the scaled box by -0.5; output_half_pixel
// (RoiAlign-10's meaning) does not, and makes the box at least 1 x 1. A
// sample beyond one pixel outside the image counts as 0. In max mode each
// sample contributes the largest of its four weighted corner values, as the
// ONNX reference and ONNX Runtime define it. batch_indices are checked at run
// time.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

// ---------------------------------------------------------------- GridSample

enum class GsMode { kNearest, kBilinear, kBicubic };
enum class GsPad { kZeros, kBorder, kReflection };

struct GsConfig {
  GsMode mode = GsMode::kBilinear;
  GsPad pad = GsPad::kZeros;
  bool align = false;
};

Status ResolveGridSample(const InferContext& c, GsConfig* g, ir::Shape* out) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& grid = Input(c, 1);
  if (!x.present() || !grid.present()) return OpError(c.op, "X and grid are required");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("X dtype ") + ir::DTypeName(x.dtype));
  if (!IsFloat(grid.dtype)) return OpUnsupported(c.op, std::string("grid dtype ") + ir::DTypeName(grid.dtype));
  if (x.shape.size() != 4) return OpUnsupported(c.op, "only 4-D X (N, C, H, W) is supported");
  if (x.shape[2] < 1 || x.shape[3] < 1) return OpError(c.op, "X must have H, W >= 1");
  if (grid.shape.size() != 4 || grid.shape[3] != 2 || grid.shape[0] != x.shape[0])
    return OpError(c.op, "grid must be [N, H_out, W_out, 2] with X's N");
  const std::string mode = c.attrs.GetString("mode", "bilinear");
  if (mode == "bilinear" || mode == "linear") g->mode = GsMode::kBilinear;
  else if (mode == "nearest") g->mode = GsMode::kNearest;
  else if (mode == "bicubic" || mode == "cubic") g->mode = GsMode::kBicubic;
  else return OpError(c.op, "unknown mode '" + mode + "'");
  const std::string pad = c.attrs.GetString("padding_mode", "zeros");
  if (pad == "zeros") g->pad = GsPad::kZeros;
  else if (pad == "border") g->pad = GsPad::kBorder;
  else if (pad == "reflection") g->pad = GsPad::kReflection;
  else return OpError(c.op, "unknown padding_mode '" + pad + "'");
  g->align = c.attrs.GetInt("align_corners", 0) != 0;
  *out = {x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]};
  return CheckShape(c.op, *out, "output");
}

double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = std::floor(dx / range), r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

void CubicCoeffs(double t, double w[4]) {
  constexpr double a = -0.75;
  t = std::fabs(t);
  const double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  w[0] = ((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1;
  w[3] = ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a;
}

template <typename T, typename G>
void GridSampleRun(const GsConfig& g, const T* x, const G* grid, T* y, int64_t n0, int64_t n1, int64_t C,
                   int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  const double x_min = g.align ? 0.0 : -0.5, x_max = g.align ? W - 1.0 : W - 0.5;
  const double y_min = g.align ? 0.0 : -0.5, y_max = g.align ? H - 1.0 : H - 0.5;
  for (int64_t nc = n0; nc < n1; ++nc) {
    const int64_t n = nc / C;
    const T* img = x + nc * H * W;
    const G* gr = grid + n * Ho * Wo * 2;
    T* out = y + nc * Ho * Wo;
    auto pixel = [&](int64_t r, int64_t col) -> double {
      switch (g.pad) {
        case GsPad::kZeros:
          return (r >= 0 && r < H && col >= 0 && col < W) ? static_cast<double>(img[r * W + col]) : 0.0;
        case GsPad::kBorder:
          r = std::clamp<int64_t>(r, 0, H - 1);
          col = std::clamp<int64_t>(col, 0, W - 1);
          return static_cast<double>(img[r * W + col]);
        case GsPad::kReflection:
          col = static_cast<int64_t>(Reflect(static_cast<double>(col), x_min, x_max));
          r = static_cast<int64_t>(Reflect(static_cast<double>(r), y_min, y_max));
          r = std::clamp<int64_t>(r, 0, H - 1);  // guards rounding at the box edge
          col = std::clamp<int64_t>(col, 0, W - 1);
          return static_cast<double>(img[r * W + col]);
      }
      return 0.0;
    };
    for (int64_t p = 0; p < Ho * Wo; ++p) {
      const double gx = static_cast<double>(gr[2 * p]), gy = static_cast<double>(gr[2 * p + 1]);
      double px = g.align ? (gx + 1) / 2 * (W - 1) : ((gx + 1) * W - 1) / 2;
      double py = g.align ? (gy + 1) / 2 * (H - 1) : ((gy + 1) * H - 1) / 2;
      if (g.mode == GsMode::kNearest) {
        px = std::nearbyint(px);
        py = std::nearbyint(py);
      }
      if (!std::isfinite(px) || !std::isfinite(py)) {
        out[p] = static_cast<T>(g.pad == GsPad::kZeros ? 0.0 : std::nan(""));
        continue;
      }
      // Each coordinate on its own (as the ONNX reference does per dimension).
      if (g.pad == GsPad::kBorder) {
        if (px < x_min || px > x_max) px = std::clamp(px, 0.0, W - 1.0);
        if (py < y_min || py > y_max) py = std::clamp(py, 0.0, H - 1.0);
      } else if (g.pad == GsPad::kReflection) {
        px = Reflect(px, x_min, x_max);
        py = Reflect(py, y_min, y_max);
      }
      // Far outside (zeros padding): every neighbour reads 0.
      if (std::fabs(px) > 1e15 || std::fabs(py) > 1e15) {
        out[p] = T(0);
        continue;
      }
      double v = 0;
      if (g.mode == GsMode::kNearest) {
        v = pixel(static_cast<int64_t>(py), static_cast<int64_t>(px));
      } else if (g.mode == GsMode::kBilinear) {
        const double fx = std::floor(px), fy = std::floor(py);
        const int64_t x1 = static_cast<int64_t>(fx), y1 = static_cast<int64_t>(fy);
        const double dx = px - fx, dy = py - fy;
        v = (1 - dy) * ((1 - dx) * pixel(y1, x1) + dx * pixel(y1, x1 + 1)) +
            dy * ((1 - dx) * pixel(y1 + 1, x1) + dx * pixel(y1 + 1, x1 + 1));
      } else {
        const double fx = std::floor(px), fy = std::floor(py);
        const int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
        double wx[4], wy[4];
        CubicCoeffs(px - fx, wx);
        CubicCoeffs(py - fy, wy);
        for (int i = 0; i < 4; ++i) {
          double row = 0;
          for (int j = 0; j < 4; ++j) row += wx[j] * pixel(y0 + i, x0 + j);
          v += wy[i] * row;
        }
      }
      out[p] = static_cast<T>(v);
    }
  }
}

Result<std::unique_ptr<Kernel>> CreateGridSample(const CreateContext& c) {
  GsConfig g;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveGridSample(AsInfer(c), &g, &s));
  const ir::Shape xs = c.inputs[0].shape;
  const DType xt = c.inputs[0].dtype, gt = c.inputs[1].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const int64_t nc = xs[0] * xs[1];
    ctx.pool->ParallelFor(nc, GrainFor(s[2] * s[3] * 8), [&](int64_t b0, int64_t b1) {
      DispatchNumeric(xt, [&](auto xtag) {
        using T = decltype(xtag);
        if constexpr (std::is_floating_point_v<T>) {
          auto run = [&](auto gtag) {
            using G = decltype(gtag);
            GridSampleRun(g, static_cast<const T*>(in[0]), static_cast<const G*>(in[1]), static_cast<T*>(out[0]),
                          b0, b1, xs[1], xs[2], xs[3], s[2], s[3]);
          };
          if (gt == DType::kF32) run(float{});
          else run(double{});
        }
      });
    });
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- RoiAlign

struct RoiConfig {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t oh = 1, ow = 1, sampling = 0;
  double scale = 1.0;
};

Status ResolveRoiAlign(const InferContext& c, RoiConfig* r, ir::Shape* out) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& rois = Input(c, 1);
  const TensorInfo& bi = Input(c, 2);
  if (!x.present() || !rois.present() || !bi.present()) return OpError(c.op, "X, rois and batch_indices are required");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (rois.dtype != x.dtype) return OpError(c.op, "rois must have X's dtype");
  if (bi.dtype != DType::kI64 && bi.dtype != DType::kI32) return OpError(c.op, "batch_indices must be int64");
  if (x.shape.size() != 4) return OpError(c.op, "X must be 4-D (N, C, H, W)");
  if (rois.shape.size() != 2 || rois.shape[1] != 4) return OpError(c.op, "rois must be [num_rois, 4]");
  if (bi.shape != ir::Shape{rois.shape[0]}) return OpError(c.op, "batch_indices must be [num_rois]");
  const std::string mode = c.attrs.GetString("mode", "avg");
  if (mode != "avg" && mode != "max") return OpError(c.op, "mode must be avg or max, not '" + mode + "'");
  r->max_mode = mode == "max";
  const std::string ctm = c.attrs.GetString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return OpError(c.op, "coordinate_transformation_mode must be half_pixel or output_half_pixel");
  r->half_pixel = ctm == "half_pixel";
  r->oh = c.attrs.GetInt("output_height", 1);
  r->ow = c.attrs.GetInt("output_width", 1);
  r->sampling = c.attrs.GetInt("sampling_ratio", 0);
  r->scale = c.attrs.GetFloat("spatial_scale", 1.f);
  if (r->oh < 1 || r->ow < 1 || r->oh > (int64_t{1} << 20) || r->ow > (int64_t{1} << 20))
    return OpError(c.op, "output_height and output_width must be >= 1");
  if (r->sampling < 0 || r->sampling > 1024) return OpError(c.op, "sampling_ratio must be in [0, 1024]");
  if (!std::isfinite(r->scale)) return OpError(c.op, "spatial_scale must be finite");
  *out = {rois.shape[0], x.shape[1], r->oh, r->ow};
  return CheckShape(c.op, *out, "output");
}

template <typename T>
void RoiAlignOne(const RoiConfig& r, const T* img, int64_t H, int64_t W, const T* roi, T* out) {
  const double off = r.half_pixel ? 0.5 : 0.0;
  const double sw = static_cast<double>(roi[0]) * r.scale - off, sh = static_cast<double>(roi[1]) * r.scale - off;
  const double ew = static_cast<double>(roi[2]) * r.scale - off, eh = static_cast<double>(roi[3]) * r.scale - off;
  double rw = ew - sw, rh = eh - sh;
  if (!r.half_pixel) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  const double bh = rh / static_cast<double>(r.oh), bw = rw / static_cast<double>(r.ow);
  // Sample counts per bin, bounded so a huge box cannot stall the run.
  auto grid_n = [&](double bin) -> int64_t {
    if (r.sampling > 0) return r.sampling;
    const double n = std::ceil(bin);
    return !(n >= 1) ? 1 : n > 1024 ? 1024 : static_cast<int64_t>(n);
  };
  const int64_t gh = grid_n(bh), gw = grid_n(bw);
  const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
  for (int64_t ph = 0; ph < r.oh; ++ph)
    for (int64_t pw = 0; pw < r.ow; ++pw) {
      double acc = 0;
      bool first = true;
      for (int64_t iy = 0; iy < gh; ++iy) {
        double y = sh + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
        for (int64_t ix = 0; ix < gw; ++ix) {
          double x = sw + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
          double v;
          if (!(y >= -1.0 && y <= static_cast<double>(H) && x >= -1.0 && x <= static_cast<double>(W))) {
            v = 0;
          } else {
            double yy = std::max(y, 0.0), xx = std::max(x, 0.0);
            int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yhi, xhi;
            if (yl >= H - 1) {
              yl = yhi = H - 1;
              yy = static_cast<double>(yl);
            } else {
              yhi = yl + 1;
            }
            if (xl >= W - 1) {
              xl = xhi = W - 1;
              xx = static_cast<double>(xl);
            } else {
              xhi = xl + 1;
            }
            const double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
            const double v1 = hy * hx * img[yl * W + xl], v2 = hy * lx * img[yl * W + xhi];
            const double v3 = ly * hx * img[yhi * W + xl], v4 = ly * lx * img[yhi * W + xhi];
            v = r.max_mode ? std::max(std::max(v1, v2), std::max(v3, v4)) : v1 + v2 + v3 + v4;
          }
          if (r.max_mode) {
            acc = first ? v : std::max(acc, v);
            first = false;
          } else {
            acc += v;
          }
        }
      }
      out[ph * r.ow + pw] = static_cast<T>(r.max_mode ? acc : acc / count);
    }
}

Result<std::unique_ptr<Kernel>> CreateRoiAlign(const CreateContext& c) {
  RoiConfig r;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveRoiAlign(AsInfer(c), &r, &s));
  const ir::Shape xs = c.inputs[0].shape;
  const DType t = c.inputs[0].dtype, bt = c.inputs[2].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const int64_t R = s[0], C = s[1], N = xs[0], H = xs[2], W = xs[3];
    for (int64_t i = 0; i < R; ++i) {
      const int64_t b = bt == DType::kI64 ? static_cast<const int64_t*>(in[2])[i] : static_cast<const int32_t*>(in[2])[i];
      if (b < 0 || b >= N)
        return OpError("RoiAlign", "batch_indices[" + std::to_string(i) + "] = " + std::to_string(b) +
                                       " is outside [0, " + std::to_string(N) + ")");
    }
    if (H == 0 || W == 0) {  // nothing to sample: every bin is 0
      DispatchNumeric(t, [&](auto tag) {
        using T = decltype(tag);
        std::fill(static_cast<T*>(out[0]), static_cast<T*>(out[0]) + R * C * r.oh * r.ow, T(0));
      });
      return Status::Ok();
    }
    ctx.pool->ParallelFor(R * C, GrainFor(r.oh * r.ow * 16), [&](int64_t j0, int64_t j1) {
      DispatchNumeric(t, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
          for (int64_t j = j0; j < j1; ++j) {
            const int64_t i = j / C, ch = j % C;
            const int64_t b = bt == DType::kI64 ? static_cast<const int64_t*>(in[2])[i]
                                                : static_cast<const int32_t*>(in[2])[i];
            RoiAlignOne(r, static_cast<const T*>(in[0]) + (b * C + ch) * H * W, H, W,
                        static_cast<const T*>(in[1]) + i * 4, static_cast<T*>(out[0]) + j * r.oh * r.ow);
          }
        }
      });
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterSamplingOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferFromShape<GsConfig, ResolveGridSample>, CreateGridSample>("GridSample", 2, 2));
  ops->push_back(Def<InferFromShape<RoiConfig, ResolveRoiAlign>, CreateRoiAlign>("RoiAlign", 3, 3));
}

}  // namespace fcb::ops
