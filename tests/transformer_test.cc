// The tiny decoder-only transformer (examples/transformer): a prefill and a
// decode method exported from one PyTorch module, compiled into one .fcb for
// every target. The weights are stored once, and on every target the greedy
// tokens and the logits they came from match ONNX Runtime running the same
// two ONNX files (tools/oracle/ort_generate.js, via prepare_testdata.sh).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include <nlohmann/json.hpp>

#include "../examples/transformer/greedy.h"
#include "fcb/npy.h"
#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

// The exported model's sizes (export_tiny_decoder.py).
constexpr int64_t kVocab = 96, kDModel = 48, kLayers = 2, kMaxCtx = 32;

// Parameters of the PyTorch module: embeddings, per block two LayerNorms, the
// QKV, output and two MLP projections with biases, the final LayerNorm, the head.
constexpr int64_t kParams = kVocab * kDModel + kMaxCtx * kDModel +
                            kLayers * (4 * kDModel + kDModel * 3 * kDModel + 3 * kDModel + kDModel * kDModel +
                                       kDModel + kDModel * 4 * kDModel + 4 * kDModel + 4 * kDModel * kDModel +
                                       kDModel) +
                            2 * kDModel + kDModel * kVocab;

// Greedy decoding with `file`'s prefill and decode methods on every target
// this host runs, at 1 and 2 threads, against ONNX Runtime's tokens and the
// logits each was chosen from (DIR/<ref>/tokens.npy, logits.npy; the prompt is
// DIR/tiny_decoder.prompt.npy). `each_target` runs first on every program.
void ExpectGenerationMatchesOnnxRuntime(
    const std::string& file, const std::string& ref, const example::DecoderNames& names = {},
    const std::function<void(const std::shared_ptr<const Program>&)>& each_target = nullptr) {
  const std::string dir = TestDataDir();
  auto prompt = ReadNpy(dir + "/tiny_decoder.prompt.npy");
  auto want_tokens = ReadNpy(dir + "/" + ref + "/tokens.npy");
  auto want_logits = ReadNpy(dir + "/" + ref + "/logits.npy");
  ASSERT_TRUE(prompt.ok() && want_tokens.ok() && want_logits.ok());
  std::vector<int64_t> p(prompt.value().data.size() / 8), tokens(want_tokens.value().data.size() / 8);
  std::memcpy(p.data(), prompt.value().data.data(), p.size() * 8);
  std::memcpy(tokens.data(), want_tokens.value().data.data(), tokens.size() * 8);
  const int n = static_cast<int>(tokens.size());
  ASSERT_EQ(want_logits.value().shape, (std::vector<int64_t>{n, kVocab}));
  const float* logits = reinterpret_cast<const float*>(want_logits.value().data.data());

  testing::ForEachRunnableTarget(
      file, [&](const std::string&, const std::shared_ptr<const Program>& program) {
        if (each_target) each_target(program);
        for (int threads : {1, 2}) {
          SCOPED_TRACE(threads);
          auto g = example::GreedyGenerate(program, p, n, threads, names);
          ASSERT_TRUE(g.ok()) << g.status().message();
          EXPECT_EQ(g.value().tokens, tokens);
          ASSERT_EQ(g.value().logits.size(), static_cast<size_t>(n));
          for (int i = 0; i < n; ++i) {
            std::vector<float> want(logits + i * kVocab, logits + (i + 1) * kVocab);
            auto d = testing::Compare(g.value().logits[i], want);
            EXPECT_LT(d.rel_l2, 1e-5) << "token " << i;
            EXPECT_LT(d.max_abs, 1e-4) << "token " << i;
          }
        }
      });
}

class TransformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDataDir();
    for (const char* f : {"tiny_decoder.prefill.onnx", "tiny_decoder.decode.onnx", "tiny_decoder.prompt.npy",
                          "tiny_decoder.ref/tokens.npy", "tiny_decoder.ref/logits.npy"})
      ASSERT_TRUE(testing::FileExists(dir_ + "/" + f)) << dir_ << "/" << f << " is missing: run scripts/prepare_testdata.sh";
    fcb_ = tmp_.File("tiny_decoder.fcb");
    CompileSpec spec;
    spec.targets = {"all"};
    auto r = CompileMethods({{"prefill", dir_ + "/tiny_decoder.prefill.onnx"},
                             {"decode", dir_ + "/tiny_decoder.decode.onnx"}},
                            spec, fcb_);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }

  std::string dir_, fcb_;
  TempDir tmp_;
};

TEST_F(TransformerTest, WeightsAreHeldOnce) {
  auto r = testing::RunCommand(testing::CliPath() + " inspect --json " + fcb_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["targets"].size(), ListTargets().size());
  ASSERT_EQ(j["contexts"].size(), 2 * ListTargets().size());
  const uint64_t params = kParams * sizeof(float);
  const uint64_t pool = j["weight_pool"]["bytes"];
  // Eight contexts use the parameters; the pool holds them once, plus a few
  // small constants (masks, positions, cache padding) of each method.
  EXPECT_GE(pool, params);
  EXPECT_LT(pool, params + params / 20) << "the pool should hold the parameters once";
  for (const auto& [method, m] : j["per_method"].items()) {
    SCOPED_TRACE(method);
    EXPECT_GE(m["weight_bytes_referenced"].get<uint64_t>(), params) << "each method uses every parameter";
    EXPECT_LT(m["weight_bytes_unique"].get<uint64_t>(), params / 20) << "the parameters are shared by both methods";
  }
  for (const auto& [target, t] : j["per_target"].items()) {
    SCOPED_TRACE(target);
    EXPECT_EQ(t["weight_bytes_unique"].get<uint64_t>(), 0u) << "every target shares every byte";
  }
}

TEST_F(TransformerTest, TokensAndLogitsMatchOnnxRuntimeOnEveryTarget) {
  ExpectGenerationMatchesOnnxRuntime(fcb_, "tiny_decoder.ref");
}

// The example program prints the same tokens.
TEST_F(TransformerTest, ExampleProgramGeneratesTheReferenceTokens) {
  auto prompt = ReadNpy(dir_ + "/tiny_decoder.prompt.npy");
  auto want_tokens = ReadNpy(dir_ + "/tiny_decoder.ref/tokens.npy");
  ASSERT_TRUE(prompt.ok() && want_tokens.ok());
  std::string cmd = std::string(FCB_BINARY_DIR) + "/examples/tiny_decoder_generate " + fcb_ + " --tokens 16";
  std::string want = "tokens:";
  for (size_t i = 0; i < prompt.value().data.size() / 8; ++i) {
    int64_t v;
    std::memcpy(&v, prompt.value().data.data() + 8 * i, 8);
    cmd += " " + std::to_string(v);
  }
  for (size_t i = 0; i < want_tokens.value().data.size() / 8; ++i) {
    int64_t v;
    std::memcpy(&v, want_tokens.value().data.data() + 8 * i, 8);
    want += " " + std::to_string(v);
  }
  auto r = testing::RunCommand(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(want + "\n"), std::string::npos) << r.out;
}

