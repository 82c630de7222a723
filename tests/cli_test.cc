// The CLI contract (README "Command line"): subcommands, flags, JSON outputs, exit status
// and "error: ..." messages.
#include <gtest/gtest.h>

#include <cstring>

#include <fstream>

#include <nlohmann/json.hpp>

#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "ops/names.h"
#include "test_util.h"

namespace fcb {
namespace {

using nlohmann::json;
using testing::CliPath;
using testing::RunCommand;
using testing::TempDir;

const std::string kDemo = FCB_SOURCE_DIR "/models/demo_cnn.onnx";

std::string Fcb(const std::string& args) { return CliPath() + " " + args; }

TEST(Cli, TargetsJson) {
  auto r = RunCommand(Fcb("targets --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["targets"].size(), 8u);
  std::vector<std::string> names;
  for (const auto& t : j["targets"]) names.push_back(t["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"generic", "x86-64-v2", "x86-64-v3", "x86-64-v4", "armv8-a",
                                             "armv8.2-a", "armv8.2-a+sve", "armv9-a"}));
  EXPECT_TRUE(j["targets"][0]["host_can_run"].get<bool>());
  // This x86-64 host lists the AArch64 targets as not runnable here, saying why.
  for (const auto& t : j["targets"]) {
    const std::string arch = t["arch"];
    if (arch == "aarch64") {
      EXPECT_FALSE(t["host_can_run"].get<bool>()) << t["name"];
      EXPECT_NE(t["why_not"].get<std::string>().find("aarch64"), std::string::npos) << t["why_not"];
    } else {
      EXPECT_TRUE(arch == "any" || arch == "x86-64") << arch;
    }
  }
  r = RunCommand(Fcb("targets"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("armv8.2-a+sve  aarch64  no"), std::string::npos) << r.out;
  EXPECT_FALSE(j["auto"].get<std::string>().empty());
}

TEST(Cli, OpsJsonListsTheCnnOperators) {
  auto r = RunCommand(Fcb("ops --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  std::set<std::string> ops(j["operators"].begin(), j["operators"].end());
  for (const char* op : {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid",
                         "HardSigmoid", "HardSwish", "Tanh", "MaxPool", "AveragePool", "GlobalAveragePool",
                         "Flatten", "Reshape", "Transpose", "Concat", "Softmax", "ReduceMean", "Squeeze",
                         "Unsqueeze", "Identity", "Dropout", "BatchNormalization"})
    EXPECT_TRUE(ops.count(op)) << op;
  EXPECT_FALSE(ops.count(std::string(fcb::ops::opname::ConvNhwc))) << "internal ops are not ONNX operators";
}

// `fcb targets` and `fcb ops` print what the public calls return.
TEST(Cli, TargetsAndOpsAreThePublicLists) {
  auto r = RunCommand(Fcb("targets --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  const auto targets = ListTargets();
  ASSERT_EQ(j["targets"].size(), targets.size());
  int autos = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    EXPECT_EQ(j["targets"][i]["name"], targets[i].name);
    EXPECT_EQ(j["targets"][i]["description"], targets[i].description);
    EXPECT_EQ(j["targets"][i]["host_can_run"].get<bool>(), targets[i].host_can_run);
    if (targets[i].auto_choice) {
      ++autos;
      EXPECT_EQ(j["auto"], targets[i].name);
      EXPECT_TRUE(targets[i].host_can_run);
      for (const auto& t : targets)
        if (t.host_can_run) EXPECT_LE(t.score, targets[i].score) << t.name;
    }
  }
  EXPECT_EQ(autos, 1);

  r = RunCommand(Fcb("ops --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  std::vector<std::string> onnx;
  bool has_internal = false;
  for (const auto& op : ListOperators()) {
    EXPECT_LE(op.min_inputs, op.max_inputs) << op.name;
    EXPECT_LE(op.min_outputs, op.max_outputs) << op.name;
    if (op.internal) has_internal = true;
    else onnx.push_back(op.name);
  }
  EXPECT_TRUE(has_internal) << "ConvNhwc and friends are listed, marked internal";
  EXPECT_EQ(j["operators"].get<std::vector<std::string>>(), onnx);
  EXPECT_EQ(j["count"].get<size_t>(), onnx.size());
}

TEST(Cli, CompileInspectRunBench) {
  TempDir tmp;
  const std::string out = tmp.File("demo.fcb");
  auto r = RunCommand(Fcb("compile " + kDemo + " -o " + out + " --target all --input-shape input=1x3x64x64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "") << "compile is quiet when not on a terminal";

  r = RunCommand(Fcb("inspect " + out + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["targets"].size(), ListTargets().size()) << "--target all: every target of every architecture";
  EXPECT_EQ(j["methods"], json::array({"main"}));
  EXPECT_EQ(j["file_size"].get<uint64_t>(), testing::ReadBytes(out).size());
  EXPECT_GE(j["plan_version"].get<uint32_t>(), 2u) << "the plan encoding version is shown";
  for (const auto& c : j["contexts"]) {
    // The demo model has dense convolutions, whose GEMM path needs scratch.
    EXPECT_GT(c["scratch_bytes_per_thread"].get<uint64_t>(), 0u) << c["target"];
    EXPECT_EQ(c["scratch_bytes_per_thread"].get<uint64_t>() % 64, 0u);
  }

  r = RunCommand(Fcb("run " + out + " --output-dir " + tmp.File("o") + " --target x86-64-v2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("target: x86-64-v2"), std::string::npos) << r.out;
  auto o = ReadNpy(tmp.File("o/output.npy"));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o.value().shape, (std::vector<int64_t>{1, 10}));

  // The file holds the AArch64 contexts too; forcing one on this x86-64 host
  // says why it cannot run, what the file holds and what the host supports.
  r = RunCommand(Fcb("run " + out + " --output-dir " + tmp.File("o") + " --target armv8.2-a+sve"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("target 'armv8.2-a+sve' cannot run on this host (it holds aarch64 code"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("armv9-a"), std::string::npos) << "lists what the file holds: " << r.err;
  EXPECT_NE(r.err.find("this host supports [x86-64-v"), std::string::npos) << r.err;

  r = RunCommand(Fcb("bench " + out + " --iterations 3 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  for (const char* k : {"load_ms", "first_run_ms", "min_ms", "median_ms", "max_ms"}) EXPECT_TRUE(j.contains(k)) << k;
  // What was timed: the runs asked for, on the target "auto" picks from a file of every target.
  EXPECT_EQ(j["iterations"].get<int>(), 3);
  for (const auto& t : ListTargets())
    if (t.auto_choice) EXPECT_EQ(j["target"].get<std::string>(), t.name);
  r = RunCommand(Fcb("bench " + out + " --iterations 0"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--iterations must be at least 1"), std::string::npos) << r.err;
}

TEST(Cli, ForcedTargetNotInFileListsBoth) {
  TempDir tmp;
  const std::string out = tmp.File("g.fcb");
  auto r = RunCommand(Fcb("compile " + kDemo + " -o " + out + " --target generic --input-shape input=1x3x64x64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(Fcb("run " + out + " --target x86-64-v3 --output-dir " + tmp.File("o")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("file holds [generic]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("host supports ["), std::string::npos) << r.err;
}

TEST(Cli, SymbolicInputWithoutShapeNamesTheFix) {
  TempDir tmp;
  auto r = RunCommand(Fcb("compile " + kDemo + " -o " + tmp.File("x.fcb") + " --target generic"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("--input-shape input="), std::string::npos) << "the CLI names its flag: " << r.err;
  EXPECT_EQ(r.err.find("input_shapes"), std::string::npos) << r.err;
  EXPECT_FALSE(testing::FileExists(tmp.File("x.fcb"))) << "a failed compile leaves no file";
  // Both ways out, in flag form: fix the dim, or bound it.
  EXPECT_NE(r.err.find("fix it with --input-shape, e.g. --input-shape input=1x3x64x64, or bound it, e.g. "
                       "--input-shape input=1..512x3x64x64"),
            std::string::npos)
      << r.err;
}

// --input-shape with ranges: a degenerate range is the fixed size (the same
// file byte for byte); a range on a dim the model fixes names the model's
// size; a valid range compiles one method that runs at any batch in it (inspect
// shows its input's range and its output's shape over the batch), writes
// outputs of the run's shape, and refuses a batch outside it naming input,
// dim, symbol and range. Messages use the flag's words.
TEST(Cli, InputShapeRanges) {
  TempDir tmp;
  auto r = RunCommand(Fcb("compile " + kDemo + " -o " + tmp.File("fixed.fcb") + " --target generic --input-shape input=2x3x64x64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(Fcb("compile " + kDemo + " -o " + tmp.File("same.fcb") + " --target generic --input-shape input=2..2x3x64..64x64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadBytes(tmp.File("fixed.fcb")), testing::ReadBytes(tmp.File("same.fcb")));

  r = RunCommand(Fcb("compile " + kDemo + " -o " + tmp.File("x.fcb") + " --target generic --input-shape input=1x3x32..64x64"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--input-shape input=1x3x32..64x64 gives dim 2 of input 'input' the range 32..64, but the model "
                       "fixes that dim to 64; give it that size, e.g. --input-shape input=1x3x64x64"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("input_shapes"), std::string::npos) << r.err;

  r = RunCommand(Fcb("compile " + kDemo + " -o " + tmp.File("x.fcb") + " --target generic --input-shape main:input=1..8x3x64x64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(Fcb("inspect " + tmp.File("x.fcb")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("input 'input' float32 [1..8]x3x64x64 (batch = 1..8)"), std::string::npos) << r.out;
  // The output's shape over the symbol, worked out from the plan.
  EXPECT_NE(r.out.find("output 'output' float32 batchx10\n"), std::string::npos) << r.out;
  // A batch of 3 within 1..8, from a .npy file; the output is 3 rows.
  NpyArray x;
  x.dtype = static_cast<int32_t>(DType::kF32);
  x.shape = {3, 3, 64, 64};
  x.data.assign(3 * 3 * 64 * 64 * 4, 0);
  ASSERT_TRUE(WriteNpy(tmp.File("x3.npy"), x).ok());
  r = RunCommand(Fcb("run " + tmp.File("x.fcb") + " --input input=" + tmp.File("x3.npy") + " --output-dir " +
                     tmp.File("out3")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto y = ReadNpy(tmp.File("out3") + "/output.npy");
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(y.value().shape[0], 3);
  // A batch of 9 is outside 1..8.
  x.shape[0] = 9;
  x.data.assign(9 * 3 * 64 * 64 * 4, 0);
  ASSERT_TRUE(WriteNpy(tmp.File("x9.npy"), x).ok());
  r = RunCommand(Fcb("run " + tmp.File("x.fcb") + " --input input=" + tmp.File("x9.npy") + " --output-dir " +
                     tmp.File("out9")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("input 'input' of method 'main' is given the shape 9x3x64x64, but its dim 0 is the symbol "
                       "'batch' with the range 1..8 it was compiled for"),
            std::string::npos)
      << r.err;

  // The same range through a JSON spec file: the same file.
  std::ofstream(tmp.File("spec.json")) << R"({"targets": "generic", "input_shapes": {"input": [[1, 8], 3, 64, 64]}})";
  r = RunCommand(Fcb("compile " + kDemo + " -o " + tmp.File("y.fcb") + " --spec " + tmp.File("spec.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadBytes(tmp.File("x.fcb")), testing::ReadBytes(tmp.File("y.fcb")));
}

// A bfloat16 output (NumPy has no such dtype) is written as its uint16 bit
// patterns, with a warning saying how to read it, not refused.
TEST(Cli, BFloat16OutputsAreWrittenAsTheirBits) {
  TempDir tmp;
  const std::string model =
      std::string(FCB_SOURCE_DIR) + "/build/conformance-data/node/test_cast_FLOAT_to_BFLOAT16/model.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run conformance/generate.sh (scripts/test.sh does)";
  auto r = RunCommand(Fcb("compile " + model + " -o " + tmp.File("cast.fcb") + " --target generic"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  NpyArray x;
  x.dtype = static_cast<int32_t>(DType::kF32);
  x.shape = {3, 4};
  const std::vector<float> values = {1.f, -2.5f, 3.14159f, 1e-3f, 65504.f, -0.f, 1.00390625f, 7.f, 0.1f, 100.f, -1e5f, 2.f};
  x.data.resize(values.size() * 4);
  std::memcpy(x.data.data(), values.data(), x.data.size());
  ASSERT_TRUE(WriteNpy(tmp.File("x.npy"), x).ok());
  r = RunCommand(Fcb("run " + tmp.File("cast.fcb") + " --input input=" + tmp.File("x.npy") + " --output-dir " +
                     tmp.File("out")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("is bfloat16, which NumPy has no dtype for: written as its uint16 bit patterns"),
            std::string::npos)
      << r.err;
  auto y = ReadNpy(tmp.File("out") + "/output.npy");
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y.value().dtype, static_cast<int32_t>(DType::kU16));
  ASSERT_EQ(y.value().shape, (std::vector<int64_t>{3, 4}));
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    const uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;  // round half to even
    uint16_t got;
    std::memcpy(&got, y.value().data.data() + 2 * i, 2);
    EXPECT_EQ(got, static_cast<uint16_t>(rounded)) << "element " << i << " (" << values[i] << ")";
  }
}

TEST(Cli, WrongInputShapeIsAnError) {
  TempDir tmp;
  const std::string out = tmp.File("d.fcb");
  ASSERT_EQ(RunCommand(Fcb("compile " + kDemo + " -o " + out + " --target generic --input-shape input=1x3x64x64")).exit_code, 0);
  NpyArray a;
  a.shape = {1, 3, 32, 32};
  a.data.resize(3 * 32 * 32 * 4);
  ASSERT_TRUE(WriteNpy(tmp.File("small.npy"), a).ok());
  auto r = RunCommand(Fcb("run " + out + " --input input=" + tmp.File("small.npy") + " --output-dir " + tmp.File("o")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("1x3x64x64"), std::string::npos) << r.err;
}

TEST(Cli, MissingFileAndBadUsage) {
  auto r = RunCommand(Fcb("inspect /nonexistent/x.fcb"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  r = RunCommand(Fcb("frobnicate"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace fcb
