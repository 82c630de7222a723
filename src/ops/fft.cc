// Mixed-radix Stockham FFT, Bluestein's algorithm for large prime factors and
// the real-input transform (see fft.h).
#include "ops/fft.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fcb::ops {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// The radices of n in stage order (4s first, then 2, 3, 5, larger primes), or
// an empty list with *largest set to a prime factor > kMaxRadix when n has one.
std::vector<int> Factor(int64_t n, int64_t* large) {
  std::vector<int> f;
  *large = 0;
  while (n % 4 == 0) {
    f.push_back(4);
    n /= 4;
  }
  if (n % 2 == 0) {
    f.push_back(2);
    n /= 2;
  }
  for (int64_t p = 3; p * p <= n; p += 2) {
    while (n % p == 0) {
      if (p > FftPlan::kMaxRadix) {
        *large = p;
        return {};
      }
      f.push_back(static_cast<int>(p));
      n /= p;
    }
  }
  if (n > 1) {
    if (n > FftPlan::kMaxRadix) {
      *large = n;
      return {};
    }
    f.push_back(static_cast<int>(n));
  }
  return f;
}

// Smallest power of two >= 2n - 1: Bluestein's convolution length.
int64_t BluesteinLength(int64_t n) {
  int64_t m = 1;
  while (m < 2 * n - 1) m *= 2;
  return m;
}

// e^(-2 pi i num / den) into c[0], c[1].
void Root(int64_t num, int64_t den, double* c) {
  const double a = kTwoPi * static_cast<double>(num % den) / static_cast<double>(den);
  c[0] = std::cos(a);
  c[1] = -std::sin(a);
}

