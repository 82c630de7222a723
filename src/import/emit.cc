// ImportState: naming, and per-node shape inference + constant folding.
#include <algorithm>

#include "import/import_state.h"
#include "ops/op.h"

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
  std::shared_ptr<ir::TensorData> t;
  if (n.op_type == "Size") {
    t = ir::TensorData::FromInts({}, {ir::NumElements(in.shape)});
  } else {
    const int64_t r = static_cast<int64_t>(in.shape.size());
    auto clamp = [r](int64_t a) { return std::clamp(a < 0 ? a + r : a, int64_t{0}, r); };
    const int64_t start = clamp(n.GetInt("start", 0)), end = clamp(n.GetInt("end", r));
    std::vector<int64_t> dims;
    for (int64_t i = start; i < end; ++i) dims.push_back(in.shape[i]);
    t = ir::TensorData::FromInts({static_cast<int64_t>(dims.size())}, dims);
  }
  ir::Value& out = g.values[n.outputs[0]];
  out.dtype = t->dtype;
  out.shape = t->shape;
  out.has_shape = true;
  out.constant = std::move(t);
  return true;
}

Status ImportState::Emit(ir::Node n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") {
    RecordUnsupported(n, "operator domain '" + n.domain + "' is not supported");
    return Status::Ok();
  }
  n.domain.clear();
  if (FoldShapeOrSize(n)) return Status::Ok();
  const ops::OpDef* def = ops::FindOp(n.op_type);
  if (!def || def->internal) {
    RecordUnsupported(n, "operator " + n.op_type + " is not supported (`fcb ops` lists those that are)");
    return Status::Ok();
  }
  bool inputs_known = true, all_const = true, any_input = false;
  for (int i : n.inputs) {
    if (i < 0) continue;
    any_input = true;
    inputs_known = inputs_known && Known(i);
    all_const = all_const && value(i).is_constant();
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
    consts[k] = v.constant.get();
  }
  const ops::Attrs attrs = ops::AttrsFromNode(n);
  const int num_out = static_cast<int>(n.outputs.size());
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
  g.nodes.push_back(std::move(n));
  return Status::Ok();
}

}  // namespace fcb::import
