// Import unit tests: small models built with the ONNX protobuf API.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <fstream>

#include "import/onnx_builder_test.h"
#include "fcb/limits.h"
#include "import/onnx_import.h"
#include "ops/op.h"
#include "passes/test_interpreter.h"
#include "core/half.h"
#include "test_util.h"

namespace fcb::import {
namespace {

using namespace fcb::testing;  // NOLINT

Result<ir::Graph> Import(const onnx::ModelProto& m, const std::string& dir = "",
                         ImportOptions opts = {}) {
  return ImportOnnxBytes(m.SerializeAsString(), dir, opts);
}

int ValueId(const ir::Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return static_cast<int>(i);
  return -1;
}

const ir::Value& V(const ir::Graph& g, const std::string& name) {
  int id = ValueId(g, name);
  EXPECT_GE(id, 0) << "no value " << name;
  return g.values.at(id < 0 ? 0 : id);
}

// Ops a test needs; a missing one fails the test with a clear message.
::testing::AssertionResult HaveOps(std::initializer_list<const char*> ops) {
  for (const char* op : ops)
    if (!ops::FindOp(op))
      return ::testing::AssertionFailure() << "op " << op << " is not registered yet (src/ops)";
  return ::testing::AssertionSuccess();
}

TEST(Import, InitializersOfEveryDtypeRawAndTyped) {
  auto m = MakeModel(13);
  AddInit(m, FloatTensor("f_raw", {2}, {1.5f, -2.f}, true));
  AddInit(m, FloatTensor("f_typed", {2}, {3.f, 4.25f}, false));
  AddInit(m, Int64Tensor("i64_raw", {3}, {1, -2, 1LL << 40}, true));
  AddInit(m, Int64Tensor("i64_typed", {}, {7}, false));
  {
    onnx::TensorProto t;  // double, typed
    t.set_name("f64");
    t.set_data_type(onnx::TensorProto::DOUBLE);
    t.add_dims(2);
    t.add_double_data(0.1);
    t.add_double_data(-1e300);
    AddInit(m, t);
  }
  struct Small { const char* name; int type; std::vector<int32_t> v; };
  for (const Small& s : {Small{"i32", onnx::TensorProto::INT32, {-5, 100000}},
                         Small{"i8", onnx::TensorProto::INT8, {-128, 127}},
                         Small{"u8", onnx::TensorProto::UINT8, {0, 255}},
                         Small{"b", onnx::TensorProto::BOOL, {0, 1}}}) {
    onnx::TensorProto t;
    t.set_name(s.name);
    t.set_data_type(s.type);
    t.add_dims(2);
    for (int32_t x : s.v) t.add_int32_data(x);
    AddInit(m, t);
  }
  {
    onnx::TensorProto t;  // int8 as raw bytes
    t.set_name("i8_raw");
    t.set_data_type(onnx::TensorProto::INT8);
    t.add_dims(3);
    t.set_raw_data(std::string("\xff\x01\x80", 3));
    AddInit(m, t);
  }
  for (const char* n : {"f_raw", "f_typed", "i64_raw", "i64_typed", "f64", "i32", "i8", "u8", "b", "i8_raw"})
    AddOutput(m, n);
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(V(*g, "f_raw").constant->GetDouble(1), -2.0);
  EXPECT_EQ(V(*g, "f_typed").constant->GetDouble(1), 4.25);
  EXPECT_EQ(V(*g, "i64_raw").constant->GetInt(2), 1LL << 40);
  EXPECT_EQ(V(*g, "i64_typed").shape, ir::Shape{});
  EXPECT_EQ(V(*g, "i64_typed").constant->GetInt(0), 7);
  EXPECT_EQ(V(*g, "f64").dtype, ir::DType::kF64);
  EXPECT_EQ(V(*g, "f64").constant->GetDouble(1), -1e300);
  EXPECT_EQ(V(*g, "i32").constant->GetInt(0), -5);
  EXPECT_EQ(V(*g, "i8").constant->GetInt(0), -128);
  EXPECT_EQ(V(*g, "u8").constant->GetInt(1), 255);
  EXPECT_EQ(V(*g, "b").dtype, ir::DType::kBool);
  EXPECT_EQ(V(*g, "b").constant->GetInt(1), 1);
  EXPECT_EQ(V(*g, "i8_raw").constant->ToInts(), (std::vector<int64_t>{-1, 1, -128}));
  EXPECT_TRUE(g->inputs.empty());
}

TEST(Import, RawDataOfWrongSizeIsCorrupt) {
  auto m = MakeModel(13);
  auto t = FloatTensor("w", {3}, {1, 2, 3});
  t.mutable_raw_data()->resize(8);
  AddInit(m, t);
  AddOutput(m, "w");
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kCorruptFile, "raw_data holds 8 bytes, shape 3 of float32 needs 12");
  EXPECT_NE(g.status().message().find("initializer 'w'"), std::string::npos) << g.status().ToString();
}

TEST(Import, UnsupportedInitializerDtypeNamesIt) {
  auto m = MakeModel(13);
  onnx::TensorProto t;
  t.set_name("cplx");
  t.set_data_type(onnx::TensorProto::COMPLEX64);
  t.add_dims(1);
  t.add_float_data(0);
  t.add_float_data(1);
  AddInit(m, t);
  AddOutput(m, "cplx");
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "element type COMPLEX64 is not supported");
  EXPECT_NE(g.status().message().find("initializer 'cplx'"), std::string::npos);
  EXPECT_NE(g.status().message().find("COMPLEX64"), std::string::npos);
}

onnx::TensorProto ExternalTensor(const std::string& location, int64_t offset, int64_t length) {
  onnx::TensorProto t;
  t.set_name("ext");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(4);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  kv("offset", std::to_string(offset));
  if (length >= 0) kv("length", std::to_string(length));
  return t;
}

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<float> data = {0, 0, 1.f, 2.f, 3.f, 4.f};  // 8 bytes of padding first
    std::vector<uint8_t> bytes(data.size() * 4);
    std::memcpy(bytes.data(), data.data(), bytes.size());
    WriteBytes(dir_.File("weights.bin"), bytes);
  }
  Result<ir::Graph> ImportWith(onnx::TensorProto t) {
    auto m = MakeModel(13);
    AddInit(m, std::move(t));
    AddOutput(m, "ext");
    std::ofstream(dir_.File("model.onnx"), std::ios::binary) << m.SerializeAsString();
    return ImportOnnx(dir_.File("model.onnx"), {});
  }
  TempDir dir_;
};

TEST_F(ExternalData, ReadsTheRangeRelativeToTheModel) {
  auto g = ImportWith(ExternalTensor("weights.bin", 8, 16));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Floats(V(*g, "ext").constant), (std::vector<float>{1, 2, 3, 4}));
  auto g2 = ImportWith(ExternalTensor("weights.bin", 8, -1));  // no length key
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  EXPECT_EQ(Floats(V(*g2, "ext").constant), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(ExternalData, RejectsPathsEscapingTheFolder) {
  for (std::string loc : {"../weights.bin", "sub/../../weights.bin", "/etc/passwd"}) {
    auto g = ImportWith(ExternalTensor(loc, 0, 16));
    ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "external data location") << loc;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << g.status().ToString();
    EXPECT_NE(g.status().message().find("initializer 'ext'"), std::string::npos) << g.status().ToString();
  }
}

TEST_F(ExternalData, RejectsRangesOutsideTheFile) {
  auto g = ImportWith(ExternalTensor("weights.bin", 16, 16));  // 24-byte file
  ASSERT_REFUSED(g, StatusCode::kCorruptFile, "external data range [16, 32) lies outside 'weights.bin' (24 bytes)");
  EXPECT_NE(g.status().message().find("outside"), std::string::npos) << g.status().ToString();
  auto g2 = ImportWith(ExternalTensor("weights.bin", 0, 12));  // length != 4 floats
  ASSERT_REFUSED(g2, StatusCode::kCorruptFile, "external data length 12 does not match the tensor's 16 bytes");
  auto g3 = ImportWith(ExternalTensor("missing.bin", 0, 16));
  ASSERT_REFUSED(g3, StatusCode::kNotFound, "cannot open external data file");
}

TEST(Import, ExternalDataFromBytesWithoutFolderIsRefused) {
  auto m = MakeModel(13);
  AddInit(m, ExternalTensor("weights.bin", 0, 16));
  AddOutput(m, "ext");
  auto g = Import(m, "");
  ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "uses external data, but the model was given as bytes without a folder");
  EXPECT_NE(g.status().message().find("external data"), std::string::npos);
}

onnx::ModelProto PassThroughModel(std::vector<Dim> dims) {
  auto m = MakeModel(13);
  AddInput(m, "input", std::move(dims));
  AddOutput(m, "input");
  return m;
}

