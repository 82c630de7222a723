// Speech to text from one .fcb (tools/transcribe): `fcb-transcribe compile`
// turns the Whisper base folder (transformers.js's int8 ONNX files) and the
// project's log-mel front end into one file with four methods for every
// target and the tokenizer attached; `fcb-transcribe FILE CLIP.wav --target T`
// then transcribes each espeak-ng clip (scripts/make_speech_clips.py) on every
// x86 target this host runs, and its token ids equal ONNX Runtime's for the
// same loop on the same ONNX files (tools/oracle/ort_transcribe.js). Bad
// input (not a Whisper folder; a WAV that is empty, truncated, compressed, of
// an unsupported depth, rate or channel count, or longer than 30 s -- refused,
// not chunked; a file without the methods or attachments) is refused with a
// clear error naming the file and writes nothing; 24-bit, float and stereo
// encodings of a clip give the same tokens, another rate is resampled.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <sstream>

#include "fcb/fcb.h"
#include "ops/names.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::RunCommand;
using testing::TempDir;
using testing::TestDataDir;

std::string Tool(const std::string& args) { return std::string(FCB_TRANSCRIBE_PATH) + " " + args; }

std::string Tokens(const std::string& out) {
  std::istringstream s(out);
  std::string line;
  while (std::getline(s, line))
    if (line.rfind("tokens:", 0) == 0) {
      line = line.substr(7);
      while (!line.empty() && line.front() == ' ') line.erase(line.begin());
      return line;
    }
  return "(no tokens line)";
}

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

class Transcribe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = TestDataDir();
    model_ = new std::string(dir + "/whisper-base");
    tmp_ = new TempDir();
    file_ = new std::string(tmp_->File("whisper.fcb"));
    if (!std::filesystem::exists(*model_ + "/config.json")) return;
    compile_ = new testing::CommandResult(RunCommand(Tool("compile " + *model_ + " " + *file_)));
  }
  static void TearDownTestSuite() {
    delete compile_;
    delete tmp_;
    delete file_;
    delete model_;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(*model_ + "/config.json"))
        << *model_ << " is missing: run scripts/prepare_testdata.sh";
    ASSERT_NE(compile_, nullptr);
    ASSERT_EQ(compile_->exit_code, 0) << compile_->err;
  }
  static std::string* model_;
  static std::string* file_;
  static TempDir* tmp_;
  static testing::CommandResult* compile_;
};
std::string* Transcribe::model_ = nullptr;
std::string* Transcribe::file_ = nullptr;
TempDir* Transcribe::tmp_ = nullptr;
testing::CommandResult* Transcribe::compile_ = nullptr;

TEST_F(Transcribe, OneFileHoldsEveryMethodAndTheTokenizer) {
  auto p = Program::Load(*file_);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p.value()->methods(), (std::vector<std::string>{"encoder", "features", "first", "next"}));
  EXPECT_EQ(p.value()->targets_in_file().size(), 8u);
  auto vocab = p.value()->attachment("vocab.json");
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_NE(vocab.value().find("\"<|endoftext|>\""), std::string::npos);
  // The decoder's second method reads a past of 1..223 tokens.
  auto next = p.value()->method("next");
  ASSERT_TRUE(next.ok());
  bool ranged = false;
  for (const auto& in : next.value().inputs)
    if (in.name == "past_key_values.0.decoder.key") ranged = in.dynamic() && in.min_shape[2] == 1 && in.shape[2] == 223;
  EXPECT_TRUE(ranged);
  // Only the outputs the loop reads (the spec's "outputs"): no attention maps;
  // `next` leaves out the cross-attention cache `first` made.
  auto names = [&](const std::string& method) {
    std::vector<std::string> v;
    auto m = p.value()->method(method);
    EXPECT_TRUE(m.ok()) << method;
    if (m.ok())
      for (const auto& o : m.value().outputs) v.push_back(o.name);
    return v;
  };
  EXPECT_EQ(names("encoder"), std::vector<std::string>{"last_hidden_state"});
  std::vector<std::string> first = {"logits"}, following = {"logits"};
  for (int l = 0; l < 6; ++l)
    for (const char* part : {"decoder", "encoder"})
      for (const char* kv : {"key", "value"}) {
        const std::string name = "present." + std::to_string(l) + "." + part + "." + kv;
        first.push_back(name);
        if (std::string(part) == "decoder") following.push_back(name);
      }
  EXPECT_EQ(names("first"), first);
  EXPECT_EQ(names("next"), following);
}

