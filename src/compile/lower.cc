#include "compile/lower.h"

#include <climits>
#include <cstring>
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "compile/memory_plan.h"
#include "core/fault.h"
#include "core/half.h"
#include "ops/lowering.h"
#include "ops/op.h"
#include "ops/plan_check.h"
#include "ops/symbolic_plan.h"

namespace fcb::compile {
namespace {

using format::ContextDesc;
using format::Storage;
using format::TensorDesc;
using ir::Graph;
using ir::Node;

// The rules registered for each graph op (OpDef::lowerings), highest
// priority first.
const std::map<std::string, std::vector<const ops::OpDef::Lowering*>, std::less<>>& RulesByOp() {
  static const auto kRules = [] {
    std::map<std::string, std::vector<const ops::OpDef::Lowering*>, std::less<>> m;
    for (const ops::OpDef& d : ops::AllOps())
      for (const auto& l : d.lowerings) m[std::string(l.from)].push_back(&l);
    for (auto& [op, v] : m)
      std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->priority > b->priority; });
    return m;
  }();
  return kRules;
}

class Lowerer final : public ops::LowerContext {
 public:
  Lowerer(const Graph& g, const LowerOptions& o, format::WeightPoolBuilder& pool)
      : g_(g), opt_(o), uses_(g), pool_(pool), tensor_of_(g.values.size(), -1) {
    target_.target = o.target;
    target_.optimization_level = o.options.optimization_level;
    target_.precision = ops::ParsePrecision(o.options.precision).value_or(ops::Precision::kFp32);
  }