// A merged decoder: prefill and decode as the two branches of one graph's If
// on a use_cache_branch input (export_tiny_decoder.py merge_decoders, the
// form transformer exporters write). input_values fixes the flag per method,
// so each method holds only its branch; the weights are stored once.
class MergedDecoderTest : public ::testing::Test {
 protected:
  static NpyArray Flag(bool b) {
    NpyArray a;
    a.dtype = kNpyBool;
    a.shape = {1};
    a.data = {static_cast<uint8_t>(b)};
    return a;
  }
  static CompileSpec Spec() {
    CompileSpec spec;
    spec.targets = {"all"};
    spec.input_values["prefill:use_cache_branch"] = Flag(false);
    spec.input_values["decode:use_cache_branch"] = Flag(true);
    spec.input_shapes["prefill:input_ids"] = {1, 8};
    spec.input_shapes["decode:input_ids"] = {1, 1};
    return spec;
  }
  void SetUp() override {
    dir_ = TestDataDir();
    merged_ = dir_ + "/tiny_decoder.merged.onnx";
    for (const char* f : {"tiny_decoder.merged.onnx", "tiny_decoder.prompt.npy", "tiny_decoder.merged.ref/tokens.npy",
                          "tiny_decoder.merged.ref/logits.npy"})
      ASSERT_TRUE(testing::FileExists(dir_ + "/" + f)) << dir_ << "/" << f << " is missing: run scripts/prepare_testdata.sh";
  }
  // Weight pool bytes and file size of a compiled file.
  static std::pair<uint64_t, uint64_t> Sizes(const std::string& file) {
    auto r = testing::RunCommand(testing::CliPath() + " inspect --json " + file);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return {0, 0};
    return {j["weight_pool"]["bytes"].get<uint64_t>(), testing::ReadBytes(file).size()};
  }

  std::string dir_, merged_;
  TempDir tmp_;
};

TEST_F(MergedDecoderTest, InputValuesMakePrefillAndDecodeMatchingOnnxRuntime) {
  const std::string out = tmp_.File("merged.fcb");
  auto r = CompileMethods({{"prefill", merged_}, {"decode", merged_}}, Spec(), out);
  ASSERT_TRUE(r.ok()) << r.status().message();

  ExpectGenerationMatchesOnnxRuntime(
      out, "tiny_decoder.merged.ref", example::DecoderNames::Merged(), [](const std::shared_ptr<const Program>& program) {
        // The flag is no input of either method any more.
        for (const char* m : {"prefill", "decode"}) {
          auto ex = Execution::Create(program, m, 1);
          ASSERT_TRUE(ex.ok()) << ex.status().message();
          for (const auto& in : ex.value()->info().inputs) EXPECT_NE(in.name, "use_cache_branch") << m;
          EXPECT_EQ(ex.value()->info().inputs.size(), 4u) << m << ": input_ids, pos, k_cache, v_cache";
        }
      });

  // Both methods in one file hold the weights once: the pool is one
  // method's plus the other's few constants (the plans, which name every
  // step, come on top: a few KiB per method for this tiny model).
  CompileSpec one = Spec();
  one.input_values.erase("prefill:use_cache_branch");
  one.input_shapes.erase("prefill:input_ids");
  const std::string single = tmp_.File("decode_only.fcb");
  auto r1 = CompileMethods({{"decode", merged_}}, one, single);
  ASSERT_TRUE(r1.ok()) << r1.status().message();
  const auto [pool_both, file_both] = Sizes(out);
  const auto [pool_one, file_one] = Sizes(single);
  EXPECT_GT(pool_one, static_cast<uint64_t>(kParams * sizeof(float)));
  // What prefill adds is its own small constants (causal mask, positions).
  EXPECT_LT(pool_both, pool_one + kParams * sizeof(float) / 20) << "the weights must be stored once for both methods";
  std::printf("merged decoder: prefill + decode %llu bytes (pool %llu), decode alone %llu bytes (pool %llu)\n",
              static_cast<unsigned long long>(file_both), static_cast<unsigned long long>(pool_both),
              static_cast<unsigned long long>(file_one), static_cast<unsigned long long>(pool_one));
}

