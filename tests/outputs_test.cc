// The spec's "outputs" (fcb compile --keep-output): a method keeps only the
// outputs named for it, in the model's order; the rest become internal and
// dead-node elimination drops what only they needed.
//  - fusion_mix (eight independent int8 branches, each an output): keeping
//    two of them leaves fewer plan steps, and on every target the host runs the
//    two equal the full compile's values and ONNX Runtime's, byte for byte;
//  - dyn_segnet (float scores and their int64 ArgMax): keeping the scores
//    drops the ArgMax; the scores match the full compile and ONNX Runtime;
//  - "METHOD:NAME" selects in one method and leaves the others whole;
//  - a state-bound model keeps generating ONNX Runtime's tokens when its
//    logits and presents are kept, and dropping a present is refused;
//  - refusals name the method, the name and the outputs there are, and write
//    nothing; the CLI's --keep-output and the C API's JSON spec do the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "fcb/fcb.h"
#include "fcb/fcb_c.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

std::vector<std::string> OutputNames(const std::shared_ptr<const Program>& p, const std::string& method) {
  std::vector<std::string> names;
  auto m = p->method(method);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (m.ok())
    for (const auto& o : m.value().outputs) names.push_back(o.name);
  return names;
}

std::vector<float> AsFloats(const void* p, size_t bytes) {
  std::vector<float> v(bytes / 4);
  std::memcpy(v.data(), p, v.size() * 4);
  return v;
}

// Runs `method` of `p` on one input; returns its outputs by name.
std::map<std::string, std::vector<uint8_t>> RunOnce(const std::shared_ptr<const Program>& p, const std::string& method,
                                                    const NpyArray& input, int threads) {
  std::map<std::string, std::vector<uint8_t>> out;
  auto ex = Execution::Create(p, method, threads);
  EXPECT_TRUE(ex.ok()) << ex.status().message();
  if (!ex.ok()) return out;
  Status s = ex.value()->SetInput("input", input.data.data(), input.data.size());
  EXPECT_TRUE(s.ok()) << s.message();
  s = ex.value()->Run();
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return out;
  const auto& info = ex.value()->info();
  for (size_t i = 0; i < info.outputs.size(); ++i) {
    const auto* d = static_cast<const uint8_t*>(ex.value()->output_data(i));
    out[info.outputs[i].name].assign(d, d + ex.value()->output_bytes(i));
  }
  return out;
}

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TestDataDir(); }
  // The model, its input and its ONNX Runtime references, or a failure.
  void Need(const std::string& name) {
    for (const std::string f : {dir_ + "/" + name + ".onnx", dir_ + "/" + name + ".input.npy"})
      ASSERT_TRUE(testing::FileExists(f)) << f << " is missing: run scripts/prepare_testdata.sh";
    auto in = ReadNpy(dir_ + "/" + name + ".input.npy");
    ASSERT_TRUE(in.ok()) << in.status().message();
    input_ = in.value();
  }
  NpyArray Ref(const std::string& model, const std::string& output) {
    auto r = ReadNpy(dir_ + "/" + model + ".ref/" + output + ".npy");
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value() : NpyArray{};
  }
  CompileSpec Spec() const {
    CompileSpec spec;
    spec.targets = {"all"};
    spec.input_shapes["input"].assign(input_.shape.begin(), input_.shape.end());
    return spec;
  }
  std::string dir_;
  NpyArray input_;
};

