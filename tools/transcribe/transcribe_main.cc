// fcb-transcribe: speech to text with Whisper from one .fcb, on fcb's public API.
//
//   fcb-transcribe compile MODEL_DIR OUT.fcb [--target T]... [--frontend FRONTEND.onnx]
//   fcb-transcribe FILE.fcb AUDIO.wav [--threads N] [--target T] [--language en] [--tokens] [--times]
//
// compile: MODEL_DIR is a transformers.js-style Whisper folder (config.json,
// generation_config.json, vocab.json, onnx/encoder_model[_quantized].onnx,
// onnx/decoder_model_merged[_quantized].onnx). One .fcb gets four methods
// sharing their weights, for every target given (default: all):
//   features - 30 s of 16 kHz audio -> the 80 x 3000 log-mel features (the
//              ONNX graph scripts/make_whisper_frontend.py writes; --frontend,
//              else MODEL_DIR/whisper_frontend.onnx)
//   encoder  - features -> the encoder's hidden states
//   first    - the merged decoder with use_cache_branch false: the forced
//              prefix (1..8 tokens) -> logits and the first cache
//   next     - use_cache_branch true: one token -> logits; its
//              self-attention cache (up to 224 rows, kv_capacity) lives in
//              an fcb::State and each call appends its row in place
//              (docs/design.md section 14); the cross-attention cache
//              `first` made is a plain input, set once
// Each keeps only the outputs the loop reads (the spec's "outputs"): the
// attention maps the exports also return are neither computed apart nor
// written.
// and the attachments "vocab.json" and "generation_config.json", so that the
// .fcb alone transcribes.
//
// transcribe: reads a WAV (16 kHz mono 16-bit, or any PCM / float WAV, which
// is mixed to mono and resampled; longer than 30 s is refused, not chunked),
// runs the four methods, decodes greedily from the forced prefix
// <|startoftranscript|> <|LANG|> <|transcribe|> <|notimestamps|> until
// <|endoftext|> or 224 tokens, and prints the transcript (the token ids too
// with --tokens, each stage's time with --times).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bpe.h"
#include "fcb/fcb.h"
#include "wav.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kSamples = 480000;  // 30 s at 16 kHz
constexpr int64_t kMaxTokens = 224;   // Whisper's decoder: at most this many tokens after the prefix start
constexpr int64_t kMaxPrefix = 8;

int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

