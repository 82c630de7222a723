// ONNX Runtime's transformer operators (transformer_norm.cc,
// transformer_activations.cc, rotary.cc): what their shape inference refuses,
// and small cases against plain loops through Evaluate and every runnable
// target. tests/contrib_ops_test.cc compares whole models with ONNX Runtime.
#include <cmath>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

constexpr char kRms[] = "SimplifiedLayerNormalization";
constexpr char kSkip[] = "com.microsoft.SkipLayerNormalization";
constexpr char kSkipRms[] = "com.microsoft.SkipSimplifiedLayerNormalization";
constexpr char kRope[] = "com.microsoft.RotaryEmbedding";

TEST(TransformerOps, RegistryNamesQualifyOtherDomains) {
  EXPECT_EQ(RegistryName("", "Gelu"), "Gelu");
  EXPECT_EQ(RegistryName("ai.onnx", "Gelu"), "Gelu");
  EXPECT_EQ(RegistryName("com.microsoft", "Gelu"), "com.microsoft.Gelu");
  // ONNX's Gelu and com.microsoft's are two operators.
  ASSERT_NE(FindOp("Gelu"), nullptr);
  ASSERT_NE(FindOp("com.microsoft.Gelu"), nullptr);
  EXPECT_NE(FindOp("Gelu"), FindOp("com.microsoft.Gelu"));
  EXPECT_EQ(FindOp("com.microsoft.LayerNormalization"), nullptr);
}

