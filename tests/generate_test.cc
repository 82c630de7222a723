// A language model in the form ONNX Runtime GenAI writes for CPU int4
// (scripts/export_llm_models.py --shape tiny --form a: MatMulNBits with
// accuracy_level 4, GroupQueryAttention with do_rotary and a *growing* past:
// past_key_values.N.* [1, kv, past, head] -> present.N.* [1, kv, past + S,
// head], seqlens_k and total_sequence_length computed from attention_mask),
// compiled with "kv_capacity" and "state": "auto" into a prefill method
// (prompt 1..64 tokens) and a decode method (one token) sharing one State, a
// static buffer of 128 positions updated in place. ONNX Runtime's greedy
// generation of 64 tokens from a 32-token prompt on the growing form
// (tools/oracle/ort_generate.js --past-key-values --dummy-past 0, via
// scripts/prepare_testdata.sh) is the oracle: on every target, at 1 and 2
// threads, through the C++ API, `fcb generate` and examples/generate, the same tokens
// and logits within rel L2 1e-3 (and `fcb generate` on the static-buffer model
// of state_test, which takes seqlens_k). Refusals: a step past the capacity (state
// unchanged), kv_capacity out of range or without state, where no
// GroupQueryAttention past takes it, a past it fixes that no state binds, a
// sequence bound above the capacity, and `fcb generate` on a file without
// prefill and decode methods.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <sstream>

#include "fcb/fcb.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "generation.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::Generator;
using testing::ReadTokens;

// export_llm_models.py's tiny shape: hidden 64, 2 layers, 4 heads, 2 KV heads
// (head 16), vocab 256.
constexpr int64_t kVocab = 256, kLayers = 2, kHeads = 4, kKvHeads = 2, kHead = 16, kCapacity = 128;

std::vector<uint8_t> Snapshot(State& state) {
  std::vector<uint8_t> all;
  for (const auto& v : state.variables()) {
    const auto* b = static_cast<const uint8_t*>(state.data(v.name).value());
    all.insert(all.end(), b, b + v.bytes());
  }
  return all;
}

class GenerateTest : public testing::GenerationTest<> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(LoadModel("llm_tiny_a", 32, 64)); }
  static CompileSpec Spec() { return testing::GenerationSpec({"all"}, 64, kCapacity, /*decode_mask=*/true); }
  // Compiled once per test binary (every target), shared by the tests.
  const std::string& File() { return testing::CompileGenerationOnce(model_, Spec(), "llm_tiny_a.fcb"); }
};

TEST_F(GenerateTest, ApiGeneratesOnnxRuntimesTokensOnEveryTarget) {
  ASSERT_FALSE(File().empty());
  auto want_logits = ReadNpy(dir_ + "/llm_tiny_a.ref/logits.npy");
  ASSERT_TRUE(want_logits.ok());
  const float* ref = reinterpret_cast<const float*>(want_logits.value().data.data());
  testing::ForEachRunnableTarget(File(), [&](const std::string&, const std::shared_ptr<const Program>& program) {
    // The cache is [1, kv, capacity, head] per layer, key and value.
    auto state = State::Create(program);
    ASSERT_TRUE(state.ok()) << state.status().message();
    ASSERT_NO_FATAL_FAILURE(testing::ExpectKvCaches(*state.value(), kLayers, {1, kKvHeads, kCapacity, kHead}));
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      state.value()->Reset();
      auto prefill = Execution::Create(program, "prefill", threads, state.value());
      auto decode = Execution::Create(program, "decode", threads, state.value());
      ASSERT_TRUE(prefill.ok() && decode.ok());
      // What the caller feeds: token ids and the mask, nothing else.
      for (const auto* e : {prefill.value().get(), decode.value().get()}) {
        std::vector<std::string> names;
        for (const auto& in : e->info().inputs) names.push_back(in.name);
        EXPECT_EQ(names.size(), 2 + 2 * kLayers);
      }
      Generator g{prefill.value().get(), decode.value().get(), kVocab};
      ASSERT_TRUE(g.Prompt(prompt_).ok());
      for (size_t i = 1; i < want_.size(); ++i) {
        Status s = g.Step();
        ASSERT_TRUE(s.ok()) << "token " << i << ": " << s.message();
      }
      EXPECT_EQ(g.tokens, want_);
      for (size_t i = 0; i < want_.size(); ++i) {
        auto d = testing::Compare(g.logits[i], std::vector<float>(ref + i * kVocab, ref + (i + 1) * kVocab));
        EXPECT_LT(d.rel_l2, 1e-3) << "token " << i;
      }
      // A decode step writes the attention output and one new key and value
      // row per KV head in each attention step: no copy of the cache.
      std::vector<StepTiming> steps;
      const int64_t token = g.tokens.back(), total = g.length + 1;
      const std::vector<int64_t> mask(static_cast<size_t>(total), 1);
      ASSERT_TRUE(decode.value()->SetInput("input_ids", &token, 8, {1, 1}).ok());
      ASSERT_TRUE(decode.value()->SetInput("attention_mask", mask.data(), mask.size() * 8, {1, total}).ok());
      ASSERT_TRUE(decode.value()->RunProfiled(&steps).ok());
      int gqa = 0;
      for (const auto& s : steps) {
        EXPECT_NE(s.output_shape, (std::vector<int64_t>{1, kKvHeads, kCapacity, kHead})) << s.op << " " << s.node;
        if (s.op != "com.microsoft.GroupQueryAttention") continue;
        ++gqa;
        EXPECT_EQ(s.bytes_written, static_cast<uint64_t>(4 * (kHeads * kHead + 2 * kKvHeads * kHead)));
      }
      EXPECT_EQ(gqa, kLayers);
    }
  });
}