TEST_F(OutputsTest, KeptIntegerOutputsEqualTheFullCompileAndOnnxRuntimeOnEveryTarget) {
  ASSERT_NO_FATAL_FAILURE(Need("fusion_mix"));
  TempDir tmp;
  const std::string model = dir_ + "/fusion_mix.onnx";
  CompileSpec full = Spec(), kept = Spec();
  // Listed against the model's order: the method keeps the model's order.
  kept.outputs = {"qlinear_matmul", "conv_integer"};
  auto r1 = Compile(model, full, tmp.File("full.fcb"));
  ASSERT_TRUE(r1.ok()) << r1.status().message();
  auto r2 = Compile(model, kept, tmp.File("kept.fcb"));
  ASSERT_TRUE(r2.ok()) << r2.status().message();

  // What only the dropped outputs needed is gone from the plan.
  const size_t full_steps = testing::PlanSteps(tmp.File("full.fcb")).size();
  const size_t kept_steps = testing::PlanSteps(tmp.File("kept.fcb")).size();
  std::printf("[outputs] fusion_mix: %zu steps with every output, %zu with two\n", full_steps, kept_steps);
  EXPECT_GT(full_steps, 0u);
  EXPECT_LT(kept_steps * 2, full_steps);

  int targets_run = 0;
  testing::ForEachRunnableTarget(tmp.File("kept.fcb"), [&](const std::string& target,
                                                          const std::shared_ptr<const Program>& p) {
    SCOPED_TRACE(target);
    ++targets_run;
    EXPECT_EQ(OutputNames(p, "main"), (std::vector<std::string>{"conv_integer", "qlinear_matmul"}));
    LoadOptions lo;
    lo.target = target;
    auto whole = Program::Load(tmp.File("full.fcb"), lo);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    EXPECT_EQ(OutputNames(whole.value(), "main").size(), 8u);
    for (int threads : {1, 2}) {
      auto got = RunOnce(p, "main", input_, threads);
      auto want = RunOnce(whole.value(), "main", input_, threads);
      ASSERT_EQ(got.size(), 2u);
      for (const char* name : {"conv_integer", "qlinear_matmul"}) {
        ASSERT_TRUE(got.count(name) && want.count(name)) << name;
        EXPECT_EQ(got[name], want[name]) << name << " differs from the full compile, " << threads << " threads";
        const NpyArray ref = Ref("fusion_mix", name);
        EXPECT_EQ(got[name], ref.data) << name << " differs from ONNX Runtime's, " << threads << " threads";
      }
    }
    // A dropped output is no output of the method.
    auto ex = Execution::Create(p, "main", 1);
    ASSERT_TRUE(ex.ok());
    for (const auto& o : ex.value()->info().outputs) EXPECT_NE(o.name, "qdq_conv");
  });
  EXPECT_GT(targets_run, 0);
}

