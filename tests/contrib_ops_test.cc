// ONNX Runtime's transformer operators (com.microsoft SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, Gelu, BiasGelu, FastGelu, QuickGelu,
// RotaryEmbedding, GroupQueryAttention, MultiHeadAttention, MatMulNBits and the
// default-domain SimplifiedLayerNormalization):
// the models of scripts/export_contrib_models.py, each compiled into one .fcb
// for every target; every target the host runs matches ONNX Runtime on the
// case's inputs (CASE.feeds/NAME.npy) within 1e-5 relative L2 per output
// (CASE.ref/NAME.npy, from scripts/prepare_testdata.sh).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "fcb/fcb.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "reference_compare.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

class ContribModel : public ::testing::TestWithParam<const char*> {};

TEST_P(ContribModel, EveryTargetMatchesOnnxRuntime) {
  const std::string name = std::string("contrib_") + GetParam();
  const std::string dir = TestDataDir();
  const std::string model = dir + "/" + name + ".onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  const auto feeds = testing::ReadNpyFolder(dir + "/" + name + ".feeds");
  const auto want = testing::ReadNpyFolder(dir + "/" + name + ".ref");
  ASSERT_FALSE(feeds.empty()) << "no inputs for " << name << ": run scripts/prepare_testdata.sh";
  ASSERT_FALSE(want.empty()) << "no reference for " << name << ": run scripts/prepare_testdata.sh";

  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  CompileSpec spec;
  spec.targets = {"all"};
  auto report = Compile(model, spec, out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  int runs = 0;
  testing::ForEachRunnableTarget(
      out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
        for (int threads : {1, 3}) {
          auto ex = Execution::Create(program, "main", threads);
          ASSERT_TRUE(ex.ok()) << ex.status().message();
          const MethodInfo& info = ex.value()->info();
          ASSERT_EQ(info.inputs.size(), feeds.size());
          for (const auto& [in, a] : feeds) {
            Status s = ex.value()->SetInput(in, a.data.data(), a.data.size());
            ASSERT_TRUE(s.ok()) << in << ": " << s.message();
          }
          Status s = ex.value()->Run();
          ASSERT_TRUE(s.ok()) << s.message();
          int compared = 0;
          ASSERT_NO_FATAL_FAILURE(testing::ExpectOutputsMatch(
              *ex.value(), want, 1e-5, name + " on " + target + ", " + std::to_string(threads) + " threads", &compared));
          ++runs;
        }
      });
  EXPECT_GT(runs, 0) << "no target ran " << name;
}

// The cases of scripts/export_contrib_models.py (--list prints them with the
// contrib_ prefix).
INSTANTIATE_TEST_SUITE_P(
    Ort, ContribModel,
    ::testing::Values("sln_h7", "sln_h576", "sln_axis1", "sskip_h64", "sskip_h576_nobias", "sskip_h7_stats",
                      "skip_h7_all", "skip_h64_nobeta", "skip_h576_bias", "gelu", "biasgelu_h64",
                      "fastgelu_h576", "fastgelu_nobias", "quickgelu", "quickgelu_alpha1", "rope3d",
                      "rope3d_interleaved", "rope4d_offset", "rope4d_interleaved", "rope3d_partial",
                      "rope4d_partial_interleaved", "chain",
                      // attention (attention_cases() in the script)
                      "gqa_prefill_h6kv2", "gqa_prefill_rot_h9kv3", "gqa_prefill_packed_h6kv3",
                      "gqa_prefill_window_softcap", "gqa_decode_static_h14kv2", "gqa_decode_static_window",
                      "gqa_decode_grow_h6kv1", "gqa_decode_grow_partial_rot", "mha_plain", "mha_bias_lengths", "mha_bias_keys_output_only",
                      "mha_past_causal_keys", "mha_cross_attn_bias", "mha_bnsh_kv",
                      // MatMulNBits (nbits_cases() in the script)
                      "nbits4_b32_m1", "nbits4_b16_zp_m1",
                      "nbits4_b64_zp_bias", "nbits4_b128_k300", "nbits4_b256_m1_bias", "nbits4_b32_k_odd",
                      "nbits4_b32_floatzp", "nbits4_b32_gidx", "nbits8_b32_m1", "nbits8_b16_zp_m4",
                      "nbits8_b64_k100", "nbits8_b128_m9", "nbits8_b256_zp_m1",
                      // MatMul by a dequantized int8/uint8 weight (weight_only_cases() in the script)
                      "dqmm_i8_tensor_tbefore_m1", "dqmm_i8_column_kn_m2", "dqmm_u8_tensor_kn_m6",
                      "dqmm_u8_column_tafter_m1", "dqmm_i8_column_tbefore_m2", "dqmm_u8_tensor_tafter_m1",
                      "dqmm_i8_nozp_tafter_m1", "dqmm_u8_column_tbefore_m1", "dqmm_i8_rows_kn_m1",
                      // accuracy_level 4 (nbits_acc4_cases() in the script)
                      "nbits4_acc4_b32_m1", "nbits4_acc4_b16_zp_m1", "nbits4_acc4_b64_zp_bias",
                      "nbits4_acc4_b128_k300", "nbits4_acc4_b256_m1_bias", "nbits4_acc4_b32_k_odd",
                      "nbits4_acc4_b16_m6", "nbits4_acc4_b256_zp_m5", "nbits8_acc4_b32_m1",
                      "nbits8_acc4_b16_zp_m4", "nbits8_acc4_b64_k100", "nbits8_acc4_b128_m9",
                      "nbits8_acc4_b256_zp_m1", "nbits4_acc4_gidx_float", "nbits4_acc4_floatzp",
                      "nbits4_acc4_b32_zp_bias_m130", "nbits4_acc4_b128_m37", "nbits4_acc4_b16_zp_m37",
                      "nbits4_acc4_b256_bias_m130", "nbits8_acc4_b64_zp_m130", "nbits8_acc4_b32_m37"),
    [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace fcb
