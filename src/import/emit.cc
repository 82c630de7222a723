// ImportState: naming, and per-node shape inference + constant folding.
#include <algorithm>
#include <set>

#include "import/import_state.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace fcb::import {

std::string ImportState::FreshName(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
  names_.insert(name);
  return name;
}

int ImportState::AddConst(const std::string& base, ir::TensorPtr t) {
  ir::Value v;
  v.name = FreshName(base);
  v.dtype = t->dtype;
  v.shape = t->shape;
  v.has_shape = true;
  v.constant = std::move(t);
  return g.AddValue(std::move(v));
}

int ImportState::AddTemp(const std::string& base) {
  ir::Value v;
  v.name = FreshName(base);
  return g.AddValue(std::move(v));
}

Result<int> ImportState::AddNamed(const std::string& name) {
  if (by_name.count(name))
    return InvalidArgument("value '" + name + "' is defined more than once");
  names_.insert(name);
  ir::Value v;
  v.name = name;
  int id = g.AddValue(std::move(v));
  by_name[name] = id;
  return id;
}

void ImportState::MarkUnknown(int id) {
  if (id < 0) return;
  if (unknown_.size() <= static_cast<size_t>(id)) unknown_.resize(id + 1, false);
  unknown_[id] = true;
}

void ImportState::RecordUnsupported(const ir::Node& n, const std::string& why) {
  unsupported.push_back(n.Describe() + (why.empty() ? "" : ": " + why));
  for (int o : n.outputs) MarkUnknown(o);
}

// Shape and Size of a statically shaped value are constants whatever the op
// registry offers; this is what makes exported shape arithmetic static.
bool ImportState::FoldShapeOrSize(const ir::Node& n) {
  if ((n.op_type != "Shape" && n.op_type != "Size") || n.inputs.size() != 1 ||
      n.outputs.size() != 1 || n.inputs[0] < 0)
    return false;
  const ir::Value& in = value(n.inputs[0]);
  if (!Known(n.inputs[0]) || !in.has_shape) return false;
  const std::vector<int64_t> v = ops::ShapeOpValues(n.op_type, ops::AttrsFromNode(n), in.shape);
  std::shared_ptr<ir::TensorData> t = n.op_type == "Size"
                                          ? ir::TensorData::FromInts({}, v)
                                          : ir::TensorData::FromInts({static_cast<int64_t>(v.size())}, v);
  ir::Value& out = g.values[n.outputs[0]];
  out.dtype = t->dtype;
  out.shape = t->shape;
  out.has_shape = true;
  // With ranges, the shape of a computed value may change from run to run:
  // the node stays, and its contents at the bound serve shape inference.
  if (dynamic && !in.is_constant()) {
    out.shape_value = std::move(t);
    g.nodes.push_back(n);
    return true;
  }
  out.constant = std::move(t);
  return true;
}

// How an operator treats half-precision (float16, bfloat16) inputs. Most
// compute in float32 (EmitInFloat32), as ONNX Runtime's CPU provider does;
// chains of them hand float32 values to each other, so a tensor is rounded
// only where it is a graph output or is read by an operator that keeps half
// precision.
enum class HalfRule {
  kFloat32,  // arithmetic: always in float32
  kMoves,    // moves or selects elements: in float32 when its inputs already are
  kKeeps,    // output type set by an attribute or by the input's type alone: as given
};
static HalfRule HalfRuleOf(const std::string& op) {
  static const std::set<std::string, std::less<>> kMoves = {
      "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
      "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Expand", "Tile", "Pad",
      "DepthToSpace", "SpaceToDepth", "Compress", "ReverseSequence", "Trilu", "Where", "MaxPool",
      "ReduceMax", "ReduceMin", "Relu"};
  static const std::set<std::string, std::less<>> kKeeps = {
      "Cast", "CastLike", "Shape", "Size", "EyeLike", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
      "Multinomial", "ConstantOfShape", "OneHot", "Optional", "SequenceAt", "SplitToSequence",
      "ConcatFromSequence"};
  if (kMoves.count(op)) return HalfRule::kMoves;
  if (kKeeps.count(op)) return HalfRule::kKeeps;
  return HalfRule::kFloat32;
}

// The half-precision type of `n`'s floating inputs when they are all one
// (float16 or bfloat16) and at least one is; kUndefined otherwise.
static DType HalfInputType(const std::vector<ops::TensorInfo>& infos, const std::vector<int>& inputs) {
  DType half = DType::kUndefined;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (inputs[k] < 0) continue;
    const DType t = infos[k].dtype;
    if (t != DType::kF16 && t != DType::kBF16) continue;
    if (half != DType::kUndefined && half != t) return DType::kUndefined;
    half = t;
  }
  return half;
}

