// Test-only helpers that build ONNX models with the protobuf API.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace fcb::testing {

struct Dim {
  int64_t value = -1;    // -1: not fixed
  std::string param;     // symbolic name (if value < 0)
  Dim(int64_t v) : value(v) {}                       // NOLINT
  Dim(const char* p) : param(p) {}                   // NOLINT
};

inline onnx::ModelProto MakeModel(int64_t opset, int64_t ir_version = 8) {
  onnx::ModelProto m;
  m.set_ir_version(ir_version);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

inline void AddInput(onnx::ModelProto& m, const std::string& name, std::vector<Dim> dims,
                     int elem = onnx::TensorProto::FLOAT) {
  auto* vi = m.mutable_graph()->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* sd = shape->add_dim();
    if (d.value >= 0) sd->set_dim_value(d.value);
    else if (!d.param.empty()) sd->set_dim_param(d.param);
  }
}

inline void AddOutput(onnx::ModelProto& m, const std::string& name) {
  auto* vi = m.mutable_graph()->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

inline onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op,
                                std::vector<std::string> inputs, std::vector<std::string> outputs,
                                const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? outputs.at(0) + "_node" : name);
  for (auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) n->add_output(o);
  return n;
}

inline void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void AttrFloats(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

inline onnx::TensorProto FloatTensor(const std::string& name, std::vector<int64_t> dims,
                                     const std::vector<float>& v, bool raw = true) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  if (raw) t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  else
    for (float x : v) t.add_float_data(x);
  return t;
}

inline onnx::TensorProto Int64Tensor(const std::string& name, std::vector<int64_t> dims,
                                     const std::vector<int64_t>& v, bool raw = true) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  if (raw) t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
  else
    for (int64_t x : v) t.add_int64_data(x);
  return t;
}

inline void AddInit(onnx::ModelProto& m, onnx::TensorProto t) {
  *m.mutable_graph()->add_initializer() = std::move(t);
}

}  // namespace fcb::testing