TEST(Import, SymbolicDimNeedsInputShape) {
  auto g = Import(PassThroughModel({"batch", 3, 4, 4}));
  ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "input 'input' has symbolic dim 0 ('batch'); fix it in input_shapes,");
  EXPECT_NE(g.status().message().find("input 'input' has symbolic dim 0 ('batch')"), std::string::npos)
      << g.status().ToString();
  EXPECT_NE(g.status().message().find("input_shapes['input'] = [1, 3, 4, 4]"), std::string::npos)
      << g.status().ToString();
  EXPECT_EQ(g.status().message().find("--"), std::string::npos)
      << "the library speaks of the API, not of CLI flags: " << g.status().ToString();

  ImportOptions opts;
  opts.input_shapes["input"] = {2, 3, 4, 4};
  auto g2 = Import(PassThroughModel({"batch", 3, 4, 4}), "", opts);
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  ASSERT_EQ(g2->inputs.size(), 1u);
  EXPECT_EQ(g2->values[g2->inputs[0]].shape, (ir::Shape{2, 3, 4, 4}));
  EXPECT_TRUE(g2->values[g2->inputs[0]].has_shape);
}

TEST(Import, UnknownDimNeedsInputShape) {
  auto g = Import(PassThroughModel({Dim(""), 8}));
  ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "input 'input' has unknown dim 0; fix it in input_shapes, e.g.");
  EXPECT_NE(g.status().message().find("unknown dim 0"), std::string::npos) << g.status().ToString();
}

TEST(Import, InputShapeOptionsAreChecked) {
  ImportOptions wrong_name;
  wrong_name.input_shapes["image"] = {1, 3, 4, 4};
  auto g = Import(PassThroughModel({"batch", 3, 4, 4}), "", wrong_name);
  ASSERT_REFUSED(g, StatusCode::kNotFound, "input_shapes names 'image', which is not an input of the model; its");
  EXPECT_NE(g.status().message().find("'image'"), std::string::npos);
  EXPECT_NE(g.status().message().find("inputs are 'input'"), std::string::npos) << g.status().ToString();

  ImportOptions contradicts;
  contradicts.input_shapes["input"] = {1, 4, 4, 4};
  auto g2 = Import(PassThroughModel({"batch", 3, 4, 4}), "", contradicts);
  ASSERT_REFUSED(g2, StatusCode::kInvalidArgument, "input_shapes['input'] = [1, 4, 4, 4] contradicts the model");
  EXPECT_NE(g2.status().message().find("dim 1 is fixed to 3"), std::string::npos) << g2.status().ToString();

  ImportOptions wrong_rank;
  wrong_rank.input_shapes["input"] = {1, 3, 4};
  ASSERT_REFUSED(Import(PassThroughModel({"batch", 3, 4, 4}), "", wrong_rank), StatusCode::kInvalidArgument, "input_shapes['input'] = [1, 3, 4] has rank 3, but the model's input");
}

// Two inputs sharing the symbol 'batch' (a: batch x 3, b: batch x 5), passed through.
onnx::ModelProto SharedBatchModel() {
  auto m = MakeModel(13);
  AddInput(m, "a", {"batch", 3});
  AddInput(m, "b", {"batch", 5});
  AddOutput(m, "a");
  AddOutput(m, "b");
  return m;
}

TEST(Import, UnboundSymbolSaysHowToFixOrBoundIt) {
  auto g = Import(PassThroughModel({"batch", 3, 4, 4}));
  ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "input 'input' has symbolic dim 0 ('batch'); fix it in input_shapes,");
  EXPECT_NE(g.status().message().find("e.g. input_shapes['input'] = [1, 3, 4, 4], or bound it, e.g. "
                                      "input_shapes['input'] = [[1, 512], 3, 4, 4]"),
            std::string::npos)
      << g.status().ToString();
}

TEST(Import, DegenerateRangeIsAFixedDim) {
  ImportOptions opts;
  opts.input_shapes["input"] = {{2, 2}, 3, 4, 4};
  auto g = Import(PassThroughModel({"batch", 3, 4, 4}), "", opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->values[g->inputs[0]].shape, (ir::Shape{2, 3, 4, 4}));
  ASSERT_EQ(g->symbols.size(), 1u);
  EXPECT_EQ(g->symbols[0].name, "batch");
  EXPECT_EQ(g->symbols[0].lo, 2);
  EXPECT_EQ(g->symbols[0].hi, 2);
  ASSERT_EQ(g->symbols[0].uses.size(), 1u);
  EXPECT_EQ(g->symbols[0].uses[0].input, "input");
  EXPECT_EQ(g->symbols[0].uses[0].dim, 0);
  // A degenerate range on a dim the model fixes is that size.
  ImportOptions same;
  same.input_shapes["input"] = {2, {3, 3}, 4, 4};
  EXPECT_TRUE(Import(PassThroughModel({"batch", 3, 4, 4}), "", same).ok());
}

TEST(Import, SymbolGivenForOneInputAppliesToAll) {
  ImportOptions opts;
  opts.input_shapes["a"] = {2, 3};
  auto g = Import(SharedBatchModel(), "", opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->inputs.size(), 2u);
  EXPECT_EQ(g->values[g->inputs[0]].shape, (ir::Shape{2, 3}));
  EXPECT_EQ(g->values[g->inputs[1]].shape, (ir::Shape{2, 5})) << "b's batch comes from a's entry";
  ASSERT_EQ(g->symbols.size(), 1u);
  EXPECT_EQ(g->symbols[0].name, "batch");
  ASSERT_EQ(g->symbols[0].uses.size(), 2u);
  EXPECT_EQ(g->symbols[0].uses[1].input, "b");
  EXPECT_EQ(g->symbols[0].uses[1].dim, 0);
  // Both given, agreeing: the same.
  opts.input_shapes["b"] = {2, 5};
  EXPECT_TRUE(Import(SharedBatchModel(), "", opts).ok());
}

TEST(Import, SymbolGivenTwoDifferentValuesIsRefusedNamingBoth) {
  struct Case {
    std::vector<InputDim> a, b;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {{2, 3}, {4, 5}, "input_shapes['b'] = [4, 5] gives dim 0 of input 'b' ('batch') 4, but "
                            "input_shapes['a'] = [2, 3] gives dim 0 of input 'a' 2"},
           {{{1, 8}, 3}, {4, 5}, "input_shapes['b'] = [4, 5] gives dim 0 of input 'b' ('batch') 4, but "
                                 "input_shapes['a'] = [[1, 8], 3] gives dim 0 of input 'a' 1..8"},
           {{{1, 8}, 3}, {{1, 16}, 5}, "input_shapes['b'] = [[1, 16], 5] gives dim 0 of input 'b' ('batch') 1..16, "
                                       "but input_shapes['a'] = [[1, 8], 3] gives dim 0 of input 'a' 1..8"}}) {
    ImportOptions opts;
    opts.input_shapes["a"] = c.a;
    opts.input_shapes["b"] = c.b;
    auto g = Import(SharedBatchModel(), "", opts);
    ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "both are the symbol 'batch', which is one size at run time");
    const std::string want = c.want;
    EXPECT_NE(g.status().message().find(want), std::string::npos) << g.status().message();
  }
}

TEST(Import, ValueFixesTheSymbolForOtherInputs) {
  auto m = SharedBatchModel();
  ImportOptions opts;
  opts.input_values["b"] = ir::TensorData::FromFloats({2, 5}, std::vector<float>(10, 1.0f));
  auto g = Import(m, "", opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->inputs.size(), 1u);
  EXPECT_EQ(g->values[g->inputs[0]].shape, (ir::Shape{2, 3}));
  opts.input_shapes["a"] = {{1, 4}, 3};
  ASSERT_REFUSED(Import(m, "", opts), StatusCode::kInvalidArgument,
                 "input_values['b'] gives dim 0 of input 'b' ('batch') 2, but input_shapes['a'] = [[1, 4], 3] gives "
                 "dim 0 of input 'a' 1..4");
}

TEST(Import, RangeOnAFixedDimIsRefusedNamingTheModelsSize) {
  ImportOptions opts;
  opts.input_shapes["input"] = {1, {1, 8}, 4, 4};
  ASSERT_REFUSED(Import(PassThroughModel({"batch", 3, 4, 4}), "", opts), StatusCode::kInvalidArgument,
                 "input_shapes['input'] = [1, [1, 8], 4, 4] gives dim 1 of input 'input' the range 1..8, but the "
                 "model fixes that dim to 3; give it that size, e.g. input_shapes['input'] = [1, 3, 4, 4]");
}

TEST(Import, MalformedRangeThroughOptionsIsRefused) {
  ImportOptions opts;
  opts.input_shapes["input"] = {{8, 1}, 3, 4, 4};
  ASSERT_REFUSED(Import(PassThroughModel({"batch", 3, 4, 4}), "", opts), StatusCode::kInvalidArgument,
                 "has the range 8..1, whose low end is above its high end; write it 1..8");
  opts.input_shapes["input"] = {{-1, 4}, 3, 4, 4};
  ASSERT_REFUSED(Import(PassThroughModel({"batch", 3, 4, 4}), "", opts), StatusCode::kInvalidArgument,
                 "dims must not be negative");
}

