// Several targets and methods in one .fcb with one shared weight pool:
//  - resnet18 for the four x86 targets costs at most 0.5 % more than for one
//    target; with weight sharing off it costs about four times as much;
//  - resnet18 at 224x224 and 320x320 as two methods costs at most 0.5 % more
//    than one method, and both methods match ONNX Runtime on every target;
//  - the numbers of `fcb inspect --json` add up to the file size.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fcb/npy.h"
#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::TestDataDir;

// Compiled once for the whole suite: the files every test below looks at.
class MethodsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    const std::string dir = TestDataDir();
    const std::string r18 = dir + "/resnet18.onnx", hw = dir + "/resnet18_hw.onnx";
    if (!testing::FileExists(r18) || !testing::FileExists(hw)) {
      setup_error_ = r18 + " or " + hw + " is missing: run scripts/prepare_testdata.sh";
      return;
    }
    auto compile = [&](const std::map<std::string, std::string>& methods, CompileSpec spec, const char* out) {
      if (!setup_error_.empty()) return;
      auto r = CompileMethods(methods, spec, tmp_->File(out));
      if (!r.ok()) setup_error_ = std::string(out) + ": " + r.status().message();
    };
    CompileSpec one, four, four_unshared;
    one.targets = {"x86-64-v3"};
    four.targets = {"generic", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
    four_unshared = four;
    four_unshared.weight_sharing = false;
    compile({{"main", r18}}, one, "one_target.fcb");
    compile({{"main", r18}}, four, "four_targets.fcb");
    compile({{"main", r18}}, four_unshared, "four_unshared.fcb");
    CompileSpec all;
    all.targets = {"all"};  // the x86-64 levels and the AArch64 ones
    compile({{"main", r18}}, all, "all_targets.fcb");

    CompileSpec shapes = four;
    shapes.input_shapes["r224:input"] = {1, 3, 224, 224};
    shapes.input_shapes["r320:input"] = {1, 3, 320, 320};
    compile({{"r224", hw}}, shapes, "one_method.fcb");
    compile({{"r224", hw}, {"r320", hw}}, shapes, "two_methods.fcb");
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static std::string File(const char* name) { return tmp_->File(name); }
  static uint64_t Size(const char* name) { return std::filesystem::file_size(File(name)); }

  static json Inspect(const char* name) {
    auto r = testing::RunCommand(testing::CliPath() + " inspect --json " + File(name));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }

  static TempDir* tmp_;
  static std::string setup_error_;
};
TempDir* MethodsTest::tmp_ = nullptr;
std::string MethodsTest::setup_error_;

TEST_F(MethodsTest, FourTargetsCostAtMostHalfAPercentMoreThanOne) {
  const double one = static_cast<double>(Size("one_target.fcb"));
  const double four = static_cast<double>(Size("four_targets.fcb"));
  const double unshared = static_cast<double>(Size("four_unshared.fcb"));
  RecordProperty("one_target_bytes", std::to_string(Size("one_target.fcb")));
  RecordProperty("four_targets_bytes", std::to_string(Size("four_targets.fcb")));
  RecordProperty("four_unshared_bytes", std::to_string(Size("four_unshared.fcb")));
  EXPECT_LE(four / one, 1.005) << "four targets: " << four << " bytes, one: " << one;
  // Equal plans are written once, so three more contexts may add no more
  // than the padding before the weight pool absorbs.
  EXPECT_GE(four, one) << "four contexts cannot be smaller than one";
  // Without sharing every target stores its own copy of ~45 MB of weights.
  EXPECT_GT(unshared / one, 3.9) << "unshared: " << unshared << " bytes, one: " << one;
  EXPECT_LT(unshared / one, 4.05) << "unshared: " << unshared << " bytes, one: " << one;
}

