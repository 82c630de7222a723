// precision "int4" end to end, against an independent oracle:
// scripts/quantize_int4_reference.py writes the same quantization (numpy:
// same scales, same half-to-even rounding) as ONNX files with com.microsoft
// MatMulNBits and blocked DequantizeLinear, and ONNX Runtime runs them
// (scripts/prepare_testdata.sh, DIR/int4/). fcb compiles the *float* models
// with precision int4 for every target; on every target this host runs:
// - scripts/export_llm_models.py --shape tiny --form b, a prompt of 8 tokens
//   after a 1-position past (the logits and presents), rel L2 <= 1e-5 of ONNX
//   Runtime's on the pre-quantized file;
// - a float MLP with K = 100 and 96 (partial blocks), a Gemm with transB,
//   alpha and a bias, all-zero blocks: rel L2 <= 1e-5;
// - a tied embedding and LM head (MatMul by Transpose(E)): rel L2 <= 1e-5.
// And: the weights stay shared (two methods for every target store the
// weights of one, each quantized weight once); the int4 file's weights are
// far below the fp32 one's; refusals (int4 at optimization_level 0, int4_head
// without int4, int4_head not a boolean, unknown precisions) name what is wrong.
#include <gtest/gtest.h>

#include <cstring>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

std::string Int4Dir() { return TestDataDir() + "/int4"; }

std::vector<float> AsFloats(const NpyArray& a) {
  std::vector<float> v(a.data.size() / 4);
  std::memcpy(v.data(), a.data.data(), v.size() * 4);
  return v;
}

// Compiles `model` with precision int4 for every target into `out`, with
// int4_activations `acts` ("" the default, int8).
void CompileInt4(const std::string& model, const std::map<std::string, std::vector<InputDim>>& shapes,
                 const std::string& out, const std::string& acts = "float") {
  CompileSpec spec;
  spec.targets = {"all"};
  TargetOptions o;
  o.precision = "int4";
  o.int4_activations = acts;
  spec.target_options = {o};
  spec.input_shapes = shapes;
  auto r = Compile(model, spec, out);
  ASSERT_TRUE(r.ok()) << r.status().message();
}

// Runs `file` on every runnable target with the .npy feeds of `feeds` (name ->
// path) and compares every output named in `ref_dir` with rel L2 <= `tol`.
void ExpectMatchesOrt(const std::string& file, const std::map<std::string, std::string>& feeds,
                      const std::string& ref_dir, double tol) {
  const auto refs = testing::ReadNpyFolder(ref_dir);
  ASSERT_FALSE(refs.empty()) << "no ONNX Runtime references in " << ref_dir << "; run scripts/prepare_testdata.sh";
  int targets = 0;
  testing::ForEachRunnableTarget(file, [&](const std::string& target, const std::shared_ptr<const Program>& p) {
    ++targets;
    auto ex = Execution::Create(p, "main", 1);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    for (const auto& [name, path] : feeds) {
      auto a = ReadNpy(path);
      ASSERT_TRUE(a.ok()) << path;
      ASSERT_TRUE(ex.value()->SetInput(name, a.value().data.data(), a.value().data.size()).ok()) << name;
    }
    Status st = ex.value()->Run();
    ASSERT_TRUE(st.ok()) << st.message();
    const MethodInfo& info = ex.value()->info();
    int compared = 0;
    for (size_t k = 0; k < info.outputs.size(); ++k) {
      auto it = refs.find(info.outputs[k].name);
      if (it == refs.end()) continue;
      const std::vector<float> want = AsFloats(it->second);
      ASSERT_EQ(info.outputs[k].bytes(), want.size() * 4) << info.outputs[k].name;
      const float* y = static_cast<const float*>(ex.value()->output_data(k));
      const auto d = testing::Compare(std::vector<float>(y, y + want.size()), want);
      EXPECT_LE(d.rel_l2, tol) << target << ", output " << info.outputs[k].name;
      std::printf("[int4] %s %s: rel L2 vs ONNX Runtime on the pre-quantized file %.2e\n", target.c_str(),
                  info.outputs[k].name.c_str(), d.rel_l2);
      ++compared;
    }
    EXPECT_EQ(compared, static_cast<int>(refs.size())) << target;
  });
  EXPECT_GT(targets, 0);
}

