// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv: integer matrix
// products and convolutions of uint8/int8 operands with 32-bit accumulation
// (and, for the QLinear forms, requantization). The rounding, saturation and
// float-step rules shared with QuantizeLinear are in quant.h.
#include <array>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/conv_ref.h"
#include "ops/families.h"
#include "ops/matmul_geom.h"
#include "ops/op_util.h"
#include "ops/quant.h"

namespace fcb::ops {
namespace {

using namespace quant;

// A scale or zero point that must be one value (a scalar or any shape of one element).
Status ExpectOneValue(const InferContext& c, const TensorInfo& t, const char* name) {
  if (t.present() && t.numel() != 1)
    return OpError(c.op, std::string(name) + " must be a scalar (per-tensor), got shape " +
                             ir::ShapeToString(t.shape));
  return Status::Ok();
}

Status ExpectFloatScale(const InferContext& c, const TensorInfo& t, const char* name) {
  if (!t.present()) return OpError(c.op, std::string(name) + " is required");
  if (t.dtype != DType::kF32)
    return OpUnsupported(c.op, std::string(name) + " has element type " + ir::DTypeName(t.dtype) +
                                   "; only float32 scales are supported");
  return Status::Ok();
}


Status ExpectQuantInput(const InferContext& c, const TensorInfo& t, const char* name) {
  if (!t.present()) return OpError(c.op, std::string(name) + " is required");
  if (!IsInt8Type(t.dtype))
    return OpUnsupported(c.op, std::string(name) + " has element type " + ir::DTypeName(t.dtype) +
                                   "; only uint8 and int8 are supported");
  return Status::Ok();
}
// ------------------------------------------------------------- integer matrix products

// NumPy matmul geometry (1-D operands promoted, batch dims broadcast) plus the
// addressing of per-row parameters of A (zero point, scale) and per-column
// parameters of B: element (batch, row m / column n) of a parameter sits at
// sum(batch index * bst) + m * step (resp. n * step).
struct ParamAddr {
  bool present = false;
  std::vector<int64_t> bst;  // per output batch dim; 0 = broadcast
  int64_t step = 0;          // per row of A / column of B; 0 = one value
};

// The rank check words A and B as the ONNX operators name them.
Status QMatMulShapes(const InferContext& c, const TensorInfo& a, const TensorInfo& b, MatMulGeom* g,
                     ir::Shape* out) {
  if (a.shape.empty() || b.shape.empty()) return OpError(c.op, "A and B must have rank >= 1");
  return MatMulGeometry(c.op, a.shape, b.shape, g, out);
}

// A per-row (of A: rows = true) or per-column (of B) parameter `p` of the
// operand of shape `operand`: one value (a scalar or any one-element tensor:
// per-tensor); a vector of M rows / N columns (the spec's 2-D case, also
// accepted for batched operands: the same for every batch); or the operand's
// rank with shape [..., M, 1] / [..., 1, N] whose leading dims are the
// operand's or 1.
Status ResolveParam(const InferContext& c, const MatMulGeom& g, const ir::Shape& operand, bool rows,
                    const TensorInfo& p, const char* name, ParamAddr* addr) {
  *addr = ParamAddr{};
  addr->bst.assign(g.batch.size(), 0);
  if (!p.present()) return Status::Ok();
  addr->present = true;
  if (p.numel() == 1) return Status::Ok();
  const int64_t len = rows ? g.M : g.N;
  const std::string want = rows ? "[..., M, 1] with M = " + std::to_string(g.M)
                                : "[..., 1, N] with N = " + std::to_string(g.N);
  const std::string bad = std::string(name) + " " + ir::ShapeToString(p.shape) +
                          " is neither a scalar, a vector of " + std::to_string(len) +
                          (rows ? " rows" : " columns") + ", nor of shape " + want +
                          " matching " + ir::ShapeToString(operand);
  if (p.shape.size() == 1) {
    if (p.shape[0] != len || operand.size() < 2) return OpError(c.op, bad);
    addr->step = 1;
    return Status::Ok();
  }
  if (p.shape.size() != operand.size() || operand.size() < 2) return OpError(c.op, bad);
  const size_t r = p.shape.size();
  const int64_t inner_dim = rows ? p.shape[r - 2] : p.shape[r - 1];
  const int64_t unit_dim = rows ? p.shape[r - 1] : p.shape[r - 2];
  if (inner_dim != len || unit_dim != 1) return OpError(c.op, bad);
  int64_t step = len;  // dense strides of p: the matrix part holds len values
  addr->step = 1;
  for (size_t i = 0; i + 2 < r; ++i) {
    const size_t d = r - 3 - i, od = g.batch.size() - 1 - i;
    if (p.shape[d] != 1 && p.shape[d] != operand[d]) return OpError(c.op, bad);
    addr->bst[od] = p.shape[d] == 1 ? 0 : step;
    step *= p.shape[d];
  }
  return Status::Ok();
}

struct BatchOffsets {
  int64_t a = 0, b = 0, pa[2] = {0, 0}, pb[2] = {0, 0};
};

// Offsets of batch item `bi` in A, B and the row / column parameters.
inline BatchOffsets OffsetsOf(const MatMulGeom& g, const ParamAddr* pa, const ParamAddr* pb, int np,
                              int64_t bi) {
  BatchOffsets o;
  for (size_t d = g.batch.size(); d-- > 0;) {
    const int64_t i = bi % g.batch[d];
    bi /= g.batch[d];
    o.a += i * g.a_bst[d];
    o.b += i * g.b_bst[d];
    for (int k = 0; k < np; ++k) {
      o.pa[k] += i * pa[k].bst[d];
      o.pb[k] += i * pb[k].bst[d];
    }
  }
  return o;
}

// acc[n] = sum_k (a[k] - za) * (b[k][n] - zb[n]) in 32-bit wrap-around, for one
// row a of A and the K x N matrix b. The column zero points zb (zb[n * zb_step],
// zb_step 0 = one value, zb null = none) enter through the row sum of the
// shifted a, so the inner loop is a plain multiply-add.
template <typename TA, typename TB>
void AccumulateRow(const TA* a, const TB* b, int64_t N, int64_t K, int32_t za, const TB* zb, int64_t zb_step,
                   uint32_t* acc) {
  std::fill(acc, acc + N, 0u);
  uint32_t row_sum = 0;
  for (int64_t k = 0; k < K; ++k) {
    const uint32_t av = static_cast<uint32_t>(static_cast<int32_t>(a[k]) - za);
    row_sum += av;
    const TB* br = b + k * N;
    for (int64_t n = 0; n < N; ++n) acc[n] += av * static_cast<uint32_t>(static_cast<int32_t>(br[n]));
  }
  if (!zb) return;
  if (zb_step == 0) {
    const uint32_t corr = static_cast<uint32_t>(static_cast<int32_t>(zb[0])) * row_sum;
    for (int64_t n = 0; n < N; ++n) acc[n] -= corr;
  } else {
    for (int64_t n = 0; n < N; ++n)
      acc[n] -= static_cast<uint32_t>(static_cast<int32_t>(zb[n * zb_step])) * row_sum;
  }
}

// Calls f(TA{}, TB{}) for the uint8/int8 types of A and B.
template <typename F>
void DispatchQuantPair(DType a, DType b, F&& f) {
  DispatchQuant(a, [&](auto ta) { DispatchQuant(b, [&](auto tb) { f(ta, tb); }); });
}

constexpr int64_t kRowBlock = 16;

// --- MatMulInteger

struct MatMulIntegerPlan {
  MatMulGeom g;
  DType a = DType::kU8, b = DType::kU8;
  ParamAddr za, zb;
};

Status ResolveMatMulInteger(const InferContext& c, MatMulIntegerPlan* p, ir::Shape* out) {
  const TensorInfo &a = Input(c, 0), &b = Input(c, 1), &za = Input(c, 2), &zb = Input(c, 3);
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, a, "A"));
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, b, "B"));
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, za, a.dtype, "a_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, zb, b.dtype, "b_zero_point"));
  FCB_RETURN_IF_ERROR(QMatMulShapes(c, a, b, &p->g, out));
  FCB_RETURN_IF_ERROR(ResolveParam(c, p->g, a.shape, true, za, "a_zero_point", &p->za));
  FCB_RETURN_IF_ERROR(ResolveParam(c, p->g, b.shape, false, zb, "b_zero_point", &p->zb));
  p->a = a.dtype;
  p->b = b.dtype;
  return Status::Ok();
}