// One file for both CPU families: the AArch64 contexts reference the same
// target-neutral packed weights as the x86-64 ones.
TEST_F(MethodsTest, AllTargetsOfBothArchitecturesCostAtMostHalfAPercentMoreThanOne) {
  const double one = static_cast<double>(Size("one_target.fcb"));
  const double all = static_cast<double>(Size("all_targets.fcb"));
  RecordProperty("all_targets_bytes", std::to_string(Size("all_targets.fcb")));
  EXPECT_LE(all / one, 1.005) << "all targets: " << all << " bytes, one: " << one;
  const json j = Inspect("all_targets.fcb");
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["targets"].size(), 8u);
  EXPECT_EQ(j["targets"][7], "armv9-a");
  for (const auto& c : j["contexts"])
    EXPECT_EQ(c["weight_bytes_unique"].get<uint64_t>(), 0u) << c["target"] << " holds weights of its own";
}

TEST_F(MethodsTest, EveryX86TargetSharesEveryWeightBlob) {
  const json j = Inspect("four_targets.fcb");
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["targets"].size(), 4u);
  const uint64_t pool = j["weight_pool"]["bytes"];
  for (const auto& [target, t] : j["per_target"].items()) {
    SCOPED_TRACE(target);
    EXPECT_EQ(t["weight_bytes_referenced"].get<uint64_t>(), pool) << "each target uses the whole pool";
    EXPECT_EQ(t["weight_bytes_unique"].get<uint64_t>(), 0u) << "no target needs bytes of its own";
  }
  EXPECT_EQ(j["weight_pool"]["bytes_saved_by_sharing"].get<uint64_t>(), 3 * pool);

  const json u = Inspect("four_unshared.fcb");
  ASSERT_FALSE(u.is_discarded());
  for (const auto& [target, t] : u["per_target"].items()) {
    SCOPED_TRACE(target);
    EXPECT_EQ(t["weight_bytes_unique"], t["weight_bytes_referenced"]) << "sharing off: every copy is its own";
    EXPECT_EQ(t["bytes_saved_by_sharing"].get<uint64_t>(), 0u);
  }
  EXPECT_EQ(u["weight_pool"]["bytes_saved_by_sharing"].get<uint64_t>(), 0u);
  EXPECT_EQ(u["weight_pool"]["bytes"].get<uint64_t>(), 4 * pool);
}

TEST_F(MethodsTest, SecondInputShapeCostsAtMostHalfAPercent) {
  const double one = static_cast<double>(Size("one_method.fcb"));
  const double two = static_cast<double>(Size("two_methods.fcb"));
  RecordProperty("one_method_bytes", std::to_string(Size("one_method.fcb")));
  RecordProperty("two_methods_bytes", std::to_string(Size("two_methods.fcb")));
  EXPECT_LE(two / one, 1.005) << "two methods: " << two << " bytes, one: " << one;
  EXPECT_GT(two, one);
  const json j = Inspect("two_methods.fcb");
  ASSERT_FALSE(j.is_discarded());
  ASSERT_EQ(j["methods"], json({"r224", "r320"}));
  for (const auto& [method, m] : j["per_method"].items()) {
    SCOPED_TRACE(method);
    EXPECT_EQ(m["weight_bytes_unique"].get<uint64_t>(), 0u) << "both shapes use the same packed weights";
    EXPECT_EQ(m["weight_bytes_referenced"], j["weight_pool"]["bytes"]);
  }
}

std::vector<float> Floats(const void* p, uint64_t bytes) {
  std::vector<float> v(bytes / 4);
  std::memcpy(v.data(), p, bytes);
  return v;
}

