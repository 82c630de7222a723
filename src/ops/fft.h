// Fast Fourier transforms of any length, in double precision, for the DFT and
// STFT kernels (signal.cc).
//
// FftPlan(n) holds everything a transform of length n needs, computed once
// (kernels make their plans at load; a plan is immutable and may be used by
// several threads at once): the factorization of n, the twiddle factors of
// every stage, and for lengths with a large prime factor a Bluestein plan.
// The caller provides the work space (work_doubles() / real_work_doubles()
// doubles), so a transform allocates nothing.
//
// - Lengths whose prime factors are all <= kMaxRadix run a mixed-radix
//   Stockham (self-sorting, out-of-place) decimation-in-frequency FFT:
//   radix-4, 2, 3 and 5 butterflies written out, any other odd prime through
//   a generic butterfly (p^2 operations per p points).
// - Other lengths (a prime factor > kMaxRadix) run Bluestein's algorithm: the
//   transform as a circular convolution with a chirp, computed by
//   power-of-two FFTs of length >= 2n - 1.
// - Real input of even length n runs as one complex transform of length n / 2
//   (even samples as real parts, odd samples as imaginary parts) and a
//   separation step; odd lengths run the complex transform. Below
//   kMaxDirectReal it runs the direct transform, which is faster there (a
//   few ns per line; measured on x86-64: the FFT wins from n = 6 or 8 up).
//
// Every transform is forward: out[k] = sum_j in[j] e^(-2 pi i j k / n). The
// inverse is conj(forward(conj(x))) / n, which callers apply as they load and
// store. Complex arrays are interleaved (re, im) doubles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fcb::ops {

class FftPlan {
 public:
  // Largest prime handled as a butterfly radix; larger prime factors go to Bluestein.
  static constexpr int64_t kMaxRadix = 31;
  // Largest length whose real-input transform runs the direct form.
  static constexpr int64_t kMaxDirectReal = 7;

  // n >= 1. real_input: also prepare Real (a plan of length n / 2 for even n).
  explicit FftPlan(int64_t n, bool real_input = false);

  int64_t size() const { return n_; }
  // Work doubles Complex / Real need (depends on n only).
  size_t work_doubles() const { return work_; }
  size_t real_work_doubles() const { return real_work_; }
  static size_t WorkDoubles(int64_t n);
  static size_t RealWorkDoubles(int64_t n);

  // out[k], k < n, from in[j], j < n (n complex values each). in and out must
  // not overlap each other or work.
  void Complex(const double* in, double* out, double* work) const;
  // out[k], k <= n / 2 (n / 2 + 1 complex values), from n real values x. The
  // bins above n / 2 are conj(out[n - k]). x, out and work must not overlap.
  // Needs a plan made with real_input.
  void Real(const double* x, double* out, double* work) const;

 private:
  struct Stage {
    int p = 0;                // radix
    int64_t m = 0, s = 0;     // sub-transform length after the stage / stride (product of earlier radices)
    size_t tw = 0;            // offset of the stage's twiddles in tw_: m * (p - 1) complex
  };
  void Stockham(const double* in, double* out, double* work) const;
  void Bluestein(const double* in, double* out, double* work) const;

  int64_t n_ = 0;
  size_t work_ = 0, real_work_ = 0;
  std::vector<Stage> stages_;
  std::vector<double> tw_;     // per-stage twiddles e^(-2 pi i pp u / len)
  std::vector<double> roots_;  // per distinct generic radix p: e^(-2 pi i t / p), t < p, at root_off_[p]
  std::vector<size_t> root_off_;
  // Bluestein: the chirp e^(-pi i j^2 / n) (n complex) and the transform of
  // its conjugate's circular extension, scaled by 1 / m (m complex).
  int64_t bm_ = 0;
  std::vector<double> chirp_, bfilter_;
  std::shared_ptr<const FftPlan> conv_;  // Bluestein: the plan of length bm_
  std::shared_ptr<const FftPlan> half_;  // even n > 1: the plan of length n / 2 (real input)
  std::vector<double> real_tw_;          // even n > 1: e^(-2 pi i k / n), k <= n / 2
  std::vector<double> direct_;           // n <= kMaxDirectReal: e^(-2 pi i m / n), m < n
};

// The direct O(n^2) transform in double (forward or inverse, the inverse
// scaled by 1 / n), for tests: the reference the FFT is checked against.
void DirectDft(const double* in, double* out, int64_t n, bool inverse);

}  // namespace fcb::ops
