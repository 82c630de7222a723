// The FFT (fft.h) against the direct transform in double (long double sums),
// over lengths of every kind (1, primes, powers of two, mixed radices, a
// length needing Bluestein), and the DFT / STFT operators built on it against
// a double-precision reference: onesided and full, inverse, real and complex
// input, batch > 1, an inner axis, every runnable target at 1 and 3 threads.
#include "ops/fft.h"

#include <algorithm>
#include <cmath>
#include <complex>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

const int64_t kLengths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 16, 25, 30, 31, 37, 49, 60, 97,
                            128, 200, 210, 400, 512, 1000, 1024, 2 * 97, 4 * 37, 1031};

std::vector<double> RandD(int64_t n, uint32_t seed) {
  const auto f = Rand(n, seed);
  return std::vector<double>(f.begin(), f.end());
}

// max |got - want| / max |want| over all components.
double RelErr(const double* got, const double* want, int64_t count) {
  double err = 0, mag = 0;
  for (int64_t i = 0; i < count; ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    mag = std::max(mag, std::fabs(want[i]));
  }
  return mag > 0 ? err / mag : err;
}

TEST(Fft, ComplexMatchesDirectDft) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE("n=" + std::to_string(n));
    FftPlan plan(n);
    ASSERT_EQ(plan.work_doubles(), FftPlan::WorkDoubles(n));
    const auto x = RandD(2 * n, static_cast<uint32_t>(n));
    std::vector<double> want(2 * n), got(2 * n), work(plan.work_doubles() + 1, 0.0);
    work.back() = 12345.0;  // a guard: the transform must stay inside its work space
    DirectDft(x.data(), want.data(), n, false);
    plan.Complex(x.data(), got.data(), work.data());
    EXPECT_LT(RelErr(got.data(), want.data(), 2 * n), 1e-12);
    EXPECT_EQ(work.back(), 12345.0);
    // The inverse as conj(forward(conj(x))) / n, against the direct inverse, and back to x.
    std::vector<double> cx(x), inv(2 * n), dinv(2 * n);
    for (int64_t j = 0; j < n; ++j) cx[2 * j + 1] = -cx[2 * j + 1];
    plan.Complex(cx.data(), inv.data(), work.data());
    for (int64_t k = 0; k < n; ++k) {
      inv[2 * k] /= static_cast<double>(n);
      inv[2 * k + 1] /= -static_cast<double>(n);
    }
    DirectDft(x.data(), dinv.data(), n, true);
    EXPECT_LT(RelErr(inv.data(), dinv.data(), 2 * n), 1e-12);
  }
}

TEST(Fft, RealMatchesDirectDft) {
  for (int64_t n : kLengths) {
    SCOPED_TRACE("n=" + std::to_string(n));
    FftPlan plan(n, /*real_input=*/true);
    ASSERT_EQ(plan.real_work_doubles(), FftPlan::RealWorkDoubles(n));
    const auto x = RandD(n, static_cast<uint32_t>(n) + 7);
    std::vector<double> xc(2 * n, 0.0), want(2 * n), got(2 * (n / 2 + 1) + 1), work(plan.real_work_doubles() + 1);
    for (int64_t j = 0; j < n; ++j) xc[2 * j] = x[j];
    DirectDft(xc.data(), want.data(), n, false);
    got.back() = work.back() = 12345.0;
    plan.Real(x.data(), got.data(), work.data());
    EXPECT_LT(RelErr(got.data(), want.data(), 2 * (n / 2 + 1)), 1e-12);
    EXPECT_EQ(got.back(), 12345.0);
    EXPECT_EQ(work.back(), 12345.0);
  }
}

// The direct transform of each line of x (complex [outer, n, inner] as
// std::complex) along the middle axis, truncated / zero-padded to len, in
// double; bins [0, bins) of each line, as float32 [outer, bins, inner, 2].
std::vector<float> RefLines(const std::vector<std::complex<double>>& x, int64_t outer, int64_t n, int64_t inner,
                            int64_t len, int64_t bins, bool inverse) {
  std::vector<float> out(static_cast<size_t>(outer * bins * inner * 2));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<long double> acc = 0;
        for (int64_t j = 0; j < std::min(n, len); ++j) {
          const double a = (inverse ? 2 : -2) * M_PI * static_cast<double>((j * k) % len) / static_cast<double>(len);
          acc += std::complex<long double>(x[(o * n + j) * inner + i]) * std::complex<long double>(std::cos(a), std::sin(a));
        }
        if (inverse) acc /= static_cast<long double>(len);
        const int64_t e = ((o * bins + k) * inner + i) * 2;
        out[e] = static_cast<float>(acc.real());
        out[e + 1] = static_cast<float>(acc.imag());
      }
  return out;
}

