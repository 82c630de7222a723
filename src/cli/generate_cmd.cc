// `fcb generate`: greedy generation on token ids. The file's prompt method
// ("prefill") and one-token method ("decode") run bound to one State (the KV
// cache, docs/design.md section 14): prefill fills it from the prompt, each
// decode step appends one token. Every input other than the cache is fed from
// the token ids and the position: input_ids, attention_mask (ones),
// position_ids, seqlens_k (valid length - 1), total_sequence_length. One
// untimed warm-up (prompt + one decode step, then State::Reset) precedes the
// timed generation, as tools/oracle/ort_generate.js does for ONNX Runtime.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "cli/cli.h"

namespace fcb::cli {
namespace {

Result<std::vector<int64_t>> ParsePrompt(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const bool digits = !part.empty() && part.size() <= 18 &&
                        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits)
      return InvalidArgument("--prompt '" + Shown(text) + "': '" + Shown(part) +
                             "' is not a token id; give non-negative integers separated by commas, e.g. 1,2,3");
    ids.push_back(std::stoll(part));
  }
  if (ids.empty()) return InvalidArgument("--prompt is empty; give token ids separated by commas, e.g. 1,2,3");
  return ids;
}

// One method's execution and how to feed it.
struct Step {
  std::unique_ptr<Execution> ex;
  std::string method;
  std::vector<TensorSpec> feeds;  // the inputs fed per call (not the state)
  size_t logits = 0;              // output index
  int64_t max_tokens = 0, min_tokens = 0;  // input_ids dim 1 range
  int64_t max_total = std::numeric_limits<int64_t>::max();  // attention_mask's longest, when it has one
  std::vector<float> last_logits;  // the last run's logits row of its last token

  // Runs `ids` as the tokens at positions past..past+S-1; the next token is
  // the argmax of the last logits row.
  Result<int64_t> Run(const std::vector<int64_t>& ids, int64_t past) {
    const int64_t s = static_cast<int64_t>(ids.size()), total = past + s;
    for (const TensorSpec& t : feeds) {
      std::vector<int64_t> values, shape;
      if (t.name == "input_ids") {
        values = ids;
        shape = {1, s};
      } else if (t.name == "attention_mask") {
        values.assign(static_cast<size_t>(total), 1);
        shape = {1, total};
      } else if (t.name == "position_ids") {
        for (int64_t i = 0; i < s; ++i) values.push_back(past + i);
        shape = {1, s};
      } else if (t.name == "seqlens_k") {
        values = {total - 1};
        shape = {1};
      } else {  // total_sequence_length
        values = {total};
        shape = t.shape;  // [] or [1]
      }
      std::vector<uint8_t> bytes(values.size() * DTypeSize(t.dtype));
      for (size_t i = 0; i < values.size(); ++i) {
        if (t.dtype == DType::kI64) {
          std::memcpy(bytes.data() + 8 * i, &values[i], 8);
        } else if (t.dtype == DType::kI32) {
          const int32_t v = static_cast<int32_t>(values[i]);
          std::memcpy(bytes.data() + 4 * i, &v, 4);
        } else {
          const float v = static_cast<float>(values[i]);
          std::memcpy(bytes.data() + 4 * i, &v, 4);
        }
      }
      Status st = t.dynamic() || t.shape != shape ? ex->SetInput(t.name, bytes.data(), bytes.size(), shape)
                                                  : ex->SetInput(t.name, bytes.data(), bytes.size());
      if (!st.ok()) return st.Annotate("method '" + Shown(method) + "', input '" + Shown(t.name) + "'");
    }
    FCB_RETURN_IF_ERROR(ex->Run());
    const auto& shape = ex->output_shape(logits);
    const int64_t vocab = shape.back();
    const float* row = static_cast<const float*>(ex->output_data(logits)) + (s - 1) * vocab;
    last_logits.assign(row, row + vocab);
    return static_cast<int64_t>(std::max_element(row, row + vocab) - row);
  }
};