// A valid range imports at its bound (the input's shape is the upper end)
// and is recorded with its symbol, shared by every input using it.
TEST(Import, ValidRangeImportsAtTheBoundWithItsSymbol) {
  ImportOptions opts;
  opts.input_shapes["a"] = {{1, 8}, 3};
  auto g = Import(SharedBatchModel(), "", opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->symbols.size(), 1u);
  EXPECT_EQ(g->symbols[0].name, "batch");
  EXPECT_EQ(g->symbols[0].lo, 1);
  EXPECT_EQ(g->symbols[0].hi, 8);
  ASSERT_EQ(g->symbols[0].uses.size(), 2u);
  EXPECT_EQ(g->symbols[0].uses[1].input, "b");
  EXPECT_TRUE(g->dynamic());
  for (int v : g->inputs) EXPECT_EQ(g->values[v].shape[0], 8) << g->values[v].name;  // the bound
  // An unnamed unknown dim is the symbol "<input>.<dim>".
  ImportOptions unnamed;
  unnamed.input_shapes["input"] = {{1, 16}, 8};
  auto ranged = Import(PassThroughModel({Dim(""), 8}), "", unnamed);
  ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
  ASSERT_EQ(ranged->symbols.size(), 1u);
  EXPECT_EQ(ranged->symbols[0].name, "input.0");
  EXPECT_EQ(ranged->symbols[0].hi, 16);
  unnamed.input_shapes["input"] = {5, 8};
  auto fixed = Import(PassThroughModel({Dim(""), 8}), "", unnamed);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  ASSERT_EQ(fixed->symbols.size(), 1u);
  EXPECT_EQ(fixed->symbols[0].name, "input.0");
  EXPECT_EQ(fixed->symbols[0].lo, 5);
  EXPECT_FALSE(fixed->dynamic());
}

TEST(Import, InitializerListedAsInputIsAConstant) {
  auto m = MakeModel(13);
  AddInput(m, "x", {2});
  AddInput(m, "w", {2});
  AddInit(m, FloatTensor("w", {2}, {1, 2}));
  AddOutput(m, "w");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->inputs.size(), 1u);
  EXPECT_EQ(g->values[g->inputs[0]].name, "x");
  EXPECT_TRUE(V(*g, "w").is_constant());
}

