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

// The methods' input and output names: the two exported graphs'
// (export_tiny_decoder.py) by default; Merged() for the methods compiled from
// the merged graph (merge_decoders), whose prefill also takes pos and the
// caches (given zeros here, as the exporter's merged form expects).
struct DecoderNames {
  std::string prefill_tokens = "tokens", prefill_k = "k_cache", prefill_v = "v_cache";
  std::string token = "token", pos = "pos", k_in = "k_cache", v_in = "v_cache";
  std::string logits = "logits", k_out = "k_cache_out", v_out = "v_cache_out";
  static DecoderNames Merged() {
    DecoderNames n;
    n.prefill_tokens = n.token = "input_ids";
    n.prefill_k = n.k_out = "present_k";
    n.prefill_v = n.v_out = "present_v";
    return n;
  }
};

// Runs prefill over `prompt` (its length must be the method's T), then decode
// until `n` tokens have been chosen; `threads` per execution.
inline Result<Generation> GreedyGenerate(const std::shared_ptr<const Program>& program,
                                         const std::vector<int64_t>& prompt, int n, int threads = 1,
                                         const DecoderNames& names = {}) {
  FCB_ASSIGN_OR_RETURN(auto prefill, Execution::Create(program, "prefill", threads));
  FCB_ASSIGN_OR_RETURN(auto decode, Execution::Create(program, "decode", threads));
  bool has_tokens = false;
  for (const auto& in : prefill->info().inputs) {
    if (in.name != names.prefill_tokens) {  // anything else prefill takes starts as zeros
      FCB_RETURN_IF_ERROR(prefill->SetInput(in.name, std::vector<uint8_t>(in.bytes()).data(), in.bytes()));
      continue;
    }
    has_tokens = true;
    if (in.shape.size() != 2 || in.shape[1] != static_cast<int64_t>(prompt.size()))
      return InvalidArgument("prefill takes " + names.prefill_tokens + " [1, T]; the prompt has " +
                             std::to_string(prompt.size()) + " tokens");
  }
  if (!has_tokens) return InvalidArgument("prefill has no input '" + names.prefill_tokens + "'");
  const int64_t t = static_cast<int64_t>(prompt.size());
  FCB_RETURN_IF_ERROR(prefill->SetInput(names.prefill_tokens, prompt.data(), prompt.size() * sizeof(int64_t)));
  FCB_RETURN_IF_ERROR(prefill->Run());
  FCB_ASSIGN_OR_RETURN(auto all_logits, CopyOutput(*prefill, names.logits));
  FCB_ASSIGN_OR_RETURN(auto k, CopyOutput(*prefill, names.prefill_k));
  FCB_ASSIGN_OR_RETURN(auto v, CopyOutput(*prefill, names.prefill_v));
  const size_t vocab = all_logits.size() / sizeof(float) / t;
  const int64_t max_ctx = prefill->info().outputs[OutputIndex(*prefill, names.prefill_k)].shape[2];
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
    FCB_RETURN_IF_ERROR(decode->SetInput(names.token, &token, sizeof token));
    FCB_RETURN_IF_ERROR(decode->SetInput(names.pos, &pos, sizeof pos));
    FCB_RETURN_IF_ERROR(decode->SetInput(names.k_in, k.data(), k.size()));
    FCB_RETURN_IF_ERROR(decode->SetInput(names.v_in, v.data(), v.size()));
    FCB_RETURN_IF_ERROR(decode->Run());
    FCB_ASSIGN_OR_RETURN(auto logits, CopyOutput(*decode, names.logits));
    std::memcpy(row.data(), logits.data(), vocab * sizeof(float));
    FCB_ASSIGN_OR_RETURN(k, CopyOutput(*decode, names.k_out));
    FCB_ASSIGN_OR_RETURN(v, CopyOutput(*decode, names.v_out));
  }
  return g;
}

}  // namespace fcb::example