Status InferMatMulInteger(const InferContext& c, std::vector<TensorInfo>* outs) {
  MatMulIntegerPlan p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveMatMulInteger(c, &p, &s));
  outs->push_back(TensorInfo{DType::kI32, std::move(s)});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateMatMulInteger(const CreateContext& c) {
  MatMulIntegerPlan p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveMatMulInteger(AsInfer(c), &p, &s));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const MatMulGeom& g = p.g;
    const int64_t blocks = (g.M + kRowBlock - 1) / kRowBlock;
    const int64_t per_item = std::max<int64_t>(1, std::min(g.M, kRowBlock) * g.N * std::max<int64_t>(g.K, 1));
    // int32 wraps: the output is filled through its unsigned alias.
    uint32_t* y = static_cast<uint32_t*>(out[0]);
    DispatchQuantPair(p.a, p.b, [&](auto ta, auto tb) {
      using TA = decltype(ta);
      using TB = decltype(tb);
      const TA* a = static_cast<const TA*>(in[0]);
      const TB* b = static_cast<const TB*>(in[1]);
      const TA* za = p.za.present ? static_cast<const TA*>(in[2]) : nullptr;
      const TB* zb = p.zb.present ? static_cast<const TB*>(in[3]) : nullptr;
      ctx.pool->ParallelFor(g.batches * blocks, GrainFor(per_item, 1 << 16), [&](int64_t s0, int64_t e0) {
        for (int64_t it = s0; it < e0; ++it) {
          const int64_t bi = it / blocks, m0 = (it % blocks) * kRowBlock, m1 = std::min(g.M, m0 + kRowBlock);
          const BatchOffsets o = OffsetsOf(g, &p.za, &p.zb, 1, bi);
          for (int64_t m = m0; m < m1; ++m) {
            const int32_t zam = za ? static_cast<int32_t>(za[o.pa[0] + m * p.za.step]) : 0;
            AccumulateRow(a + o.a + m * g.K, b + o.b, g.N, g.K, zam, zb ? zb + o.pb[0] : nullptr, p.zb.step,
                          y + (bi * g.M + m) * g.N);
          }
        }
      });
    });
    return Status::Ok();
  });
}