// A float16 (or bfloat16) network, as `.half()` exports write it: every
// operator that computes runs in float32, the values between such operators
// stay float32 (ONNX Runtime removes the Cast pairs too), and only graph
// outputs are rounded. Results equal the float32 network on the widened
// weights with its outputs rounded, bit for bit (same generic kernels).
onnx::ModelProto HalfNetwork(int elem, const std::vector<float>& w, const std::vector<float>& b) {
  auto m = MakeModel(14);
  AddInput(m, "x", {1, 2, 4, 4}, elem);
  auto tensor = [&](const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(elem);
    for (int64_t d : dims) t.add_dims(d);
    std::string raw;
    for (float f : v) {
      if (elem == onnx::TensorProto::FLOAT) {
        raw.append(reinterpret_cast<const char*>(&f), 4);
        continue;
      }
      const uint16_t h = elem == onnx::TensorProto::FLOAT16 ? FloatToHalf(f) : FloatToBFloat16(f);
      raw.append(reinterpret_cast<const char*>(&h), 2);
    }
    t.set_raw_data(raw);
    return t;
  };
  AddInit(m, tensor("w", {3, 2, 3, 3}, w));
  AddInit(m, tensor("b", {48, 5}, b));
  AttrInts(AddNode(m, "Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  AddNode(m, "Relu", {"c"}, {"r"});
  AddNode(m, "Flatten", {"r"}, {"f"});
  AddNode(m, "MatMul", {"f", "b"}, {"y"});
  AddNode(m, "Sigmoid", {"y"}, {"s"});
  AddOutput(m, "r");
  AddOutput(m, "s");
  return m;
}

TEST(Import, HalfPrecisionComputesInFloat32AndRoundsOnlyGraphOutputs) {
  ASSERT_TRUE(HaveOps({"Conv", "Relu", "Flatten", "MatMul", "Sigmoid", "Cast"}));
  std::vector<float> w(54), b(240), x(32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.7 * i) * 0.5;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.3 * i) * 0.2;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(1.3 * i + 0.2) * 3;
  for (int elem : {onnx::TensorProto::FLOAT16, onnx::TensorProto::BFLOAT16}) {
    const bool f16 = elem == onnx::TensorProto::FLOAT16;
    SCOPED_TRACE(f16 ? "float16" : "bfloat16");
    const ir::DType half = f16 ? ir::DType::kF16 : ir::DType::kBF16;
    auto round = [&](float v) { return f16 ? HalfToFloat(FloatToHalf(v)) : BFloat16ToFloat(FloatToBFloat16(v)); };
    std::vector<float> w16 = w, b16 = b, x16 = x;
    for (auto* v : {&w16, &b16, &x16})
      for (float& f : *v) f = round(f);

    auto g = Import(HalfNetwork(elem, w, b));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(V(*g, "r").dtype, half);
    EXPECT_EQ(V(*g, "s").dtype, half);
    int to_f32 = 0, to_half = 0;
    const std::vector<int> uses = g->UseCounts();  // the rounding Casts nobody reads are left for the passes
    for (const auto& n : g->nodes) {
      if (uses[n.outputs[0]] == 0) continue;
      if (n.op_type == "Cast") {
        (n.GetInt("to", 0) == static_cast<int64_t>(ir::DType::kF32) ? to_f32 : to_half) += 1;
        continue;
      }
      for (int i : n.inputs) EXPECT_EQ(g->values[i].dtype, ir::DType::kF32) << n.Describe() << " reads half";
    }
    EXPECT_EQ(to_f32, 1) << "only the input is widened";
    EXPECT_EQ(to_half, 2) << "only the two graph outputs are rounded";

    // The same network in float32 on the rounded weights and input.
    auto g32 = Import(HalfNetwork(onnx::TensorProto::FLOAT, w16, b16));
    ASSERT_TRUE(g32.ok()) << g32.status().ToString();
    auto in32 = ir::TensorData::FromFloats({1, 2, 4, 4}, x16);
    auto want = Interpret(*g32, {{g32->inputs[0], in32}});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto inh = ir::TensorData::Make(half, {1, 2, 4, 4});
    for (size_t i = 0; i < x.size(); ++i)
      inh->mutable_data<uint16_t>()[i] = f16 ? FloatToHalf(x[i]) : FloatToBFloat16(x[i]);
    auto got = Interpret(*g, {{g->inputs[0], inh}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const char* out : {"r", "s"}) {
      const ir::TensorData& a = *got.value()[ValueId(*g, out)];
      const ir::TensorData& e = *want.value()[ValueId(*g32, out)];
      ASSERT_EQ(a.numel(), e.numel());
      for (int64_t i = 0; i < a.numel(); ++i)
        ASSERT_EQ(a.GetDouble(i), round(e.data<float>()[i])) << out << "[" << i << "]";
    }
  }
}

// input_values: an input becomes a constant (and leaves the inputs); on an
// input that also has an initializer it replaces the default, as feeding it
// does in ONNX Runtime. Values convert to the declared type when they fit.
TEST(Import, InputValuesFixInputsAndOverrideInitializerDefaults) {
  auto m = MakeModel(13);
  AddInput(m, "x", {2});
  AddInput(m, "n", {Dim("batch")}, onnx::TensorProto::INT32);
  AddInput(m, "w", {2});
  AddInit(m, FloatTensor("w", {2}, {1, 2}));
  AddNode(m, "Add", {"x", "w"}, {"y"});
  AddOutput(m, "y");
  AddOutput(m, "n");
  ImportOptions opts;
  opts.input_values["x"] = ir::TensorData::FromFloats({2}, {5, 6});
  opts.input_values["w"] = ir::TensorData::FromFloats({2}, {10, 20});
  opts.input_values["n"] = ir::TensorData::FromInts({3}, {7, -8, 9});  // int64 -> int32, symbolic dim sized 3
  auto g = Import(m, "", opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->inputs.empty());
  ASSERT_TRUE(V(*g, "w").is_constant());
  EXPECT_EQ(V(*g, "w").constant->GetDouble(1), 20);
  ASSERT_TRUE(V(*g, "n").is_constant());
  EXPECT_EQ(V(*g, "n").dtype, ir::DType::kI32);
  EXPECT_EQ(V(*g, "n").shape, (ir::Shape{3}));
  EXPECT_EQ(V(*g, "n").constant->GetInt(1), -8);
  ASSERT_TRUE(V(*g, "y").is_constant()) << "the Add of two constants folds";
  EXPECT_EQ(V(*g, "y").constant->GetDouble(0), 15);

  struct Bad {
    const char* name;
    ir::TensorPtr value;
    const char* want;
  };
  auto flag = ir::TensorData::Make(ir::DType::kBool, {2});
  for (const Bad& b : std::vector<Bad>{
           {"x", ir::TensorData::FromFloats({3}, {1, 2, 3}), "fixes dim 0 of the input to 2"},
           {"x", ir::TensorData::FromFloats({1, 2}, {1, 2}), "rank 2"},
           {"x", flag, "bool"},
           {"n", ir::TensorData::FromInts({1}, {int64_t{1} << 40}), "cannot hold element 0"},
           {"n", ir::TensorData::FromFloats({1}, {1.5f}), "cannot hold element 0"},
           {"z", ir::TensorData::FromFloats({1}, {1}), "names no input of the model; its inputs are 'x', 'n', 'w'"}}) {
    ImportOptions o;
    o.input_values[b.name] = b.value;
    auto r = Import(m, "", o);
    const StatusCode code = std::string(b.name) == "z" ? StatusCode::kNotFound : StatusCode::kInvalidArgument;
    ASSERT_REFUSED(r, code, b.want) << b.name;
    EXPECT_NE(r.status().message().find("input_values['" + std::string(b.name) + "']"), std::string::npos)
        << r.status().message();
  }
  // A value and a shape for the same input must agree.
  ImportOptions both;
  both.input_values["n"] = ir::TensorData::FromInts({3}, {1, 2, 3});
  both.input_shapes["n"] = {4};
  auto r = Import(m, "", both);
  ASSERT_REFUSED(r, StatusCode::kInvalidArgument, "input_values['n'] has shape 3 but input_shapes gives 4; give one of");
  EXPECT_NE(r.status().message().find("input_shapes gives 4"), std::string::npos) << r.status().message();
}

TEST(Import, NonTensorInputIsRejected) {
  auto m = MakeModel(13);
  auto* vi = m.mutable_graph()->add_input();
  vi->set_name("seq");
  vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  AddOutput(m, "seq");
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "input 'seq' is not a tensor (sequence, map and optional inputs are");
  EXPECT_NE(g.status().message().find("input 'seq' is not a tensor"), std::string::npos);
}

TEST(Import, ConstantNodesBecomeConstants) {
  auto m = MakeModel(13);
  AttrFloats(AddNode(m, "Constant", {}, {"cf"}), "value_floats", {1.f, 2.f});
  AttrInt(AddNode(m, "Constant", {}, {"ci"}), "value_int", 42);
  AttrFloat(AddNode(m, "Constant", {}, {"cs"}), "value_float", 0.5f);
  AttrInts(AddNode(m, "Constant", {}, {"cis"}), "value_ints", {3, 4, 5});
  {
    auto* n = AddNode(m, "Constant", {}, {"ct"});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = FloatTensor("", {2, 1}, {7.f, 8.f}, false);
  }
  for (const char* o : {"cf", "ci", "cs", "cis", "ct"}) AddOutput(m, o);
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->nodes.empty());
  EXPECT_EQ(Floats(V(*g, "cf").constant), (std::vector<float>{1, 2}));
  EXPECT_EQ(V(*g, "ci").shape, ir::Shape{});
  EXPECT_EQ(V(*g, "ci").constant->GetInt(0), 42);
  EXPECT_EQ(V(*g, "cs").constant->GetDouble(0), 0.5);
  EXPECT_EQ(V(*g, "cis").constant->ToInts(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(V(*g, "ct").shape, (ir::Shape{2, 1}));
  EXPECT_EQ(Floats(V(*g, "ct").constant), (std::vector<float>{7, 8}));
}

TEST(Import, OpsetsOutsideOneToEighteenAreRejected) {
  for (int64_t opset : {0, 19, 21}) {
    auto m = PassThroughModel({1, 2});
    m.mutable_opset_import(0)->set_version(opset);
    AddNode(m, "Relu", {"input"}, {"r"}, "first_relu");
    AddOutput(m, "r");
    auto g = Import(m);
    ASSERT_REFUSED(g, StatusCode::kUnsupported, "of the default ONNX domain") << opset;
    EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(g.status().message().find("opset " + std::to_string(opset)), std::string::npos)
        << g.status().ToString();
    if (opset > 18) {  // names the first node it would misread and the fix
      EXPECT_NE(g.status().message().find("from node 'first_relu' (Relu) on"), std::string::npos)
          << g.status().ToString();
      EXPECT_NE(g.status().message().find("re-export the model at opset 18"), std::string::npos)
          << g.status().ToString();
    }
  }
  auto m = PassThroughModel({1, 2});
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  m.mutable_opset_import(0)->set_version(18);
  EXPECT_TRUE(Import(m).ok());
  m.mutable_opset_import(0)->set_domain("ai.onnx.ml");
  ASSERT_REFUSED(Import(m), StatusCode::kInvalidArgument, "model has no opset_import entry for the default ONNX domain");  // no default-domain opset at all
}

// Resource limits (fcb/limits.h) on what a model declares, checked before the
// import allocates or walks anything for it.
TEST(Import, AbsurdDeclaredInputShapesAreRefusedNamingTheInput) {
  const int64_t big = int64_t{1} << 40;
  auto g = Import(PassThroughModel({big, big, 3}));
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "input 'input' has shape 1099511627776x1099511627776x3, more than the");
  EXPECT_NE(g.status().message().find("input 'input' has shape 1099511627776x1099511627776x3, more than the limit of " +
                                      std::to_string(limits::kMaxTensorElements) + " elements"),
            std::string::npos)
      << g.status().ToString();
  std::vector<Dim> deep(limits::kMaxRank + 1, Dim(1));
  auto g2 = Import(PassThroughModel(deep));
  ASSERT_REFUSED(g2, StatusCode::kUnsupported, "input 'input' has 17 dimensions, more than the limit of 16");
  EXPECT_NE(g2.status().message().find(std::to_string(limits::kMaxRank + 1) + " dimensions, more than the limit"),
            std::string::npos)
      << g2.status().ToString();
  // The same through input_shapes: a symbolic dim fixed to something absurd.
  ImportOptions opts;
  opts.input_shapes["input"] = {big, big, 4, 4};
  auto g3 = Import(PassThroughModel({"batch", 3, 4, 4}), "", opts);
  ASSERT_REFUSED(g3, StatusCode::kInvalidArgument, "input_shapes['input'] = [1099511627776, 1099511627776, 4, 4]");
  // Just within the limit imports (nothing is allocated for an input's shape).
  auto g4 = Import(PassThroughModel({int64_t{1} << 24, int64_t{1} << 24}));
  EXPECT_TRUE(g4.ok()) << g4.status().ToString();
}

// If nodes nested `depth` deep: each then_branch holds the next If, each
// else_branch a leaf.
onnx::ModelProto NestedIfModel(int depth) {
  auto m = MakeModel(13);
  AddInput(m, "c", {}, onnx::TensorProto::BOOL);
  AddOutput(m, "y");
  onnx::GraphProto inner;
  inner.set_name("leaf");
  {
    auto* n = inner.add_node();
    n->set_op_type("Constant");
    n->add_output("y");
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = FloatTensor("v", {1}, {1.f});
    inner.add_output()->set_name("y");
  }
  const onnx::GraphProto leaf = inner;
  for (int d = 0; d < depth; ++d) {
    onnx::GraphProto outer;
    outer.set_name("level" + std::to_string(d));
    auto* n = outer.add_node();
    n->set_op_type("If");
    n->set_name("if" + std::to_string(depth - 1 - d));
    n->add_input("c");
    n->add_output("y");
    for (const char* branch : {"then_branch", "else_branch"}) {
      auto* a = n->add_attribute();
      a->set_name(branch);
      a->set_type(onnx::AttributeProto::GRAPH);
      *a->mutable_g() = branch[0] == 't' ? inner : leaf;  // one nested branch: linear size
    }
    outer.add_output()->set_name("y");
    inner = outer;
  }
  *m.mutable_graph()->mutable_node() = inner.node();
  return m;
}

TEST(Import, SubgraphsNestedPastTheLimitAreRefusedNamingTheNode) {
  auto g = Import(NestedIfModel(limits::kMaxSubgraphDepth + 1));
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "node 'if32' (If) attribute 'then_branch' nests subgraphs 33 deep,");
  EXPECT_NE(g.status().message().find("node 'if" + std::to_string(limits::kMaxSubgraphDepth) +
                                      "' (If) attribute 'then_branch' nests subgraphs " +
                                      std::to_string(limits::kMaxSubgraphDepth + 1) + " deep, more than the limit of " +
                                      std::to_string(limits::kMaxSubgraphDepth)),
            std::string::npos)
      << g.status().ToString();
  // At the limit the nesting is no reason to refuse (If itself may still be).
  auto ok = Import(NestedIfModel(limits::kMaxSubgraphDepth));
  if (!ok.ok()) EXPECT_EQ(ok.status().message().find("nests subgraphs"), std::string::npos) << ok.status().ToString();
  // Far past it (protobuf's own nesting bound) the parse fails, saying why it may have.
  auto far = Import(NestedIfModel(200));
  ASSERT_REFUSED(far, StatusCode::kCorruptFile, "not a valid ONNX model (protobuf parsing failed");
  EXPECT_NE(far.status().message().find("nested far past the limit"), std::string::npos) << far.status().ToString();
}

