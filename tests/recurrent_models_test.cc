// Recurrent layers exported by PyTorch (scripts/export_recurrent_models.py):
// a 2-layer bidirectional LSTM followed by a unidirectional one, a batch-first
// GRU followed by a bidirectional
// one, a bidirectional ReLU RNN. Each compiles into one file for every
// target; on every target the host runs, a 10-call stream (state outputs fed
// back as the next call's state inputs, a new input chunk per call) matches
// ONNX Runtime running the same stream (tools/oracle/ort_stream.js), call by
// call, within 1e-4 relative L2.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

std::vector<float> Floats(const NpyArray& a, size_t begin = 0, size_t count = SIZE_MAX) {
  const size_t n = a.data.size() / 4;
  count = std::min(count, n - begin);
  std::vector<float> v(count);
  std::memcpy(v.data(), a.data.data() + begin * 4, count * 4);
  return v;
}

class RecurrentStream : public ::testing::TestWithParam<const char*> {};

TEST_P(RecurrentStream, EveryTargetMatchesOnnxRuntimeCallByCall) {
  const std::string name = GetParam();
  const std::string dir = TestDataDir(), stream = dir + "/" + name + ".stream";
  std::ifstream jf(stream + "/stream.json");
  ASSERT_TRUE(jf) << stream << " is missing: run scripts/prepare_testdata.sh";
  const auto spec_json = nlohmann::json::parse(jf);
  const int calls = spec_json["calls"].get<int>();
  ASSERT_GE(calls, 2);
  auto chunks = ReadNpy(stream + "/input.npy");
  ASSERT_TRUE(chunks.ok()) << chunks.status().message();
  std::map<std::string, NpyArray> first_state;
  for (const auto& [in, file] : spec_json["state"].items()) {
    auto a = ReadNpy(stream + "/" + file.get<std::string>());
    ASSERT_TRUE(a.ok()) << a.status().message();
    first_state[in] = a.value();
  }
  std::map<std::string, std::string> feed;  // output -> state input
  for (const auto& [out, in] : spec_json["feed"].items()) feed[out] = in.get<std::string>();

  TempDir tmp;
  const std::string file = tmp.File(name + ".fcb");
  CompileSpec spec;
  spec.targets = {"all"};
  auto report = Compile(dir + "/" + name + ".onnx", spec, file);
  ASSERT_TRUE(report.ok()) << report.status().message();

  testing::ForEachRunnableTarget(
      file, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    auto ex = Execution::Create(program, "main", 1);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    const MethodInfo& info = ex.value()->info();
    std::map<std::string, std::vector<uint8_t>> state;
    for (const auto& [in, a] : first_state) state[in] = a.data;
    const size_t chunk_bytes = chunks.value().data.size() / calls;
    for (int c = 0; c < calls; ++c) {
      SCOPED_TRACE("call " + std::to_string(c));
      ASSERT_TRUE(ex.value()->SetInput("input", chunks.value().data.data() + c * chunk_bytes, chunk_bytes).ok());
      for (const auto& [in, bytes] : state) {
        Status s = ex.value()->SetInput(in, bytes.data(), bytes.size());
        ASSERT_TRUE(s.ok()) << s.message();
      }
      Status s = ex.value()->Run();
      ASSERT_TRUE(s.ok()) << s.message();
      for (size_t o = 0; o < info.outputs.size(); ++o) {
        const auto& out = info.outputs[o];
        auto want_all = ReadNpy(dir + "/" + name + ".stream_ref/" + out.name + ".calls.npy");
        ASSERT_TRUE(want_all.ok()) << want_all.status().message();
        const size_t n = out.bytes() / 4;
        ASSERT_EQ(want_all.value().data.size(), n * 4 * calls) << out.name;
        const float* p = static_cast<const float*>(ex.value()->output_data(o));
        const auto d = testing::Compare(std::vector<float>(p, p + n), Floats(want_all.value(), c * n, n));
        EXPECT_LT(d.rel_l2, 1e-4) << name << " output " << out.name;
        EXPECT_LT(d.max_abs, 1e-4) << name << " output " << out.name;
        if (auto f = feed.find(out.name); f != feed.end()) {
          const auto* b = static_cast<const uint8_t*>(ex.value()->output_data(o));
          state[f->second].assign(b, b + out.bytes());
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Torch, RecurrentStream, ::testing::Values("lstm_stream", "gru_stream", "rnn_stream"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace fcb