// `next` keeps the decoder's self-attention cache in an fcb::State (kv_capacity
// 224): a step appends one row per head in place and reads the cache in the
// fused attention, so no step writes a cache-sized tensor (RunProfiled's
// bytes_written; a 201-row cache is 400 KiB, more than the logits), and the
// valid length grows by one.
TEST_F(Transcribe, ANextStepWritesNoCacheSizedTensor) {
  constexpr int64_t kLayers = 6, kHeads = 8, kHead = 64, kFrames = 1500, kPast = 200;
  testing::ForEachRunnableTarget(*file_, [&](const std::string& target, const std::shared_ptr<const Program>& p) {
    if (target.rfind("x86-64", 0) != 0 && target != "generic") return;
    auto state = State::Create(p);
    ASSERT_TRUE(state.ok()) << state.status().message();
    auto next = Execution::Create(p, "next", 1, state.value());
    ASSERT_TRUE(next.ok()) << next.status().message();
    Execution& e = *next.value();
    std::vector<float> hidden(static_cast<size_t>(kFrames * kHeads * kHead), 0.25f);
    ASSERT_TRUE(e.SetInput("encoder_hidden_states", hidden.data(), hidden.size() * 4, {1, kFrames, kHeads * kHead}).ok());
    std::vector<float> cross(static_cast<size_t>(kHeads * kFrames * kHead));
    for (size_t i = 0; i < cross.size(); ++i) cross[i] = static_cast<float>(i % 13) * 0.01f;
    std::vector<float> past(static_cast<size_t>(kHeads * kPast * kHead));
    for (size_t i = 0; i < past.size(); ++i) past[i] = static_cast<float>(i % 7) * 0.02f;
    for (int64_t l = 0; l < kLayers; ++l)
      for (const char* kv : {"key", "value"}) {
        const std::string n = "past_key_values." + std::to_string(l);
        ASSERT_TRUE(e.SetInput(n + ".encoder." + kv, cross.data(), cross.size() * 4, {1, kHeads, kFrames, kHead}).ok());
        auto st = e.SetInput(n + ".decoder." + kv, past.data(), past.size() * 4, {1, kHeads, kPast, kHead});
        ASSERT_TRUE(st.ok()) << st.message();
      }
    auto len = state.value()->valid_length("past_key_values.0.decoder.key");
    ASSERT_TRUE(len.ok()) << len.status().message();
    EXPECT_EQ(len.value(), kPast);
    const int64_t token = 440;
    ASSERT_TRUE(e.SetInput("input_ids", &token, 8, {1, 1}).ok());
    std::vector<StepTiming> steps;
    auto st = e.RunProfiled(&steps);
    ASSERT_TRUE(st.ok()) << st.message();
    const uint64_t cache_bytes = static_cast<uint64_t>(kHeads * (kPast + 1) * kHead * 4);
    int appends = 0, attentions = 0;
    for (const auto& s : steps) {
      EXPECT_NE(s.op, "Softmax") << s.node;
      EXPECT_LT(s.bytes_written, cache_bytes) << s.op << " " << s.node;
      if (s.op == ops::opname::KvAppend) {
        ++appends;
        EXPECT_EQ(s.bytes_written, static_cast<uint64_t>(kHeads * kHead * 4)) << s.node;
      }
      if (s.op == ops::opname::AttentionFused) ++attentions;
    }
    EXPECT_EQ(appends, 2 * kLayers);
    EXPECT_GE(attentions, kLayers);  // the self-attentions (the cross-attentions too, dense)
    len = state.value()->valid_length("past_key_values.0.decoder.key");
    ASSERT_TRUE(len.ok());
    EXPECT_EQ(len.value(), kPast + 1);
  });
}

