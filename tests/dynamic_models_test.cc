// The models whose inputs vary in length or size (scripts/export_dynamic_models.py):
// a BERT-like encoder with a dynamic sequence axis, resnet18 with dynamic
// height and width, and a decoder in the form the common exporter writes
// (past_key_values inputs, present outputs past+seq long, the graphs with and
// without a cache merged under one If on use_cache_branch, whose branch
// subgraphs name their outputs exactly like the If's own outputs). Each
// reference case (CASE.feeds/NAME.npy -> ONNX Runtime's CASE.ref/NAME.npy) is
// one method of one file, its shapes fixed from the case's inputs (a
// use_cache_branch input is fixed to the case's value); every target the host
// runs matches each case within 1e-4 relative L2 per output, and the methods
// and targets share every weight.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

struct Model {
  const char* name;                          // the .onnx file's stem
  std::map<std::string, std::string> cases;  // method -> case folder stem
  // The most the pool of the file holding every case may exceed one
  // method's pool by, in tenths (see MethodsAndTargetsShareTheWeights).
  int max_growth_tenths;
};

const Model kBert{"bert_dyn",
                  {{"l1", "bert_dyn.L1"}, {"l7", "bert_dyn.L7"}, {"l64", "bert_dyn.L64"},
                   {"l333", "bert_dyn.L333"}, {"l512", "bert_dyn.L512"}},
                  5};  // each length's rows of the positional table: 1.46x
const Model kResnet{"resnet18_dyn",
                    {{"s64", "resnet18_dyn.64x64"}, {"s224", "resnet18_dyn.224x224"},
                     {"s97x131", "resnet18_dyn.97x131"}, {"s512", "resnet18_dyn.512x512"}},
                    6};  // layer2/3's 3x3 weights packed for Winograd and for the direct conv: 1.56x
const Model kDecoder{"decoder_merged",
                     {{"prefill_t1", "decoder_merged.prefill.T1"}, {"prefill_t64", "decoder_merged.prefill.T64"},
                      {"decode_p1", "decoder_merged.decode.P1"}, {"decode_p1023", "decoder_merged.decode.P1023"}},
                     1};  // the positional rows and causal mask of each length: 1.04x

class DynamicModel : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    dir_ = TestDataDir();
    model_ = dir_ + "/" + GetParam().name + ".onnx";
    ASSERT_TRUE(testing::FileExists(model_)) << model_ << " is missing: run scripts/prepare_testdata.sh";
  }
  // A spec fixing every method's shapes (from its case's inputs) and its
  // use_cache_branch (from the case's own flag) for `targets`.
  CompileSpec SpecFor(const std::map<std::string, std::string>& methods, std::vector<std::string> targets) {
    CompileSpec spec;
    spec.targets = std::move(targets);
    for (const auto& [method, stem] : methods) {
      const auto feeds = testing::ReadNpyFolder(dir_ + "/" + stem + ".feeds");
      EXPECT_FALSE(feeds.empty()) << "no inputs for " << stem << ": run scripts/prepare_testdata.sh";
      for (const auto& [name, a] : feeds) {
        if (name == "use_cache_branch") {
          spec.input_values[method + ":" + name] = a;
          continue;
        }
        auto& dims = spec.input_shapes[method + ":" + name];
        for (int64_t d : a.shape) dims.push_back(InputDim(d));
      }
    }
    return spec;
  }
  std::string dir_, model_;
};

