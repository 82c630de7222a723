// Elementwise kernels: activations, binary arithmetic with scalar broadcast,
// and softmax over the last axis. Included once per Highway target.

#if defined(FCB_KERNELS_ELTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_ELTWISE_INL_H_
#undef FCB_KERNELS_ELTWISE_INL_H_
#else
#define FCB_KERNELS_ELTWISE_INL_H_
#endif

#include <cmath>
#include <limits>

#include "hwy/highway.h"
#include "kernels/kernel_ns.h"
#include "kernels/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

HWY_NOINLINE void Unary(const Epilogue& op, const float* x, float* y, int64_t begin, int64_t end) {
  const DF d;
  WithAct(op, [&]<Act A>() {
    constexpr int U = kActVectors;
    int64_t i = begin;
    for (; i + U * kN <= end; i += U * kN) {
      VReg v[U];
      HWY_UNROLL(4)
      for (int u = 0; u < U; ++u) v[u] = hn::LoadU(d, x + i + u * kN);
      ApplyActN<A, U>(d, v, op);
      HWY_UNROLL(4)
      for (int u = 0; u < U; ++u) hn::StoreU(VF(v[u]), d, y + i + u * kN);
    }
    for (; i + kN <= end; i += kN) hn::StoreU(ApplyActT<A>(d, hn::LoadU(d, x + i), op), d, y + i);
    if (i < end) StoreN(ApplyActT<A>(d, LoadPartial(d, x + i, end - i), op), d, y + i, end - i);
  });
}

// Unary in place over the first ncols floats of each of nrows rows (a
// register tile's rows or a kernel's pixels): the whole vectors of all rows
// are taken U at a time, so a tile of 8 rows of 32 columns runs the long
// activations 4 vectors abreast (ApplyActN) instead of 2 per call.
HWY_NOINLINE void UnaryRows(const Epilogue& op, float* const* rows, int nrows, int64_t ncols) {
  const DF d;
  WithAct(op, [&]<Act A>() {
    constexpr int U = kActVectors;
    float* at[U];
    int k = 0;
    const auto flush = [&]<int K>() {
      VReg v[K];
      HWY_UNROLL(4)
      for (int u = 0; u < K; ++u) v[u] = hn::LoadU(d, at[u]);
      ApplyActN<A, K>(d, v, op);
      HWY_UNROLL(4)
      for (int u = 0; u < K; ++u) hn::StoreU(VF(v[u]), d, at[u]);
    };
    for (int r = 0; r < nrows; ++r)
      for (int64_t c = 0; c + kN <= ncols; c += kN) {
        at[k++] = rows[r] + c;
        if (k == U) {
          flush.template operator()<U>();
          k = 0;
        }
      }
    for (int u = 0; u < k; ++u) hn::StoreU(ApplyActT<A>(d, hn::LoadU(d, at[u]), op), d, at[u]);
    const int64_t tail = ncols % kN;
    if (tail != 0)
      for (int r = 0; r < nrows; ++r) {
        float* p = rows[r] + (ncols - tail);
        StoreN(ApplyActT<A>(d, LoadPartial(d, p, tail), op), d, p, tail);
      }
  });
}

// y[i] = f(a[i*sa], b[i*sb]); a stride of 0 broadcasts a[0].
template <class F>
HWY_INLINE void BinaryLoop(const F& f, const float* a, int64_t sa, const float* b, int64_t sb,
                           float* y, int64_t n) {
  const DF d;
  if (n <= 0) return;
  const VF ca = hn::Set(d, a[0]), cb = hn::Set(d, b[0]);
  for (int64_t i = 0; i < n; i += kN) {
    const int64_t m = n - i;
    const VF va = sa ? LoadN(d, a + i, m) : ca;
    const VF vb = sb ? LoadN(d, b + i, m) : cb;
    StoreN(f(va, vb), d, y + i, m);
  }
}

void Binary(BinaryOp op, const float* a, int64_t sa, const float* b, int64_t sb, float* y,
            int64_t n) {
  switch (op) {
    case BinaryOp::kAdd:
      return BinaryLoop([](VF p, VF q) { return hn::Add(p, q); }, a, sa, b, sb, y, n);
    case BinaryOp::kSub:
      return BinaryLoop([](VF p, VF q) { return hn::Sub(p, q); }, a, sa, b, sb, y, n);
    case BinaryOp::kMul:
      return BinaryLoop([](VF p, VF q) { return hn::Mul(p, q); }, a, sa, b, sb, y, n);
    case BinaryOp::kDiv:
      return BinaryLoop([](VF p, VF q) { return hn::Div(p, q); }, a, sa, b, sb, y, n);
    case BinaryOp::kMax:
      return BinaryLoop([](VF p, VF q) { return hn::Max(p, q); }, a, sa, b, sb, y, n);
    case BinaryOp::kMin:
      return BinaryLoop([](VF p, VF q) { return hn::Min(p, q); }, a, sa, b, sb, y, n);
    case BinaryOp::kPow:
      // Highway 1.0.3 has no Pow; the C library's is exact enough and Pow is rare.
      for (int64_t i = 0; i < n; ++i) y[i] = std::pow(a[i * sa], b[i * sb]);
      return;
  }
}

// e^v for v <= 0 or NaN (ExpNonPositive would clamp a NaN to -87).
HWY_INLINE VF ExpKeepNaN(DF d, VF v) { return hn::IfThenElse(hn::Eq(v, v), ExpNonPositive(d, v), v); }