// --- QLinearMatMul

// Per-row scale and zero point of a, per-column of b (the spec's N-D forms),
// per-tensor y_scale / y_zero_point; the output type is y_zero_point's.
struct QLinearMatMulPlan {
  MatMulGeom g;
  DType a = DType::kU8, b = DType::kU8, y = DType::kU8;
  ParamAddr pa[2], pb[2];  // [0] zero point, [1] scale
};

Status ResolveQLinearMatMul(const InferContext& c, QLinearMatMulPlan* p, ir::Shape* out) {
  const TensorInfo &a = Input(c, 0), &as = Input(c, 1), &az = Input(c, 2), &b = Input(c, 3),
                   &bs = Input(c, 4), &bz = Input(c, 5), &ys = Input(c, 6), &yz = Input(c, 7);
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, a, "a"));
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, b, "b"));
  FCB_RETURN_IF_ERROR(ExpectFloatScale(c, as, "a_scale"));
  FCB_RETURN_IF_ERROR(ExpectFloatScale(c, bs, "b_scale"));
  FCB_RETURN_IF_ERROR(ExpectFloatScale(c, ys, "y_scale"));
  if (!az.present() || !bz.present() || !yz.present())
    return OpError(c.op, "a_zero_point, b_zero_point and y_zero_point are required");
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, az, a.dtype, "a_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, bz, b.dtype, "b_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, yz, "y_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, ys, "y_scale"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, yz, "y_zero_point"));
  FCB_RETURN_IF_ERROR(QMatMulShapes(c, a, b, &p->g, out));
  FCB_RETURN_IF_ERROR(ResolveParam(c, p->g, a.shape, true, az, "a_zero_point", &p->pa[0]));
  FCB_RETURN_IF_ERROR(ResolveParam(c, p->g, a.shape, true, as, "a_scale", &p->pa[1]));
  FCB_RETURN_IF_ERROR(ResolveParam(c, p->g, b.shape, false, bz, "b_zero_point", &p->pb[0]));
  FCB_RETURN_IF_ERROR(ResolveParam(c, p->g, b.shape, false, bs, "b_scale", &p->pb[1]));
  p->a = a.dtype;
  p->b = b.dtype;
  p->y = yz.dtype;
  return Status::Ok();
}