bool ImportState::WidenToFloat32(const ir::Node& n, const std::vector<ops::TensorInfo>& infos) const {
  const DType half = HalfInputType(infos, n.inputs);
  if (half == DType::kUndefined) return false;
  switch (HalfRuleOf(n.op_type)) {
    case HalfRule::kFloat32: return true;
    case HalfRule::kKeeps: return false;
    case HalfRule::kMoves: break;
  }
  bool any = false;
  for (size_t k = 0; k < infos.size(); ++k) {
    if (n.inputs[k] < 0 || infos[k].dtype != half || value(n.inputs[k]).is_constant()) continue;
    if (!float32_source_.count(n.inputs[k])) return false;
    any = true;
  }
  return any;
}

Result<bool> ImportState::EmitInFloat32(const ir::Node& n, const ops::OpDef& def,
                                        const std::vector<ops::TensorInfo>& infos, const ops::Attrs& attrs) {
  const DType half = HalfInputType(infos, n.inputs);
  if (half == DType::kUndefined) return false;
  // Would the float32 form infer? Decide before anything is emitted.
  std::vector<ops::TensorInfo> wide = infos;
  for (size_t k = 0; k < wide.size(); ++k)
    if (n.inputs[k] >= 0 && wide[k].dtype == half) wide[k].dtype = DType::kF32;
  std::vector<const ir::TensorData*> consts(n.inputs.size(), nullptr);
  std::vector<std::shared_ptr<ir::TensorData>> widened;  // constant inputs, as the Casts will fold them
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] < 0 || !value(n.inputs[k]).is_constant()) continue;
    const ir::TensorData& c = *value(n.inputs[k]).constant;
    if (infos[k].dtype == half && c.numel() <= kMaxFoldElements) {
      auto f = ir::TensorData::Make(DType::kF32, c.shape);
      for (int64_t i = 0; i < c.numel(); ++i) f->mutable_data<float>()[i] = static_cast<float>(c.GetDouble(i));
      widened.push_back(f);
      consts[k] = f.get();
    } else if (infos[k].dtype != half) {
      consts[k] = &c;
    }
  }
  std::vector<ops::TensorInfo> outs;
  ops::InferContext ctx{n.op_type, attrs, wide, consts, static_cast<int>(n.outputs.size())};
  if (!ops::InferOutputs(def, ctx, &outs).ok()) return false;

  auto cast = [&](int from, DType to, int into) -> Status {
    ir::Node c;
    c.name = FreshName(n.name + (to == DType::kF32 ? "/to_float32" : "/to_" + std::string(DTypeName(to))));
    c.op_type = "Cast";
    c.inputs = {from};
    c.outputs = {into};
    c.SetInt("to", static_cast<int64_t>(to));
    return Emit(std::move(c));
  };
  ir::Node w = n;
  w.name = n.name;  // the node keeps its name; the Casts around it get derived ones
  for (size_t k = 0; k < w.inputs.size(); ++k) {
    if (w.inputs[k] < 0 || infos[k].dtype != half) continue;
    if (auto it = float32_source_.find(w.inputs[k]); it != float32_source_.end()) {
      w.inputs[k] = it->second;
      continue;
    }
    const int f = AddTemp(value(w.inputs[k]).name + "/float32");
    FCB_RETURN_IF_ERROR(cast(w.inputs[k], DType::kF32, f));
    w.inputs[k] = f;
  }
  // Float32 results are the model's half-precision tensors: computed into a
  // float32 temporary, then rounded into the model's value.
  std::vector<std::pair<int, int>> narrow;
  for (size_t k = 0; k < w.outputs.size(); ++k) {
    if (outs[k].dtype != DType::kF32) continue;
    const int f = AddTemp(value(w.outputs[k]).name + "/float32");
    narrow.emplace_back(f, w.outputs[k]);
    w.outputs[k] = f;
  }
  FCB_RETURN_IF_ERROR(Emit(std::move(w)));
  for (auto [f, o] : narrow) FCB_RETURN_IF_ERROR(cast(f, half, o));
  return true;
}