// Clips whose ONNX Runtime tokens move when the samples are scaled by
// 1 + 1e-6 or with 1e-6 of added noise are no test of fcb (the int8 encoder amplifies rounding):
// scripts/prepare_testdata.sh records them as NAME.unstable, with ONNX
// Runtime's three token lists, and they are left out here.
TEST_F(Transcribe, EveryStableClipGivesOnnxRuntimesTokensOnEveryX86Target) {
  const std::string dir = TestDataDir();
  int clips = 0, unstable = 0;
  for (int i = 0;; ++i) {
    const std::string name = "speech_" + std::to_string(i);
    const std::string wav = dir + "/speech/" + name + ".wav";
    if (!std::filesystem::exists(wav)) break;
    if (std::filesystem::exists(dir + "/speech.ref/" + name + ".unstable")) {
      ++unstable;
      continue;
    }
    const std::string want = ReadLine(dir + "/speech.ref/" + name + ".tokens");
    ASSERT_FALSE(want.empty()) << "no ONNX Runtime tokens for " << wav << ": run scripts/prepare_testdata.sh";
    for (const std::string& target : testing::RunnableTargetNames(testing::ApiTargets())) {
      if (target.rfind("x86-64", 0) != 0 && target != "generic") continue;
      SCOPED_TRACE(wav + " on " + target);
      auto r = RunCommand(Tool(*file_ + " " + wav + " --tokens --target " + target));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(Tokens(r.out), want) << "transcript: " << r.out;
    }
    ++clips;
  }
  EXPECT_GE(clips, 5) << unstable << " clips left out as unstable under ONNX Runtime itself";
}

// A RIFF/WAVE file: a 16-byte fmt chunk (format tag, channels, rate, bits)
// and a data chunk holding `data`, whose size field says `declared` bytes
// (SIZE_MAX: the size of `data`).
std::string Wav(int tag, int channels, int rate, int bits, const std::string& data, size_t declared = SIZE_MAX) {
  auto le = [](uint64_t v, int n) {
    std::string b;
    for (int i = 0; i < n; ++i) b += static_cast<char>((v >> (8 * i)) & 0xFF);
    return b;
  };
  if (declared == SIZE_MAX) declared = data.size();
  const int frame = channels * bits / 8;
  return "RIFF" + le(36 + declared, 4) + "WAVE" + "fmt " + le(16, 4) + le(tag, 2) + le(channels, 2) + le(rate, 4) +
         le(static_cast<uint64_t>(rate) * frame, 4) + le(frame, 2) + le(bits, 2) + "data" + le(declared, 4) + data;
}