Status InferQLinearMatMul(const InferContext& c, std::vector<TensorInfo>* outs) {
  QLinearMatMulPlan p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveQLinearMatMul(c, &p, &s));
  outs->push_back(TensorInfo{p.y, std::move(s)});
  return Status::Ok();
}

// Per thread: one row of int32 accumulators.
Result<uint64_t> ScratchQLinearMatMul(const CreateContext& c) {
  QLinearMatMulPlan p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveQLinearMatMul(AsInfer(c), &p, &s));
  return static_cast<uint64_t>(std::max<int64_t>(p.g.N, 1)) * sizeof(uint32_t);
}

Result<std::unique_ptr<Kernel>> CreateQLinearMatMul(const CreateContext& c) {
  QLinearMatMulPlan p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ResolveQLinearMatMul(AsInfer(c), &p, &s));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const MatMulGeom& g = p.g;
    const float* as = static_cast<const float*>(in[1]);
    const float* bs = static_cast<const float*>(in[4]);
    const float ys = *static_cast<const float*>(in[6]);
    const int32_t yz = IntAt(p.y, in[7], 0);
    const int64_t per_row = std::max<int64_t>(1, g.N * std::max<int64_t>(g.K, 1));
    DispatchQuantPair(p.a, p.b, [&](auto ta, auto tb) {
      using TA = decltype(ta);
      using TB = decltype(tb);
      const TA* a = static_cast<const TA*>(in[0]);
      const TA* az = static_cast<const TA*>(in[2]);
      const TB* b = static_cast<const TB*>(in[3]);
      const TB* bz = static_cast<const TB*>(in[5]);
      DispatchQuant(p.y, [&](auto ty) {
        using Q = decltype(ty);
        Q* y = static_cast<Q*>(out[0]);
        ctx.pool->ParallelForThreads(g.batches * g.M, GrainFor(per_row, 1 << 16), [&](int t, int64_t s0, int64_t e0) {
          uint32_t* acc = static_cast<uint32_t*>(ctx.ThreadScratch(t));
          for (int64_t row = s0; row < e0; ++row) {
            const int64_t bi = row / g.M, m = row % g.M;
            const BatchOffsets o = OffsetsOf(g, p.pa, p.pb, 2, bi);
            const int32_t zam = az[o.pa[0] + m * p.pa[0].step];
            AccumulateRow(a + o.a + m * g.K, b + o.b, g.N, g.K, zam, bz + o.pb[0], p.pb[0].step, acc);
            const float sa = as[o.pa[1] + m * p.pa[1].step];
            Q* yr = y + row * g.N;
            if (p.pb[1].step == 0) {
              const float mult = sa * bs[o.pb[1]] / ys;
              for (int64_t n = 0; n < g.N; ++n) yr[n] = Requantize<Q>(static_cast<int32_t>(acc[n]), mult, yz);
            } else {
              const float* bsr = bs + o.pb[1];
              for (int64_t n = 0; n < g.N; ++n)
                yr[n] = Requantize<Q>(static_cast<int32_t>(acc[n]), sa * bsr[n * p.pb[1].step] / ys, yz);
            }
          }
        });
      });
    });
    return Status::Ok();
  });
}

