// End to end on quantized models (scripts/export_quant_models.py): QDQ CNNs
// from PyTorch's quantization tooling, a QOperator (QLinearConv) CNN, a
// dynamically quantized transformer encoder (MatMulInteger) and a dynamically
// quantized segmentation CNN (ConvInteger). Each compiles into ONE .fcb with
// every target; every target the host runs, at 1 and 2 threads, matches
// ONNX Runtime: integer outputs exactly, float outputs within 1e-3 relative
// L2. Every comparison is printed (model, target, output, kind, rel L2, max
// abs) so the numbers can be read off the log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <dirent.h>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

std::vector<float> AsFloats(const void* p, size_t bytes) {
  std::vector<float> v(bytes / 4);
  std::memcpy(v.data(), p, v.size() * 4);
  return v;
}

// What `fcb run` and tools/oracle/ort_run.js name an output's file.
std::string Sanitize(std::string s) {
  for (char& c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return s;
}

// The reference outputs in DIR/<model>.ref, by file name without ".npy".
std::vector<std::string> RefOutputs(const std::string& ref_dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(ref_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0) names.push_back(n.substr(0, n.size() - 4));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

class QuantModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantModelTest, EveryTargetMatchesOnnxRuntime) {
  const std::string name = GetParam();
  const std::string dir = TestDataDir();
  const std::string model = dir + "/" + name + ".onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  auto input = ReadNpy(dir + "/" + name + ".input.npy");
  ASSERT_TRUE(input.ok()) << input.status().message();
  const std::vector<std::string> ref_names = RefOutputs(dir + "/" + name + ".ref");
  ASSERT_FALSE(ref_names.empty()) << "no ONNX Runtime references for " << name;

  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["input"].assign(input.value().shape.begin(), input.value().shape.end());
  auto report = Compile(model, spec, out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  auto any = Program::Load(out);
  ASSERT_TRUE(any.ok()) << any.status().message();
  EXPECT_EQ(any.value()->targets_in_file().size(), ListTargets().size()) << "the file must hold every target";

  testing::ForEachRunnableTarget(
      out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    for (int threads : {1, 2}) {
      auto ex = Execution::Create(program, "main", threads);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      ASSERT_TRUE(ex.value()->SetInput("input", input.value().data.data(), input.value().data.size()).ok());
      Status s = ex.value()->Run();
      ASSERT_TRUE(s.ok()) << s.message();
      const auto& info = ex.value()->info();
      ASSERT_EQ(info.outputs.size(), ref_names.size()) << name;
      for (size_t i = 0; i < info.outputs.size(); ++i) {
        const TensorSpec& o = info.outputs[i];
        const std::string file = Sanitize(o.name);
        auto want = ReadNpy(dir + "/" + name + ".ref/" + file + ".npy");
        ASSERT_TRUE(want.ok()) << "output '" << o.name << "': " << want.status().message();
        ASSERT_EQ(o.shape, want.value().shape) << o.name;
        ASSERT_EQ(o.bytes(), want.value().data.size()) << o.name;
        const auto* got = static_cast<const uint8_t*>(ex.value()->output_data(i));
        if (want.value().dtype == kNpyF32) {
          ASSERT_EQ(o.dtype, DType::kF32) << o.name;
          auto d = testing::Compare(AsFloats(got, o.bytes()), AsFloats(want.value().data.data(), o.bytes()));
          std::printf("[quant] %-14s %-10s %dT %-8s float  rel_l2 %.3g  max_abs %.3g\n", name.c_str(),
                      target.c_str(), threads, file.c_str(), d.rel_l2, d.max_abs);
          EXPECT_LT(d.rel_l2, 1e-3) << name << " output " << o.name << " on " << target << " with " << threads
                                    << " threads (max abs " << d.max_abs << ")";
        } else {
          // Integer outputs (uint8 of a final QuantizeLinear, int64 of an
          // ArgMax) must be identical, element for element.
          int64_t count = 1;
          for (int64_t d : o.shape) count *= d;
          ASSERT_GT(count, 0) << o.name;
          const size_t elem = o.bytes() / static_cast<size_t>(count);
          size_t differ = 0;
          for (size_t b = 0; b < o.bytes(); b += elem)
            differ += std::memcmp(got + b, want.value().data.data() + b, elem) != 0;
          std::printf("[quant] %-14s %-10s %dT %-8s int    %zu of %zu elements differ\n", name.c_str(),
                      target.c_str(), threads, file.c_str(), differ, static_cast<size_t>(o.bytes() / elem));
          EXPECT_EQ(differ, 0u) << name << " output " << o.name << " on " << target << " with " << threads
                                << " threads";
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Quantized, QuantModelTest,
                         ::testing::Values("qdq_resnet", "qdq_mobilenet", "qop_resnet", "dyn_encoder",
                                           "dyn_segnet", "fusion_mix"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace fcb
