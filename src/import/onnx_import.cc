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
#include "import/onnx_importer.h"
#include "import/tensor_proto.h"
#include "ops/names.h"
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
// A range is written [lo, hi] there: "input_shapes['ids'] = [1, [1, 512]]".
std::string ShapeEntry(const std::string& name, const std::vector<ir::InputDim>& d) {
  std::string dims;
  for (const ir::InputDim& x : d) {
    if (!dims.empty()) dims += ", ";
    if (!x.is_range()) {
      dims += std::to_string(x.lo);
      continue;
    }
    dims += '[';
    dims += std::to_string(x.lo);
    dims += ", ";
    dims += std::to_string(x.hi);
    dims += ']';
  }
  return "input_shapes['" + name + "'] = [" + dims + "]";
}

// A size or a range in prose: "4", "1..512".
std::string SizeText(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
}

// Dims as ir::ShapeToString writes a shape, ranges as lo..hi: "1x1..512".
std::string DimsText(const std::vector<ir::InputDim>& d) {
  std::string out;
  for (const ir::InputDim& x : d) {
    if (!out.empty()) out += 'x';
    out += SizeText(x.lo, x.hi);
  }
  return out.empty() ? "scalar" : out;
}

// The symbol of dim `i` of input `input`: its dim_param, or "<input>.<i>"
// for an unnamed one (`d` null: the model gives the input no shape).
std::string SymbolOf(const std::string& input, const onnx::TensorShapeProto::Dimension* d, int i) {
  if (d && d->has_dim_param() && !d->dim_param().empty()) return d->dim_param();
  return input + "." + std::to_string(i);
}

bool FixedByModel(const onnx::TensorShapeProto::Dimension* d) { return d && d->has_dim_value() && d->dim_value() >= 0; }

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

}  // namespace