// ------------------------------------------------------------- integer convolutions

// NCHW convolution of any spatial rank (1-8) with the reference Conv's
// geometry (conv_ref.h). Each output plane (batch, output channel) is
// accumulated tap by tap: for tap t of input channel ic the shifted weight
// wv = w - w_zero_point and wv * x_zero_point are hoisted, and the rows of the
// output that the tap reaches add wv * x - wv * xz over the range of the last
// spatial dim that stays inside the input (padding contributes 0, i.e. x's zero
// point, as in ONNX Runtime and the node tests).
struct QConvPlan {
  ConvNdGeometry g;
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  int64_t in_sp = 1, out_sp = 1, ntaps = 1, rows = 1;  // rows: output positions over all dims but the last
  std::vector<int64_t> in_st;  // input strides of the spatial dims
  std::vector<int64_t> taps;   // per tap and dim: dilated kernel offset minus the begin pad
  std::vector<int64_t> lo, hi;  // per tap: output range of the last dim inside the input
};

Status BuildConvPlan(const InferContext& c, const TensorInfo& x, const TensorInfo& w, QConvPlan* p) {
  if (x.shape.size() < 3) return OpError(c.op, "x must have rank >= 3 (batch, channels, spatial dims)");
  FCB_ASSIGN_OR_RETURN(p->g, ResolveConvNd(c.op, c.attrs, x.shape, w.shape));
  const int r = p->g.rank;
  p->n = x.shape[0];
  p->c = x.shape[1];
  p->m = w.shape[0];
  p->group = c.attrs.GetInt("group", 1);
  if (p->group < 1 || p->c % p->group != 0 || p->m % p->group != 0 || w.shape[1] * p->group != p->c)
    return OpError(c.op, "W " + ir::ShapeToString(w.shape) + " does not fit x's " + std::to_string(p->c) +
                             " channels with group " + std::to_string(p->group));
  p->cg = p->c / p->group;
  p->mg = p->m / p->group;
  p->in_st.assign(r, 1);
  for (int i = r - 1; i >= 0; --i) {
    if (i < r - 1) p->in_st[i] = p->in_st[i + 1] * p->g.in[i + 1];
    p->in_sp *= p->g.in[i];
    p->out_sp *= p->g.out[i];
    p->ntaps *= p->g.k[i];
    if (i < r - 1) p->rows *= p->g.out[i];
  }
  p->taps.assign(p->ntaps * r, 0);
  p->lo.assign(p->ntaps, 0);
  p->hi.assign(p->ntaps, 0);
  const int64_t in_l = p->g.in[r - 1], out_l = p->g.out[r - 1], s_l = p->g.s[r - 1];
  for (int64_t t = 0; t < p->ntaps; ++t) {
    int64_t rem = t;
    for (int i = r - 1; i >= 0; --i) {
      p->taps[t * r + i] = (rem % p->g.k[i]) * p->g.d[i] - p->g.pad_begin[i];
      rem /= p->g.k[i];
    }
    // Last dim: input position ow * s + q must lie in [0, in_l).
    const int64_t q = p->taps[t * r + r - 1];
    const int64_t lo = q >= 0 ? 0 : (-q + s_l - 1) / s_l;
    const int64_t hi = in_l - 1 - q < 0 ? 0 : (in_l - 1 - q) / s_l + 1;
    p->lo[t] = std::min(lo, out_l);
    p->hi[t] = std::min(hi, out_l);
  }
  return Status::Ok();
}

