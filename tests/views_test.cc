// Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout between intermediate
// values are views: no step is emitted for them and their output shares the
// input's arena bytes. The bytes must stay alive for every reader of the
// input and of each view (chains of views, a view read after another reader
// of its input, several readers): checked on every target, at 1 and 2
// threads, against values computed here.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>


#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;

void Value(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                      const std::string& out) {
  auto* n = g->add_node();
  n->set_name(out + "_node");
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void Ints(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

// x [2,3,4] -> Relu -> a; a -> Reshape [6,4] -> b -> Flatten(0) -> c -> Sigmoid -> d (out)
// a -> Neg -> e (out, reads a after its views); b -> Unsqueeze(0) -> f -> Identity -> h -> Dropout -> h2
// -> Abs -> k (out)
// b -> Exp -> mexp (out, a second reader of the view b)
std::string WriteModel(const TempDir& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("views");
  Value(g->add_input(), "x", {2, 3, 4});
  Ints(g, "shape", {6, 4});
  Ints(g, "axes", {0});
  Node(g, "Relu", {"x"}, "a");
  Node(g, "Reshape", {"a", "shape"}, "b");
  auto* flat = Node(g, "Flatten", {"b"}, "c");
  auto* axis = flat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  Node(g, "Sigmoid", {"c"}, "d");
  Node(g, "Unsqueeze", {"b", "axes"}, "f");
  Node(g, "Identity", {"f"}, "h");
  // Inference Dropout, as torch exports it: ratio, training_mode = false and
  // a mask output nothing reads. The identity.
  auto* ratio = g->add_initializer();
  ratio->set_name("ratio");
  ratio->set_data_type(onnx::TensorProto::FLOAT);
  ratio->add_float_data(0.25f);
  auto* mode = g->add_initializer();
  mode->set_name("training_mode");
  mode->set_data_type(onnx::TensorProto::BOOL);
  mode->add_int32_data(0);
  Node(g, "Dropout", {"h", "ratio", "training_mode"}, "h2")->add_output("h2_mask");
  Node(g, "Abs", {"h2"}, "k");
  Node(g, "Exp", {"b"}, "mexp");
  Node(g, "Neg", {"a"}, "e");
  Value(g->add_output(), "d", {1, 24});
  Value(g->add_output(), "e", {2, 3, 4});
  Value(g->add_output(), "k", {1, 6, 4});
  Value(g->add_output(), "mexp", {6, 4});
  const std::string path = dir.File("views.onnx");
  std::ofstream f(path, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&f));
  return path;
}

TEST(Views, NoStepsAndEveryReaderSeesTheBytes) {
  TempDir dir;
  const std::string model = WriteModel(dir), out = dir.File("views.fcb");
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(model, spec, out);
  ASSERT_TRUE(r.ok()) << r.status().message();

  // The plan has no step for any of the views.
  std::vector<std::string> ops;
  for (const auto& s : testing::PlanSteps(out)) ops.push_back(s.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Relu", "Sigmoid", "Abs", "Exp", "Neg"}));

  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = std::sin(0.9f * i) * 2;
  testing::ForEachRunnableTarget(
      out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    for (int threads : {1, 2}) {
      auto ex = Execution::Create(program, "main", threads);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      ASSERT_TRUE(ex.value()->SetInput("x", x.data(), x.size() * 4).ok());
      ASSERT_TRUE(ex.value()->Run().ok());
      const auto& outs = ex.value()->info().outputs;
      ASSERT_EQ(outs.size(), 4u);
      for (size_t o = 0; o < outs.size(); ++o) {
        const float* p = static_cast<const float*>(ex.value()->output_data(static_cast<int>(o)));
        for (int i = 0; i < 24; ++i) {
          const float a = std::max(x[i], 0.f);
          const float want = outs[o].name == "d"   ? 1 / (1 + std::exp(-a))
                             : outs[o].name == "e" ? -a
                             : outs[o].name == "k" ? a
                                                   : std::exp(a);
          EXPECT_NEAR(p[i], want, 1e-5f * (1 + std::fabs(want))) << outs[o].name << "[" << i << "] threads "
                                                                 << threads;
        }
      }
    }
  });
}

}  // namespace
}  // namespace fcb