// Values that contradict the model are refused naming the input; the CLI
// reads them from .npy files and says which flag was wrong.
TEST_F(MergedDecoderTest, ValuesThatContradictTheModelAreRefusedNamingTheInput) {
  struct Case {
    const char* what;
    NpyArray value;
    const char* key;
    std::vector<std::string> want;
  };
  NpyArray half = Flag(true);
  half.dtype = kNpyF64;
  half.data.assign(8, 0);
  const double h = 0.5;
  std::memcpy(half.data.data(), &h, 8);
  NpyArray two = Flag(true);
  two.shape = {2};
  two.data = {1, 0};
  NpyArray pos = Flag(true);
  pos.dtype = kNpyF64;
  pos.data.assign(8, 0);
  const double frac = 2.5;
  std::memcpy(pos.data.data(), &frac, 8);
  const std::vector<Case> cases = {
      {"a number for a bool", half, "decode:use_cache_branch", {"use_cache_branch", "bool", "float64"}},
      {"two elements for [1]", two, "decode:use_cache_branch", {"use_cache_branch", "dim 0", "1"}},
      {"a fraction for int64", pos, "decode:pos", {"'pos'", "int64", "2.5"}},
      {"an unknown input", Flag(true), "decode:use_cache", {"'use_cache'", "names no input", "use_cache_branch"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    CompileSpec spec = Spec();
    spec.input_values.erase("decode:use_cache_branch");
    spec.input_values[c.key] = c.value;
    if (std::string(c.key) != "decode:use_cache_branch") spec.input_values["decode:use_cache_branch"] = Flag(true);
    const std::string out = tmp_.File("bad.fcb");
    auto r = CompileMethods({{"decode", merged_}}, spec, out);
    const StatusCode code = std::string(c.key) == "decode:use_cache" ? StatusCode::kNotFound : StatusCode::kInvalidArgument;
    EXPECT_REFUSED(r, code, c.want.at(0));
    for (const auto& w : c.want) EXPECT_NE(r.status().message().find(w), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("decode"), std::string::npos) << "names the method: " << r.status().message();
    EXPECT_FALSE(testing::FileExists(out));
  }

  // From the command line: a .npy file, the flag named in the error.
  const std::string bad = tmp_.File("half.npy");
  ASSERT_TRUE(WriteNpy(bad, half).ok());
  auto run = testing::RunCommand(testing::CliPath() + " compile --method decode=" + merged_ +
                                 " --input-shape decode:input_ids=1x1 --input-value decode:use_cache_branch=" + bad +
                                 " -o " + tmp_.File("cli.fcb"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("--input-value use_cache_branch"), std::string::npos) << run.err;
}

// input_values from a JSON spec: nested lists, converted to the input's type.
TEST_F(MergedDecoderTest, JsonSpecValuesAreConvertedToTheInputType) {
  auto spec = ParseSpecJson(R"({"targets": "generic", "input_values": {"decode:use_cache_branch": [true],
                               "decode:pos": [9]}, "input_shapes": {"decode:input_ids": [1, 1]}})");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec.value().input_values.at("decode:pos").dtype, kNpyI64);
  EXPECT_EQ(spec.value().input_values.at("decode:use_cache_branch").dtype, kNpyBool);
  const std::string out = tmp_.File("json.fcb");
  auto r = CompileMethods({{"decode", merged_}}, spec.value(), out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto program = Program::Load(out);
  ASSERT_TRUE(program.ok()) << program.status().message();
  auto ex = Execution::Create(program.value(), "decode", 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  std::vector<std::string> names;
  for (const auto& in : ex.value()->info().inputs) names.push_back(in.name);
  EXPECT_EQ(names, (std::vector<std::string>{"input_ids", "k_cache", "v_cache"}));

  for (const char* bad : {R"({"targets": "generic", "input_values": {"x": [[1, 2], [3]]}})",
                          R"({"targets": "generic", "input_values": {"x": [true, 1]}})",
                          R"({"targets": "generic", "input_values": {"x": []}})",
                          R"({"targets": "generic", "input_values": {"x": "one"}})"}) {
    auto s = ParseSpecJson(bad);
    EXPECT_REFUSED(s, StatusCode::kInvalidArgument, "input_values['x']") << bad;
    if (!s.ok()) EXPECT_NE(s.status().message().find("input_values['x']"), std::string::npos) << s.status().message();
  }
}

}  // namespace
}  // namespace fcb
