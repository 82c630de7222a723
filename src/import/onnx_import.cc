// ONNX ModelProto -> ir::Graph: model checks, initializers, graph inputs with
// their shapes fixed, then every node converted, canonicalized and inferred.
//
// onnx::checker::check_model is not used: libonnx 1.12 knows opsets up to 17
// and rejects valid opset-18 nodes (e.g. ReduceMean with an axes input); the
// checks here cover what fcb relies on.
#include "import/onnx_import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <queue>
#include <set>
#include <unordered_map>

#include <onnx/defs/schema.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "fcb/limits.h"
#include "import/import_state.h"
#include "import/tensor_proto.h"
#include "ops/op.h"

namespace fcb::import {
namespace {

constexpr int64_t kMinOpset = 1, kMaxOpset = 18;
// Canonicalization handles opsets 7 and later. An older model is read as
// opset 7 when every node's operator is unchanged between its opset and 7
// (see OldOpsetProblem).
constexpr int64_t kBaseOpset = 7;
// IR versions 3 (opset 7's) to 10: newer IR versions only add types fcb
// rejects per tensor anyway.
constexpr int64_t kMinIrVersion = 3, kMaxIrVersion = 10;

Result<int64_t> DefaultOpset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      if (o.version() > kMaxOpset) {
        // Operators may have changed meaning after kMaxOpset, which no
        // definition this build has describes: name what would be misread.
        std::string first;
        for (const auto& n : m.graph().node())
          if (n.domain().empty() || n.domain() == "ai.onnx") {
            first = "node '" + n.name() + "' (" + n.op_type() + ")";
            break;
          }
        return Unsupported("model uses opset " + std::to_string(o.version()) +
                           " of the default ONNX domain, newer than opset " + std::to_string(kMaxOpset) +
                           ", the newest whose operators fcb knows (Debian's libonnx 1.12)" +
                           (first.empty() ? "" : "; its nodes, from " + first + " on, would be read with opset-" +
                                                     std::to_string(o.version()) + " meanings fcb cannot check") +
                           "; re-export the model at opset " + std::to_string(kMaxOpset) +
                           " or lower (torch.onnx.export(..., opset_version=" + std::to_string(kMaxOpset) + "))");
      }
      if (o.version() < kMinOpset)
        return Unsupported("model uses opset " + std::to_string(o.version()) +
                           " of the default ONNX domain; fcb supports opsets " +
                           std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
      return static_cast<int64_t>(o.version());
    }
  }
  return InvalidArgument("model has no opset_import entry for the default ONNX domain");
}

// Why a default-domain node of an opset-`opset` (< 7) model cannot be read
// with opset-7 semantics, or "" when it can: libonnx's schema registry gives
// the operator version in force at each opset; the same version means the
// same semantics.
std::string OldOpsetProblem(const ir::Node& n, int64_t opset) {
  const auto* old = onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(opset), "");
  const auto* base = onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(kBaseOpset), "");
  if (!old && !base) {
    // Not an ONNX operator at all (the op registry reports it), or one added after opset 7.
    const auto* any = onnx::OpSchemaRegistry::Schema(n.op_type, "");
    if (!any) return "";
    return n.Describe() + ": " + n.op_type + " does not exist in opset " + std::to_string(opset) +
           " (it was added in opset " + std::to_string(any->since_version()) + ")";
  }
  const std::string at = "opset-" + std::to_string(opset);
  if (!old) return n.Describe() + ": " + n.op_type + " does not exist in opset " + std::to_string(opset);
  if (base && old->since_version() == base->since_version()) return "";
  std::string what = "changed in opset " + std::to_string(base ? base->since_version() : kBaseOpset);
  if (!base) what = "was removed by opset " + std::to_string(kBaseOpset);
  // The one change that touches many operators.
  if (base && old->attributes().count("broadcast") && !base->attributes().count("broadcast"))
    what += " (legacy broadcast)";
  else if (old->attributes().count("consumed_inputs"))
    what += " (consumed_inputs)";
  return n.Describe() + " uses " + at + " semantics (" + n.op_type + "-" +
         std::to_string(old->since_version()) + ") that " + what + "; re-export the model at opset >= " +
         std::to_string(kBaseOpset);
}

// How an input shape is named in messages: as the entry of
// ImportOptions::input_shapes / CompileSpec::input_shapes that sets it, e.g.
// "input_shapes['input'] = [1, 3, 224, 224]" (the CLI rewrites it as its flag).
std::string ShapeEntry(const std::string& name, const std::vector<int64_t>& d) {
  std::string dims;
  for (int64_t x : d) dims += (dims.empty() ? "" : ", ") + std::to_string(x);
  return "input_shapes['" + name + "'] = [" + dims + "]";
}

// Converts attributes; subgraphs and sparse tensors have no IR form.
Status ConvertAttrs(const onnx::NodeProto& p, const std::string& base_dir, ir::Node* n,
                    std::string* unsupported_why) {
  using AP = onnx::AttributeProto;
  for (const auto& a : p.attribute()) {
    ir::Attribute at;
    using K = ir::Attribute::Kind;
    switch (a.type()) {
      case AP::INT: at.kind = K::kInt; at.i = a.i(); break;
      case AP::FLOAT: at.kind = K::kFloat; at.f = a.f(); break;
      case AP::STRING: at.kind = K::kString; at.s = a.s(); break;
      case AP::INTS: at.kind = K::kInts; at.ints.assign(a.ints().begin(), a.ints().end()); break;
      case AP::FLOATS: at.kind = K::kFloats; at.floats.assign(a.floats().begin(), a.floats().end()); break;
      case AP::STRINGS: at.kind = K::kStrings; at.strings.assign(a.strings().begin(), a.strings().end()); break;
      case AP::TENSOR: {
        at.kind = K::kTensor;
        auto t = TensorFromProto(a.t(), base_dir, n->Describe() + " attribute '" + a.name() + "'");
        if (!t.ok()) {
          if (t.status().code() != StatusCode::kUnsupported) return t.TakeStatus();
          *unsupported_why = t.status().message();
          continue;
        }
        at.t = std::move(t).value();
        break;
      }
      default:
        *unsupported_why = "attribute '" + a.name() + "' is a " +
                           AP::AttributeType_Name(a.type()) + " (subgraphs and sparse tensors are not supported)";
        continue;
    }
    n->attrs[a.name()] = std::move(at);
  }
  return Status::Ok();
}

// A Constant node's value as a tensor (nullptr + `why` if unsupported).
Result<std::shared_ptr<ir::TensorData>> ConstantValue(const onnx::NodeProto& p,
                                                      const std::string& base_dir,
                                                      const std::string& what, std::string* why) {
  for (const auto& a : p.attribute()) {
    const std::string& k = a.name();
    if (k == "value") return TensorFromProto(a.t(), base_dir, what);
    if (k == "value_float") return ir::TensorData::FromFloats({}, {a.f()});
    if (k == "value_floats")
      return ir::TensorData::FromFloats({a.floats_size()}, {a.floats().begin(), a.floats().end()});
    if (k == "value_int") return ir::TensorData::FromInts({}, {a.i()});
    if (k == "value_ints")
      return ir::TensorData::FromInts({a.ints_size()}, {a.ints().begin(), a.ints().end()});
    if (k == "sparse_value" || k == "value_string" || k == "value_strings") {
      *why = "Constant attribute '" + k + "' is not supported";
      return std::shared_ptr<ir::TensorData>();
    }
  }
  return InvalidArgument(what + " has no value attribute");
}

