// AttentionFused and KvAppend (ops/internal/attention_fused.cc,
// kv_append.cc) on every target against a scalar reference in double:
// grouped heads (H a multiple of kv), dense and strided K/V (a buffer of
// row_capacity rows per head whose rows past the valid ones hold NaN, which
// must not be read), masks of several broadcast shapes, one and several
// query rows, head sizes that are not a multiple of the vector width.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops_test_util.h"
#include "per_target.h"

namespace fcb::ops {
namespace {

using namespace fcb::ops::testing;  // NOLINT

struct Case {
  int64_t b, h, kv, s, t, d, dv, cap;  // cap 0: dense K/V
  Shape mask;                          // empty: no mask
};

// Y[b, n, s] = softmax_j(scale * q . k_j + mask) . v_j over the t valid rows.
std::vector<float> Reference(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const std::vector<float>& m, float scale) {
  const int64_t rows = c.cap ? c.cap : c.t, group = c.h / c.kv;
  std::vector<float> y(static_cast<size_t>(c.b * c.h * c.s * c.dv));
  Shape full{c.b, c.h, c.s, c.t};
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t n = 0; n < c.h; ++n)
      for (int64_t s = 0; s < c.s; ++s) {
        const int64_t head = b * c.kv + n / group;
        std::vector<double> sc(static_cast<size_t>(c.t));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < c.d; ++i)
            dot += double{q[((b * c.h + n) * c.s + s) * c.d + i]} * k[(head * rows + j) * c.d + i];
          sc[j] = dot * scale;
          if (!c.mask.empty()) sc[j] += m[BroadcastOffset({b, n, s, j}, c.mask)];
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < c.dv; ++i) {
          double acc = 0;
          for (int64_t j = 0; j < c.t; ++j) acc += sc[j] * v[(head * rows + j) * c.dv + i];
          y[((b * c.h + n) * c.s + s) * c.dv + i] = static_cast<float>(acc / sum);
        }
      }
  return y;
}

class AttentionFusedTest : public fcb::testing::PerTarget {};
FCB_INSTANTIATE_PER_TARGET(AttentionFusedTest, fcb::testing::LayerTargets());

TEST_P(AttentionFusedTest, MatchesTheScalarReference) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> cases = {
      {1, 4, 2, 1, 9, 16, 16, 0, {}},             // decode, dense, GQA
      {1, 4, 2, 1, 9, 16, 16, 32, {1, 9}},        // decode, strided
      {2, 6, 3, 5, 11, 20, 20, 16, {5, 11}},      // prefill, strided, odd head size
      {2, 4, 4, 3, 7, 8, 12, 0, {2, 1, 3, 7}},    // MHA, Dv != D, per-batch mask
      {1, 9, 3, 4, 33, 64, 64, 40, {1, 9, 4, 33}},  // per-head mask, SmolLM-like heads
      {1, 2, 1, 2, 1, 5, 5, 3, {}},               // one key
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "B " << c.b << " H " << c.h << " kv " << c.kv << " S " << c.s << " T "
                                      << c.t << " D " << c.d << " cap " << c.cap);
    const int64_t rows = c.cap ? c.cap : c.t;
    const auto q = Rand(c.b * c.h * c.s * c.d, 1);
    auto k = Rand(c.b * c.kv * rows * c.d, 2);
    auto v = Rand(c.b * c.kv * rows * c.dv, 3);
    // Rows past the valid length: NaN, which would poison any result reading them.
    for (int64_t hd = 0; hd < c.b * c.kv; ++hd)
      for (int64_t j = c.t; j < rows; ++j) {
        for (int64_t i = 0; i < c.d; ++i) k[(hd * rows + j) * c.d + i] = kNaN;
        for (int64_t i = 0; i < c.dv; ++i) v[(hd * rows + j) * c.dv + i] = kNaN;
      }
    int64_t mn = 1;
    for (int64_t x : c.mask) mn *= x;
    auto m = Rand(c.mask.empty() ? 0 : mn, 4, -3.f, 0.f);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
    const auto want = F32({c.b, c.h, c.s, c.dv}, Reference(c, q, k, v, m, scale));
    // Strided K/V are declared with their valid rows; the buffer holds all.
    auto kt = std::make_shared<ir::TensorData>(*F32({c.b, c.kv, rows, c.d}, k));
    auto vt = std::make_shared<ir::TensorData>(*F32({c.b, c.kv, rows, c.dv}, v));
    kt->shape[2] = c.t;
    vt->shape[2] = c.t;
    std::vector<TensorPtr> in = {F32({c.b, c.h, c.s, c.d}, q), kt, vt};
    if (!c.mask.empty()) in.push_back(F32(c.mask, m));
    const Attrs attrs = A().F(attr::kScale, scale).I(attr::kRowCapacity, c.cap);
    for (int threads : {1, 2}) {
      auto got = RunWith(opname::AttentionFused, attrs, in, 1, kernels::GetKernelTable(target_id()), threads);
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_TRUE(Same(*got.value()[0], *want, 1e-5)) << threads << " threads";
    }
  }
}

