// Compile specs as a strict contract: every validation rule in scalar and list
// form, through the API, a JSON spec file and CLI flags; scalar == one-element
// list byte for byte; deterministic output; bf16 on one target.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fcb/npy.h"
#include "fcb/fcb.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::CliPath;
using testing::RunCommand;
using testing::TempDir;

const std::string kDemo = FCB_SOURCE_DIR "/models/demo_cnn.onnx";

struct Rule {
  const char* name;
  const char* json;         // a spec file body
  const char* cli_flags;    // the same mistake through flags ("" = not expressible as flags)
  std::vector<const char*> must_mention;  // the problem and the fix
};

const Rule kRules[] = {
    {"EmptyTargetList", R"({"targets": []})", "", {"no targets", "\"targets\"", "\"all\""}},
    {"UnequalLengthsList", R"({"targets": ["generic", "x86-64-v2"], "target_options": [{}]})",
     "--target generic --target x86-64-v2 --target-options '{}'", {"2 entries", "1", "one options object per target"}},
    {"UnequalLengthsScalarTarget", R"({"targets": "generic", "target_options": [{}, {}]})", "",
     {"1 entries", "2", "one options object per target"}},
    {"ObjectOptionsForTwoTargets", R"({"targets": ["generic", "x86-64-v2"], "target_options": {}})", "",
     {"single object", "one options object per target"}},
    {"DuplicateTarget", R"({"targets": ["generic", "x86-64-v3", "generic"]})",
     "--target generic --target x86-64-v3 --target generic", {"'generic'", "more than once", "list each target once"}},
    {"UnknownTargetScalar", R"({"targets": "x86-64-v5"})", "--target x86-64-v5",
     {"unknown target 'x86-64-v5'", "x86-64-v4", "generic, x86-64-v2, x86-64-v3, x86-64-v4"}},
    {"UnknownTargetList", R"({"targets": ["generic", "armv7"]})", "--target generic --target armv7",
     {"unknown target 'armv7'", "Known targets"}},
    {"UnknownOptionKeyScalar", R"({"targets": "generic", "target_options": {"optimisation_level": 1}})",
     "--target generic --target-options '{\"optimisation_level\": 1}'",
     {"unknown option 'optimisation_level'", "did you mean 'optimization_level'"}},
    {"UnknownOptionKeyList", R"({"targets": ["generic"], "target_options": [{"precison": "bf16"}]})",
     "--target generic --target-options '{\"precison\": \"bf16\"}'", {"unknown option 'precison'", "did you mean 'precision'"}},
    {"InvalidLevelList", R"({"targets": ["generic"], "target_options": [{"optimization_level": 7}]})",
     "--target generic --target-options '{\"optimization_level\": 7}'", {"optimization_level 7", "from 0 to 3"}},
    {"InvalidLevelScalar", R"({"targets": "generic", "target_options": {"optimization_level": -1}})", "",
     {"optimization_level -1", "from 0 to 3"}},
    {"InvalidPrecision", R"({"targets": "x86-64-v3", "target_options": {"precision": "fp16"}})",
     "--target x86-64-v3 --target-options '{\"precision\": \"fp16\"}'",
     {"precision 'fp16'", "\"fp32\", \"bf16\", \"int8\" or \"int4\""}},
    {"InvalidPrecisionInt2", R"({"targets": ["generic"], "target_options": [{"precision": "int2"}]})",
     "--target generic --target-options '{\"precision\": \"int2\"}'",
     {"precision 'int2'", "is not valid", "\"fp32\", \"bf16\", \"int8\" or \"int4\""}},
    {"Int4NeedsLevel1", R"({"targets": "generic", "target_options": {"precision": "int4", "optimization_level": 0}})",
     "--target generic --target-options '{\"precision\": \"int4\", \"optimization_level\": 0}'",
     {"precision int4", "optimization_level to 1 or higher"}},
    {"Int4HeadWithoutInt4", R"({"targets": "generic", "target_options": {"int4_head": true}})",
     "--target generic --target-options '{\"int4_head\": true}'",
     {"int4_head is an option of precision \"int4\"", "precision 'fp32'"}},
    {"Int4HeadNotABool", R"({"targets": "generic", "target_options": {"precision": "int4", "int4_head": "yes"}})",
     "--target generic --target-options '{\"precision\": \"int4\", \"int4_head\": \"yes\"}'",
     {"int4_head must be true or false"}},
    {"PrecisionNotAString", R"({"targets": "generic", "target_options": {"precision": 8}})",
     "--target generic --target-options '{\"precision\": 8}'", {"precision must be a string", "\"int8\""}},
    {"IncompatibleOptions", R"({"targets": ["generic"], "target_options": [{"precision": "bf16", "optimization_level": 0}]})",
     "--target generic --target-options '{\"precision\": \"bf16\", \"optimization_level\": 0}'",
     {"bf16", "optimization_level to 1 or higher"}},
    {"Int8NeedsLevel1", R"({"targets": "x86-64-v3", "target_options": {"precision": "int8", "optimization_level": 0}})",
     "--target x86-64-v3 --target-options '{\"precision\": \"int8\", \"optimization_level\": 0}'",
     {"precision int8", "optimization_level to 1 or higher", "precision fp32", "target 'x86-64-v3'"}},
    {"UnknownSpecKey", R"({"target": ["generic"]})", "", {"unknown spec key 'target'", "did you mean 'targets'"}},
    {"AllWithOthers", R"({"targets": ["all", "generic"]})", "--target all --target generic", {"'all'", "alone"}},
    // Dimension ranges: each mistake names the dim and shows a correct JSON form.
    {"RangeLowAboveHigh", R"({"targets": "generic", "input_shapes": {"input_ids": [1, [512, 1]]}})", "",
     {"input_shapes['input_ids'] dim 1 is the range [512, 1]", "low end is above its high end", "[1, 512]"}},
    {"RangeStartsBelowOne", R"({"targets": "generic", "input_shapes": {"input_ids": [1, [0, 512]]}})", "",
     {"input_shapes['input_ids'] dim 1 is the range [0, 512]", "dimensions start at 1", "[1, 512]"}},
    {"RangeWithOneEnd", R"({"targets": "generic", "input_shapes": {"input_ids": [1, [5]]}})", "",
     {"input_shapes['input_ids'] dim 1 is [5]", "two integers [lo, hi]", "[1, [1, 512]]"}},
    {"RangeWithThreeEnds", R"({"targets": "generic", "input_shapes": {"input_ids": [1, [1, 2, 3]]}})", "",
     {"input_shapes['input_ids'] dim 1 is [1,2,3]", "two integers [lo, hi]", "[1, [1, 512]]"}},
    {"RangeOfFloats", R"({"targets": "generic", "input_shapes": {"input_ids": [1, [1.5, 4]]}})", "",
     {"input_shapes['input_ids'] dim 1 is [1.5,4]", "two integers [lo, hi]"}},
    {"DimAsString", R"({"targets": "generic", "input_shapes": {"input_ids": [1, "1..512"]}})", "",
     {"dim 1 is \"1..512\"", "a size (an integer) or a range [lo, hi]", "[1, [1, 512]]"}},
    {"DimZero", R"({"targets": "generic", "input_shapes": {"input_ids": [1, 0]}})", "",
     {"input_shapes['input_ids'] must be a list of positive integers", "dim 1 is 0", "dimensions start at 1"}},
    {"ShapeNotAList", R"({"targets": "generic", "input_shapes": {"input_ids": 5}})", "",
     {"input_shapes['input_ids'] must be a non-empty list", "[1, [1, 512]]"}},
    // Kept outputs ("outputs", --keep-output).
    {"OutputsEmptyList", R"({"targets": "generic", "outputs": []})", "",
     {"\"outputs\" must be a non-empty list", "leave it out to keep every output"}},
    {"OutputsNotAList", R"({"targets": "generic", "outputs": "logits"})", "",
     {"\"outputs\" must be a non-empty list", "[\"encoder:last_hidden_state\", \"logits\"]"}},
    {"OutputListedTwice", R"({"targets": "generic", "outputs": ["logits", "decoder:logits", "logits"]})",
     "--target generic --keep-output logits --keep-output decoder:logits --keep-output logits",
     {"'logits' more than once", "list each output once"}},
    {"OutputNotAString", R"({"targets": "generic", "outputs": ["logits", 3]})", "",
     {"must list output names (strings)", "3 is not one"}},
    {"OutputEmptyName", R"({"targets": "generic", "outputs": ["decoder:"]})", "--target generic --keep-output decoder:",
     {"'decoder:' with an empty name", "METHOD:NAME"}},
};

