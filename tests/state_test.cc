// State kept between runs (docs/design.md section 14): a small decoder with a
// static KV buffer (scripts/export_state_models.py, gqa_decoder_static: RMSNorm,
// q/k/v MatMuls, com.microsoft GroupQueryAttention with rotary, a SiLU MLP)
// compiled with a prefill method (prompt 1..16 tokens) and a decode method
// (1 token) sharing their cache through a State. fcb feeds nothing back (the
// cache stays in the State, updated in place); ONNX Runtime's loop feeds the
// presents back as pasts (tools/oracle/ort_generate_static.js, via
// prepare_testdata.sh). On every target: the same greedy tokens and logits;
// two States interleaved are independent; ResetState starts over; a step past
// the capacity is refused with the state unchanged; no step copies the cache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fcb/fcb.h"
#include "fcb/fcb_c.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "generation.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;

// export_state_models.py's sizes.
constexpr int64_t kVocab = 96, kLayers = 2, kKvHeads = 2, kCapacity = 32, kHead = 16;
const std::vector<int64_t> kCacheShape{1, kKvHeads, kCapacity, kHead};

struct Generated {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;  // the row each token was chosen from
};

// One greedy step's argmax over the last logits row of `e`.
void TakeLastRow(const Execution& e, Generated* g) {
  const auto& shape = e.output_shape(0);
  const int64_t s = shape[1];
  const float* row = static_cast<const float*>(e.output_data(0)) + (s - 1) * kVocab;
  g->logits.emplace_back(row, row + kVocab);
  int64_t best = 0;
  for (int64_t v = 1; v < kVocab; ++v)
    if (row[v] > row[best]) best = v;
  g->tokens.push_back(best);
}

// A generation in progress on one State: the prompt through `prefill`, then
// one token per `Step` through `decode`. Nothing but the token ids and the
// valid length is given to a run: the cache stays in the State.
class Generator {
 public:
  Generator(Execution* prefill, Execution* decode) : prefill_(prefill), decode_(decode) {}
  Status Prompt(const std::vector<int64_t>& prompt) {
    length_ = static_cast<int32_t>(prompt.size());
    FCB_RETURN_IF_ERROR(prefill_->SetInput("input_ids", prompt.data(), prompt.size() * 8,
                                           {1, static_cast<int64_t>(prompt.size())}));
    const int32_t seqlens = length_ - 1;
    FCB_RETURN_IF_ERROR(prefill_->SetInput("seqlens_k", &seqlens, 4));
    FCB_RETURN_IF_ERROR(prefill_->Run());
    TakeLastRow(*prefill_, &out);
    return Status::Ok();
  }
  Status Step() {
    const int64_t token = out.tokens.back();
    FCB_RETURN_IF_ERROR(decode_->SetInput("input_ids", &token, 8));
    const int32_t seqlens = length_;  // one more valid row, minus one
    FCB_RETURN_IF_ERROR(decode_->SetInput("seqlens_k", &seqlens, 4));
    FCB_RETURN_IF_ERROR(decode_->Run());
    ++length_;
    TakeLastRow(*decode_, &out);
    return Status::Ok();
  }
  int32_t length() const { return length_; }
  Generated out;

 private:
  Execution *prefill_, *decode_;
  int32_t length_ = 0;
};

struct Pair {
  std::shared_ptr<State> state;
  std::unique_ptr<Execution> prefill, decode;
};

Pair MakePair(const std::shared_ptr<const Program>& program, int threads, std::shared_ptr<State> state = nullptr) {
  Pair p;
  if (!state) {
    auto s = State::Create(program);
    EXPECT_TRUE(s.ok()) << s.status().message();
    state = s.value();
  }
  p.state = state;
  auto a = Execution::Create(program, "prefill", threads, state);
  auto b = Execution::Create(program, "decode", threads, state);
  EXPECT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(b.ok()) << b.status().message();
  if (a.ok()) p.prefill = std::move(a).value();
  if (b.ok()) p.decode = std::move(b).value();
  return p;
}

Generated Generate(Pair& p, const std::vector<int64_t>& prompt, int n) {
  Generator g(p.prefill.get(), p.decode.get());
  Status s = g.Prompt(prompt);
  EXPECT_TRUE(s.ok()) << s.message();
  for (int i = 1; i < n && s.ok(); ++i) {
    s = g.Step();
    EXPECT_TRUE(s.ok()) << "token " << i << ": " << s.message();
  }
  return g.out;
}

std::vector<uint8_t> Snapshot(State& state) {
  std::vector<uint8_t> all;
  for (const auto& v : state.variables()) {
    auto d = state.data(v.name);
    EXPECT_TRUE(d.ok());
    const auto* b = static_cast<const uint8_t*>(d.value());
    all.insert(all.end(), b, b + v.bytes());
  }
  return all;
}