// acc[0, out_sp) = the plane of output channel `oc` of batch item `bi`,
// sum over the group's input channels and the taps of (x - xz) * (w - wz).
template <typename TX, typename TW>
void ConvPlane(const QConvPlan& p, const TX* x, const TW* w, int64_t bi, int64_t oc, int32_t xz, int32_t wz,
               uint32_t* acc) {
  const int r = p.g.rank;
  const int64_t out_l = p.g.out[r - 1], s_l = p.g.s[r - 1];
  std::fill(acc, acc + p.out_sp, 0u);
  const TX* xg = x + (bi * p.c + (oc / p.mg) * p.cg) * p.in_sp;
  const TW* wo = w + oc * p.cg * p.ntaps;
  for (int64_t ic = 0; ic < p.cg; ++ic) {
    const TX* xc = xg + ic * p.in_sp;
    for (int64_t t = 0; t < p.ntaps; ++t) {
      const int64_t lo = p.lo[t], hi = p.hi[t];
      if (lo >= hi) continue;
      const uint32_t wv = static_cast<uint32_t>(static_cast<int32_t>(wo[ic * p.ntaps + t]) - wz);
      const uint32_t corr = wv * static_cast<uint32_t>(xz);
      const int64_t* tap = &p.taps[t * r];
      std::array<int64_t, 8> o{};  // index over the output dims but the last
      for (int64_t row = 0; row < p.rows; ++row) {
        int64_t off = tap[r - 1];
        bool inside = true;
        for (int i = 0; i < r - 1; ++i) {
          const int64_t pos = o[i] * p.g.s[i] + tap[i];
          inside = inside && pos >= 0 && pos < p.g.in[i];
          off += pos * p.in_st[i];
        }
        if (inside) {
          uint32_t* ar = acc + row * out_l;
          for (int64_t ow = lo; ow < hi; ++ow)
            ar[ow] += wv * static_cast<uint32_t>(static_cast<int32_t>(xc[off + ow * s_l])) - corr;
        }
        for (int i = r - 2; i >= 0; --i) {  // next output row
          if (++o[i] < p.g.out[i]) break;
          o[i] = 0;
        }
      }
    }
  }
}

// A parameter that is one value or one per output channel ([M]).
Status ExpectPerChannel(const InferContext& c, const TensorInfo& t, int64_t m, const char* name) {
  if (!t.present() || t.numel() == 1) return Status::Ok();
  if (t.shape.size() != 1 || t.shape[0] != m)
    return OpError(c.op, std::string(name) + " " + ir::ShapeToString(t.shape) +
                             " must be a scalar or hold one value per output channel (" + std::to_string(m) + ")");
  return Status::Ok();
}

// --- ConvInteger

struct ConvIntegerPlan {
  QConvPlan q;
  DType x = DType::kU8, w = DType::kU8;
  bool has_xz = false, has_wz = false, wz_per_channel = false;
};

Status ResolveConvInteger(const InferContext& c, ConvIntegerPlan* p) {
  const TensorInfo &x = Input(c, 0), &w = Input(c, 1), &xz = Input(c, 2), &wz = Input(c, 3);
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, x, "x"));
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, w, "w"));
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, xz, x.dtype, "x_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, wz, w.dtype, "w_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, xz, "x_zero_point"));
  FCB_RETURN_IF_ERROR(BuildConvPlan(c, x, w, &p->q));
  FCB_RETURN_IF_ERROR(ExpectPerChannel(c, wz, p->q.m, "w_zero_point"));
  p->x = x.dtype;
  p->w = w.dtype;
  p->has_xz = xz.present();
  p->has_wz = wz.present();
  p->wz_per_channel = wz.present() && wz.numel() != 1;
  return Status::Ok();
}

ir::Shape ConvOutShape(const QConvPlan& q) {
  ir::Shape s = {q.n, q.m};
  s.insert(s.end(), q.g.out.begin(), q.g.out.end());
  return s;
}