class SpecRuleTest : public ::testing::TestWithParam<Rule> {};

void ExpectMentions(const std::string& msg, const Rule& r, const std::string& via) {
  for (const char* m : r.must_mention) EXPECT_NE(msg.find(m), std::string::npos) << via << ": '" << m << "' not in: " << msg;
}

TEST_P(SpecRuleTest, RejectedThroughApi) {
  const Rule& r = GetParam();
  auto spec = ParseSpecJson(r.json);
  ASSERT_REFUSED(spec, StatusCode::kInvalidArgument, r.must_mention.at(0)) << r.name;
  ExpectMentions(spec.status().message(), r, "API");
}

TEST_P(SpecRuleTest, RejectedThroughSpecFileBeforeAnyWork) {
  const Rule& r = GetParam();
  TempDir tmp;
  std::ofstream(tmp.File("spec.json")) << r.json;
  // The model path does not exist: validation must fail first, naming the spec problem.
  auto res = RunCommand(CliPath() + " compile /nonexistent/model.onnx -o " + tmp.File("out.fcb") + " --spec " +
                        tmp.File("spec.json"));
  EXPECT_EQ(res.exit_code, 1) << res.err;
  EXPECT_EQ(res.err.rfind("error: ", 0), 0u) << res.err;
  ExpectMentions(res.err, r, "spec file");
  EXPECT_FALSE(testing::FileExists(tmp.File("out.fcb")));
}