Result<Step> MakeStep(const std::shared_ptr<const Program>& program, const std::string& method, int threads,
                      const std::shared_ptr<State>& state) {
  Step st;
  st.method = method;
  FCB_ASSIGN_OR_RETURN(MethodInfo info, program->method(method));
  std::set<std::string> cache;
  for (const auto& v : state->variables()) cache.insert(v.name);
  static const std::set<std::string> kFed = {"input_ids", "attention_mask", "position_ids", "seqlens_k",
                                             "total_sequence_length"};
  const std::string where = "method '" + Shown(method) + "': ";
  bool ids = false;
  for (const TensorSpec& t : info.inputs) {
    if (cache.count(t.name)) continue;
    if (!kFed.count(t.name))
      return InvalidArgument(where + "input '" + Shown(t.name) +
                             "' is neither a state (KV cache) nor one generate feeds (input_ids, attention_mask, "
                             "position_ids, seqlens_k, total_sequence_length); compile the cache inputs as state "
                             "(--state auto, with --kv-capacity N for a growing past) or fix the input with "
                             "--input-value");
    if (t.dtype != DType::kI64 && t.dtype != DType::kI32 && !(t.dtype == DType::kF32 && t.name == "attention_mask"))
      return InvalidArgument(where + "input '" + Shown(t.name) + "' is " + DTypeName(t.dtype) +
                             "; generate feeds int64 or int32");
    if (t.name == "input_ids") {
      if (t.shape.size() != 2)
        return InvalidArgument(where + "input_ids must be [1, sequence], not of rank " +
                               std::to_string(t.shape.size()));
      st.max_tokens = t.shape[1];
      st.min_tokens = t.dynamic() ? t.min_shape[1] : t.shape[1];
      ids = true;
    }
    if (t.name == "attention_mask" && t.shape.size() == 2) st.max_total = t.shape[1];
    st.feeds.push_back(t);
  }
  if (!ids) return InvalidArgument(where + "has no input 'input_ids'");
  bool found = false;
  for (size_t i = 0; i < info.outputs.size(); ++i)
    if (info.outputs[i].name == "logits") {
      if (info.outputs[i].dtype != DType::kF32 || info.outputs[i].shape.size() != 3)
        return InvalidArgument(where + "output 'logits' must be float32 [1, sequence, vocab]");
      st.logits = i;
      found = true;
    }
  if (!found) return InvalidArgument(where + "has no output 'logits'");
  FCB_ASSIGN_OR_RETURN(st.ex, Execution::Create(program, method, threads, state));
  return st;
}

std::string Rate(const char* what, int64_t tokens, double ms) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: %lld tokens in %.1f ms (%.1f tok/s)", what, static_cast<long long>(tokens), ms,
                ms > 0 ? tokens * 1000.0 / ms : 0.0);
  return buf;
}

// One file's greedy generation: the tokens, each step's logits row, timings.
struct Generation {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;  // per generated token: the row it was chosen from
  double prefill_ms = 0, decode_ms = 0;
};

// `usage` is set for requests the file cannot take (the prompt's length, the
// tokens asked for): exit status 2, as for a bad flag.
Result<Generation> Generate(const std::string& file, const GenerateArgs& a, const std::vector<int64_t>& prompt,
                            bool* usage) {
  LoadOptions lo;
  lo.target = a.target;
  FCB_ASSIGN_OR_RETURN(std::shared_ptr<const Program> p, Program::Load(file, lo));
  const std::vector<std::string> methods = p->methods();
  auto has = [&](const std::string& m) { return std::find(methods.begin(), methods.end(), m) != methods.end(); };
  std::string names;
  for (const auto& m : methods) names += (names.empty() ? "'" : ", '") + Shown(m) + "'";
  if (!has("prefill") || !has("decode"))
    return InvalidArgument(file + ": generate needs the methods 'prefill' (the prompt) and 'decode' (one token) sharing a "
                "KV cache as state; this file has " + names + ". Compile them from one model, e.g. fcb compile "
                "--method prefill=M.onnx --method decode=M.onnx --state auto --kv-capacity 512 "
                "--input-shape prefill:input_ids=1x1..512 --input-shape decode:input_ids=1x1 ...");
  FCB_ASSIGN_OR_RETURN(std::shared_ptr<State> state, State::Create(p));
  const auto vars = state->variables();
  if (vars.empty())
    return InvalidArgument(file + ": methods 'prefill' and 'decode' keep no state between runs; compile them with a KV "
                           "cache as state (--state auto, and --kv-capacity N for a growing past)");
  int64_t capacity = std::numeric_limits<int64_t>::max();
  for (const auto& v : vars)
    if (v.shape.size() == 4) capacity = std::min(capacity, v.shape[2]);
  auto prefill = MakeStep(p, "prefill", a.threads, state);
  if (!prefill.ok()) return prefill.TakeStatus().Annotate(file);
  auto decode = MakeStep(p, "decode", a.threads, state);
  if (!decode.ok()) return decode.TakeStatus().Annotate(file);
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n < prefill.value().min_tokens || n > prefill.value().max_tokens)
    return *usage = true, InvalidArgument(file + ": the prompt has " + std::to_string(n) + " tokens; method 'prefill' takes " +
                           std::to_string(prefill.value().min_tokens) + ".." +
                           std::to_string(prefill.value().max_tokens));
  if (decode.value().min_tokens > 1 || decode.value().max_tokens < 1)
    return InvalidArgument(file + ": method 'decode' does not take one token (its input_ids take " +
                           std::to_string(decode.value().min_tokens) + ".." +
                           std::to_string(decode.value().max_tokens) + ")");
  // The cache holds the prompt and every generated token but the last; the
  // attention mask's range may bound that below the buffer's capacity.
  const int64_t need = n + a.max_new - 1;
  if (capacity != std::numeric_limits<int64_t>::max() && need > capacity)
    return *usage = true, InvalidArgument(file + ": the prompt (" + std::to_string(n) + " tokens) and " + std::to_string(a.max_new) +
                " new tokens need " + std::to_string(need) + " cache positions; the KV cache holds " +
                std::to_string(capacity) + " (compile with a larger --kv-capacity, or ask for fewer tokens)");
  for (const Step* s : {&prefill.value(), &decode.value()})
    if ((s == &prefill.value() ? n : need) > s->max_total)
      return *usage = true, InvalidArgument(file + ": the prompt (" + std::to_string(n) + " tokens) and " +
                  std::to_string(a.max_new) + " new tokens need an attention_mask of " +
                  std::to_string(s == &prefill.value() ? n : need) + " in method '" + s->method +
                  "', which takes at most " + std::to_string(s->max_total) +
                  " (compile with a wider attention_mask range, or ask for fewer tokens)");

  // One untimed warm-up (the prompt and one decode step: first-run costs,
  // the prompt's plan resolution), then an empty cache again.
  {
    FCB_ASSIGN_OR_RETURN(int64_t w, prefill.value().Run(prompt, 0));
    if (a.max_new > 1) {
      auto d = decode.value().Run({w}, n);
      if (!d.ok()) return d.TakeStatus().Annotate(file + ": decode step 1");
    }
    state->Reset();
  }
  using Clock = std::chrono::steady_clock;
  Generation g;
  const auto t0 = Clock::now();
  FCB_ASSIGN_OR_RETURN(int64_t first, prefill.value().Run(prompt, 0));
  g.prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  g.tokens.push_back(first);
  if (!a.reference.empty()) g.logits.push_back(prefill.value().last_logits);
  const auto t1 = Clock::now();
  for (int64_t i = 1; i < a.max_new; ++i) {
    auto next = decode.value().Run({g.tokens.back()}, n + i - 1);
    if (!next.ok()) return next.TakeStatus().Annotate(file + ": decode step " + std::to_string(i));
    g.tokens.push_back(next.value());
    if (!a.reference.empty()) g.logits.push_back(decode.value().last_logits);
  }
  g.decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  return g;
}

