// A model with several unsupported things (an unknown operator, a tensor type
// fcb lacks, an unsupported attribute value, a foreign operator domain, a
// subgraph attribute) fails at compile time with ONE error that names every
// offending node, its op type and what is unsupported, through the API and
// through `fcb compile`.
#include <fstream>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "fcb/fcb.h"
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

  AddNode(g, "my_det", "Det", {"x"}, "a");  // operator fcb does not implement
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
  AddNode(g, "after_det", "Relu", {"a"}, "g");       // downstream of one: not listed either
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
  EXPECT_NE(msg.find("my_det"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(Det)"), std::string::npos) << msg;
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
  EXPECT_EQ(msg.find("after_det"), std::string::npos) << msg;
}

TEST(UnsupportedOps, ApiReportsEveryNodeInOneError) {
  TempDir dir;
  const std::string model = WriteModel(dir);
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(model, spec, dir.File("out.fcb"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
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

}  // namespace
}  // namespace fcb
