// ResizeNhwc: ONNX Resize of an NHWC activation that changes only H and W.
//   inputs:  [x NHWC, roi?, scales?, sizes?] (the Resize node's constants, in
//            its NCHW axis order)
//   params:  the Resize node's attributes, unchanged
//   output:  NHWC
// The layout pass makes one from a Resize whose input is already NHWC and
// whose taps along N and C are identities (a U-Net's or a segmentation
// head's upsampling between NHWC convs): the Resize then runs without the
// two transposes around it. Each output pixel is the weighted sum of up to
// 4 x 4 input pixels (the tensor product of the H and W taps, which
// ops/resize.h computes as the NCHW form does), each a contiguous run of
// channels; nearest taps copy the run.

#include <algorithm>
#include <cstring>

#include "ops/internal/internal.h"
#include "ops/lowering.h"
#include "ops/resize.h"

namespace fcb::ops {
namespace {

using resize::FlatTaps;

ir::Shape NhwcToNchw(const ir::Shape& s) { return {s[0], s[3], s[1], s[2]}; }

// The node parsed as the Resize of its logical (NCHW) input, and (ParseNhwc
// only: the layout rule needs no more than the check) the taps of H and W.
struct Geometry {
  resize::Params p;
  ir::Shape in;  // NCHW
  std::vector<resize::Taps> ty, tx;
};

// Parses c as a Resize of logical input `nchw`; false (with no error) when N
// or C change, which the NHWC form does not do.
Result<bool> ParseLogical(const InferContext& c, const ir::Shape& nchw, Geometry* g) {
  std::vector<TensorInfo> inputs = c.inputs;
  inputs[0].shape = nchw;
  const InferContext logical{c.op, c.attrs, inputs, c.constants, c.num_outputs};
  FCB_RETURN_IF_ERROR(resize::Parse(logical, &g->p));
  g->in = nchw;
  for (size_t d = 0; d < 2; ++d)
    if (g->p.out[d] != nchw[d] || !resize::IsIdentity(resize::AxisTaps(g->p, d, nchw[d], g->p.out[d])))
      return false;
  return true;
}

Result<Geometry> ParseNhwc(const InferContext& c) {
  FCB_RETURN_IF_ERROR(internal::ExpectNhwc(c.op, Input(c, 0), "input"));
  Geometry g;
  FCB_ASSIGN_OR_RETURN(bool only_hw, ParseLogical(c, NhwcToNchw(Input(c, 0).shape), &g));
  if (!only_hw) return OpError(c.op, "resizes N or C; the NHWC form resizes only H and W");
  g.ty = resize::AxisTaps(g.p, 2, g.in[2], g.p.out[2]);
  g.tx = resize::AxisTaps(g.p, 3, g.in[3], g.p.out[3]);
  return g;
}

Status InferResizeNhwc(const InferContext& c, std::vector<TensorInfo>* outs) {
  FCB_ASSIGN_OR_RETURN(Geometry g, ParseNhwc(c));
  outs->push_back(TensorInfo{ir::DType::kF32, {g.p.out[0], g.p.out[2], g.p.out[3], g.p.out[1]}});
  return Status::Ok();
}

// Output rows [begin, end) (over batch x height) of the resize.
void ResizeRows(const FlatTaps& ty, const FlatTaps& tx, float extrapolation, int64_t ih, int64_t iw, int64_t oh,
                int64_t ow, int64_t ch, const float* x, float* y, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t b = row / oh, oy = row % oh;
    float* yr = y + row * ow * ch;
    if (ty.n[oy] == 0) {  // outside tf_crop_and_resize's crop
      std::fill(yr, yr + ow * ch, extrapolation);
      continue;
    }
    const float* img = x + b * ih * iw * ch;
    for (int64_t ox = 0; ox < ow; ++ox) {
      float* yp = yr + ox * ch;
      if (tx.n[ox] == 0) {
        std::fill(yp, yp + ch, extrapolation);
        continue;
      }
      bool first = true;
      for (int i = 0; i < ty.n[oy]; ++i) {
        const float* xrow = img + ty.idx[oy][i] * iw * ch;
        for (int j = 0; j < tx.n[ox]; ++j) {
          const float w = ty.w[oy][i] * tx.w[ox][j];
          const float* xp = xrow + tx.idx[ox][j] * ch;
          if (first && w == 1.f) {
            std::memcpy(yp, xp, static_cast<size_t>(ch) * sizeof(float));
          } else if (first) {
            for (int64_t k = 0; k < ch; ++k) yp[k] = w * xp[k];
          } else {
            for (int64_t k = 0; k < ch; ++k) yp[k] += w * xp[k];
          }
          first = false;
        }
      }
    }
  }
}

Result<std::unique_ptr<Kernel>> CreateResizeNhwc(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Geometry g, ParseNhwc(AsInfer(c)));
  const int64_t n = g.in[0], ch = g.in[1], ih = g.in[2], iw = g.in[3];
  const int64_t oh = g.p.out[2], ow = g.p.out[3];
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, ow * ch));
  return MakeKernel([ty = FlatTaps(g.ty), tx = FlatTaps(g.tx), ex = g.p.extrapolation, n, ch, ih, iw, oh, ow,
                     grain](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    ctx.pool->ParallelFor(n * oh, grain, [&](int64_t b, int64_t e) {
      ResizeRows(ty, tx, ex, ih, iw, oh, ow, ch, x, y, b, e);
    });
    return Status::Ok();
  });
}