Status InferConvInteger(const InferContext& c, std::vector<TensorInfo>* outs) {
  ConvIntegerPlan p;
  FCB_RETURN_IF_ERROR(ResolveConvInteger(c, &p));
  outs->push_back(TensorInfo{DType::kI32, ConvOutShape(p.q)});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateConvInteger(const CreateContext& c) {
  ConvIntegerPlan p;
  FCB_RETURN_IF_ERROR(ResolveConvInteger(AsInfer(c), &p));
  return MakeKernel([p = std::move(p)](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const QConvPlan& q = p.q;
    const int32_t xz = p.has_xz ? IntAt(p.x, in[2], 0) : 0;
    uint32_t* y = static_cast<uint32_t*>(out[0]);
    const int64_t per_plane = std::max<int64_t>(1, q.out_sp * q.cg * q.ntaps);
    DispatchQuantPair(p.x, p.w, [&](auto tx, auto tw) {
      using TX = decltype(tx);
      using TW = decltype(tw);
      const TX* x = static_cast<const TX*>(in[0]);
      const TW* w = static_cast<const TW*>(in[1]);
      ctx.pool->ParallelFor(q.n * q.m, GrainFor(per_plane, 1 << 16), [&](int64_t s0, int64_t e0) {
        for (int64_t it = s0; it < e0; ++it) {
          const int64_t oc = it % q.m;
          const int32_t wz = p.has_wz ? IntAt(p.w, in[3], p.wz_per_channel ? oc : 0) : 0;
          ConvPlane(q, x, w, it / q.m, oc, xz, wz, y + it * q.out_sp);
        }
      });
    });
    return Status::Ok();
  });
}

// --- QLinearConv

struct QLinearConvPlan {
  QConvPlan q;
  DType x = DType::kU8, w = DType::kU8, y = DType::kU8;
  bool w_scale_per_channel = false, wz_per_channel = false, has_bias = false;
};

Status ResolveQLinearConv(const InferContext& c, QLinearConvPlan* p) {
  const TensorInfo &x = Input(c, 0), &xs = Input(c, 1), &xz = Input(c, 2), &w = Input(c, 3),
                   &ws = Input(c, 4), &wz = Input(c, 5), &ys = Input(c, 6), &yz = Input(c, 7),
                   &bias = Input(c, 8);
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, x, "x"));
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, w, "w"));
  FCB_RETURN_IF_ERROR(ExpectFloatScale(c, xs, "x_scale"));
  FCB_RETURN_IF_ERROR(ExpectFloatScale(c, ws, "w_scale"));
  FCB_RETURN_IF_ERROR(ExpectFloatScale(c, ys, "y_scale"));
  if (!xz.present() || !wz.present() || !yz.present())
    return OpError(c.op, "x_zero_point, w_zero_point and y_zero_point are required");
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, xz, x.dtype, "x_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectZeroPointType(c, wz, w.dtype, "w_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectQuantInput(c, yz, "y_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, xs, "x_scale"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, xz, "x_zero_point"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, ys, "y_scale"));
  FCB_RETURN_IF_ERROR(ExpectOneValue(c, yz, "y_zero_point"));
  FCB_RETURN_IF_ERROR(BuildConvPlan(c, x, w, &p->q));
  FCB_RETURN_IF_ERROR(ExpectPerChannel(c, ws, p->q.m, "w_scale"));
  FCB_RETURN_IF_ERROR(ExpectPerChannel(c, wz, p->q.m, "w_zero_point"));
  if (bias.present() && (bias.dtype != DType::kI32 || bias.shape != ir::Shape{p->q.m}))
    return OpError(c.op, "B must be int32 of shape [" + std::to_string(p->q.m) + "], got " +
                             ir::DTypeName(bias.dtype) + " " + ir::ShapeToString(bias.shape));
  p->x = x.dtype;
  p->w = w.dtype;
  p->y = yz.dtype;
  p->w_scale_per_channel = ws.numel() != 1;
  p->wz_per_channel = wz.numel() != 1;
  p->has_bias = bias.present();
  return Status::Ok();
}

