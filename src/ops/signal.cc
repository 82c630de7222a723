// Signal processing: DFT (opset 17), STFT (opset 17), HannWindow,
// HammingWindow, BlackmanWindow and MelWeightMatrix. Scalar kernels in
// double, shared by every target.
//
// Inputs that fix an output shape must be compile-time constants (otherwise
// shape inference refuses the node with Unsupported, which the compiler
// reports naming the node): DFT's dft_length, STFT's frame_step and
// frame_length, the windows' size and every MelWeightMatrix input. The window
// and MelWeightMatrix nodes therefore always fold at compile time.
//
// - DFT: each line transformed by the FFT of fft.h (a plan made at create
//   time: mixed radix, Bluestein for large prime factors, real input as a
//   half-length complex transform), in double, in per-thread scratch; real
//   ([..., 1]) or complex ([..., 2]) input, output complex [..., 2];
//   dft_length truncates or zero-pads; inverse scales by 1 / dft_length;
//   onesided keeps bins [0, dft_length / 2] (forward only).
// - STFT: frames of frame_length at frame_step, times the window (a run-time
//   input allowed; rectangular when absent), each transformed as DFT does;
//   output [batch, frames, bins, 2], onesided (default) for real signals.
// - Windows: periodic (default) divides by size, symmetric by size - 1:
//   Hann 0.5 - 0.5 cos(2 pi n / D), Hamming 25/46 - 21/46 cos(2 pi n / D),
//   Blackman 0.42 - 0.5 cos(2 pi n / D) + 0.08 cos(4 pi n / D).
// - MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters on
//   the mel scale (2595 log10(1 + f / 700)), the ONNX reference's formula:
//   num_mel_bins + 2 points from lower_edge_hertz in mel steps of
//   (mel(upper) - mel(lower)) / (num_mel_bins + 2), mapped to bins
//   floor((dft_length + 1) * f / sample_rate).
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/half.h"
#include "core/thread_pool.h"
#include "ops/families.h"
#include "ops/fft.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr double kTwoPi = 6.283185307179586476925286766559;
// Largest transform / window / matrix edge accepted (create holds tables of
// a few times this many doubles; a transform's scratch is some ten times it).
constexpr int64_t kMaxSignalLen = int64_t{1} << 20;
// Largest MelWeightMatrix (elements; create computes it into a table).
constexpr int64_t kMaxMelElements = int64_t{1} << 26;

// A scalar (or one-element) integer input that fixes the output shape.
Status ShapeScalar(const InferContext& c, size_t i, const char* what, int64_t* v, bool* present) {
  *present = false;
  const TensorInfo& in = Input(c, i);
  if (!in.present()) return Status::Ok();
  if (!IsNumeric(in.dtype)) return OpError(c.op, std::string(what) + " must be numeric");
  if (in.numel() != 1) return OpError(c.op, std::string(what) + " must hold one value");
  const ir::TensorData* t = Constant(c, i);
  if (!t)
    return OpUnsupported(c.op, std::string(what) + " must be a compile-time constant: it fixes the output shape");
  if (t->dtype != in.dtype || t->numel() != 1 || t->bytes.size() != ir::DTypeSize(t->dtype))
    return OpError(c.op, std::string(what) + " constant does not match its declared type");
  const double d = t->GetDouble(0);
  if (!(d >= -static_cast<double>(kMaxElements) && d <= static_cast<double>(kMaxElements)))
    return OpError(c.op, std::string(what) + " is out of range");
  *v = IsFloat(t->dtype) ? static_cast<int64_t>(d) : t->GetInt(0);
  *present = true;
  return Status::Ok();
}

void StoreAs(DType t, void* y, int64_t i, double v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(y)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(y)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(y)[i] = DoubleToHalf(v); break;
    case DType::kBF16: static_cast<uint16_t*>(y)[i] = DoubleToBFloat16(v); break;
    default:
      DispatchNumericOrExtraInt(t, [&](auto tag) {
        using T = decltype(tag);
        static_cast<T*>(y)[i] = static_cast<T>(v);
      });
  }
}

bool OutTypeOk(DType t) { return IsNumeric(t) || IsExtraInt(t) || IsHalf(t); }

double LoadF(DType t, const void* x, int64_t i) {
  return t == DType::kF32 ? static_cast<const float*>(x)[i] : static_cast<const double*>(x)[i];
}

// ---------------------------------------------------------------- DFT

