// A language model in the plain exporters' form (scripts/export_llm_models.py
// --shape tiny --form b: float MatMuls, RMSNorm and RoPE written out,
// past_key_values.N.* [1, kv, past, head] -> present.N.* = Concat(past, new,
// axis 2), grouped KV heads repeated by Unsqueeze/Expand/Reshape, attention
// as MatMul * scale + causal mask -> Softmax -> MatMul), compiled with
// "state": "auto" and "kv_capacity" into a prefill method (1..32 tokens) and
// a decode method (one token) sharing one State: each cache is a buffer of
// 128 rows per head, the Concat an in-place append (KvAppend) at the valid
// length the State records, the attention one fused step
// (AttentionFused) over the valid rows. ONNX Runtime's greedy generation of
// 64 tokens from a 32-token prompt with a growing past
// (tools/oracle/ort_generate.js --past-key-values, scripts/prepare_testdata.sh:
// llm_tiny_b.ref) is the oracle: the same tokens and logits within rel L2
// 1e-4 on every target, through the C++ API and `fcb generate`. Also: a
// decode step writes only the appended rows (RunProfiled), a step past the
// capacity is refused with the state unchanged, ResetState regenerates the
// same tokens, and a past given explicitly loads the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "fcb/fcb.h"
#include "fcb/fcb_c.h"
#include "fcb/npy.h"
#include "ops/names.h"
#include "per_target.h"
#include "generation.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::Generator;

// export_llm_models.py's tiny shape: hidden 64, 2 layers, 4 heads, 2 KV heads
// (head 16), vocab 256.
constexpr int64_t kVocab = 256, kLayers = 2, kKvHeads = 2, kHead = 16, kCapacity = 128;

std::vector<uint8_t> Snapshot(State& state) {
  std::vector<uint8_t> all;
  for (const auto& v : state.variables()) {
    const auto* b = static_cast<const uint8_t*>(state.data(v.name).value());
    all.insert(all.end(), b, b + v.bytes());
    const int64_t n = state.valid_length(v.name).value();
    all.insert(all.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 8);
  }
  return all;
}

class KvAppendTest : public testing::GenerationTest<> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(LoadModel("llm_tiny_b", 32, 64)); }
  static CompileSpec Spec() { return testing::GenerationSpec({"all"}, 32, kCapacity, /*decode_mask=*/false); }
  // Compiled once per test binary (every target), shared by the tests.
  const std::string& File() { return testing::CompileGenerationOnce(model_, Spec(), "llm_tiny_b.fcb"); }
};

TEST_F(KvAppendTest, ApiGeneratesOnnxRuntimesTokensOnEveryTarget) {
  ASSERT_FALSE(File().empty());
  auto want_logits = ReadNpy(dir_ + "/llm_tiny_b.ref/logits.npy");
  ASSERT_TRUE(want_logits.ok());
  const float* ref = reinterpret_cast<const float*>(want_logits.value().data.data());
  testing::ForEachRunnableTarget(File(), [&](const std::string&, const std::shared_ptr<const Program>& program) {
    auto state = State::Create(program);
    ASSERT_TRUE(state.ok()) << state.status().message();
    ASSERT_NO_FATAL_FAILURE(testing::ExpectKvCaches(*state.value(), kLayers, {1, kKvHeads, kCapacity, kHead}));
    const auto vars = state.value()->variables();
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      auto prefill = Execution::Create(program, "prefill", threads, state.value());
      auto decode = Execution::Create(program, "decode", threads, state.value());
      ASSERT_TRUE(prefill.ok() && decode.ok());
      // Twice: the second time after ResetState, which must give the same tokens.
      for (int round = 0; round < 2; ++round) {
        SCOPED_TRACE(round);
        if (round == 0) state.value()->Reset();
        else decode.value()->ResetState();
        for (const auto& v : vars) EXPECT_EQ(state.value()->valid_length(v.name).value(), 0);
        Generator g{prefill.value().get(), decode.value().get(), kVocab};
        ASSERT_TRUE(g.Prompt(prompt_).ok());
        for (size_t i = 1; i < want_.size(); ++i) {
          Status s = g.Step();
          ASSERT_TRUE(s.ok()) << "token " << i << ": " << s.message();
        }
        EXPECT_EQ(g.tokens, want_);
        for (size_t i = 0; i < want_.size(); ++i) {
          auto d = testing::Compare(g.logits[i], std::vector<float>(ref + i * kVocab, ref + (i + 1) * kVocab));
          EXPECT_LT(d.rel_l2, 1e-4) << "token " << i;
        }
        // The State records the valid rows: the prompt and 63 decoded tokens.
        for (const auto& v : vars) EXPECT_EQ(state.value()->valid_length(v.name).value(), 32 + 63) << v.name;
        // A present output is the State buffer (its capacity), as in form (a).
        const auto& info = decode.value()->info();
        for (size_t o = 0; o < info.outputs.size(); ++o)
          if (info.outputs[o].name.rfind("present.", 0) == 0) {
            EXPECT_EQ(decode.value()->output_shape(o), (std::vector<int64_t>{1, kKvHeads, kCapacity, kHead}));
            EXPECT_EQ(decode.value()->output_data(o), state.value()->data("past_key_values." +
                                                                          info.outputs[o].name.substr(8)).value());
          }
      }
    }
  });
}