Result<ir::Graph> Importer::Run() {
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

Status Importer::CheckModel() {
  if (m_.ir_version() < kMinIrVersion || m_.ir_version() > kMaxIrVersion)
    return Unsupported("model has IR version " + std::to_string(m_.ir_version()) +
                       "; fcb reads IR versions " + std::to_string(kMinIrVersion) + " to " +
                       std::to_string(kMaxIrVersion));
  FCB_ASSIGN_OR_RETURN(model_opset_, DefaultOpset(m_));
  // Nodes of older models that pass OldOpsetProblem mean what they mean at 7.
  s_.opset = std::max(model_opset_, kBaseOpset);
  for (const auto& o : m_.opset_import())
    if (o.domain() == ops::domain::kMicrosoft) microsoft_opset_ = o.version();
  if (!m_.has_graph()) return InvalidArgument("model has no graph");
  if (g_.output_size() == 0) return InvalidArgument("model graph has no outputs");
  return Status::Ok();
}

Status Importer::AddInitializers() {
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

Status Importer::AddInputs() {
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
  FCB_RETURN_IF_ERROR(BindSymbols(runtime));
  if (opts_.kv_capacity > 0) FCB_RETURN_IF_ERROR(FixKvCapacity(runtime));
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
      if (shape_given != opts_.input_shapes.end() &&
          shape_given->second != std::vector<ir::InputDim>(given->second->shape.begin(), given->second->shape.end()))
        return InvalidArgument("input_values['" + name + "'] has shape " + ir::ShapeToString(given->second->shape) +
                               " but input_shapes gives " + DimsText(shape_given->second) +
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
  s_.dynamic = s_.g.dynamic();
  return Status::Ok();
}

// Every input's entry (input_values first: a value fixes its input's dims)
// binds the symbols of the dims the model leaves free. A symbol is one size
// at run time, so two entries must agree on it; a range on a dim the model
// fixes is refused here too. Rank and fixed-size contradictions are refused
// per input (DeclaredInputShape, FitInputValue), so they are skipped here.
Status Importer::BindSymbols(const std::vector<const onnx::ValueInfoProto*>& inputs) {
  for (const auto* vi : inputs) {
    const std::string& name = vi->name();
    if (!vi->type().has_tensor_type()) continue;
    const auto& tt = vi->type().tensor_type();
    std::vector<ir::InputDim> dims;
    bool from_value = false;
    if (auto v = opts_.input_values.find(name); v != opts_.input_values.end() && v->second) {
      dims.assign(v->second->shape.begin(), v->second->shape.end());
      from_value = true;
    } else if (auto sh = opts_.input_shapes.find(name); sh != opts_.input_shapes.end()) {
      dims = sh->second;
    } else {
      continue;
    }
    if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(dims.size())) continue;
    const std::string entry = from_value ? "input_values['" + name + "']" : ShapeEntry(name, dims);
    for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
      const auto* d = tt.has_shape() ? &tt.shape().dim(i) : nullptr;
      const ir::InputDim& x = dims[i];
      if (FixedByModel(d)) {
        if (x.is_range()) {
          std::vector<ir::InputDim> fixed = dims;
          fixed[i] = d->dim_value();
          return InvalidArgument(ShapeEntry(name, dims) + " gives dim " + std::to_string(i) + " of input '" + name +
                                 "' the range " + SizeText(x.lo, x.hi) + ", but the model fixes that dim to " +
                                 std::to_string(d->dim_value()) + "; give it that size, e.g. " +
                                 ShapeEntry(name, fixed));
        }
        continue;
      }
      if (x.lo < 0 || x.lo > x.hi) continue;  // refused with the input's shape (DeclaredInputShape)
      const std::string sym = SymbolOf(name, d, i);
      auto [it, fresh] = bounds_.emplace(sym, Bound{x.lo, x.hi, name, i, from_value});
      const Bound& b = it->second;
      if (fresh || (b.lo == x.lo && b.hi == x.hi)) continue;
      const std::string first = b.from_value ? "input_values['" + b.input + "']"
                                             : ShapeEntry(b.input, opts_.input_shapes.at(b.input));
      return InvalidArgument(entry + " gives dim " + std::to_string(i) + " of input '" + name + "' ('" + sym +
                             "') " + SizeText(x.lo, x.hi) + ", but " + first + " gives dim " + std::to_string(b.dim) +
                             " of input '" + b.input + "' " + SizeText(b.lo, b.hi) + ": both are the symbol '" + sym +
                             "', which is one size at run time; give it the same size or range in both (a size or "
                             "range given in one input applies to every input using the symbol)");
    }
  }
  return Status::Ok();
}

Status Importer::FixKvCapacity(const std::vector<const onnx::ValueInfoProto*>& inputs) {
  const int64_t n = opts_.kv_capacity;
  std::map<std::string, std::string> past;  // input -> the GroupQueryAttention node reading it as a past
  for (const auto& node : g_.node())
    if (node.op_type() == "GroupQueryAttention" && node.domain() == "com.microsoft")
      for (int i : {3, 4})
        if (node.input_size() > i && !node.input(i).empty()) past.emplace(node.input(i), node.name());
  for (const auto* vi : inputs) {
    auto it = past.find(vi->name());
    if (it == past.end() || !vi->type().has_tensor_type()) continue;
    const std::string& name = vi->name();
    const auto& tt = vi->type().tensor_type();
    const std::string where = "kv_capacity " + std::to_string(n) + ": input '" + name +
                              "' (a past of com.microsoft.GroupQueryAttention node '" + it->second + "') ";
    if (!tt.has_shape() || tt.shape().dim_size() != 4)
      return InvalidArgument(where + "must be 4-D [batch, kv_heads, past, head] in the model");
    const auto* d = &tt.shape().dim(2);
    if (FixedByModel(d)) {
      if (d->dim_value() == n) continue;
      return InvalidArgument(where + "has its sequence dim fixed to " + std::to_string(d->dim_value()) +
                             " by the model (a static buffer); give kv_capacity " + std::to_string(d->dim_value()) +
                             " or leave kv_capacity out (\"state\" alone binds a static buffer)");
    }
    bounds_[SymbolOf(name, d, 2)] = Bound{n, n, name, 2, false};
  }
  // A growing cache of the plain exporters' form (present = Concat(past, new,
  // axis 2)): the past is the valid rows of a State buffer of N rows, so its
  // length is chosen at each run, 0..N (from the State's valid length; the
  // compiler rewrites the Concat into an in-place append, KvAppend).
  std::set<std::string> concat_past;
  for (const auto& node : g_.node()) {
    if (node.op_type() != "Concat" || !(node.domain().empty() || node.domain() == "ai.onnx") ||
        node.input_size() != 2)
      continue;
    int64_t axis = 0;
    for (const auto& a : node.attribute())
      if (a.name() == "axis") axis = a.i();
    if (axis == 2 || axis == -2) concat_past.insert(node.input(0));
  }
  for (const auto* vi : inputs) {
    if (!concat_past.count(vi->name()) || past.count(vi->name()) || !vi->type().has_tensor_type()) continue;
    const auto& tt = vi->type().tensor_type();
    if (!tt.has_shape() || tt.shape().dim_size() != 4) continue;
    const auto* d = &tt.shape().dim(2);
    if (FixedByModel(d)) continue;
    bounds_[SymbolOf(vi->name(), d, 2)] = Bound{0, n, vi->name(), 2, false};
  }
  return Status::Ok();
}

// `value` for input `name` as a constant of `dtype` and shape `shape`:
// `declared` is the model's shape for it (-1 = any size). Refuses a rank or
// dim that contradicts the model, and an element the type cannot hold.
Result<ir::TensorPtr> Importer::FitInputValue(const std::string& name, const ir::TensorData& value, ir::DType dtype,
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
Result<ir::Shape> Importer::InputShape(const onnx::ValueInfoProto& vi) {
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

// Each dim: the model's size where it fixes one; else the size or the upper
// bound of the range its symbol is bound to (BindSymbols), recorded in
// Graph::symbols. A free dim no entry binds is refused, saying how to fix or
// bound it.
Result<ir::Shape> Importer::DeclaredInputShape(const onnx::ValueInfoProto& vi) {
  const std::string& name = vi.name();
  const auto& tt = vi.type().tensor_type();
  auto given = opts_.input_shapes.find(name);
  const bool has_given = given != opts_.input_shapes.end();
  if (has_given)
    for (const ir::InputDim& d : given->second) {
      if (d.lo < 0) return InvalidArgument(ShapeEntry(name, given->second) + ": dims must not be negative");
      if (d.lo > d.hi)
        return InvalidArgument(ShapeEntry(name, given->second) + " has the range " + SizeText(d.lo, d.hi) +
                               ", whose low end is above its high end; write it " + SizeText(d.hi, d.lo));
    }
  const int rank = tt.has_shape() ? tt.shape().dim_size() : has_given ? static_cast<int>(given->second.size()) : -1;
  if (rank < 0)
    return InvalidArgument("input '" + name + "' has no shape in the model; give it one in input_shapes, e.g. " +
                           ShapeEntry(name, {1, 3, 224, 224}));
  if (has_given && static_cast<int>(given->second.size()) != rank)
    return InvalidArgument(ShapeEntry(name, given->second) + " has rank " +
                           std::to_string(given->second.size()) + ", but the model's input has rank " +
                           std::to_string(rank));
  ir::Shape shape;
  for (int i = 0; i < rank; ++i) {
    const auto* d = tt.has_shape() ? &tt.shape().dim(i) : nullptr;
    if (FixedByModel(d)) {
      if (has_given && given->second[i] != ir::InputDim(d->dim_value()))
        return InvalidArgument(ShapeEntry(name, given->second) + " contradicts the model: dim " +
                               std::to_string(i) + " is fixed to " +
                               std::to_string(d->dim_value()));
      shape.push_back(d->dim_value());
      continue;
    }
    const std::string sym = SymbolOf(name, d, i);
    auto bound = bounds_.find(sym);
    if (bound == bounds_.end()) {
      // Suggest full shapes: the fixed dims, what binds the other free ones
      // (else 1), and this dim fixed to 1 or bounded to 1..512.
      // (The model gives this input a shape: without one every dim is bound.)
      std::vector<ir::InputDim> fixed;
      for (int k = 0; k < rank; ++k) {
        const auto* e = &tt.shape().dim(k);
        auto b = bounds_.find(SymbolOf(name, e, k));
        if (FixedByModel(e) && e->dim_value() > 0) fixed.push_back(e->dim_value());
        else if (b != bounds_.end()) fixed.push_back({b->second.lo, b->second.hi});
        else fixed.push_back(1);
      }
      std::vector<ir::InputDim> ranged = fixed;
      ranged[i] = {1, 512};
      const std::string kind = d->has_dim_param() ? "symbolic dim " + std::to_string(i) + " ('" +
                                                        d->dim_param() + "')"
                                                  : "unknown dim " + std::to_string(i);
      return InvalidArgument("input '" + name + "' has " + kind + "; fix it in input_shapes, e.g. " +
                             ShapeEntry(name, fixed) + ", or bound it, e.g. " + ShapeEntry(name, ranged) +
                             " (with the dims you need)");
    }
    // The bound: the size of a fixed symbol, the upper end of a range.
    shape.push_back(bound->second.hi);
    auto sym_it = std::find_if(s_.g.symbols.begin(), s_.g.symbols.end(),
                               [&](const ir::SymbolBinding& b) { return b.name == sym; });
    if (sym_it == s_.g.symbols.end()) {
      s_.g.symbols.push_back({sym, bound->second.lo, bound->second.hi, {}});
      sym_it = std::prev(s_.g.symbols.end());
    }
    sym_it->uses.push_back({name, i});
  }
  return shape;
}

Status Importer::AddOutputs() {
  std::set<int> seen;
  for (const auto& o : g_.output()) {
    auto it = s_.by_name.find(o.name());
    if (it == s_.by_name.end() || !s_.value(it->second).has_shape)
      return InvalidArgument("graph output '" + o.name() + "' is not produced by any node");
    s_.g.outputs.push_back(it->second);
  }
  return Status::Ok();
}

// The name a node is known by in messages (as ir::Node::Describe words it).
std::string Importer::NodeLabel(const onnx::GraphProto& g, int i) {
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
Result<std::vector<int>> Importer::TopologicalOrder(const onnx::GraphProto& g) {
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
int Importer::Lookup(const Scope* scope, const std::string& name) const {
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
Result<int> Importer::Define(Scope* scope, const std::string& name) {
  if (!scope) return s_.AddNamed(name);
  if (scope->names.count(name))
    return InvalidArgument("value '" + name + "' is defined more than once in a subgraph");
  const int id = s_.AddTemp(scope->prefix + name);
  scope->names[name] = id;
  return id;
}

Status Importer::AddNode(const onnx::NodeProto& p, int index, Scope* scope) {
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
  if (n.domain == ops::domain::kMicrosoft) {
    // ONNX Runtime's contrib operators: the registry names them
    // "com.microsoft.<op_type>" (ops/names.h), from canonicalization on.
    n.op_type = ops::RegistryName(n.domain, n.op_type);
    n.domain.clear();
    // Every com.microsoft operator is at version 1; another version would be
    // read with meanings fcb does not know.
    if (microsoft_opset_ > 1) {
      s_.unsupported.push_back(n.Describe() + ": the model imports opset " + std::to_string(microsoft_opset_) +
                               " of domain 'com.microsoft'; fcb knows its operators at version 1");
      for (int o : n.outputs) s_.MarkUnknown(o);
      return Status::Ok();
    }
  }
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

namespace {

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