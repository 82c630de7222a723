// EyeLike, ReverseSequence, MaxUnpool, Det and MeanVarianceNormalization:
// plain scalar reference kernels shared by every target.
//
// - EyeLike: the output has the input's (static) shape; ones on diagonal k.
// - ReverseSequence: sequence_lens is read at run time (each length is
//   checked against the time dimension; a bad one fails the run).
// - MaxUnpool: the indices are flat offsets into the output tensor as MaxPool
//   made them (over the default, unpadded output shape [N, C, (in-1)*s - pads
//   + k ...]); with output_shape (which must be a compile-time constant) the
//   spatial result is placed at the origin of the larger output, as ONNX
//   Runtime does. An index outside the default output fails the run.
// - Det: LU with partial pivoting in double, one matrix per work item, the
//   matrix copied into per-thread scratch.
// - MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes`
//   (default [0, 2, 3]), the ONNX function's formula, accumulated in double.
#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

// ---------------------------------------------------------------- EyeLike

bool EyeDType(DType t) { return IsNumeric(t) || IsExtraInt(t) || IsHalf(t) || t == DType::kBool; }

Status InferEyeLike(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (x.shape.size() != 2) return OpError(c.op, "input must be 2-D, got rank " + std::to_string(x.shape.size()));
  DType t = x.dtype;
  if (c.attrs.Has("dtype")) t = static_cast<DType>(c.attrs.GetInt("dtype", 0));
  if (!EyeDType(t)) return OpUnsupported(c.op, "output dtype code " + std::to_string(static_cast<int>(t)));
  outs->push_back(TensorInfo{t, x.shape});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateEyeLike(const CreateContext& c) {
  const DType t = c.outputs[0].dtype;
  const int64_t rows = c.outputs[0].shape[0], cols = c.outputs[0].shape[1];
  const int64_t k = c.attrs.GetInt("k", 0);
  const size_t es = ir::DTypeSize(t);
  uint64_t one = 0;  // the bytes of 1 in dtype t
  switch (t) {
    case DType::kF32: { const float v = 1.f; std::memcpy(&one, &v, 4); break; }
    case DType::kF64: { const double v = 1.0; std::memcpy(&one, &v, 8); break; }
    case DType::kF16: one = 0x3C00; break;
    case DType::kBF16: one = 0x3F80; break;
    default: one = 1; break;  // integers and bool (little-endian)
  }
  return MakeKernel([=](const RunContext&, const void* const*, void* const* out) -> Status {
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    std::memset(y, 0, static_cast<size_t>(rows * cols) * es);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t col = r + k;
      if (col >= 0 && col < cols) std::memcpy(y + (r * cols + col) * es, &one, es);
    }
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- ReverseSequence

Status InferReverseSequence(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& lens = Input(c, 1);
  if (!x.present() || !lens.present()) return OpError(c.op, "input and sequence_lens are required");
  if (!IsKnownDType(x.dtype)) return OpUnsupported(c.op, "input dtype");
  if (x.shape.size() < 2) return OpError(c.op, "input must have rank >= 2");
  const int64_t ta = c.attrs.GetInt("time_axis", 0), ba = c.attrs.GetInt("batch_axis", 1);
  if (!((ta == 0 && ba == 1) || (ta == 1 && ba == 0)))
    return OpError(c.op, "time_axis and batch_axis must be 0 and 1 (either way round)");
  if (lens.dtype != DType::kI64 && lens.dtype != DType::kI32) return OpError(c.op, "sequence_lens must be int64");
  if (lens.shape != ir::Shape{x.shape[ba]}) return OpError(c.op, "sequence_lens must have shape [batch]");
  outs->push_back(x);
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateReverseSequence(const CreateContext& c) {
  const ir::Shape s = c.inputs[0].shape;
  const int64_t ta = c.attrs.GetInt("time_axis", 0);
  const int64_t time = s[ta], batch = s[1 - ta];
  const int64_t inner = SafeProduct(s, 2, s.size());
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  const DType lt = c.inputs[1].dtype;
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const uint8_t* x = static_cast<const uint8_t*>(in[0]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lt == DType::kI64 ? static_cast<const int64_t*>(in[1])[b]
                                            : static_cast<const int32_t*>(in[1])[b];
      if (len < 0 || len > time)
        return OpError("ReverseSequence", "sequence_lens[" + std::to_string(b) + "] = " +
                                              std::to_string(len) + " is outside [0, " + std::to_string(time) + "]");
      for (int64_t t = 0; t < time; ++t) {
        const int64_t src_t = t < len ? len - 1 - t : t;
        const int64_t dst = ta == 0 ? t * batch + b : b * time + t;
        const int64_t src = ta == 0 ? src_t * batch + b : b * time + src_t;
        CopyBytes(y + dst * inner * es, x + src * inner * es, static_cast<size_t>(inner) * es);
      }
    }
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- MaxUnpool

struct UnpoolGeom {
  ir::Shape default_out;  // [N, C, spatial...] from kernel, strides, pads
  ir::Shape out;          // default_out or output_shape
};

Status ResolveUnpool(const InferContext& c, UnpoolGeom* g) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& ind = Input(c, 1);
  if (!x.present() || !ind.present()) return OpError(c.op, "X and I are required");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (ind.dtype != DType::kI64) return OpError(c.op, "I must be int64");
  if (x.shape.size() < 3) return OpError(c.op, "X must have rank >= 3");
  if (ind.shape != x.shape) return OpError(c.op, "I must have X's shape");
  const size_t sp = x.shape.size() - 2;
  const std::vector<int64_t> k = c.attrs.GetInts("kernel_shape");
  if (k.size() != sp) return OpError(c.op, "kernel_shape must have one entry per spatial dimension");
  std::vector<int64_t> st = c.attrs.GetInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = c.attrs.GetInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (st.size() != sp || pads.size() != 2 * sp) return OpError(c.op, "strides/pads have the wrong length");
  g->default_out = {x.shape[0], x.shape[1]};
  for (size_t d = 0; d < sp; ++d) {
    if (k[d] < 1 || st[d] < 1 || pads[d] < 0 || pads[d + sp] < 0 || k[d] > (int64_t{1} << 30) ||
        st[d] > (int64_t{1} << 30) || pads[d] > (int64_t{1} << 30) || pads[d + sp] > (int64_t{1} << 30))
      return OpError(c.op, "kernel_shape, strides and pads must be positive (pads >= 0)");
    if (x.shape[d + 2] > 0 && x.shape[d + 2] - 1 > kMaxElements / st[d])
      return OpError(c.op, "output would be too large");
    const int64_t o = (x.shape[d + 2] - 1) * st[d] - pads[d] - pads[d + sp] + k[d];
    if (o < 0) return OpError(c.op, "output would have a negative dimension");
    g->default_out.push_back(o);
  }
  FCB_RETURN_IF_ERROR(CheckShape(c.op, g->default_out, "output"));
  g->out = g->default_out;
  std::vector<int64_t> os;
  bool present = false;
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, 2, "output_shape", &os, &present));
  if (present) {
    if (os.size() != x.shape.size()) return OpError(c.op, "output_shape must have X's rank");
    if (os[0] != x.shape[0] || os[1] != x.shape[1]) return OpError(c.op, "output_shape must keep N and C");
    for (size_t d = 2; d < os.size(); ++d)
      if (os[d] < g->default_out[d])
        return OpError(c.op, "output_shape must not be smaller than the default output");
    g->out = os;
    FCB_RETURN_IF_ERROR(CheckShape(c.op, g->out, "output_shape"));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateMaxUnpool(const CreateContext& c) {
  UnpoolGeom g;
  FCB_RETURN_IF_ERROR(ResolveUnpool(AsInfer(c), &g));
  const DType t = c.inputs[0].dtype;
  const int64_t n_in = c.inputs[0].numel();
  const int64_t n_def = ir::NumElements(g.default_out), n_out = ir::NumElements(g.out);
  const int rank = static_cast<int>(g.out.size());
  if (rank > kMaxRank) return OpUnsupported(c.op, "rank above 16");
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const int64_t* ind = static_cast<const int64_t*>(in[1]);
    bool ok = true;
    DispatchNumeric(t, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      std::fill(y, y + n_out, T(0));
      for (int64_t i = 0; i < n_in && ok; ++i) {
        int64_t f = ind[i];
        if (f < 0 || f >= n_def) {
          ok = false;
          break;
        }
        // Flat index over default_out -> the same multi-index in out.
        int64_t o = 0, mul = 1;
        for (int d = rank - 1; d >= 0; --d) {
          o += (f % g.default_out[d]) * mul;
          f /= g.default_out[d];
          mul *= g.out[d];
        }
        y[o] = x[i];
      }
    });
    if (!ok) return OpError("MaxUnpool", "an index in I is outside the output");
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- Det

Status InferDet(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  const size_t r = x.shape.size();
  if (r < 2 || x.shape[r - 1] != x.shape[r - 2]) return OpError(c.op, "input must be [..., M, M]");
  if (x.shape[r - 1] > 4096) return OpUnsupported(c.op, "matrices larger than 4096 x 4096");
  outs->push_back(TensorInfo{x.dtype, ir::Shape(x.shape.begin(), x.shape.end() - 2)});
  return Status::Ok();
}

Result<uint64_t> ScratchDet(const CreateContext& c) {
  const int64_t m = c.inputs[0].shape.back();
  return static_cast<uint64_t>(m * m) * sizeof(double);
}

Result<std::unique_ptr<Kernel>> CreateDet(const CreateContext& c) {
  const DType t = c.inputs[0].dtype;
  const int64_t m = c.inputs[0].shape.back();
  const int64_t batch = c.outputs[0].numel();
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    ctx.pool->ParallelForThreads(batch, 1, [&](int th, int64_t b0, int64_t b1) {
      double* a = static_cast<double*>(ctx.ThreadScratch(th));
      for (int64_t b = b0; b < b1; ++b) {
        for (int64_t i = 0; i < m * m; ++i)
          a[i] = t == DType::kF32 ? static_cast<const float*>(in[0])[b * m * m + i]
                                  : static_cast<const double*>(in[0])[b * m * m + i];
        double det = 1;
        for (int64_t col = 0; col < m && det != 0; ++col) {
          int64_t p = col;
          for (int64_t r = col + 1; r < m; ++r)
            if (std::fabs(a[r * m + col]) > std::fabs(a[p * m + col])) p = r;
          if (a[p * m + col] == 0) {
            det = 0;
            break;
          }
          if (p != col) {
            for (int64_t j = 0; j < m; ++j) std::swap(a[p * m + j], a[col * m + j]);
            det = -det;
          }
          const double piv = a[col * m + col];
          det *= piv;
          for (int64_t r = col + 1; r < m; ++r) {
            const double f = a[r * m + col] / piv;
            if (f == 0) continue;
            for (int64_t j = col + 1; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
          }
        }
        if (m == 0) det = 1;
        if (t == DType::kF32) static_cast<float*>(out[0])[b] = static_cast<float>(det);
        else static_cast<double*>(out[0])[b] = det;
      }
    });
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- MeanVarianceNormalization

Status ResolveMvn(const InferContext& c, std::vector<bool>* reduced) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (r > kMaxRank) return OpUnsupported(c.op, "rank above 16");
  std::vector<int64_t> axes;
  FCB_RETURN_IF_ERROR(NormalizeAxes(c.op, c.attrs.GetInts("axes", {0, 2, 3}), r, &axes));
  reduced->assign(static_cast<size_t>(r), false);
  for (int64_t a : axes) (*reduced)[a] = true;
  return Status::Ok();
}

Status InferMvn(const InferContext& c, std::vector<TensorInfo>* outs) {
  std::vector<bool> reduced;
  FCB_RETURN_IF_ERROR(ResolveMvn(c, &reduced));
  outs->push_back(Input(c, 0));
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateMvn(const CreateContext& c) {
  std::vector<bool> reduced;
  FCB_RETURN_IF_ERROR(ResolveMvn(AsInfer(c), &reduced));
  const ir::Shape s = c.inputs[0].shape;
  const std::vector<int64_t> strides = DenseStrides(s);
  // Kept and reduced dims (size, stride), outermost first.
  std::vector<std::pair<int64_t, int64_t>> kept, red;
  int64_t groups = 1, count = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    (reduced[d] ? red : kept).push_back({s[d], strides[d]});
    (reduced[d] ? count : groups) *= s[d];
  }
  const DType t = c.inputs[0].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    auto offset = [](int64_t i, const std::vector<std::pair<int64_t, int64_t>>& dims) {
      int64_t o = 0;
      for (size_t d = dims.size(); d-- > 0;) {
        o += (i % dims[d].first) * dims[d].second;
        i /= dims[d].first;
      }
      return o;
    };
    DispatchNumeric(t, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      ctx.pool->ParallelFor(groups, GrainFor(count), [&](int64_t g0, int64_t g1) {
        for (int64_t g = g0; g < g1; ++g) {
          const int64_t base = offset(g, kept);
          double mean = 0, var = 0;
          for (int64_t i = 0; i < count; ++i) mean += static_cast<double>(x[base + offset(i, red)]);
          mean /= static_cast<double>(count);
          for (int64_t i = 0; i < count; ++i) {
            const double d = static_cast<double>(x[base + offset(i, red)]) - mean;
            var += d * d;
          }
          var /= static_cast<double>(count);
          const double inv = 1.0 / (std::sqrt(var) + 1e-9);
          for (int64_t i = 0; i < count; ++i) {
            const int64_t o = base + offset(i, red);
            y[o] = static_cast<T>((static_cast<double>(x[o]) - mean) * inv);
          }
        }
      });
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterTensorExtraOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferEyeLike, CreateEyeLike>("EyeLike", 1, 1));
  ops->push_back(Def<InferReverseSequence, CreateReverseSequence>("ReverseSequence", 2, 2));
  ops->push_back(Def<InferFromPlan<UnpoolGeom, ResolveUnpool>, CreateMaxUnpool>("MaxUnpool", 2, 3));
  OpDef det = Def<InferDet, CreateDet>("Det", 1, 1);
  det.scratch = ScratchDet;
  ops->push_back(std::move(det));
  ops->push_back(Def<InferMvn, CreateMvn>("MeanVarianceNormalization", 1, 1));
}

}  // namespace fcb::ops
