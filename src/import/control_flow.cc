// Control flow (docs/design.md, "Control flow"): If, Loop and Scan never
// become graph nodes. Their subgraphs are imported in place (a Loop's or
// Scan's body once per iteration) under a Scope that gives every value made
// there a fresh name, and the node's outputs become Identity copies of the
// subgraph's results (removed by the passes).
#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "fcb/limits.h"
#include "import/import_state.h"
#include "import/onnx_importer.h"
#include "import/tensor_proto.h"

namespace fcb::import {
namespace {

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

}  // namespace

// Appends the outer-scope names `p`'s subgraphs read (nested ones included):
// the names their nodes read and their outputs name that the subgraph does
// not define itself (as an input, an initializer or a node output). A name a
// subgraph defines is local to it even when an outer value has the same name,
// as the If outputs of a merged decoder's branches typically do; counting it
// as a read would make the If its own input.
void Importer::SubgraphReads(const onnx::NodeProto& p, std::vector<std::string>* out) {
  for (const auto& a : p.attribute()) {
    auto add = [&](const onnx::GraphProto& sg) {
      std::unordered_set<std::string> local;
      for (const auto& i : sg.input()) local.insert(i.name());
      for (const auto& t : sg.initializer()) local.insert(t.name());
      for (const auto& n : sg.node()) local.insert(n.output().begin(), n.output().end());
      std::vector<std::string> reads;
      for (const auto& n : sg.node()) {
        reads.insert(reads.end(), n.input().begin(), n.input().end());
        SubgraphReads(n, &reads);
      }
      for (const auto& o : sg.output()) reads.push_back(o.name());  // an output may name an outer value
      for (auto& r : reads)
        if (!r.empty() && !local.count(r)) out->push_back(std::move(r));
    };
    if (a.has_g()) add(a.g());
    for (const auto& sg : a.graphs()) add(sg);
  }
}

// Imports `g` (a subgraph of `owner`) in a new scope under `parent`, its
// inputs bound to `inputs`; returns the values of its outputs.
Result<std::vector<int>> Importer::InlineGraph(const onnx::GraphProto& g, const ir::Node& owner, const Scope* parent,
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
Result<int> Importer::EmitOp(const std::string& name, const std::string& op, std::vector<int> inputs,
                             std::map<std::string, ir::Attribute, std::less<>> attrs, int out) {
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

ir::Attribute Importer::IntAttr(int64_t v) {
  ir::Attribute a;
  a.kind = ir::Attribute::Kind::kInt;
  a.i = v;
  return a;
}

// Stacks `parts` along a new axis `axis` into `out` (Unsqueeze + Concat).
Status Importer::Stack(const std::string& name, const std::vector<int>& parts, int64_t axis, int out) {
  const int axes = s_.AddConst(name + "/axes", ir::TensorData::FromInts({1}, {axis}));
  if (parts.size() == 1) return EmitOp(name + "/unsqueeze", "Unsqueeze", {parts[0], axes}, {}, out).status();
  std::vector<int> rows;
  for (int v : parts) {
    FCB_ASSIGN_OR_RETURN(int r, EmitOp(name + "/unsqueeze", "Unsqueeze", {v, axes}));
    rows.push_back(r);
  }
  return EmitOp(name + "/concat", "Concat", rows, {{"axis", IntAttr(axis)}}, out).status();
}

Status Importer::Copy(const ir::Node& n, int from, int to) {
  return EmitOp(n.name + "/output", "Identity", {from}, {}, to).status();
}

// The single boolean/integer element of a constant condition or count.
bool Importer::ScalarValue(const ir::Value& v, int64_t* out) {
  if (!v.is_constant() || v.constant->numel() != 1) return false;
  *out = v.constant->dtype == ir::DType::kBool ? v.constant->bytes[0] : v.constant->ToInts()[0];
  return true;
}

Status Importer::ExpandIf(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope) {
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

Status Importer::ExpandLoop(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope) {
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
Result<std::vector<int>> Importer::UnrollScan(const onnx::NodeProto& p, const ir::Node& n, const onnx::GraphProto& body,
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

Status Importer::ExpandScan(const onnx::NodeProto& p, const ir::Node& n, const Scope* scope) {
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

}  // namespace fcb::import
