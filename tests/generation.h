// Greedy generation on the public API, shared by the language-model tests
// (generate_test, kv_append_test, llm_shapes_test, state_test): reading
// token ids from .npy, a loop that feeds each run only the new token ids
// and an attention mask of the valid length, the KV cache staying in the
// executions' State, and the fixture pieces those tests have in common (a
// model's test data, its prefill + decode compile spec and file).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "fcb/fcb.h"
#include "fcb/fcb_c.h"
#include "fcb/npy.h"
#include "test_util.h"

namespace fcb::testing {

// An int64 .npy of token ids (a failed read is a test failure and gives {}).
inline std::vector<int64_t> ReadTokens(const std::string& path) {
  auto a = ReadNpy(path);
  EXPECT_TRUE(a.ok()) << path << ": " << a.status().message();
  if (!a.ok()) return {};
  std::vector<int64_t> v(a.value().data.size() / 8);
  std::memcpy(v.data(), a.value().data.data(), v.size() * 8);
  return v;
}

// "1,2,3": token ids as `fcb generate --prompt` takes them.
inline std::string TokensCsv(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t t : ids) s += (s.empty() ? "" : ",") + std::to_string(t);
  return s;
}

// Greedy generation over a prefill and a decode execution bound to one
// State: each run gets input_ids [1, S] and attention_mask [1, past + S] of
// ones; the argmax of the last row of `logits` [1, S, vocab] is the next token.
struct Generator {
  Execution *prefill, *decode;
  int64_t vocab;
  int64_t length = 0;  // positions in the cache
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;  // the row each token was chosen from

  Status Feed(Execution* e, const std::vector<int64_t>& ids) {
    const int64_t s = static_cast<int64_t>(ids.size()), total = length + s;
    const std::vector<int64_t> mask(static_cast<size_t>(total), 1);
    FCB_RETURN_IF_ERROR(e->SetInput("input_ids", ids.data(), ids.size() * 8, {1, s}));
    FCB_RETURN_IF_ERROR(e->SetInput("attention_mask", mask.data(), mask.size() * 8, {1, total}));
    FCB_RETURN_IF_ERROR(e->Run());
    length = total;
    size_t o = 0;
    while (e->info().outputs[o].name != "logits") ++o;
    const float* row = static_cast<const float*>(e->output_data(o)) + (s - 1) * vocab;
    logits.emplace_back(row, row + vocab);
    tokens.push_back(std::max_element(row, row + vocab) - row);
    return Status::Ok();
  }
  Status Prompt(const std::vector<int64_t>& ids) { return Feed(prefill, ids); }
  Status Step() { return Feed(decode, {tokens.back()}); }
};

// A State of a program with its prefill and decode executions bound to it.
struct Session {
  std::shared_ptr<State> state;
  std::unique_ptr<Execution> prefill, decode;
  Generator NewGenerator(int64_t vocab) const { return Generator{prefill.get(), decode.get(), vocab}; }
};

// A new State of `program` and its prefill and decode executions (`threads`
// threads each) into *s; a failure names the one that failed.
inline Status OpenSession(const std::shared_ptr<const Program>& program, int threads, Session* s) {
  auto state = State::Create(program);
  if (!state.ok()) return Status(state.status()).Annotate("State::Create");
  s->state = state.value();
  for (auto [method, e] : {std::pair{"prefill", &s->prefill}, std::pair{"decode", &s->decode}}) {
    auto r = Execution::Create(program, method, threads, s->state);
    if (!r.ok()) return Status(r.status()).Annotate(std::string("Execution::Create of '") + method + "'");
    *e = std::move(r).value();
  }
  return Status::Ok();
}

// A State's KV caches: a key and a value per layer, each of `shape`
// ([1, kv heads, capacity, head]). Call under ASSERT_NO_FATAL_FAILURE.
inline void ExpectKvCaches(const State& state, int64_t layers, const std::vector<int64_t>& shape) {
  const auto vars = state.variables();
  ASSERT_EQ(vars.size(), static_cast<size_t>(2 * layers));
  for (const auto& v : vars) EXPECT_EQ(v.shape, shape) << v.name;
}