TEST_F(GenerateTest, CliGeneratesOnnxRuntimesTokensOnEveryTarget) {
  ASSERT_FALSE(File().empty());
  std::string want;
  for (int64_t t : want_) want += " " + std::to_string(t);
  const std::regex format(
      "tokens:( [0-9]+){64}\n"
      "prefill: 32 tokens in [0-9]+\\.[0-9] ms \\([0-9]+\\.[0-9] tok/s\\)\n"
      "decode: 63 tokens in [0-9]+\\.[0-9] ms \\([0-9]+\\.[0-9] tok/s\\)\n");
  for (const std::string& target : testing::RunnableTargetNames(testing::ApiTargets())) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(target + " threads " + std::to_string(threads));
      auto r = testing::RunCommand(testing::CliPath() + " generate " + File() + " --prompt " + Prompt() +
                                   " --max-new 64 --threads " + std::to_string(threads) + " --target " + target);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_TRUE(std::regex_match(r.out, format)) << r.out;
      EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "tokens:" + want);
    }
  }
}

// fcb generate --reference: the agreement it prints is the one counted from
// two separate generate runs, position by position; the logits' rel L2 is 0
// against itself and positive against a differently quantized compile
// (precision int4 quantizes the float embedding table of the form-a model to
// int8; its MatMulNBits stay as they are).
TEST_F(GenerateTest, ReferenceReportsAgreementAndLogitsError) {
  ASSERT_FALSE(File().empty());
  TempDir tmp;
  CompileSpec spec = Spec();
  spec.targets = {"x86-64-v2"};
  TargetOptions o;
  o.precision = "int4";
  spec.target_options = {o};
  auto c = CompileMethods({{"prefill", model_}, {"decode", model_}}, spec, tmp.File("int4.fcb"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::string args = " --prompt " + Prompt() + " --max-new 32 --target x86-64-v2";
  auto tokens_of = [](const std::string& out, const std::string& key) {
    std::vector<int64_t> t;
    const size_t at = out.find(key);
    if (at == std::string::npos) return t;
    std::stringstream ss(out.substr(at + key.size(), out.find('\n', at) - at - key.size()));
    for (int64_t v; ss >> v;) t.push_back(v);
    return t;
  };
  auto a = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("int4.fcb") + args);
  auto b = testing::RunCommand(testing::CliPath() + " generate " + File() + args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ta = tokens_of(a.out, "tokens:"), tb = tokens_of(b.out, "tokens:");
  ASSERT_EQ(ta.size(), 32u);
  ASSERT_EQ(tb.size(), 32u);
  int agree = 0;
  for (size_t i = 0; i < 32; ++i) agree += ta[i] == tb[i];
  auto r = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("int4.fcb") + args + " --reference " + File());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(tokens_of(r.out, "\ntokens:"), std::vector<int64_t>()) << "one tokens line, first";
  EXPECT_EQ(tokens_of(r.out, "tokens:"), ta);
  EXPECT_EQ(tokens_of(r.out, "reference tokens:"), tb);
  std::smatch m;
  const std::regex line("agreement: ([0-9]+)/32 tokens equal to the reference's[^\n]*\n"
                        "logits rel L2 vs reference: ([0-9.e+-]+) over ([0-9]+) steps with the same inputs; per step:"
                        "( [0-9.e+-]+)+\n");
  ASSERT_TRUE(std::regex_search(r.out, m, line)) << r.out;
  EXPECT_EQ(std::stoi(m[1].str()), agree);
  const double rel = std::stod(m[2].str());
  EXPECT_GT(rel, 0.0) << "the int8 embedding changes the logits";
  EXPECT_LT(rel, 0.05);
  std::printf("[int4] form a tiny, int8 embedding vs fp32: agreement %d/32, logits rel L2 %.3e\n", agree, rel);
  // Against itself: everything agrees, exactly.
  auto self = testing::RunCommand(testing::CliPath() + " generate " + File() + args + " --reference " + File());
  ASSERT_EQ(self.exit_code, 0) << self.err;
  EXPECT_NE(self.out.find("agreement: 32/32 tokens equal to the reference's (no difference)"), std::string::npos)
      << self.out;
  EXPECT_NE(self.out.find("logits rel L2 vs reference: 0.000e+00 over 32 steps"), std::string::npos) << self.out;
  // A reference that cannot generate is refused, naming it.
  auto bad = testing::RunCommand(testing::CliPath() + " generate " + File() + args + " --reference " + tmp.File("none.fcb"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--reference"), std::string::npos) << bad.err;
}

// examples/generate: the same loop on the public API, as a program.
TEST_F(GenerateTest, ExampleProgramGeneratesOnnxRuntimesTokens) {
  ASSERT_FALSE(File().empty());
  std::string want;
  for (int64_t t : want_) want += (want.empty() ? "" : " ") + std::to_string(t);
  for (int threads : {1, 2}) {
    auto r = testing::RunCommand(std::string(FCB_BINARY_DIR) + "/examples/llm_generate " + File() + " " + Prompt() +
                                 " 64 " + std::to_string(threads));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want + "\n");
  }
}

// fcb generate feeds seqlens_k where a model takes it: the static-buffer
// decoder of tests/state_test.cc (GroupQueryAttention past and present of one
// capacity, no kv_capacity), against ONNX Runtime's 16 tokens.
TEST_F(GenerateTest, CliFeedsSeqlensToAStaticBufferModel) {
  const std::string model = dir_ + "/gqa_decoder_static.onnx";
  for (const std::string f : {model, dir_ + "/gqa_decoder_static.prompt.npy", dir_ + "/gqa_decoder_static.ref/tokens.npy"})
    ASSERT_TRUE(testing::FileExists(f)) << f << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["prefill:input_ids"] = {1, {1, 16}};
  spec.input_shapes["decode:input_ids"] = {1, 1};
  spec.state_auto = true;
  auto r = CompileMethods({{"prefill", model}, {"decode", model}}, spec, tmp.File("static.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string prompt = testing::TokensCsv(ReadTokens(dir_ + "/gqa_decoder_static.prompt.npy"));
  std::string want;
  const std::vector<int64_t> tokens = ReadTokens(dir_ + "/gqa_decoder_static.ref/tokens.npy");
  for (int64_t t : tokens) want += " " + std::to_string(t);
  for (const std::string& target : testing::RunnableTargetNames(testing::ApiTargets())) {
    SCOPED_TRACE(target);
    auto c = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("static.fcb") + " --prompt " + prompt +
                                 " --max-new " + std::to_string(tokens.size()) + " --threads 2 --target " + target);
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(c.out.substr(0, c.out.find('\n')), "tokens:" + want);
  }
}

TEST_F(GenerateTest, AStepPastTheCapacityIsRefusedAndTheStateKept) {
  ASSERT_FALSE(File().empty());
  auto program = Program::Load(File());
  ASSERT_TRUE(program.ok());
  testing::Session session;
  Status opened = testing::OpenSession(program.value(), 1, &session);
  ASSERT_TRUE(opened.ok()) << opened.message();
  Generator g = session.NewGenerator(kVocab);
  ASSERT_TRUE(g.Prompt(std::vector<int64_t>(64, 7)).ok());
  ASSERT_TRUE(g.Prompt(std::vector<int64_t>(64, 9)).ok());  // a second chunk: 128 positions, full
  ASSERT_EQ(g.length, kCapacity);
  const std::vector<uint8_t> before = Snapshot(*session.state);
  // One more token would be position 129.
  Status s = g.Step();
  EXPECT_REFUSED(s, StatusCode::kInvalidArgument, "attention_mask");
  EXPECT_NE(s.message().find("past the capacity of the KV cache ('past_key_values.0.key' holds 128 positions)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(Snapshot(*session.state), before);
  // fcb generate refuses up front what would not fit.
  auto r = testing::RunCommand(testing::CliPath() + " generate " + File() + " --prompt " + Prompt() + " --max-new 100");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("need 131 cache positions; the KV cache holds 128"), std::string::npos) << r.err;
}

TEST_F(GenerateTest, KvCapacityIsValidated) {
  for (const char* bad : {R"({"targets": "generic", "state": "auto", "kv_capacity": -1})",
                          R"({"targets": "generic", "state": "auto", "kv_capacity": 1.5})",
                          R"({"targets": "generic", "state": "auto", "kv_capacity": "128"})",
                          R"({"targets": "generic", "state": "auto", "kv_capacity": 2097152})",
                          R"({"targets": "generic", "state": "auto", "kv_capacity": 18446744073709551615})"}) {
    SCOPED_TRACE(bad);
    EXPECT_REFUSED(ParseSpecJson(bad), StatusCode::kInvalidArgument, "kv_capacity");
  }
  auto ok = ParseSpecJson(R"({"targets": "generic", "state": "auto", "kv_capacity": 256})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok.value().kv_capacity, 256);
  EXPECT_REFUSED(ParseSpecJson(R"({"targets": "generic", "kv_capacity": 256})"), StatusCode::kInvalidArgument,
                 "needs \"state\"");
  CompileSpec spec = Spec();
  spec.kv_capacity = CompileSpec::kMaxKvCapacity + 1;
  EXPECT_REFUSED(ValidateSpec(spec), StatusCode::kInvalidArgument, "out of range");
  // The command line: --kv-capacity without --state.
  TempDir tmp;
  auto r = testing::RunCommand(testing::CliPath() + " compile " + model_ + " -o " + tmp.File("x.fcb") +
                               " --target generic --kv-capacity 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs \"state\""), std::string::npos) << r.err;
}

TEST_F(GenerateTest, KvCapacityWhereNoPastTakesItIsRefused) {
  TempDir tmp;
  CompileSpec spec = Spec();
  spec.targets = {"generic"};
  // A model without GroupQueryAttention.
  spec.input_shapes = {{"input", {1, 3, 64, 64}}};
  auto r = Compile(std::string(FCB_SOURCE_DIR) + "/models/demo_cnn.onnx", spec, tmp.File("cnn.fcb"));
  EXPECT_REFUSED(r, StatusCode::kInvalidArgument, "has a com.microsoft.GroupQueryAttention whose past_key");
  // A past that kv_capacity fixes but no state pair binds.
  spec = Spec();
  spec.targets = {"generic"};
  spec.state_auto = false;
  spec.state = {{"past_key_values.0.key", "present.0.key"}};
  r = CompileMethods({{"decode", model_}}, spec, tmp.File("half.fcb"));
  EXPECT_REFUSED(r, StatusCode::kInvalidArgument, "no state pair binds it");
  EXPECT_NE(r.status().message().find("past_key_values.0.value"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("method 'decode'"), std::string::npos) << r.status().message();
  // A sequence (attention_mask) bounded above the capacity.
  spec = Spec();
  spec.targets = {"generic"};
  spec.input_shapes["decode:attention_mask"] = {1, {2, 2 * kCapacity}};
  r = CompileMethods({{"decode", model_}}, spec, tmp.File("long.fcb"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kv_capacity 128"), std::string::npos) << r.status().message();
}

TEST_F(GenerateTest, GenerateRefusesAFileWithoutPrefillAndDecode) {
  TempDir tmp;
  CompileSpec spec = Spec();
  spec.targets = {"generic"};
  auto r = CompileMethods({{"main", model_}}, spec, tmp.File("main.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto c = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("main.fcb") + " --prompt 1,2,3");
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_NE(c.err.find("needs the methods 'prefill' (the prompt) and 'decode'"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("'main'"), std::string::npos) << c.err;
  // An attention_mask range below the cache's capacity bounds the tokens too.
  spec.input_shapes["attention_mask"] = {1, {1, 100}};
  spec.input_shapes["decode:attention_mask"] = {1, {2, 100}};
  r = CompileMethods({{"prefill", model_}, {"decode", model_}}, spec, tmp.File("mask100.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  c = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("mask100.fcb") + " --prompt 1,2,3 --max-new 99");
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("need an attention_mask of 101 in method 'decode', which takes at most 100"), std::string::npos)
      << c.err;
  c = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("mask100.fcb") + " --prompt 1,2,3 --max-new 98");
  EXPECT_EQ(c.exit_code, 0) << c.err;
  c = testing::RunCommand(testing::CliPath() + " generate " + File() + " --prompt 1,x,3");
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("'x' is not a token id"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace fcb
