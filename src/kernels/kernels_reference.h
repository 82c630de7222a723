// Plain scalar reference implementations for the kernel tests: direct loops
// in double precision over ONNX-layout weights (never over packed data), so a
// packing mistake and a kernel mistake cannot cancel out. Test-only.
#pragma once

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/target.h"

#include "kernels/kernels.h"

namespace fcb::kernels::test_support {

// 64-byte aligned per-thread scratch for calling a kernel directly (the
// runtime hands kernels a slice of the execution's arena instead).
class Scratch {
 public:
  explicit Scratch(int64_t floats) : buf_(static_cast<size_t>(floats) + 16) {}
  float* get() {
    const auto a = reinterpret_cast<uintptr_t>(buf_.data());
    return reinterpret_cast<float*>((a + 63) & ~uintptr_t{63});
  }

 private:
  std::vector<float> buf_;
};

// Uniform values in [lo, hi) from a fixed seed.
inline std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Every target this host can run: the parameter list of the per-target tests.
inline std::vector<TargetId> RunnableHere() {
  std::vector<TargetId> out;
  for (const TargetInfo& t : KnownTargets())
    if (HostCanRun(t.id)) out.push_back(t.id);
  return out;
}

// GoogleTest parameter name for a target ("x86_64_v4").
inline std::string TargetTestName(TargetId id) {
  std::string s = TargetName(id);
  // GoogleTest parameter names are [A-Za-z0-9_]: "armv8.2-a+sve" -> "armv8_2_a_sve".
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

}  // namespace fcb::kernels::test_support

namespace fcb::kernels::reference {

inline double Act(const Epilogue& ep, double x) {
  switch (ep.act) {
    case Act::kNone: return x;
    case Act::kRelu: return std::max(x, 0.0);
    case Act::kClip: return std::min(std::max(x, double{ep.a}), double{ep.b});
    case Act::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Act::kHardSigmoid: return std::max(0.0, std::min(1.0, ep.a * x + ep.b));
    case Act::kHardSwish: return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case Act::kTanh: return std::tanh(x);
    case Act::kLeakyRelu: return x >= 0 ? x : ep.a * x;
    case Act::kSilu: return x / (1.0 + std::exp(-x));
    case Act::kGelu: return 0.5 * x * std::erfc(-x * 0.70710678118654752);
  }
  return x;
}

// NHWC conv with ONNX weights [oc][ic/groups][kh][kw]; writes only channels
// [0, oc) of each output pixel. residual uses `res_stride` floats per pixel.
inline void Conv(const ConvGeom& g, const float* in, const float* w, const float* bias,
                 const float* residual, int64_t res_stride, const Epilogue& ep, float* out) {
  const int64_t icg = g.ic / g.groups, ocg = g.oc / g.groups;
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t p = (b * g.oh + oy) * g.ow + ox;
        for (int64_t o = 0; o < g.oc; ++o) {
          const int64_t grp = o / ocg;
          double s = bias ? bias[o] : 0.0;
          for (int64_t c = 0; c < icg; ++c)
            for (int64_t ky = 0; ky < g.kh; ++ky)
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t iy = oy * g.sh - g.pad_top + ky * g.dh;
                const int64_t ix = ox * g.sw - g.pad_left + kx * g.dw;
                if (iy < 0 || iy >= g.ih || ix < 0 || ix >= g.iw) continue;
                s += double{in[((b * g.ih + iy) * g.iw + ix) * g.in_pixel_stride + grp * icg + c]} *
                     w[((o * icg + c) * g.kh + ky) * g.kw + kx];
              }
          if (residual) s += residual[p * res_stride + o];
          out[p * g.out_pixel_stride + o] = static_cast<float>(Act(ep, s));
        }
      }
}

// C = act(A B + bias), A [M][K] (lda), B [K][N] (ldb), C (ldc).
inline void Gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                 int64_t ldb, const float* bias, const Epilogue& ep, float* C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double{A[m * lda + k]} * B[k * ldb + n];
      C[m * ldc + n] = static_cast<float>(Act(ep, s));
    }
}

// Max (is_max) or average pooling, NHWC.
inline void Pool(const PoolGeom& g, bool is_max, int64_t pad_bottom, int64_t pad_right,
                 const float* in, float* out) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        for (int64_t c = 0; c < g.c; ++c) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t count = 0;
          for (int64_t ky = 0; ky < g.kh; ++ky)
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t iy = oy * g.sh - g.pad_top + ky * g.dh;
              const int64_t ix = ox * g.sw - g.pad_left + kx * g.dw;
              const bool inside = iy >= 0 && iy < g.ih && ix >= 0 && ix < g.iw;
              const bool in_padded = iy >= -g.pad_top && iy < g.ih + pad_bottom &&
                                     ix >= -g.pad_left && ix < g.iw + pad_right;
              if (inside) {
                const double v = in[((b * g.ih + iy) * g.iw + ix) * g.c + c];
                acc = is_max ? std::max(acc, v) : acc + v;
              }
              count += g.count_include_pad ? in_padded : inside;
            }
          out[((b * g.oh + oy) * g.ow + ox) * g.c + c] =
              static_cast<float>(is_max ? acc : acc / static_cast<double>(count));
        }
}

inline double Binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kMax: return std::max(a, b);
    case BinaryOp::kMin: return std::min(a, b);
    case BinaryOp::kPow: return std::pow(a, b);
  }
  return 0;
}

// LayerNormalization of one row in double: y, and the mean and 1/sqrt(var + eps).
inline void LayerNormRow(const float* x, const float* scale, const float* bias, int64_t cols, double eps,
                         std::vector<double>* y, double* mean, double* inv_std) {
  double s = 0, ss = 0;
  for (int64_t i = 0; i < cols; ++i) s += x[i];
  const double m = s / static_cast<double>(cols);
  for (int64_t i = 0; i < cols; ++i) ss += (x[i] - m) * (x[i] - m);
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
  y->resize(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) (*y)[i] = (x[i] - m) * inv * scale[i] + (bias ? bias[i] : 0.0);
  *mean = m;
  *inv_std = inv;
}

// One attention row (AttentionRow) in double: scores, softcap, additive
// terms, softmax with the maximum subtracted, weighted sum of the values.
inline std::vector<double> AttentionRow(const kernels::AttentionRow& r) {
  std::vector<double> sc(static_cast<size_t>(r.n)), out(static_cast<size_t>(r.vhead), 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < r.n; ++j) {
    double s = 0;
    for (int64_t i = 0; i < r.head; ++i) s += double{r.q[i]} * r.k[j * r.k_stride + i];
    s *= r.scale;
    if (r.softcap > 0) s = r.softcap * std::tanh(s / r.softcap);
    if (r.add) s += r.add[j];
    sc[static_cast<size_t>(j)] = s;
    mx = std::max(mx, s);
  }
  double sum = 0;
  for (double& s : sc) sum += (s = std::exp(s - mx));
  for (int64_t j = 0; j < r.n; ++j)
    for (int64_t i = 0; i < r.vhead; ++i) out[static_cast<size_t>(i)] += sc[static_cast<size_t>(j)] / sum * r.v[j * r.v_stride + i];
  return out;
}

}  // namespace fcb::kernels::reference
