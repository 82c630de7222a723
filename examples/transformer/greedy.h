// Greedy decoding with a prefill and a decode method of one fcb::Program:
// the generation loop of the tiny-decoder example, shared by the example
// program (generate.cc) and its test. Public API only.
//
// The methods follow examples/transformer/export_tiny_decoder.py:
//   prefill(tokens[1,T] int64) -> logits[1,T,V], k_cache, v_cache
//   decode(token[1,1] int64, pos[1] int64, k_cache, v_cache)
//         -> logits[1,1,V], k_cache_out, v_cache_out
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fcb/fcb.h"

namespace fcb::example {

struct Generation {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;  // per token, the row it was chosen from
};

// Index of output `name` of an execution's method, or -1.
inline int OutputIndex(const Execution& ex, const std::string& name) {
  const auto& outs = ex.info().outputs;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == name) return static_cast<int>(i);
  return -1;
}

// A copy of output `name`'s bytes (the execution's own buffers are reused by
// its next run, and may overlap its inputs' arena slots).
inline Result<std::vector<uint8_t>> CopyOutput(const Execution& ex, const std::string& name) {
  const int i = OutputIndex(ex, name);
  if (i < 0) return NotFound("method '" + ex.info().name + "' has no output '" + name + "'");
  const auto* p = static_cast<const uint8_t*>(ex.output_data(i));
  return std::vector<uint8_t>(p, p + ex.info().outputs[i].bytes());
}

// The first index of the largest value (ties go to the lower index, like
// numpy's and the ONNX Runtime oracle's argmax).
inline int64_t ArgMax(const std::vector<float>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

// Runs prefill over `prompt` (its length must be the method's T), then decode
// until `n` tokens have been chosen; `threads` per execution.
inline Result<Generation> GreedyGenerate(const std::shared_ptr<const Program>& program,
                                         const std::vector<int64_t>& prompt, int n, int threads = 1) {
  FCB_ASSIGN_OR_RETURN(auto prefill, Execution::Create(program, "prefill", threads));
  FCB_ASSIGN_OR_RETURN(auto decode, Execution::Create(program, "decode", threads));
  const auto& in = prefill->info().inputs;
  if (in.size() != 1 || in[0].shape.size() != 2 || in[0].shape[1] != static_cast<int64_t>(prompt.size()))
    return InvalidArgument("prefill takes tokens [1, T]; the prompt has " + std::to_string(prompt.size()) +
                           " tokens");
  const int64_t t = static_cast<int64_t>(prompt.size());
  FCB_RETURN_IF_ERROR(prefill->SetInput("tokens", prompt.data(), prompt.size() * sizeof(int64_t)));
  FCB_RETURN_IF_ERROR(prefill->Run());
  FCB_ASSIGN_OR_RETURN(auto all_logits, CopyOutput(*prefill, "logits"));
  FCB_ASSIGN_OR_RETURN(auto k, CopyOutput(*prefill, "k_cache"));
  FCB_ASSIGN_OR_RETURN(auto v, CopyOutput(*prefill, "v_cache"));
  const size_t vocab = all_logits.size() / sizeof(float) / t;
  const int64_t max_ctx = prefill->info().outputs[OutputIndex(*prefill, "k_cache")].shape[2];
  if (t + n - 1 > max_ctx)
    return InvalidArgument(std::to_string(n) + " tokens after a prompt of " + std::to_string(t) +
                           " do not fit the KV cache of " + std::to_string(max_ctx) + " positions");

  Generation g;
  std::vector<float> row(vocab);
  std::memcpy(row.data(), all_logits.data() + (t - 1) * vocab * sizeof(float), vocab * sizeof(float));
  for (int i = 0;; ++i) {
    g.tokens.push_back(ArgMax(row));
    g.logits.push_back(row);
    if (i + 1 == n) break;
    const int64_t token = g.tokens.back(), pos = t + i;
    FCB_RETURN_IF_ERROR(decode->SetInput("token", &token, sizeof token));
    FCB_RETURN_IF_ERROR(decode->SetInput("pos", &pos, sizeof pos));
    FCB_RETURN_IF_ERROR(decode->SetInput("k_cache", k.data(), k.size()));
    FCB_RETURN_IF_ERROR(decode->SetInput("v_cache", v.data(), v.size()));
    FCB_RETURN_IF_ERROR(decode->Run());
    FCB_ASSIGN_OR_RETURN(auto logits, CopyOutput(*decode, "logits"));
    std::memcpy(row.data(), logits.data(), vocab * sizeof(float));
    FCB_ASSIGN_OR_RETURN(k, CopyOutput(*decode, "k_cache_out"));
    FCB_ASSIGN_OR_RETURN(v, CopyOutput(*decode, "v_cache_out"));
  }
  return g;
}

}  // namespace fcb::example