struct DftPlan {
  int64_t axis = 1, n = 0, len = 0, bins = 0, outer = 1, inner = 1, in_c = 1;
  bool inverse = false;
  ir::Shape out;
};

Status ResolveDft(const InferContext& c, DftPlan* p) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (r < 2 || (x.shape.back() != 1 && x.shape.back() != 2))
    return OpError(c.op, "input must be [..., 1] (real) or [..., 2] (complex) with rank >= 2");
  if (Input(c, 2).present()) {  // opset 20's axis input
    int64_t a = 0;
    bool present = false;
    FCB_RETURN_IF_ERROR(ShapeScalar(c, 2, "axis", &a, &present));
    p->axis = a;
  } else {
    p->axis = c.attrs.GetInt("axis", 1);
  }
  if (p->axis < -r || p->axis >= r - 1 || (p->axis < 0 && p->axis + r >= r - 1))
    return OpError(c.op, "axis " + std::to_string(p->axis) + " is out of range (the last dimension holds the complex parts)");
  if (p->axis < 0) p->axis += r;
  p->inverse = c.attrs.GetInt("inverse", 0) != 0;
  const bool onesided = c.attrs.GetInt("onesided", 0) != 0;
  if (onesided && p->inverse) return OpUnsupported(c.op, "onesided inverse DFT");
  p->n = x.shape[p->axis];
  p->len = p->n;
  bool present = false;
  int64_t len = 0;
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 1, "dft_length", &len, &present));
  if (present) p->len = len;
  if (p->len < 1 || p->len > kMaxSignalLen) return OpError(c.op, "dft_length must be in [1, 2^20]");
  p->bins = onesided ? p->len / 2 + 1 : p->len;
  p->in_c = x.shape.back();
  p->outer = SafeProduct(x.shape, 0, static_cast<size_t>(p->axis));
  p->inner = SafeProduct(x.shape, static_cast<size_t>(p->axis) + 1, x.shape.size() - 1);
  p->out = x.shape;
  p->out[p->axis] = p->bins;
  p->out.back() = 2;
  return CheckShape(c.op, p->out, "output");
}

// Per-thread scratch of a transform of length len: the line as doubles (len
// complex), its transform (len complex) and the plan's work space.
uint64_t TransformScratchBytes(int64_t len, bool real) {
  const size_t work = real ? FftPlan::RealWorkDoubles(len) : FftPlan::WorkDoubles(len);
  return (4 * static_cast<uint64_t>(len) + work) * sizeof(double);
}

// Transforms one line already loaded into buf (real: len doubles; complex: len
// interleaved complex values, conjugated for an inverse) and stores bins
// [0, bins) through put(k, re, im): an inverse conjugates the forward
// transform's output and scales it by 1 / len.
template <typename Put>
void TransformLine(const FftPlan& plan, bool real, bool inverse, int64_t bins, double* buf, double* spec,
                   double* work, Put put) {
  const int64_t len = plan.size();
  const double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0, conj = inverse ? -scale : 1.0;
  if (real) {
    plan.Real(buf, spec, work);  // bins [0, len / 2]; the rest are conj(X[len - k])
    for (int64_t k = 0; k < bins; ++k) {
      if (k <= len / 2)
        put(k, spec[2 * k] * scale, spec[2 * k + 1] * conj);
      else
        put(k, spec[2 * (len - k)] * scale, -spec[2 * (len - k) + 1] * conj);
    }
  } else {
    plan.Complex(buf, spec, work);
    for (int64_t k = 0; k < bins; ++k) put(k, spec[2 * k] * scale, spec[2 * k + 1] * conj);
  }
}

Result<uint64_t> ScratchDft(const CreateContext& c) {
  DftPlan p;
  FCB_RETURN_IF_ERROR(ResolveDft(AsInfer(c), &p));
  return TransformScratchBytes(p.len, p.in_c == 1);
}