TEST(TransformerOps, InferenceRefusesWhatTheKernelsCannotRun) {
  const auto x = F32({2, 3, 8}, Rand(48, 1)), g8 = F32({8}, Rand(8, 2));
  EXPECT_REFUSED(InferOnly(kRms, A().I("stash_type", 0), {x, g8}), StatusCode::kUnsupported,
                 "stash_type 0 is not supported");
  EXPECT_REFUSED(InferOnly(kRms, A(), {x, F32({7}, Rand(7, 3))}), StatusCode::kInvalidArgument,
                 "must have the normalized shape");
  EXPECT_REFUSED(InferOnly(kRms, A().F("epsilon", -1.f), {x, g8}), StatusCode::kInvalidArgument,
                 "epsilon must be a finite value >= 0");
  EXPECT_REFUSED(InferOnly(kSkip, A(), {x, x, F32({7}, Rand(7, 3))}), StatusCode::kInvalidArgument,
                 "gamma 7 must have input's last dimension [8]");
  EXPECT_REFUSED(InferOnly(kSkip, A(), {x, F32({3, 4}, Rand(12, 3)), g8}), StatusCode::kInvalidArgument,
                 "skip 3x4 must be input's shape 2x3x8 or a trailing part of it");
  EXPECT_REFUSED(InferOnly(kSkip, A(), {F32({2, 0}, {}), F32({2, 0}, {}), F32({0}, {})}),
                 StatusCode::kInvalidArgument, "input's last dimension must be > 0");
  EXPECT_REFUSED(InferOnly(kSkipRms, A(), {x, x, g8, F32({4}, Rand(4, 3))}), StatusCode::kInvalidArgument,
                 "bias 4 must have input's last dimension");
  EXPECT_REFUSED(InferOnly(kSkip, A(), {F64({2, 8}, std::vector<double>(16, 1.0)), F64({2, 8}, std::vector<double>(16, 1.0)),
                                        F64({8}, std::vector<double>(8, 1.0))}),
                 StatusCode::kUnsupported, "input must be float32, got float64");
  EXPECT_REFUSED(InferOnly("com.microsoft.BiasGelu", A(), {x, F32({3}, Rand(3, 4))}), StatusCode::kInvalidArgument,
                 "must be a vector of the input's last dimension");
  EXPECT_REFUSED(InferOnly("com.microsoft.QuickGelu", A().F("alpha", INFINITY), {x}), StatusCode::kInvalidArgument,
                 "alpha must be finite");

  // RotaryEmbedding: input [1, 4, 32] = 2 heads of 16, caches of 6 positions.
  const auto rx = F32({1, 4, 32}, Rand(128, 5)), cache = F32({6, 8}, Rand(48, 6));
  const auto ids = I64({1, 4}, {0, 1, 2, 3});
  EXPECT_REFUSED(InferOnly(kRope, A().I("is_packed_batching", 1), {rx, ids, cache, cache}), StatusCode::kUnsupported,
                 "is_packed_batching = 1 is not supported");
  EXPECT_REFUSED(InferOnly(kRope, A().I("interleaved", 2), {rx, ids, cache, cache}), StatusCode::kInvalidArgument,
                 "interleaved must be 0 or 1");
  EXPECT_REFUSED(InferOnly(kRope, A().I("rotary_embedding_dim", 16), {rx, ids, cache, cache}),
                 StatusCode::kInvalidArgument, "num_heads must be given with rotary_embedding_dim");
  EXPECT_REFUSED(InferOnly(kRope, A().I("rotary_embedding_dim", 32).I("num_heads", 2), {rx, ids, cache, cache}),
                 StatusCode::kInvalidArgument, "rotary_embedding_dim 32 exceeds the head size 16");
  EXPECT_REFUSED(InferOnly(kRope, A().I("rotary_embedding_dim", 8).I("num_heads", 2), {rx, ids, cache, cache}),
                 StatusCode::kInvalidArgument, "cos_cache's last dimension 8 must be rotary_embedding_dim / 2 = 4");
  EXPECT_REFUSED(InferOnly(kRope, A(), {rx, I32({1, 4}, {0, 1, 2, 3}), cache, cache}), StatusCode::kUnsupported,
                 "position_ids must be int64");
  EXPECT_REFUSED(InferOnly(kRope, A(), {rx, I64({4}, {0, 1, 2, 3}), cache, cache}), StatusCode::kInvalidArgument,
                 "must hold one element or be [batch, seq] = 1x4");
  EXPECT_REFUSED(InferOnly(kRope, A(), {rx, ids, cache, F32({6, 4}, Rand(24, 7))}), StatusCode::kInvalidArgument,
                 "must be 2-D and of one shape");
  EXPECT_REFUSED(InferOnly(kRope, A(), {F32({1, 8, 32}, Rand(256, 8)), I64({1}, {0}), cache, cache}),
                 StatusCode::kUnsupported, "longer than the caches (6 positions)");
  EXPECT_REFUSED(InferOnly(kRope, A(), {F32({1, 4, 4, 8}, Rand(128, 8)), ids, cache, cache}),
                 StatusCode::kInvalidArgument, "4-D input 1x4x4x8 must be [batch, heads, seq, 16]");
  EXPECT_REFUSED(InferOnly(kRope, A(), {F32({4, 32}, Rand(128, 8)), ids, cache, cache}), StatusCode::kInvalidArgument,
                 "input must be 3-D");
}

TEST(TransformerOps, RotaryPositionOutsideTheCachesFailsTheRun) {
  const auto rx = F32({1, 4, 32}, Rand(128, 5)), cache = F32({6, 8}, Rand(48, 6));
  EXPECT_REFUSED(Fails(kRope, A(), {rx, I64({1, 4}, {0, 1, 6, 3}), cache, cache}), StatusCode::kInvalidArgument,
                 "position 6 is outside cos_cache and sin_cache (6 positions)");
  EXPECT_REFUSED(Fails(kRope, A(), {rx, I64({1}, {3}), cache, cache}), StatusCode::kInvalidArgument,
                 "position 3 + 3 is outside cos_cache");
  EXPECT_REFUSED(Fails(kRope, A(), {rx, I64({1, 4}, {0, -1, 2, 3}), cache, cache}), StatusCode::kInvalidArgument,
                 "position -1 is outside");
}

