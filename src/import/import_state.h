// The graph under construction during import (internal to the import layer).
//
// Nodes enter through Emit() one at a time, in ONNX order: each is checked
// against the op registry, its outputs' dtypes and shapes are inferred, and it
// is folded into constants when all its inputs are constant. Unsupported nodes
// are collected (not returned one by one) so the user sees all of them at once;
// values downstream of them are marked unknown and their nodes skipped.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "fcb/status.h"
#include "ir/ir.h"
#include "ops/op.h"

namespace fcb::import {

// Outputs above this many elements are not folded: they would bloat the file
// with data the runtime can compute cheaply (e.g. a big ConstantOfShape).
constexpr int64_t kMaxFoldElements = int64_t{16} << 20;

class ImportState {
 public:
  ir::Graph g;
  int64_t opset = 0;
  std::map<std::string, int> by_name;      // ONNX value name -> value id
  std::vector<std::string> unsupported;    // one entry per unsupported node
  // Some input dim is a range (ir::Graph::dynamic): a Shape or Size of a
  // computed value, and what is computed from it, is kept as nodes with its
  // contents at the bound (ir::Value::shape_value) instead of folded.
  bool dynamic = false;

  // Names that must not be handed out by FreshName (all ONNX names, up front).
  void ReserveName(const std::string& name) { names_.insert(name); }
  std::string FreshName(const std::string& base);
  int AddConst(const std::string& base, ir::TensorPtr t);
  // An intermediate value whose dtype/shape Emit will infer.
  int AddTemp(const std::string& base);
  // A value with this exact (ONNX) name; error if it already exists.
  Result<int> AddNamed(const std::string& name);

  bool Known(int id) const { return id < 0 || id >= static_cast<int>(unknown_.size()) || !unknown_[id]; }
  void MarkUnknown(int id);
  const ir::Value& value(int id) const { return g.values[id]; }

  // Infers, folds or appends `n` (see the file comment). Returns an error only
  // for a model that is wrong, not for one fcb cannot handle.
  Status Emit(ir::Node n);

 private:
  void RecordUnsupported(const ir::Node& n, const std::string& why);
  bool FoldShapeOrSize(const ir::Node& n);
  // `n` did not infer as given. If its floating inputs are float16 (or
  // bfloat16) and it infers with them as float32, emits Cast -> n in float32
  // -> Cast back for every float32 output, and returns true; false (nothing
  // emitted) otherwise.
  bool WidenToFloat32(const ir::Node& n, const std::vector<ops::TensorInfo>& infos) const;
  Result<bool> EmitInFloat32(const ir::Node& n, const ops::OpDef& def, const std::vector<ops::TensorInfo>& infos,
                             const ops::Attrs& attrs);

  std::unordered_set<std::string> names_;
  std::vector<bool> unknown_;
  // Half-precision value -> the float32 value a Cast rounded it from.
  std::map<int, int> float32_source_;
};

// Rewrites one ONNX node (already converted to ir::Node, inputs resolved) into
// the latest-opset form the op registry implements, and emits the result.
Status CanonicalizeAndEmit(ImportState& s, ir::Node n);

// Whether `op` draws random numbers (Bernoulli, RandomNormal, ...).
bool IsRandomOp(const std::string& op);

}  // namespace fcb::import
