// End to end on real architectures: each torchvision model compiles into ONE
// .fcb holding every x86 target, and every target the host can run matches
// ONNX Runtime (the oracle) within 1e-4 relative L2 and 1e-3 max abs error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <onnx/onnx_pb.h>

#include "fcb/npy.h"
#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "core/half.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

// The elements of float32 or float16 data as float32.
std::vector<float> AsFloats(const uint8_t* p, size_t bytes, bool half) {
  std::vector<float> v(bytes / (half ? 2 : 4));
  for (size_t i = 0; i < v.size(); ++i) {
    if (half) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v[i] = HalfToFloat(h);
    } else {
      std::memcpy(&v[i], p + 4 * i, 4);
    }
  }
  return v;
}
std::vector<float> AsFloats(const NpyArray& a) {
  return AsFloats(a.data.data(), a.data.size(), a.dtype == kNpyF16);
}

// The largest difference allowed between two outputs: 1e-3, or for a
// float16 output 2 units in the last place at its largest magnitude (the
// float32 results rounded to float16 may land on either side of a tie).
float MaxAbsTolerance(const std::vector<float>& want, bool half) {
  if (!half) return 1e-3f;
  float m = 0;
  for (float w : want) m = std::max(m, std::fabs(w));
  return std::max(1e-3f, 2 * std::ldexp(1.0f, std::ilogb(std::max(m, 1e-4f)) - 10));
}

struct ModelCase {
  const char* name;
  const char* onnx;  // relative to the test data folder, or absolute
  const char* shape;
};

class ModelTest : public ::testing::TestWithParam<ModelCase> {};

// Compiles `model` for every target into one file and checks every target
// the host runs, at 1 and 2 threads, against the ONNX Runtime reference of
// test-data model `name`.
void CheckEveryTarget(const std::string& name, const std::string& model) {
  const ModelCase mc{name.c_str(), model.c_str(), ""};
  const std::string dir = TestDataDir();
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  auto input = ReadNpy(dir + "/" + mc.name + ".input.npy");
  ASSERT_TRUE(input.ok()) << input.status().message();
  auto want = ReadNpy(dir + "/" + mc.name + ".ref/output.npy");
  ASSERT_TRUE(want.ok()) << want.status().message();

  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["input"].assign(input.value().shape.begin(), input.value().shape.end());
  auto report = Compile(model, spec, out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  auto any = Program::Load(out);
  ASSERT_TRUE(any.ok()) << any.status().message();
  std::vector<std::string> in_file = any.value()->targets_in_file();
  EXPECT_EQ(in_file.size(), ListTargets().size()) << "the file must hold every target";

  testing::ForEachRunnableTarget(
      out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    for (int threads : {1, 2}) {
      auto ex = Execution::Create(program, "main", threads);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      ASSERT_TRUE(ex.value()->SetInput("input", input.value().data.data(), input.value().data.size()).ok());
      Status s = ex.value()->Run();
      ASSERT_TRUE(s.ok()) << s.message();
      const auto& info = ex.value()->info();
      ASSERT_EQ(info.outputs.size(), 1u);
      ASSERT_EQ(info.outputs[0].shape, want.value().shape);
      const bool half = want.value().dtype == kNpyF16;
      ASSERT_EQ(info.outputs[0].dtype, half ? DType::kF16 : DType::kF32);
      std::vector<float> got = AsFloats(static_cast<const uint8_t*>(ex.value()->output_data(0)),
                                        info.outputs[0].bytes(), half);
      const std::vector<float> ref = AsFloats(want.value());
      auto d = testing::Compare(got, ref);
      EXPECT_LT(d.rel_l2, 1e-4) << mc.name << " on " << target << " with " << threads << " threads";
      EXPECT_LE(d.max_abs, MaxAbsTolerance(ref, half))
          << mc.name << " on " << target << " with " << threads << " threads";
    }
  });
}

TEST_P(ModelTest, EveryTargetMatchesOnnxRuntime) {
  const ModelCase& mc = GetParam();
  CheckEveryTarget(mc.name, mc.onnx[0] == '/' ? mc.onnx : TestDataDir() + "/" + mc.onnx);
}