Status ImportState::Emit(ir::Node n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") {
    RecordUnsupported(n, "operator domain '" + n.domain + "' is not supported");
    return Status::Ok();
  }
  n.domain.clear();
  if (FoldShapeOrSize(n)) return Status::Ok();
  // Cast(float32 -> half) then Cast(half -> float32): the second reads the
  // float32 value (ONNX Runtime removes such pairs too).
  if (n.op_type == "Cast" && n.inputs.size() == 1 && n.inputs[0] >= 0 &&
      n.GetInt("to", 0) == static_cast<int64_t>(DType::kF32)) {
    if (auto it = float32_source_.find(n.inputs[0]); it != float32_source_.end()) {
      n.op_type = "Identity";
      n.attrs.clear();
      n.inputs[0] = it->second;
    }
  }
  const ops::OpDef* def = ops::FindOp(n.op_type);
  if (!def || def->internal) {
    RecordUnsupported(n, "operator " + n.op_type + " is not supported (`fcb ops` lists those that are)");
    return Status::Ok();
  }
  bool inputs_known = true, all_const = true, any_input = false, all_known = true, any_shape_value = false;
  for (int i : n.inputs) {
    if (i < 0) continue;
    any_input = true;
    inputs_known = inputs_known && Known(i);
    all_const = all_const && value(i).is_constant();
    all_known = all_known && value(i).known() != nullptr;
    any_shape_value = any_shape_value || (!value(i).is_constant() && value(i).shape_value);
  }
  if (!inputs_known) {  // downstream of an unsupported node: nothing to infer
    for (int o : n.outputs) MarkUnknown(o);
    return Status::Ok();
  }

  std::vector<ops::TensorInfo> infos(n.inputs.size());
  std::vector<const ir::TensorData*> consts(n.inputs.size(), nullptr);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] < 0) continue;
    const ir::Value& v = value(n.inputs[k]);
    infos[k] = ops::TensorInfo{v.dtype, v.shape};
    consts[k] = v.known();
  }
  const ops::Attrs attrs = ops::AttrsFromNode(n);
  const int num_out = static_cast<int>(n.outputs.size());
  if (WidenToFloat32(n, infos)) {
    auto widened = EmitInFloat32(n, *def, infos, attrs);
    if (!widened.ok()) return widened.TakeStatus();
    if (widened.value()) return Status::Ok();
  }
  std::vector<ops::TensorInfo> outs;
  ops::InferContext ctx{n.op_type, attrs, infos, consts, num_out};
  Status st = ops::InferOutputs(*def, ctx, &outs);
  if (!st.ok()) {
    if (st.code() == StatusCode::kUnsupported) {
      RecordUnsupported(n, st.message());
      return Status::Ok();
    }
    return std::move(st).Annotate(n.Describe());
  }
  int64_t out_elems = 0;
  for (int k = 0; k < num_out; ++k) {
    ir::Value& v = g.values[n.outputs[k]];
    v.dtype = outs[k].dtype;
    v.shape = outs[k].shape;
    v.has_shape = true;
    out_elems = std::max(out_elems, outs[k].numel());
  }

  if (any_input && all_const && out_elems <= kMaxFoldElements && !ir::IsWeightDequantize(g, n)) {
    auto folded = ops::Evaluate(n.op_type, attrs, consts, num_out);
    if (folded.ok()) {
      for (int k = 0; k < num_out; ++k) g.values[n.outputs[k]].constant = std::move(folded.value()[k]);
      return Status::Ok();
    }
    // An op the generic kernels cannot evaluate for these dtypes stays a node
    // (the runtime reports it, with its own context); anything else is a bug
    // or a bad model and must not be hidden.
    if (folded.status().code() != StatusCode::kUnsupported)
      return folded.TakeStatus().Annotate(n.Describe() + ": constant folding");
  }
  // Computed from symbolic dims (and constants): kept as a node, its small
  // contents at the bound kept for the shape inference of its readers.
  if (any_shape_value && all_known && !IsRandomOp(n.op_type)) {
    int64_t out_bytes = 0;
    for (int k = 0; k < num_out; ++k)
      out_bytes += outs[k].numel() * static_cast<int64_t>(ir::DTypeSize(outs[k].dtype));
    if (out_bytes <= static_cast<int64_t>(ops::kMaxInferConstantBytes)) {
      auto known = ops::Evaluate(n.op_type, attrs, consts, num_out);
      if (known.ok()) {
        for (int k = 0; k < num_out; ++k) g.values[n.outputs[k]].shape_value = std::move(known.value()[k]);
      } else if (known.status().code() != StatusCode::kUnsupported) {
        return known.TakeStatus().Annotate(n.Describe() + ": evaluating it at the bound");
      }
    }
  }
  // A float32 value rounded to half precision: a reader that computes in
  // float32 reads the float32 value instead.
  if (n.op_type == "Cast" && value(n.inputs[0]).dtype == DType::kF32 &&
      (outs[0].dtype == DType::kF16 || outs[0].dtype == DType::kBF16))
    float32_source_[n.outputs[0]] = n.inputs[0];
  g.nodes.push_back(std::move(n));
  return Status::Ok();
}

}  // namespace fcb::import