// speech_N.wav's 16-bit mono samples (Python's wave module writes the canonical 44-byte header).
std::vector<int16_t> Samples(const std::string& wav_path) {
  std::ifstream in(wav_path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(bytes.size(), 44u);
  EXPECT_EQ(bytes.substr(36, 4), "data") << wav_path << " has no canonical header";
  std::vector<int16_t> s((bytes.size() - 44) / 2);
  std::memcpy(s.data(), bytes.data() + 44, s.size() * 2);
  return s;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Every refusal happens before any method runs (no transcription here): exit
// code 1, one error line naming the file and what is wrong, nothing written.
TEST_F(Transcribe, BadInputIsRefusedClearly) {
  TempDir tmp;
  auto refused = [&](const std::string& args, const std::vector<std::string>& phrases) {
    SCOPED_TRACE(args);
    auto r = RunCommand(Tool(args));
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    for (const auto& p : phrases) EXPECT_NE(r.err.find(p), std::string::npos) << "want \"" << p << "\" in: " << r.err;
  };
  auto nothing_written = [&] {
    EXPECT_FALSE(std::filesystem::exists(tmp.File("x.fcb")));
    for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  };

  // ---- fcb-transcribe compile: a folder that is not Whisper (each refused before compiling; nothing written).
  const std::string model = *model_;
  const std::string nw = tmp.File("notwhisper");
  std::filesystem::create_directories(nw);
  refused("compile " + nw + " " + tmp.File("x.fcb"), {nw, "is not a Whisper model folder", "config.json"});
  nothing_written();
  Write(nw + "/config.json", R"({"model_type": "bert"})");
  Write(nw + "/generation_config.json", "{}");
  Write(nw + "/vocab.json", "{}");
  refused("compile " + nw + " " + tmp.File("x.fcb"), {nw, "model_type is not \"whisper\""});
  nothing_written();
  Write(nw + "/config.json", "not json");
  refused("compile " + nw + " " + tmp.File("x.fcb"), {nw + "/config.json", "is not a JSON object"});
  nothing_written();
  // Whisper's configuration and vocabulary but no ONNX files.
  for (const char* f : {"config.json", "generation_config.json", "vocab.json"})
    std::filesystem::copy_file(model + "/" + f, nw + "/" + f, std::filesystem::copy_options::overwrite_existing);
  refused("compile " + nw + " " + tmp.File("x.fcb"), {nw, "onnx/encoder_model[_quantized].onnx"});
  nothing_written();
  // The ONNX files but no front end graph.
  std::filesystem::create_directories(nw + "/onnx");
  for (const char* f : {"onnx/encoder_model_quantized.onnx", "onnx/decoder_model_merged_quantized.onnx"})
    std::filesystem::create_symlink(model + "/" + f, nw + "/" + f);
  refused("compile " + nw + " " + tmp.File("x.fcb"), {"no front end graph at '" + nw + "/whisper_frontend.onnx'"});
  nothing_written();
  // An ONNX file that is not a model: the compile fails, and no partial file is left.
  Write(tmp.File("frontend.onnx"), "not a model");
  refused("compile " + nw + " " + tmp.File("x.fcb") + " --target generic --frontend " + tmp.File("frontend.onnx"),
          {"frontend.onnx"});
  nothing_written();
  refused("compile " + tmp.File("missing") + " " + tmp.File("x.fcb"), {tmp.File("missing"), "is not a folder"});
  nothing_written();

  // ---- audio: each error names the WAV file and what is wrong.
  const std::string clip = TestDataDir() + "/speech/speech_1.wav";
  const std::vector<int16_t> pcm = Samples(clip);
  const std::string pcm_bytes(reinterpret_cast<const char*>(pcm.data()), pcm.size() * 2);
  auto wav = [&](const std::string& name, const std::string& bytes) {
    Write(tmp.File(name), bytes);
    return *file_ + " " + tmp.File(name);
  };
  refused(wav("text.wav", "hello, not audio"), {tmp.File("text.wav"), "not a RIFF file"});
  refused(wav("empty.wav", ""), {tmp.File("empty.wav"), "empty"});
  // Cut inside the header, and a data chunk that declares more bytes than the file holds.
  refused(wav("cut.wav", Wav(1, 1, 16000, 16, pcm_bytes).substr(0, 30)),
          {tmp.File("cut.wav"), "truncated WAV: chunk 'fmt '"});
  refused(wav("short.wav", Wav(1, 1, 16000, 16, pcm_bytes.substr(0, 1000), pcm_bytes.size())),
          {tmp.File("short.wav"), "truncated WAV: chunk 'data' at byte offset 36 declares " +
                                      std::to_string(pcm_bytes.size()) + " bytes, only 1000 remain"});
  refused(wav("nodata.wav", Wav(1, 1, 16000, 16, "")), {tmp.File("nodata.wav"), "no samples"});
  // Not PCM or float: compressed format tags.
  refused(wav("alaw.wav", Wav(6, 1, 8000, 8, std::string(800, 'x'))), {tmp.File("alaw.wav"), "A-law", "16-bit PCM"});
  refused(wav("mp3.wav", Wav(0x55, 1, 16000, 16, pcm_bytes)), {tmp.File("mp3.wav"), "MPEG layer 3"});
  refused(wav("adpcm.wav", Wav(2, 1, 16000, 4, pcm_bytes)), {tmp.File("adpcm.wav"), "MS ADPCM"});
  // Bit depths and rates that are neither converted nor resampled.
  refused(wav("pcm12.wav", Wav(1, 1, 16000, 12, pcm_bytes)), {tmp.File("pcm12.wav"), "12-bit PCM is not supported"});
  refused(wav("float16.wav", Wav(3, 1, 16000, 16, pcm_bytes)),
          {tmp.File("float16.wav"), "16-bit IEEE float is not supported"});
  refused(wav("rate500.wav", Wav(1, 1, 500, 16, pcm_bytes)), {tmp.File("rate500.wav"), "sample rate 500 Hz"});
  refused(wav("rate1M.wav", Wav(1, 1, 1000000, 16, pcm_bytes)), {tmp.File("rate1M.wav"), "sample rate 1000000 Hz"});
  refused(wav("ch0.wav", Wav(1, 0, 16000, 16, pcm_bytes)), {tmp.File("ch0.wav"), "0 channels"});
  // Longer than one 30 s window: refused, not chunked (the message gives the length).
  refused(wav("long.wav", Wav(1, 1, 16000, 16, std::string(2 * 16000 * 31, '\0'))),
          {tmp.File("long.wav"), "the audio is 31 s long; at most 30 s is accepted"});
  refused(wav("long44k.wav", Wav(1, 2, 44100, 16, std::string(4 * 44100 * 31, '\0'))),
          {tmp.File("long44k.wav"), "the audio is 31 s long"});
  refused(*file_ + " " + tmp.File("absent.wav"), {"cannot open " + tmp.File("absent.wav")});

  // ---- a .fcb without what fcb-transcribe compile attaches.
  const std::string demo = std::string(FCB_SOURCE_DIR) + "/models/demo_cnn.onnx";
  const std::string cfg = model + "/config.json", gen = model + "/generation_config.json";
  auto r = RunCommand(std::string(FCB_CLI_PATH) + " compile " + demo + " -o " + tmp.File("none.fcb") +
                      " --target generic --input-shape input=1x3x64x64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  refused(tmp.File("none.fcb") + " " + clip, {tmp.File("none.fcb"), "vocab.json", "was not made by fcb-transcribe compile"});
  // Every attachment but the vocabulary, then every one but the generation settings.
  r = RunCommand(std::string(FCB_CLI_PATH) + " compile " + demo + " -o " + tmp.File("novocab.fcb") +
                 " --target generic --input-shape input=1x3x64x64 --attach config.json=" + cfg +
                 " --attach generation_config.json=" + gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  refused(tmp.File("novocab.fcb") + " " + clip,
          {tmp.File("novocab.fcb"), "vocab.json", "was not made by fcb-transcribe compile"});
  r = RunCommand(std::string(FCB_CLI_PATH) + " compile " + demo + " -o " + tmp.File("nogen.fcb") +
                 " --target generic --input-shape input=1x3x64x64 --attach config.json=" + cfg +
                 " --attach vocab.json=" + model + "/vocab.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  refused(tmp.File("nogen.fcb") + " " + clip,
          {tmp.File("nogen.fcb"), "generation_config.json", "was not made by fcb-transcribe compile"});
  // Whisper's attachments on a file without Whisper's methods.
  r = RunCommand(std::string(FCB_CLI_PATH) + " compile " + demo + " -o " + tmp.File("nomethods.fcb") +
                 " --target generic --input-shape input=1x3x64x64 --attach config.json=" + cfg +
                 " --attach generation_config.json=" + gen + " --attach vocab.json=" + model + "/vocab.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  refused(tmp.File("nomethods.fcb") + " " + clip, {tmp.File("nomethods.fcb"), "features"});
  // Not a .fcb at all.
  refused(clip + " " + clip, {clip});
}

// Other encodings of the same samples are converted to exactly the same
// 16 kHz mono float audio (24-bit PCM: the 16-bit value shifted; float:
// value / 32768; stereo: both channels equal), so the tokens stay ONNX
// Runtime's; another rate is resampled and transcribed, not refused.
TEST_F(Transcribe, OtherPcmLayoutsAreConverted) {
  TempDir tmp;
  const std::string clip = TestDataDir() + "/speech/speech_1.wav";
  ASSERT_FALSE(std::filesystem::exists(TestDataDir() + "/speech.ref/speech_1.unstable"));
  const std::string want = ReadLine(TestDataDir() + "/speech.ref/speech_1.tokens");
  ASSERT_FALSE(want.empty());
  const std::vector<int16_t> pcm = Samples(clip);
  std::string f32, s24, stereo;
  for (int16_t v : pcm) {
    const float f = static_cast<float>(v) / 32768.f;
    f32.append(reinterpret_cast<const char*>(&f), 4);
    const int32_t w = static_cast<int32_t>(v) * 256;
    s24.append(reinterpret_cast<const char*>(&w), 3);
    stereo.append(reinterpret_cast<const char*>(&v), 2);
    stereo.append(reinterpret_cast<const char*>(&v), 2);
  }
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"float32.wav", Wav(3, 1, 16000, 32, f32)},
           {"pcm24.wav", Wav(1, 1, 16000, 24, s24)},
           {"stereo.wav", Wav(1, 2, 16000, 16, stereo)}}) {
    SCOPED_TRACE(name);
    Write(tmp.File(name), bytes);
    auto r = RunCommand(Tool(*file_ + " " + tmp.File(name) + " --tokens"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Tokens(r.out), want) << r.out;
  }
  // The clip declared as 8 kHz (twice as long, half the pitch): resampled to 16 kHz and transcribed.
  Write(tmp.File("rate8k.wav"),
        Wav(1, 1, 8000, 16, std::string(reinterpret_cast<const char*>(pcm.data()), pcm.size() * 2)));
  auto r = RunCommand(Tool(*file_ + " " + tmp.File("rate8k.wav") + " --tokens"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Tokens(r.out), "(no tokens line)") << r.out;
}

}  // namespace
}  // namespace fcb
