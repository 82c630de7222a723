// A growing KV cache whose attention is written in the batched-matrix form
// (Hugging Face's Whisper decoder as transformers.js exports it): the cache
// [1, H, T, D] reshaped to [H, T, D], K transposed by perm 0 2 1, the 3-D
// scores scaled, reshaped to [1, H, 1, T] and back, Softmax(axis 2), the
// probabilities through the same pair of reshapes, MatMul with V [H, T, D]
// and the result reshaped to [1, H, 1, D]. Compiled with "state": "auto" and
// kv_capacity, every target fuses it (KvAppend + AttentionFused, no Softmax,
// no step writing the cache) and each step's output equals a plain scalar
// attention over every key and value given so far; compiled without state,
// the dense fusion gives the same outputs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>

#include "fcb/fcb.h"
#include "ops/names.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;

constexpr int64_t kHeads = 4, kDim = 8, kCapacity = 16;
constexpr float kScale = 0.35f;

void Value(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims, int sym = -1) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = tt->mutable_shape()->add_dim();
    if (static_cast<int>(i) == sym) d->set_dim_param(name.rfind("past", 0) == 0 ? "past" : "total");
    else d->set_dim_value(dims[i]);
  }
}

onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, const std::string& out) {
  auto* n = g->add_node();
  n->set_name(out + "_node");
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void Ints(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

std::string WriteModel(const TempDir& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("kv_bmm");
  for (const char* n : {"q", "k_new", "v_new"}) Value(g->add_input(), n, {1, kHeads, 1, kDim});
  Value(g->add_input(), "past_key_values.0.key", {1, kHeads, 0, kDim}, 2);
  Value(g->add_input(), "past_key_values.0.value", {1, kHeads, 0, kDim}, 2);
  Ints(g, "s_q3", {kHeads, 1, kDim});
  Ints(g, "s_kv3", {kHeads, -1, kDim});
  Ints(g, "s_p4", {1, kHeads, 1, -1});
  Ints(g, "s_p3", {kHeads, 1, -1});
  Ints(g, "s_y", {1, kHeads, 1, kDim});
  auto* scale = g->add_initializer();
  scale->set_name("scale");
  scale->set_data_type(onnx::TensorProto::FLOAT);
  scale->add_float_data(kScale);
  IntAttr(Node(g, "Concat", {"past_key_values.0.key", "k_new"}, "present.0.key"), "axis", 2);
  IntAttr(Node(g, "Concat", {"past_key_values.0.value", "v_new"}, "present.0.value"), "axis", 2);
  Node(g, "Reshape", {"q", "s_q3"}, "q3");
  Node(g, "Reshape", {"present.0.key", "s_kv3"}, "k3");
  auto* tr = Node(g, "Transpose", {"k3"}, "kt");
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  Node(g, "MatMul", {"q3", "kt"}, "qk");
  Node(g, "Mul", {"qk", "scale"}, "scores");
  Node(g, "Reshape", {"scores", "s_p4"}, "scores4");
  Node(g, "Reshape", {"scores4", "s_p3"}, "scores3");
  IntAttr(Node(g, "Softmax", {"scores3"}, "probs"), "axis", 2);
  Node(g, "Reshape", {"probs", "s_p4"}, "probs4");
  Node(g, "Reshape", {"probs4", "s_p3"}, "probs3");
  Node(g, "Reshape", {"present.0.value", "s_kv3"}, "v3");
  Node(g, "MatMul", {"probs3", "v3"}, "o3");
  Node(g, "Reshape", {"o3", "s_y"}, "y");
  Value(g->add_output(), "y", {1, kHeads, 1, kDim});
  Value(g->add_output(), "present.0.key", {1, kHeads, 0, kDim}, 2);
  Value(g->add_output(), "present.0.value", {1, kHeads, 0, kDim}, 2);
  const std::string path = dir.File("kv_bmm.onnx");
  std::ofstream f(path, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&f));
  return path;
}

// Step t's q, k_new and v_new: distinct values per step, head and dim.
std::vector<float> Row(int t, int which) {
  std::vector<float> v(static_cast<size_t>(kHeads * kDim));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(t) + 0.7f * static_cast<float>(which));
  return v;
}

// Plain scalar attention of step t's query over the keys and values of steps 0..t.
std::vector<float> Reference(int t) {
  const std::vector<float> q = Row(t, 0);
  std::vector<float> y(static_cast<size_t>(kHeads * kDim), 0.f);
  for (int64_t h = 0; h < kHeads; ++h) {
    std::vector<double> s(static_cast<size_t>(t + 1));
    double mx = -1e300;
    for (int j = 0; j <= t; ++j) {
      const std::vector<float> k = Row(j, 1);
      double d = 0;
      for (int64_t c = 0; c < kDim; ++c) d += double(q[h * kDim + c]) * k[h * kDim + c];
      s[j] = d * kScale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int j = 0; j <= t; ++j) {
      const std::vector<float> v = Row(j, 2);
      for (int64_t c = 0; c < kDim; ++c) y[h * kDim + c] += static_cast<float>(s[j] / sum * v[h * kDim + c]);
    }
  }
  return y;
}