// The subgraph attribute `name` of `p`, or nullptr.
const onnx::GraphProto* GraphAttr(const onnx::NodeProto& p, const std::string& name) {
  for (const auto& a : p.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::GRAPH) return &a.g();
  return nullptr;
}

// Nodes of `g` and of every subgraph nested in it.
uint64_t CountNodes(const onnx::GraphProto& g) {
  uint64_t n = static_cast<uint64_t>(g.node_size());
  for (const auto& node : g.node())
    for (const auto& a : node.attribute()) {
      if (a.has_g()) n += CountNodes(a.g());
      for (const auto& sg : a.graphs()) n += CountNodes(sg);
    }
  return n;
}

// The first random operator in `g` or its nested subgraphs ("" if none).
std::string FindRandomOp(const onnx::GraphProto& g) {
  for (const auto& node : g.node()) {
    if (IsRandomOp(node.op_type())) return "'" + node.name() + "' (" + node.op_type() + ")";
    for (const auto& a : node.attribute()) {
      std::string r = a.has_g() ? FindRandomOp(a.g()) : "";
      for (const auto& sg : a.graphs())
        if (r.empty()) r = FindRandomOp(sg);
      if (!r.empty()) return r;
    }
  }
  return "";
}

// Most iterations a Loop or Scan is unrolled to (fcb compiles control flow
// away at import; see docs/design.md, "Control flow").
constexpr int64_t kMaxUnrolledIterations = 4096;

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

  Result<ir::Graph> Run() {
    FCB_RETURN_IF_ERROR(CheckModel());
    for (const auto& t : g_.initializer()) s_.ReserveName(t.name());
    for (const auto& v : g_.input()) s_.ReserveName(v.name());
    for (const auto& n : g_.node())
      for (const auto& o : n.output()) s_.ReserveName(o);
    FCB_RETURN_IF_ERROR(AddInitializers());
    FCB_RETURN_IF_ERROR(AddInputs());
    FCB_ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(g_));
    for (int i : order) FCB_RETURN_IF_ERROR(AddNode(g_.node(i), i, nullptr));
    if (!s_.unsupported.empty()) {
      std::string msg = "model uses " + std::to_string(s_.unsupported.size()) +
                        " unsupported operator" + (s_.unsupported.size() > 1 ? "s" : "") + ": ";
      for (size_t i = 0; i < s_.unsupported.size(); ++i) msg += (i ? "; " : "") + s_.unsupported[i];
      return Unsupported(msg);
    }
    FCB_RETURN_IF_ERROR(AddOutputs());
    s_.g.opset = s_.opset;
    FCB_RETURN_IF_ERROR(s_.g.Validate());
    return std::move(s_.g);
  }

 private:
  Status CheckModel() {
    if (m_.ir_version() < kMinIrVersion || m_.ir_version() > kMaxIrVersion)
      return Unsupported("model has IR version " + std::to_string(m_.ir_version()) +
                         "; fcb reads IR versions " + std::to_string(kMinIrVersion) + " to " +
                         std::to_string(kMaxIrVersion));
    FCB_ASSIGN_OR_RETURN(model_opset_, DefaultOpset(m_));
    // Nodes of older models that pass OldOpsetProblem mean what they mean at 7.
    s_.opset = std::max(model_opset_, kBaseOpset);
    if (!m_.has_graph()) return InvalidArgument("model has no graph");
    if (g_.output_size() == 0) return InvalidArgument("model graph has no outputs");
    return Status::Ok();
  }

  Status AddInitializers() {
    for (const auto& t : g_.initializer()) {
      const std::string what = "initializer '" + t.name() + "'";
      if (t.name().empty()) return InvalidArgument("an initializer has no name");
      FCB_ASSIGN_OR_RETURN(auto data, TensorFromProto(t, base_dir_, what));
      FCB_ASSIGN_OR_RETURN(int id, s_.AddNamed(t.name()));
      ir::Value& v = s_.g.values[id];
      v.dtype = data->dtype;
      v.shape = data->shape;
      v.has_shape = true;
      v.constant = std::move(data);
    }
    return Status::Ok();
  }

  Status AddInputs() {
    std::vector<const onnx::ValueInfoProto*> runtime;
    for (const auto& vi : g_.input())
      if (!s_.by_name.count(vi.name())) runtime.push_back(&vi);  // else: an initializer = constant
    std::string names;
    for (const auto* vi : runtime) names += (names.empty() ? "'" : ", '") + vi->name() + "'";
    for (const auto& [name, dims] : opts_.input_shapes) {
      bool found = false;
      for (const auto* vi : runtime) found = found || vi->name() == name;
      if (!found)
        return NotFound("input_shapes names '" + name + "', which is not an input of the model; "
                        "its inputs are " + (names.empty() ? "(none)" : names));
    }
    for (const auto& [name, t] : opts_.input_values) {
      bool found = false;
      std::string all;  // initializer-backed inputs included: a value may override those
      for (const auto& vi : g_.input()) {
        found = found || vi.name() == name;
        all += (all.empty() ? "'" : ", '") + vi.name() + "'";
      }
      if (!found)
        return NotFound("input_values['" + name + "'] names no input of the model; its inputs are " +
                        (all.empty() ? "(none)" : all));
      if (!t) return InvalidArgument("input_values['" + name + "'] has no data");
    }
    // An initializer that is also an input (older IR versions) is a default
    // ONNX Runtime lets a feed override; input_values overrides it here.
    for (const auto& vi : g_.input()) {
      auto given = opts_.input_values.find(vi.name());
      auto init = s_.by_name.find(vi.name());
      if (given == opts_.input_values.end() || init == s_.by_name.end()) continue;
      ir::Value& v = s_.g.values[init->second];
      FCB_ASSIGN_OR_RETURN(auto t, FitInputValue(vi.name(), *given->second, v.dtype, v.shape, v.shape));
      v.constant = std::move(t);
    }
    for (const auto* vi : runtime) {
      const std::string& name = vi->name();
      if (!vi->type().has_tensor_type())
        return Unsupported("input '" + name + "' is not a tensor (sequence, map and optional "
                           "inputs are not supported)");
      const auto& tt = vi->type().tensor_type();
      const ir::DType dtype = DTypeFromOnnx(tt.elem_type());
      if (dtype == ir::DType::kUndefined)
        return Unsupported("input '" + name + "' has element type " + OnnxTypeName(tt.elem_type()) +
                           ", which is not supported");
      auto given = opts_.input_values.find(name);
      if (given != opts_.input_values.end()) {
        // Fixed to a constant: its shape is the value's, checked against the
        // model's dims (symbolic ones take any size) and input_shapes.
        ir::Shape declared;
        if (tt.has_shape())
          for (const auto& d : tt.shape().dim()) declared.push_back(d.has_dim_value() ? d.dim_value() : -1);
        else
          declared = ir::Shape(given->second->shape.size(), -1);
        auto shape_given = opts_.input_shapes.find(name);
        if (shape_given != opts_.input_shapes.end() && shape_given->second != given->second->shape)
          return InvalidArgument("input_values['" + name + "'] has shape " + ir::ShapeToString(given->second->shape) +
                                 " but input_shapes gives " + ir::ShapeToString(shape_given->second) +
                                 "; give one of them");
        FCB_ASSIGN_OR_RETURN(auto t, FitInputValue(name, *given->second, dtype, declared, given->second->shape));
        FCB_ASSIGN_OR_RETURN(int id, s_.AddNamed(name));
        ir::Value& v = s_.g.values[id];
        v.dtype = dtype;
        v.shape = t->shape;
        v.has_shape = true;
        v.constant = std::move(t);
        continue;
      }
      FCB_ASSIGN_OR_RETURN(ir::Shape shape, InputShape(*vi));
      FCB_ASSIGN_OR_RETURN(int id, s_.AddNamed(name));
      ir::Value& v = s_.g.values[id];
      v.dtype = dtype;
      v.shape = std::move(shape);
      v.has_shape = true;
      s_.g.inputs.push_back(id);
    }
    return Status::Ok();
  }

  // `value` for input `name` as a constant of `dtype` and shape `shape`:
  // `declared` is the model's shape for it (-1 = any size). Refuses a rank or
  // dim that contradicts the model, and an element the type cannot hold.
  static Result<ir::TensorPtr> FitInputValue(const std::string& name, const ir::TensorData& value, ir::DType dtype,
                                             const ir::Shape& declared, const ir::Shape& shape) {
    const std::string what = "input_values['" + name + "']";
    const std::string value_desc = std::string(ir::DTypeName(value.dtype)) + " " + ir::ShapeToString(value.shape);
    if (value.shape.size() != declared.size())
      return InvalidArgument(what + " is " + value_desc + " (rank " + std::to_string(value.shape.size()) +
                             "), but the model's input has rank " + std::to_string(declared.size()));
    for (size_t i = 0; i < declared.size(); ++i)
      if (declared[i] >= 0 && declared[i] != value.shape[i])
        return InvalidArgument(what + " is " + value_desc + ", but the model fixes dim " + std::to_string(i) +
                               " of the input to " + std::to_string(declared[i]));
    if (value.shape != shape)
      return InvalidArgument(what + " is " + value_desc + ", but the input's shape is " + ir::ShapeToString(shape));
    if (static_cast<int64_t>(value.bytes.size()) != value.numel() * static_cast<int64_t>(ir::DTypeSize(value.dtype)))
      return InvalidArgument(what + ": " + std::to_string(value.bytes.size()) + " bytes of data for " + value_desc);
    if (value.dtype == dtype) return std::make_shared<const ir::TensorData>(value);
    const bool to_bool = dtype == ir::DType::kBool, from_bool = value.dtype == ir::DType::kBool;
    const bool to_float = dtype == ir::DType::kF32 || dtype == ir::DType::kF64 || dtype == ir::DType::kF16 ||
                          dtype == ir::DType::kBF16;
    const bool to_int = !to_bool && !to_float && ir::DTypeSize(dtype) > 0;
    const std::string refused = what + " is " + value_desc + "; the model's input is " + ir::DTypeName(dtype);
    if (to_bool != from_bool || (!to_float && !to_int && !to_bool)) return InvalidArgument(refused);
    // An integer type needs integral values in its range (checked through
    // double: exact for integers below 2^53 and for every float value).
    if (to_int) {
      const int bits = 8 * static_cast<int>(ir::DTypeSize(dtype));
      const bool is_unsigned = dtype == ir::DType::kU8 || dtype == ir::DType::kU16 || dtype == ir::DType::kU32 ||
                               dtype == ir::DType::kU64;
      const double lo = is_unsigned ? 0 : -std::ldexp(1.0, bits - 1);
      const double hi = std::ldexp(1.0, is_unsigned ? bits : bits - 1);  // exclusive
      for (int64_t i = 0; i < value.numel(); ++i) {
        const double d = value.GetDouble(i);
        if (!(d == std::floor(d)) || d < lo || d >= hi)
          return InvalidArgument(refused + ", which cannot hold element " + std::to_string(i) + " (" +
                                 std::to_string(d) + ")");
      }
    }
    ir::Node cast_node;
    cast_node.op_type = "Cast";
    cast_node.SetInt("to", static_cast<int64_t>(dtype));
    FCB_ASSIGN_OR_RETURN(auto cast, ops::Evaluate("Cast", ops::AttrsFromNode(cast_node), {&value}, 1));
    return ir::TensorPtr(std::move(cast[0]));
  }

  // The model's dims, with symbolic/unknown ones fixed by opts.input_shapes,
  // within fcb/limits.h (rank, elements): an absurd declared shape is refused
  // here, naming the input, before any pass multiplies it out.
  Result<ir::Shape> InputShape(const onnx::ValueInfoProto& vi) {
    FCB_ASSIGN_OR_RETURN(ir::Shape shape, DeclaredInputShape(vi));
    if (shape.size() > static_cast<size_t>(limits::kMaxRank))
      return Unsupported("input '" + vi.name() + "' has " + std::to_string(shape.size()) +
                         " dimensions, more than the limit of " + std::to_string(limits::kMaxRank) + " (fcb/limits.h)");
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (d != 0 && numel > limits::kMaxTensorElements / static_cast<uint64_t>(d)) {
        numel = limits::kMaxTensorElements + 1;
        break;
      }
      numel *= static_cast<uint64_t>(d);
    }
    if (numel > limits::kMaxTensorElements)
      return Unsupported("input '" + vi.name() + "' has shape " + ir::ShapeToString(shape) +
                         ", more than the limit of " + std::to_string(limits::kMaxTensorElements) +
                         " elements (fcb/limits.h)");
    return shape;
  }

  Result<ir::Shape> DeclaredInputShape(const onnx::ValueInfoProto& vi) {
    const std::string& name = vi.name();
    const auto& tt = vi.type().tensor_type();
    auto given = opts_.input_shapes.find(name);
    const bool has_given = given != opts_.input_shapes.end();
    if (has_given)
      for (int64_t d : given->second)
        if (d < 0) return InvalidArgument(ShapeEntry(name, given->second) + ": dims must not be negative");
    if (!tt.has_shape()) {
      if (has_given) return ir::Shape(given->second);
      return InvalidArgument("input '" + name + "' has no shape in the model; give it one in input_shapes, e.g. " +
                             ShapeEntry(name, {1, 3, 224, 224}));
    }
    const auto& dims = tt.shape().dim();
    if (has_given && static_cast<int>(given->second.size()) != dims.size())
      return InvalidArgument(ShapeEntry(name, given->second) + " has rank " +
                             std::to_string(given->second.size()) + ", but the model's input has rank " +
                             std::to_string(dims.size()));
    ir::Shape shape;
    for (int i = 0; i < dims.size(); ++i) {
      const auto& d = dims[i];
      if (d.has_dim_value() && d.dim_value() >= 0) {
        if (has_given && given->second[i] != d.dim_value())
          return InvalidArgument(ShapeEntry(name, given->second) + " contradicts the model: dim " +
                                 std::to_string(i) + " is fixed to " +
                                 std::to_string(d.dim_value()));
        shape.push_back(d.dim_value());
      } else if (has_given) {
        shape.push_back(given->second[i]);
      } else {
        // Suggest a full shape: the fixed dims, 1 for the free ones.
        std::vector<int64_t> example;
        for (const auto& e : dims) example.push_back(e.has_dim_value() && e.dim_value() > 0 ? e.dim_value() : 1);
        const std::string kind = d.has_dim_param() ? "symbolic dim " + std::to_string(i) + " ('" +
                                                         d.dim_param() + "')"
                                                   : "unknown dim " + std::to_string(i);
        return InvalidArgument("input '" + name + "' has " + kind + "; fix it in input_shapes, e.g. " +
                               ShapeEntry(name, example) + " (with the dims you need)");
      }
    }
    return shape;
  }

  // Appends every name read by the nodes of `p`'s subgraphs, nested ones
  // included (names a subgraph defines itself are no outer node's outputs).
  static void SubgraphReads(const onnx::NodeProto& p, std::vector<std::string>* out) {
    for (const auto& a : p.attribute()) {
      auto add = [&](const onnx::GraphProto& sg) {
        for (const auto& n : sg.node()) {
          out->insert(out->end(), n.input().begin(), n.input().end());
          SubgraphReads(n, out);
        }
        for (const auto& o : sg.output()) out->push_back(o.name());  // an output may name an outer value
      };
      if (a.has_g()) add(a.g());
      for (const auto& sg : a.graphs()) add(sg);
    }
  }

  // The name a node is known by in messages (as ir::Node::Describe words it).
  static std::string NodeLabel(const onnx::GraphProto& g, int i) {
    const auto& p = g.node(i);
    return "'" + (p.name().empty() ? p.op_type() + "_" + std::to_string(i) : p.name()) + "' (" + p.op_type() + ")";
  }

  // The nodes in an order where every node comes after the producers of its
  // inputs, as ONNX requires and some exporters do not write: the model's
  // own order wherever it already is one (Kahn's algorithm taking the lowest
  // index that is ready), so a well-ordered model imports unchanged. An input
  // that no node produces is left to AddNode (a graph input, an initializer,
  // or the "not ... an output of an earlier node" error). Nodes on a cycle
  // are an error that names them in order around the cycle.
  static Result<std::vector<int>> TopologicalOrder(const onnx::GraphProto& g) {
    const int n = g.node_size();
    // What each node reads: its inputs, and the names its subgraphs (If
    // branches, Loop/Scan bodies) read, which may be outer-scope values.
    std::vector<std::vector<std::string>> reads(n);
    for (int i = 0; i < n; ++i) {
      reads[i].assign(g.node(i).input().begin(), g.node(i).input().end());
      SubgraphReads(g.node(i), &reads[i]);
    }
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const auto& o : g.node(i).output())
        if (!o.empty()) producer.emplace(o, i);  // a second producer is AddNamed's error
    std::vector<std::vector<int>> users(n);
    std::vector<int> waiting(n, 0);
    for (int i = 0; i < n; ++i) {
      std::vector<int> deps;
      for (const auto& in : reads[i]) {
        auto it = in.empty() ? producer.end() : producer.find(in);
        if (it != producer.end() && std::find(deps.begin(), deps.end(), it->second) == deps.end())
          deps.push_back(it->second);
      }
      waiting[i] = static_cast<int>(deps.size());
      for (int d : deps) users[d].push_back(i);
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i)
      if (waiting[i] == 0) ready.push(i);
    std::vector<int> order;
    order.reserve(n);
    while (!ready.empty()) {
      const int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int u : users[i])
        if (--waiting[u] == 0) ready.push(u);
    }
    if (static_cast<int>(order.size()) == n) return order;
    // Every node left waits on another one left: walk back through waiting
    // producers until a node repeats; the walk from its first visit is a cycle.
    int at = 0;
    while (waiting[at] == 0) ++at;
    std::vector<int> path;
    std::unordered_map<int, size_t> seen;
    while (!seen.count(at)) {
      seen[at] = path.size();
      path.push_back(at);
      for (const auto& in : reads[at]) {
        auto it = in.empty() ? producer.end() : producer.find(in);
        if (it != producer.end() && waiting[it->second] > 0) {
          at = it->second;
          break;
        }
      }
    }
    std::vector<int> cycle(path.begin() + seen[at], path.end());
    std::reverse(cycle.begin(), cycle.end());  // producer before consumer
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());  // first in the file first
    std::string msg;
    for (int i : cycle) msg += NodeLabel(g, i) + " -> ";
    msg += NodeLabel(g, cycle.front());
    return InvalidArgument("the graph has a cycle, so no order of its nodes computes every input first: " + msg +
                           " (" + std::to_string(n - order.size()) + " node" + (n - order.size() > 1 ? "s" : "") +
                           " cannot be ordered)");
  }

  // The value an ONNX name means in `scope` (-1: none).
  int Lookup(const Scope* scope, const std::string& name) const {
    for (const Scope* sc = scope; sc; sc = sc->parent) {
      auto it = sc->names.find(name);
      if (it != sc->names.end()) return it->second;
    }
    auto it = s_.by_name.find(name);
    return it == s_.by_name.end() ? -1 : it->second;
  }

  // A new value named `name` in `scope`: the ONNX name itself in the main
  // graph; a fresh name under the scope's prefix in a subgraph (a Loop body
  // is imported once per iteration).
  Result<int> Define(Scope* scope, const std::string& name) {
    if (!scope) return s_.AddNamed(name);
    if (scope->names.count(name))
      return InvalidArgument("value '" + name + "' is defined more than once in a subgraph");
    const int id = s_.AddTemp(scope->prefix + name);
    scope->names[name] = id;
    return id;
  }

  Status AddNode(const onnx::NodeProto& p, int index, Scope* scope) {
    ir::Node n;
    n.name = (scope ? scope->prefix : "") + (p.name().empty() ? p.op_type() + "_" + std::to_string(index) : p.name());
    n.op_type = p.op_type();
    // Unrolled loops import their bodies again and again; bound the total.
    if (++expanded_ > limits::kMaxNodes)
      return Unsupported(n.Describe() + ": expanding If/Loop/Scan makes more than " +
                         std::to_string(limits::kMaxNodes) + " nodes, the limit (fcb/limits.h)");
    n.op_type = p.op_type();
    n.domain = p.domain();
    // Inputs: "" is an omitted optional input; trailing ones are dropped.
    for (const auto& in : p.input()) {
      if (in.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      const int id = Lookup(scope, in);
      if (id < 0)
        return InvalidArgument(n.Describe() + ": input '" + in +
                               "' is not a graph input, initializer or output of an earlier node" +
                               (scope ? " (of this subgraph or an enclosing graph)" : ""));
      const ir::Value& v = s_.value(id);
      if (s_.Known(id) && !v.has_shape)
        return Unsupported(n.Describe() + ": input '" + in +
                           "' is an optional output fcb does not compute (e.g. a Dropout mask)");
      n.inputs.push_back(id);
    }
    while (!n.inputs.empty() && n.inputs.back() < 0) n.inputs.pop_back();
    // Outputs: trailing omitted ones are dropped; inner ones get a fresh name.
    int last = p.output_size();
    while (last > 0 && p.output(last - 1).empty()) --last;
    for (int k = 0; k < last; ++k) {
      if (p.output(k).empty()) {
        n.outputs.push_back(s_.AddTemp(n.name + "/unused"));
      } else {
        FCB_ASSIGN_OR_RETURN(int id, Define(scope, p.output(k)));
        n.outputs.push_back(id);
      }
    }

    std::string why;
    const bool onnx_domain = n.domain.empty() || n.domain == "ai.onnx";
    if (onnx_domain && model_opset_ < kBaseOpset) {
      const std::string problem = OldOpsetProblem(n, model_opset_);
      if (!problem.empty()) {
        s_.unsupported.push_back(problem);
        for (int o : n.outputs) s_.MarkUnknown(o);
        return Status::Ok();
      }
    }
    if (onnx_domain && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan")) {
      for (int i : n.inputs)
        if (!s_.Known(i)) {  // downstream of an unsupported node
          for (int o : n.outputs) s_.MarkUnknown(o);
          return Status::Ok();
        }
      std::string subgraphs;  // the subgraph attributes, which have no IR form
      FCB_RETURN_IF_ERROR(ConvertAttrs(p, base_dir_, &n, &subgraphs));
      Status st = n.op_type == "If" ? ExpandIf(p, n, scope) : n.op_type == "Loop" ? ExpandLoop(p, n, scope)
                                                                                   : ExpandScan(p, n, scope);
      if (st.code() != StatusCode::kUnsupported) return st;
      // Reported with the other unsupported nodes (the message names the node).
      s_.unsupported.push_back(st.message());
      for (int o : n.outputs) s_.MarkUnknown(o);
      return Status::Ok();
    }
    if (n.op_type == "Constant" && onnx_domain) {
      FCB_ASSIGN_OR_RETURN(auto t, ConstantValue(p, base_dir_, n.Describe(), &why));
      if (t && n.outputs.size() == 1) {
        ir::Value& v = s_.g.values[n.outputs[0]];
        v.dtype = t->dtype;
        v.shape = t->shape;
        v.has_shape = true;
        v.constant = std::move(t);
        return Status::Ok();
      }
      if (why.empty()) why = "Constant must have exactly one output";
    }
    if (why.empty()) FCB_RETURN_IF_ERROR(ConvertAttrs(p, base_dir_, &n, &why));
    if (!why.empty()) {
      s_.unsupported.push_back(n.Describe() + ": " + why);
      for (int o : n.outputs) s_.MarkUnknown(o);
      return Status::Ok();
    }
    return CanonicalizeAndEmit(s_, std::move(n));
  }

  // ---- Control flow (docs/design.md, "Control flow") ----
  //
  // If, Loop and Scan never become graph nodes: their subgraphs are imported
  // in place (a Loop's or Scan's body once per iteration) under a Scope that
  // gives every value made there a fresh name, and the node's outputs become
  // Identity copies of the subgraph's results (removed by the passes).

  // Imports `g` (a subgraph of `owner`) in a new scope under `parent`, its
  // inputs bound to `inputs`; returns the values of its outputs.
  Result<std::vector<int>> InlineGraph(const onnx::GraphProto& g, const ir::Node& owner, const Scope* parent,
                                       const std::string& prefix, const std::vector<int>& inputs) {
    if (g.input_size() != static_cast<int>(inputs.size()))
      return InvalidArgument(owner.Describe() + ": subgraph '" + g.name() + "' has " +
                             std::to_string(g.input_size()) + " inputs; " + owner.op_type + " gives it " +
                             std::to_string(inputs.size()));
    Scope sc;
    sc.parent = parent;
    sc.prefix = prefix;
    for (int i = 0; i < g.input_size(); ++i)
      if (!g.input(i).name().empty()) sc.names[g.input(i).name()] = inputs[i];
    for (const auto& t : g.initializer()) {
      FCB_ASSIGN_OR_RETURN(auto data, TensorFromProto(t, base_dir_, owner.Describe() + " subgraph initializer '" +
                                                                        t.name() + "'"));
      sc.names[t.name()] = s_.AddConst(prefix + t.name(), std::move(data));
    }
    FCB_ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(g));
    for (int i : order) FCB_RETURN_IF_ERROR(AddNode(g.node(i), i, &sc));
    std::vector<int> outs;
    for (const auto& o : g.output()) {
      const int id = Lookup(&sc, o.name());
      if (id < 0 || (s_.Known(id) && !s_.value(id).has_shape))
        return InvalidArgument(owner.Describe() + ": subgraph output '" + o.name() +
                               "' is not produced by any node of the subgraph or an enclosing graph");
      outs.push_back(id);
    }
    return outs;
  }

  // Emits `op` on `inputs` into a new value (or into `out` when >= 0).
  Result<int> EmitOp(const std::string& name, const std::string& op, std::vector<int> inputs,
                     std::map<std::string, ir::Attribute, std::less<>> attrs = {}, int out = -1) {
    ir::Node n;
    n.name = s_.FreshName(name);
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.outputs = {out >= 0 ? out : s_.AddTemp(n.name)};
    const int id = n.outputs[0];
    FCB_RETURN_IF_ERROR(s_.Emit(std::move(n)));
    return id;
  }

  static ir::Attribute IntAttr(int64_t v) {
    ir::Attribute a;
    a.kind = ir::Attribute::Kind::kInt;
    a.i = v;
    return a;
  }

  // Stacks `parts` along a new axis `axis` into `out` (Unsqueeze + Concat).
  Status Stack(const std::string& name, const std::vector<int>& parts, int64_t axis, int out) {
    const int axes = s_.AddConst(name + "/axes", ir::TensorData::FromInts({1}, {axis}));
    if (parts.size() == 1) return EmitOp(name + "/unsqueeze", "Unsqueeze", {parts[0], axes}, {}, out).status();
    std::vector<int> rows;
    for (int v : parts) {
      FCB_ASSIGN_OR_RETURN(int r, EmitOp(name + "/unsqueeze", "Unsqueeze", {v, axes}));
      rows.push_back(r);
    }
    return EmitOp(name + "/concat", "Concat", rows, {{"axis", IntAttr(axis)}}, out).status();
  }

  Status Copy(const ir::Node& n, int from, int to) {
    return EmitOp(n.name + "/output", "Identity", {from}, {}, to).status();
  }

  // The single boolean/integer element of a constant condition or count.
  static bool ScalarValue(const ir::Value& v, int64_t* out) {
    if (!v.is_constant() || v.constant->numel() != 1) return false;
    *out = v.constant->dtype == ir::DType::kBool ? v.constant->bytes[0] : v.constant->ToInts()[0];
    return true;
  }

  Status ExpandIf(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope) {
    const onnx::GraphProto* then_g = GraphAttr(p, "then_branch");
    const onnx::GraphProto* else_g = GraphAttr(p, "else_branch");
    if (!then_g || !else_g) return InvalidArgument(n.Describe() + ": needs then_branch and else_branch subgraphs");
    if (n.inputs.size() != 1 || n.inputs[0] < 0)
      return InvalidArgument(n.Describe() + ": takes one input (the condition)");
    if (then_g->output_size() != else_g->output_size() ||
        then_g->output_size() < static_cast<int>(n.outputs.size()))
      return InvalidArgument(n.Describe() + ": then_branch has " + std::to_string(then_g->output_size()) +
                             " outputs, else_branch " + std::to_string(else_g->output_size()) + ", the node " +
                             std::to_string(p.output_size()));
    const int cond = n.inputs[0];
    const ir::Value& c = s_.value(cond);
    if (c.dtype != ir::DType::kBool || ir::NumElements(c.shape) != 1)
      return InvalidArgument(n.Describe() + ": the condition must be one bool element, got " +
                             ir::DTypeName(c.dtype) + " " + ir::ShapeToString(c.shape));
    int64_t value = 0;
    if (ScalarValue(c, &value)) {  // known at compile time: the chosen branch only
      FCB_ASSIGN_OR_RETURN(std::vector<int> outs,
                           InlineGraph(value ? *then_g : *else_g, n, scope, n.name + (value ? "/then/" : "/else/"), {}));
      for (size_t k = 0; k < n.outputs.size(); ++k) FCB_RETURN_IF_ERROR(Copy(n, outs[k], n.outputs[k]));
      return Status::Ok();
    }
    // Known at run time only: both branches, each output selected by Where.
    for (const onnx::GraphProto* b : {then_g, else_g}) {
      const std::string r = FindRandomOp(*b);
      if (!r.empty())
        return Unsupported(n.Describe() + ": its condition is known only at run time, so fcb computes both branches "
                           "and selects the results; random operator " + r + " in " +
                           (b == then_g ? "then_branch" : "else_branch") + " would draw numbers the chosen branch "
                           "may not draw (docs/design.md, \"Control flow\")");
    }
    FCB_ASSIGN_OR_RETURN(std::vector<int> t, InlineGraph(*then_g, n, scope, n.name + "/then/", {}));
    FCB_ASSIGN_OR_RETURN(std::vector<int> e, InlineGraph(*else_g, n, scope, n.name + "/else/", {}));
    const int scalar = s_.AddConst(n.name + "/scalar", ir::TensorData::FromInts({0}, {}));
    FCB_ASSIGN_OR_RETURN(int sel, EmitOp(n.name + "/cond", "Reshape", {cond, scalar}));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ir::Value& tv = s_.value(t[k]);
      const ir::Value& ev = s_.value(e[k]);
      if (s_.Known(t[k]) && s_.Known(e[k]) && (tv.dtype != ev.dtype || tv.shape != ev.shape))
        return Unsupported(n.Describe() + ": its condition is known only at run time, so both branches are computed "
                           "and output " + std::to_string(k) + " ('" + p.output(static_cast<int>(k)) +
                           "') selected, which needs one static shape and dtype; then_branch gives " +
                           ir::DTypeName(tv.dtype) + " of shape " + ir::ShapeToString(tv.shape) + ", else_branch " +
                           ir::DTypeName(ev.dtype) + " of shape " + ir::ShapeToString(ev.shape));
      FCB_RETURN_IF_ERROR(EmitOp(n.name + "/select", "Where", {sel, t[k], e[k]}, {}, n.outputs[k]).status());
    }
    return Status::Ok();
  }

  Status ExpandLoop(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope) {
    const onnx::GraphProto* body = GraphAttr(p, "body");
    if (!body) return InvalidArgument(n.Describe() + ": needs a body subgraph");
    std::vector<int> in = n.inputs;
    in.resize(std::max<size_t>(p.input_size(), 2), -1);
    if (in[0] < 0 && in[1] < 0)
      return Unsupported(n.Describe() + ": has neither a trip count nor a condition (an endless loop)");
    const int carried_n = static_cast<int>(in.size()) - 2;
    const int scan_n = body->output_size() - 1 - carried_n;
    if (body->input_size() != 2 + carried_n || scan_n < 0 ||
        static_cast<int>(n.outputs.size()) > carried_n + scan_n)
      return InvalidArgument(n.Describe() + ": has " + std::to_string(carried_n) +
                             " loop-carried inputs; its body must take " + std::to_string(2 + carried_n) +
                             " inputs (has " + std::to_string(body->input_size()) + ") and give at least " +
                             std::to_string(1 + carried_n) + " outputs (has " + std::to_string(body->output_size()) +
                             ")");
    // The trip count and the first condition must be known at compile time.
    int64_t trip = -1, cond = 1;
    if (in[0] >= 0 && !ScalarValue(s_.value(in[0]), &trip))
      return Unsupported(n.Describe() + ": its trip count ('" + p.input(0) + "') is known only at run time; fcb "
                         "unrolls loops at compile time and needs a constant trip count");
    if (in[1] >= 0 && !ScalarValue(s_.value(in[1]), &cond))
      return Unsupported(n.Describe() + ": its condition ('" + p.input(1) + "') is known only at run time; fcb "
                         "unrolls loops at compile time and needs a constant condition");
    if (in[0] >= 0 && trip < 0) trip = 0;  // a negative trip count runs no iteration (i < M never holds)
    const int64_t cap = trip >= 0 ? trip : kMaxUnrolledIterations;
    if (trip > kMaxUnrolledIterations)
      return Unsupported(n.Describe() + ": trip count " + std::to_string(trip) + " is more than the " +
                         std::to_string(kMaxUnrolledIterations) + " iterations fcb unrolls");
    const uint64_t body_nodes = CountNodes(*body);
    if (trip > 0 && body_nodes * static_cast<uint64_t>(trip) + expanded_ > limits::kMaxNodes)
      return Unsupported(n.Describe() + ": unrolling trip count " + std::to_string(trip) + " of a " +
                         std::to_string(body_nodes) + "-node body makes more than " +
                         std::to_string(limits::kMaxNodes) + " nodes, the limit (fcb/limits.h)");
    std::vector<int> carried(in.begin() + 2, in.end());
    std::vector<std::vector<int>> scans(scan_n);
    int64_t iterations = 0;
    for (; iterations < cap && cond; ++iterations) {
      const std::string it = std::to_string(iterations);
      auto truth = ir::TensorData::Make(ir::DType::kBool, {});
      truth->bytes[0] = 1;
      std::vector<int> args = {s_.AddConst(n.name + "/iter" + it + "/i", ir::TensorData::FromInts({}, {iterations})),
                               s_.AddConst(n.name + "/iter" + it + "/cond", std::move(truth))};
      args.insert(args.end(), carried.begin(), carried.end());
      FCB_ASSIGN_OR_RETURN(std::vector<int> outs, InlineGraph(*body, n, scope, n.name + "/iter" + it + "/", args));
      if (!s_.Known(outs[0])) {  // the body holds an unsupported node (listed already)
        for (int o : n.outputs) s_.MarkUnknown(o);
        return Status::Ok();
      }
      if (!ScalarValue(s_.value(outs[0]), &cond))
        return Unsupported(n.Describe() + ": the body's condition output ('" + body->output(0).name() +
                           "') is known only at run time, so the number of iterations depends on the data; fcb "
                           "unrolls loops at compile time");
      carried.assign(outs.begin() + 1, outs.begin() + 1 + carried_n);
      for (int k = 0; k < scan_n; ++k) scans[k].push_back(outs[1 + carried_n + k]);
    }
    if (trip < 0 && cond)
      return Unsupported(n.Describe() + ": its condition is still true after " +
                         std::to_string(kMaxUnrolledIterations) + " iterations, the most fcb unrolls");
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const int k_ = static_cast<int>(k);
      if (k_ < carried_n) {
        FCB_RETURN_IF_ERROR(Copy(n, carried[k], n.outputs[k]));
      } else if (scans[k_ - carried_n].empty()) {
        return Unsupported(n.Describe() + ": runs no iteration, so scan output '" + p.output(k_) +
                           "' is empty with a shape fcb cannot infer");
      } else {
        FCB_RETURN_IF_ERROR(Stack(n.name + "/" + p.output(k_), scans[k_ - carried_n], 0, n.outputs[k]));
      }
    }
    return Status::Ok();
  }

  // One Scan sequence unrolled: `state` threaded through `len` runs of
  // `body`, scan input j sliced at each step along in_axes[j] (from the end
  // when in_dirs[j]); returns the final state values, then each scan output
  // stacked along out_axes[k] (last step first when out_dirs[k]).
  Result<std::vector<int>> UnrollScan(const onnx::NodeProto& p, const ir::Node& n, const onnx::GraphProto& body,
                                      const Scope* scope, const std::string& prefix, std::vector<int> state,
                                      const std::vector<int>& xs, const std::vector<int64_t>& in_axes,
                                      const std::vector<int64_t>& in_dirs, int64_t len,
                                      const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs) {
    const size_t state_n = state.size(), scan_out_n = out_axes.size();
    std::vector<std::vector<int>> scans(scan_out_n);
    for (int64_t t = 0; t < len; ++t) {
      const std::string at = prefix + "iter" + std::to_string(t) + "/";
      std::vector<int> args = state;
      for (size_t j = 0; j < xs.size(); ++j) {
        const int64_t index = in_dirs[j] ? len - 1 - t : t;
        const int idx = s_.AddConst(at + "index", ir::TensorData::FromInts({}, {index}));
        FCB_ASSIGN_OR_RETURN(int slice, EmitOp(at + "slice", "Gather", {xs[j], idx}, {{"axis", IntAttr(in_axes[j])}}));
        args.push_back(slice);
      }
      FCB_ASSIGN_OR_RETURN(std::vector<int> outs, InlineGraph(body, n, scope, at, args));
      state.assign(outs.begin(), outs.begin() + state_n);
      for (size_t k = 0; k < scan_out_n; ++k) scans[k].push_back(outs[state_n + k]);
    }
    std::vector<int> result = state;
    for (size_t k = 0; k < scan_out_n; ++k) {
      std::vector<int> parts = scans[k];
      const std::string what = p.output_size() > static_cast<int>(state_n + k) ? p.output(state_n + k) : "";
      if (parts.empty())
        return Unsupported(n.Describe() + ": the sequence is empty, so scan output " + std::to_string(k) + " ('" +
                           what + "') has a shape fcb cannot infer");
      const int out = s_.AddTemp(prefix + "scan_output" + std::to_string(k));
      result.push_back(out);
      if (!s_.Known(parts[0])) {
        s_.MarkUnknown(out);
        continue;
      }
      if (out_dirs[k]) std::reverse(parts.begin(), parts.end());
      const int64_t r = static_cast<int64_t>(s_.value(parts[0]).shape.size()) + 1;
      int64_t a = out_axes[k];
      if (a < -r || a >= r)
        return InvalidArgument(n.Describe() + ": scan_output_axes[" + std::to_string(k) + "] = " + std::to_string(a) +
                               " is out of range for output '" + what + "' of rank " + std::to_string(r));
      if (a < 0) a += r;
      FCB_RETURN_IF_ERROR(Stack(prefix + "scan_output" + std::to_string(k), parts, a, out));
    }
    return result;
  }

  Status ExpandScan(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope) {
    const onnx::GraphProto* body = GraphAttr(p, "body");
    if (!body) return InvalidArgument(n.Describe() + ": needs a body subgraph");
    // Scan-8 has a batch axis 0 on every input and output and an optional
    // first input sequence_lens; its sequence axis is 1.
    const bool batched = s_.opset < 9;
    const int first = batched ? 1 : 0;
    std::vector<int> in = n.inputs;
    in.resize(std::max<int>(p.input_size(), first), -1);
    const int64_t m = n.GetInt("num_scan_inputs", -1);
    const int total = static_cast<int>(in.size()) - first;
    if (m < 1 || m > total)
      return InvalidArgument(n.Describe() + ": num_scan_inputs " + std::to_string(m) + " must be 1 to its " +
                             std::to_string(total) + " state and scan inputs");
    const int state_n = total - static_cast<int>(m);
    const int scan_out_n = body->output_size() - state_n;
    if (body->input_size() != total || scan_out_n < 0 || static_cast<int>(n.outputs.size()) > body->output_size())
      return InvalidArgument(n.Describe() + ": its body must take " + std::to_string(total) + " inputs (has " +
                             std::to_string(body->input_size()) + ") and give at least " + std::to_string(state_n) +
                             " outputs (has " + std::to_string(body->output_size()) + ")");
    auto ints = [&](const std::string& attr, int count) -> Result<std::vector<int64_t>> {
      std::vector<int64_t> v = n.Has(attr) ? n.GetInts(attr) : std::vector<int64_t>(count, 0);
      if (static_cast<int>(v.size()) != count)
        return InvalidArgument(n.Describe() + ": " + attr + " has " + std::to_string(v.size()) +
                               " entries, expected " + std::to_string(count));
      return v;
    };
    std::vector<int64_t> in_axes(m, 0), out_axes(scan_out_n, 0), in_dirs, out_dirs(scan_out_n, 0);
    if (batched) {
      FCB_ASSIGN_OR_RETURN(in_dirs, ints("directions", static_cast<int>(m)));
    } else {
      FCB_ASSIGN_OR_RETURN(in_axes, ints("scan_input_axes", static_cast<int>(m)));
      FCB_ASSIGN_OR_RETURN(in_dirs, ints("scan_input_directions", static_cast<int>(m)));
      FCB_ASSIGN_OR_RETURN(out_axes, ints("scan_output_axes", scan_out_n));
      FCB_ASSIGN_OR_RETURN(out_dirs, ints("scan_output_directions", scan_out_n));
    }
    std::vector<int> state(in.begin() + first, in.begin() + first + state_n);
    std::vector<int> xs(in.begin() + first + state_n, in.end());
    // The sequence length (per batch entry for Scan-8) and the batch size.
    int64_t len = -1, batch = batched ? -1 : 1;
    for (int j = 0; j < total; ++j) {
      const int x = in[first + j];
      const std::string name = p.input(first + j);
      if (x < 0) return InvalidArgument(n.Describe() + ": input " + std::to_string(first + j) + " is missing");
      const ir::Shape& shape = s_.value(x).shape;
      const int64_t r = static_cast<int64_t>(shape.size());
      if (batched) {
        if (r < (j < state_n ? 1 : 2))
          return InvalidArgument(n.Describe() + ": input '" + name + "' lacks the batch" +
                                 (j < state_n ? "" : " and sequence") + " axes of Scan-8");
        if (batch >= 0 && shape[0] != batch)
          return InvalidArgument(n.Describe() + ": inputs have different batch sizes (" + std::to_string(batch) +
                                 " and " + std::to_string(shape[0]) + ")");
        batch = shape[0];
      }
      if (j < state_n) continue;
      const int s = j - state_n;
      int64_t a = in_axes[s];
      if (a < -r || a >= r)
        return InvalidArgument(n.Describe() + ": scan_input_axes[" + std::to_string(s) + "] = " + std::to_string(a) +
                               " is out of range for input '" + name + "' of rank " + std::to_string(r));
      if (a < 0) a += r;
      in_axes[s] = a;
      const int64_t l = shape[batched ? 1 : a];
      if (len >= 0 && l != len)
        return InvalidArgument(n.Describe() + ": scan inputs have different sequence lengths (" +
                               std::to_string(len) + " and " + std::to_string(l) + ")");
      len = l;
    }
    if (batched && in[0] >= 0) {
      const ir::Value& lens = s_.value(in[0]);
      bool full = lens.is_constant();
      if (full)
        for (int64_t v : lens.constant->ToInts()) full = full && v == len;
      if (!full)
        return Unsupported(n.Describe() + ": sequence_lens other than a constant full length " +
                           std::to_string(len) + " for every batch entry is not supported");
    }
    if (len > kMaxUnrolledIterations)
      return Unsupported(n.Describe() + ": sequence length " + std::to_string(len) + " is more than the " +
                         std::to_string(kMaxUnrolledIterations) + " iterations fcb unrolls");
    const uint64_t body_nodes = CountNodes(*body) + static_cast<uint64_t>(m);
    // Per batch entry: the unrolled bodies and the Gathers that take the
    // entry (< 2^33: len and the body are bounded), so the product cannot overflow.
    const uint64_t per_entry = body_nodes * static_cast<uint64_t>(len) + static_cast<uint64_t>(total) + 1;
    if (static_cast<uint64_t>(batch) > limits::kMaxNodes ||
        per_entry * static_cast<uint64_t>(batch) + expanded_ > limits::kMaxNodes)
      return Unsupported(n.Describe() + ": unrolling sequence length " + std::to_string(len) +
                         (batched ? " times batch " + std::to_string(batch) : std::string()) + " of a " +
                         std::to_string(body_nodes) + "-node body makes more than " +
                         std::to_string(limits::kMaxNodes) + " nodes, the limit (fcb/limits.h)");
    if (!batched) {
      FCB_ASSIGN_OR_RETURN(std::vector<int> res, UnrollScan(p, n, *body, scope, n.name + "/", state, xs, in_axes,
                                                            in_dirs, len, out_axes, out_dirs));
      for (size_t k = 0; k < n.outputs.size(); ++k) FCB_RETURN_IF_ERROR(Copy(n, res[k], n.outputs[k]));
      return Status::Ok();
    }
    // Scan-8: each batch entry is its own sequence (axis 0 after the batch
    // axis is taken off); the results are stacked along a new batch axis.
    std::vector<std::vector<int>> per_output(n.outputs.size());
    for (int64_t b = 0; b < batch; ++b) {
      const std::string at = n.name + "/batch" + std::to_string(b) + "/";
      const int idx = s_.AddConst(at + "index", ir::TensorData::FromInts({}, {b}));
      std::vector<int> st, x;
      for (int v : state) {
        FCB_ASSIGN_OR_RETURN(int e, EmitOp(at + "state", "Gather", {v, idx}, {{"axis", IntAttr(0)}}));
        st.push_back(e);
      }
      for (int v : xs) {
        FCB_ASSIGN_OR_RETURN(int e, EmitOp(at + "input", "Gather", {v, idx}, {{"axis", IntAttr(0)}}));
        x.push_back(e);
      }
      FCB_ASSIGN_OR_RETURN(std::vector<int> res, UnrollScan(p, n, *body, scope, at, st, x, in_axes, in_dirs, len,
                                                            out_axes, out_dirs));
      for (size_t k = 0; k < n.outputs.size(); ++k) per_output[k].push_back(res[k]);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (per_output[k].empty())
        return Unsupported(n.Describe() + ": the batch is empty, so output '" + p.output(static_cast<int>(k)) +
                           "' has a shape fcb cannot infer");
      FCB_RETURN_IF_ERROR(Stack(n.name + "/" + p.output(static_cast<int>(k)), per_output[k], 0, n.outputs[k]));
    }
    return Status::Ok();
  }

  Status AddOutputs() {
    std::set<int> seen;
    for (const auto& o : g_.output()) {
      auto it = s_.by_name.find(o.name());
      if (it == s_.by_name.end() || !s_.value(it->second).has_shape)
        return InvalidArgument("graph output '" + o.name() + "' is not produced by any node");
      s_.g.outputs.push_back(it->second);
    }
    return Status::Ok();
  }

  const onnx::ModelProto& m_;
  const onnx::GraphProto& g_;
  const std::string base_dir_;
  const ImportOptions& opts_;
  ImportState s_;
  int64_t model_opset_ = 0;  // as declared; s_.opset is what canonicalization assumes
  uint64_t expanded_ = 0;    // ONNX nodes imported so far, unrolled bodies counted per iteration
};