// The rules that can be expressed with flags alone (list form by nature).
std::vector<Rule> FlagRules() {
  std::vector<Rule> v;
  for (const auto& r : kRules)
    if (std::string(r.cli_flags).size()) v.push_back(r);
  return v;
}

class SpecFlagTest : public ::testing::TestWithParam<Rule> {};

TEST_P(SpecFlagTest, RejectedThroughFlags) {
  const Rule& r = GetParam();
  TempDir tmp;
  auto res = RunCommand(CliPath() + " compile /nonexistent/model.onnx -o " + tmp.File("out.fcb") + " " + r.cli_flags);
  EXPECT_EQ(res.exit_code, 1) << res.err;
  EXPECT_EQ(res.err.rfind("error: ", 0), 0u) << res.err;
  ExpectMentions(res.err, r, "flags");
  EXPECT_FALSE(testing::FileExists(tmp.File("out.fcb")));
}

INSTANTIATE_TEST_SUITE_P(Rules, SpecRuleTest, ::testing::ValuesIn(kRules),
                         [](const ::testing::TestParamInfo<Rule>& i) { return std::string(i.param.name); });
INSTANTIATE_TEST_SUITE_P(Rules, SpecFlagTest, ::testing::ValuesIn(FlagRules()),
                         [](const ::testing::TestParamInfo<Rule>& i) { return std::string(i.param.name); });

// Options given as a flag are checked against the target they are paired
// with, and the error names that target (not 'all', which the flag's options
// object used to be parsed with); the same through the API.
TEST(Spec, OptionErrorsNameTheirTarget) {
  TempDir tmp;
  auto res = RunCommand(CliPath() + " compile /nonexistent/model.onnx -o " + tmp.File("out.fcb") +
                        " --target x86-64-v4 --target-options '{\"precision\":\"int16\"}'");
  EXPECT_EQ(res.exit_code, 1) << res.err;
  EXPECT_EQ(res.err.rfind("error: ", 0), 0u) << res.err;
  EXPECT_NE(res.err.find("target 'x86-64-v4'"), std::string::npos) << res.err;
  EXPECT_NE(res.err.find("precision 'int16'"), std::string::npos) << res.err;
  EXPECT_EQ(res.err.find("'all'"), std::string::npos) << res.err;

  // Second of two: names the second target.
  res = RunCommand(CliPath() + " compile /nonexistent/model.onnx -o " + tmp.File("out.fcb") +
                   " --target generic --target x86-64-v3 --target-options '{}'"
                   " --target-options '{\"optimization_level\": 9}'");
  EXPECT_EQ(res.exit_code, 1) << res.err;
  EXPECT_NE(res.err.find("target 'x86-64-v3'"), std::string::npos) << res.err;
  EXPECT_EQ(res.err.find("target 'generic'"), std::string::npos) << res.err;

  auto options = ParseTargetOptionsJson(R"({"precision": "int16"})");
  ASSERT_TRUE(options.ok()) << "values are checked once the target is known: " << options.status().message();
  CompileSpec spec;
  spec.targets = {"x86-64-v4"};
  spec.target_options = {options.value()};
  Status s = ValidateSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("target 'x86-64-v4'"), std::string::npos) << s.message();

  auto bad_key = ParseTargetOptionsJson(R"({"precison": "bf16"})");
  ASSERT_REFUSED(bad_key, StatusCode::kInvalidArgument, "unknown option 'precison'; did you mean 'precision'? Known options");
  EXPECT_NE(bad_key.status().message().find("did you mean 'precision'"), std::string::npos) << bad_key.status().message();
  ASSERT_REFUSED(ParseTargetOptionsJson("[{}]"), StatusCode::kInvalidArgument, "the target options must be a JSON object such as {\"optimization_level\"") << "one object, not a list";
  ASSERT_REFUSED(ParseTargetOptionsJson("{"), StatusCode::kInvalidArgument, "the target options are not valid JSON");
}