std::map<std::string, std::vector<InputDim>> TinyShapes(int64_t tokens, int64_t past) {
  std::map<std::string, std::vector<InputDim>> s = {{"input_ids", {1, tokens}},
                                                    {"attention_mask", {1, past + tokens}}};
  for (int l = 0; l < 2; ++l)
    for (const char* kv : {"key", "value"})
      s["past_key_values." + std::to_string(l) + "." + kv] = {1, 2, past, 16};
  return s;
}

std::map<std::string, std::string> TinyFeeds() {
  const std::string d = Int4Dir();
  std::map<std::string, std::string> f = {{"input_ids", d + "/llm_tiny_b.ids.npy"},
                                          {"attention_mask", d + "/llm_tiny_b.mask.npy"}};
  for (int l = 0; l < 2; ++l)
    for (const char* kv : {"key", "value"})
      f["past_key_values." + std::to_string(l) + "." + kv] = d + "/llm_tiny_b.past.npy";
  return f;
}

TEST(Int4Precision, TinyLlmFormBMatchesOrtOnThePrequantizedFile) {
  TempDir tmp;
  CompileInt4(Int4Dir() + "/llm_tiny_b.onnx", TinyShapes(8, 1), tmp.File("tiny.fcb"));
  ExpectMatchesOrt(tmp.File("tiny.fcb"), TinyFeeds(), Int4Dir() + "/llm_tiny_b.int4.ref", 1e-5);
  // The quantization is really there: the float file differs from int4 by far more.
  const auto fp = testing::ReadNpyFolder(Int4Dir() + "/llm_tiny_b.fp32.ref");
  const auto q = testing::ReadNpyFolder(Int4Dir() + "/llm_tiny_b.int4.ref");
  ASSERT_TRUE(fp.count("logits") && q.count("logits"));
  EXPECT_GT(testing::Compare(AsFloats(q.at("logits")), AsFloats(fp.at("logits"))).rel_l2, 1e-3);
}

// The default arithmetic (int4_activations int8: MatMulNBits accuracy_level
// 4, activations quantized per block of 32 and integer dot products) against
// ONNX Runtime on the same quantization written with accuracy_level 4, which
// ONNX Runtime computes the same way.
TEST(Int4Precision, Int8ActivationsMatchOrtAtAccuracyLevel4) {
  TempDir tmp;
  CompileInt4(Int4Dir() + "/llm_tiny_b.onnx", TinyShapes(8, 1), tmp.File("tiny.fcb"), "");
  ExpectMatchesOrt(tmp.File("tiny.fcb"), TinyFeeds(), Int4Dir() + "/llm_tiny_b.int4_l4.ref", 1e-5);
  CompileInt4(Int4Dir() + "/mlp_odd_k.onnx", {}, tmp.File("mlp.fcb"), "int8");
  ExpectMatchesOrt(tmp.File("mlp.fcb"), {{"x", Int4Dir() + "/mlp_odd_k.x.npy"}}, Int4Dir() + "/mlp_odd_k.int4_l4.ref",
                   1e-5);
  CompileInt4(Int4Dir() + "/tied_head.onnx", {}, tmp.File("tied.fcb"), "");
  ExpectMatchesOrt(tmp.File("tied.fcb"), {{"ids", Int4Dir() + "/tied_head.ids.npy"}},
                   Int4Dir() + "/tied_head.int4_l4.ref", 1e-5);
  // The two arithmetics differ (the activations' rounding is really there).
  const auto l0 = testing::ReadNpyFolder(Int4Dir() + "/llm_tiny_b.int4.ref");
  const auto l4 = testing::ReadNpyFolder(Int4Dir() + "/llm_tiny_b.int4_l4.ref");
  ASSERT_TRUE(l0.count("logits") && l4.count("logits"));
  EXPECT_GT(testing::Compare(AsFloats(l4.at("logits")), AsFloats(l0.at("logits"))).rel_l2, 1e-5);
}

