// A model with several unsupported things (an unknown operator, a tensor type
// fcb lacks, an unsupported attribute value, a foreign operator domain, a
// subgraph attribute) fails at compile time with ONE error that names every
// offending node, its op type and what is unsupported, through the API and
// through `fcb compile`.
#include <algorithm>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "fcb/fcb.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;

void AddTensorValue(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& name, const std::string& op,
                         std::vector<std::string> in, const std::string& out) {
  auto* n = g->add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

std::string WriteModel(const TempDir& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("unsupported");
  AddTensorValue(g->add_input(), "x", {1, 3, 4, 4});
  // Resize's scales as an initializer (a constant), so only its mode is wrong.
  auto* scales = g->add_initializer();
  scales->set_name("scales");
  scales->set_data_type(onnx::TensorProto::FLOAT);
  scales->add_dims(4);
  for (float f : {1.f, 1.f, 2.f, 2.f}) scales->add_float_data(f);

  AddNode(g, "my_nms", "NonMaxSuppression", {"x", "x"}, "a");  // operator fcb does not implement
  auto* cast = AddNode(g, "my_cast", "Cast", {"x"}, "b");  // to string: a type fcb lacks
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::STRING);
  auto* resize = AddNode(g, "my_resize", "Resize", {"x", "", "scales"}, "c");  // attribute value
  auto* mode = resize->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("area");
  auto* ms = AddNode(g, "my_fused", "FusedGemm", {"x", "x"}, "d");  // foreign domain
  ms->set_domain("com.microsoft");
  auto* if_node = AddNode(g, "my_if", "Relu", {"x"}, "e");  // a subgraph attribute
  auto* body = if_node->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  body->mutable_g()->set_name("empty");
  AddNode(g, "supported_relu", "Relu", {"x"}, "f");  // fine: must not be listed
  AddNode(g, "after_nms", "Relu", {"a"}, "g");       // downstream of one: not listed either
  for (const char* o : {"b", "c", "d", "e", "f", "g"}) AddTensorValue(g->add_output(), o, {});
  auto* ms_opset = m.add_opset_import();
  ms_opset->set_domain("com.microsoft");
  ms_opset->set_version(1);

  const std::string path = dir.File("bad.onnx");
  std::ofstream f(path, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&f));
  return path;
}