// One Stockham DIF stage of radix P (P = 0: generic odd radix p): for every
// pp < m and q < s, the P points x[q + s (pp + t m)] (t < P) make
// y[q + s (P pp + u)] = w^(pp u) sum_t x[..t..] e^(-2 pi i t u / P), with
// w = e^(-2 pi i / (P m)) (tw: m rows of P - 1 complex twiddles).
template <int P>
void RunStage(const double* x, double* y, int64_t m, int64_t s, const double* tw, int p, const double* roots) {
  constexpr double kS3 = 0.86602540378443864676372317075294;  // sin(2 pi / 3)
  const double c51 = 0.30901699437494742410229341718282;       // cos(2 pi / 5)
  const double c52 = -0.80901699437494742410229341718282;      // cos(4 pi / 5)
  const double s51 = 0.95105651629515357211643933337938;       // sin(2 pi / 5)
  const double s52 = 0.58778525229247312916870595463907;       // sin(4 pi / 5)
  const int radix = P == 0 ? p : P;
  for (int64_t pp = 0; pp < m; ++pp) {
    const double* w = tw + 2 * pp * (radix - 1);
    for (int64_t q = 0; q < s; ++q) {
      const double* in = x + 2 * (q + s * pp);
      double* out = y + 2 * (q + s * radix * pp);
      const int64_t is = 2 * s * m, os = 2 * s;  // strides between a butterfly's inputs / outputs
      // Stores output u (u >= 1 times its twiddle).
      auto put = [&](int u, double re, double im) {
        if (u == 0) {
          out[0] = re;
          out[1] = im;
        } else {
          const double wr = w[2 * (u - 1)], wi = w[2 * (u - 1) + 1];
          out[u * os] = re * wr - im * wi;
          out[u * os + 1] = re * wi + im * wr;
        }
      };
      if constexpr (P == 2) {
        const double a0r = in[0], a0i = in[1], a1r = in[is], a1i = in[is + 1];
        put(0, a0r + a1r, a0i + a1i);
        put(1, a0r - a1r, a0i - a1i);
      } else if constexpr (P == 4) {
        const double a0r = in[0], a0i = in[1], a1r = in[is], a1i = in[is + 1];
        const double a2r = in[2 * is], a2i = in[2 * is + 1], a3r = in[3 * is], a3i = in[3 * is + 1];
        const double t0r = a0r + a2r, t0i = a0i + a2i, t1r = a0r - a2r, t1i = a0i - a2i;
        const double t2r = a1r + a3r, t2i = a1i + a3i, t3r = a1r - a3r, t3i = a1i - a3i;
        put(0, t0r + t2r, t0i + t2i);
        put(1, t1r + t3i, t1i - t3r);  // t1 - i t3
        put(2, t0r - t2r, t0i - t2i);
        put(3, t1r - t3i, t1i + t3r);  // t1 + i t3
      } else if constexpr (P == 3) {
        const double a0r = in[0], a0i = in[1], a1r = in[is], a1i = in[is + 1], a2r = in[2 * is], a2i = in[2 * is + 1];
        const double sr = a1r + a2r, si = a1i + a2i, dr = kS3 * (a1r - a2r), di = kS3 * (a1i - a2i);
        const double mr = a0r - 0.5 * sr, mi = a0i - 0.5 * si;
        put(0, a0r + sr, a0i + si);
        put(1, mr + di, mi - dr);  // m - i (sqrt(3) / 2) d
        put(2, mr - di, mi + dr);
      } else if constexpr (P == 5) {
        const double a0r = in[0], a0i = in[1];
        const double a1r = in[is], a1i = in[is + 1], a2r = in[2 * is], a2i = in[2 * is + 1];
        const double a3r = in[3 * is], a3i = in[3 * is + 1], a4r = in[4 * is], a4i = in[4 * is + 1];
        const double b1r = a1r + a4r, b1i = a1i + a4i, b2r = a2r + a3r, b2i = a2i + a3i;
        const double d1r = a1r - a4r, d1i = a1i - a4i, d2r = a2r - a3r, d2i = a2i - a3i;
        const double r1r = a0r + c51 * b1r + c52 * b2r, r1i = a0i + c51 * b1i + c52 * b2i;
        const double r2r = a0r + c52 * b1r + c51 * b2r, r2i = a0i + c52 * b1i + c51 * b2i;
        const double v1r = s51 * d1r + s52 * d2r, v1i = s51 * d1i + s52 * d2i;
        const double v2r = s52 * d1r - s51 * d2r, v2i = s52 * d1i - s51 * d2i;
        put(0, a0r + b1r + b2r, a0i + b1i + b2i);
        put(1, r1r + v1i, r1i - v1r);  // r1 - i v1
        put(4, r1r - v1i, r1i + v1r);
        put(2, r2r + v2i, r2i - v2r);  // r2 - i v2
        put(3, r2r - v2i, r2i + v2r);
      } else {
        // Generic odd radix: pairs t, p - t share cosines and negate sines.
        double sr[FftPlan::kMaxRadix], si[FftPlan::kMaxRadix], dr[FftPlan::kMaxRadix], di[FftPlan::kMaxRadix];
        const int h = radix / 2;
        double y0r = in[0], y0i = in[1];
        for (int t = 1; t <= h; ++t) {
          const double ar = in[t * is], ai = in[t * is + 1];
          const double br = in[(radix - t) * is], bi = in[(radix - t) * is + 1];
          sr[t] = ar + br;
          si[t] = ai + bi;
          dr[t] = ar - br;
          di[t] = ai - bi;
          y0r += sr[t];
          y0i += si[t];
        }
        put(0, y0r, y0i);
        for (int u = 1; u <= h; ++u) {
          // y_u = a0 + sum_t cos(t u) s_t - i sum_t sin(t u) d_t; y_(p-u) the same with + i.
          double rr = in[0], ri = in[1], vr = 0, vi = 0;
          int tu = 0;
          for (int t = 1; t <= h; ++t) {
            tu += u;
            if (tu >= radix) tu -= radix;
            const double c = roots[2 * tu], sn = -roots[2 * tu + 1];  // roots: e^(-2 pi i k / p)
            rr += c * sr[t];
            ri += c * si[t];
            vr += sn * dr[t];
            vi += sn * di[t];
          }
          put(u, rr + vi, ri - vr);
          put(radix - u, rr - vi, ri + vr);
        }
      }
    }
  }
}

}  // namespace

size_t FftPlan::WorkDoubles(int64_t n) {
  int64_t large = 0;
  Factor(n, &large);
  if (large == 0) return static_cast<size_t>(2 * n);
  const int64_t m = BluesteinLength(n);
  return static_cast<size_t>(6 * m) + WorkDoubles(m);
}

size_t FftPlan::RealWorkDoubles(int64_t n) {
  if (n % 2 == 0 && n > 1) return static_cast<size_t>(n) + WorkDoubles(n / 2);
  return static_cast<size_t>(4 * n) + WorkDoubles(n);
}