TEST(Int4Precision, MlpWithOddKMatchesOrtOnThePrequantizedFile) {
  TempDir tmp;
  CompileInt4(Int4Dir() + "/mlp_odd_k.onnx", {}, tmp.File("mlp.fcb"));
  ExpectMatchesOrt(tmp.File("mlp.fcb"), {{"x", Int4Dir() + "/mlp_odd_k.x.npy"}}, Int4Dir() + "/mlp_odd_k.int4.ref",
                   1e-5);
}

TEST(Int4Precision, TiedEmbeddingAndHeadMatchOrtOnThePrequantizedFile) {
  TempDir tmp;
  CompileInt4(Int4Dir() + "/tied_head.onnx", {}, tmp.File("tied.fcb"));
  ExpectMatchesOrt(tmp.File("tied.fcb"), {{"ids", Int4Dir() + "/tied_head.ids.npy"}},
                   Int4Dir() + "/tied_head.int4.ref", 1e-5);
}

// Two methods (an 8-token prefill and a one-token decode) for every target
// store the weights of one method for one target: the pool is target-neutral
// and shared across methods. The int4 weights are a small fraction of fp32's.
TEST(Int4Precision, WeightsSharedAcrossTargetsAndMethods) {
  TempDir tmp;
  const std::string model = Int4Dir() + "/llm_tiny_b.onnx";
  TargetOptions o;
  o.precision = "int4";
  CompileSpec one;
  one.targets = {"generic"};
  one.target_options = {o};
  one.input_shapes = TinyShapes(8, 1);
  ASSERT_TRUE(CompileMethods({{"prefill", model}}, one, tmp.File("one.fcb")).ok());
  CompileSpec all = one;
  all.targets = {"all"};
  all.input_shapes.clear();
  for (const auto& [name, dims] : TinyShapes(8, 1)) all.input_shapes["prefill:" + name] = dims;
  for (const auto& [name, dims] : TinyShapes(1, 8)) all.input_shapes["decode:" + name] = dims;
  auto r = CompileMethods({{"prefill", model}, {"decode", model}}, all, tmp.File("all.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // The prefill method alone for every target: exactly the one-target pool.
  CompileSpec prefill_all = one;
  prefill_all.targets = {"all"};
  ASSERT_TRUE(CompileMethods({{"prefill", model}}, prefill_all, tmp.File("prefill_all.fcb")).ok());
  auto s1 = InspectFile(tmp.File("one.fcb"));
  auto sp = InspectFile(tmp.File("prefill_all.fcb"));
  auto sa = InspectFile(tmp.File("all.fcb"));
  ASSERT_TRUE(s1.ok() && sp.ok() && sa.ok());
  EXPECT_EQ(sp.value().weight_pool.bytes, s1.value().weight_pool.bytes) << "the pool is target-neutral";
  EXPECT_EQ(sp.value().weight_pool.bytes_referenced_by_contexts,
            sp.value().contexts.size() * s1.value().weight_pool.bytes);
  // The decode method adds only its own few bytes of shape constants (its
  // sequence length differs): every weight matrix, table and scale is shared.
  EXPECT_GE(sa.value().weight_pool.bytes, s1.value().weight_pool.bytes);
  EXPECT_LE(sa.value().weight_pool.bytes, s1.value().weight_pool.bytes + 1024)
      << "each quantized weight stored once, whatever the targets and methods";
  EXPECT_GT(sa.value().weight_pool.bytes_saved_by_sharing, 10 * sa.value().weight_pool.bytes);
  std::printf("[int4] tiny form b pool: one method, one target %llu bytes; 2 methods x %zu contexts %llu bytes\n",
              static_cast<unsigned long long>(s1.value().weight_pool.bytes), sa.value().contexts.size(),
              static_cast<unsigned long long>(sa.value().weight_pool.bytes));
  CompileSpec fp = one;
  fp.target_options[0].precision = "fp32";
  ASSERT_TRUE(CompileMethods({{"prefill", model}}, fp, tmp.File("fp32.fcb")).ok());
  auto sf = InspectFile(tmp.File("fp32.fcb"));
  ASSERT_TRUE(sf.ok());
  const double ratio =
      static_cast<double>(s1.value().weight_pool.bytes) / static_cast<double>(sf.value().weight_pool.bytes);
  std::printf("[int4] tiny form b weights: int4 %llu bytes, fp32 %llu bytes (%.3fx)\n",
              static_cast<unsigned long long>(s1.value().weight_pool.bytes),
              static_cast<unsigned long long>(sf.value().weight_pool.bytes), ratio);
  // The tiny shape's 256 x 64 embedding and head are 8-bit and the norms and
  // rotary tables float, so the ratio is above the large models' 0.2 (0.16
  // with int4_head).
  EXPECT_LT(ratio, 0.25);
}

TEST(Int4Precision, Refusals) {
  TempDir tmp;
  const std::string model = Int4Dir() + "/mlp_odd_k.onnx";
  CompileSpec spec;
  spec.targets = {"generic"};
  TargetOptions o;
  o.precision = "int4";
  o.optimization_level = 0;
  spec.target_options = {o};
  EXPECT_REFUSED(Compile(model, spec, tmp.File("a.fcb")), StatusCode::kInvalidArgument,
                 "precision int4 needs the optimizing pipeline; set optimization_level to 1 or higher");
  spec.target_options[0] = TargetOptions{};
  spec.target_options[0].int4_head = true;
  EXPECT_REFUSED(Compile(model, spec, tmp.File("a.fcb")), StatusCode::kInvalidArgument,
                 "int4_head is an option of precision \"int4\", not of precision 'fp32'");
  EXPECT_REFUSED(ParseSpecJson(R"({"targets": "generic", "target_options": {"precision": "int4", "int4_head": 1}})"),
                 StatusCode::kInvalidArgument, "int4_head must be true or false");
  EXPECT_REFUSED(ParseSpecJson(R"({"targets": "generic", "target_options": {"precision": "int4", "int4_haed": true}})"),
                 StatusCode::kInvalidArgument, "did you mean 'int4_head'");
  spec.target_options[0] = TargetOptions{};
  spec.target_options[0].precision = "int3";
  EXPECT_REFUSED(Compile(model, spec, tmp.File("a.fcb")), StatusCode::kInvalidArgument,
                 "precision 'int3' is not valid; use \"fp32\", \"bf16\", \"int8\" or \"int4\"");
  spec.target_options[0] = TargetOptions{};
  spec.target_options[0].int4_activations = "float";
  EXPECT_REFUSED(Compile(model, spec, tmp.File("a.fcb")), StatusCode::kInvalidArgument,
                 "int4_activations is an option of precision \"int4\", not of precision 'fp32'");
  EXPECT_REFUSED(
      ParseSpecJson(R"({"targets": "generic", "target_options": {"precision": "int4", "int4_activations": "int16"}})"),
      StatusCode::kInvalidArgument, "int4_activations must be \"int8\"");
  EXPECT_FALSE(testing::FileExists(tmp.File("a.fcb")));
  // The command line: --precision and --int4-head.
  const auto bad = testing::RunCommand(testing::CliPath() + " compile " + model + " -o " + tmp.File("b.fcb") +
                                       " --target generic --precision int5 2>&1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("precision 'int5' is not valid"), std::string::npos) << bad.out;
  const auto good = testing::RunCommand(testing::CliPath() + " compile " + model + " -o " + tmp.File("c.fcb") +
                                        " --target generic --target x86-64-v3 --precision int4 --int4-head 2>&1");
  EXPECT_EQ(good.exit_code, 0) << good.out;
  auto s = InspectFile(tmp.File("c.fcb"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s.value().contexts.size(), 2u);
  for (const auto& c : s.value().contexts) {
    EXPECT_NE(c.options_json.find("\"precision\":\"int4\""), std::string::npos) << c.options_json;
    EXPECT_NE(c.options_json.find("\"int4_head\":true"), std::string::npos) << c.options_json;
  }
}

}  // namespace
}  // namespace fcb