// Fewer channels than this keep the NCHW form: a pixel's run of channels is
// too short for the per-pixel loop (unet_decoder's one-channel head upsampled
// to 512x512: 0.5 ms in NCHW, 1.3 ms here).
constexpr int64_t kMinChannels = 8;

// A Resize whose input is NHWC by now, that changes only H and W, over at
// least kMinChannels channels, and whose output is not a graph output (that
// returns to NCHW: a transpose of the larger, resized tensor, where the NCHW
// form transposes the smaller input; lraspp's 21-class map resized to
// 520x520 measured 3.9 ms in NCHW against 5.6 + 3.0 here).
Result<bool> FromResize(LayoutContext& c, const ir::Node& n) {
  if (n.op_type != "Resize" || n.outputs.size() != 1 || !c.IsNhwc(n.inputs[0])) return false;
  const ir::Graph& graph = c.graph();
  if (std::find(graph.outputs.begin(), graph.outputs.end(), n.outputs[0]) != graph.outputs.end()) return false;
  if (c.LogicalShape(n.inputs[0])[1] < kMinChannels) return false;  // rank 4: layout rules see only such inputs
  std::vector<TensorInfo> inputs;
  std::vector<const ir::TensorData*> constants;
  for (int v : n.inputs) {
    if (v < 0) {
      inputs.emplace_back();
      constants.push_back(nullptr);
      continue;
    }
    inputs.push_back(TensorInfo{graph.values[v].dtype, c.LogicalShape(v)});
    constants.push_back(graph.values[v].is_constant() ? graph.values[v].constant.get() : nullptr);
  }
  const Attrs attrs = AttrsFromNode(n);
  const InferContext ic{n.op_type, attrs, inputs, constants, 1};
  Geometry g;
  const Result<bool> only_hw = ParseLogical(ic, inputs[0].shape, &g);
  if (!only_hw.ok() || !only_hw.value()) return false;  // the ONNX form runs (or reports the error)
  ir::Node r = internal::NhwcNode(c, n, opname::ResizeNhwc,
                                 std::vector<int>(n.inputs.begin() + 1, n.inputs.end()));
  r.attrs = n.attrs;
  c.EmitNhwc(std::move(r));
  return true;
}

}  // namespace

OpDef DefineResizeNhwc() {
  OpDef d = internal::LoweredOp(opname::ResizeNhwc, 1, 4, InferResizeNhwc, CreateResizeNhwc);
  d.layouts = {{"Resize", FromResize}};
  return d;
}

}  // namespace fcb::ops
