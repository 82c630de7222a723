// Test-only: runs an ir::Graph node by node with ops::Evaluate (the generic
// kernels), so tests can compare a graph before and after a transformation;
// and the helpers that build such graphs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fcb/status.h"
#include "ir/ir.h"
#include "ops/op.h"

namespace fcb::testing {

// Returns every value's contents (constants included), indexed by value id.
inline Result<std::vector<ir::TensorPtr>> Interpret(const ir::Graph& g,
                                                    const std::map<int, ir::TensorPtr>& inputs) {
  std::vector<ir::TensorPtr> vals(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) vals[i] = g.values[i].constant;
  for (const auto& [id, t] : inputs) vals[id] = t;
  for (const auto& n : g.nodes) {
    std::vector<const ir::TensorData*> in;
    for (int i : n.inputs) {
      if (i >= 0 && !vals[i]) return Internal(n.Describe() + ": input not computed");
      in.push_back(i >= 0 ? vals[i].get() : nullptr);
    }
    auto out = ops::Evaluate(n.op_type, ops::AttrsFromNode(n), in, static_cast<int>(n.outputs.size()));
    if (!out.ok()) return out.TakeStatus().Annotate(n.Describe());
    for (size_t k = 0; k < n.outputs.size(); ++k) vals[n.outputs[k]] = std::move(out.value()[k]);
  }
  return vals;
}

// Graph building for pass tests: a value with a static shape, and a node.
inline int AddTensor(ir::Graph& g, const std::string& name, ir::Shape shape, ir::DType dt = ir::DType::kF32) {
  ir::Value v;
  v.name = name;
  v.dtype = dt;
  v.shape = std::move(shape);
  v.has_shape = true;
  return g.AddValue(std::move(v));
}

inline ir::Node& AddNode(ir::Graph& g, const std::string& op, std::vector<int> in, std::vector<int> out,
                         const std::string& name) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  g.nodes.push_back(std::move(n));
  return g.nodes.back();
}

inline std::vector<float> Floats(const ir::TensorPtr& t) {
  return std::vector<float>(t->data<float>(), t->data<float>() + t->numel());
}

}  // namespace fcb::testing