TEST(Import, GarbageAndMissingFilesAreRejected) {
  auto g = ImportOnnxBytes(std::string("\x0a\xff\xff\xff\xff\x0f garbage", 14), "", {});
  ASSERT_REFUSED(g, StatusCode::kCorruptFile, "not a valid ONNX model (protobuf parsing failed");
  EXPECT_EQ(g.status().code(), StatusCode::kCorruptFile);
  auto g2 = ImportOnnx("/nonexistent/model.onnx", {});
  ASSERT_REFUSED(g2, StatusCode::kNotFound, "cannot open model '/nonexistent/model.onnx'");
  EXPECT_EQ(g2.status().code(), StatusCode::kNotFound);
  EXPECT_NE(g2.status().message().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST(Import, AllUnsupportedNodesAreReportedTogether) {
  auto m = MakeModel(13);
  AddInput(m, "x", {1, 4});
  AddNode(m, "NonMaxSuppression", {"x", "x"}, {"nms"}, "n1");
  {
    auto* loop = AddNode(m, "Loop", {"", ""}, {"loop_out"}, "n7");
    auto* a = loop->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name("body");
  }
  AddNode(m, "FusedGemm", {"x"}, {"ms"}, "n9")->set_domain("com.microsoft");
  AddNode(m, "Abs", {"nms"}, {"downstream"}, "n10");  // after an unsupported node: not reported
  AddOutput(m, "downstream");
  AddOutput(m, "loop_out");
  AddOutput(m, "ms");
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "operator NonMaxSuppression is not supported (`fcb ops` lists those");
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("3 unsupported operators"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n1' (NonMaxSuppression)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n7' (Loop)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n9' (com.microsoft.FusedGemm): operator com.microsoft.FusedGemm is not supported"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("n10"), std::string::npos) << msg;
}

// A com.microsoft node becomes its registry operator "com.microsoft.<op>",
// distinct from the default domain's operator of the same op_type.
TEST(Import, MicrosoftDomainOperatorsGetTheirRegistryName) {
  auto m = MakeModel(18);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  AddInput(m, "x", {2, 3});
  AddNode(m, "Gelu", {"x"}, {"g"}, "ms_gelu")->set_domain("com.microsoft");
  AddNode(m, "Relu", {"g"}, {"y"}, "relu");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->nodes.size(), 2u);
  EXPECT_EQ(g->nodes[0].op_type, "com.microsoft.Gelu");
  EXPECT_EQ(g->nodes[0].domain, "");
  EXPECT_EQ(g->nodes[1].op_type, "Relu");

  ms->set_version(2);  // a version whose operators fcb does not know
  ASSERT_REFUSED(Import(m), StatusCode::kUnsupported,
                 "node 'ms_gelu' (com.microsoft.Gelu): the model imports opset 2 of domain 'com.microsoft'");
}

TEST(Import, UndefinedInputIsAnError) {
  auto m = MakeModel(13);
  AddInput(m, "x", {2});
  AddNode(m, "Relu", {"nope"}, {"y"}, "r");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "input 'nope' is not a graph input, initializer or output of an");
  EXPECT_NE(g.status().message().find("node 'r' (Relu): input 'nope'"), std::string::npos)
      << g.status().ToString();
}

// ONNX requires producers before consumers; some exporters write nodes in
// another order and ONNX Runtime sorts them. fcb sorts too: the reversed node
// list imports to the same computation, in an order that computes every
// input first, and an already sorted model keeps its order.
TEST(Import, NodesInAnyOrderAreSortedTopologically) {
  auto build = [](bool reversed) {
    auto m = MakeModel(13);
    AddInput(m, "x", {4});
    std::vector<std::function<void()>> adds = {
        [&] { AddNode(m, "Relu", {"x"}, {"a"}, "relu"); },
        [&] { AddNode(m, "Mul", {"a", "a"}, {"b"}, "square"); },
        [&] { AddNode(m, "Neg", {"x"}, {"c"}, "neg"); },
        [&] { AddNode(m, "Add", {"b", "c"}, {"y"}, "add"); },
        [&] { AddNode(m, "Sub", {"y", "a"}, {"z"}, "sub"); },
    };
    if (reversed) std::reverse(adds.begin(), adds.end());
    for (auto& f : adds) f();
    AddOutput(m, "z");
    return m;
  };
  auto sorted = Import(build(false));
  ASSERT_TRUE(sorted.ok()) << sorted.status().ToString();
  std::vector<std::string> names;
  for (const auto& n : sorted->nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"relu", "square", "neg", "add", "sub"}));  // unchanged

  auto shuffled = Import(build(true));
  ASSERT_TRUE(shuffled.ok()) << shuffled.status().ToString();
  ASSERT_EQ(shuffled->nodes.size(), 5u);
  const float xs[4] = {-2.f, -0.5f, 1.f, 3.f};
  const ir::TensorPtr x = ir::TensorData::FromFloats({4}, {xs[0], xs[1], xs[2], xs[3]});
  auto run = [&](const ir::Graph& g) {
    auto vals = Interpret(g, {{g.inputs.at(0), x}});
    EXPECT_TRUE(vals.ok()) << vals.status().ToString();  // an unsorted graph fails: input not computed
    return vals.ok() ? Floats((*vals)[g.outputs[0]]) : std::vector<float>{};
  };
  const std::vector<float> want = run(*sorted);
  ASSERT_EQ(want.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const float a = std::max(xs[i], 0.f);
    EXPECT_EQ(want[i], a * a - xs[i] - a);
  }
  EXPECT_EQ(run(*shuffled), want);
}

TEST(Import, ACycleIsAnErrorNamingItsNodes) {
  auto m = MakeModel(13);
  AddInput(m, "x", {4});
  AddNode(m, "Relu", {"x"}, {"r"}, "before");
  AddNode(m, "Add", {"r", "c"}, {"a"}, "loop_add");
  AddNode(m, "Mul", {"a", "a"}, {"b"}, "loop_mul");
  AddNode(m, "Neg", {"b"}, {"c"}, "loop_neg");
  AddNode(m, "Relu", {"a"}, {"y"}, "after");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kInvalidArgument, "the graph has a cycle");
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'loop_add' (Add) -> 'loop_mul' (Mul) -> 'loop_neg' (Neg) -> 'loop_add' (Add)"),
            std::string::npos) << msg;
  EXPECT_EQ(msg.find("'before'"), std::string::npos) << msg;  // not on the cycle
  EXPECT_NE(msg.find("4 nodes cannot be ordered"), std::string::npos) << msg;  // the cycle and 'after'
}

// PyTorch-style dynamic reshape: x.view(x.size(0), -1).
TEST(Import, ShapeGatherUnsqueezeConcatReshapeFoldsToAConstantShape) {
  ASSERT_TRUE(HaveOps({"Gather", "Unsqueeze", "Concat", "Reshape"}));
  auto m = MakeModel(13);
  AddInput(m, "x", {"n", 3, 4});
  AddInit(m, Int64Tensor("zero", {}, {0}));
  AddInit(m, Int64Tensor("axes0", {1}, {0}));
  AddInit(m, Int64Tensor("minus1", {1}, {-1}));
  AddNode(m, "Shape", {"x"}, {"s"});
  AddNode(m, "Gather", {"s", "zero"}, {"s0"});
  AddNode(m, "Unsqueeze", {"s0", "axes0"}, {"s0u"});
  AttrInt(AddNode(m, "Concat", {"s0u", "minus1"}, {"shape"}), "axis", 0);
  AddNode(m, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  AddOutput(m, "y");
  ImportOptions opts;
  opts.input_shapes["x"] = {2, 3, 4};
  auto g = Import(m, "", opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0].op_type, "Reshape");
  ASSERT_TRUE(g->values[g->nodes[0].inputs[1]].is_constant());
  EXPECT_EQ(g->values[g->nodes[0].inputs[1]].constant->ToInts(), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(V(*g, "y").shape, (ir::Shape{2, 12}));
  EXPECT_EQ(g->values[g->outputs[0]].name, "y");
}

TEST(Import, ShapeOfAStaticInputFoldsWithoutTheRegistry) {
  auto m = MakeModel(15);
  AddInput(m, "x", {2, 3, 5});
  AttrInt(AddNode(m, "Shape", {"x"}, {"s"}), "start", -2);
  AddNode(m, "Size", {"x"}, {"n"});
  AddOutput(m, "s");
  AddOutput(m, "n");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->nodes.empty());
  EXPECT_EQ(V(*g, "s").constant->ToInts(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(V(*g, "n").constant->ToInts(), (std::vector<int64_t>{30}));
}

// Softmax-11 normalizes over all dims from `axis` on (coerced to 2-D).
TEST(Import, Opset11SoftmaxIsCanonicalized) {
  ASSERT_TRUE(HaveOps({"Softmax", "Flatten", "Reshape"}));
  auto m = MakeModel(11);
  AddInput(m, "x", {2, 3, 4});
  AttrInt(AddNode(m, "Softmax", {"x"}, {"y"}, "sm"), "axis", 1);
  AttrInt(AddNode(m, "Softmax", {"x"}, {"z"}, "sm_last"), "axis", 2);
  AddOutput(m, "y");
  AddOutput(m, "z");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<std::string> ops;
  for (const auto& n : g->nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"Flatten", "Softmax", "Reshape", "Softmax"}));
  EXPECT_EQ(g->nodes[1].GetInt("axis", 0), -1);
  EXPECT_EQ(g->nodes[3].GetInt("axis", 0), -1);
  EXPECT_EQ(V(*g, "y").shape, (ir::Shape{2, 3, 4}));

  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = std::sin(0.7f * i);
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({2, 3, 4}, x)}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  std::vector<float> y = Floats(vals.value()[ValueId(*g, "y")]);
  for (int b = 0; b < 2; ++b) {  // reference: softmax over each run of 12
    double sum = 0;
    for (int k = 0; k < 12; ++k) sum += std::exp(x[b * 12 + k]);
    for (int k = 0; k < 12; ++k) EXPECT_NEAR(y[b * 12 + k], std::exp(x[b * 12 + k]) / sum, 1e-6);
  }
}

