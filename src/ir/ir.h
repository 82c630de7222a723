// The graph IR shared by import, passes and lowering.
//
// A Graph is a list of Values (tensors with a static dtype and shape, some
// holding constant data) and a topologically ordered list of Nodes that read
// and write them by index. Node semantics are ONNX's (op_type + attributes),
// plus a few internal ops in the "fcb" domain created by passes (e.g. NHWC
// convolution). After import every shape is static.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fcb/dtype.h"
#include "fcb/status.h"

namespace fcb::ir {

// Element types: the public fcb::DType (fcb/dtype.h), one enum everywhere.
using ::fcb::DType;
using ::fcb::DTypeName;
using ::fcb::DTypeSize;

// uint8 or int8: the element types of quantized tensors.
inline bool IsInt8Type(DType t) { return t == DType::kU8 || t == DType::kI8; }

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& s);
int64_t NumElements(std::span<const int64_t> s);
std::string ShapeToString(const Shape& s);  // "1x3x224x224" ("scalar" for rank 0)

// Constant tensor contents, row-major, little-endian.
struct TensorData {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return NumElements(shape); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <typename T> T* mutable_data() { return reinterpret_cast<T*>(bytes.data()); }
  // Reads element i converted to double / int64 (any numeric dtype).
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;
  std::vector<int64_t> ToInts() const;

  static std::shared_ptr<TensorData> Make(DType dtype, Shape shape);
  static std::shared_ptr<TensorData> FromFloats(Shape shape, const std::vector<float>& v);
  static std::shared_ptr<TensorData> FromInts(Shape shape, const std::vector<int64_t>& v);
};
using TensorPtr = std::shared_ptr<const TensorData>;

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  bool has_shape = false;  // false only while import is still inferring
  TensorPtr constant;      // set for initializers and folded values
  // Set, instead of `constant`, for a small value computed from symbolic
  // dimensions (a Shape of a value whose size is chosen at run time, and the
  // arithmetic on it): its contents at the bound, which shape inference
  // reads. It is not a constant: its node stays and runs, and the runtime
  // recomputes it for every size it is run at (ops/plan_check.h).
  TensorPtr shape_value;
  bool is_constant() const { return constant != nullptr; }
  // The contents shape inference may read: the constant, or the value at the bound.
  const TensorData* known() const { return constant ? constant.get() : shape_value.get(); }
};

struct Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kTensor, kStrings } kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  TensorPtr t;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for ONNX, "fcb" for internal ops
  std::vector<int> inputs;   // value ids; -1 = omitted optional input
  std::vector<int> outputs;  // value ids
  std::map<std::string, Attribute, std::less<>> attrs;

  bool Has(std::string_view a) const { return attrs.find(a) != attrs.end(); }
  int64_t GetInt(std::string_view a, int64_t def) const;
  float GetFloat(std::string_view a, float def) const;
  std::string GetString(std::string_view a, const std::string& def) const;
  std::vector<int64_t> GetInts(std::string_view a, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(std::string_view a, std::vector<float> def = {}) const;
  void SetInt(std::string_view a, int64_t v);
  void SetFloat(std::string_view a, float v);
  void SetInts(std::string_view a, std::vector<int64_t> v);
  void SetString(std::string_view a, std::string v);
  // "node 'name' (OpType)" for error messages.
  std::string Describe() const;
};

// A symbolic input dimension after import: an ONNX dim_param, or for an
// unnamed unknown dim "<input>.<dim index>", with the size or range the
// compile spec gives it (lo == hi: one fixed size). A symbol is one size at
// run time, shared by every input dim that uses it (ImportOptions).
struct SymbolBinding {
  std::string name;
  int64_t lo = 1, hi = 1;
  struct Use {
    std::string input;  // graph input name
    int dim = 0;
  };
  std::vector<Use> uses;  // the graph inputs' dims that are this symbol, in input order
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // topological order
  std::vector<int> inputs;  // graph inputs (non-constant values fed at run time)
  std::vector<int> outputs;
  int64_t opset = 13;       // default-domain opset the model was exported with
  // The symbols of the inputs' free dims, in order of first use (set by the import).
  std::vector<SymbolBinding> symbols;
  // Whether some symbol is a range (lo < hi): shapes are then those at the
  // bound, and nothing may bake a dimension that depends on a symbol.
  bool dynamic() const {
    for (const auto& s : symbols)
      if (s.lo < s.hi) return true;
    return false;
  }

  int AddValue(Value v);
  int AddConstant(const std::string& name, TensorPtr t);
  // A fresh value name derived from `base` that no value has yet: `base`,
  // else base_1, base_2, ... (the first free). The one name generator of the
  // passes: value names are indexed as values are added, so a pass naming
  // many values costs linear time overall; the index is rebuilt when a value
  // it holds was renamed, renumbered or removed (EliminateDeadNodes).
  std::string UniqueName(const std::string& base);
  // Uses of each value: node inputs reading it plus graph-output entries
  // naming it (UseIndex::Uses for every value).
  std::vector<int> UseCounts() const;
  // Checks indices, topological order and that every used value has a shape.
  Status Validate() const;

 private:
  bool NameTaken(const std::string& name);
  std::unordered_map<std::string, int> name_index_;  // name -> a value holding it (UniqueName)
  size_t names_indexed_ = 0;                        // values[0, names_indexed_) are in name_index_
};

// Who writes and who reads each value of a graph: the one use/producer index
// of the passes and the lowering, built in linear time. It describes the
// graph as it was when built: values added later have no producer and no
// readers, and a caller that edits nodes builds a new index (or accounts for
// its own edits).
class UseIndex {
 public:
  explicit UseIndex(const Graph& g);
  // The node writing `v`, or -1 (graph input, constant, or not indexed).
  int Producer(int v) const { return Known(v) ? producer_[v] : -1; }
  // Node inputs reading `v` (a node reading it twice counts twice).
  int Readers(int v) const { return Known(v) ? readers_[v] : 0; }
  bool IsGraphOutput(int v) const { return Known(v) && outputs_[v] > 0; }
  // Readers plus graph-output entries naming `v`.
  int Uses(int v) const { return Known(v) ? readers_[v] + outputs_[v] : 0; }
  // Readers of `v` when it is an intermediate value (not a graph output),
  // else -1: what a pattern that consumes `v` checks.
  int IntermediateReaders(int v) const { return IsGraphOutput(v) ? -1 : Readers(v); }
  // The node that alone uses `v` (one node input reads it; not a graph
  // output), or -1.
  int SoleReader(int v) const { return IntermediateReaders(v) == 1 ? last_reader_[v] : -1; }

 private:
  bool Known(int v) const { return v >= 0 && static_cast<size_t>(v) < producer_.size(); }
  std::vector<int> producer_, readers_, outputs_, last_reader_;
};

// A DequantizeLinear of a constant integer tensor (quantized weights or an
// int32 bias): import and the first constant folding keep it as a node, so
// that FuseQuantized sees the int8 weights (passes/fuse_quantized.cc); the
// folding after it evaluates the ones left.
bool IsWeightDequantize(const Graph& g, const Node& n);

}  // namespace fcb::ir
