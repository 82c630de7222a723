// Fused attention of one query row (KernelTable::attention): the scores of
// its keys in the caller's scratch, a float32 softmax with the maximum
// subtracted, and the weighted sum of the value rows, without a score matrix.
// Included once per Highway target.

#if defined(FCB_KERNELS_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_ATTENTION_INL_H_
#undef FCB_KERNELS_ATTENTION_INL_H_
#else
#define FCB_KERNELS_ATTENTION_INL_H_
#endif

#include <cmath>
#include <limits>

#include "hwy/highway.h"
#include "kernels/kernel_ns.h"
#include "kernels/common-inl.h"
#include "kernels/eltwise-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {

// q . k over h floats.
HWY_INLINE float Dot(DF d, const float* q, const float* k, int64_t h) {
  VF a0 = hn::Zero(d), a1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * kN <= h; i += 2 * kN) {
    a0 = hn::MulAdd(hn::LoadU(d, q + i), hn::LoadU(d, k + i), a0);
    a1 = hn::MulAdd(hn::LoadU(d, q + i + kN), hn::LoadU(d, k + i + kN), a1);
  }
  for (; i + kN <= h; i += kN) a0 = hn::MulAdd(hn::LoadU(d, q + i), hn::LoadU(d, k + i), a0);
  if (i < h) a1 = hn::MulAdd(LoadPartial(d, q + i, h - i), LoadPartial(d, k + i, h - i), a1);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
}

// The dot products of q with four key rows at once: q is loaded once per
// four keys, and the four horizontal sums overlap.
HWY_INLINE void Dot4(DF d, const float* q, const float* k, int64_t ks, int64_t h, float scale, float* out) {
  const float *k0 = k, *k1 = k + ks, *k2 = k + 2 * ks, *k3 = k + 3 * ks;
  VF a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + kN <= h; i += kN) {
    const VF qv = hn::LoadU(d, q + i);
    a0 = hn::MulAdd(qv, hn::LoadU(d, k0 + i), a0);
    a1 = hn::MulAdd(qv, hn::LoadU(d, k1 + i), a1);
    a2 = hn::MulAdd(qv, hn::LoadU(d, k2 + i), a2);
    a3 = hn::MulAdd(qv, hn::LoadU(d, k3 + i), a3);
  }
  if (i < h) {
    const VF qv = LoadPartial(d, q + i, h - i);
    a0 = hn::MulAdd(qv, LoadPartial(d, k0 + i, h - i), a0);
    a1 = hn::MulAdd(qv, LoadPartial(d, k1 + i, h - i), a1);
    a2 = hn::MulAdd(qv, LoadPartial(d, k2 + i, h - i), a2);
    a3 = hn::MulAdd(qv, LoadPartial(d, k3 + i, h - i), a3);
  }
  out[0] = hn::GetLane(hn::SumOfLanes(d, a0)) * scale;
  out[1] = hn::GetLane(hn::SumOfLanes(d, a1)) * scale;
  out[2] = hn::GetLane(hn::SumOfLanes(d, a2)) * scale;
  out[3] = hn::GetLane(hn::SumOfLanes(d, a3)) * scale;
}

// acc[0..h) += w * v[0..h) for four rows at once (fewer passes over acc).
HWY_INLINE void Axpy4(DF d, const float* w, const float* v0, const float* v1, const float* v2, const float* v3,
                      float* acc, int64_t h) {
  const VF w0 = hn::Set(d, w[0]), w1 = hn::Set(d, w[1]), w2 = hn::Set(d, w[2]), w3 = hn::Set(d, w[3]);
  int64_t i = 0;
  for (; i + kN <= h; i += kN) {
    VF a = hn::LoadU(d, acc + i);
    a = hn::MulAdd(w0, hn::LoadU(d, v0 + i), a);
    a = hn::MulAdd(w1, hn::LoadU(d, v1 + i), a);
    a = hn::MulAdd(w2, hn::LoadU(d, v2 + i), a);
    a = hn::MulAdd(w3, hn::LoadU(d, v3 + i), a);
    hn::StoreU(a, d, acc + i);
  }
  for (; i < h; ++i) acc[i] += w[0] * v0[i] + w[1] * v1[i] + w[2] * v2[i] + w[3] * v3[i];
}

HWY_NOINLINE void Attention(const AttentionRow& r, float* scratch) {
  const DF d;
  const int64_t n = r.n, h = r.head, hv = r.vhead;
  float* sc = scratch;                              // n scores, then weights
  float* acc = scratch + AttentionScoreFloats(n);   // hv sums
  if (n <= 0) {
    for (int64_t i = 0; i < hv; ++i) r.out[i] = 0.f;
    return;
  }
  {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) Dot4(d, r.q, r.k + j * r.k_stride, r.k_stride, h, r.scale, sc + j);
    for (; j < n; ++j) sc[j] = Dot(d, r.q, r.k + j * r.k_stride, h) * r.scale;
  }
  if (r.softcap > 0.f) {
    const float inv = 1.f / r.softcap;
    for (int64_t j = 0; j < n; ++j) sc[j] = r.softcap * std::tanh(sc[j] * inv);
  }
  if (r.add)
    for (int64_t j = 0; j < n; ++j) sc[j] += r.add[j];
  // Softmax weights, unnormalised: e^(s - max).
  const float sum = ExpMinusMax(d, sc, sc, n);
  // The weighted sum of the value rows, normalised once at the end.
  for (int64_t i = 0; i < hv; ++i) acc[i] = 0.f;
  const float* v = r.v;
  const int64_t vs = r.v_stride;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    Axpy4(d, sc + j, v + j * vs, v + (j + 1) * vs, v + (j + 2) * vs, v + (j + 3) * vs, acc, hv);
  for (; j < n; ++j) {
    const float w = sc[j];
    const float* vj = v + j * vs;
    for (int64_t i = 0; i < hv; ++i) acc[i] += w * vj[i];
  }
  const VF inv = hn::Set(d, 1.f / sum);
  int64_t i = 0;
  for (; i + kN <= hv; i += kN) hn::StoreU(hn::Mul(hn::LoadU(d, acc + i), inv), d, r.out + i);
  for (; i < hv; ++i) r.out[i] = acc[i] / sum;
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_ATTENTION_INL_H_
