// com.microsoft GroupQueryAttention and MultiHeadAttention (attention_contrib.cc):
// what their shape inference refuses, naming the attribute or input.
// tests/contrib_ops_test.cc compares whole models with ONNX Runtime.
#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

constexpr char kGqa[] = "com.microsoft.GroupQueryAttention";
constexpr char kMha[] = "com.microsoft.MultiHeadAttention";

TensorPtr Absent() { return std::make_shared<ir::TensorData>(); }
TensorPtr Zeros(Shape s) { return F32(s, std::vector<float>(static_cast<size_t>(ir::NumElements(s)), 0.f)); }

TEST(AttentionContrib, GqaInferenceRefusesWhatTheKernelCannotRun) {
  // batch 2, sequence 3, 6 heads and 2 KV heads of 8.
  const auto q = Zeros({2, 3, 48}), k = Zeros({2, 3, 16}), v = Zeros({2, 3, 16});
  const auto seqlens = I32({2}, {2, 2}), total = I32({1}, {3});
  const auto heads = [] { return A().I("num_heads", 6).I("kv_num_heads", 2); };
  const std::vector<TensorPtr> ok{q, k, v, Absent(), Absent(), seqlens, total};
  EXPECT_TRUE(InferOnly(kGqa, heads(), ok, 3).ok());
  EXPECT_REFUSED(InferOnly(kGqa, A().I("num_heads", 6).I("kv_num_heads", 4), ok, 3), StatusCode::kInvalidArgument,
                 "num_heads 6 must be a multiple of kv_num_heads 4");
  EXPECT_REFUSED(InferOnly(kGqa, A().I("num_heads", 6), ok, 3), StatusCode::kInvalidArgument, "kv_num_heads");
  EXPECT_REFUSED(InferOnly(kGqa, A().I("num_heads", -6).I("kv_num_heads", 2), ok, 3),
                 StatusCode::kInvalidArgument, "num_heads must be in");
  EXPECT_REFUSED(InferOnly(kGqa, heads().I("do_rotary", 2), ok, 3), StatusCode::kInvalidArgument,
                 "do_rotary must be 0 or 1");
  EXPECT_REFUSED(InferOnly(kGqa, heads().I("do_rotary", 1), ok, 3), StatusCode::kInvalidArgument,
                 "do_rotary = 1 needs cos_cache");
  EXPECT_REFUSED(InferOnly(kGqa, heads().F("softcap", -1.f), ok, 3), StatusCode::kInvalidArgument, "softcap");
  EXPECT_REFUSED(InferOnly(kGqa, heads().I("local_window_size", -5), ok, 3), StatusCode::kInvalidArgument,
                 "local_window_size");
  EXPECT_REFUSED(InferOnly(kGqa, heads().I("smooth_softmax", 1), ok, 3), StatusCode::kUnsupported,
                 "smooth_softmax");
  EXPECT_REFUSED(InferOnly(kGqa, heads().I("qk_output", 1), ok, 3), StatusCode::kUnsupported, "qk_output");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, Absent(), Absent(), Absent(), seqlens, total}, 3),
                 StatusCode::kInvalidArgument, "key and value must be both present");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {Zeros({2, 3, 50}), k, v, Absent(), Absent(), seqlens, total}, 3),
                 StatusCode::kInvalidArgument, "not a multiple of num_heads");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, Zeros({2, 3, 24}), v, Absent(), Absent(), seqlens, total}, 3),
                 StatusCode::kInvalidArgument, "key 2x3x24");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, v, Zeros({2, 2, 5, 8}), Absent(), seqlens, total}, 3),
                 StatusCode::kInvalidArgument, "past_key and past_value");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, v, Zeros({2, 3, 5, 8}), Zeros({2, 3, 5, 8}), seqlens, total}, 3),
                 StatusCode::kInvalidArgument, "past_key 2x3x5x8");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, v, Absent(), Absent(), I64({2}, {2, 2}), total}, 3),
                 StatusCode::kInvalidArgument, "seqlens_k must be int32");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, v, Absent(), Absent(), I32({3}, {2, 2, 2}), total}, 3),
                 StatusCode::kInvalidArgument, "seqlens_k");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, v, Absent(), Absent(), seqlens, I32({2}, {3, 3})}, 3),
                 StatusCode::kInvalidArgument, "total_sequence_length");
  // Caches wider than half a head.
  EXPECT_REFUSED(InferOnly(kGqa, heads().I("do_rotary", 1),
                           {q, k, v, Absent(), Absent(), seqlens, total, Zeros({16, 5}), Zeros({16, 5})}, 3),
                 StatusCode::kInvalidArgument, "rotary_dim <= head size");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), {q, k, v, Absent(), Absent(), seqlens, total, Absent(), Absent(),
                                           I64({2, 3}, {0, 1, 2, 0, 1, 2})}, 3),
                 StatusCode::kUnsupported, "position_ids");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), ok, 4), StatusCode::kUnsupported, "output_qk");
  EXPECT_REFUSED(InferOnly(kGqa, heads(), ok, 1), StatusCode::kInvalidArgument, "present_key and present_value");
}

TEST(AttentionContrib, MhaInferenceRefusesWhatTheKernelCannotRun) {
  const auto q = Zeros({2, 3, 32}), k = Zeros({2, 5, 32}), v = Zeros({2, 5, 16});
  const auto h4 = [] { return A().I("num_heads", 4); };
  EXPECT_TRUE(InferOnly(kMha, h4(), {q, k, v}, 3).ok());
  EXPECT_REFUSED(InferOnly(kMha, A(), {q, k, v}, 1), StatusCode::kInvalidArgument, "num_heads must be in");
  EXPECT_REFUSED(InferOnly(kMha, h4().I("unidirectional", 3), {q, k, v}, 1), StatusCode::kInvalidArgument,
                 "unidirectional must be 0 or 1");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {Zeros({2, 3, 4, 3, 8})}, 1), StatusCode::kUnsupported, "packed QKV");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, Zeros({2, 5, 4, 2, 8})}, 1), StatusCode::kUnsupported,
                 "key and value must both be given");
  EXPECT_REFUSED(InferOnly(kMha, A().I("num_heads", 5), {q, k, v}, 1), StatusCode::kInvalidArgument,
                 "not a multiple of num_heads 5");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, k, v, Zeros({79})}, 1), StatusCode::kInvalidArgument,
                 "bias must be [80]");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, k, v, Absent(), I32({2, 4}, std::vector<int32_t>(8, 1))}, 1),
                 StatusCode::kUnsupported, "key_padding_mask 2x4");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, k, v, Absent(), Absent(), Zeros({2, 4, 3, 4})}, 1),
                 StatusCode::kInvalidArgument, "attention_bias 2x4x3x4");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, k, v, Absent(), Absent(), Absent(), Zeros({2, 4, 2, 8})}, 1),
                 StatusCode::kInvalidArgument, "past_key and past_value");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, k, v, Absent(), Absent(), Absent(), Absent(), Absent(), I32({1}, {0})}, 1),
                 StatusCode::kUnsupported, "past_sequence_length");
  EXPECT_REFUSED(InferOnly(kMha, h4(), {q, k, v}, 4), StatusCode::kUnsupported, "output_qk");
}

}  // namespace
}  // namespace fcb::ops::testing
