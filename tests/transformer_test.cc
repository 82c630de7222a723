// The tiny decoder-only transformer (examples/transformer): a prefill and a
// decode method exported from one PyTorch module, compiled into one .fcb for
// every target. The weights are stored once, and on every target the greedy
// tokens and the logits they came from match ONNX Runtime running the same
// two ONNX files (tools/oracle/ort_generate.js, via prepare_testdata.sh).
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "../examples/transformer/greedy.h"
#include "fcb/npy.h"
#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

// The exported model's sizes (export_tiny_decoder.py).
constexpr int64_t kVocab = 96, kDModel = 48, kLayers = 2, kMaxCtx = 32;

// Parameters of the PyTorch module: embeddings, per block two LayerNorms, the
// QKV, output and two MLP projections with biases, the final LayerNorm, the head.
constexpr int64_t kParams = kVocab * kDModel + kMaxCtx * kDModel +
                            kLayers * (4 * kDModel + kDModel * 3 * kDModel + 3 * kDModel + kDModel * kDModel +
                                       kDModel + kDModel * 4 * kDModel + 4 * kDModel + 4 * kDModel * kDModel +
                                       kDModel) +
                            2 * kDModel + kDModel * kVocab;

class TransformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDataDir();
    for (const char* f : {"tiny_decoder.prefill.onnx", "tiny_decoder.decode.onnx", "tiny_decoder.prompt.npy",
                          "tiny_decoder.ref/tokens.npy", "tiny_decoder.ref/logits.npy"})
      ASSERT_TRUE(testing::FileExists(dir_ + "/" + f)) << dir_ << "/" << f << " is missing: run scripts/prepare_testdata.sh";
    fcb_ = tmp_.File("tiny_decoder.fcb");
    CompileSpec spec;
    spec.targets = {"all"};
    auto r = CompileMethods({{"prefill", dir_ + "/tiny_decoder.prefill.onnx"},
                             {"decode", dir_ + "/tiny_decoder.decode.onnx"}},
                            spec, fcb_);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }

  std::string dir_, fcb_;
  TempDir tmp_;
};

TEST_F(TransformerTest, WeightsAreHeldOnce) {
  auto r = testing::RunCommand(testing::CliPath() + " inspect --json " + fcb_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["targets"].size(), ListTargets().size());
  ASSERT_EQ(j["contexts"].size(), 2 * ListTargets().size());
  const uint64_t params = kParams * sizeof(float);
  const uint64_t pool = j["weight_pool"]["bytes"];
  // Eight contexts use the parameters; the pool holds them once, plus a few
  // small constants (masks, positions, cache padding) of each method.
  EXPECT_GE(pool, params);
  EXPECT_LT(pool, params + params / 20) << "the pool should hold the parameters once";
  for (const auto& [method, m] : j["per_method"].items()) {
    SCOPED_TRACE(method);
    EXPECT_GE(m["weight_bytes_referenced"].get<uint64_t>(), params) << "each method uses every parameter";
    EXPECT_LT(m["weight_bytes_unique"].get<uint64_t>(), params / 20) << "the parameters are shared by both methods";
  }
  for (const auto& [target, t] : j["per_target"].items()) {
    SCOPED_TRACE(target);
    EXPECT_EQ(t["weight_bytes_unique"].get<uint64_t>(), 0u) << "every target shares every byte";
  }
}

TEST_F(TransformerTest, TokensAndLogitsMatchOnnxRuntimeOnEveryTarget) {
  auto prompt = ReadNpy(dir_ + "/tiny_decoder.prompt.npy");
  auto want_tokens = ReadNpy(dir_ + "/tiny_decoder.ref/tokens.npy");
  auto want_logits = ReadNpy(dir_ + "/tiny_decoder.ref/logits.npy");
  ASSERT_TRUE(prompt.ok() && want_tokens.ok() && want_logits.ok());
  std::vector<int64_t> p(prompt.value().data.size() / 8), tokens(want_tokens.value().data.size() / 8);
  std::memcpy(p.data(), prompt.value().data.data(), p.size() * 8);
  std::memcpy(tokens.data(), want_tokens.value().data.data(), tokens.size() * 8);
  const int n = static_cast<int>(tokens.size());
  ASSERT_EQ(want_logits.value().shape, (std::vector<int64_t>{n, kVocab}));
  const float* ref = reinterpret_cast<const float*>(want_logits.value().data.data());

  int ran = 0;
  for (const auto& t : ListTargets()) {
    if (!t.host_can_run) continue;
    SCOPED_TRACE(t.name);
    LoadOptions lo;
    lo.target = t.name;
    auto program = Program::Load(fcb_, lo);
    ASSERT_TRUE(program.ok()) << program.status().message();
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      auto g = example::GreedyGenerate(program.value(), p, n, threads);
      ASSERT_TRUE(g.ok()) << g.status().message();
      EXPECT_EQ(g.value().tokens, tokens);
      ASSERT_EQ(g.value().logits.size(), static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        std::vector<float> want(ref + i * kVocab, ref + (i + 1) * kVocab);
        auto d = testing::Compare(g.value().logits[i], want);
        EXPECT_LT(d.rel_l2, 1e-5) << "token " << i;
        EXPECT_LT(d.max_abs, 1e-4) << "token " << i;
      }
    }
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

// The example program prints the same tokens.
TEST_F(TransformerTest, ExampleProgramGeneratesTheReferenceTokens) {
  auto prompt = ReadNpy(dir_ + "/tiny_decoder.prompt.npy");
  auto want_tokens = ReadNpy(dir_ + "/tiny_decoder.ref/tokens.npy");
  ASSERT_TRUE(prompt.ok() && want_tokens.ok());
  std::string cmd = std::string(FCB_BINARY_DIR) + "/examples/tiny_decoder_generate " + fcb_ + " --tokens 16";
  std::string want = "tokens:";
  for (size_t i = 0; i < prompt.value().data.size() / 8; ++i) {
    int64_t v;
    std::memcpy(&v, prompt.value().data.data() + 8 * i, 8);
    cmd += " " + std::to_string(v);
  }
  for (size_t i = 0; i < want_tokens.value().data.size() / 8; ++i) {
    int64_t v;
    std::memcpy(&v, want_tokens.value().data.data() + 8 * i, 8);
    want += " " + std::to_string(v);
  }
  auto r = testing::RunCommand(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(want + "\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace fcb