Result<std::unique_ptr<Kernel>> CreateDft(const CreateContext& c) {
  DftPlan p;
  FCB_RETURN_IF_ERROR(ResolveDft(AsInfer(c), &p));
  const bool real = p.in_c == 1;
  auto plan = std::make_shared<const FftPlan>(p.len, real);
  const DType t = c.inputs[0].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const int64_t m = std::min(p.n, p.len);  // dft_length truncates or zero-pads
    ctx.pool->ParallelForThreads(
        p.outer * p.inner, GrainFor(p.len * 16),
        [&](int th, int64_t l0, int64_t l1) {
          double* buf = static_cast<double*>(ctx.ThreadScratch(th));
          double* spec = buf + 2 * p.len;
          double* work = spec + 2 * p.len;
          for (int64_t l = l0; l < l1; ++l) {
            const int64_t o = l / p.inner, i = l % p.inner;
            const int64_t base = (o * p.n * p.inner + i) * p.in_c, stride = p.inner * p.in_c;
            if (real) {
              for (int64_t j = 0; j < m; ++j) buf[j] = LoadF(t, in[0], base + j * stride);
              std::fill(buf + m, buf + p.len, 0.0);
            } else {
              const double sign = p.inverse ? -1.0 : 1.0;
              for (int64_t j = 0; j < m; ++j) {
                buf[2 * j] = LoadF(t, in[0], base + j * stride);
                buf[2 * j + 1] = sign * LoadF(t, in[0], base + j * stride + 1);
              }
              std::fill(buf + 2 * m, buf + 2 * p.len, 0.0);
            }
            TransformLine(*plan, real, p.inverse, p.bins, buf, spec, work, [&](int64_t k, double re, double im) {
              const int64_t e = ((o * p.bins + k) * p.inner + i) * 2;
              StoreAs(t, out[0], e, re);
              StoreAs(t, out[0], e + 1, im);
            });
          }
        },
        ThreadPool::kChunksPerThread);
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- STFT

struct StftPlan {
  int64_t batch = 0, sig = 0, in_c = 1, step = 0, flen = 0, frames = 0, bins = 0;
  bool window = false;
  ir::Shape out;
};

Status ResolveStft(const InferContext& c, StftPlan* p) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present() || !Input(c, 1).present()) return OpError(c.op, "signal and frame_step are required");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (x.shape.size() != 3 || (x.shape[2] != 1 && x.shape[2] != 2))
    return OpError(c.op, "signal must be [batch, length, 1] or [batch, length, 2]");
  p->batch = x.shape[0];
  p->sig = x.shape[1];
  p->in_c = x.shape[2];
  bool present = false;
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 1, "frame_step", &p->step, &present));
  if (p->step < 1) return OpError(c.op, "frame_step must be >= 1");
  const TensorInfo& w = Input(c, 2);
  p->window = w.present();
  int64_t wlen = -1;
  if (p->window) {
    if (w.dtype != x.dtype) return OpError(c.op, "window must have the signal's dtype");
    if (w.shape.size() != 1) return OpError(c.op, "window must be 1-D");
    wlen = w.shape[0];
  }
  int64_t flen = -1;
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 3, "frame_length", &flen, &present));
  if (!present) flen = wlen;
  if (flen < 0) return OpError(c.op, "frame_length or window is required");
  if (wlen >= 0 && wlen != flen) return OpError(c.op, "window length differs from frame_length");
  if (flen < 1 || flen > kMaxSignalLen) return OpError(c.op, "frame_length must be in [1, 2^20]");
  if (flen > p->sig) return OpError(c.op, "frame_length is longer than the signal");
  p->flen = flen;
  p->frames = (p->sig - flen) / p->step + 1;
  const bool onesided = c.attrs.GetInt("onesided", 1) != 0;
  if (onesided && p->in_c == 2) return OpError(c.op, "onesided needs a real signal");
  p->bins = onesided ? flen / 2 + 1 : flen;
  p->out = {p->batch, p->frames, p->bins, 2};
  return CheckShape(c.op, p->out, "output");
}

Result<uint64_t> ScratchStft(const CreateContext& c) {
  StftPlan p;
  FCB_RETURN_IF_ERROR(ResolveStft(AsInfer(c), &p));
  return TransformScratchBytes(p.flen, p.in_c == 1);
}

