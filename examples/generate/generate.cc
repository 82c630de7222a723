// Greedy generation on token ids with the public C++ API (include/fcb/fcb.h):
// a language model compiled into a prompt method ("prefill") and a one-token
// method ("decode") that keep their KV cache in one fcb::State.
//
//   llm_generate FILE.fcb PROMPT N [THREADS]
//
// PROMPT is comma-separated token ids; N is how many tokens to generate.
// Prints the generated ids on one line. Make FILE.fcb from ONNX Runtime
// GenAI's CPU int4 model (or scripts/export_llm_models.py --form a) with, e.g.:
//
//   fcb compile --method prefill=model.onnx --method decode=model.onnx \
//     --state auto --kv-capacity 512 \
//     --input-shape input_ids=1x1..512 --input-shape attention_mask=1x1..512 \
//     --input-shape decode:input_ids=1x1 --input-shape decode:attention_mask=1x2..512 \
//     -o model.fcb
//
// The State holds the cache (one buffer per past input, updated in place),
// so a run is given only what describes the new tokens: input_ids, and where
// the model has them attention_mask (ones over the valid length),
// position_ids, seqlens_k (valid length - 1) and total_sequence_length.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fcb/fcb.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

// Sets every input of `e` that is not part of the State for the tokens `ids`
// at positions past..past+S-1. Returns the first error.
fcb::Status Feed(fcb::Execution& e, const fcb::State& state, const std::vector<int64_t>& ids, int64_t past) {
  std::vector<std::string> cache;
  for (const auto& v : state.variables()) cache.push_back(v.name);
  const int64_t s = static_cast<int64_t>(ids.size()), total = past + s;
  for (const fcb::TensorSpec& in : e.info().inputs) {
    if (std::find(cache.begin(), cache.end(), in.name) != cache.end()) continue;  // the KV cache: in the State
    std::vector<int64_t> values, shape;
    if (in.name == "input_ids") {
      values = ids;
      shape = {1, s};
    } else if (in.name == "attention_mask") {
      values.assign(static_cast<size_t>(total), 1);
      shape = {1, total};
    } else if (in.name == "position_ids") {
      for (int64_t i = 0; i < s; ++i) values.push_back(past + i);
      shape = {1, s};
    } else if (in.name == "seqlens_k") {
      values = {total - 1};
      shape = {1};
    } else if (in.name == "total_sequence_length") {
      values = {total};
      shape = in.shape;
    } else {
      return fcb::InvalidArgument("input '" + in.name + "' is not one this example feeds");
    }
    // int64 or int32, as the model declares.
    std::vector<uint8_t> bytes(values.size() * fcb::DTypeSize(in.dtype));
    for (size_t i = 0; i < values.size(); ++i) {
      if (in.dtype == fcb::DType::kI64) {
        std::memcpy(bytes.data() + 8 * i, &values[i], 8);
      } else {
        const int32_t v = static_cast<int32_t>(values[i]);
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
    }
    FCB_RETURN_IF_ERROR(e.SetInput(in.name, bytes.data(), bytes.size(), shape));
  }
  return fcb::Status::Ok();
}

// Runs `e` on the tokens and returns the argmax of the last logits row.
fcb::Result<int64_t> Next(fcb::Execution& e, const fcb::State& state, const std::vector<int64_t>& ids,
                          int64_t past) {
  FCB_RETURN_IF_ERROR(Feed(e, state, ids, past));
  FCB_RETURN_IF_ERROR(e.Run());
  size_t o = 0;
  while (o < e.info().outputs.size() && e.info().outputs[o].name != "logits") ++o;
  if (o == e.info().outputs.size()) return fcb::InvalidArgument("method '" + e.info().name + "' has no 'logits'");
  const int64_t vocab = e.output_shape(o).back();
  const float* row = static_cast<const float*>(e.output_data(o)) + (ids.size() - 1) * vocab;
  return static_cast<int64_t>(std::max_element(row, row + vocab) - row);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail("usage: llm_generate FILE.fcb PROMPT(1,2,3) N [THREADS]");
  std::vector<int64_t> prompt;
  std::stringstream ss(argv[2]);
  for (std::string t; std::getline(ss, t, ',');) prompt.push_back(std::atoll(t.c_str()));
  const int n = std::atoi(argv[3]);
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  if (prompt.empty() || n < 1 || threads < 1) return Fail("give a prompt, N >= 1 and THREADS >= 1");

  auto program = fcb::Program::Load(argv[1]);
  if (!program.ok()) return Fail(program.status().message());
  // One State for both methods: prefill fills the cache, decode continues it.
  auto state = fcb::State::Create(program.value());
  if (!state.ok()) return Fail(state.status().message());
  auto prefill = fcb::Execution::Create(program.value(), "prefill", threads, state.value());
  auto decode = fcb::Execution::Create(program.value(), "decode", threads, state.value());
  if (!prefill.ok()) return Fail(prefill.status().message());
  if (!decode.ok()) return Fail(decode.status().message());

  std::vector<int64_t> out;
  auto token = Next(*prefill.value(), *state.value(), prompt, 0);
  if (!token.ok()) return Fail(token.status().message());
  out.push_back(token.value());
  for (int i = 1; i < n; ++i) {
    const int64_t past = static_cast<int64_t>(prompt.size()) + i - 1;
    token = Next(*decode.value(), *state.value(), {out.back()}, past);
    if (!token.ok()) return Fail(token.status().message());
    out.push_back(token.value());
  }
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%lld", i ? " " : "", static_cast<long long>(out[i]));
  std::printf("\n");
  return 0;
}
