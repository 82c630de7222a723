// MatMul, Gemm and LayerNormalization against scalar references.
#include <cmath>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

// Reference NumPy matmul for float tensors of rank >= 1.
TensorPtr RefMatMul(const TensorPtr& a, const TensorPtr& b) {
  Shape as = a->shape, bs = b->shape;
  const bool av = as.size() == 1, bv = bs.size() == 1;
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t r = std::max(ab.size(), bb.size());
  Shape batch(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t x = d < r - ab.size() ? 1 : ab[d - (r - ab.size())];
    const int64_t y = d < r - bb.size() ? 1 : bb[d - (r - bb.size())];
    batch[d] = x == 1 ? y : x;
  }
  Shape out = batch;
  if (!av) out.push_back(M);
  if (!bv) out.push_back(N);
  auto y = ir::TensorData::Make(a->dtype, out);
  const int64_t nb = ir::NumElements(batch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const auto idx = Unravel(bi, batch);
    const int64_t ao = BroadcastOffset(idx, ab) * M * K, bo = BroadcastOffset(idx, bb) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a->GetDouble(ao + m * K + k) * b->GetDouble(bo + k * N + n);
        const int64_t o = (bi * M + m) * N + n;
        if (a->dtype == DType::kF32) y->mutable_data<float>()[o] = static_cast<float>(s);
        else y->mutable_data<int64_t>()[o] = static_cast<int64_t>(s);
      }
  }
  return y;
}

TEST(MatMul, ShapesAndBroadcast) {
  struct C {
    Shape a, b;
  };
  const std::vector<C> cases = {
      {{5, 7}, {7, 3}},          {{37, 19}, {19, 41}},     {{7}, {7, 3}},
      {{5, 7}, {7}},             {{7}, {7}},               {{2, 1, 3, 4}, {5, 4, 6}},
      {{3, 4}, {2, 4, 5}},       {{2, 33, 8}, {8, 17}},    {{4, 0}, {0, 3}},
  };
  int seed = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(ir::ShapeToString(c.a) + " x " + ir::ShapeToString(c.b));
    auto a = F32(c.a, Rand(ir::NumElements(c.a), ++seed));
    auto b = F32(c.b, Rand(ir::NumElements(c.b), ++seed));
    Check("MatMul", A(), {a, b}, {RefMatMul(a, b)}, 1e-4);
  }
  auto ai = I64({2, 3}, {1, -2, 3, 4, 5, -6}), bi = I64({3, 2}, {1, 2, 3, 4, 5, 6});
  Check("MatMul", A(), {ai, bi}, {RefMatMul(ai, bi)});
  Check("MatMul", A(), {I32({2}, {3, 4}), I32({2}, {5, 6})}, {I32({}, {39})});
  EXPECT_REFUSED(Fails("MatMul", A(), {F32({2, 3}, Rand(6, 1)), F32({2, 3}, Rand(6, 2))}), StatusCode::kInvalidArgument, "inner dims differ");
  EXPECT_REFUSED(Fails("MatMul", A(), {F32({2, 2, 3}, Rand(12, 1)), F32({3, 3, 1}, Rand(9, 2))}), StatusCode::kInvalidArgument, "shapes 2 and 3 cannot be broadcast");
  EXPECT_REFUSED(Fails("MatMul", A(), {F32({}, {1}), F32({1}, {1})}), StatusCode::kInvalidArgument, "inputs must have rank >= 1");
  EXPECT_REFUSED(Fails("MatMul", A(), {F32({1}, {1}), I64({1}, {1})}), StatusCode::kInvalidArgument, "inputs have different dtypes");
}

