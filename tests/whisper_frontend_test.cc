// Whisper's log-mel front end (scripts/make_whisper_frontend.py: reflect pad,
// STFT with a periodic Hann window, power, Slaney mel filters, log10, clamp to
// max - 8, (x + 4) / 4) compiled into one .fcb for every target: each target
// the host runs matches the script's float64 numpy reference within 1e-5
// relative L2 on every test signal (a seeded noise, a chirp followed by
// silence), at 1 and 2 threads.
//
// The same signals' ONNX Runtime outputs are checked against the numpy
// reference too: within 1e-5 on the noise; on the chirp ONNX Runtime's float32
// STFT (n_fft 400) is off by about 2.4e-4 relative L2 (its error, about 1e-5 of
// the peak amplitude, shows in the bins 60 to 80 dB below the tone that the
// max - 8 clamp keeps; a plain float32 DFT is within 2e-6), so that bound is 1e-3.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "fcb/fcb.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

std::vector<float> Floats(const NpyArray& a) {
  std::vector<float> v(a.data.size() / 4);
  std::memcpy(v.data(), a.data.data(), v.size() * 4);
  return v;
}

NpyArray Load(const std::string& path) {
  auto a = ReadNpy(path);
  EXPECT_TRUE(a.ok()) << a.status().message() << " (run scripts/prepare_testdata.sh)";
  return a.ok() ? std::move(a).value() : NpyArray{};
}

const char* const kCases[] = {"noise", "chirp"};

class WhisperFrontend : public fcb::testing::PerTarget {};

TEST_P(WhisperFrontend, MatchesTheNumpyReference) {
  const std::string dir = TestDataDir();
  const std::string model = dir + "/whisper_frontend.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  const std::string out = tmp.File("frontend.fcb");
  CompileSpec spec;
  spec.targets = {target_name()};
  auto report = Compile(model, spec, out);
  ASSERT_TRUE(report.ok()) << report.status().message();
  LoadOptions lo;
  lo.target = target_name();
  auto program = Program::Load(out, lo);
  ASSERT_TRUE(program.ok()) << program.status().message();
  for (const char* c : kCases) {
    SCOPED_TRACE(c);
    const NpyArray audio = Load(dir + "/whisper_frontend.feeds/" + c + "/audio.npy");
    const NpyArray want = Load(dir + "/whisper_frontend.numpy_ref/" + c + "/input_features.npy");
    ASSERT_EQ(audio.shape, (std::vector<int64_t>{480000}));
    ASSERT_EQ(want.shape, (std::vector<int64_t>{1, 80, 3000}));
    for (int threads : {1, 2}) {
      auto ex = Execution::Create(program.value(), "main", threads);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      Status s = ex.value()->SetInput("audio", audio.data.data(), audio.data.size());
      ASSERT_TRUE(s.ok()) << s.message();
      s = ex.value()->Run();
      ASSERT_TRUE(s.ok()) << s.message();
      const TensorSpec& o = ex.value()->info().outputs.at(0);
      ASSERT_EQ(o.name, "input_features");
      ASSERT_EQ(o.shape, want.shape);
      const float* p = static_cast<const float*>(ex.value()->output_data(0));
      auto d = testing::Compare(std::vector<float>(p, p + o.bytes() / 4), Floats(want));
      EXPECT_LE(d.rel_l2, 1e-5) << c << " on " << target_name() << ", " << threads << " threads (max abs "
                                << d.max_abs << ")";
    }
  }
}

FCB_INSTANTIATE_PER_TARGET(WhisperFrontend, fcb::testing::ApiTargets());

// The graph itself, as ONNX Runtime runs it, against the same reference.
TEST(WhisperFrontendOrt, OnnxRuntimeMatchesTheNumpyReference) {
  const std::string dir = TestDataDir();
  const std::pair<const char*, double> bounds[] = {{"noise", 1e-5}, {"chirp", 1e-3}};
  for (const auto& [c, bound] : bounds) {
    const NpyArray ort = Load(dir + "/whisper_frontend.ort_ref/" + c + "/input_features.npy");
    const NpyArray want = Load(dir + "/whisper_frontend.numpy_ref/" + c + "/input_features.npy");
    ASSERT_EQ(ort.shape, want.shape) << c;
    ASSERT_FALSE(want.data.empty()) << c;
    auto d = testing::Compare(Floats(ort), Floats(want));
    EXPECT_LE(d.rel_l2, bound) << c << " (max abs " << d.max_abs << ")";
  }
}

}  // namespace
}  // namespace fcb