TEST_P(AttentionFusedTest, RefusesBadOperands) {
  const Attrs attrs = A().F(attr::kScale, 1.f).I(attr::kRowCapacity, 0);
  const auto q = F32({1, 3, 1, 4}, Rand(12, 1)), k = F32({1, 2, 5, 4}, Rand(40, 2)), v = F32({1, 2, 5, 4}, Rand(40, 3));
  // 3 query heads over 2 KV heads; a mask of the wrong length.
  EXPECT_FALSE(InferOnly(opname::AttentionFused, attrs, {q, k, v}).ok());
  const auto q4 = F32({1, 4, 1, 4}, Rand(16, 1));
  EXPECT_TRUE(InferOnly(opname::AttentionFused, attrs, {q4, k, v}).ok());
  EXPECT_FALSE(InferOnly(opname::AttentionFused, attrs, {q4, k, v, F32({1, 4}, Rand(4, 5))}).ok());
  // Keys past the row capacity are refused when the step runs.
  auto got = RunWith(opname::AttentionFused, A().F(attr::kScale, 1.f).I(attr::kRowCapacity, 4), {q4, k, v}, 1,
                     kernels::GetKernelTable(target_id()), 1);
  EXPECT_FALSE(got.ok());
}

// KvAppend over one buffer (the runtime binds past and present to a State's
// buffer): only the new rows of each head are written, at the valid length.
TEST(KvAppendTest, WritesTheNewRowsInPlace) {
  const int64_t b = 1, kv = 2, cap = 6, d = 3, past = 2, s = 3;
  std::vector<float> buf(static_cast<size_t>(b * kv * cap * d), -1.f);
  const auto add = Rand(b * kv * s * d, 7);
  const Attrs attrs = A().I(attr::kRowCapacity, cap);
  const OpDef* def = FindOp(opname::KvAppend);
  ASSERT_NE(def, nullptr);
  std::vector<TensorInfo> in_info = {{DType::kF32, {b, kv, past, d}}, {DType::kF32, {b, kv, s, d}}}, out_info;
  std::vector<const ir::TensorData*> consts(2, nullptr);
  ASSERT_TRUE(InferOutputs(*def, InferContext{opname::KvAppend, attrs, in_info, consts, 1}, &out_info).ok());
  EXPECT_EQ(out_info[0].shape, (Shape{b, kv, past + s, d}));
  auto kernel = def->create(CreateContext{opname::KvAppend, attrs, in_info, out_info, consts});
  ASSERT_TRUE(kernel.ok());
  ThreadPool pool(1);
  RunContext ctx{&kernels::GetKernelBundle(KnownTargets().front().id), &pool};
  const void* ins[] = {buf.data(), add.data()};
  void* outs[] = {buf.data()};
  ASSERT_TRUE(kernel.value()->Run(ctx, ins, outs).ok());
  for (int64_t h = 0; h < kv; ++h)
    for (int64_t r = 0; r < cap; ++r)
      for (int64_t i = 0; i < d; ++i) {
        const float want = r >= past && r < past + s ? add[(h * s + r - past) * d + i] : -1.f;
        EXPECT_EQ(buf[(h * cap + r) * d + i], want) << h << " " << r << " " << i;
      }
  // Not bound to one buffer, or past the capacity: refused, nothing written.
  std::vector<float> other(buf.size());
  void* outs2[] = {other.data()};
  EXPECT_FALSE(kernel.value()->Run(ctx, ins, outs2).ok());
  in_info[0].shape[2] = 4;
  ASSERT_TRUE(InferOutputs(*def, InferContext{opname::KvAppend, attrs, in_info, consts, 1}, &out_info).ok());
  auto over = def->create(CreateContext{opname::KvAppend, attrs, in_info, out_info, consts});
  ASSERT_TRUE(over.ok());
  const std::vector<float> before = buf;
  EXPECT_FALSE(over.value()->Run(ctx, ins, outs).ok());
  EXPECT_EQ(buf, before);
}

}  // namespace
}  // namespace fcb::ops