// A prefill of a later chunk (past > 0): the prompt in two halves of 16 gives
// the same generation as in one piece (ONNX Runtime's, checked above).
TEST_F(KvAppendTest, APromptInTwoChunksGivesTheSameTokens) {
  ASSERT_FALSE(File().empty());
  testing::ForEachRunnableTarget(File(), [&](const std::string&, const std::shared_ptr<const Program>& program) {
    testing::Session session;
    Status opened = testing::OpenSession(program, 1, &session);
    ASSERT_TRUE(opened.ok()) << opened.message();
    Generator g = session.NewGenerator(kVocab);
    ASSERT_TRUE(g.Prompt(std::vector<int64_t>(prompt_.begin(), prompt_.begin() + 16)).ok());
    g.tokens.clear();
    g.logits.clear();
    ASSERT_TRUE(g.Prompt(std::vector<int64_t>(prompt_.begin() + 16, prompt_.end())).ok());
    EXPECT_EQ(session.state->valid_length("past_key_values.0.value").value(), 32);
    for (int i = 1; i < 16; ++i) ASSERT_TRUE(g.Step().ok());
    EXPECT_EQ(g.tokens, std::vector<int64_t>(want_.begin(), want_.begin() + 16));
  });
}

// Two States of one program are independent caches: two threads, each with
// its own State and executions, generate at once and both get ORT's tokens
// (and with different prompts, different valid lengths).
TEST_F(KvAppendTest, TwoStatesOnTwoThreadsAreIndependent) {
  ASSERT_FALSE(File().empty());
  auto program = Program::Load(File());
  ASSERT_TRUE(program.ok());
  std::vector<int64_t> tokens[2];
  int64_t lengths[2] = {0, 0};
  auto run = [&](int i) {
    testing::Session session;
    if (!testing::OpenSession(program.value(), 1, &session).ok()) return;
    Generator g = session.NewGenerator(kVocab);
    // Thread 1 first runs a different prompt, then starts over.
    if (i == 1) {
      if (!g.Prompt({3, 1, 4, 1, 5}).ok()) return;
      session.state->Reset();
      g = session.NewGenerator(kVocab);
    }
    if (!g.Prompt(prompt_).ok()) return;
    for (size_t k = 1; k < want_.size() - 8 * i; ++k)
      if (!g.Step().ok()) return;
    tokens[i] = g.tokens;
    lengths[i] = session.state->valid_length("past_key_values.0.key").value();
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  EXPECT_EQ(tokens[0], want_);
  EXPECT_EQ(tokens[1], std::vector<int64_t>(want_.begin(), want_.end() - 8));
  EXPECT_EQ(lengths[0], 32 + 63);
  EXPECT_EQ(lengths[1], 32 + 55);
}

// One decode step: each KvAppend writes one row per KV head, each fused
// attention its output; no step writes a cache-sized tensor, and no Concat,
// Softmax or MatMul over the cache is left.
TEST_F(KvAppendTest, ADecodeStepWritesOnlyTheAppendedRows) {
  ASSERT_FALSE(File().empty());
  testing::ForEachRunnableTarget(File(), [&](const std::string&, const std::shared_ptr<const Program>& program) {
    testing::Session session;
    Status opened = testing::OpenSession(program, 1, &session);
    ASSERT_TRUE(opened.ok()) << opened.message();
    Generator g = session.NewGenerator(kVocab);
    ASSERT_TRUE(g.Prompt(prompt_).ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(g.Step().ok());
    const int64_t token = g.tokens.back();
    ASSERT_TRUE(session.decode->SetInput("input_ids", &token, 8, {1, 1}).ok());
    std::vector<StepTiming> steps;
    ASSERT_TRUE(session.decode->RunProfiled(&steps).ok());
    const uint64_t cache_bytes = static_cast<uint64_t>(kKvHeads * (g.length + 1) * kHead * 4);
    int appends = 0, attentions = 0;
    for (const auto& s : steps) {
      EXPECT_NE(s.op, "Softmax") << s.node;
      // Concat steps left compute shapes and RoPE's halves, one row per head.
      if (s.op == "Concat" && s.output_shape.size() == 4) EXPECT_EQ(s.output_shape[2], 1) << s.node;
      EXPECT_LT(s.bytes_written, cache_bytes) << s.op << " " << s.node;
      if (s.op == ops::opname::KvAppend) {
        ++appends;
        EXPECT_EQ(s.bytes_written, static_cast<uint64_t>(kKvHeads * kHead * 4)) << s.node;
      }
      if (s.op == ops::opname::AttentionFused) ++attentions;
    }
    EXPECT_EQ(appends, 2 * kLayers);
    EXPECT_EQ(attentions, kLayers);
  });
}

TEST_F(KvAppendTest, AStepPastTheCapacityIsRefusedAndTheStateKept) {
  ASSERT_FALSE(File().empty());
  auto program = Program::Load(File());
  ASSERT_TRUE(program.ok());
  testing::Session session;
  Status opened = testing::OpenSession(program.value(), 1, &session);
  ASSERT_TRUE(opened.ok()) << opened.message();
  Generator g = session.NewGenerator(kVocab);
  for (int chunk = 0; chunk < 4; ++chunk) ASSERT_TRUE(g.Prompt(std::vector<int64_t>(32, 7 + chunk)).ok());
  ASSERT_EQ(g.length, kCapacity);
  EXPECT_EQ(session.state->valid_length("past_key_values.1.value").value(), kCapacity);
  const std::vector<uint8_t> before = Snapshot(*session.state);
  // One more token (the attention mask, which this model does not read, is left as it was).
  const int64_t token = 5;
  ASSERT_TRUE(session.decode->SetInput("input_ids", &token, 8, {1, 1}).ok());
  Status s = session.decode->Run();
  EXPECT_REFUSED(s, StatusCode::kInvalidArgument, "method 'decode': state 'past_key_values.0.key' holds 128 valid rows "
                                                  "and this run appends 1");
  EXPECT_NE(s.message().find("past its capacity of 128 rows"), std::string::npos) << s.message();
  EXPECT_EQ(Snapshot(*session.state), before);
  const int64_t two[] = {1, 2};
  ASSERT_TRUE(session.prefill->SetInput("input_ids", two, 16, {1, 2}).ok());
  s = session.prefill->Run();
  EXPECT_REFUSED(s, StatusCode::kInvalidArgument, "method 'prefill'");
  EXPECT_EQ(Snapshot(*session.state), before);
  // fcb generate refuses up front what would not fit.
  auto r = testing::RunCommand(testing::CliPath() + " generate " + File() + " --prompt " + Prompt() + " --max-new 100");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("128"), std::string::npos) << r.err;
}

// A past given explicitly (SetInput with its valid rows) loads the cache:
// decoding on from ONNX Runtime-equal logits after the prompt's cache is
// copied out of one State into another.
TEST_F(KvAppendTest, AnExplicitPastLoadsTheCache) {
  ASSERT_FALSE(File().empty());
  auto program = Program::Load(File());
  ASSERT_TRUE(program.ok());
  auto s1 = State::Create(program.value());
  auto s2 = State::Create(program.value());
  auto p1 = Execution::Create(program.value(), "prefill", 1, s1.value());
  auto d1 = Execution::Create(program.value(), "decode", 1, s1.value());
  auto d2 = Execution::Create(program.value(), "decode", 1, s2.value());
  Generator g{p1.value().get(), d1.value().get(), kVocab};
  ASSERT_TRUE(g.Prompt(prompt_).ok());
  // The valid rows of each cache, dense [1, kv, 32, head].
  for (const auto& v : s1.value()->variables()) {
    const float* buf = static_cast<const float*>(s1.value()->data(v.name).value());
    std::vector<float> dense;
    for (int64_t h = 0; h < kKvHeads; ++h) dense.insert(dense.end(), buf + h * kCapacity * kHead, buf + (h * kCapacity + 32) * kHead);
    ASSERT_TRUE(d2.value()->SetInput(v.name, dense.data(), dense.size() * 4, {1, kKvHeads, 32, kHead}).ok());
    EXPECT_EQ(s2.value()->valid_length(v.name).value(), 32);
  }
  Generator g2{nullptr, d2.value().get(), kVocab};
  g2.length = g.length;
  g2.tokens = g.tokens;
  ASSERT_TRUE(g.Step().ok());
  ASSERT_TRUE(g2.Step().ok());
  EXPECT_EQ(g2.tokens.back(), want_[1]);
  EXPECT_EQ(g2.logits.back(), g.logits.back());
}

// The C API reads a growing cache's valid length; reset makes it 0.
TEST_F(KvAppendTest, CApiReportsTheValidLength) {
  ASSERT_FALSE(File().empty());
  auto ok = testing::CApiOk;
  fcb_program_t* program = nullptr;
  ASSERT_TRUE(ok(fcb_program_load(File().c_str(), nullptr, 1, &program)));
  fcb_state_t* state = nullptr;
  ASSERT_TRUE(ok(fcb_state_create(program, &state)));
  fcb_execution_t* prefill = nullptr;
  ASSERT_TRUE(ok(fcb_execution_create_with_state(program, "prefill", 1, state, &prefill)));
  const int64_t shape[2] = {1, 5};
  const int64_t ids[5] = {1, 2, 3, 4, 5};
  ASSERT_TRUE(ok(fcb_execution_set_input_shaped(prefill, "input_ids", ids, sizeof(ids), shape, 2)));
  ASSERT_TRUE(ok(fcb_execution_set_input_shaped(prefill, "attention_mask", ids, sizeof(ids), shape, 2)));
  ASSERT_TRUE(ok(fcb_execution_run(prefill)));
  int64_t n = -1;
  ASSERT_TRUE(ok(fcb_state_valid_length(state, "past_key_values.1.key", &n)));
  EXPECT_EQ(n, 5);
  fcb_status_t* s = fcb_state_valid_length(state, "nope", &n);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::string(fcb_status_message(s)).find("no state 'nope'"), std::string::npos);
  fcb_status_destroy(s);
  fcb_execution_reset_state(prefill);
  ASSERT_TRUE(ok(fcb_state_valid_length(state, "past_key_values.1.key", &n)));
  EXPECT_EQ(n, 0);
  fcb_execution_destroy(prefill);
  fcb_state_destroy(state);
  fcb_program_destroy(program);
}