Result<std::unique_ptr<Kernel>> CreateStft(const CreateContext& c) {
  StftPlan p;
  FCB_RETURN_IF_ERROR(ResolveStft(AsInfer(c), &p));
  const bool real = p.in_c == 1;
  auto plan = std::make_shared<const FftPlan>(p.flen, real);
  const DType t = c.inputs[0].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    ctx.pool->ParallelForThreads(
        p.batch * p.frames, GrainFor(p.flen * 16),
        [&](int th, int64_t f0, int64_t f1) {
          double* buf = static_cast<double*>(ctx.ThreadScratch(th));
          double* spec = buf + 2 * p.flen;
          double* work = spec + 2 * p.flen;
          for (int64_t f = f0; f < f1; ++f) {
            const int64_t b = f / p.frames, fr = f % p.frames;
            const int64_t base = (b * p.sig + fr * p.step) * p.in_c;
            if (t == DType::kF32 && real) {  // the common case, without per-element dtype dispatch
              const float* x = static_cast<const float*>(in[0]) + base;
              const float* w = p.window ? static_cast<const float*>(in[2]) : nullptr;
              if (w)
                for (int64_t j = 0; j < p.flen; ++j) buf[j] = static_cast<double>(x[j]) * static_cast<double>(w[j]);
              else
                for (int64_t j = 0; j < p.flen; ++j) buf[j] = x[j];
            } else {
              for (int64_t j = 0; j < p.flen; ++j) {
                const double w = p.window ? LoadF(t, in[2], j) : 1.0;
                if (real) {
                  buf[j] = LoadF(t, in[0], base + j) * w;
                } else {
                  buf[2 * j] = LoadF(t, in[0], base + 2 * j) * w;
                  buf[2 * j + 1] = LoadF(t, in[0], base + 2 * j + 1) * w;
                }
              }
            }
            if (t == DType::kF32) {
              float* y = static_cast<float*>(out[0]) + f * p.bins * 2;
              TransformLine(*plan, real, false, p.bins, buf, spec, work, [&](int64_t k, double re, double im) {
                y[2 * k] = static_cast<float>(re);
                y[2 * k + 1] = static_cast<float>(im);
              });
            } else {
              TransformLine(*plan, real, false, p.bins, buf, spec, work, [&](int64_t k, double re, double im) {
                StoreAs(t, out[0], (f * p.bins + k) * 2, re);
                StoreAs(t, out[0], (f * p.bins + k) * 2 + 1, im);
              });
            }
          }
        },
        ThreadPool::kChunksPerThread);
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- windows

Status InferWindow(const InferContext& c, std::vector<TensorInfo>* outs) {
  int64_t n = 0;
  bool present = false;
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 0, "size", &n, &present));
  if (!present) return OpError(c.op, "size is required");
  if (n < 0 || n > kMaxSignalLen) return OpError(c.op, "size must be in [0, 2^20]");
  const DType t = static_cast<DType>(c.attrs.GetInt("output_datatype", 1));
  if (!OutTypeOk(t)) return OpUnsupported(c.op, "output_datatype " + std::to_string(static_cast<int>(t)));
  outs->push_back(TensorInfo{t, {n}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateWindow(const CreateContext& c) {
  const int64_t n = c.outputs[0].shape[0];
  const DType t = c.outputs[0].dtype;
  const bool periodic = c.attrs.GetInt("periodic", 1) != 0;
  const int kind = c.op == "HannWindow" ? 0 : c.op == "HammingWindow" ? 1 : 2;
  std::vector<double> w(static_cast<size_t>(n));
  const double d = static_cast<double>(periodic ? n : n - 1);
  for (int64_t i = 0; i < n; ++i) {
    const double a = d > 0 ? kTwoPi * static_cast<double>(i) / d : 0.0;
    switch (kind) {
      case 0: w[i] = 0.5 - 0.5 * std::cos(a); break;
      case 1: w[i] = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a); break;
      default: w[i] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a); break;
    }
  }
  return MakeKernel([=](const RunContext&, const void* const*, void* const* out) -> Status {
    for (int64_t i = 0; i < n; ++i) StoreAs(t, out[0], i, w[i]);
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- MelWeightMatrix

struct MelPlan {
  int64_t mel = 0, dft = 0, rate = 0;
  double lo = 0, hi = 0;
};

Status ResolveMel(const InferContext& c, MelPlan* p) {
  bool present = false;
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 0, "num_mel_bins", &p->mel, &present));
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 1, "dft_length", &p->dft, &present));
  FCB_RETURN_IF_ERROR(ShapeScalar(c, 2, "sample_rate", &p->rate, &present));
  for (size_t i = 3; i < 5; ++i) {
    const char* what = i == 3 ? "lower_edge_hertz" : "upper_edge_hertz";
    const TensorInfo& in = Input(c, i);
    if (!in.present() || in.numel() != 1 || !IsNumeric(in.dtype)) return OpError(c.op, std::string(what) + " must be a scalar");
    const ir::TensorData* t = Constant(c, i);
    if (!t) return OpUnsupported(c.op, std::string(what) + " must be a compile-time constant");
    if (t->numel() != 1 || t->dtype != in.dtype || t->bytes.size() != ir::DTypeSize(t->dtype))
      return OpError(c.op, std::string(what) + " constant does not match its declared type");
    (i == 3 ? p->lo : p->hi) = t->GetDouble(0);
  }
  if (p->mel < 1 || p->mel > kMaxSignalLen) return OpError(c.op, "num_mel_bins must be in [1, 2^20]");
  if (p->dft < 1 || p->dft > kMaxSignalLen) return OpError(c.op, "dft_length must be in [1, 2^20]");
  if (p->rate < 1) return OpError(c.op, "sample_rate must be >= 1");
  if (!(p->lo >= 0 && p->hi >= p->lo && std::isfinite(p->hi)))
    return OpError(c.op, "need 0 <= lower_edge_hertz <= upper_edge_hertz");
  if ((p->dft / 2 + 1) > kMaxMelElements / p->mel) return OpUnsupported(c.op, "a matrix of more than 2^26 elements");
  return CheckShape(c.op, {p->dft / 2 + 1, p->mel}, "output");
}