TEST_F(MethodsTest, BothShapesMatchOnnxRuntimeOnEveryTarget) {
  const std::string dir = TestDataDir();
  testing::ForEachRunnableTarget(File("two_methods.fcb"), [&](const std::string&,
                                                                const std::shared_ptr<const Program>& program) {
    ASSERT_REFUSED(program->default_method(), StatusCode::kInvalidArgument, "the program has several methods; name the one to run") << "two methods: no default";
    for (const auto& [method, side] : {std::pair{"r224", 224}, std::pair{"r320", 320}}) {
      SCOPED_TRACE(method);
      const std::string name = "resnet18_hw_" + std::to_string(side);
      auto input = ReadNpy(dir + "/" + name + ".input.npy");
      auto want = ReadNpy(dir + "/" + name + ".ref/output.npy");
      ASSERT_TRUE(input.ok() && want.ok()) << "run scripts/prepare_testdata.sh";
      auto ex = Execution::Create(program, method, 2);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      ASSERT_EQ(ex.value()->info().inputs[0].shape, (std::vector<int64_t>{1, 3, side, side}));
      ASSERT_TRUE(ex.value()->SetInput("input", input.value().data.data(), input.value().data.size()).ok());
      Status s = ex.value()->Run();
      ASSERT_TRUE(s.ok()) << s.message();
      const auto& out = ex.value()->info().outputs.at(0);
      ASSERT_EQ(out.shape, want.value().shape);
      auto d = testing::Compare(Floats(ex.value()->output_data(0), out.bytes()),
                                Floats(want.value().data.data(), want.value().data.size()));
      EXPECT_LT(d.rel_l2, 1e-4);
      EXPECT_LT(d.max_abs, 1e-3);
    }
  });
}

// header + metadata + padding + weights + weight alignment = file size, and
// every breakdown (per context, per target, per method) sums to its total.
void ExpectInspectAddsUp(const json& j, uint64_t file_size) {
  ASSERT_FALSE(j.is_discarded());
  const json& l = j["layout"];
  const uint64_t header = l["header_bytes"], meta = l["metadata_bytes"], meta_pad = l["metadata_padding_bytes"];
  const uint64_t blobs = l["pool_blob_bytes"], pool_pad = l["pool_padding_bytes"];
  EXPECT_EQ(j["file_size"].get<uint64_t>(), file_size);
  EXPECT_EQ(header + meta + meta_pad + blobs + pool_pad, file_size);
  EXPECT_EQ(header + meta + meta_pad, l["pool_offset"].get<uint64_t>());
  EXPECT_EQ(l["pool_offset"].get<uint64_t>() % 4096, 0u);
  EXPECT_EQ(l["metadata_plan_bytes"].get<uint64_t>() + l["metadata_other_bytes"].get<uint64_t>(), meta);
  EXPECT_EQ(j["weight_pool"]["bytes"].get<uint64_t>(), blobs);

  uint64_t plan = 0, referenced = 0;
  for (const auto& c : j["contexts"]) {
    EXPECT_GT(c["plan_bytes"].get<uint64_t>(), 0u);
    plan += c["plan_bytes"].get<uint64_t>();
    referenced += c["weight_bytes_referenced"].get<uint64_t>();
    EXPECT_EQ(c["bytes_saved_by_sharing"].get<uint64_t>(),
              c["weight_bytes_referenced"].get<uint64_t>() - c["weight_bytes_unique"].get<uint64_t>());
  }
  EXPECT_EQ(plan, l["metadata_plan_bytes"].get<uint64_t>());
  EXPECT_EQ(referenced, j["weight_pool"]["bytes_referenced_by_contexts"].get<uint64_t>());
  EXPECT_EQ(referenced - blobs, j["weight_pool"]["bytes_saved_by_sharing"].get<uint64_t>());
  for (const char* group : {"per_target", "per_method"}) {
    SCOPED_TRACE(group);
    uint64_t gplan = 0;
    for (const auto& [name, g] : j[group].items()) {
      gplan += g["plan_bytes"].get<uint64_t>();
      EXPECT_LE(g["weight_bytes_unique"].get<uint64_t>(), g["weight_bytes_referenced"].get<uint64_t>());
      EXPECT_LE(g["weight_bytes_referenced"].get<uint64_t>(), blobs);
    }
    EXPECT_EQ(gplan, plan);
  }
}