// A prefill method (input_ids [1, 1..max_prompt], attention_mask
// [1, 1..capacity]) and a decode method (input_ids [1, 1]; with
// decode_mask, attention_mask [1, 2..capacity]) sharing one State
// ("state": "auto") whose KV caches hold `capacity` positions.
inline CompileSpec GenerationSpec(std::vector<std::string> targets, int64_t max_prompt, int64_t capacity,
                                  bool decode_mask) {
  CompileSpec spec;
  spec.targets = std::move(targets);
  spec.input_shapes["input_ids"] = {1, {1, max_prompt}};
  spec.input_shapes["attention_mask"] = {1, {1, capacity}};
  spec.input_shapes["decode:input_ids"] = {1, 1};
  if (decode_mask) spec.input_shapes["decode:attention_mask"] = {1, {2, capacity}};
  spec.state_auto = true;
  spec.kv_capacity = capacity;
  return spec;
}

// `model` compiled with `spec` into the methods "prefill" and "decode" of
// the temporary file `name`, once per test binary and name: the file's path
// for every later call. A failed compile is a test failure and gives "" (the
// next call tries again).
inline const std::string& CompileGenerationOnce(const std::string& model, const CompileSpec& spec,
                                                const std::string& name) {
  static TempDir tmp;
  static std::map<std::string, std::string> files;
  std::string& file = files[name];
  if (file.empty()) {
    const std::string f = tmp.File(name);
    auto r = CompileMethods({{"prefill", model}, {"decode", model}}, spec, f);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) file = f;
  }
  return file;
}

// A status of the C API, destroyed: true where it is OK (nullptr);
// otherwise a test failure that shows its message.
inline bool CApiOk(fcb_status_t* s) {
  const std::string msg = s ? fcb_status_message(s) : "";
  fcb_status_destroy(s);
  EXPECT_EQ(msg, "");
  return msg.empty();
}

// A fixture (over ::testing::Test or TestWithParam) for a language model's
// generation tests: the test data scripts/prepare_testdata.sh makes for the
// model `name` (in the test data folder: name.onnx, the prompt
// name.prompt.npy, ONNX Runtime's greedy tokens and logits in
// name.ref/tokens.npy and name.ref/logits.npy).
template <class Base = ::testing::Test>
class GenerationTest : public Base {
 protected:
  // Checks that the four files are there and reads the prompt and ONNX
  // Runtime's tokens into prompt_ and want_, asserting their lengths where
  // given (non-zero). Call from SetUp under ASSERT_NO_FATAL_FAILURE.
  void LoadModel(const std::string& name, size_t prompt_tokens = 0, size_t new_tokens = 0) {
    dir_ = TestDataDir();
    stem_ = dir_ + "/" + name;
    for (const char* f : {".onnx", ".prompt.npy", ".ref/tokens.npy", ".ref/logits.npy"})
      ASSERT_TRUE(FileExists(stem_ + f)) << stem_ << f << " is missing: run scripts/prepare_testdata.sh";
    model_ = stem_ + ".onnx";
    prompt_ = ReadTokens(stem_ + ".prompt.npy");
    want_ = ReadTokens(stem_ + ".ref/tokens.npy");
    if (prompt_tokens) ASSERT_EQ(prompt_.size(), prompt_tokens);
    if (new_tokens) ASSERT_EQ(want_.size(), new_tokens);
  }
  // The prompt as `fcb generate --prompt` takes it.
  std::string Prompt() const { return TokensCsv(prompt_); }

  std::string dir_;    // the test data folder
  std::string stem_;   // dir_/name
  std::string model_;  // the .onnx file
  std::vector<int64_t> prompt_, want_;
};

}  // namespace fcb::testing