// Subgraph nesting and node count within fcb/limits.h, checked before the
// import walks anything (iteratively: a hostile nesting cannot exhaust the
// stack here).
Status CheckGraphLimits(const onnx::GraphProto& main) {
  struct Item {
    const onnx::GraphProto* g;
    int depth;
  };
  std::vector<Item> stack = {{&main, 0}};
  uint64_t nodes = 0;
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    nodes += static_cast<uint64_t>(it.g->node_size());
    if (nodes > limits::kMaxNodes)
      return Unsupported("the model holds more than " + std::to_string(limits::kMaxNodes) +
                         " nodes (subgraphs included), the limit (fcb/limits.h)");
    for (const onnx::NodeProto& n : it.g->node()) {
      for (const onnx::AttributeProto& a : n.attribute()) {
        const int subgraphs = (a.has_g() ? 1 : 0) + a.graphs_size();
        if (subgraphs == 0) continue;
        if (it.depth + 1 > limits::kMaxSubgraphDepth)
          return Unsupported("node '" + n.name() + "' (" + n.op_type() + ") attribute '" + a.name() +
                             "' nests subgraphs " + std::to_string(it.depth + 1) + " deep, more than the limit of " +
                             std::to_string(limits::kMaxSubgraphDepth) + " (fcb/limits.h)");
        if (a.has_g()) stack.push_back({&a.g(), it.depth + 1});
        for (const onnx::GraphProto& sg : a.graphs()) stack.push_back({&sg, it.depth + 1});
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ir::Graph> ImportOnnxBytes(const std::string& bytes, const std::string& base_dir,
                                  const ImportOptions& opts) {
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    return Unsupported("the model is " + std::to_string(bytes.size()) +
                       " bytes, more than protobuf's 2 GiB; save its weights as external data");
  onnx::ModelProto m;
  // Protobuf's default nesting limit (100 messages) would refuse a model
  // nested just past 32 subgraphs with no word of why; this one parses
  // anything CheckGraphLimits can name, and still bounds the parser's stack.
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetRecursionLimit(4 * limits::kMaxSubgraphDepth + 64);
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return CorruptFile("not a valid ONNX model (protobuf parsing failed, " + std::to_string(bytes.size()) +
                       " bytes; or subgraphs nested far past the limit of " +
                       std::to_string(limits::kMaxSubgraphDepth) + ")");
  FCB_RETURN_IF_ERROR(CheckGraphLimits(m.graph()));
  return Importer(m, base_dir, opts).Run();
}

Result<ir::Graph> ImportOnnx(const std::string& path, const ImportOptions& opts) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open model '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return IoError("reading model '" + path + "' failed");
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto g = ImportOnnxBytes(bytes, dir.empty() ? "." : dir.string(), opts);
  if (!g.ok()) return g.TakeStatus().Annotate("model '" + path + "'");
  return g;
}

}  // namespace fcb::import