// SkipLayerNormalization and SkipSimplifiedLayerNormalization with every
// output, against a double loop, rows repeating a 2-D skip.
TEST(TransformerOps, SkipNormsMatchALoop) {
  const int64_t rows = 6, h = 37;
  const auto x = F32({2, 3, h}, Rand(rows * h, 11)), skip = F32({3, h}, Rand(3 * h, 12));
  const auto gamma = F32({h}, Rand(h, 13)), beta = F32({h}, Rand(h, 14)), bias = F32({h}, Rand(h, 15));
  const auto xv = Values<float>(*x), sv = Values<float>(*skip), gv = Values<float>(*gamma), bv = Values<float>(*beta),
             cv = Values<float>(*bias);
  for (bool simplified : {false, true}) {
    std::vector<float> y(rows * h), mean(rows), inv(rows), sum(rows * h);
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, ms = 0;
      for (int64_t j = 0; j < h; ++j) {
        sum[r * h + j] = xv[r * h + j] + sv[(r % 3) * h + j] + cv[j];
        m += sum[r * h + j];
      }
      m /= h;
      for (int64_t j = 0; j < h; ++j) {
        const double d = simplified ? sum[r * h + j] : sum[r * h + j] - m;
        ms += d * d;
      }
      const double iv = 1.0 / std::sqrt(ms / h + 1e-5);
      for (int64_t j = 0; j < h; ++j)
        y[r * h + j] = simplified ? static_cast<float>(sum[r * h + j] * iv * gv[j])
                                  : static_cast<float>((sum[r * h + j] - m) * iv * gv[j] + bv[j]);
      mean[r] = simplified ? 0.f : static_cast<float>(m);
      inv[r] = static_cast<float>(iv);
    }
    const std::vector<TensorPtr> want = {F32({2, 3, h}, y), F32({2, 3, 1}, mean), F32({2, 3, 1}, inv),
                                         F32({2, 3, h}, sum)};
    if (simplified)
      Check(kSkipRms, A(), {x, skip, gamma, bias}, want);
    else
      Check(kSkip, A(), {x, skip, gamma, beta, bias}, want);
  }
}

// RotaryEmbedding with a partial rotary dimension, interleaved or not, 3-D
// and 4-D, against a loop.
TEST(TransformerOps, RotaryMatchesALoop) {
  const int64_t b = 2, s = 3, heads = 2, head = 10, rot = 6, pos = 5;
  const auto cache_c = F32({pos, rot / 2}, Rand(pos * rot / 2, 21)), cache_s = F32({pos, rot / 2}, Rand(pos * rot / 2, 22));
  const auto ids = I64({b, s}, {4, 0, 2, 1, 3, 0});
  const auto cv = Values<float>(*cache_c), sv = Values<float>(*cache_s);
  const auto idv = Values<int64_t>(*ids);
  for (bool four_d : {false, true}) {
    for (int64_t interleaved : {0, 1}) {
      const Shape shape = four_d ? Shape{b, heads, s, head} : Shape{b, s, heads * head};
      const auto x = F32(shape, Rand(b * s * heads * head, 23));
      auto xv = Values<float>(*x);
      std::vector<float> y = xv;
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t si = 0; si < s; ++si)
          for (int64_t n = 0; n < heads; ++n) {
            const int64_t off = four_d ? ((bi * heads + n) * s + si) * head : ((bi * s + si) * heads + n) * head;
            const int64_t p = idv[bi * s + si];
            for (int64_t i = 0; i < rot / 2; ++i) {
              const int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + rot / 2;
              const float c = cv[p * rot / 2 + i], sn = sv[p * rot / 2 + i];
              y[off + i0] = xv[off + i0] * c - xv[off + i1] * sn;
              y[off + i1] = xv[off + i1] * c + xv[off + i0] * sn;
            }
          }
      Check(kRope, A().I("interleaved", interleaved).I("num_heads", heads).I("rotary_embedding_dim", rot),
            {x, ids, cache_c, cache_s}, {F32(shape, y)});
    }
  }
}

}  // namespace
}  // namespace fcb::ops::testing