TEST(Fft, DftOperatorOverLengthsSidesInverseAndBatch) {
  for (int64_t len : {1, 2, 3, 5, 7, 8, 12, 16, 30, 97, 400, 512, 1000, 1024}) {
    SCOPED_TRACE("len=" + std::to_string(len));
    const int64_t outer = 3, inner = 1;
    // Real input [3, len, 1]: full and onesided, forward; full inverse.
    const auto re = Rand(outer * len, static_cast<uint32_t>(len) + 100);
    std::vector<std::complex<double>> xr(re.begin(), re.end());
    const double tol = 1e-6;  // relative to 1 + |want| (Same), on float32 outputs
    for (int onesided : {0, 1}) {
      const int64_t bins = onesided ? len / 2 + 1 : len;
      Check("DFT", A().I("onesided", onesided), {F32({outer, len, 1}, re)},
            {F32({outer, bins, 2}, RefLines(xr, outer, len, inner, len, bins, false))}, tol);
    }
    Check("DFT", A().I("inverse", 1), {F32({outer, len, 1}, re)},
          {F32({outer, len, 2}, RefLines(xr, outer, len, inner, len, len, true))}, tol);
    // Complex input, forward and inverse, full and onesided (forward only).
    const auto ci = Rand(outer * len * 2, static_cast<uint32_t>(len) + 200);
    std::vector<std::complex<double>> xc;
    for (int64_t j = 0; j < outer * len; ++j) xc.push_back({ci[2 * j], ci[2 * j + 1]});
    for (int inverse : {0, 1})
      Check("DFT", A().I("inverse", inverse), {F32({outer, len, 2}, ci)},
            {F32({outer, len, 2}, RefLines(xc, outer, len, inner, len, len, inverse))},
            tol);
    Check("DFT", A().I("onesided", 1), {F32({outer, len, 2}, ci)},
          {F32({outer, len / 2 + 1, 2}, RefLines(xc, outer, len, inner, len, len / 2 + 1, false))},
          tol);
  }
}

TEST(Fft, DftOperatorInnerAxisLengthChangesAndDouble) {
  // [2, 10, 3, 1] along axis 1: zero-padded to 16 and 17, truncated to 7; inverse.
  const int64_t outer = 2, n = 10, inner = 3;
  const auto re = Rand(outer * n * inner, 9);
  std::vector<std::complex<double>> xr(re.begin(), re.end());
  for (int64_t len : {16, 17, 7}) {
    for (int inverse : {0, 1}) {
      SCOPED_TRACE("len=" + std::to_string(len) + " inverse=" + std::to_string(inverse));
      Check("DFT", A().I("inverse", inverse), {F32({outer, n, inner, 1}, re), I64({}, {len})},
            {F32({outer, len, inner, 2}, RefLines(xr, outer, n, inner, len, len, inverse))}, 1e-5);
    }
    Check("DFT", A().I("onesided", 1), {F32({outer, n, inner, 1}, re), I64({}, {len})},
          {F32({outer, len / 2 + 1, inner, 2}, RefLines(xr, outer, n, inner, len, len / 2 + 1, false))}, 1e-5);
  }
  // float64 keeps double accuracy.
  const int64_t len = 97;
  const auto d = RandD(len, 5);
  std::vector<double> want;
  {
    std::vector<double> xc(2 * len, 0.0);
    for (int64_t j = 0; j < len; ++j) xc[2 * j] = d[j];
    want.resize(2 * len);
    DirectDft(xc.data(), want.data(), len, false);
  }
  Check("DFT", A(), {F64({1, len, 1}, d)}, {F64({1, len, 2}, want)}, 1e-12);
}

TEST(Fft, StftOverLengthsAndBatch) {
  // Whisper's shape in small (n_fft 400, hop 160) and other frame lengths; batch 2; window and none.
  for (int64_t flen : {1, 7, 16, 30, 97, 400}) {
    SCOPED_TRACE("flen=" + std::to_string(flen));
    const int64_t batch = 2, step = std::max<int64_t>(1, flen * 2 / 5), sig = flen * 4 + 3;
    const int64_t frames = (sig - flen) / step + 1;
    const auto x = Rand(batch * sig, static_cast<uint32_t>(flen) + 300);
    std::vector<float> win(static_cast<size_t>(flen));
    for (int64_t j = 0; j < flen; ++j) win[j] = static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * j / flen));
    for (int onesided : {0, 1})
      for (bool window : {false, true}) {
        const int64_t bins = onesided ? flen / 2 + 1 : flen;
        std::vector<std::complex<double>> frames_x;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t f = 0; f < frames; ++f)
            for (int64_t j = 0; j < flen; ++j)
              frames_x.push_back(static_cast<double>(x[b * sig + f * step + j]) *
                                 (window ? static_cast<double>(win[j]) : 1.0));
        const auto want = RefLines(frames_x, batch * frames, flen, 1, flen, bins, false);
        Check("STFT", A().I("onesided", onesided),
              {F32({batch, sig, 1}, x), I64({}, {step}), window ? F32({flen}, win) : nullptr,
               window ? nullptr : I64({}, {flen})},
              {F32({batch, frames, bins, 2}, want)}, 1e-6);
      }
    // Complex signal, full spectrum.
    const auto xc = Rand(batch * sig * 2, static_cast<uint32_t>(flen) + 400);
    std::vector<std::complex<double>> frames_c;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t f = 0; f < frames; ++f)
        for (int64_t j = 0; j < flen; ++j) {
          const int64_t e = (b * sig + f * step + j) * 2;
          frames_c.push_back({xc[e], xc[e + 1]});
        }
    Check("STFT", A().I("onesided", 0), {F32({batch, sig, 2}, xc), I64({}, {step}), nullptr, I64({}, {flen})},
          {F32({batch, frames, flen, 2}, RefLines(frames_c, batch * frames, flen, 1, flen, flen, false))},
          1e-6);
  }
}

}  // namespace
}  // namespace fcb::ops::testing
