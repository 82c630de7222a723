// A decoder in the form the common exporter writes (scripts/export_dynamic_models.py:
// decoder_merged.onnx): past_key_values inputs, present outputs past+seq long,
// and the two graphs (with and without a cache) merged under one If on
// use_cache_branch, whose branch subgraphs name their outputs exactly like the
// If's own outputs. One file holds a prefill method (use_cache_branch false)
// and a decode method (true) at each reference case's lengths; every target
// the host runs matches ONNX Runtime on each case (CASE.feeds/NAME.npy ->
// CASE.ref/NAME.npy) within 1e-4 relative L2 per output, and the methods and
// targets share every weight.
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

namespace fs = std::filesystem;
using testing::TempDir;
using testing::TestDataDir;

std::map<std::string, NpyArray> ReadFolder(const std::string& dir) {
  std::map<std::string, NpyArray> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".npy") continue;
    auto a = ReadNpy(e.path().string());
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (a.ok()) out[e.path().stem().string()] = std::move(a).value();
  }
  return out;
}

// The reference cases: method name -> case folder stem.
const std::map<std::string, std::string>& Cases() {
  static const std::map<std::string, std::string> kCases = {
      {"prefill_t1", "decoder_merged.prefill.T1"},
      {"prefill_t64", "decoder_merged.prefill.T64"},
      {"decode_p1", "decoder_merged.decode.P1"},
      {"decode_p1023", "decoder_merged.decode.P1023"},
  };
  return kCases;
}

class MergedDecoder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDataDir();
    model_ = dir_ + "/decoder_merged.onnx";
    ASSERT_TRUE(testing::FileExists(model_)) << model_ << " is missing: run scripts/prepare_testdata.sh";
  }
  // A spec fixing every method's shapes (from its case's inputs) and its
  // use_cache_branch (from the case's own flag) for `targets`.
  CompileSpec SpecFor(const std::map<std::string, std::string>& methods, std::vector<std::string> targets) {
    CompileSpec spec;
    spec.targets = std::move(targets);
    for (const auto& [method, stem] : methods) {
      const auto feeds = ReadFolder(dir_ + "/" + stem + ".feeds");
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

TEST_F(MergedDecoder, EveryMethodOnEveryTargetMatchesOnnxRuntime) {
  TempDir tmp;
  const std::string out = tmp.File("decoder.fcb");
  std::map<std::string, std::string> methods;
  for (const auto& [method, stem] : Cases()) methods[method] = model_;
  auto report = CompileMethods(methods, SpecFor(Cases(), {"all"}), out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  int compared = 0;
  testing::ForEachRunnableTarget(out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    for (const auto& [method, stem] : Cases()) {
      SCOPED_TRACE(method + " on " + target);
      const auto feeds = ReadFolder(dir_ + "/" + stem + ".feeds");
      const auto want = ReadFolder(dir_ + "/" + stem + ".ref");
      ASSERT_FALSE(want.empty()) << "no reference for " << stem << ": run scripts/prepare_testdata.sh";
      auto ex = Execution::Create(program, method, 1);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      const MethodInfo& info = ex.value()->info();
      // use_cache_branch is fixed at compile time, so it is no input.
      ASSERT_EQ(info.inputs.size(), feeds.size() - 1);
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

// Every target reads one set of weights, and so do the methods: the pool of
// the four-method file holds the model's weights once. What it holds beyond
// one method's pool are the constants folded per length (the positional
// table's rows for that length, the causal mask), a few percent here; the
// weights themselves stored four times would make it about four times larger.
TEST_F(MergedDecoder, MethodsAndTargetsShareTheWeights) {
  TempDir tmp;
  const std::map<std::string, std::string> one_case = {{"decode_p1023", Cases().at("decode_p1023")}};
  const std::map<std::string, std::string> one_method = {{"decode_p1023", model_}};
  std::map<std::string, std::string> all;
  for (const auto& [method, stem] : Cases()) all[method] = model_;
  ASSERT_TRUE(CompileMethods(one_method, SpecFor(one_case, {"generic"}), tmp.File("one.fcb")).ok());
  ASSERT_TRUE(CompileMethods(one_method, SpecFor(one_case, {"all"}), tmp.File("targets.fcb")).ok());
  ASSERT_TRUE(CompileMethods(all, SpecFor(Cases(), {"all"}), tmp.File("all.fcb")).ok());
  auto one = InspectFile(tmp.File("one.fcb"));
  auto targets = InspectFile(tmp.File("targets.fcb"));
  auto methods = InspectFile(tmp.File("all.fcb"));
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_TRUE(targets.ok()) << targets.status().message();
  ASSERT_TRUE(methods.ok()) << methods.status().message();
  const uint64_t pool = one.value().weight_pool.bytes;
  EXPECT_GT(pool, 500000u);  // the decoder's weights: about 0.5 MB of float32
  EXPECT_EQ(targets.value().weight_pool.bytes, pool);
  EXPECT_GT(methods.value().weight_pool.bytes_saved_by_sharing, 3 * pool);
  EXPECT_LT(methods.value().weight_pool.bytes, pool + pool / 10);
}

}  // namespace
}  // namespace fcb