TEST_F(MethodsTest, InspectNumbersAddUpToTheFileSize) {
  for (const char* f : {"one_target.fcb", "four_targets.fcb", "four_unshared.fcb", "two_methods.fcb"}) {
    SCOPED_TRACE(f);
    ExpectInspectAddsUp(Inspect(f), Size(f));
  }
}

// The public InspectFile gives the numbers `fcb inspect --json` prints.
TEST_F(MethodsTest, InspectFileMatchesTheCli) {
  auto s = InspectFile(File("two_methods.fcb"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  const FileSummary& f = s.value();
  const json j = Inspect("two_methods.fcb");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(f.file_size, Size("two_methods.fcb"));
  EXPECT_EQ(f.file_size, j["file_size"].get<uint64_t>());
  EXPECT_EQ(f.producer, j["producer"].get<std::string>());
  EXPECT_EQ(f.methods, (std::vector<std::string>{"r224", "r320"}));
  EXPECT_EQ(f.targets.size(), 4u);
  ASSERT_EQ(f.contexts.size(), 8u);
  ASSERT_EQ(f.contexts.size(), j["contexts"].size());
  for (size_t c = 0; c < f.contexts.size(); ++c) {
    const auto& cs = f.contexts[c];
    const auto& cj = j["contexts"][c];
    EXPECT_EQ(cs.target, cj["target"].get<std::string>());
    EXPECT_EQ(cs.method, cj["method"].get<std::string>());
    EXPECT_EQ(cs.steps, cj["steps"].get<uint64_t>());
    EXPECT_EQ(cs.share.plan_bytes, cj["plan_bytes"].get<uint64_t>());
    EXPECT_EQ(cs.share.weight_bytes_referenced, cj["weight_bytes_referenced"].get<uint64_t>());
    ASSERT_EQ(cs.inputs.size(), 1u);
    EXPECT_EQ(cs.inputs[0].dtype, DType::kF32);
    EXPECT_EQ(cs.inputs[0].shape, (std::vector<int64_t>{1, 3, cs.method == "r224" ? 224 : 320,
                                                        cs.method == "r224" ? 224 : 320}));
  }
  const FileLayout& l = f.layout;
  EXPECT_EQ(l.header_bytes + l.metadata_bytes + l.metadata_padding_bytes + l.pool_blob_bytes + l.pool_padding_bytes,
            f.file_size);
  EXPECT_EQ(l.metadata_plan_bytes + l.metadata_other_bytes, l.metadata_bytes);
  ASSERT_EQ(f.per_method.size(), 2u);
  EXPECT_EQ(f.per_method[0].first, "r224");
  EXPECT_EQ(f.per_method[0].second.weight_bytes_referenced, f.weight_pool.bytes);
  EXPECT_REFUSED(InspectFile(File("missing.fcb")), StatusCode::kNotFound, "open failed");
}

TEST_F(MethodsTest, RunAndBenchNeedAMethodWhenThereAreSeveral) {
  const std::string cli = testing::CliPath();
  auto r = testing::RunCommand(cli + " bench " + File("two_methods.fcb") + " --iterations 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("r224"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("r320"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--method"), std::string::npos) << "the CLI names its flag: " << r.err;
  // The library names the methods and no flag.
  auto program = Program::Load(File("two_methods.fcb"));
  ASSERT_TRUE(program.ok()) << program.status().message();
  auto only = program.value()->default_method();
  EXPECT_REFUSED(only, StatusCode::kInvalidArgument, "the program has several methods; name the one to run");
  EXPECT_NE(only.status().message().find("r224, r320"), std::string::npos) << only.status().message();
  EXPECT_EQ(only.status().message().find("--"), std::string::npos) << only.status().message();
  r = testing::RunCommand(cli + " bench " + File("two_methods.fcb") + " --method r320 --iterations 1 --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = testing::RunCommand(cli + " run " + File("two_methods.fcb") + " --method nope");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("r320"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fcb
