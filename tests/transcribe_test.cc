// Speech to text from one .fcb (tools/transcribe): `fcb-transcribe compile`
// turns the Whisper base folder (transformers.js's int8 ONNX files) and the
// project's log-mel front end into one file with four methods for every
// target and the tokenizer attached; `fcb-transcribe FILE CLIP.wav --target T`
// then transcribes each espeak-ng clip (scripts/make_speech_clips.py) on every
// x86 target this host runs, and its token ids equal ONNX Runtime's for the
// same loop on the same ONNX files (tools/oracle/ort_transcribe.js). Bad
// input (not a Whisper folder, a WAV that is not audio, a file without the
// attachments) is refused with a clear error and writes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fcb/fcb.h"
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

TEST_F(Transcribe, BadInputIsRefusedClearly) {
  TempDir tmp;
  // Not a Whisper folder: nothing written.
  std::filesystem::create_directories(tmp.File("notwhisper"));
  std::ofstream(tmp.File("notwhisper/config.json")) << R"({"model_type": "bert"})";
  std::ofstream(tmp.File("notwhisper/generation_config.json")) << "{}";
  std::ofstream(tmp.File("notwhisper/vocab.json")) << "{}";
  auto r = RunCommand(Tool("compile " + tmp.File("notwhisper") + " " + tmp.File("x.fcb")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model_type is not \"whisper\""), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.File("x.fcb")));
  r = RunCommand(Tool("compile " + tmp.File("missing") + " " + tmp.File("x.fcb")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;
  // Audio that is not a WAV, an empty one, a truncated one.
  std::ofstream(tmp.File("text.wav")) << "hello, not audio";
  r = RunCommand(Tool(*file_ + " " + tmp.File("text.wav")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("RIFF"), std::string::npos) << r.err;
  std::ofstream(tmp.File("empty.wav")).close();
  r = RunCommand(Tool(*file_ + " " + tmp.File("empty.wav")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.err.empty());
  {
    std::ifstream in(TestDataDir() + "/speech/speech_0.wav", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(tmp.File("cut.wav"), std::ios::binary) << bytes.substr(0, 30);
  }
  r = RunCommand(Tool(*file_ + " " + tmp.File("cut.wav")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.err.empty());
  // A .fcb without the tokenizer attached.
  r = RunCommand(std::string(FCB_CLI_PATH) + " compile " + FCB_SOURCE_DIR + "/models/demo_cnn.onnx -o " +
                 tmp.File("demo.fcb") + " --target generic --input-shape input=1x3x64x64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(Tool(tmp.File("demo.fcb") + " " + TestDataDir() + "/speech/speech_0.wav"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("was not made by fcb-transcribe compile"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fcb