Status InferMel(const InferContext& c, std::vector<TensorInfo>* outs) {
  MelPlan p;
  FCB_RETURN_IF_ERROR(ResolveMel(c, &p));
  const DType t = static_cast<DType>(c.attrs.GetInt("output_datatype", 1));
  if (!OutTypeOk(t)) return OpUnsupported(c.op, "output_datatype " + std::to_string(static_cast<int>(t)));
  outs->push_back(TensorInfo{t, {p.dft / 2 + 1, p.mel}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateMel(const CreateContext& c) {
  MelPlan p;
  FCB_RETURN_IF_ERROR(ResolveMel(AsInfer(c), &p));
  const int64_t rows = p.dft / 2 + 1;
  const DType t = c.outputs[0].dtype;
  auto to_mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  const double lo_mel = to_mel(p.lo), hi_mel = to_mel(p.hi);
  // The ONNX reference spaces the num_mel_bins + 2 points by (range) / (num_mel_bins + 2),
  // not / (num_mel_bins + 1): the last point stops short of upper_edge_hertz. Kept so
  // results match the reference and ONNX Runtime.
  const double step = (hi_mel - lo_mel) / static_cast<double>(p.mel + 2);
  std::vector<int64_t> bin(static_cast<size_t>(p.mel + 2));
  for (int64_t i = 0; i < p.mel + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lo_mel) / 2595.0) - 1.0);
    bin[i] = static_cast<int64_t>(std::floor(static_cast<double>(p.dft + 1) * hz / static_cast<double>(p.rate)));
  }
  std::vector<double> w(static_cast<size_t>(rows * p.mel), 0.0);
  for (int64_t m = 0; m < p.mel; ++m) {
    const int64_t left = bin[m], center = bin[m + 1], right = bin[m + 2];
    auto set = [&](int64_t r, double v) {
      if (r >= 0 && r < rows) w[r * p.mel + m] = v;
    };
    if (center == left) {
      set(center, 1.0);
    } else {
      for (int64_t j = left; j <= center; ++j) set(j, static_cast<double>(j - left) / static_cast<double>(center - left));
    }
    if (right > center)
      for (int64_t j = center; j < right; ++j) set(j, static_cast<double>(right - j) / static_cast<double>(right - center));
  }
  return MakeKernel([=](const RunContext&, const void* const*, void* const* out) -> Status {
    for (int64_t i = 0; i < rows * p.mel; ++i) StoreAs(t, out[0], i, w[i]);
    return Status::Ok();
  });
}

}  // namespace

void RegisterSignalOps(std::vector<OpDef>* ops) {
  OpDef dft = Def<InferFromPlan<DftPlan, ResolveDft>, CreateDft>("DFT", 1, 3);
  dft.scratch = ScratchDft;
  ops->push_back(std::move(dft));
  OpDef stft = Def<InferFromPlan<StftPlan, ResolveStft>, CreateStft>("STFT", 2, 4);
  stft.scratch = ScratchStft;
  ops->push_back(std::move(stft));
  for (const char* name : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    ops->push_back(Def<InferWindow, CreateWindow>(name, 1, 1));
  ops->push_back(Def<InferMel, CreateMel>("MelWeightMatrix", 5, 5));
}

}  // namespace fcb::ops