TEST(Gemm, TransposesAlphaBetaAndC) {
  const int64_t M = 19, N = 23, K = 11;
  auto am = Rand(M * K, 1), bm = Rand(K * N, 2);
  // Transposed copies of the same operands.
  std::vector<float> at(M * K), bt(K * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) at[k * M + m] = am[m * K + k];
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) bt[n * K + k] = bm[k * N + n];
  const std::vector<Shape> c_shapes = {{}, {N}, {1, N}, {M, 1}, {M, N}};
  for (int ta : {0, 1})
    for (int tb : {0, 1})
      for (const auto& cs : c_shapes) {
        SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " C " + ir::ShapeToString(cs));
        auto cvals = Rand(ir::NumElements(cs), 5);
        auto want = ir::TensorData::Make(DType::kF32, {M, N});
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += am[m * K + k] * bm[k * N + n];
            int64_t ci = 0;
            if (cs.size() == 2) ci = (cs[0] == 1 ? 0 : m) * cs[1] + (cs[1] == 1 ? 0 : n);
            else if (cs.size() == 1) ci = n;
            want->mutable_data<float>()[m * N + n] = static_cast<float>(0.5 * s + 2.0 * cvals[ci]);
          }
        auto a = ta ? F32({K, M}, at) : F32({M, K}, am);
        auto b = tb ? F32({N, K}, bt) : F32({K, N}, bm);
        Check("Gemm", A().I("transA", ta).I("transB", tb).F("alpha", 0.5f).F("beta", 2.f),
              {a, b, F32(cs, cvals)}, {want}, 1e-4);
      }
  // No C; defaults alpha = beta = 1.
  auto a = F32({M, K}, am), b = F32({K, N}, bm);
  Check("Gemm", A(), {a, b}, {RefMatMul(a, b)}, 1e-4);
  EXPECT_REFUSED(Fails("Gemm", A(), {a, F32({N, K}, bt)}), StatusCode::kInvalidArgument, "inner dims differ");
  EXPECT_REFUSED(Fails("Gemm", A(), {a, b, F32({2, N}, Rand(2 * N, 1))}), StatusCode::kInvalidArgument, "C 2x23 does not broadcast to 19x23");
  EXPECT_REFUSED(Fails("Gemm", A(), {F32({2, 3, 4}, Rand(24, 1)), b}), StatusCode::kInvalidArgument, "A and B must be 2-D");
}

TEST(LayerNorm, AxesScaleBias) {
  auto x = F32({2, 3, 8}, Rand(48, 9, -3.f, 5.f));
  auto ref = [&](int64_t axis, const std::vector<float>& scale, const std::vector<float>& bias, float eps) {
    const int64_t D = axis == 2 ? 8 : 24, rows = 48 / D;
    auto y = ir::TensorData::Make(DType::kF32, x->shape);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < D; ++j) mean += x->data<float>()[r * D + j];
      mean /= D;
      for (int64_t j = 0; j < D; ++j) var += std::pow(x->data<float>()[r * D + j] - mean, 2);
      var /= D;
      for (int64_t j = 0; j < D; ++j)
        y->mutable_data<float>()[r * D + j] = static_cast<float>(
            (x->data<float>()[r * D + j] - mean) / std::sqrt(var + eps) * scale[j % scale.size()] +
            (bias.empty() ? 0.0 : bias[j % bias.size()]));
    }
    return y;
  };
  auto s8 = Rand(8, 1, 0.5f, 2.f), b8 = Rand(8, 2), s24 = Rand(24, 3, 0.5f, 2.f);
  Check("LayerNormalization", A(), {x, F32({8}, s8), F32({8}, b8)}, {ref(2, s8, b8, 1e-5f)}, 1e-4);
  Check("LayerNormalization", A().I("axis", 1).F("epsilon", 1e-3f), {x, F32({3, 8}, s24)},
        {ref(1, s24, {}, 1e-3f)}, 1e-4);
  Check("LayerNormalization", A().I("axis", -2), {x, F32({8}, s8), F32({1, 8}, b8)}, {ref(1, s8, b8, 1e-5f)}, 1e-4);
  EXPECT_REFUSED(Fails("LayerNormalization", A(), {x, F32({3}, {1, 1, 1})}), StatusCode::kInvalidArgument, "Scale 3 does not match the normalized shape 8");
  EXPECT_REFUSED(Fails("LayerNormalization", A().I("axis", 3), {x, F32({8}, s8)}), StatusCode::kInvalidArgument, "axis 3 is out of range for rank 3");
  EXPECT_REFUSED(Fails("LayerNormalization", A(), {I64({1}, {1}), I64({1}, {1})}), StatusCode::kUnsupported, "only float32 is supported");
  // Optional Mean / InvStdDev outputs.
  auto r = RunWith("LayerNormalization", A(), {F32({1, 2}, {1, 3}), F32({2}, {1, 1})}, 3,
                   kernels::GetKernelTable(TargetId::kGeneric), 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[1]->shape, (Shape{1, 1}));
  EXPECT_FLOAT_EQ((*r)[1]->data<float>()[0], 2.f);
  EXPECT_NEAR((*r)[2]->data<float>()[0], 1.f / std::sqrt(1.f + 1e-5f), 1e-6);
}

}  // namespace
}  // namespace fcb::ops::testing