class StateTest : public testing::GenerationTest<> {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(LoadModel("gqa_decoder_static"));
    fcb_ = tmp_.File("gqa_decoder_static.fcb");
    auto r = CompileMethods({{"prefill", model_}, {"decode", model_}}, Spec(), fcb_);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  CompileSpec Spec(bool all_targets = true) const {
    CompileSpec spec;
    spec.targets = {all_targets ? "all" : "generic"};
    spec.input_shapes["prefill:input_ids"] = {1, {1, 16}};
    spec.input_shapes["decode:input_ids"] = {1, 1};
    spec.state_auto = true;
    return spec;
  }

  std::string fcb_;
  TempDir tmp_;
};

TEST_F(StateTest, GeneratesOnnxRuntimesTokensWithTheCacheInPlace) {
  const std::vector<int64_t>& want = want_;
  auto want_logits = ReadNpy(dir_ + "/gqa_decoder_static.ref/logits.npy");
  ASSERT_TRUE(want_logits.ok());
  const int n = static_cast<int>(want.size());
  ASSERT_EQ(n, 16);
  const float* logits = reinterpret_cast<const float*>(want_logits.value().data.data());
  testing::ForEachRunnableTarget(fcb_, [&](const std::string&, const std::shared_ptr<const Program>& program) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      Pair p = MakePair(program, threads);
      ASSERT_TRUE(p.prefill && p.decode);
      const Generated g = Generate(p, prompt_, n);
      EXPECT_EQ(g.tokens, want);
      ASSERT_EQ(g.logits.size(), static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        auto d = testing::Compare(g.logits[i], std::vector<float>(logits + i * kVocab, logits + (i + 1) * kVocab));
        EXPECT_LT(d.rel_l2, 1e-5) << "token " << i;
      }
    }
  });
}

TEST_F(StateTest, StateVariablesArePairedAndSharedByTheMethods) {
  auto program = Program::Load(fcb_);
  ASSERT_TRUE(program.ok()) << program.status().message();
  Pair p = MakePair(program.value(), 1);
  ASSERT_TRUE(p.prefill && p.decode);
  const auto vars = p.state->variables();
  ASSERT_EQ(vars.size(), static_cast<size_t>(2 * kLayers));
  for (const auto& v : vars) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(v.shape, kCacheShape);
    EXPECT_EQ(v.name.rfind("past_", 0), 0u);
    // Both methods' state output is the State's buffer itself: no copy out.
    const std::string present = "present" + v.name.substr(4);
    void* buf = p.state->data(v.name).value();
    for (Execution* e : {p.prefill.get(), p.decode.get()}) {
      size_t o = 0;
      while (o < e->info().outputs.size() && e->info().outputs[o].name != present) ++o;
      ASSERT_LT(o, e->info().outputs.size());
      EXPECT_EQ(e->output_data(o), buf);
    }
  }
  EXPECT_EQ(p.prefill->state(), p.state);
  EXPECT_EQ(p.decode->state(), p.state);
  // An execution given no State has one of its own.
  auto own = Execution::Create(program.value(), "decode", 1);
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE(own.value()->state());
  EXPECT_NE(own.value()->state(), p.state);
  // A State of another program is refused.
  auto other = Program::Load(fcb_);
  ASSERT_TRUE(other.ok());
  auto foreign = State::Create(other.value());
  ASSERT_TRUE(foreign.ok());
  auto refused = Execution::Create(program.value(), "decode", 1, foreign.value());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("another program"), std::string::npos) << refused.status().message();
}

TEST_F(StateTest, NoStepCopiesTheCache) {
  testing::ForEachRunnableTarget(fcb_, [&](const std::string&, const std::shared_ptr<const Program>& program) {
    Pair p = MakePair(program, 1);
    ASSERT_TRUE(p.prefill && p.decode);
    Generator g(p.prefill.get(), p.decode.get());
    ASSERT_TRUE(g.Prompt(prompt_).ok());
    const int32_t seqlens = g.length();
    const int64_t token = 1;
    ASSERT_TRUE(p.decode->SetInput("input_ids", &token, 8).ok());
    ASSERT_TRUE(p.decode->SetInput("seqlens_k", &seqlens, 4).ok());
    std::vector<StepTiming> steps;
    ASSERT_TRUE(p.decode->RunProfiled(&steps).ok());
    int gqa = 0;
    for (const auto& s : steps) {
      SCOPED_TRACE(s.op + " " + s.node);
      // The only steps touching a cache are the attention steps, which write
      // the new rows in place; none produces a cache-shaped tensor (a copy).
      EXPECT_NE(s.output_shape, kCacheShape);
      gqa += s.op == "com.microsoft.GroupQueryAttention";
      if (s.op == "com.microsoft.GroupQueryAttention") {
        // Bytes written per decode step: the attention output and one new
        // key and value row per KV head, not the capacity.
        EXPECT_EQ(s.bytes_written, static_cast<uint64_t>(4 * (4 * kHead + 2 * kKvHeads * kHead)));
      }
    }
    EXPECT_EQ(gqa, kLayers);
  });
}

