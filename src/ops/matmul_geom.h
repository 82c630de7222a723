// NumPy matmul geometry, shared by MatMul (matmul.cc) and the integer matrix
// products (integer_quant.cc: MatMulInteger, QLinearMatMul).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ops/op.h"
#include "ops/op_util.h"

namespace fcb::ops {

struct MatMulGeom {
  int64_t M = 0, N = 0, K = 0;
  std::vector<int64_t> batch;         // output batch dims
  std::vector<int64_t> a_bst, b_bst;  // element strides of A / B per batch dim (0 = broadcast)
  int64_t batches = 1;
};

// The same geometry held in place: worked out without allocating (what a
// MatMul kernel that adapts, Kernel::adapts, does at each run at other shapes).
struct MatMulDims {
  int64_t M = 0, N = 0, K = 0;
  PlanDims batch, a_bst, b_bst;
  int64_t batches = 1;
};

// Shapes of A and B (rank >= 1; a 1-D A is a row, a 1-D B a column) -> the
// geometry and the output shape; errors name `op`.
Status MatMulGeometry(std::string_view op, const ir::Shape& a, const ir::Shape& b, MatMulGeom* g, ir::Shape* out);
// The geometry alone, in place; allocates only to report an error.
Status MatMulGeometry(std::string_view op, std::span<const int64_t> a, std::span<const int64_t> b, MatMulDims* g);

}  // namespace fcb::ops