// y[i] = e^(x[i] - max(x)) for n > 0 entries (y may be x); returns their sum,
// the unnormalised softmax of a row. Subtracting the row maximum keeps every
// exponent <= 0: no overflow, and the shorter exponential for non-positive
// arguments (ExpNonPositive; an exponent below -87 gives 1.6e-38 instead of
// 0, which no sum notices).
HWY_INLINE float ExpMinusMax(DF d, const float* x, float* y, int64_t n) {
  VF vmax = hn::Set(d, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kN <= n; i += kN) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const VF vm = hn::Set(d, mx);
  VF vsum = hn::Zero(d);
  for (i = 0; i + kN <= n; i += kN) {
    const VF e = ExpKeepNaN(d, hn::Sub(hn::LoadU(d, x + i), vm));
    hn::StoreU(e, d, y + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  if (i < n) {
    StoreN(ExpKeepNaN(d, hn::Sub(LoadPartial(d, x + i, n - i), vm)), d, y + i, n - i);
    for (; i < n; ++i) sum += y[i];
  }
  return sum;
}

void Softmax(const float* x, float* y, int64_t cols, int64_t begin, int64_t end) {
  const DF d;
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float sum = ExpMinusMax(d, xr, yr, cols);
    // y = e / sum, but 0 where that would be subnormal (e < FLT_MIN sum): an
    // operation with a subnormal result takes a microcode assist of ~100
    // cycles on x86, and a masked attention row (scores of -100 or -inf
    // beside the window) is full of them. Softmax of a 9408x49 input with
    // half of each row at -100: 0.60 -> 0.21 ms, as fast as without the mask.
    const VF inv = hn::Set(d, 1.f / sum);
    const VF tiny = hn::Set(d, std::numeric_limits<float>::min() * sum);
    const auto scaled = [&](VF e) { return hn::Mul(hn::IfThenZeroElse(hn::Lt(e, tiny), e), inv); };
    int64_t i = 0;
    for (; i + kN <= cols; i += kN) hn::StoreU(scaled(hn::LoadU(d, yr + i)), d, yr + i);
    if (i < cols) StoreN(scaled(LoadPartial(d, yr + i, cols - i)), d, yr + i, cols - i);
  }
}

// LayerNormalization, row by row, in three passes over the row (it is in L1
// after the first): the mean, the variance as the mean of (x - mean)^2 (two
// passes: no cancellation for rows whose mean is large against their spread),
// then y. Sums run in four vector accumulators, so a lane adds cols / (4 kN)
// terms; the tail of fewer than kN goes in double.
void LayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t cols, float eps,
               float* mean_out, float* inv_out, int64_t begin, int64_t end) {
  const DF d;
  const int64_t body = cols / kN * kN;
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // The sum of x - x[0]: exact differences for a row whose values lie
    // close together, so a large mean does not cost the spread its precision.
    const float x0 = cols ? xr[0] : 0.f;
    const VF v0 = hn::Set(d, x0);
    VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
    int64_t i = 0;
    for (; i + 4 * kN <= body; i += 4 * kN) {
      s0 = hn::Add(s0, hn::Sub(hn::LoadU(d, xr + i), v0));
      s1 = hn::Add(s1, hn::Sub(hn::LoadU(d, xr + i + kN), v0));
      s2 = hn::Add(s2, hn::Sub(hn::LoadU(d, xr + i + 2 * kN), v0));
      s3 = hn::Add(s3, hn::Sub(hn::LoadU(d, xr + i + 3 * kN), v0));
    }
    for (; i < body; i += kN) s0 = hn::Add(s0, hn::Sub(hn::LoadU(d, xr + i), v0));
    double sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
    for (i = body; i < cols; ++i) sum += double{xr[i]} - x0;
    // The mean as float hi + lo: x - hi is exact for x near the mean, so a
    // row with a large mean keeps its spread's precision.
    const double md = cols ? x0 + sum / static_cast<double>(cols) : 0.0;
    const float m = static_cast<float>(md), m_lo = static_cast<float>(md - m);
    const VF vm = hn::Set(d, m), vm_lo = hn::Set(d, m_lo);
    const auto centered = [&](VF v) { return hn::Sub(hn::Sub(v, vm), vm_lo); };
    s0 = s1 = s2 = s3 = hn::Zero(d);
    for (i = 0; i + 4 * kN <= body; i += 4 * kN) {
      const VF a = centered(hn::LoadU(d, xr + i)), b = centered(hn::LoadU(d, xr + i + kN));
      const VF c = centered(hn::LoadU(d, xr + i + 2 * kN)), e = centered(hn::LoadU(d, xr + i + 3 * kN));
      s0 = hn::MulAdd(a, a, s0), s1 = hn::MulAdd(b, b, s1), s2 = hn::MulAdd(c, c, s2), s3 = hn::MulAdd(e, e, s3);
    }
    for (; i < body; i += kN) {
      const VF a = centered(hn::LoadU(d, xr + i));
      s0 = hn::MulAdd(a, a, s0);
    }
    double ss = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
    for (i = body; i < cols; ++i) ss += (double{xr[i]} - md) * (double{xr[i]} - md);
    const double var = cols ? ss / static_cast<double>(cols) : 0.0;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    const VF vinv = hn::Set(d, inv);
    for (i = 0; i < cols; i += kN) {
      const int64_t n = cols - i;
      const VF a = hn::Mul(centered(LoadN(d, xr + i, n)), vinv);
      const VF s = LoadN(d, scale + i, n);
      StoreN(bias ? hn::MulAdd(a, s, LoadN(d, bias + i, n)) : hn::Mul(a, s), d, yr + i, n);
    }
    if (mean_out) mean_out[r] = m;
    if (inv_out) inv_out[r] = inv;
  }
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_ELTWISE_INL_H_