TEST_F(StateTest, TwoStatesAreIndependent) {
  std::vector<int64_t> other(prompt_.rbegin(), prompt_.rend());
  other.resize(5);
  testing::ForEachRunnableTarget(fcb_, [&](const std::string&, const std::shared_ptr<const Program>& program) {
    Pair a = MakePair(program, 1), b = MakePair(program, 1);
    ASSERT_TRUE(a.prefill && b.prefill);
    const Generated solo_a = Generate(a, prompt_, 10);
    a.prefill->ResetState();
    const Generated solo_b = Generate(b, other, 10);
    b.decode->ResetState();
    // Interleaved: A's prompt, B's prompt, then their steps alternating.
    Generator ga(a.prefill.get(), a.decode.get()), gb(b.prefill.get(), b.decode.get());
    ASSERT_TRUE(ga.Prompt(prompt_).ok());
    ASSERT_TRUE(gb.Prompt(other).ok());
    for (int i = 1; i < 10; ++i) {
      ASSERT_TRUE(ga.Step().ok());
      ASSERT_TRUE(gb.Step().ok());
    }
    EXPECT_EQ(ga.out.tokens, solo_a.tokens);
    EXPECT_EQ(gb.out.tokens, solo_b.tokens);
    EXPECT_EQ(ga.out.logits, solo_a.logits);
    EXPECT_EQ(gb.out.logits, solo_b.logits);
    EXPECT_NE(solo_a.tokens, solo_b.tokens);
  });
}

TEST_F(StateTest, ResetStateStartsOver) {
  auto program = Program::Load(fcb_);
  ASSERT_TRUE(program.ok());
  for (int threads : {1, 2}) {
    Pair p = MakePair(program.value(), threads);
    const Generated first = Generate(p, prompt_, 12);
    p.decode->ResetState();
    for (auto b : Snapshot(*p.state)) ASSERT_EQ(b, 0);
    const Generated again = Generate(p, prompt_, 12);
    EXPECT_EQ(again.tokens, first.tokens);
    EXPECT_EQ(again.logits, first.logits);
  }
}

TEST_F(StateTest, AStepPastTheCapacityIsRefusedAndTheStateKept) {
  auto program = Program::Load(fcb_);
  ASSERT_TRUE(program.ok());
  Pair p = MakePair(program.value(), 1);
  Generator g(p.prefill.get(), p.decode.get());
  ASSERT_TRUE(g.Prompt(prompt_).ok());
  while (g.length() < kCapacity) ASSERT_TRUE(g.Step().ok()) << g.length();
  const std::vector<uint8_t> before = Snapshot(*p.state);
  // One more token needs row kCapacity + 1.
  Status s = g.Step();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const char* part : {"method 'decode'", "'seqlens_k'", "capacity of 32", "past_key_0"})
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " in: " << s.message();
  EXPECT_EQ(Snapshot(*p.state), before);
  // A prompt that does not fit behind what the cache holds is refused too.
  p.decode->ResetState();
  Generator h(p.prefill.get(), p.decode.get());
  ASSERT_TRUE(h.Prompt(std::vector<int64_t>(16, 3)).ok());
  ASSERT_TRUE(h.Step().ok());
  const std::vector<uint8_t> held = Snapshot(*p.state);
  const int32_t seqlens = h.length() + 16 - 1;  // 17 valid rows + 16 new: 33 > 32
  const std::vector<int64_t> ids(16, 5);
  ASSERT_TRUE(p.prefill->SetInput("input_ids", ids.data(), ids.size() * 8, {1, 16}).ok());
  ASSERT_TRUE(p.prefill->SetInput("seqlens_k", &seqlens, 4).ok());
  s = p.prefill->Run();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("method 'prefill'"), std::string::npos) << s.message();
  EXPECT_EQ(Snapshot(*p.state), held);
  // The execution stays usable: the next token within the capacity runs.
  EXPECT_TRUE(h.Step().ok());
}

TEST_F(StateTest, SetInputOnAStateInputLoadsTheCache) {
  auto program = Program::Load(fcb_);
  ASSERT_TRUE(program.ok());
  Pair p = MakePair(program.value(), 1);
  std::vector<float> ones(static_cast<size_t>(kCapacity * kKvHeads * kHead), 1.f);
  ASSERT_TRUE(p.decode->SetInput("past_key_1", ones.data(), ones.size() * 4).ok());
  const float* buf = static_cast<const float*>(p.state->data("past_key_1").value());
  EXPECT_EQ(std::vector<float>(buf, buf + ones.size()), ones);
}