// Library errors speak of the API; the CLI adds the flag.
TEST(Spec, ApiErrorsDoNotMentionFlags) {
  auto empty = ParseSpecJson(R"({"targets": []})");
  EXPECT_REFUSED(empty, StatusCode::kInvalidArgument, "the compile spec lists no targets; give at least one in \"targets\",");
  EXPECT_EQ(empty.status().message().find("--"), std::string::npos) << empty.status().message();
  auto none = CompileMethods({}, CompileSpec{{"generic"}}, "/nonexistent/out.fcb");
  EXPECT_REFUSED(none, StatusCode::kInvalidArgument, "the method map is empty; give at least one method name and its ONNX");
  EXPECT_EQ(none.status().message().find("--"), std::string::npos) << none.status().message();
  auto no_out = Compile(kDemo, CompileSpec{{"generic"}}, "");
  EXPECT_REFUSED(no_out, StatusCode::kInvalidArgument, "no output path given for the .fcb file");
  EXPECT_EQ(no_out.status().message().find("-o"), std::string::npos) << no_out.status().message();
}

TEST(Spec, ValidSpecsParse) {
  auto s = ParseSpecJson(R"({"targets": ["generic", "x86-64-v4"], "target_options": [{}, {"precision": "bf16"}],
                             "weight_sharing": false, "input_shapes": {"input": [1, 3, 64, 64]}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s.value().targets.size(), 2u);
  EXPECT_EQ(s.value().target_options[1].precision, "bf16");
  EXPECT_EQ(s.value().target_options[0].optimization_level, 2) << "documented default";
  EXPECT_FALSE(s.value().weight_sharing);
  EXPECT_EQ(s.value().input_shapes.at("input"), (std::vector<InputDim>{1, 3, 64, 64}));
  auto i8 = ParseSpecJson(R"({"targets": ["generic", "x86-64-v4"],
                              "target_options": [{"precision": "int8", "optimization_level": 1}, {"precision": "int8"}]})");
  ASSERT_TRUE(i8.ok()) << i8.status().message();
  EXPECT_EQ(i8.value().target_options[0].precision, "int8");
  EXPECT_EQ(i8.value().target_options[1].optimization_level, 2);
  auto one = ParseTargetOptionsJson(R"({"precision": "int8"})");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_TRUE(ValidateSpec(CompileSpec{{"x86-64-v3"}, {one.value()}}).ok());
}

TEST(Spec, RangesParse) {
  auto s = ParseSpecJson(R"({"targets": "generic", "input_shapes": {"input_ids": [1, [1, 512]],
                             "dec:pixels": [1, 3, [64, 1024], [64, 1024]], "same": [[5, 5], 2]}})");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto& shapes = s.value().input_shapes;
  EXPECT_EQ(shapes.at("input_ids"), (std::vector<InputDim>{1, {1, 512}}));
  EXPECT_TRUE(shapes.at("input_ids")[1].is_range());
  EXPECT_EQ(shapes.at("input_ids")[1].lo, 1);
  EXPECT_EQ(shapes.at("input_ids")[1].hi, 512);
  EXPECT_EQ(shapes.at("dec:pixels"), (std::vector<InputDim>{1, 3, {64, 1024}, {64, 1024}}));
  EXPECT_EQ(shapes.at("same"), (std::vector<InputDim>{5, 2})) << "a degenerate range is that size";
  EXPECT_FALSE(shapes.at("same")[0].is_range());
}