// Some exporters write nodes out of topological order (ONNX Runtime sorts
// them): efficientnet_b0 (squeeze-excitation branches, residual adds) with
// its node list shuffled compiles and matches ONNX Runtime on every target.
TEST(ModelOrder, ShuffledNodeListMatchesOnnxRuntime) {
  const std::string src = TestDataDir() + "/efficientnet_b0.onnx";
  onnx::ModelProto m;
  {
    std::ifstream f(src, std::ios::binary);
    ASSERT_TRUE(f && m.ParseFromIstream(&f)) << src << " is missing: run scripts/prepare_testdata.sh";
  }
  auto* nodes = m.mutable_graph()->mutable_node();
  ASSERT_GT(nodes->size(), 100);
  std::vector<onnx::NodeProto> v(nodes->begin(), nodes->end());
  std::mt19937 rng(2024);
  std::shuffle(v.begin(), v.end(), rng);
  nodes->Clear();
  for (auto& n : v) *nodes->Add() = std::move(n);
  // The shuffle really breaks the order: some node reads an output of a later one.
  std::set<std::string> seen;
  for (const auto& i : m.graph().input()) seen.insert(i.name());
  for (const auto& i : m.graph().initializer()) seen.insert(i.name());
  bool out_of_order = false;
  for (const auto& n : m.graph().node()) {
    for (const auto& in : n.input()) out_of_order = out_of_order || (!in.empty() && !seen.count(in));
    for (const auto& o : n.output()) seen.insert(o);
  }
  ASSERT_TRUE(out_of_order);
  TempDir tmp;
  const std::string shuffled = tmp.File("efficientnet_b0_shuffled.onnx");
  {
    std::ofstream f(shuffled, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  CheckEveryTarget("efficientnet_b0", shuffled);
}

// optimization_level 0 (no BatchNorm folding, no fusion: standalone
// BatchNormalization, separate activations) must match too.
TEST(ModelLevel0, DemoAndResnet18MatchOnnxRuntime) {
  const std::string dir = TestDataDir();
  for (const auto& [name, model] : std::vector<std::pair<std::string, std::string>>{
           {"demo_cnn", FCB_SOURCE_DIR "/models/demo_cnn.onnx"}, {"resnet18", dir + "/resnet18.onnx"}}) {
    SCOPED_TRACE(name);
    auto input = ReadNpy(dir + "/" + name + ".input.npy");
    auto want = ReadNpy(dir + "/" + name + ".ref/output.npy");
    ASSERT_TRUE(input.ok() && want.ok()) << "run scripts/prepare_testdata.sh";
    TempDir tmp;
    CompileSpec spec;
    std::string best;  // the best target this host runs
    for (const auto& t : ListTargets())
      if (t.auto_choice) best = t.name;
    spec.targets = {"generic", best == "generic" ? "x86-64-v2" : best};
    TargetOptions o;
    o.optimization_level = 0;
    spec.target_options = {o, o};
    spec.input_shapes["input"].assign(input.value().shape.begin(), input.value().shape.end());
    auto report = Compile(model, spec, tmp.File("m.fcb"));
    ASSERT_TRUE(report.ok()) << report.status().message();
    for (const auto& t : spec.targets) {
      bool runs = false;
      for (const auto& k : ListTargets()) runs = runs || (k.name == t && k.host_can_run);
      if (!runs) continue;
      LoadOptions lo;
      lo.target = t;
      auto program = Program::Load(tmp.File("m.fcb"), lo);
      ASSERT_TRUE(program.ok()) << program.status().message();
      auto ex = Execution::Create(program.value(), "main", 1);
      ASSERT_TRUE(ex.ok());
      ASSERT_TRUE(ex.value()->SetInput("input", input.value().data.data(), input.value().data.size()).ok());
      ASSERT_TRUE(ex.value()->Run().ok());
      const float* p = static_cast<const float*>(ex.value()->output_data(0));
      std::vector<float> got(p, p + ex.value()->info().outputs[0].bytes() / 4);
      auto d = testing::Compare(got, AsFloats(want.value()));
      EXPECT_LT(d.rel_l2, 1e-4) << t;
      EXPECT_LT(d.max_abs, 1e-3) << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Torchvision, ModelTest,
    ::testing::Values(ModelCase{"demo_cnn", FCB_SOURCE_DIR "/models/demo_cnn.onnx", ""},
                      ModelCase{"resnet18", "resnet18.onnx", ""},
                      ModelCase{"squeezenet1_1", "squeezenet1_1.onnx", ""},
                      ModelCase{"mobilenet_v2", "mobilenet_v2.onnx", ""},
                      ModelCase{"efficientnet_b0", "efficientnet_b0.onnx", ""},
                      ModelCase{"resnet18_dynamic", "resnet18_dynamic.onnx", ""},
                      // scripts/export_graph_models.py: an NHWC input made NCHW by a
                      // Reshape, 1x3/3x1 convolutions, asymmetric pads, pools.
                      ModelCase{"kws_cnn", "kws_cnn.onnx", ""},
                      // The same with its weights in a data file beside the model.
                      ModelCase{"kws_cnn_external", "kws_cnn_external.onnx", ""},
                      // float16 weights, compute and output behind a Cast of the input.
                      ModelCase{"resnet18_fp16", "resnet18_fp16.onnx", ""},
                      // 1-D Conv and ConvTranspose of every kind (run as 2-D NHWC convolutions).
                      ModelCase{"conv1d_codec", "conv1d_codec.onnx", ""},
                      // Grouped 2-D convolutions, 2 to 32 channels per group.
                      ModelCase{"grouped_cnn", "grouped_cnn.onnx", ""},
                      // One recurrent node each, with what PyTorch never writes (explicit
                      // activations, clip, peepholes, input_forget, sequence_lens, reverse).
                      ModelCase{"lstm_features", "lstm_features.onnx", ""},
                      ModelCase{"lstm_input_forget", "lstm_input_forget.onnx", ""},
                      ModelCase{"gru_features", "gru_features.onnx", ""},
                      ModelCase{"rnn_features", "rnn_features.onnx", ""}),
    [](const ::testing::TestParamInfo<ModelCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace fcb