FftPlan::FftPlan(int64_t n, bool real_input) : n_(n) {
  work_ = WorkDoubles(n);
  real_work_ = RealWorkDoubles(n);
  int64_t large = 0;
  const std::vector<int> radices = Factor(n, &large);
  if (large != 0) {
    // Bluestein: chirp c_j = e^(-pi i j^2 / n) (j^2 taken mod 2n, exact in
    // integers, so large j lose no accuracy); filter b = conj(c) extended
    // circularly to length bm_, transformed and scaled by 1 / bm_.
    bm_ = BluesteinLength(n);
    conv_ = std::make_shared<const FftPlan>(bm_);
    chirp_.resize(static_cast<size_t>(2 * n));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t j2 = static_cast<int64_t>((static_cast<unsigned __int128>(j) * j) % (2 * n));
      Root(j2, 2 * n, &chirp_[2 * j]);
    }
    std::vector<double> b(static_cast<size_t>(2 * bm_), 0.0), work(conv_->work_doubles());
    for (int64_t j = 0; j < n; ++j) {
      b[2 * j] = chirp_[2 * j];
      b[2 * j + 1] = -chirp_[2 * j + 1];
      if (j > 0) {
        b[2 * (bm_ - j)] = b[2 * j];
        b[2 * (bm_ - j) + 1] = b[2 * j + 1];
      }
    }
    bfilter_.resize(static_cast<size_t>(2 * bm_));
    conv_->Complex(b.data(), bfilter_.data(), work.data());
    for (double& v : bfilter_) v /= static_cast<double>(bm_);
  } else {
    // Stockham stages: stage i has radix p, stride s (the product of the
    // earlier radices) and sub-length m = n / (s p); its twiddles are
    // e^(-2 pi i pp u / (p m)) for pp < m, 1 <= u < p.
    int64_t s = 1;
    for (int p : radices) {
      Stage st;
      st.p = p;
      st.s = s;
      st.m = n / (s * p);
      st.tw = tw_.size();
      for (int64_t pp = 0; pp < st.m; ++pp)
        for (int u = 1; u < p; ++u) {
          double c[2];
          Root(pp * u, p * st.m, c);
          tw_.push_back(c[0]);
          tw_.push_back(c[1]);
        }
      if (p != 2 && p != 3 && p != 4 && p != 5) {
        if (root_off_.size() <= static_cast<size_t>(p)) root_off_.resize(static_cast<size_t>(p) + 1, SIZE_MAX);
        if (root_off_[p] == SIZE_MAX) {
          root_off_[p] = roots_.size();
          for (int t = 0; t < p; ++t) {
            double c[2];
            Root(t, p, c);
            roots_.push_back(c[0]);
            roots_.push_back(c[1]);
          }
        }
      }
      stages_.push_back(st);
      s *= p;
    }
  }
  if (real_input && n <= kMaxDirectReal) {
    direct_.resize(static_cast<size_t>(2 * n));
    for (int64_t m = 0; m < n; ++m) Root(m, n, &direct_[2 * m]);
  } else if (real_input && n % 2 == 0 && n > 1) {
    half_ = std::make_shared<const FftPlan>(n / 2);
    real_tw_.resize(static_cast<size_t>(n / 2 + 1) * 2);
    for (int64_t k = 0; k <= n / 2; ++k) Root(k, n, &real_tw_[2 * k]);
  }
}

void FftPlan::Complex(const double* in, double* out, double* work) const {
  if (bm_ != 0) {
    Bluestein(in, out, work);
  } else if (stages_.empty()) {  // n == 1
    out[0] = in[0];
    out[1] = in[1];
  } else {
    Stockham(in, out, work);
  }
}

void FftPlan::Stockham(const double* in, double* out, double* work) const {
  // Stage i reads what stage i - 1 wrote; the buffers alternate so that the
  // last stage writes out.
  const size_t k = stages_.size();
  const double* src = in;
  for (size_t i = 0; i < k; ++i) {
    double* dst = (k - 1 - i) % 2 == 0 ? out : work;
    const Stage& st = stages_[i];
    const double* tw = tw_.data() + st.tw;
    switch (st.p) {
      case 2: RunStage<2>(src, dst, st.m, st.s, tw, 2, nullptr); break;
      case 3: RunStage<3>(src, dst, st.m, st.s, tw, 3, nullptr); break;
      case 4: RunStage<4>(src, dst, st.m, st.s, tw, 4, nullptr); break;
      case 5: RunStage<5>(src, dst, st.m, st.s, tw, 5, nullptr); break;
      default: RunStage<0>(src, dst, st.m, st.s, tw, st.p, roots_.data() + root_off_[st.p]); break;
    }
    src = dst;
  }
}