TEST(Import, AttributeFormsBecomeConstantInputs) {
  ASSERT_TRUE(HaveOps({"Unsqueeze", "Squeeze", "Clip"}));
  auto m = MakeModel(10);
  AddInput(m, "x", {3, 4});
  AttrInts(AddNode(m, "Unsqueeze", {"x"}, {"u"}, "unsq"), "axes", {0, 3});
  AttrInts(AddNode(m, "Squeeze", {"u"}, {"s"}, "sq"), "axes", {0});
  auto* clip = AddNode(m, "Clip", {"s"}, {"c"}, "clip");
  AttrFloat(clip, "min", -1.f);
  AttrFloat(clip, "max", 2.f);
  AddOutput(m, "c");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->nodes.size(), 3u);
  EXPECT_EQ(V(*g, "u").shape, (ir::Shape{1, 3, 4, 1}));
  EXPECT_EQ(V(*g, "s").shape, (ir::Shape{3, 4, 1}));
  const ir::Node& unsq = g->nodes[0];
  EXPECT_FALSE(unsq.Has("axes"));
  ASSERT_EQ(unsq.inputs.size(), 2u);
  EXPECT_EQ(g->values[unsq.inputs[1]].constant->ToInts(), (std::vector<int64_t>{0, 3}));
  const ir::Node& c = g->nodes[2];
  ASSERT_EQ(c.inputs.size(), 3u);
  EXPECT_EQ(g->values[c.inputs[1]].constant->GetDouble(0), -1.0);
  EXPECT_EQ(g->values[c.inputs[2]].constant->GetDouble(0), 2.0);
}

TEST(Import, DropoutBecomesIdentityAndBatchNormLosesRemovedAttrs) {
  ASSERT_TRUE(HaveOps({"Identity", "BatchNormalization"}));
  auto m = MakeModel(7);
  AddInput(m, "x", {1, 2, 3, 3});
  for (const char* n : {"sc", "bi", "me", "va"}) AddInit(m, FloatTensor(n, {2}, {1.f, 0.5f}));
  auto* bn = AddNode(m, "BatchNormalization", {"x", "sc", "bi", "me", "va"}, {"b"}, "bn");
  AttrInt(bn, "spatial", 1);
  AttrFloat(bn, "epsilon", 1e-3f);
  AttrFloat(AddNode(m, "Dropout", {"b"}, {"d", "mask"}, "drop"), "ratio", 0.5f);
  AddOutput(m, "d");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->nodes.size(), 2u);
  EXPECT_FALSE(g->nodes[0].Has("spatial"));
  EXPECT_EQ(g->nodes[1].op_type, "Identity");
  EXPECT_EQ(g->nodes[1].outputs.size(), 1u);
  EXPECT_EQ(V(*g, "d").shape, (ir::Shape{1, 2, 3, 3}));
}

// torch exports nn.Dropout(p=0.0) with training_mode = true (torchvision's
// swin_t does): nothing is dropped, so it is the identity too. With a ratio
// above 0 it stays a Dropout, which refuses to drop at random.
TEST(Import, DropoutInTrainingModeWithRatioZeroIsIdentity) {
  ASSERT_TRUE(HaveOps({"Identity", "Relu"}));
  for (float ratio : {0.f, 0.5f}) {
    auto m = MakeModel(13);
    AddInput(m, "x", {2, 3});
    AddInit(m, FloatTensor("ratio", {}, {ratio}));
    onnx::TensorProto mode;
    mode.set_name("mode");
    mode.set_data_type(onnx::TensorProto::BOOL);
    mode.add_int32_data(1);
    AddInit(m, mode);
    AddNode(m, "Relu", {"x"}, {"r"}, "relu");
    AddNode(m, "Dropout", {"r", "ratio", "mode"}, {"d", "mask"}, "drop");
    AddOutput(m, "d");
    auto g = Import(m);
    if (ratio == 0.f) {
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ASSERT_EQ(g->nodes.size(), 2u);
      EXPECT_EQ(g->nodes[1].op_type, "Identity");
      EXPECT_EQ(g->nodes[1].inputs.size(), 1u);
    } else {
      ASSERT_REFUSED(g, StatusCode::kUnsupported, "training_mode=true (random dropout)");
      EXPECT_NE(g.status().message().find("training_mode=true"), std::string::npos) << g.status().ToString();
    }
  }
}

TEST(Import, AllConstantNodesAreFolded) {
  ASSERT_TRUE(HaveOps({"Add", "ConstantOfShape"}));
  auto m = MakeModel(13);
  AddInput(m, "x", {2});
  AddInit(m, FloatTensor("a", {2}, {1, 2}));
  AddInit(m, Int64Tensor("shape", {1}, {2}));
  AddNode(m, "ConstantOfShape", {"shape"}, {"zeros"});
  AddNode(m, "Add", {"a", "zeros"}, {"c"});
  AddNode(m, "Add", {"x", "c"}, {"y"}, "add_x");
  AddOutput(m, "y");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0].name, "add_x");
  EXPECT_EQ(Floats(V(*g, "c").constant), (std::vector<float>{1, 2}));
}


TEST(Import, ReduceAxesAndSplitSizesBecomeInputs) {
  ASSERT_TRUE(HaveOps({"ReduceMean", "Split"}));
  for (int64_t opset : {11, 18}) {
    auto m = MakeModel(opset);
    AddInput(m, "x", {2, 7});
    if (opset == 11) {
      AttrInts(AddNode(m, "ReduceMean", {"x"}, {"r"}, "mean"), "axes", {1});
    } else {
      AddInit(m, Int64Tensor("ax", {1}, {1}));
      AddNode(m, "ReduceMean", {"x", "ax"}, {"r"}, "mean");
    }
    auto* split = AddNode(m, "Split", {"x"}, {"s0", "s1", "s2"}, "split");
    AttrInt(split, "axis", 1);
    if (opset == 18) AttrInt(split, "num_outputs", 3);
    else AttrInts(split, "split", {3, 3, 1});
    for (const char* o : {"r", "s0", "s1", "s2"}) AddOutput(m, o);
    auto g = Import(m);
    ASSERT_TRUE(g.ok()) << opset << ": " << g.status().ToString();
    ASSERT_EQ(g->nodes.size(), 2u);
    for (const auto& n : g->nodes) {
      EXPECT_FALSE(n.Has("axes") || n.Has("split") || n.Has("num_outputs")) << n.Describe();
      ASSERT_EQ(n.inputs.size(), 2u) << n.Describe();
      ASSERT_TRUE(g->values[n.inputs[1]].is_constant()) << n.Describe();
    }
    EXPECT_EQ(g->values[g->nodes[1].inputs[1]].constant->ToInts(), (std::vector<int64_t>{3, 3, 1}));
    EXPECT_EQ(V(*g, "r").shape, (ir::Shape{2, 1}));
    EXPECT_EQ(V(*g, "s2").shape, (ir::Shape{2, 1}));
  }
}

}  // namespace
// ---- Control flow: If, Loop and Scan are expanded at import ----

onnx::NodeProto* GNode(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                       std::vector<std::string> out, const std::string& name) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return n;
}

void GraphAttribute(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

// A subgraph with the given inputs (names only) and outputs.
onnx::GraphProto Subgraph(const std::string& name, std::vector<std::string> inputs, std::vector<std::string> outputs) {
  onnx::GraphProto g;
  g.set_name(name);
  for (auto& i : inputs) g.add_input()->set_name(i);
  for (auto& o : outputs) g.add_output()->set_name(o);
  return g;
}

int CountOps(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(),
                                        [&](const ir::Node& n) { return n.op_type == op; }));
}

std::vector<float> Floats(const ir::TensorData& t) {
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

ir::TensorPtr Bool(bool b) {
  auto t = ir::TensorData::Make(ir::DType::kBool, {});
  t->bytes[0] = b ? 1 : 0;
  return t;
}

// y = If(c) then x * w + h else h - x, where w is an initializer, x a graph
// input and h an output of a main-graph node: all outer-scope names.
onnx::ModelProto OuterScopeIfModel() {
  auto m = MakeModel(13);
  AddInput(m, "x", {3});
  AddInput(m, "c", {}, onnx::TensorProto::BOOL);
  AddInit(m, FloatTensor("w", {3}, {2.f, 3.f, 4.f}));
  AddNode(m, "Abs", {"x"}, {"h"}, "abs");
  auto then_g = Subgraph("then", {}, {"t_out"});
  GNode(then_g, "Mul", {"x", "w"}, {"xw"}, "mul");
  GNode(then_g, "Add", {"xw", "h"}, {"t_out"}, "add");
  auto else_g = Subgraph("else", {}, {"e_out"});
  GNode(else_g, "Sub", {"h", "x"}, {"e_out"}, "sub");
  auto* n = AddNode(m, "If", {"c"}, {"y"}, "the_if");
  GraphAttribute(n, "then_branch", then_g);
  GraphAttribute(n, "else_branch", else_g);
  AddOutput(m, "y");
  return m;
}

TEST(ControlFlow, RuntimeConditionIfComputesBothBranchesAndSelects) {
  auto g = Import(OuterScopeIfModel());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(CountOps(*g, "If"), 0);
  EXPECT_EQ(CountOps(*g, "Where"), 1);
  ASSERT_EQ(g->inputs.size(), 2u);
  auto x = ir::TensorData::FromFloats({3}, {1.f, -2.f, 3.f});
  for (bool c : {true, false}) {
    auto vals = Interpret(*g, {{g->inputs[0], x}, {g->inputs[1], Bool(c)}});
    ASSERT_TRUE(vals.ok()) << vals.status().ToString();
    const std::vector<float> want = c ? std::vector<float>{3.f, -4.f, 15.f} : std::vector<float>{0.f, 4.f, 0.f};
    EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), want) << "condition " << c;
  }
  EXPECT_EQ(g->values[g->outputs[0]].name, "y");
}