// The C API: a state shared by a prefill and a decode execution generates
// ONNX Runtime's tokens; fcb_execution_reset_state starts over.
TEST_F(StateTest, CApiSharesAStateBetweenMethods) {
  const std::vector<int64_t>& want = want_;
  auto ok = testing::CApiOk;
  fcb_program_t* program = nullptr;
  ASSERT_TRUE(ok(fcb_program_load(fcb_.c_str(), nullptr, 1, &program)));
  fcb_state_t* state = nullptr;
  ASSERT_TRUE(ok(fcb_state_create(program, &state)));
  fcb_execution_t *prefill = nullptr, *decode = nullptr;
  ASSERT_TRUE(ok(fcb_execution_create_with_state(program, "prefill", 1, state, &prefill)));
  ASSERT_TRUE(ok(fcb_execution_create_with_state(program, "decode", 1, state, &decode)));
  fcb_state_destroy(state);  // the executions keep it alive
  auto last_token = [](fcb_execution_t* e) {
    const void* data = nullptr;
    size_t bytes = 0;
    fcb_status_destroy(fcb_execution_output(e, 0, &data, &bytes));
    const float* row = static_cast<const float*>(data) + bytes / 4 - kVocab;
    int64_t best = 0;
    for (int64_t v = 1; v < kVocab; ++v)
      if (row[v] > row[best]) best = v;
    return best;
  };
  auto generate = [&]() {
    std::vector<int64_t> tokens;
    const int64_t shape[2] = {1, static_cast<int64_t>(prompt_.size())};
    int32_t seqlens = static_cast<int32_t>(prompt_.size()) - 1;
    EXPECT_TRUE(ok(fcb_execution_set_input_shaped(prefill, "input_ids", prompt_.data(), prompt_.size() * 8, shape, 2)));
    EXPECT_TRUE(ok(fcb_execution_set_input(prefill, "seqlens_k", &seqlens, 4)));
    EXPECT_TRUE(ok(fcb_execution_run(prefill)));
    tokens.push_back(last_token(prefill));
    while (tokens.size() < want.size()) {
      ++seqlens;
      EXPECT_TRUE(ok(fcb_execution_set_input(decode, "input_ids", &tokens.back(), 8)));
      EXPECT_TRUE(ok(fcb_execution_set_input(decode, "seqlens_k", &seqlens, 4)));
      EXPECT_TRUE(ok(fcb_execution_run(decode)));
      tokens.push_back(last_token(decode));
    }
    return tokens;
  };
  EXPECT_EQ(generate(), want);
  fcb_execution_reset_state(decode);
  EXPECT_EQ(generate(), want);
  fcb_execution_destroy(prefill);
  fcb_execution_destroy(decode);
  fcb_program_destroy(program);
}

// Spec errors: refused at compile time naming the fix.
TEST_F(StateTest, BadDeclarationsAreRefused) {
  auto compile = [&](CompileSpec spec) {
    auto r = CompileMethods({{"prefill", model_}, {"decode", model_}}, spec, tmp_.File("bad.fcb"));
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  CompileSpec spec = Spec(false);
  spec.state_auto = false;
  spec.state = {{"past_key_9", "present_key_9"}};
  EXPECT_NE(compile(spec).find("no input 'past_key_9'; its inputs are: input_ids"), std::string::npos);
  spec.state = {{"past_key_0", "present_key_7"}};
  EXPECT_NE(compile(spec).find("no output 'present_key_7'"), std::string::npos);
  spec.state = {{"past_key_0", "logits"}};
  EXPECT_NE(compile(spec).find("must have its input's dtype and shape"), std::string::npos);
  // Same shape, but the attention step writes present_value_0 from past_value_0.
  spec.state = {{"past_key_0", "present_value_0"}};
  EXPECT_NE(compile(spec).find("does not update 'past_key_0' in place"), std::string::npos) << compile(spec);
  spec.state = {{"decode:past_key_0", "present_key_0"}, {"decode:past_key_1", "present_key_0"}};
  auto v = ValidateSpec(spec);
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.message().find("both name the output 'present_key_0'"), std::string::npos) << v.message();
  auto parsed = ParseSpecJson(R"({"targets": "generic", "state": "everything"})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("\"state\" must be \"auto\""), std::string::npos);
  parsed = ParseSpecJson(R"({"targets": "generic", "state": {"past_key_0": 3}})");
  ASSERT_FALSE(parsed.ok());
  parsed = ParseSpecJson(R"({"targets": "generic", "state": {"past_key_0": "present_key_0"}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed.value().state.at("past_key_0"), "present_key_0");
}
}  // namespace
}  // namespace fcb
