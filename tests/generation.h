// Greedy generation on the public API, shared by the language-model tests
// (generate_test, kv_append_test, llm_shapes_test, state_test): reading
// token ids from .npy and a loop that feeds each run only the new token ids
// and an attention mask of the valid length, the KV cache staying in the
// executions' State.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fcb/fcb.h"
#include "fcb/npy.h"

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

}  // namespace fcb::testing