// The C++ brace forms: sizes as before, a pair for a range, in a map too.
TEST(Spec, RangeBraceFormsInCpp) {
  CompileSpec spec;
  spec.targets = {"generic"};
  spec.input_shapes["input"] = {1, 3, 224, 224};
  spec.input_shapes["input_ids"] = {1, {1, 512}};
  EXPECT_EQ(spec.input_shapes["input"].size(), 4u);
  ASSERT_EQ(spec.input_shapes["input_ids"].size(), 2u);
  EXPECT_EQ(spec.input_shapes["input_ids"][0], InputDim(1));
  EXPECT_EQ(spec.input_shapes["input_ids"][1], InputDim(1, 512));
  EXPECT_TRUE(ValidateSpec(spec).ok());
  CompileSpec braced{{"generic"}, {}, true, {{"ids", {1, {1, 512}}}, {"x", {2, 3}}}};
  EXPECT_EQ(braced.input_shapes.at("ids")[1].hi, 512);
  EXPECT_EQ(braced.input_shapes.at("x"), (std::vector<InputDim>{2, 3}));

  spec.input_shapes["input_ids"] = {1, {0, 512}};
  EXPECT_REFUSED(ValidateSpec(spec), StatusCode::kInvalidArgument,
                 "input shape for 'input_ids' has the range 0..512 at dim 1, which starts below 1; dimensions start at 1, e.g. 1..512");
  spec.input_shapes["input_ids"] = {1, {512, 1}};
  EXPECT_REFUSED(ValidateSpec(spec), StatusCode::kInvalidArgument,
                 "input shape for 'input_ids' has the range 512..1 at dim 1, whose low end is above its high end; write it 1..512");
  spec.input_shapes["input_ids"] = {1, 0};
  EXPECT_REFUSED(ValidateSpec(spec), StatusCode::kInvalidArgument, "input shape for 'input_ids' has a dimension < 1");
}

// The flag form: LO..HI; each mistake shows a correct flag value.
TEST(Spec, RangeFlagsAreChecked) {
  struct Case {
    const char* dims;
    std::vector<const char*> must_mention;
  };
  const Case cases[] = {
      {"1x..5", {"dims '1x..5': dim 1 '..5' is not a range", "LO..HI with both ends", "e.g. 1x1..512"}},
      {"1x5..", {"dims '1x5..': dim 1 '5..' is not a range", "e.g. 1x1..512"}},
      {"1x5..3x", {"dims '1x5..3x' must be positive integers joined by 'x', e.g. 1x3x224x224", "LO..HI, e.g. 1x1..512"}},
      {"1x5..3", {"dim 1 is the range 5..3, whose low end is above its high end; write 1x3..5"}},
      {"1x0..5", {"dim 1 is the range 0..5, which starts below 1; dimensions start at 1, e.g. 1x1..5"}},
      {"1x0", {"dims '1x0' must all be >= 1 (dimensions start at 1)"}},
      {"1x1.5", {"dims '1x1.5' must be positive integers joined by 'x'"}},
      {"1x1...5", {"dim 1 '1...5' is not a range"}},
  };
  for (const Case& c : cases) {
    TempDir tmp;
    auto res = RunCommand(CliPath() + " compile /nonexistent/model.onnx -o " + tmp.File("out.fcb") +
                          " --target generic --input-shape input_ids=" + c.dims);
    EXPECT_EQ(res.exit_code, 1) << c.dims << ": " << res.err;
    EXPECT_EQ(res.err.rfind("error: --input-shape dims '", 0), 0u) << res.err;
    for (const char* m : c.must_mention) EXPECT_NE(res.err.find(m), std::string::npos) << c.dims << ": '" << m << "' not in: " << res.err;
  }
}

std::vector<uint8_t> CompileWithSpec(const TempDir& tmp, const std::string& name, const std::string& json) {
  std::ofstream(tmp.File(name + ".json")) << json;
  auto res = RunCommand(CliPath() + " compile " + kDemo + " -o " + tmp.File(name + ".fcb") + " --spec " +
                        tmp.File(name + ".json") + " --input-shape input=1x3x64x64");
  EXPECT_EQ(res.exit_code, 0) << res.err;
  return testing::ReadBytes(tmp.File(name + ".fcb"));
}