TEST_F(KvAppendTest, CliGeneratesOnnxRuntimesTokensOnEveryTarget) {
  ASSERT_FALSE(File().empty());
  std::string want;
  for (int64_t t : want_) want += " " + std::to_string(t);
  for (const std::string& target : testing::RunnableTargetNames(testing::ApiTargets())) {
    SCOPED_TRACE(target);
    auto r = testing::RunCommand(testing::CliPath() + " generate " + File() + " --prompt " + Prompt() +
                                 " --max-new 64 --threads 1 --target " + target);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "tokens:" + want);
  }
}

// Without state the same attention is fused too, over dense K and V (the
// Concat's output): the model's prompt with an empty past (fixed by
// input_values) gives ONNX Runtime's prefill logits on every target.
TEST_F(KvAppendTest, DenseAttentionIsFusedWithoutState) {
  TempDir tmp;
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["input_ids"] = {1, 32};
  spec.input_shapes["attention_mask"] = {1, 32};
  NpyArray empty;
  empty.shape = {1, kKvHeads, 0, kHead};
  for (int64_t l = 0; l < kLayers; ++l)
    for (const char* kv : {"key", "value"})
      spec.input_values["past_key_values." + std::to_string(l) + "." + kv] = empty;
  auto r = Compile(model_, spec, tmp.File("dense.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto want = ReadNpy(dir_ + "/llm_tiny_b.ref/prefill_logits.npy");
  ASSERT_TRUE(want.ok());
  const float* ref = reinterpret_cast<const float*>(want.value().data.data());
  const std::vector<float> ref_v(ref, ref + 32 * kVocab);
  testing::ForEachRunnableTarget(tmp.File("dense.fcb"), [&](const std::string&, const std::shared_ptr<const Program>& p) {
    auto e = Execution::Create(p, "main", 2);
    ASSERT_TRUE(e.ok());
    const std::vector<int64_t> mask(32, 1);
    ASSERT_TRUE(e.value()->SetInput("input_ids", prompt_.data(), prompt_.size() * 8).ok());
    ASSERT_TRUE(e.value()->SetInput("attention_mask", mask.data(), mask.size() * 8).ok());
    std::vector<StepTiming> steps;
    ASSERT_TRUE(e.value()->RunProfiled(&steps).ok());
    int fused = 0;
    for (const auto& s : steps) {
      EXPECT_NE(s.op, "Softmax") << s.node;
      if (s.op == ops::opname::AttentionFused) ++fused;
    }
    EXPECT_EQ(fused, kLayers);
    const float* y = static_cast<const float*>(e.value()->output_data(0));
    ASSERT_EQ(e.value()->info().outputs[0].name, "logits");
    EXPECT_LT(testing::Compare(std::vector<float>(y, y + 32 * kVocab), ref_v).rel_l2, 1e-4);
  });
}

}  // namespace
}  // namespace fcb
