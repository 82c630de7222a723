// A stack-allocated odometer over up to kMaxRank dims that tracks one element
// offset per operand. Strided copy ops (Transpose, Slice, Tile, Pad) position
// it at the first row of a thread's chunk and then step it row by row, so Run
// never allocates and does one division per dim per chunk, not per row.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/op_util.h"

namespace fcb::ops {

template <int kOperands>
struct Odometer {
  int rank = 0;
  const int64_t* dims = nullptr;
  std::array<const int64_t*, kOperands> strides{};
  std::array<int64_t, kMaxRank> idx{};
  std::array<int64_t, kOperands> off{};

  // dims/strides must outlive the odometer; rank <= kMaxRank (checked by callers).
  Odometer(const std::vector<int64_t>& d, const std::array<const std::vector<int64_t>*, kOperands>& s)
      : rank(static_cast<int>(d.size())), dims(d.data()) {
    for (int i = 0; i < kOperands; ++i) strides[i] = s[i]->data();
  }

  void Seek(int64_t linear) {
    off.fill(0);
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = linear % dims[d];
      linear /= dims[d];
      for (int i = 0; i < kOperands; ++i) off[i] += idx[d] * strides[i][d];
    }
  }

  void Next() {
    for (int d = rank - 1; d >= 0; --d) {
      for (int i = 0; i < kOperands; ++i) off[i] += strides[i][d];
      if (++idx[d] < dims[d]) return;
      for (int i = 0; i < kOperands; ++i) off[i] -= idx[d] * strides[i][d];
      idx[d] = 0;
    }
  }
};

}  // namespace fcb::ops
