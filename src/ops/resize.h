// What Resize's forms share (ops/resize.cc, ops/internal/resize_nhwc.cc): its
// attributes and constant inputs parsed, and the taps of one axis (the input
// coordinates and weights each output coordinate reads, as the ONNX
// reference defines them).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace fcb::ops::resize {

struct Params {
  std::string mode, coord, nearest;
  float cubic_a = -0.75f, extrapolation = 0.f;
  bool exclude_outside = false;
  std::vector<double> scales;  // per axis
  std::vector<double> roi;     // 2 * rank (tf_crop_and_resize)
  ir::Shape out;
};

// Taps of one output coordinate along one axis.
struct Taps {
  int n = 0;  // 0 = outside the crop (extrapolation value)
  std::array<int64_t, 4> idx{};
  std::array<double, 4> w{};
};

// The taps of one axis as float32 arrays, for the kernels.
struct FlatTaps {
  std::vector<int32_t> n;  // per output coordinate: 0 (outside) to 4
  std::vector<std::array<int64_t, 4>> idx;
  std::vector<std::array<float, 4>> w;
  explicit FlatTaps(const std::vector<Taps>& t) : n(t.size()), idx(t.size()), w(t.size()) {
    for (size_t o = 0; o < t.size(); ++o) {
      n[o] = t[o].n;
      idx[o] = t[o].idx;
      for (int k = 0; k < 4; ++k) w[o][k] = static_cast<float>(t[o].w[k]);
    }
  }
};

// Resize's (or Upsample's) attributes and inputs for input 0 of c's shape;
// scales, sizes and roi must be compile-time constants.
Status Parse(const InferContext& c, Params* p);
// Per output coordinate of `axis` (in -> out elements), its taps.
std::vector<Taps> AxisTaps(const Params& p, size_t axis, int64_t in, int64_t out);
// Whether every output coordinate reads its own input coordinate alone, with weight 1.
bool IsIdentity(const std::vector<Taps>& taps);

}  // namespace fcb::ops::resize