Status InferQLinearConv(const InferContext& c, std::vector<TensorInfo>* outs) {
  QLinearConvPlan p;
  FCB_RETURN_IF_ERROR(ResolveQLinearConv(c, &p));
  outs->push_back(TensorInfo{p.y, ConvOutShape(p.q)});
  return Status::Ok();
}

// Per thread: one output plane of int32 accumulators.
Result<uint64_t> ScratchQLinearConv(const CreateContext& c) {
  QLinearConvPlan p;
  FCB_RETURN_IF_ERROR(ResolveQLinearConv(AsInfer(c), &p));
  return static_cast<uint64_t>(std::max<int64_t>(p.q.out_sp, 1)) * sizeof(uint32_t);
}

Result<std::unique_ptr<Kernel>> CreateQLinearConv(const CreateContext& c) {
  QLinearConvPlan p;
  FCB_RETURN_IF_ERROR(ResolveQLinearConv(AsInfer(c), &p));
  return MakeKernel([p = std::move(p)](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const QConvPlan& q = p.q;
    const float xs = *static_cast<const float*>(in[1]);
    const int32_t xz = IntAt(p.x, in[2], 0);
    const float* ws = static_cast<const float*>(in[4]);
    const float ys = *static_cast<const float*>(in[6]);
    const int32_t yz = IntAt(p.y, in[7], 0);
    const int32_t* bias = p.has_bias ? static_cast<const int32_t*>(in[8]) : nullptr;
    const int64_t per_plane = std::max<int64_t>(1, q.out_sp * q.cg * q.ntaps);
    DispatchQuantPair(p.x, p.w, [&](auto tx, auto tw) {
      using TX = decltype(tx);
      using TW = decltype(tw);
      const TX* x = static_cast<const TX*>(in[0]);
      const TW* w = static_cast<const TW*>(in[3]);
      DispatchQuant(p.y, [&](auto ty) {
        using Q = decltype(ty);
        Q* y = static_cast<Q*>(out[0]);
        ctx.pool->ParallelForThreads(q.n * q.m, GrainFor(per_plane, 1 << 16), [&](int t, int64_t s0, int64_t e0) {
          uint32_t* acc = static_cast<uint32_t*>(ctx.ThreadScratch(t));
          for (int64_t it = s0; it < e0; ++it) {
            const int64_t oc = it % q.m;
            const int32_t wz = IntAt(p.w, in[5], p.wz_per_channel ? oc : 0);
            ConvPlane(q, x, w, it / q.m, oc, xz, wz, acc);
            // ONNX Runtime's multiplier: (x_scale * w_scale) / y_scale in float32.
            const float mult = xs * ws[p.w_scale_per_channel ? oc : 0] / ys;
            const uint32_t b = bias ? static_cast<uint32_t>(bias[oc]) : 0u;
            Q* yp = y + it * q.out_sp;
            for (int64_t i = 0; i < q.out_sp; ++i) yp[i] = Requantize<Q>(static_cast<int32_t>(acc[i] + b), mult, yz);
          }
        });
      });
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterIntegerQuantOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferMatMulInteger, CreateMatMulInteger>("MatMulInteger", 2, 4));
  ops->push_back(Def<InferConvInteger, CreateConvInteger>("ConvInteger", 2, 4));
  OpDef qmm = Def<InferQLinearMatMul, CreateQLinearMatMul>("QLinearMatMul", 8, 8);
  qmm.scratch = ScratchQLinearMatMul;
  ops->push_back(std::move(qmm));
  OpDef qconv = Def<InferQLinearConv, CreateQLinearConv>("QLinearConv", 8, 9);
  qconv.scratch = ScratchQLinearConv;
  ops->push_back(std::move(qconv));
}

}  // namespace fcb::ops