TEST_P(DynamicModel, EveryMethodOnEveryTargetMatchesOnnxRuntime) {
  const auto& cases = GetParam().cases;
  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  std::map<std::string, std::string> methods;
  for (const auto& [method, stem] : cases) methods[method] = model_;
  auto report = CompileMethods(methods, SpecFor(cases, {"all"}), out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  int compared = 0;
  testing::ForEachRunnableTarget(out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    for (const auto& [method, stem] : cases) {
      SCOPED_TRACE(method + " on " + target);
      const auto feeds = testing::ReadNpyFolder(dir_ + "/" + stem + ".feeds");
      const auto want = testing::ReadNpyFolder(dir_ + "/" + stem + ".ref");
      ASSERT_FALSE(want.empty()) << "no reference for " << stem << ": run scripts/prepare_testdata.sh";
      auto ex = Execution::Create(program, method, 1);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      const MethodInfo& info = ex.value()->info();
      // use_cache_branch is fixed at compile time, so it is no input.
      ASSERT_EQ(info.inputs.size(), feeds.size() - feeds.count("use_cache_branch"));
      for (const auto& in : info.inputs) {
        auto f = feeds.find(in.name);
        ASSERT_NE(f, feeds.end()) << in.name;
        Status s = ex.value()->SetInput(in.name, f->second.data.data(), f->second.data.size());
        ASSERT_TRUE(s.ok()) << in.name << ": " << s.message();
      }
      Status s = ex.value()->Run();
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_EQ(info.outputs.size(), want.size());
      for (size_t i = 0; i < info.outputs.size(); ++i) {
        const auto& o = info.outputs[i];
        auto w = want.find(o.name);
        ASSERT_NE(w, want.end()) << "output " << o.name << " has no reference";
        ASSERT_EQ(o.shape, w->second.shape) << o.name;
        ASSERT_EQ(o.dtype, DType::kF32) << o.name;
        const float* p = static_cast<const float*>(ex.value()->output_data(i));
        std::vector<float> got(p, p + o.bytes() / 4), ref(w->second.data.size() / 4);
        std::memcpy(ref.data(), w->second.data.data(), ref.size() * 4);
        EXPECT_LE(testing::Compare(got, ref).rel_l2, 1e-4) << o.name;
        ++compared;
      }
    }
  });
  EXPECT_GT(compared, 0);
}

// Every target reads one set of weights (target-neutral packing), and so,
// mostly, do the methods. With one method per length, what a file holds
// beyond one method's pool is what is compiled per length: constants folded
// for that length (a positional table's rows, a causal mask) and, where the
// lowering chooses an algorithm by extent, a second packing of the same
// weights (resnet18's Winograd and direct convolutions). Each model's bound
// is what that costs today; weights stored once per method would exceed it
// several times over.
TEST_P(DynamicModel, MethodsAndTargetsShareTheWeights) {
  const auto& cases = GetParam().cases;
  TempDir tmp;
  const std::map<std::string, std::string> one_case = {*cases.rbegin()};
  const std::map<std::string, std::string> one_method = {{cases.rbegin()->first, model_}};
  std::map<std::string, std::string> all;
  for (const auto& [method, stem] : cases) all[method] = model_;
  ASSERT_TRUE(CompileMethods(one_method, SpecFor(one_case, {"generic"}), tmp.File("one.fcb")).ok());
  ASSERT_TRUE(CompileMethods(one_method, SpecFor(one_case, {"all"}), tmp.File("targets.fcb")).ok());
  ASSERT_TRUE(CompileMethods(all, SpecFor(cases, {"all"}), tmp.File("all.fcb")).ok());
  auto one = InspectFile(tmp.File("one.fcb"));
  auto targets = InspectFile(tmp.File("targets.fcb"));
  auto methods = InspectFile(tmp.File("all.fcb"));
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_TRUE(targets.ok()) << targets.status().message();
  ASSERT_TRUE(methods.ok()) << methods.status().message();
  const uint64_t pool = one.value().weight_pool.bytes;
  EXPECT_GT(pool, 500000u);  // each model's weights: 0.5 MB of float32 or more
  EXPECT_EQ(targets.value().weight_pool.bytes, pool);
  EXPECT_LE(methods.value().weight_pool.bytes * 10, pool * (10 + GetParam().max_growth_tenths))
      << "one method: " << pool << " bytes of weights, every case: " << methods.value().weight_pool.bytes;
}

INSTANTIATE_TEST_SUITE_P(Exported, DynamicModel, ::testing::Values(kBert, kResnet, kDecoder),
                         [](const ::testing::TestParamInfo<Model>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace fcb