TEST(KvBmmAttention, AGrowingCacheInTheBatchedMatrixFormIsAppendedInPlaceOnEveryTarget) {
  TempDir tmp;
  const std::string model = WriteModel(tmp);
  CompileSpec spec;
  spec.targets = {"all"};
  spec.state_auto = true;
  spec.kv_capacity = kCapacity;
  const std::string file = tmp.File("kv_bmm.fcb");
  auto r = Compile(model, spec, file);
  ASSERT_TRUE(r.ok()) << r.status().message();
  testing::ForEachRunnableTarget(file, [&](const std::string&, const std::shared_ptr<const Program>& p) {
    auto state = State::Create(p);
    ASSERT_TRUE(state.ok()) << state.status().message();
    auto e = Execution::Create(p, "main", 1, state.value());
    ASSERT_TRUE(e.ok()) << e.status().message();
    for (int t = 0; t < 12; ++t) {
      for (int w = 0; w < 3; ++w) {
        const std::vector<float> row = Row(t, w);
        const char* name = w == 0 ? "q" : w == 1 ? "k_new" : "v_new";
        ASSERT_TRUE(e.value()->SetInput(name, row.data(), row.size() * 4, {1, kHeads, 1, kDim}).ok());
      }
      std::vector<StepTiming> steps;
      auto st = e.value()->RunProfiled(&steps);
      ASSERT_TRUE(st.ok()) << "step " << t << ": " << st.message();
      int appends = 0, fused = 0;
      for (const auto& s : steps) {
        EXPECT_NE(s.op, "Softmax") << s.node;
        EXPECT_LE(s.bytes_written, static_cast<uint64_t>(kHeads * kDim * 4)) << s.op << " " << s.node;
        appends += s.op == ops::opname::KvAppend;
        fused += s.op == ops::opname::AttentionFused;
      }
      EXPECT_EQ(appends, 2);
      EXPECT_EQ(fused, 1);
      const float* y = static_cast<const float*>(e.value()->output_data(0));
      ASSERT_EQ(e.value()->info().outputs[0].name, "y");
      const std::vector<float> want = Reference(t);
      EXPECT_LT(testing::Compare(std::vector<float>(y, y + want.size()), want).max_abs, 1e-5) << "step " << t;
      auto len = state.value()->valid_length("past_key_values.0.key");
      ASSERT_TRUE(len.ok());
      EXPECT_EQ(len.value(), t + 1);
    }
  });
}

// Without state the same graph (a past of 5 given as input) takes the dense
// fusion and gives the same output as the scalar reference.
TEST(KvBmmAttention, WithoutStateTheDenseFusionGivesTheSameOutputOnEveryTarget) {
  TempDir tmp;
  const std::string model = WriteModel(tmp);
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["past_key_values.0.key"] = {1, kHeads, 5, kDim};
  spec.input_shapes["past_key_values.0.value"] = {1, kHeads, 5, kDim};
  const std::string file = tmp.File("kv_bmm_dense.fcb");
  auto r = Compile(model, spec, file);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<float> pk, pv;
  for (int t = 0; t < 5; ++t) {
    const std::vector<float> k = Row(t, 1), v = Row(t, 2);
    pk.insert(pk.end(), k.begin(), k.end());
    pv.insert(pv.end(), v.begin(), v.end());
  }
  // [T, H, D] -> [1, H, T, D]
  auto heads_first = [](const std::vector<float>& x) {
    std::vector<float> o(x.size());
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t c = 0; c < kDim; ++c) o[(h * 5 + t) * kDim + c] = x[(t * kHeads + h) * kDim + c];
    return o;
  };
  pk = heads_first(pk);
  pv = heads_first(pv);
  testing::ForEachRunnableTarget(file, [&](const std::string&, const std::shared_ptr<const Program>& p) {
    auto e = Execution::Create(p, "main", 1);
    ASSERT_TRUE(e.ok()) << e.status().message();
    for (int w = 0; w < 3; ++w) {
      const std::vector<float> row = Row(5, w);
      const char* name = w == 0 ? "q" : w == 1 ? "k_new" : "v_new";
      ASSERT_TRUE(e.value()->SetInput(name, row.data(), row.size() * 4).ok());
    }
    ASSERT_TRUE(e.value()->SetInput("past_key_values.0.key", pk.data(), pk.size() * 4).ok());
    ASSERT_TRUE(e.value()->SetInput("past_key_values.0.value", pv.data(), pv.size() * 4).ok());
    std::vector<StepTiming> steps;
    ASSERT_TRUE(e.value()->RunProfiled(&steps).ok());
    int fused = 0;
    for (const auto& s : steps) {
      EXPECT_NE(s.op, "Softmax") << s.node;
      fused += s.op == ops::opname::AttentionFused;
    }
    EXPECT_EQ(fused, 1);
    const float* y = static_cast<const float*>(e.value()->output_data(0));
    const std::vector<float> want = Reference(5);
    EXPECT_LT(testing::Compare(std::vector<float>(y, y + want.size()), want).max_abs, 1e-5);
  });
}

}  // namespace
}  // namespace fcb
