// Execution::RunProfiled and `fcb profile`: the profiled run computes what Run
// computes, every step is reported once in order with its node and output,
// arithmetic counts follow the textbook formulas, and the CLI's table, JSON
// and trace file (the Chrome trace-event format) hold together. No assertion
// is on time values beyond their being non-negative and ordered.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "import/onnx_builder_test.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::TempDir;

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 37 % 23) - 11);
  return v;
}

// x [1,8,16,16] -> Conv 3x3 pad 1 (16 out) -> Relu -> Conv 3x3 groups 2
// (16 in, 16 out) -> GlobalAveragePool -> Flatten -> MatMul [16,32] -> y; and
// a [2,4,8] x b [2,8,5] -> MatMul of two activations -> z.
std::string WriteModel(const TempDir& dir) {
  using namespace fcb::testing;
  auto m = MakeModel(13);
  AddInput(m, "x", {1, 8, 16, 16});
  AddInput(m, "a", {2, 4, 8});
  AddInput(m, "b", {2, 8, 5});
  AddOutput(m, "y");
  AddOutput(m, "z");
  AddInit(m, FloatTensor("w1", {16, 8, 3, 3}, Ramp(16 * 8 * 9, 0.01f)));
  AddInit(m, FloatTensor("w2", {16, 8, 3, 3}, Ramp(16 * 8 * 9, 0.02f)));
  AddInit(m, FloatTensor("w3", {16, 32}, Ramp(16 * 32, 0.03f)));
  auto* c1 = AddNode(m, "Conv", {"x", "w1"}, {"c1"}, "conv1");
  AttrInts(c1, "pads", {1, 1, 1, 1});
  AddNode(m, "Relu", {"c1"}, {"r1"}, "relu1");
  auto* c2 = AddNode(m, "Conv", {"r1", "w2"}, {"c2"}, "conv2");
  AttrInts(c2, "pads", {1, 1, 1, 1});
  AttrInt(c2, "group", 2);
  AddNode(m, "GlobalAveragePool", {"c2"}, {"p"}, "pool");
  AddNode(m, "Flatten", {"p"}, {"f"}, "flatten");
  AddNode(m, "MatMul", {"f", "w3"}, {"y"}, "fc");
  AddNode(m, "MatMul", {"a", "b"}, {"z"}, "attention_like");
  const std::string path = dir.File("model.onnx");
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

class ProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CompileSpec spec;
    spec.targets = {"all"};
    auto r = Compile(WriteModel(dir_), spec, dir_.File("model.fcb"));
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  TempDir dir_;
};

TEST_F(ProfileTest, SameResultsAsRunAndFormulaFlopsOnEveryTarget) {
  testing::ForEachRunnableTarget(dir_.File("model.fcb"), [&](const std::string& target,
                                                             const std::shared_ptr<const Program>& p) {
    auto ex = Execution::Create(p, "main", 2);
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    for (const auto& in : ex.value()->info().inputs) {
      std::vector<float> v = Ramp(in.bytes() / 4, 0.1f);
      ASSERT_TRUE(ex.value()->SetInput(in.name, v.data(), in.bytes()).ok());
    }
    ASSERT_TRUE(ex.value()->Run().ok());
    std::vector<std::vector<uint8_t>> want;
    for (size_t i = 0; i < ex.value()->info().outputs.size(); ++i) {
      const auto* o = static_cast<const uint8_t*>(ex.value()->output_data(i));
      want.emplace_back(o, o + ex.value()->info().outputs[i].bytes());
      std::memset(const_cast<uint8_t*>(o), 0xff, want.back().size());  // so a profiled run must rewrite them
      // (and the inputs, set once, must still hold: Run never overwrites them)
    }
    std::vector<StepTiming> steps;
    ASSERT_TRUE(ex.value()->RunProfiled(&steps).ok());
    for (size_t i = 0; i < want.size(); ++i) {
      const auto* o = static_cast<const uint8_t*>(ex.value()->output_data(i));
      EXPECT_EQ(std::vector<uint8_t>(o, o + want[i].size()), want[i]) << target << " output " << i;
    }
    auto summary = InspectFile(dir_.File("model.fcb"));
    ASSERT_TRUE(summary.ok());
    size_t declared = 0;
    for (const auto& c : summary.value().contexts)
      if (c.target == target) declared = c.steps;
    ASSERT_EQ(steps.size(), declared) << target;
    // Every node that computes appears; times are ordered and non-negative.
    std::map<std::string, uint64_t> flops_by_node;
    double end = 0;
    for (const StepTiming& s : steps) {
      EXPECT_FALSE(s.op.empty());
      EXPECT_GE(s.ms, 0.0);
      EXPECT_GE(s.start_ms + 1e-9, end) << "steps run one after another";
      end = s.start_ms + s.ms;
      if (s.flops) flops_by_node[s.node] += s.flops;
    }
    // 2 x N x OH x OW x OC x KH x KW x IC/groups; 2 x M x N x K.
    EXPECT_EQ(flops_by_node["conv1"], uint64_t{2} * 16 * 16 * 16 * 3 * 3 * 8) << target;
    EXPECT_EQ(flops_by_node["conv2"], uint64_t{2} * 16 * 16 * 16 * 3 * 3 * (16 / 2)) << target;  // 16 in, 2 groups
    EXPECT_EQ(flops_by_node["fc"], uint64_t{2} * 1 * 32 * 16) << target;
    EXPECT_EQ(flops_by_node["attention_like"], uint64_t{2} * 2 * 4 * 5 * 8) << target;
  });
  std::vector<StepTiming>* null_steps = nullptr;
  auto p = Program::Load(dir_.File("model.fcb"));
  auto ex = Execution::Create(p.value(), "main", 1);
  EXPECT_EQ(ex.value()->RunProfiled(null_steps).code(), StatusCode::kInvalidArgument);
}