fcb::Result<std::string> ReadText(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return fcb::NotFound("cannot read '" + p.string() + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fcb::Result<json> ParseJson(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fcb::InvalidArgument(what + " is not a JSON object");
  return j;
}

// What the run needs of the model, read from its config files (at compile
// time from the folder, at run time from the attachments).
struct WhisperConfig {
  int64_t layers = 0, heads = 0, head_dim = 0, d_model = 0, mels = 80, frames = 1500;
  int64_t start = 0, eos = 0, transcribe = 0, no_timestamps = 0;
  std::map<std::string, int64_t> languages;  // "en" -> its token
};

fcb::Result<WhisperConfig> ReadConfig(const json& config, const json& generation, const std::string& where) {
  auto num = [&](const json& j, const char* key, int64_t* out) -> fcb::Status {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      return fcb::InvalidArgument(where + ": '" + key + "' is missing or not a positive integer");
    *out = j[key].get<int64_t>();
    return fcb::Status::Ok();
  };
  WhisperConfig c;
  if (!config.contains("model_type") || config["model_type"] != "whisper")
    return fcb::InvalidArgument(where + ": config.json's model_type is not \"whisper\"; this is not a Whisper model");
  FCB_RETURN_IF_ERROR(num(config, "decoder_layers", &c.layers));
  FCB_RETURN_IF_ERROR(num(config, "decoder_attention_heads", &c.heads));
  FCB_RETURN_IF_ERROR(num(config, "d_model", &c.d_model));
  FCB_RETURN_IF_ERROR(num(config, "num_mel_bins", &c.mels));
  FCB_RETURN_IF_ERROR(num(config, "max_source_positions", &c.frames));
  if (c.d_model % c.heads != 0) return fcb::InvalidArgument(where + ": d_model is not a multiple of the heads");
  c.head_dim = c.d_model / c.heads;
  FCB_RETURN_IF_ERROR(num(generation, "decoder_start_token_id", &c.start));
  FCB_RETURN_IF_ERROR(num(generation, "eos_token_id", &c.eos));
  FCB_RETURN_IF_ERROR(num(generation, "no_timestamps_token_id", &c.no_timestamps));
  if (!generation.contains("task_to_id") || !generation["task_to_id"].contains("transcribe"))
    return fcb::InvalidArgument(where + ": generation_config.json has no task_to_id.transcribe");
  c.transcribe = generation["task_to_id"]["transcribe"].get<int64_t>();
  if (generation.contains("lang_to_id") && generation["lang_to_id"].is_object())
    for (const auto& [k, v] : generation["lang_to_id"].items())
      if (k.size() > 4 && v.is_number_integer()) c.languages[k.substr(2, k.size() - 4)] = v.get<int64_t>();
  return c;
}


// ------------------------------------------------------------------ compile

int Compile(int argc, char** argv) {
  if (argc < 4) return Fail("usage: fcb-transcribe compile MODEL_DIR OUT.fcb [--target T]... [--frontend FILE.onnx]");
  const fs::path dir = argv[2];
  const std::string out = argv[3];
  std::vector<std::string> targets;
  fs::path frontend = dir / "whisper_frontend.onnx";
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--target" && i + 1 < argc) targets.push_back(argv[++i]);
    else if (a == "--frontend" && i + 1 < argc) frontend = argv[++i];
    else return Fail("unknown argument '" + a + "'");
  }
  if (targets.empty()) targets = {"all"};
  if (!fs::is_directory(dir)) return Fail("'" + dir.string() + "' is not a folder");
  auto config_text = ReadText(dir / "config.json");
  auto generation_text = ReadText(dir / "generation_config.json");
  auto vocab_text = ReadText(dir / "vocab.json");
  if (!config_text.ok() || !generation_text.ok() || !vocab_text.ok())
    return Fail("'" + dir.string() + "' is not a Whisper model folder: it needs config.json, generation_config.json "
                "and vocab.json");
  auto config = ParseJson(config_text.value(), (dir / "config.json").string());
  auto generation = ParseJson(generation_text.value(), (dir / "generation_config.json").string());
  if (!config.ok()) return Fail(config.status().message());
  if (!generation.ok()) return Fail(generation.status().message());
  auto wc = ReadConfig(config.value(), generation.value(), dir.string());
  if (!wc.ok()) return Fail(wc.status().message());
  if (auto d = fcb::transcribe::Detokenizer::FromVocabJson(vocab_text.value()); !d.ok())
    return Fail((dir / "vocab.json").string() + ": " + d.status().message());
  auto pick = [&](const char* stem) -> std::string {
    for (const char* suffix : {"_quantized.onnx", ".onnx"}) {
      const fs::path p = dir / "onnx" / (std::string(stem) + suffix);
      if (fs::exists(p)) return p.string();
    }
    return "";
  };
  const std::string encoder = pick("encoder_model"), decoder = pick("decoder_model_merged");
  if (encoder.empty() || decoder.empty())
    return Fail("'" + dir.string() + "' is not a Whisper model folder: it needs onnx/encoder_model[_quantized].onnx "
                "and onnx/decoder_model_merged[_quantized].onnx");
  if (!fs::exists(frontend))
    return Fail("no front end graph at '" + frontend.string() +
                "': write it with scripts/make_whisper_frontend.py --out DIR and pass --frontend DIR/whisper_frontend.onnx");

  const WhisperConfig& c = wc.value();
  fcb::CompileSpec spec;
  spec.targets = targets;
  spec.input_shapes["encoder:input_features"] = {1, c.mels, 2 * c.frames};
  spec.input_shapes["first:input_ids"] = {1, {1, kMaxPrefix}};
  spec.input_shapes["next:input_ids"] = {1, 1};
  for (const char* m : {"first", "next"}) spec.input_shapes[std::string(m) + ":encoder_hidden_states"] = {1, c.frames, c.d_model};
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"key", "value"}) {
      const std::string p = "past_key_values." + std::to_string(l);
      // The first call reads no past (its branch computes the cache): a dummy of length 1.
      spec.input_shapes["first:" + p + ".decoder." + kv] = {1, c.heads, 1, c.head_dim};
      spec.input_shapes["first:" + p + ".encoder." + kv] = {1, c.heads, 1, c.head_dim};
      spec.input_shapes["next:" + p + ".decoder." + kv] = {1, c.heads, {1, kMaxTokens - 1}, c.head_dim};
      spec.input_shapes["next:" + p + ".encoder." + kv] = {1, c.heads, c.frames, c.head_dim};
    }
  fcb::NpyArray flag;
  flag.dtype = static_cast<int32_t>(fcb::DType::kBool);
  flag.shape = {1};
  flag.data = {0};
  spec.input_values["first:use_cache_branch"] = flag;
  flag.data = {1};
  spec.input_values["next:use_cache_branch"] = flag;
  // Only what the loop reads stays an output: the attention maps the exports
  // also return (the encoder's six are 8 x 1500 x 1500 floats each) are not
  // written, and what only they needed is not compiled; `next` leaves out the
  // cross-attention cache, which is the same at every step (`first` makes it).
  spec.outputs = {"encoder:last_hidden_state", "first:logits", "next:logits"};
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"key", "value"}) {
      const std::string p = "present." + std::to_string(l);
      spec.outputs.push_back("first:" + p + ".decoder." + kv);
      spec.outputs.push_back("first:" + p + ".encoder." + kv);
      spec.outputs.push_back("next:" + p + ".decoder." + kv);
    }
  // The self-attention cache of `next` stays in an fcb::State of kMaxTokens
  // rows: its Concat(past, new) becomes an in-place append and the attention
  // reading it one fused step (docs/design.md section 14, form b), so a step
  // neither copies the cache in nor writes it out. `first` (no past: its
  // branch computes the cache) stays stateless; the loop loads its cache into
  // the State once.
  spec.kv_capacity = kMaxTokens;
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"key", "value"})
      spec.state["next:past_key_values." + std::to_string(l) + ".decoder." + kv] =
          "present." + std::to_string(l) + ".decoder." + kv;
  spec.attachments["vocab.json"] = vocab_text.value();
  spec.attachments["generation_config.json"] = generation_text.value();
  spec.attachments["config.json"] = config_text.value();
  const auto t0 = std::chrono::steady_clock::now();
  auto report = fcb::CompileMethods(
      {{"features", frontend.string()}, {"encoder", encoder}, {"first", decoder}, {"next", decoder}}, spec, out);
  if (!report.ok()) return Fail(report.status().message());
  for (const auto& w : report.value().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::printf("compiled %s: features, encoder, first, next for %zu target(s), %llu bytes, %.1f s\n", out.c_str(),
              targets.size(), static_cast<unsigned long long>(report.value().file_size),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

// --------------------------------------------------------------- transcribe

struct Runner {
  std::unique_ptr<fcb::Execution> ex;
  fcb::Status Set(const std::string& name, const void* data, size_t bytes, const std::vector<int64_t>& shape) {
    return ex->SetInput(name, data, bytes, shape);
  }
  size_t Output(const std::string& name) const {
    for (size_t i = 0; i < ex->info().outputs.size(); ++i)
      if (ex->info().outputs[i].name == name) return i;
    return SIZE_MAX;
  }
};

fcb::Result<Runner> Make(const std::shared_ptr<const fcb::Program>& p, const std::string& method, int threads,
                         std::shared_ptr<fcb::State> state = nullptr) {
  auto ex = fcb::Execution::Create(p, method, threads, std::move(state));
  if (!ex.ok()) return ex.TakeStatus();
  return Runner{std::move(ex).value()};
}

int Transcribe(int argc, char** argv) {
  const std::string file = argv[1], audio = argv[2];
  int threads = 1;
  std::string target = "auto", language = "en";
  bool print_tokens = false, print_times = false;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--target" && i + 1 < argc) target = argv[++i];
    else if (a == "--language" && i + 1 < argc) language = argv[++i];
    else if (a == "--tokens") print_tokens = true;
    else if (a == "--times") print_times = true;
    else return Fail("unknown argument '" + a + "'");
  }
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  const auto t_load = Clock::now();
  fcb::LoadOptions lo;
  lo.target = target;
  auto program = fcb::Program::Load(file, lo);
  if (!program.ok()) return Fail(program.status().message());
  const auto& p = program.value();
  auto attached = [&](const char* name) -> fcb::Result<std::string> {
    auto a = p->attachment(name);
    if (!a.ok()) return a.TakeStatus().Annotate("'" + file + "' was not made by fcb-transcribe compile");
    return std::string(a.value());
  };
  auto vocab = attached("vocab.json");
  auto generation_text = attached("generation_config.json");
  auto config_text = attached("config.json");
  if (!vocab.ok()) return Fail(vocab.status().message());
  if (!generation_text.ok()) return Fail(generation_text.status().message());
  if (!config_text.ok()) return Fail(config_text.status().message());
  auto config = ParseJson(config_text.value(), "attachment config.json");
  auto generation = ParseJson(generation_text.value(), "attachment generation_config.json");
  if (!config.ok() || !generation.ok()) return Fail("the attached configuration is not JSON");
  auto wc = ReadConfig(config.value(), generation.value(), file);
  if (!wc.ok()) return Fail(wc.status().message());
  const WhisperConfig& c = wc.value();
  auto lang = c.languages.find(language);
  if (lang == c.languages.end()) return Fail("language '" + language + "' is not one the model knows (e.g. en, de, fr)");
  auto detok = fcb::transcribe::Detokenizer::FromVocabJson(vocab.value(), c.eos);
  if (!detok.ok()) return Fail("attachment vocab.json: " + detok.status().message());

  for (const char* m : {"features", "encoder", "first", "next"})
    if (!p->method(m).ok()) {
      std::string have;
      for (const auto& name : p->methods()) have += (have.empty() ? "" : ", ") + name;
      return Fail("'" + file + "' was not made by fcb-transcribe compile: it has no method '" + m + "' (it has: " +
                  have + ")");
    }
  auto wav = fcb::transcribe::ReadWav(audio);
  if (!wav.ok()) return Fail(wav.status().message());
  std::vector<float> samples = std::move(wav.value().samples);
  samples.resize(kSamples, 0.f);  // Whisper reads one 30 s window, zero-padded
  const auto t_start = Clock::now();

  auto features = Make(p, "features", threads);
  auto encoder = Make(p, "encoder", threads);
  auto first = Make(p, "first", threads);
  // `next` keeps its self-attention cache in this State (compile: kv_capacity
  // and "state"): each step appends its token's keys and values in place.
  auto state = fcb::State::Create(p);
  if (!state.ok()) return Fail(state.status().message());
  // A file whose `next` takes its past as a plain input (an earlier
  // fcb-transcribe) would decode every step against the prefix alone.
  size_t held = 0;
  for (const auto& v : state.value()->variables()) held += v.name.find(".decoder.") != std::string::npos;
  if (held != static_cast<size_t>(2 * c.layers))
    return Fail("'" + file + "' keeps " + std::to_string(held) + " of next's " + std::to_string(2 * c.layers) +
                " self-attention caches in a State: it was made by an earlier fcb-transcribe compile; compile it again");
  auto next = Make(p, "next", threads, state.value());
  for (auto* r : {&features, &encoder, &first, &next})
    if (!r->ok()) return Fail(r->status().message());
  const auto t_made = Clock::now();
  // Features.
  Runner& fe = features.value();
  if (auto s = fe.ex->SetInput(fe.ex->info().inputs[0].name, samples.data(), samples.size() * 4); !s.ok())
    return Fail(s.message());
  if (auto s = fe.ex->Run(); !s.ok()) return Fail(s.message());
  const auto t_features = Clock::now();
  // Encoder.
  Runner& en = encoder.value();
  if (auto s = en.ex->SetInput(en.ex->info().inputs[0].name, fe.ex->output_data(0), fe.ex->output_bytes(0)); !s.ok())
    return Fail(s.message());
  if (auto s = en.ex->Run(); !s.ok()) return Fail(s.message());
  const size_t hidden = en.Output("last_hidden_state");
  if (hidden == SIZE_MAX) return Fail("the encoder has no output 'last_hidden_state'");
  const auto t_encoder = Clock::now();

  // Decoding: the forced prefix through `first`, then one token at a time through `next`.
  const std::vector<int64_t> prefix = {c.start, lang->second, c.transcribe, c.no_timestamps};
  const std::vector<int64_t> states = {1, c.frames, c.d_model};
  Runner& f = first.value();
  Runner& n = next.value();
  for (Runner* r : {&f, &n})
    if (auto s = r->Set("encoder_hidden_states", en.ex->output_data(hidden), en.ex->output_bytes(hidden), states); !s.ok())
      return Fail(s.message());
  if (auto s = f.Set("input_ids", prefix.data(), prefix.size() * 8, {1, static_cast<int64_t>(prefix.size())}); !s.ok())
    return Fail(s.message());
  const std::vector<float> dummy(static_cast<size_t>(c.heads * c.head_dim), 0.f);
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* part : {".decoder.", ".encoder."})
      for (const char* kv : {"key", "value"}) {
        const std::string name = "past_key_values." + std::to_string(l) + part + kv;
        if (auto s = f.Set(name, dummy.data(), dummy.size() * 4, {1, c.heads, 1, c.head_dim}); !s.ok())
          return Fail(s.message());
      }
  if (auto s = f.ex->Run(); !s.ok()) return Fail(s.message());
  const auto t_first = Clock::now();
  // The cross-attention cache the first call made is the same for every step: set once.
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"key", "value"}) {
      const std::string suffix = "." + std::to_string(l) + ".encoder." + kv;
      const size_t o = f.Output("present" + suffix);
      if (o == SIZE_MAX) return Fail("method first has no output present" + suffix);
      if (auto s = n.Set("past_key_values" + suffix, f.ex->output_data(o), f.ex->output_bytes(o), f.ex->output_shape(o));
          !s.ok())
        return Fail(s.message());
    }
  // The decoder's cache `first` made (the prefix's rows) loaded into the
  // State once: its valid length becomes the prefix's length.
  state.value()->Reset();
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"key", "value"}) {
      const std::string suffix = "." + std::to_string(l) + ".decoder." + kv;
      const size_t o = f.Output("present" + suffix);
      if (o == SIZE_MAX) return Fail("method first has no output present" + suffix);
      if (auto s = n.Set("past_key_values" + suffix, f.ex->output_data(o), f.ex->output_bytes(o), f.ex->output_shape(o));
          !s.ok())
        return Fail(s.message());
    }
  std::vector<int64_t> tokens;
  Runner* last = &f;
  while (static_cast<int64_t>(prefix.size() + tokens.size()) < kMaxTokens) {
    const size_t li = last->Output("logits");
    const std::vector<int64_t>& ls = last->ex->output_shape(li);
    const int64_t vocab_size = ls.back();
    const float* row = static_cast<const float*>(last->ex->output_data(li)) + (ls[1] - 1) * vocab_size;
    const int64_t token = std::max_element(row, row + vocab_size) - row;
    if (token == c.eos) break;
    tokens.push_back(token);
    // Only the new token goes in: the State holds the cache so far.
    if (auto s = n.Set("input_ids", &tokens.back(), 8, {1, 1}); !s.ok()) return Fail(s.message());
    if (auto s = n.ex->Run(); !s.ok()) return Fail(s.message());
    last = &n;
  }
  const auto t_done = Clock::now();
  auto text = detok.value().Decode(tokens);
  if (!text.ok()) return Fail(text.status().message());
  std::string t = text.value();
  while (!t.empty() && t.front() == ' ') t.erase(t.begin());
  std::printf("%s\n", t.c_str());
  if (print_tokens) {
    std::printf("tokens:");
    for (int64_t id : tokens) std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
  }
  if (print_times)
    std::fprintf(stderr,
                 "target %s, %d thread(s): load %.1f ms, prepare %.1f ms, features %.1f ms, encoder %.1f ms, "
                 "first %.1f ms, %zu next steps %.1f ms (%.2f ms/token), total %.1f ms\n",
                 p->target().c_str(), threads, ms(t_load, t_start), ms(t_start, t_made), ms(t_made, t_features),
                 ms(t_features, t_encoder), ms(t_encoder, t_first), tokens.empty() ? 0 : tokens.size() - 1,
                 ms(t_first, t_done), tokens.size() > 1 ? ms(t_first, t_done) / static_cast<double>(tokens.size() - 1) : 0.0,
                 ms(t_start, t_done));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "compile") return Compile(argc, argv);
  if (argc < 3 || std::string(argv[1]).rfind("-", 0) == 0) {
    std::fprintf(stderr,
                 "usage: fcb-transcribe compile MODEL_DIR OUT.fcb [--target T]... [--frontend FRONTEND.onnx]\n"
                 "       fcb-transcribe FILE.fcb AUDIO.wav [--threads N] [--target T] [--language en] [--tokens] "
                 "[--times]\n");
    return 2;
  }
  return Transcribe(argc, argv);
}