void FftPlan::Bluestein(const double* in, double* out, double* work) const {
  const int64_t n = n_, m = bm_;
  double* a = work;           // m complex
  double* fa = work + 2 * m;  // m complex
  double* sub = work + 4 * m;
  for (int64_t j = 0; j < n; ++j) {
    const double xr = in[2 * j], xi = in[2 * j + 1], cr = chirp_[2 * j], ci = chirp_[2 * j + 1];
    a[2 * j] = xr * cr - xi * ci;
    a[2 * j + 1] = xr * ci + xi * cr;
  }
  std::fill(a + 2 * n, a + 2 * m, 0.0);
  conv_->Complex(a, fa, sub);
  // Multiply by the filter and conjugate: the inverse transform as a forward one.
  for (int64_t k = 0; k < m; ++k) {
    const double xr = fa[2 * k], xi = fa[2 * k + 1], br = bfilter_[2 * k], bi = bfilter_[2 * k + 1];
    a[2 * k] = xr * br - xi * bi;
    a[2 * k + 1] = -(xr * bi + xi * br);
  }
  conv_->Complex(a, fa, sub);
  for (int64_t k = 0; k < n; ++k) {
    const double xr = fa[2 * k], xi = -fa[2 * k + 1], cr = chirp_[2 * k], ci = chirp_[2 * k + 1];
    out[2 * k] = xr * cr - xi * ci;
    out[2 * k + 1] = xr * ci + xi * cr;
  }
}

void FftPlan::Real(const double* x, double* out, double* work) const {
  const int64_t n = n_;
  if (!direct_.empty()) {  // out[k] = sum_j x_j e^(-2 pi i (j k mod n) / n)
    for (int64_t k = 0; k <= n / 2; ++k) {
      double re = 0, im = 0;
      int64_t idx = 0;
      for (int64_t j = 0; j < n; ++j) {
        re += x[j] * direct_[2 * idx];
        im += x[j] * direct_[2 * idx + 1];
        idx += k;
        if (idx >= n) idx -= n;
      }
      out[2 * k] = re;
      out[2 * k + 1] = im;
    }
    return;
  }
  if (!half_) {
    // Odd n (or 1): the complex transform of x + 0i, first n / 2 + 1 bins.
    double* z = work;
    double* zo = work + 2 * n;
    for (int64_t j = 0; j < n; ++j) {
      z[2 * j] = x[j];
      z[2 * j + 1] = 0.0;
    }
    Complex(z, zo, work + 4 * n);
    std::memcpy(out, zo, sizeof(double) * 2 * static_cast<size_t>(n / 2 + 1));
    return;
  }
  // z_j = x_(2j) + i x_(2j+1) is x itself read as h complex values. With
  // Z = FFT_h(z), the transforms of the even and odd samples are
  // E_k = (Z_k + conj(Z_(h-k))) / 2 and O_k = -i (Z_k - conj(Z_(h-k))) / 2,
  // and X_k = E_k + e^(-2 pi i k / n) O_k for k <= h (Z_h = Z_0).
  const int64_t h = n / 2;
  double* z = work;
  half_->Complex(x, z, work + 2 * h);
  for (int64_t k = 0; k <= h; ++k) {
    const int64_t k1 = k == h ? 0 : k, k2 = k == 0 ? 0 : h - k;
    const double zr = z[2 * k1], zi = z[2 * k1 + 1], cr = z[2 * k2], ci = -z[2 * k2 + 1];
    const double er = 0.5 * (zr + cr), ei = 0.5 * (zi + ci);
    const double orr = 0.5 * (zi - ci), oi = -0.5 * (zr - cr);
    const double wr = real_tw_[2 * k], wi = real_tw_[2 * k + 1];
    out[2 * k] = er + orr * wr - oi * wi;
    out[2 * k + 1] = ei + orr * wi + oi * wr;
  }
}

void DirectDft(const double* in, double* out, int64_t n, bool inverse) {
  const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t k = 0; k < n; ++k) {
    long double re = 0, im = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t jk = static_cast<int64_t>((static_cast<unsigned __int128>(j) * k) % n);
      const double a = sign * kTwoPi * static_cast<double>(jk) / static_cast<double>(n);
      const double c = std::cos(a), s = std::sin(a);
      re += in[2 * j] * c - in[2 * j + 1] * s;
      im += in[2 * j] * s + in[2 * j + 1] * c;
    }
    out[2 * k] = static_cast<double>(re) * scale;
    out[2 * k + 1] = static_cast<double>(im) * scale;
  }
}

}  // namespace fcb::ops