TEST(ControlFlow, OuterValueProducedAfterTheIfInTheNodeListIsOrderedFirst) {
  // The branches read h, whose producer comes after the If in the file: the
  // node order follows what subgraphs read too.
  auto m = OuterScopeIfModel();
  auto* nodes = m.mutable_graph()->mutable_node();
  nodes->SwapElements(0, 1);
  ASSERT_EQ(m.graph().node(0).op_type(), "If");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({3}, {1.f, -2.f, 3.f})},
                             {g->inputs[1], Bool(false)}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), (std::vector<float>{0.f, 4.f, 0.f}));
}

// The merged-decoder form exporters write: If(use_cache_branch) whose branches
// compute values named exactly like the If's own outputs (legal ONNX: a
// subgraph's names shadow the outer ones). Those names are local to each
// branch, not reads of the If's outputs, so the If does not wait on itself.
onnx::ModelProto SameNamedBranchOutputsModel() {
  auto m = MakeModel(13);
  AddInput(m, "x", {3});
  AddInput(m, "use_cache_branch", {}, onnx::TensorProto::BOOL);
  AddNode(m, "Abs", {"x"}, {"h"}, "abs");
  auto then_g = Subgraph("with_past", {}, {"logits", "present"});
  GNode(then_g, "Mul", {"h", "x"}, {"logits"}, "then_mul");
  GNode(then_g, "Neg", {"logits"}, {"present"}, "then_neg");
  auto else_g = Subgraph("without_past", {}, {"logits", "present"});
  GNode(else_g, "Add", {"h", "x"}, {"logits"}, "else_add");
  GNode(else_g, "Identity", {"logits"}, {"present"}, "else_identity");
  auto* n = AddNode(m, "If", {"use_cache_branch"}, {"logits", "present"}, "optimum::if");
  GraphAttribute(n, "then_branch", then_g);
  GraphAttribute(n, "else_branch", else_g);
  AddNode(m, "Sub", {"logits", "present"}, {"y"}, "sub");
  AddOutput(m, "y");
  AddOutput(m, "present");
  return m;
}

TEST(ControlFlow, BranchValuesNamedLikeTheIfOutputsAreLocalToTheBranch) {
  auto g = Import(SameNamedBranchOutputsModel());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(CountOps(*g, "If"), 0);
  ASSERT_EQ(g->inputs.size(), 2u);
  ASSERT_EQ(g->outputs.size(), 2u);
  EXPECT_EQ(g->values[g->outputs[1]].name, "present");
  auto x = ir::TensorData::FromFloats({3}, {1.f, -2.f, 3.f});
  for (bool c : {true, false}) {
    auto vals = Interpret(*g, {{g->inputs[0], x}, {g->inputs[1], Bool(c)}});
    ASSERT_TRUE(vals.ok()) << vals.status().ToString();
    // then: logits = |x| * x, present = -logits; else: logits = |x| + x, present = logits.
    const std::vector<float> y = c ? std::vector<float>{2.f, -8.f, 18.f} : std::vector<float>{0.f, 0.f, 0.f};
    const std::vector<float> present = c ? std::vector<float>{-1.f, 4.f, -9.f} : std::vector<float>{2.f, 0.f, 6.f};
    EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), y) << "use_cache_branch " << c;
    EXPECT_EQ(Floats(*vals.value()[g->outputs[1]]), present) << "use_cache_branch " << c;
  }
}

TEST(ControlFlow, ConstantConditionIfInlinesTheChosenBranchOnly) {
  for (bool c : {true, false}) {
    auto m = OuterScopeIfModel();
    // The condition becomes an initializer (no longer a runtime input).
    onnx::TensorProto t;
    t.set_name("c");
    t.set_data_type(onnx::TensorProto::BOOL);
    t.add_int32_data(c ? 1 : 0);
    AddInit(m, t);
    auto g = Import(m);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(CountOps(*g, "Where"), 0);
    EXPECT_EQ(CountOps(*g, "If"), 0);
    EXPECT_EQ(CountOps(*g, "Mul"), c ? 1 : 0);
    EXPECT_EQ(CountOps(*g, "Sub"), c ? 0 : 1);
    auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({3}, {1.f, -2.f, 3.f})}});
    ASSERT_TRUE(vals.ok()) << vals.status().ToString();
    const std::vector<float> want = c ? std::vector<float>{3.f, -4.f, 15.f} : std::vector<float>{0.f, 4.f, 0.f};
    EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), want);
  }
}

TEST(ControlFlow, ConditionFoldedFromStaticShapesIsConstant) {
  // If(Size(x) == 3): the condition folds at import, so no Where remains.
  auto m = OuterScopeIfModel();
  m.mutable_graph()->mutable_input()->RemoveLast();  // drop input c
  AddInit(m, Int64Tensor("three", {}, {3}));
  AddNode(m, "Size", {"x"}, {"size"}, "size");
  AddNode(m, "Equal", {"size", "three"}, {"c"}, "eq");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(CountOps(*g, "Where"), 0);
  EXPECT_EQ(CountOps(*g, "Mul"), 1);
}

TEST(ControlFlow, RuntimeConditionBranchesOfDifferentShapesAreRefusedNamingTheNode) {
  auto m = OuterScopeIfModel();
  auto* node = m.mutable_graph()->mutable_node(1);
  auto else_g = Subgraph("else", {}, {"e_out"});
  AddInit(m, Int64Tensor("axes0", {1}, {0}));
  GNode(else_g, "Unsqueeze", {"x", "axes0"}, {"e_out"}, "unsq");
  *node->mutable_attribute(1)->mutable_g() = else_g;
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "its condition is known only at run time, so both branches are");
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("node 'the_if' (If)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("then_branch gives float32 of shape 3, else_branch float32 of shape 1x3"), std::string::npos) << msg;
}

TEST(ControlFlow, RandomOperatorInARuntimeConditionBranchIsRefused) {
  auto m = OuterScopeIfModel();
  auto* node = m.mutable_graph()->mutable_node(1);
  auto else_g = Subgraph("else", {}, {"e_out"});
  GNode(else_g, "RandomUniformLike", {"x"}, {"e_out"}, "dice");
  *node->mutable_attribute(1)->mutable_g() = else_g;
  auto g = Import(m);
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "its condition is known only at run time, so fcb computes both");
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("node 'the_if' (If)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'dice' (RandomUniformLike)"), std::string::npos) << msg;
}

// Loop(M = trip) over v (init x): v = If(i < 1) then v + 1 else v * 2 (an If
// nested in the body, its condition from the iteration number), also stacked
// as a scan output; the body uses the outer-scope initializer `one`.
onnx::ModelProto LoopModel(const std::string& trip_name, int64_t trip, bool trip_is_input = false) {
  auto m = MakeModel(13);
  AddInput(m, "x", {2});
  if (trip_is_input) AddInput(m, trip_name, {}, onnx::TensorProto::INT64);
  else AddInit(m, Int64Tensor(trip_name, {}, {trip}));
  AddInit(m, FloatTensor("one", {}, {1.f}));
  AddInit(m, FloatTensor("two", {}, {2.f}));
  auto body = Subgraph("body", {"i", "cond_in", "v"}, {"cond_out", "v_next", "v_scan"});
  auto then_g = Subgraph("then", {}, {"plus"});
  GNode(then_g, "Add", {"v", "one"}, {"plus"}, "plus_one");
  auto else_g = Subgraph("else", {}, {"times"});
  GNode(else_g, "Mul", {"v", "two"}, {"times"}, "times_two");
  auto* lim = body.add_initializer();
  *lim = Int64Tensor("limit", {}, {1});
  GNode(body, "Less", {"i", "limit"}, {"first"}, "less");
  auto* inner = GNode(body, "If", {"first"}, {"v_next"}, "inner_if");
  GraphAttribute(inner, "then_branch", then_g);
  GraphAttribute(inner, "else_branch", else_g);
  GNode(body, "Identity", {"cond_in"}, {"cond_out"}, "keep_going");
  GNode(body, "Identity", {"v_next"}, {"v_scan"}, "copy");
  auto* loop = AddNode(m, "Loop", {trip_name, "", "x"}, {"v_final", "v_all"}, "the_loop");
  GraphAttribute(loop, "body", body);
  AddOutput(m, "v_final");
  AddOutput(m, "v_all");
  return m;
}

TEST(ControlFlow, LoopWithConstantTripCountIsUnrolledWithANestedIf) {
  auto g = Import(LoopModel("M", 3));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(CountOps(*g, "Where"), 0);  // each iteration's condition folded
  EXPECT_EQ(CountOps(*g, "Add"), 1);
  EXPECT_EQ(CountOps(*g, "Mul"), 2);
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({2}, {1.f, -3.f})}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), (std::vector<float>{8.f, -8.f}));
  const auto& all = *vals.value()[g->outputs[1]];
  EXPECT_EQ(all.shape, (ir::Shape{3, 2}));
  EXPECT_EQ(Floats(all), (std::vector<float>{2.f, -2.f, 4.f, -4.f, 8.f, -8.f}));
}

