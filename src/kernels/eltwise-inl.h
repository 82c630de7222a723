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
    int64_t i = begin;
    for (; i + kN <= end; i += kN) hn::StoreU(ApplyActT<A>(d, hn::LoadU(d, x + i), op), d, y + i);
    if (i < end) StoreN(ApplyActT<A>(d, LoadPartial(d, x + i, end - i), op), d, y + i, end - i);
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

void Softmax(const float* x, float* y, int64_t cols, int64_t begin, int64_t end) {
  const DF d;
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Subtracting the row maximum keeps every exponent <= 0: no overflow.
    VF vmax = hn::Set(d, -std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + kN <= cols; i += kN) vmax = hn::Max(vmax, hn::LoadU(d, xr + i));
    float mx = hn::GetLane(hn::MaxOfLanes(d, vmax));
    for (; i < cols; ++i) mx = std::max(mx, xr[i]);
    const VF vm = hn::Set(d, mx);
    VF vsum = hn::Zero(d);
    for (i = 0; i + kN <= cols; i += kN) {
      const VF e = hn::Exp(d, hn::Sub(hn::LoadU(d, xr + i), vm));
      hn::StoreU(e, d, yr + i);
      vsum = hn::Add(vsum, e);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    if (i < cols) {
      StoreN(hn::Exp(d, hn::Sub(LoadPartial(d, xr + i, cols - i), vm)), d, yr + i, cols - i);
      for (; i < cols; ++i) sum += yr[i];
    }
    const VF inv = hn::Set(d, 1.f / sum);
    for (i = 0; i + kN <= cols; i += kN) hn::StoreU(hn::Mul(hn::LoadU(d, yr + i), inv), d, yr + i);
    for (; i < cols; ++i) yr[i] *= 1.f / sum;
  }
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_ELTWISE_INL_H_