// Every offending node, with its op type and what is wrong with it.
void ExpectListsAll(const std::string& msg) {
  EXPECT_NE(msg.find("5 unsupported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_nms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(NonMaxSuppression)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_cast"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(Cast)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cast from float32 to string"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_resize"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(Resize)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("area"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_fused"), std::string::npos) << msg;
  EXPECT_NE(msg.find("com.microsoft"), std::string::npos) << msg;
  EXPECT_NE(msg.find("my_if"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GRAPH"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("supported_relu"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("after_nms"), std::string::npos) << msg;
}

TEST(UnsupportedOps, ApiReportsEveryNodeInOneError) {
  TempDir dir;
  const std::string model = WriteModel(dir);
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(model, spec, dir.File("out.fcb"));
  ASSERT_REFUSED(r, StatusCode::kUnsupported, "operator NonMaxSuppression is not supported (`fcb ops` lists those");
  ExpectListsAll(r.status().message());
  EXPECT_FALSE(testing::FileExists(dir.File("out.fcb")));
}

TEST(UnsupportedOps, CliReportsEveryNodeInOneError) {
  TempDir dir;
  const std::string model = WriteModel(dir);
  auto res = testing::RunCommand(testing::CliPath() + " compile " + model + " -o " + dir.File("out.fcb") +
                                 " --target all");
  EXPECT_EQ(res.exit_code, 1) << res.err;
  // One error line, starting with "error: ".
  ASSERT_EQ(res.err.rfind("error: ", 0), 0u) << res.err;
  EXPECT_EQ(res.err.find("error: ", 1), std::string::npos) << res.err;
  ExpectListsAll(res.err);
  EXPECT_FALSE(testing::FileExists(dir.File("out.fcb")));
}

// Quantization forms fcb does not implement, each named with its node in one
// error; the supported QuantizeLinear beside them is not listed.
void AddTypedValue(onnx::ValueInfoProto* vi, const std::string& name, int elem_type, std::vector<int64_t> dims) {
  AddTensorValue(vi, name, std::move(dims));
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

std::string WriteQuantModel(const TempDir& dir, int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("quant");
  AddTensorValue(g->add_input(), "x", {2, 4});
  AddTensorValue(g->add_input(), "s", {1});
  AddTensorValue(g->add_input(), "s2", {2, 2});
  AddTypedValue(g->add_input(), "x16", onnx::TensorProto::INT16, {2, 4});
  AddTypedValue(g->add_input(), "a32", onnx::TensorProto::INT32, {2, 4});
  AddTypedValue(g->add_input(), "b8", onnx::TensorProto::UINT8, {4, 3});
  SetInt(AddNode(g, "q_block", "QuantizeLinear", {"x", "s2"}, "a"), "block_size", 2);  // opset 21 blocks
  // output_dtype INT4: code 22 (opset 21; libonnx 1.12 predates it).
  SetInt(AddNode(g, "q_int4", "QuantizeLinear", {"x", "s"}, "b"), "output_dtype", 22);
  AddNode(g, "dq_int16", "DequantizeLinear", {"x16", "s"}, "c");  // int16 input (opset 21)
  AddNode(g, "mmi_int32", "MatMulInteger", {"a32", "b8"}, "d");   // int32 A
  AddNode(g, "q_ok", "QuantizeLinear", {"x", "s"}, "e");         // fine: must not be listed
  for (const char* o : {"a", "b", "c", "d", "e"}) AddTensorValue(g->add_output(), o, {});
  const std::string path = dir.File("quant.onnx");
  std::ofstream f(path, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&f));
  return path;
}

TEST(UnsupportedOps, QuantizationFormsAreListedTogether) {
  TempDir dir;
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(WriteQuantModel(dir, 13), spec, dir.File("out.fcb"));
  ASSERT_REFUSED(r, StatusCode::kUnsupported, "output_dtype int4 is not supported; fcb quantizes to uint8 and int8;");
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("4 unsupported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'q_block' (QuantizeLinear)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("block quantization (block_size=2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'q_int4' (QuantizeLinear)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("output_dtype int4 is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'dq_int16' (DequantizeLinear)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x has element type int16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'mmi_int32' (MatMulInteger)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("A has element type int32"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("q_ok"), std::string::npos) << msg;
  EXPECT_FALSE(testing::FileExists(dir.File("out.fcb")));
}

TEST(UnsupportedOps, QuantizationAtOpset19IsRefusedAsAWhole) {
  // Opset 19 brings float8 types and `saturate`; the importer reads up to 18.
  TempDir dir;
  CompileSpec spec;
  spec.targets = {"generic"};
  auto r = Compile(WriteQuantModel(dir, 19), spec, dir.File("out.fcb"));
  ASSERT_REFUSED(r, StatusCode::kUnsupported, "model uses opset 19 of the default ONNX domain, newer than opset 18,");
  EXPECT_NE(r.status().message().find("opset 19"), std::string::npos) << r.status().message();
}

// Operators whose output shape depends on data (Compress's condition, NonZero's
// and Unique's input) or whose size inputs fix the output shape (windows,
// DFT's dft_length) need those inputs at compile time; fed at run time, each
// node is named in one Unsupported error that says why.
TEST(UnsupportedOps, DataDependentShapesNeedConstants) {
  TempDir dir;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("data_shapes");
  AddTensorValue(g->add_input(), "x", {4});
  AddTypedValue(g->add_input(), "cond", onnx::TensorProto::BOOL, {4});
  auto* n = g->add_input();
  AddTypedValue(n, "n", onnx::TensorProto::INT64, {});
  n->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar: rank 0, not unknown
  AddTensorValue(g->add_input(), "sig", {1, 8, 1});
  AddNode(g, "my_compress", "Compress", {"x", "cond"}, "a");
  AddNode(g, "my_nonzero", "NonZero", {"x"}, "b");
  AddNode(g, "my_unique", "Unique", {"x"}, "c");
  AddNode(g, "my_hann", "HannWindow", {"n"}, "d");
  AddNode(g, "my_dft", "DFT", {"sig", "n"}, "e");
  for (const char* o : {"a", "b", "c", "d", "e"}) AddTensorValue(g->add_output(), o, {});
  const std::string path = dir.File("shapes.onnx");
  {
    std::ofstream f(path, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  CompileSpec spec;
  spec.targets = {"generic"};
  auto r = Compile(path, spec, dir.File("out.fcb"));
  ASSERT_REFUSED(r, StatusCode::kUnsupported, "condition must be a compile-time constant (an initializer or a folded");
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("5 unsupported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_compress' (Compress)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("condition must be a compile-time constant"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_nonzero' (NonZero)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_unique' (Unique)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("depends on run-time data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_hann' (HannWindow)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size must be a compile-time constant"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'my_dft' (DFT)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dft_length must be a compile-time constant"), std::string::npos) << msg;
}

// Random operators: with a seed, and without one (the importer fixes a seed
// per node), every target and every run produce the same bits; two unseeded
// nodes of the same shape draw different values.
TEST(UnsupportedOps, RandomOpsAreDeterministicAcrossTargets) {
  TempDir dir;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  auto* g = m.mutable_graph();
  g->set_name("random");
  AddTensorValue(g->add_input(), "p", {256});
  auto shape_attr = [](onnx::NodeProto* n) {
    auto* a = n->add_attribute();
    a->set_name("shape");
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(64);
    a->add_ints(4);
  };
  shape_attr(AddNode(g, "n1", "RandomNormal", {}, "a"));
  shape_attr(AddNode(g, "n2", "RandomNormal", {}, "b"));
  auto* u = AddNode(g, "u", "RandomUniform", {}, "c");
  shape_attr(u);
  auto* seed = u->add_attribute();
  seed->set_name("seed");
  seed->set_type(onnx::AttributeProto::FLOAT);
  seed->set_f(7.f);
  AddNode(g, "bern", "Bernoulli", {"p"}, "d");
  AddNode(g, "like", "RandomNormalLike", {"p"}, "e");
  for (const char* o : {"a", "b", "c"}) AddTensorValue(g->add_output(), o, {64, 4});
  for (const char* o : {"d", "e"}) AddTensorValue(g->add_output(), o, {256});
  const std::string path = dir.File("random.onnx");
  {
    std::ofstream f(path, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(path, spec, dir.File("out.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> p(256, 0.5f);
  std::vector<std::vector<uint8_t>> first;
  testing::ForEachRunnableTarget(dir.File("out.fcb"), [&](const std::string& target,
                                                           const std::shared_ptr<const Program>& prog) {
    for (int threads : {1, 3}) {
      auto ex = Execution::Create(prog, "main", threads);
      ASSERT_TRUE(ex.ok()) << ex.status().ToString();
      ASSERT_TRUE((*ex)->SetInput("p", p.data(), p.size() * 4).ok());
      for (int run = 0; run < 2; ++run) {
        ASSERT_TRUE((*ex)->Run().ok()) << target;
        std::vector<std::vector<uint8_t>> outs;
        for (size_t i = 0; i < 5; ++i) {
          const size_t bytes = 256 * 4;
          const uint8_t* d = static_cast<const uint8_t*>((*ex)->output_data(i));
          outs.emplace_back(d, d + bytes);
        }
        if (first.empty()) first = outs;
        for (size_t i = 0; i < 5; ++i) EXPECT_EQ(outs[i], first[i]) << target << " output " << i;
      }
    }
  });
  ASSERT_EQ(first.size(), 5u) << "no target ran";
  EXPECT_NE(first[0], first[1]) << "two unseeded nodes drew the same values";
  // Bernoulli(0.5) over 256 draws: 128 +- 4 sigma (sigma = 8).
  int ones = 0;
  for (size_t i = 0; i < 256; ++i) {
    float v;
    std::memcpy(&v, first[3].data() + 4 * i, 4);
    EXPECT_TRUE(v == 0.f || v == 1.f);
    ones += v == 1.f;
  }
  EXPECT_NEAR(ones, 128, 32);
}

// A constant condition larger than the constants shape inference re-reads at
// load (64 KiB) still compiles and runs: the importer makes the Compress a
// Gather of the selected indices. Checked on every runnable target.
TEST(UnsupportedOps, CompressWithALargeConstantConditionRuns) {
  TempDir dir;
  const int64_t n = 70000;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("big_compress");
  AddTensorValue(g->add_input(), "x", {2, n});
  auto* cond = g->add_initializer();
  cond->set_name("cond");
  cond->set_data_type(onnx::TensorProto::BOOL);
  cond->add_dims(n);
  std::string bytes(static_cast<size_t>(n), '\0');
  int64_t picked = 0;
  for (int64_t i = 0; i < n; ++i)
    if (i % 3 == 0 || i % 7 == 1) bytes[i] = 1, ++picked;
  cond->set_raw_data(bytes);
  auto* c = AddNode(g, "big", "Compress", {"x", "cond"}, "y");
  SetInt(c, "axis", 1);
  AddNode(g, "flat", "Compress", {"x", "cond"}, "z");  // no axis: over the flattened input
  AddTensorValue(g->add_output(), "y", {2, picked});
  AddTensorValue(g->add_output(), "z", {picked});
  const std::string path = dir.File("big.onnx");
  {
    std::ofstream f(path, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(path, spec, dir.File("big.fcb"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> x(static_cast<size_t>(2 * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<float> want_y, want_z;
  for (int64_t row = 0; row < 2; ++row)
    for (int64_t i = 0; i < n; ++i)
      if (bytes[i]) want_y.push_back(static_cast<float>(row * n + i));
  for (int64_t i = 0; i < n; ++i)
    if (bytes[i]) want_z.push_back(static_cast<float>(i));
  testing::ForEachRunnableTarget(dir.File("big.fcb"), [&](const std::string& target,
                                                           const std::shared_ptr<const Program>& prog) {
    auto ex = Execution::Create(prog, "main", 2);
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    ASSERT_TRUE((*ex)->SetInput("x", x.data(), x.size() * 4).ok());
    ASSERT_TRUE((*ex)->Run().ok()) << target;
    const float* y = static_cast<const float*>((*ex)->output_data(0));
    const float* z = static_cast<const float*>((*ex)->output_data(1));
    EXPECT_TRUE(std::equal(want_y.begin(), want_y.end(), y)) << target;
    EXPECT_TRUE(std::equal(want_z.begin(), want_z.end(), z)) << target;
  });
}

}  // namespace
}  // namespace fcb