TEST_F(OutputsTest, KeptFloatOutputMatchesAndTheArgMaxIsGone) {
  ASSERT_NO_FATAL_FAILURE(Need("dyn_segnet"));
  TempDir tmp;
  const std::string model = dir_ + "/dyn_segnet.onnx";
  CompileSpec full = Spec(), kept = Spec();
  kept.outputs = {"output"};
  ASSERT_TRUE(Compile(model, full, tmp.File("full.fcb")).ok());
  auto r = Compile(model, kept, tmp.File("kept.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto has_argmax = [](const std::vector<testing::PlanStep>& steps) {
    return std::any_of(steps.begin(), steps.end(), [](const testing::PlanStep& s) { return s.op == "ArgMax"; });
  };
  EXPECT_TRUE(has_argmax(testing::PlanSteps(tmp.File("full.fcb"))));
  EXPECT_FALSE(has_argmax(testing::PlanSteps(tmp.File("kept.fcb"))));
  const NpyArray ref = Ref("dyn_segnet", "output");
  testing::ForEachRunnableTarget(tmp.File("kept.fcb"), [&](const std::string& target,
                                                          const std::shared_ptr<const Program>& p) {
    SCOPED_TRACE(target);
    EXPECT_EQ(OutputNames(p, "main"), std::vector<std::string>{"output"});
    LoadOptions lo;
    lo.target = target;
    auto whole = Program::Load(tmp.File("full.fcb"), lo);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    auto got = RunOnce(p, "main", input_, 2);
    auto want = RunOnce(whole.value(), "main", input_, 2);
    ASSERT_EQ(got.size(), 1u);
    const auto g = AsFloats(got["output"].data(), got["output"].size());
    const auto d_full = testing::Compare(g, AsFloats(want["output"].data(), want["output"].size()));
    const auto d_ort = testing::Compare(g, AsFloats(ref.data.data(), ref.data.size()));
    EXPECT_LT(d_full.rel_l2, 1e-6) << "against the full compile (max abs " << d_full.max_abs << ")";
    EXPECT_LT(d_ort.rel_l2, 1e-3) << "against ONNX Runtime (max abs " << d_ort.max_abs << ")";
  });
}

TEST_F(OutputsTest, MethodScopedEntriesLeaveOtherMethodsWhole) {
  ASSERT_NO_FATAL_FAILURE(Need("fusion_mix"));
  TempDir tmp;
  const std::string model = dir_ + "/fusion_mix.onnx";
  CompileSpec spec = Spec();
  spec.targets = {"generic"};
  spec.outputs = {"small:qdq_conv", "small:qdq_lookup"};
  auto r = CompileMethods({{"small", model}, {"whole", model}}, spec, tmp.File("two.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto p = Program::Load(tmp.File("two.fcb"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(OutputNames(p.value(), "small"), (std::vector<std::string>{"qdq_conv", "qdq_lookup"}));
  EXPECT_EQ(OutputNames(p.value(), "whole").size(), 8u);
  auto small = RunOnce(p.value(), "small", input_, 1);
  auto whole = RunOnce(p.value(), "whole", input_, 1);
  for (const char* name : {"qdq_conv", "qdq_lookup"}) {
    EXPECT_EQ(small[name], whole[name]) << name;
    EXPECT_EQ(small[name], Ref("fusion_mix", name).data) << name;
  }
}

// A KV-cache model (past and present of one shape, bound as state): keeping
// logits and the presents generates ONNX Runtime's tokens; dropping a
// present that a state pair needs is refused.
TEST_F(OutputsTest, StatePairsKeepTheirOutputs) {
  const std::string model = dir_ + "/gqa_decoder_static.onnx";
  for (const std::string f : {model, dir_ + "/gqa_decoder_static.prompt.npy", dir_ + "/gqa_decoder_static.ref/tokens.npy"})
    ASSERT_TRUE(testing::FileExists(f)) << f << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  CompileSpec spec;
  spec.targets = {"generic", "x86-64-v3"};
  spec.input_shapes["prefill:input_ids"] = {1, {1, 16}};
  spec.input_shapes["decode:input_ids"] = {1, 1};
  spec.state_auto = true;

  CompileSpec drop = spec;
  drop.outputs = {"logits", "present_key_0", "present_value_0", "present_key_1"};
  auto refused = CompileMethods({{"prefill", model}, {"decode", model}}, drop, tmp.File("bad.fcb"));
  ASSERT_REFUSED(refused, StatusCode::kInvalidArgument, "drops output 'present_value_1'");
  for (const char* m : {"method 'prefill'", "past_value_1", "\"state\": \"auto\"", "'prefill:present_value_1'"})
    EXPECT_NE(refused.status().message().find(m), std::string::npos) << m << " not in: " << refused.status().message();
  EXPECT_FALSE(testing::FileExists(tmp.File("bad.fcb")));
  CompileSpec named = spec;
  named.state_auto = false;
  named.state = {{"past_key_0", "present_key_0"}, {"past_value_0", "present_value_0"},
                 {"past_key_1", "present_key_1"}, {"past_value_1", "present_value_1"}};
  named.outputs = {"logits", "present_key_0", "present_value_0", "present_value_1"};
  EXPECT_REFUSED(CompileMethods({{"prefill", model}, {"decode", model}}, named, tmp.File("bad.fcb")),
                 StatusCode::kInvalidArgument, "drops output 'present_key_1', which carries the next value of the "
                                               "state input 'past_key_1'");

  // Keeping what the loop reads: generation is unchanged. The model's outputs
  // are logits and the four presents; naming them all but in another order
  // gives the same method.
  spec.outputs = {"present_value_1", "present_key_1", "present_value_0", "present_key_0", "logits"};
  auto r = CompileMethods({{"prefill", model}, {"decode", model}}, spec, tmp.File("kept.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto p = Program::Load(tmp.File("kept.fcb"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(OutputNames(p.value(), "decode"),
            (std::vector<std::string>{"logits", "present_key_0", "present_value_0", "present_key_1", "present_value_1"}));
  auto prompt_npy = ReadNpy(dir_ + "/gqa_decoder_static.prompt.npy");
  auto tokens_npy = ReadNpy(dir_ + "/gqa_decoder_static.ref/tokens.npy");
  ASSERT_TRUE(prompt_npy.ok() && tokens_npy.ok());
  std::string prompt, want;
  for (size_t i = 0; i + 8 <= prompt_npy.value().data.size(); i += 8) {
    int64_t t;
    std::memcpy(&t, prompt_npy.value().data.data() + i, 8);
    prompt += (prompt.empty() ? "" : ",") + std::to_string(t);
  }
  size_t n = 0;
  for (size_t i = 0; i + 8 <= tokens_npy.value().data.size(); i += 8, ++n) {
    int64_t t;
    std::memcpy(&t, tokens_npy.value().data.data() + i, 8);
    want += " " + std::to_string(t);
  }
  for (const std::string& target : testing::RunnableTargetNames(testing::ApiTargets())) {
    if (target != "generic" && target != "x86-64-v3") continue;
    SCOPED_TRACE(target);
    auto c = testing::RunCommand(testing::CliPath() + " generate " + tmp.File("kept.fcb") + " --prompt " + prompt +
                                 " --max-new " + std::to_string(n) + " --target " + target);
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(c.out.substr(0, c.out.find('\n')), "tokens:" + want);
  }
}

TEST_F(OutputsTest, RefusalsNameTheMethodTheNameAndTheOutputs) {
  ASSERT_NO_FATAL_FAILURE(Need("fusion_mix"));
  TempDir tmp;
  const std::string model = dir_ + "/fusion_mix.onnx";
  const std::string out = tmp.File("out.fcb");
  CompileSpec spec = Spec();
  spec.targets = {"generic"};

  spec.outputs = {"qdq_conv", "qdq_gemmm"};
  auto unknown = Compile(model, spec, out);
  ASSERT_REFUSED(unknown, StatusCode::kInvalidArgument, "no output 'qdq_gemmm'");
  for (const char* m : {"method 'main'", "its outputs are: conv_integer, matmul_integer, qlinear_conv_s8, "
                                         "qlinear_depthwise, qlinear_matmul, qdq_conv, qdq_gemm, qdq_lookup"})
    EXPECT_NE(unknown.status().message().find(m), std::string::npos) << m << " not in: " << unknown.status().message();

  // A plain name applies to every method: one without it refuses, saying how to name one method.
  CompileSpec two = spec;
  auto segnet_input = ReadNpy(dir_ + "/dyn_segnet.input.npy");
  ASSERT_TRUE(segnet_input.ok()) << segnet_input.status().message();
  two.input_shapes.clear();
  two.input_shapes["main:input"].assign(input_.shape.begin(), input_.shape.end());
  two.input_shapes["other:input"].assign(segnet_input.value().shape.begin(), segnet_input.value().shape.end());
  two.outputs = {"qdq_conv"};
  auto plain = CompileMethods({{"main", model}, {"other", dir_ + "/dyn_segnet.onnx"}}, two, out);
  ASSERT_REFUSED(plain, StatusCode::kInvalidArgument, "method 'other': no output 'qdq_conv'");
  EXPECT_NE(plain.status().message().find("write METHOD:NAME for one method"), std::string::npos)
      << plain.status().message();

  spec.outputs = {"mian:qdq_conv"};
  auto method = Compile(model, spec, out);
  ASSERT_REFUSED(method, StatusCode::kInvalidArgument, "names the method 'mian', which is not compiled");
  EXPECT_NE(method.status().message().find("the methods are 'main'"), std::string::npos) << method.status().message();

  spec.outputs = {"qdq_conv", "main:qdq_conv"};
  EXPECT_REFUSED(Compile(model, spec, out), StatusCode::kInvalidArgument,
                 "output 'qdq_conv' is named twice, by 'qdq_conv' and 'main:qdq_conv'");
  spec.outputs = {"qdq_conv", "qdq_conv"};
  EXPECT_REFUSED(Compile(model, spec, out), StatusCode::kInvalidArgument,
                 "\"outputs\" lists 'qdq_conv' more than once");
  for (const std::string bad : {"", "main:", ":qdq_conv"}) {
    spec.outputs = {bad};
    EXPECT_REFUSED(Compile(model, spec, out), StatusCode::kInvalidArgument, "with an empty name") << bad;
  }
  EXPECT_FALSE(testing::FileExists(out));
}

TEST_F(OutputsTest, CliKeepOutputReplacesTheSpecsList) {
  ASSERT_NO_FATAL_FAILURE(Need("fusion_mix"));
  TempDir tmp;
  const std::string model = dir_ + "/fusion_mix.onnx";
  std::ofstream(tmp.File("spec.json")) << R"({"targets": "generic", "input_shapes": {"input": [1, 8, 10, 10]},
                                             "outputs": ["qdq_conv", "qdq_gemm"]})";
  const std::string base = testing::CliPath() + " compile " + model + " --spec " + tmp.File("spec.json") + " -o ";
  auto a = testing::RunCommand(base + tmp.File("a.fcb"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = testing::RunCommand(base + tmp.File("b.fcb") + " --keep-output qlinear_depthwise --keep-output main:qdq_lookup");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto pa = Program::Load(tmp.File("a.fcb"));
  auto pb = Program::Load(tmp.File("b.fcb"));
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(OutputNames(pa.value(), "main"), (std::vector<std::string>{"qdq_conv", "qdq_gemm"}));
  EXPECT_EQ(OutputNames(pb.value(), "main"), (std::vector<std::string>{"qlinear_depthwise", "qdq_lookup"}));
  auto inspect = testing::RunCommand(testing::CliPath() + " inspect --json " + tmp.File("b.fcb"));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(inspect.out.find("qdq_conv"), std::string::npos);

  auto bad = testing::RunCommand(base + tmp.File("c.fcb") + " --keep-output qdq_lookup --keep-output nope");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("no output 'nope'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("its outputs are: conv_integer"), std::string::npos) << bad.err;
  EXPECT_FALSE(testing::FileExists(tmp.File("c.fcb")));
}

// The C API takes the spec as JSON: "outputs" goes through unchanged, and its
// refusals come back as statuses with the same message.
TEST_F(OutputsTest, CApiKeepsTheOutputsTheJsonSpecNames) {
  ASSERT_NO_FATAL_FAILURE(Need("fusion_mix"));
  TempDir tmp;
  const std::string model = dir_ + "/fusion_mix.onnx", out = tmp.File("c.fcb");
  const char* names[] = {"main"};
  const char* paths[] = {model.c_str()};
  const std::string spec = R"({"targets": "generic", "input_shapes": {"input": [1, 8, 10, 10]},
                               "outputs": ["qlinear_depthwise", "matmul_integer"]})";
  fcb_status_t* st = fcb_compile(names, paths, 1, spec.c_str(), out.c_str(), nullptr);
  ASSERT_EQ(st, nullptr) << fcb_status_message(st);
  fcb_program_t* program = nullptr;
  st = fcb_program_load(out.c_str(), nullptr, 1, &program);
  ASSERT_EQ(st, nullptr) << fcb_status_message(st);
  size_t num_inputs = 0, num_outputs = 0;
  ASSERT_EQ(fcb_program_method_io_count(program, "main", &num_inputs, &num_outputs), nullptr);
  ASSERT_EQ(num_outputs, 2u);
  std::vector<std::string> got;
  for (size_t i = 0; i < num_outputs; ++i) {
    fcb_tensor_info_t info;
    ASSERT_EQ(fcb_program_method_output(program, "main", i, &info), nullptr);
    got.push_back(info.name);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"matmul_integer", "qlinear_depthwise"}));
  fcb_program_destroy(program);

  const std::string bad = R"({"targets": "generic", "input_shapes": {"input": [1, 8, 10, 10]},
                              "outputs": ["matmul_integr"]})";
  st = fcb_compile(names, paths, 1, bad.c_str(), tmp.File("bad.fcb").c_str(), nullptr);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(fcb_status_code(st), FCB_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fcb_status_message(st)).find("no output 'matmul_integr'"), std::string::npos)
      << fcb_status_message(st);
  fcb_status_destroy(st);
  EXPECT_FALSE(testing::FileExists(tmp.File("bad.fcb")));
}

}  // namespace
}  // namespace fcb