TEST(ControlFlow, LoopWithoutTripCountRunsUntilItsConditionFoldsToFalse) {
  // No M, a constant true condition; the body's condition is i < 1, which
  // folds in every iteration: false after the second, so two iterations.
  auto m = LoopModel("M", 3);
  auto* loop = m.mutable_graph()->mutable_node(0);
  loop->set_input(0, "");
  loop->set_input(1, "go");
  onnx::TensorProto t;
  t.set_name("go");
  t.set_data_type(onnx::TensorProto::BOOL);
  t.add_int32_data(1);
  AddInit(m, t);
  auto* body = loop->mutable_attribute(0)->mutable_g();
  for (auto& n : *body->mutable_node())
    if (n.name() == "keep_going") {
      n.set_op_type("Less");
      n.clear_input();
      n.add_input("i");
      n.add_input("limit");
    }
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({2}, {1.f, -3.f})}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), (std::vector<float>{4.f, -4.f}));
  EXPECT_EQ(vals.value()[g->outputs[1]]->shape, (ir::Shape{2, 2}));
}

TEST(ControlFlow, DataDependentLoopIsRefusedNamingTheNode) {
  auto g = Import(LoopModel("M", 0, /*trip_is_input=*/true));
  ASSERT_REFUSED(g, StatusCode::kUnsupported, "its trip count ('M') is known only at run time; fcb unrolls loops at");
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("node 'the_loop' (Loop): its trip count ('M') is known only at run time"), std::string::npos)
      << msg;
  // A body condition computed from data: the iteration count depends on it.
  auto m = LoopModel("M", 3);
  auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
  for (auto& n : *body->mutable_node())
    if (n.name() == "keep_going") {
      n.set_op_type("ReduceMax");  // cond_out = any(v > 0) needs data; a float here, then Cast
      n.clear_input();
      n.add_input("v");
      n.set_output(0, "vmax");
    }
  AddInit(m, FloatTensor("zero", {}, {0.f}));
  GNode(*body, "Greater", {"vmax", "zero"}, {"cond_out"}, "positive");
  auto g2 = Import(m);
  EXPECT_REFUSED(g2, StatusCode::kUnsupported, "the body's condition output ('cond_out') is known only at run time,");
  EXPECT_NE(g2.status().message().find("node 'the_loop' (Loop): the body's condition output ('cond_out') is known "
                                       "only at run time"),
            std::string::npos)
      << g2.status().ToString();
}

TEST(ControlFlow, LoopPastTheUnrollCapIsRefusedNamingTripCountAndCap) {
  auto g = Import(LoopModel("M", 5000));
  EXPECT_REFUSED(g, StatusCode::kUnsupported, "trip count 5000 is more than the 4096 iterations fcb unrolls");
  EXPECT_NE(g.status().message().find("node 'the_loop' (Loop): trip count 5000 is more than the 4096 iterations"),
            std::string::npos)
      << g.status().ToString();
}

TEST(ControlFlow, ScanRunsForwardAndReverseWithAxes) {
  // Scan-9: state s (init 0, shape [2]); scan input x [2, 3] along axis 1,
  // reversed; body: s' = s + x_t, output s' stacked along axis 1 reversed.
  auto m = MakeModel(11);
  AddInput(m, "x", {2, 3});
  AddInit(m, FloatTensor("s0", {2}, {0.f, 0.f}));
  auto body = Subgraph("body", {"s", "xt"}, {"s_next", "out"});
  GNode(body, "Add", {"s", "xt"}, {"s_next"}, "acc");
  GNode(body, "Identity", {"s_next"}, {"out"}, "emit");
  auto* n = AddNode(m, "Scan", {"s0", "x"}, {"s_final", "ys"}, "the_scan");
  AttrInt(n, "num_scan_inputs", 1);
  AttrInts(n, "scan_input_axes", {1});
  AttrInts(n, "scan_input_directions", {1});
  AttrInts(n, "scan_output_axes", {-1});
  AttrInts(n, "scan_output_directions", {1});
  GraphAttribute(n, "body", body);
  AddOutput(m, "s_final");
  AddOutput(m, "ys");
  auto g = Import(m);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto vals = Interpret(*g, {{g->inputs[0], ir::TensorData::FromFloats({2, 3}, {1, 2, 3, 10, 20, 30})}});
  ASSERT_TRUE(vals.ok()) << vals.status().ToString();
  EXPECT_EQ(Floats(*vals.value()[g->outputs[0]]), (std::vector<float>{6, 60}));
  // Steps see x[:, 2], x[:, 1], x[:, 0]: partial sums 3, 5, 6 (30, 50, 60);
  // written reversed along the last axis: [6, 5, 3] per row.
  const auto& ys = *vals.value()[g->outputs[1]];
  EXPECT_EQ(ys.shape, (ir::Shape{2, 3}));
  EXPECT_EQ(Floats(ys), (std::vector<float>{6, 5, 3, 60, 50, 30}));
}

TEST(ControlFlow, HugeScan8BatchIsRefusedBeforeAnythingIsUnrolled) {
  // Scan-8 unrolls each batch entry: 2^40 entries of an empty sequence hold
  // no data at all, but would make 2^40 Gathers; refused up front.
  auto m = MakeModel(8);
  AddInput(m, "x", {Dim(int64_t{1} << 40), Dim(int64_t{0}), Dim(int64_t{2})});
  auto body = Subgraph("body", {"xt"}, {"y"});
  GNode(body, "Identity", {"xt"}, {"y"}, "copy");
  auto* n = AddNode(m, "Scan", {"", "x"}, {"ys"}, "big_scan");
  AttrInt(n, "num_scan_inputs", 1);
  GraphAttribute(n, "body", body);
  AddOutput(m, "ys");
  auto g = Import(m);
  EXPECT_REFUSED(g, StatusCode::kUnsupported, "unrolling sequence length 0 times batch 1099511627776 of a 2-node");
  EXPECT_NE(g.status().message().find("node 'big_scan' (Scan): unrolling sequence length 0 times batch 1099511627776"),
            std::string::npos)
      << g.status().ToString();
}

// Everything this models can still hit is reported with the rest,
// in one error naming each node: a Loop whose trip count is a graph input,
// an If on a graph input whose branches give different shapes, one with a
// random operator in a branch, NonZero of a graph input, and an operator
// fcb lacks. Nodes after them are not listed.
TEST(ControlFlow, EveryControlFlowRefusalIsListedInOneError) {
  auto m = LoopModel("M", 0, /*trip_is_input=*/true);
  AddInput(m, "c", {}, onnx::TensorProto::BOOL);
  AddInit(m, Int64Tensor("axes0", {1}, {0}));
  auto if_node = [&](const std::string& name, const std::string& out, onnx::GraphProto else_g) {
    auto then_g = Subgraph("then", {}, {"t_" + out});
    GNode(then_g, "Abs", {"x"}, {"t_" + out}, name + "_abs");
    auto* n = AddNode(m, "If", {"c"}, {out}, name);
    GraphAttribute(n, "then_branch", then_g);
    GraphAttribute(n, "else_branch", else_g);
    AddOutput(m, out);
  };
  auto shapes = Subgraph("else", {}, {"e_shaped"});
  GNode(shapes, "Unsqueeze", {"x", "axes0"}, {"e_shaped"}, "unsq");
  if_node("if_shapes", "shaped", shapes);
  auto random = Subgraph("else", {}, {"e_random"});
  GNode(random, "RandomNormalLike", {"x"}, {"e_random"}, "dice");
  if_node("if_random", "randomized", random);
  AddNode(m, "NonZero", {"x"}, {"nz"}, "where_nonzero");
  AddOutput(m, "nz");
  AddNode(m, "NonMaxSuppression", {"x", "x"}, {"boxes"}, "nms");
  AddNode(m, "Relu", {"boxes"}, {"after"}, "after_nms");
  AddOutput(m, "after");
  auto g = Import(m);
  EXPECT_REFUSED(g, StatusCode::kUnsupported, "its condition is known only at run time, so fcb computes both");
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("5 unsupported"), std::string::npos) << msg;
  for (const char* want : {"node 'the_loop' (Loop): its trip count ('M') is known only at run time",
                           "node 'if_shapes' (If)", "then_branch gives float32 of shape 2, else_branch float32 of shape 1x2",
                           "node 'if_random' (If)", "'dice' (RandomNormalLike)", "node 'where_nonzero' (NonZero)",
                           "node 'nms' (NonMaxSuppression)"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << "\n" << msg;
  EXPECT_EQ(msg.find("after_nms"), std::string::npos) << msg;
}

TEST(ControlFlow, ControlFlowOpsAreListedButNeverSteps) {
  for (const char* op : {"If", "Loop", "Scan"}) {
    const ops::OpDef* def = ops::FindOp(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_FALSE(def->internal) << op;
    std::vector<ops::TensorInfo> in = {{ir::DType::kBool, {}}}, out;
    ops::Attrs attrs;
    std::vector<const ir::TensorData*> consts(1, nullptr);
    ops::InferContext ctx{op, attrs, in, consts, 1};
    Status st = ops::InferOutputs(*def, ctx, &out);
    EXPECT_REFUSED(st, StatusCode::kInvalidArgument, "is expanded by the ONNX importer into other operators and is never a") << op;
    EXPECT_NE(st.message().find("never a graph node or plan step"), std::string::npos) << st.ToString();
  }
}

}  // namespace fcb::import
