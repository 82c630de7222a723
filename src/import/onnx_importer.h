// The ONNX importer (internal to the import layer): one Importer reads one
// model. onnx_import.cc holds the model checks, initializers, inputs, node
// conversion and node order; control_flow.cc the expansion of If, Loop and
// Scan, whose subgraphs are imported in place.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "fcb/status.h"
#include "import/import_state.h"
#include "import/onnx_import.h"
#include "ir/ir.h"

namespace fcb::import {

// The names one (sub)graph's nodes see: its own values, then those of the
// graphs around it (ONNX lets a subgraph use any name of an enclosing scope).
// The main graph's names are ImportState::by_name (scope nullptr).
struct Scope {
  const Scope* parent = nullptr;
  std::string prefix;  // prepended to the names of values and nodes made here
  std::unordered_map<std::string, int> names;
};

class Importer {
 public:
  Importer(const onnx::ModelProto& m, std::string base_dir, const ImportOptions& opts)
      : m_(m), g_(m.graph()), base_dir_(std::move(base_dir)), opts_(opts) {}

  Result<ir::Graph> Run();

 private:
  // Model, initializers, inputs and outputs (onnx_import.cc).
  Status CheckModel();
  Status AddInitializers();
  Status AddInputs();
  static Result<ir::TensorPtr> FitInputValue(const std::string& name, const ir::TensorData& value, ir::DType dtype,
                                             const ir::Shape& declared, const ir::Shape& shape);
  Result<ir::Shape> InputShape(const onnx::ValueInfoProto& vi);
  Result<ir::Shape> DeclaredInputShape(const onnx::ValueInfoProto& vi);
  // Symbolic dims: what the spec gives each symbol, checked for agreement
  // across inputs (BindSymbols). Inputs are shaped at the bound (a range's
  // upper end); Graph::symbols records the ranges.
  Status BindSymbols(const std::vector<const onnx::ValueInfoProto*>& inputs);
  // ImportOptions::kv_capacity: the GroupQueryAttention past inputs' dim 2
  // symbol fixed at the capacity.
  Status FixKvCapacity(const std::vector<const onnx::ValueInfoProto*>& inputs);
  Status AddOutputs();

  // Nodes: order, names in scope, conversion (onnx_import.cc).
  static std::string NodeLabel(const onnx::GraphProto& g, int i);
  static Result<std::vector<int>> TopologicalOrder(const onnx::GraphProto& g);
  int Lookup(const Scope* scope, const std::string& name) const;
  Result<int> Define(Scope* scope, const std::string& name);
  Status AddNode(const onnx::NodeProto& p, int index, Scope* scope);

  // Control flow (control_flow.cc).
  static void SubgraphReads(const onnx::NodeProto& p, std::vector<std::string>* out);
  Result<std::vector<int>> InlineGraph(const onnx::GraphProto& g, const ir::Node& owner, const Scope* parent,
                                       const std::string& prefix, const std::vector<int>& inputs);
  Result<int> EmitOp(const std::string& name, const std::string& op, std::vector<int> inputs,
                     std::map<std::string, ir::Attribute, std::less<>> attrs = {}, int out = -1);
  static ir::Attribute IntAttr(int64_t v);
  Status Stack(const std::string& name, const std::vector<int>& parts, int64_t axis, int out);
  Status Copy(const ir::Node& n, int from, int to);
  static bool ScalarValue(const ir::Value& v, int64_t* out);
  Status ExpandIf(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope);
  Status ExpandLoop(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope);
  Result<std::vector<int>> UnrollScan(const onnx::NodeProto& p, const ir::Node& n, const onnx::GraphProto& body,
                                      const Scope* scope, const std::string& prefix, std::vector<int> state,
                                      const std::vector<int>& xs, const std::vector<int64_t>& in_axes,
                                      const std::vector<int64_t>& in_dirs, int64_t len,
                                      const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs);
  Status ExpandScan(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope);

  const onnx::ModelProto& m_;
  const onnx::GraphProto& g_;
  const std::string base_dir_;
  const ImportOptions& opts_;
  // What the spec gives a symbol, and which input's entry gave it first.
  struct Bound {
    int64_t lo = 1, hi = 1;
    std::string input;
    int dim = 0;
    bool from_value = false;  // input_values fixed it, else input_shapes
  };
  std::map<std::string, Bound> bounds_;  // symbol name -> its size or range
  ImportState s_;
  int64_t model_opset_ = 0;  // as declared; s_.opset is what canonicalization assumes
  int64_t microsoft_opset_ = 0;  // the model's opset_import of com.microsoft; 0 when absent
  uint64_t expanded_ = 0;    // ONNX nodes imported so far, unrolled bodies counted per iteration
};

}  // namespace fcb::import
