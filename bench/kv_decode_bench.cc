// Decode time per token of a plain-exporter decoder (present = Concat(past,
// new)) with its KV cache kept in place in a State (kv_capacity) against the
// same model compiled with ranges and its cache copied by the caller, out of
// the presents and into the pasts, every token (a benchmark, never a test):
//
//   kv_decode_bench STATE.fcb COPY.fcb PROMPT_LEN NEW [--threads N] [--repeat R]
//
// Both files have methods 'prefill' and 'decode' (input_ids, attention_mask
// [, past_key_values.*]; COPY's prefill with its pasts fixed empty by
// input_values, since a range starts at 1); the prompt is token ids (i * 37 + 11) % 256. Prints
// each file's greedy tokens (they must agree) and its decode ms/token, the
// best of R generations.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fcb/fcb.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "kv_decode_bench: %s\n", m.c_str());
  std::exit(1);
}

template <typename T>
T Check(fcb::Result<T> r, const char* what) {
  if (!r.ok()) Die(std::string(what) + ": " + r.status().message());
  return std::move(r).value();
}
void Check(const fcb::Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.message());
}

size_t Output(const fcb::Execution& e, const std::string& name) {
  for (size_t o = 0; o < e.info().outputs.size(); ++o)
    if (e.info().outputs[o].name == name) return o;
  Die("no output " + name);
}

struct Run {
  std::vector<int64_t> tokens;
  double decode_ms = 0;
};

// One greedy generation. Without state, the caller keeps each present and
// feeds it back as the next past (the copy in and out a state avoids).
Run Generate(const std::shared_ptr<const fcb::Program>& p, int threads, int64_t prompt_len, int64_t n) {
  auto state = Check(fcb::State::Create(p), "state");
  auto prefill = Check(fcb::Execution::Create(p, "prefill", threads, state), "prefill");
  auto decode = Check(fcb::Execution::Create(p, "decode", threads, state), "decode");
  const bool copy = state->variables().empty();
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> cache;  // past name -> shape, data
  if (copy)
    for (const auto& in : decode->info().inputs)
      if (in.name.rfind("past_key_values.", 0) == 0) {
        std::vector<int64_t> s = in.shape;
        s[2] = 0;
        cache[in.name] = {s, {}};
      }
  Run r;
  int64_t length = 0;
  Clock::time_point t0;
  for (int64_t step = 0; step < n; ++step) {
    fcb::Execution* e = step == 0 ? prefill.get() : decode.get();
    if (step == 1) t0 = Clock::now();
    std::vector<int64_t> ids;
    if (step == 0)
      for (int64_t i = 0; i < prompt_len; ++i) ids.push_back((i * 37 + 11) % 256);
    else
      ids.push_back(r.tokens.back());
    const int64_t s = static_cast<int64_t>(ids.size());
    const std::vector<int64_t> mask(static_cast<size_t>(length + s), 1);
    Check(e->SetInput("input_ids", ids.data(), ids.size() * 8, {1, s}), "input_ids");
    Check(e->SetInput("attention_mask", mask.data(), mask.size() * 8, {1, length + s}), "attention_mask");
    if (step > 0)  // a prefill without past inputs (fixed empty) starts the cache
      for (auto& [name, c] : cache)
        Check(e->SetInput(name, c.second.data(), c.second.size() * 4, c.first), name.c_str());
    Check(e->Run(), "run");
    length += s;
    const float* logits = static_cast<const float*>(e->output_data(Output(*e, "logits")));
    const int64_t vocab = e->output_shape(Output(*e, "logits")).back();
    const float* row = logits + (s - 1) * vocab;
    r.tokens.push_back(std::max_element(row, row + vocab) - row);
    for (auto& [name, c] : cache) {
      const size_t o = Output(*e, "present." + name.substr(16));
      c.first = e->output_shape(o);
      const float* d = static_cast<const float*>(e->output_data(o));
      c.second.assign(d, d + e->output_bytes(o) / 4);
    }
  }
  r.decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / static_cast<double>(n - 1);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) Die("usage: kv_decode_bench STATE.fcb COPY.fcb PROMPT_LEN NEW [--threads N] [--repeat R]");
  int threads = 1, repeat = 5;
  for (int i = 5; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[i + 1]);
    else if (std::string(argv[i]) == "--repeat") repeat = std::atoi(argv[i + 1]);
    else Die(std::string("unknown option ") + argv[i]);
  }
  const int64_t prompt = std::atoll(argv[3]), n = std::atoll(argv[4]);
  std::vector<int64_t> first;
  for (int f = 0; f < 2; ++f) {
    auto p = Check(fcb::Program::Load(argv[1 + f]), argv[1 + f]);
    Run best;
    best.decode_ms = 1e30;
    for (int i = 0; i < repeat + 1; ++i) {  // the first is a warm-up
      Run r = Generate(p, threads, prompt, n);
      if (i > 0 && r.decode_ms < best.decode_ms) best = r;
      if (i == 0) best.tokens = r.tokens;
    }
    std::printf("%s: decode %.3f ms/token (%s)\n", f == 0 ? "state" : "copy ", best.decode_ms, argv[1 + f]);
    if (f == 0) first = best.tokens;
    else if (best.tokens != first) std::printf("TOKENS DIFFER between the two files\n");
  }
  std::printf("tokens:");
  for (int64_t t : first) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  return 0;
}