std::string TokenLine(const char* what, const std::vector<int64_t>& tokens) {
  std::string line = what;
  for (int64_t t : tokens) line += " " + std::to_string(t);
  return line;
}

}  // namespace

int CmdGenerate(const GenerateArgs& a) {
  auto prompt = ParsePrompt(a.prompt);
  if (!prompt.ok()) return Fail(prompt.status().message(), 2);
  if (a.max_new < 1) return Fail("--max-new must be at least 1", 2);
  if (a.threads < 1) return Fail("--threads must be at least 1", 2);
  bool usage = false;
  auto run = Generate(a.file, a, prompt.value(), &usage);
  if (!run.ok()) return usage ? Fail(run.status().message(), 2) : Fail(run.status());
  const Generation& g = run.value();
  std::cout << TokenLine("tokens:", g.tokens) << "\n"
            << Rate("prefill", static_cast<int64_t>(prompt.value().size()), g.prefill_ms) << "\n"
            << Rate("decode", a.max_new - 1, g.decode_ms) << "\n";
  if (a.reference.empty()) return 0;
  // --reference: the same greedy generation with the reference file (e.g. the
  // fp32 compile of the model this file quantizes); token agreement position
  // by position, and the logits' rel L2 over the steps whose inputs were still
  // the same (up to the first differing token, included).
  auto ref = Generate(a.reference, a, prompt.value(), &usage);
  if (!ref.ok()) return Fail(ref.TakeStatus().Annotate("--reference").message(), usage ? 2 : 1);
  const Generation& r = ref.value();
  int64_t agree = 0, first_diff = -1;
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    agree += g.tokens[i] == r.tokens[i];
    if (first_diff < 0 && g.tokens[i] != r.tokens[i]) first_diff = static_cast<int64_t>(i);
  }
  const size_t same_inputs = first_diff < 0 ? g.tokens.size() : static_cast<size_t>(first_diff) + 1;
  double d2 = 0, r2 = 0;
  std::string per_step;
  for (size_t i = 0; i < same_inputs; ++i) {
    if (g.logits[i].size() != r.logits[i].size())
      return Fail("--reference: the logits have " + std::to_string(g.logits[i].size()) + " entries here and " +
                  std::to_string(r.logits[i].size()) + " in the reference; compare compiles of one model");
    double sd = 0, sr = 0;
    for (size_t j = 0; j < g.logits[i].size(); ++j) {
      const double d = static_cast<double>(g.logits[i][j]) - r.logits[i][j];
      sd += d * d;
      sr += static_cast<double>(r.logits[i][j]) * r.logits[i][j];
    }
    d2 += sd;
    r2 += sr;
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.2e", sr > 0 ? std::sqrt(sd / sr) : 0.0);
    per_step += buf;
  }
  char num[64];
  std::snprintf(num, sizeof num, "%.3e", r2 > 0 ? std::sqrt(d2 / r2) : 0.0);
  std::cout << TokenLine("reference tokens:", r.tokens) << "\n"
            << "agreement: " << agree << "/" << g.tokens.size() << " tokens equal to the reference's"
            << (first_diff < 0 ? std::string(" (no difference)")
                               : " (first difference at token " + std::to_string(first_diff) + ")")
            << "\n"
            << "logits rel L2 vs reference: " << num << " over " << same_inputs
            << " steps with the same inputs; per step:" << per_step << "\n";
  return 0;
}

}  // namespace fcb::cli