  Result<ContextDesc> Run(const std::string& method) {
    ctx_.method = method;
    ctx_.target = TargetName(opt_.target);
    ctx_.options = OptionsToJson(opt_.options);
    for (int v : g_.inputs) ctx_.inputs.push_back(Value(v));
    if (fault::Hit(fault::Kind::kContext, TargetName(opt_.target)))
      return ResourceExhausted("cannot create the compile context (injected fault)");
    claimed_.assign(g_.nodes.size(), false);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (claimed_[i]) continue;
      Status s = LowerNode(static_cast<int>(i));
      if (s.ok() && !error_.ok()) s = std::move(error_);
      if (!s.ok()) return s.Annotate(g_.nodes[i].Describe());
    }
    for (int v : g_.outputs) ctx_.outputs.push_back(OutputTensor(v));
    FoldNchwTransposes();
    RecordSymbols();
    PlanArena();
    FCB_RETURN_IF_ERROR(CheckPlan());
    return std::move(ctx_);
  }

  // ops::LowerContext
  const Graph& graph() const override { return g_; }
  const ops::LowerTarget& target() const override { return target_; }

  int32_t Value(int v) override {
    if (v < 0) return -1;
    if (tensor_of_[v] >= 0) return tensor_of_[v];
    const ir::Value& val = g_.values[v];
    if (val.is_constant()) {
      tensor_of_[v] = AddWeightTensor(val.name, val.dtype, val.shape, val.constant->bytes.data(),
                                      val.constant->bytes.size());
    } else {
      tensor_of_[v] = AddArenaTensor(val);
    }
    return tensor_of_[v];
  }

  int32_t Floats(const std::string& name, const std::vector<float>& v) override {
    return AddWeightTensor(name, ir::DType::kF32, {static_cast<int64_t>(v.size())}, v.data(),
                           v.size() * sizeof(float));
  }

  int32_t Weights(const std::string& name, ir::DType dtype, const void* data, int64_t count) override {
    return AddWeightTensor(name, dtype, {count}, data, static_cast<uint64_t>(count) * ir::DTypeSize(dtype));
  }

  int32_t PackedWeights(const std::string& name, const std::vector<float>& v) override {
    if (!target_.bf16_weights()) return Floats(name, v);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToBFloat16(v[i]);
    return AddWeightTensor(name, ir::DType::kBF16, {static_cast<int64_t>(h.size())}, h.data(), h.size() * 2);
  }

  void Emit(std::string_view op, const std::string& node_name, std::vector<int32_t> inputs,
            std::vector<int32_t> outputs, std::vector<format::AttrDesc> attrs) override {
    format::StepDesc s;
    s.op = std::string(op);
    s.node = node_name;
    s.inputs = std::move(inputs);
    s.outputs = std::move(outputs);
    s.attrs = std::move(attrs);
    while (!s.inputs.empty() && s.inputs.back() < 0) s.inputs.pop_back();
    ctx_.steps.push_back(std::move(s));
  }

  void Claim(int node) override { claimed_[node] = true; }

  int SoleReader(int v) const override { return uses_.SoleReader(v); }

  const ir::Shape* LowShape(int v) const override {
    if (!opt_.low_shapes || v < 0 || !g_.dynamic()) return nullptr;
    auto it = opt_.low_shapes->find(g_.values[v].name);
    return it == opt_.low_shapes->end() || it->second.size() != g_.values[v].shape.size() ? nullptr : &it->second;
  }

  void AlsoLowerByTheNextRules(std::vector<int64_t> mine, std::vector<int64_t> others) override {
    variant_mine_ = std::move(mine);
    variant_others_ = std::move(others);
    variant_requested_ = true;
  }

 private:
  int32_t AddBlob(const void* data, uint64_t size) {
    if (fault::Hit(fault::Kind::kAlloc, TargetName(opt_.target)) && error_.ok())
      error_ = ResourceExhausted("cannot allocate " + std::to_string(size) + " bytes of weights (injected fault)");
    return opt_.weight_sharing ? pool_.Add(data, size) : pool_.AddUnshared(data, size);
  }

  int32_t AddWeightTensor(const std::string& name, ir::DType dtype, ir::Shape shape,
                          const void* data, uint64_t size) {
    TensorDesc t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.storage = Storage::kWeight;
    t.blob = AddBlob(data, size);
    ctx_.tensors.push_back(std::move(t));
    return static_cast<int32_t>(ctx_.tensors.size()) - 1;
  }

  int32_t AddArenaTensor(const ir::Value& val) {
    TensorDesc t;
    t.name = val.name;
    t.dtype = val.dtype;
    t.shape = val.shape;
    t.storage = Storage::kArena;
    ctx_.tensors.push_back(std::move(t));
    return static_cast<int32_t>(ctx_.tensors.size()) - 1;
  }

  // Outputs live in the arena; a graph output folded to a constant (e.g. a
  // Shape) is copied there from its weight by an Identity step.
  int32_t OutputTensor(int v) {
    if (v < 0 || !g_.values[v].is_constant()) return Value(v);
    const int32_t out = AddArenaTensor(g_.values[v]);
    Emit("Identity", g_.values[v].name + "/constant_output", {Value(v)}, {out}, {});
    return out;
  }

  // The registered rules for the node's op, highest priority first; a node
  // no rule takes becomes one step as it is (ONNX ops and the NHWC pools).
  // A view op (kTraitView: Reshape, Flatten, Squeeze, Unsqueeze, Identity) of an intermediate
  // value into another intermediate value moves no bytes: its output becomes
  // a second tensor over the input's arena bytes (PlanArena gives both one
  // buffer whose lifetime covers both), and no step is emitted.
  bool LowerAsView(const Node& n) {
    const ops::OpDef* def = ops::FindOp(n.op_type);
    if (!def || !(def->traits & ops::kTraitView) || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1)
      return false;

    const int x = n.inputs[0], y = n.outputs[0];
    const ir::Value& xv = g_.values[x];
    const ir::Value& yv = g_.values[y];
    if (xv.is_constant() || yv.is_constant() || xv.dtype != yv.dtype ||
        ir::NumElements(xv.shape) != ir::NumElements(yv.shape))
      return false;
    for (int v : g_.inputs)
      if (v == x) return false;
    for (int v : g_.outputs)
      if (v == x || v == y) return false;
    const int32_t root = Root(Value(x));
    const int32_t out = Value(y);
    if (alias_of_.size() <= static_cast<size_t>(out)) alias_of_.resize(out + 1, -1);
    alias_of_[out] = root;
    // With ranges the view's shape is chosen per run: a step that infers it
    // (and, over the same bytes, copies nothing) stays in the plan.
    if (g_.dynamic()) {
      std::vector<int32_t> in;
      for (int v : n.inputs) in.push_back(Value(v));
      Emit(n.op_type, n.name, std::move(in), {out}, ops::AttrsFromNode(n).list());
    }
    return true;
  }

  // The tensor whose arena bytes `t` uses (itself unless a view).
  int32_t Root(int32_t t) const {
    while (t >= 0 && static_cast<size_t>(t) < alias_of_.size() && alias_of_[t] >= 0) t = alias_of_[t];
    return t;
  }

  // A concatenation (kTraitConcat) along the channels of NHWC float
  // activations, each of whose inputs is the output of a step that nothing
  // else reads and whose op can write a channel slice
  // (OpDef::write_channel_slice: the NHWC convs): those steps write their
  // channels straight into the output and no copy runs. Squeezenet's fire
  // modules and GoogLeNet's inception blocks end this way; the copies were a
  // tenth of squeezenet's time at 2 threads.
  bool LowerConcatInPlace(const Node& n) {
    const ops::OpDef* def = ops::FindOp(n.op_type);
    if (!def || !(def->traits & ops::kTraitConcat) || n.outputs.size() != 1 || n.inputs.size() < 2 ||
        opt_.options.optimization_level == 0 || g_.dynamic())
      return false;
    const ir::Value& yv = g_.values[n.outputs[0]];
    int64_t axis = n.GetInt("axis", 0);
    if (axis < 0) axis += 4;
    if (yv.is_constant() || yv.dtype != ir::DType::kF32 || yv.shape.size() != 4 || axis != 3) return false;
    std::vector<size_t> producers;
    for (int x : n.inputs) {
      if (x < 0 || g_.values[x].is_constant() || uses_.SoleReader(x) < 0 || tensor_of_[x] < 0) return false;
      for (int v : g_.inputs)
        if (v == x) return false;
      const ir::Shape& xs = g_.values[x].shape;
      if (xs.size() != 4 || xs[0] != yv.shape[0] || xs[1] != yv.shape[1] || xs[2] != yv.shape[2]) return false;
      const int32_t t = tensor_of_[x];
      if (Root(t) != t) return false;
      // The step that wrote it: the last one with it as its only output.
      size_t s = ctx_.steps.size();
      while (s > 0 && !(ctx_.steps[s - 1].outputs.size() == 1 && ctx_.steps[s - 1].outputs[0] == t)) --s;
      if (s == 0) return false;
      const ops::OpDef* producer = ops::FindOp(ctx_.steps[s - 1].op);
      format::StepDesc probe = ctx_.steps[s - 1];  // a step that can write a slice?
      if (!producer || !producer->write_channel_slice || !producer->write_channel_slice(&probe, 0, yv.shape[3]))
        return false;
      producers.push_back(s - 1);
    }
    const int32_t y = Value(n.outputs[0]);
    int64_t offset = 0;
    for (size_t i = 0; i < producers.size(); ++i) {
      format::StepDesc& s = ctx_.steps[producers[i]];
      ops::FindOp(s.op)->write_channel_slice(&s, offset, yv.shape[3]);  // true: probed above
      s.outputs[0] = y;
      offset += g_.values[n.inputs[i]].shape[3];
    }
    return true;
  }

  // A Transpose from NCHW to NHWC (the layout pass's) whose output only one
  // step reads, as input 0, and whose op can read NCHW input
  // (OpDef::read_nchw_input: a conv over few input channels, the stem after
  // the model's NCHW image input, whose plane path copies input rows either
  // way): that step reads the NCHW tensor itself and the transpose step goes.
  // Runs on the finished steps, whatever rule lowered the conv.
  void FoldNchwTransposes() {
    if (opt_.options.optimization_level == 0) return;
    std::vector<int> readers(ctx_.tensors.size(), 0);
    for (const auto& st : ctx_.steps)
      for (int32_t t : st.inputs)
        if (t >= 0) ++readers[Root(t)];
    for (int32_t t : ctx_.outputs) readers[Root(t)] += 2;
    std::vector<bool> drop(ctx_.steps.size(), false);
    for (size_t i = 0; i < ctx_.steps.size(); ++i) {
      const format::StepDesc& tr = ctx_.steps[i];
      if (tr.op != "Transpose" || tr.inputs.size() != 1 || tr.outputs.size() != 1) continue;
      const int32_t x = tr.inputs[0], y = tr.outputs[0];
      if (x < 0 || y < 0 || Root(y) != y || readers[y] != 1 || ctx_.tensors[x].dtype != ir::DType::kF32 ||
          ops::Attrs(tr.attrs).GetInts("perm") != std::vector<int64_t>{0, 2, 3, 1})
        continue;
      for (size_t j = i + 1; j < ctx_.steps.size(); ++j) {
        format::StepDesc& conv = ctx_.steps[j];
        if (std::find(conv.inputs.begin(), conv.inputs.end(), y) == conv.inputs.end()) continue;
        const ops::OpDef* def = ops::FindOp(conv.op);
        if (conv.inputs[0] == y && def && def->read_nchw_input &&
            def->read_nchw_input(&conv, ctx_.tensors[x].shape)) {
          conv.inputs[0] = x;
          drop[i] = true;
          // Nothing reads y now; as a view of x (same size) it still lies in the arena.
          if (alias_of_.size() <= static_cast<size_t>(y)) alias_of_.resize(y + 1, -1);
          alias_of_[y] = Root(x);
        }
        break;
      }
    }
    size_t kept = 0;
    for (size_t i = 0; i < ctx_.steps.size(); ++i) {
      if (drop[i]) continue;
      if (kept != i) ctx_.steps[kept] = std::move(ctx_.steps[i]);
      ++kept;
    }
    ctx_.steps.resize(kept);
  }

  Status LowerNode(int i) {
    const Node& n = g_.nodes[i];
    if (LowerAsView(n)) return Status::Ok();
    if (LowerConcatInPlace(n)) return Status::Ok();
    const auto& rules = RulesByOp();
    if (auto it = rules.find(n.op_type); it != rules.end()) {
      for (size_t r = 0; r < it->second.size(); ++r) {
        const size_t first = ctx_.steps.size();
        variant_requested_ = false;
        FCB_ASSIGN_OR_RETURN(bool done, it->second[r]->fn(*this, i));
        if (!done) continue;
        if (!variant_requested_) return Status::Ok();
        // Two variants: this rule's steps, guarded, and the next rules' (or
        // the node as it is), guarded the other way.
        variant_requested_ = false;
        for (size_t s = first; s < ctx_.steps.size(); ++s) ctx_.steps[s].guard = variant_mine_;
        const std::vector<int64_t> others = variant_others_;
        const size_t second = ctx_.steps.size();
        bool lowered = false;
        for (size_t r2 = r + 1; r2 < it->second.size() && !lowered; ++r2) {
          FCB_ASSIGN_OR_RETURN(lowered, it->second[r2]->fn(*this, i));
          variant_requested_ = false;  // one level of variants
        }
        if (!lowered) EmitAsIs(n);
        for (size_t s = second; s < ctx_.steps.size(); ++s) ctx_.steps[s].guard = others;
        return Status::Ok();
      }
    }
    EmitAsIs(n);
    return Status::Ok();
  }

  void EmitAsIs(const Node& n) {
    std::vector<int32_t> in, out;
    for (int v : n.inputs) in.push_back(Value(v));
    for (int v : n.outputs) out.push_back(Value(v));
    Emit(n.op_type, n.name, std::move(in), std::move(out), ops::AttrsFromNode(n).list());
  }

  // The loader's checks (ops/plan_check.h), run on the plan as written: a
  // plan the runtime would refuse is refused here, at compile time.
  class PoolWeights final : public ops::PlanWeights {
   public:
    explicit PoolWeights(const format::WeightPoolBuilder& p) : p_(p) {}
    size_t count() const override { return p_.size(); }
    uint64_t size(int32_t blob) const override { return p_.bytes(blob).size(); }
    const void* data(int32_t blob) const override { return p_.bytes(blob).data(); }
    Status Verify(int32_t, const std::string&) override { return Status::Ok(); }

   private:
    const format::WeightPoolBuilder& p_;
  };

  Status CheckPlan() {
    PoolWeights w(pool_);
    auto checked = ops::CheckPlan(ctx_, w);
    if (!checked.ok()) return Internal("the lowered plan does not check: " + checked.status().message());
    ctx_.scratch_bytes = checked.value().scratch_bytes;
    if (!ctx_.dynamic()) return Status::Ok();
    // A plan with ranges must also hold at other sizes: it is resolved, as a
    // run would, with every symbol at its low end and at its midpoint; a step
    // that cannot take those sizes, or outgrows what was planned at the
    // bound, is refused now rather than at run time. Scratch is the most any
    // of them needs.
    // The shapes the loader works out symbolically (ops::InferSymbolicPlan:
    // what inspect shows, the relations a run is checked against) must
    // agree with every resolution too; the values computed from the shapes
    // come from the program the loader compiles from them
    // (ops::CompileComputedValues), as in a run's resolutions.
    const ops::SymbolicPlan symbolic = ops::InferSymbolicPlan(ctx_, checked.value());
    ops::CompileComputedValues(ctx_, symbolic, &checked.value());
    for (int probe = 0; probe < 2; ++probe) {
      std::vector<int64_t> at;
      std::string where;
      for (const auto& sym : ctx_.symbols) {
        at.push_back(probe == 0 ? sym.lo : sym.lo + (sym.hi - sym.lo) / 2);
        where += (where.empty() ? "" : ", ") + sym.name + " = " + std::to_string(at.back());
      }
      auto resolved = ops::CheckPlan(ctx_, w, &InputShapesAt(at));
      if (!resolved.ok())
        return Unsupported("the plan compiled at the bound does not hold at " + where + ": " +
                           resolved.status().message());
      // The runtime resolves incrementally from the bound (ops::ResolvePlan): it must agree.
      ops::ResolvedPlan incremental;
      Status st = ops::ResolvePlan(ctx_, checked.value(), probe_shapes_, &incremental);
      const std::string diff = st.ok() ? ops::ResolutionDifference(ctx_, resolved.value(), incremental) : st.message();
      if (!diff.empty()) return Internal("the plan resolved from the bound at " + where + " differs: " + diff);
      const std::string sdiff = ops::SymbolicDifference(ctx_, symbolic, at, incremental);
      if (!sdiff.empty()) return Internal("the plan's symbolic shapes disagree at " + where + ": " + sdiff);
      ctx_.scratch_bytes = std::max(ctx_.scratch_bytes, resolved.value().scratch_bytes);
    }
    return Status::Ok();
  }

  // The method inputs' shapes with every symbol at `at` (one size per symbol).
  const std::vector<ir::Shape>& InputShapesAt(const std::vector<int64_t>& at) {
    probe_shapes_.clear();
    size_t k = 0;
    for (int32_t t : ctx_.inputs) {
      ir::Shape s = ctx_.tensors[t].shape;
      for (auto& d : s) {
        const int32_t sym = ctx_.input_symbols[k++];
        if (sym >= 0) d = at[sym];
      }
      probe_shapes_.push_back(std::move(s));
    }
    return probe_shapes_;
  }

  // The graph's ranges (symbols with lo < hi) and which input dims are them.
  void RecordSymbols() {
    if (!g_.dynamic()) return;
    std::vector<int> index(g_.symbols.size(), -1);
    for (size_t k = 0; k < g_.symbols.size(); ++k) {
      const auto& sym = g_.symbols[k];
      if (sym.lo == sym.hi) continue;
      index[k] = static_cast<int>(ctx_.symbols.size());
      ctx_.symbols.push_back({sym.name, sym.lo, sym.hi});
    }
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const std::string& name = g_.values[g_.inputs[i]].name;
      for (size_t d = 0; d < g_.values[g_.inputs[i]].shape.size(); ++d) {
        int32_t sym = -1;
        for (size_t k = 0; k < g_.symbols.size(); ++k)
          for (const auto& u : g_.symbols[k].uses)
            if (u.input == name && u.dim == static_cast<int>(d)) sym = index[k];
        ctx_.input_symbols.push_back(sym);
      }
    }
  }

  // The input and output of a state pair live in the State's buffer (the
  // runtime points both there): no arena bytes. Both or neither: not where
  // another tensor is a view of either (the view's bytes are in the arena).
  void MarkStateTensors() {
    if (opt_.state_pairs.empty()) return;
    std::vector<bool> viewed(ctx_.tensors.size(), false);
    for (size_t t = 0; t < ctx_.tensors.size(); ++t) {
      const int32_t r = Root(static_cast<int32_t>(t));
      if (r != static_cast<int32_t>(t)) viewed[r] = true;
    }
    auto find = [&](const std::vector<int32_t>& list, const std::string& name) -> int32_t {
      for (int32_t t : list)
        if (ctx_.tensors[t].name == name) return t;
      return -1;
    };
    for (const auto& [in_name, out_name] : opt_.state_pairs) {
      const int32_t in = find(ctx_.inputs, in_name), out = find(ctx_.outputs, out_name);
      auto eligible = [&](int32_t t) {
        return t >= 0 && ctx_.tensors[t].storage == Storage::kArena && !viewed[t] && Root(t) == t;
      };
      if (in == out || !eligible(in) || !eligible(out)) continue;
      ctx_.tensors[in].storage = Storage::kState;
      ctx_.tensors[out].storage = Storage::kState;
    }
  }

  void PlanArena() {
    MarkStateTensors();
    const int nsteps = static_cast<int>(ctx_.steps.size());
    std::vector<int> arena_index(ctx_.tensors.size(), -1);
    std::vector<BufferLifetime> bufs;
    auto touch = [&](int32_t t, int step, bool def) {
      if (t < 0 || ctx_.tensors[t].storage != Storage::kArena) return;
      t = Root(t);  // a view's readers keep its input's bytes alive
      if (arena_index[t] < 0) {
        arena_index[t] = static_cast<int>(bufs.size());
        const auto& d = ctx_.tensors[t];
        BufferLifetime b;
        b.bytes = static_cast<uint64_t>(ir::NumElements(d.shape)) * ir::DTypeSize(d.dtype);
        b.first = def ? step : -1;
        b.last = step;
        bufs.push_back(b);
      }
      auto& b = bufs[arena_index[t]];
      b.first = std::min(b.first, step);
      b.last = std::max(b.last, step);
    };
    for (int32_t t : ctx_.inputs) touch(t, -1, true);
    for (int i = 0; i < nsteps; ++i) {
      for (int32_t t : ctx_.steps[i].inputs) touch(t, i, false);
      for (int32_t t : ctx_.steps[i].outputs) touch(t, i, true);
    }
    for (int32_t t : ctx_.outputs) touch(t, nsteps, false);
    // Inputs live through the whole run: an Execution keeps what SetInput
    // gave it, so a caller sets only the inputs that change between runs.
    for (int32_t t : ctx_.inputs) touch(t, nsteps, false);
    MemoryPlan plan = PlanMemory(bufs);
    for (size_t t = 0; t < ctx_.tensors.size(); ++t) {
      const int32_t r = Root(static_cast<int32_t>(t));
      if (arena_index[r] >= 0) ctx_.tensors[t].offset = plan.offsets[arena_index[r]];
    }
    ctx_.arena_bytes = plan.arena_bytes;
  }

  const Graph& g_;
  LowerOptions opt_;
  ops::LowerTarget target_;
  std::vector<bool> claimed_;       // per node: lowered by an earlier node's rule
  ir::UseIndex uses_;
  format::WeightPoolBuilder& pool_;
  std::vector<int32_t> tensor_of_;
  std::vector<int32_t> alias_of_;  // per tensor: the tensor whose bytes a view uses, or -1
  std::vector<ir::Shape> probe_shapes_;
  bool variant_requested_ = false;
  std::vector<int64_t> variant_mine_, variant_others_;
  ContextDesc ctx_;
  Status error_;  // first allocation failure, reported with the node being lowered
};

}  // namespace

std::string OptionsToJson(const TargetOptions& o) {
  nlohmann::ordered_json j;
  j["optimization_level"] = o.optimization_level;
  j["precision"] = o.precision;
  if (o.int4_head) j["int4_head"] = true;  // written only when set: files without it read as before
  if (!o.int4_activations.empty()) j["int4_activations"] = o.int4_activations;  // likewise
  return j.dump();
}

Result<format::ContextDesc> LowerGraph(const ir::Graph& graph, const std::string& method,
                                       const LowerOptions& options, format::WeightPoolBuilder& pool) {
  if (!ops::ParsePrecision(options.options.precision))
    return InvalidArgument("precision '" + options.options.precision +
                           "' is not valid; use \"fp32\", \"bf16\", \"int8\" or \"int4\"");
  return Lowerer(graph, options, pool).Run(method);
}

}  // namespace fcb::compile