TEST(Spec, ScalarAndOneElementListAreByteIdentical) {
  TempDir tmp;
  auto scalar = CompileWithSpec(tmp, "scalar", R"({"targets": "x86-64-v3", "target_options": {"optimization_level": 1}})");
  auto list = CompileWithSpec(tmp, "list", R"({"targets": ["x86-64-v3"], "target_options": [{"optimization_level": 1}]})");
  ASSERT_FALSE(scalar.empty());
  EXPECT_TRUE(scalar == list) << "scalar and one-element list forms must give identical files";
  // Flags give the same file too.
  auto res = RunCommand(CliPath() + " compile " + kDemo + " -o " + tmp.File("flags.fcb") +
                        " --target x86-64-v3 --target-options '{\"optimization_level\": 1}' --input-shape input=1x3x64x64");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_TRUE(testing::ReadBytes(tmp.File("flags.fcb")) == scalar);
}

TEST(Spec, OutputIsDeterministic) {
  TempDir tmp;
  const char* spec = R"({"targets": "all"})";
  auto a = CompileWithSpec(tmp, "a", spec);
  auto b = CompileWithSpec(tmp, "b", spec);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b);
}

TEST(Spec, OptimizationLevelChangesWhatIsCompiled) {
  TempDir tmp;
  auto l0 = CompileWithSpec(tmp, "l0", R"({"targets": "generic", "target_options": {"optimization_level": 0}})");
  auto l2 = CompileWithSpec(tmp, "l2", R"({"targets": "generic", "target_options": {"optimization_level": 2}})");
  EXPECT_FALSE(l0 == l2);
  auto i0 = RunCommand(CliPath() + " inspect --json " + tmp.File("l0.fcb"));
  auto i2 = RunCommand(CliPath() + " inspect --json " + tmp.File("l2.fcb"));
  auto steps = [](const std::string& js) { return nlohmann::json::parse(js)["contexts"][0]["steps"].get<int>(); };
  EXPECT_GT(steps(i0.out), steps(i2.out)) << "level 0 keeps BatchNorm and activations as separate steps";
}

// bf16 on one target, fp32 on the others: compiles, warns with the bytes it
// costs, and runs within the documented tolerance of ONNX Runtime.
TEST(Spec, Bf16OnOneTarget) {
  TempDir tmp;
  const std::string dir = testing::TestDataDir();
  const std::string model = dir + "/resnet18.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << "run scripts/prepare_testdata.sh";
  auto res = RunCommand(CliPath() + " compile " + model + " -o " + tmp.File("m.fcb") +
                        " --target generic --target x86-64-v2 --target x86-64-v3 --target-options '{}'"
                        " --target-options '{}' --target-options '{\"precision\": \"bf16\"}'");
  ASSERT_EQ(res.exit_code, 0) << res.err;
  EXPECT_NE(res.err.find("warning: weight sharing is partly defeated"), std::string::npos) << res.err;
  EXPECT_NE(res.err.find("extra bytes"), std::string::npos) << res.err;
  auto want = ReadNpy(dir + "/resnet18.ref/output.npy");
  ASSERT_TRUE(want.ok());
  std::vector<float> ref(want.value().data.size() / 4);
  std::memcpy(ref.data(), want.value().data.data(), ref.size() * 4);
  for (const char* t : {"x86-64-v3", "x86-64-v2"}) {
    auto r = RunCommand(CliPath() + " run " + tmp.File("m.fcb") + " --target " + t + " --input input=" + dir +
                        "/resnet18.input.npy --output-dir " + tmp.File(t));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto got = ReadNpy(tmp.File(std::string(t) + "/output.npy"));
    ASSERT_TRUE(got.ok());
    std::vector<float> g(got.value().data.size() / 4);
    std::memcpy(g.data(), got.value().data.data(), g.size() * 4);
    auto d = testing::Compare(g, ref);
    if (std::string(t) == "x86-64-v3") {
      EXPECT_LT(d.rel_l2, 2e-2) << "bf16 tolerance documented in the README";
      EXPECT_GT(d.rel_l2, 1e-6) << "bf16 weights must really be rounded";
    } else {
      EXPECT_LT(d.rel_l2, 1e-4);
    }
  }
}

}  // namespace
}  // namespace fcb