TEST_F(ProfileTest, CliTableJsonAndTraceHoldTogether) {
  const std::string fcb = testing::CliPath(), model = dir_.File("model.fcb"), trace = dir_.File("t.json");
  auto r = RunCommand(fcb + " profile " + model + " --iterations 4 --json --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  const auto& steps = j["steps"];
  ASSERT_FALSE(steps.empty());
  double percent = 0, sum = 0;
  std::map<std::string, int> per_op;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["step"].get<size_t>(), i);
    for (const char* k : {"op", "node", "output", "dtype", "ms", "percent"}) EXPECT_TRUE(steps[i].contains(k)) << k;
    percent += steps[i]["percent"].get<double>();
    sum += steps[i]["ms"].get<double>();
    per_op[steps[i]["op"].get<std::string>()] += 1;
  }
  EXPECT_NEAR(percent, 100.0, 0.01);
  EXPECT_NEAR(sum, j["step_median_sum_ms"].get<double>(), 1e-9);
  bool conv_rate = false;
  for (const auto& s : steps)
    if (s["node"] == "conv1") conv_rate = s.contains("gflops_per_s");
  EXPECT_TRUE(conv_rate) << "a convolution step reports its GFLOP/s";
  int op_steps = 0;
  for (const auto& o : j["ops"]) {
    op_steps += o["steps"].get<int>();
    EXPECT_EQ(per_op[o["op"].get<std::string>()], o["steps"].get<int>()) << o["op"];
  }
  EXPECT_EQ(op_steps, static_cast<int>(steps.size()));

  // The trace: the trace-event format's JSON object form, complete events.
  std::ifstream f(trace);
  ASSERT_TRUE(f.good());
  json t = json::parse(f);
  ASSERT_TRUE(t.contains("traceEvents"));
  ASSERT_TRUE(t["traceEvents"].is_array());
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  size_t complete = 0;
  double last_end = 0;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e["name"].is_string());
    ASSERT_TRUE(e["ph"].is_string());
    ASSERT_TRUE(e["pid"].is_number_integer());
    ASSERT_TRUE(e["tid"].is_number_integer());
    if (e["ph"] == "M") {
      EXPECT_TRUE(e["args"]["name"].is_string());
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    ASSERT_TRUE(e["ts"].is_number());
    ASSERT_TRUE(e["dur"].is_number());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_GE(e["ts"].get<double>() + 1e-6, last_end) << "events of one track do not overlap";
    last_end = e["ts"].get<double>() + e["dur"].get<double>();
    EXPECT_EQ(e["args"]["step"].get<size_t>(), complete % steps.size());
    EXPECT_EQ(e["args"]["node"], steps[complete % steps.size()]["node"]);
    ++complete;
  }
  EXPECT_EQ(complete, 4 * steps.size()) << "every step of every profiled run";

  r = RunCommand(fcb + " profile " + model + " --iterations 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("per op:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("conv1"), std::string::npos) << r.out;

  r = RunCommand(fcb + " profile " + model + " --iterations 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = RunCommand(fcb + " profile " + model + " --trace " + dir_.File("no/such/dir/t.json"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot write the trace file"), std::string::npos) << r.err;
  EXPECT_FALSE(testing::FileExists(dir_.File("no/such/dir/t.json.tmp")));
}

}  // namespace
}  // namespace fcb
