#include "compile/lower.h"

#include <climits>
#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "compile/memory_plan.h"
#include "core/fault.h"
#include "kernels/packing.h"
#include "ops/op.h"

namespace fcb::compile {
namespace {

using format::ContextDesc;
using format::Storage;
using format::TensorDesc;
using ir::Graph;
using ir::Node;

class Lowerer {
 public:
  Lowerer(const Graph& g, const LowerOptions& o, format::WeightPoolBuilder& pool)
      : g_(g), opt_(o), pool_(pool), tensor_of_(g.values.size(), -1) {}

  Result<ContextDesc> Run(const std::string& method) {
    ctx_.method = method;
    ctx_.target = TargetName(opt_.target);
    ctx_.options = OptionsToJson(opt_.options);
    for (int v : g_.inputs) ctx_.inputs.push_back(ValueTensor(v));
    if (fault::Hit(fault::Kind::kContext, TargetName(opt_.target)))
      return ResourceExhausted("cannot create the compile context (injected fault)");
    FindExpandDepthwisePairs();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (partner_[i] == kLoweredWithProducer) continue;
      Status s = partner_[i] >= 0 ? LowerExpandDepthwise(n, g_.nodes[partner_[i]]) : LowerNode(n);
      if (s.ok() && !error_.ok()) s = std::move(error_);
      if (!s.ok()) return s.Annotate(n.Describe());
    }
    for (int v : g_.outputs) ctx_.outputs.push_back(OutputTensor(v));
    FCB_RETURN_IF_ERROR(CheckSteps());
    PlanArena();
    return std::move(ctx_);
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
    t.dtype = static_cast<int32_t>(dtype);
    t.shape = std::move(shape);
    t.storage = Storage::kWeight;
    t.blob = AddBlob(data, size);
    ctx_.tensors.push_back(std::move(t));
    return static_cast<int32_t>(ctx_.tensors.size()) - 1;
  }

  // Packed conv/GEMM weights: fp32, or bfloat16 (round to nearest even) for
  // targets compiled with precision "bf16".
  int32_t AddPackedWeights(const std::string& name, const std::vector<float>& v) {
    if (opt_.options.precision != "bf16") return AddFloats(name, v);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      if ((bits & 0x7fffffffu) > 0x7f800000u) {
        h[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // keep NaN a NaN
      } else {
        bits += 0x7fffu + ((bits >> 16) & 1u);
        h[i] = static_cast<uint16_t>(bits >> 16);
      }
    }
    return AddWeightTensor(name, ir::DType::kBF16, {static_cast<int64_t>(h.size())}, h.data(), h.size() * 2);
  }

  int32_t AddFloats(const std::string& name, const std::vector<float>& v) {
    return AddWeightTensor(name, ir::DType::kF32, {static_cast<int64_t>(v.size())}, v.data(),
                           v.size() * sizeof(float));
  }

  // The tensor for a graph value: a weight for constants, an arena slot otherwise.
  int32_t ValueTensor(int v) {
    if (v < 0) return -1;
    if (tensor_of_[v] >= 0) return tensor_of_[v];
    const ir::Value& val = g_.values[v];
    if (val.is_constant()) {
      tensor_of_[v] = AddWeightTensor(val.name, val.dtype, val.shape, val.constant->bytes.data(),
                                      val.constant->bytes.size());
    } else {
      TensorDesc t;
      t.name = val.name;
      t.dtype = static_cast<int32_t>(val.dtype);
      t.shape = val.shape;
      t.storage = Storage::kArena;
      ctx_.tensors.push_back(std::move(t));
      tensor_of_[v] = static_cast<int32_t>(ctx_.tensors.size()) - 1;
    }
    return tensor_of_[v];
  }

  // Outputs live in the arena; a graph output folded to a constant (e.g. a
  // Shape) is copied there from its weight by an Identity step.
  int32_t OutputTensor(int v) {
    if (v < 0 || !g_.values[v].is_constant()) return ValueTensor(v);
    const ir::Value& val = g_.values[v];
    TensorDesc t;
    t.name = val.name;
    t.dtype = static_cast<int32_t>(val.dtype);
    t.shape = val.shape;
    t.storage = Storage::kArena;
    format::StepDesc s;
    s.op = "Identity";
    s.node = val.name + "/constant_output";
    s.inputs = {ValueTensor(v)};
    ctx_.tensors.push_back(std::move(t));
    s.outputs = {static_cast<int32_t>(ctx_.tensors.size()) - 1};
    Push(s);
    return s.outputs[0];
  }

  format::StepDesc BaseStep(const Node& n, const std::string& op) {
    format::StepDesc s;
    s.op = op;
    s.node = n.name;
    s.attrs = ops::AttrsFromNode(n).list();
    return s;
  }

  void Push(format::StepDesc s) {
    while (!s.inputs.empty() && s.inputs.back() < 0) s.inputs.pop_back();
    ctx_.steps.push_back(std::move(s));
  }

  const ir::TensorData* Const(const Node& n, size_t i) const {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return nullptr;
    return g_.values[n.inputs[i]].constant.get();
  }

  // Marks each depthwise ConvNhwc whose input is the only use of a plain
  // 1x1 ConvNhwc's output (MobileNetV2/EfficientNet's expansion), so that
  // the pair is lowered as one ConvExpandDwNhwc step and the intermediate
  // tensor never exists. fp32 at optimization level >= 1 only.
  void FindExpandDepthwisePairs() {
    partner_.assign(g_.nodes.size(), -1);
    if (opt_.options.optimization_level == 0 || opt_.options.precision == "bf16") return;
    std::vector<int> uses(g_.values.size(), 0), user(g_.values.size(), -1);
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (int v : g_.nodes[i].inputs)
        if (v >= 0) ++uses[v], user[v] = static_cast<int>(i);
    for (int v : g_.outputs) uses[v] += 2;  // a graph output must exist
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& a = g_.nodes[i];
      if (!IsPlainPointwise(a) || a.outputs.size() != 1) continue;
      const int mid = a.outputs[0];
      if (uses[mid] != 1) continue;
      const int j = user[mid];
      if (j < 0 || !IsFusableDepthwise(g_.nodes[j], mid)) continue;
      partner_[j] = kLoweredWithProducer;
      partner_[i] = j;
    }
  }

  // A ConvNhwc without a residual whose weights (4-D fp32) and bias (if any)
  // are constants: its weights, else null.
  const ir::TensorData* FusableConvWeights(const Node& n) const {
    if (n.op_type != "ConvNhwc" || n.inputs.empty()) return nullptr;
    if (n.inputs.size() > 3 && n.inputs[3] >= 0) return nullptr;  // residual
    const ir::TensorData* w = Const(n, 1);
    if (!w || w->dtype != ir::DType::kF32 || w->shape.size() != 4) return nullptr;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !Const(n, 2)) return nullptr;
    return w;
  }

  bool IsPlainPointwise(const Node& n) const {
    const ir::TensorData* w = FusableConvWeights(n);
    if (!w || n.GetInt("group", 1) != 1 || w->shape[2] != 1 || w->shape[3] != 1) return false;
    for (int64_t v : n.GetInts("strides", {1, 1}))
      if (v != 1) return false;
    for (int64_t v : n.GetInts("pads", {0, 0, 0, 0}))
      if (v != 0) return false;
    const ir::Shape& x = g_.values[n.inputs[0]].shape;
    return x.size() == 4 && g_.values[n.inputs[0]].dtype == ir::DType::kF32;
  }

  bool IsFusableDepthwise(const Node& n, int input) const {
    const ir::TensorData* w = FusableConvWeights(n);
    if (!w || n.inputs[0] != input) return false;
    const ir::Shape& x = g_.values[input].shape;
    if (x.size() != 4) return false;
    const int64_t c = x[3], group = n.GetInt("group", 1);
    if (!(group > 1 && group == c && w->shape[0] == c && w->shape[1] == 1)) return false;
    // (kh - 1) * dh + 1 rows of the intermediate must fit the kernel's band
    // buffer with room for a few output rows.
    const std::vector<int64_t> dil = n.GetInts("dilations", {1, 1});
    const int64_t reach = (w->shape[2] - 1) * (dil.empty() ? 1 : dil[0]) + 1;
    return (reach + 2) * x[2] * c <= ops::kExpandDwBandFloats;
  }

  Status LowerExpandDepthwise(const Node& a, const Node& b) {
    const ir::TensorData* w1 = Const(a, 1);
    const ir::TensorData* b1 = Const(a, 2);
    const ir::TensorData* w2 = Const(b, 1);
    const ir::TensorData* b2 = Const(b, 2);
    const int64_t c = w1->shape[1], e = w1->shape[0], kh = w2->shape[2], kw = w2->shape[3];
    auto s = BaseStep(b, "ConvExpandDwNhwc");
    s.node = a.name + "+" + b.name;
    s.inputs.push_back(ValueTensor(a.inputs[0]));
    s.inputs.push_back(AddFloats(a.name + ".w", kernels::PackConv(w1->data<float>(), e, c, 1, 1, 1)));
    s.inputs.push_back(AddFloats(a.name + ".b", kernels::PackConvBias(b1 ? b1->data<float>() : nullptr, e, 1)));
    s.inputs.push_back(AddFloats(b.name + ".w", kernels::PackDepthwise(w2->data<float>(), e, kh, kw)));
    s.inputs.push_back(AddFloats(b.name + ".b", kernels::PackDepthwiseBias(b2 ? b2->data<float>() : nullptr, e)));
    format::AttrDesc dw, act, alpha, beta;
    dw.name = "depthwise", dw.ints = {1};
    act.name = "expand_activation", act.ints = {a.GetInt("activation", 0)};
    alpha.name = "expand_activation_alpha", alpha.floats = {a.GetFloat("activation_alpha", 0.f)};
    beta.name = "expand_activation_beta", beta.floats = {a.GetFloat("activation_beta", 0.f)};
    for (auto* at : {&dw, &act, &alpha, &beta}) s.attrs.push_back(*at);
    s.outputs.push_back(ValueTensor(b.outputs[0]));
    Push(std::move(s));
    return Status::Ok();
  }

  Status LowerNode(const Node& n) {
    if (n.op_type == "ConvNhwc") return LowerConv(n);
    if ((n.op_type == "Gemm" || n.op_type == "MatMul") && TryLowerGemm(n)) return Status::Ok();
    auto s = BaseStep(n, n.op_type);
    for (int v : n.inputs) s.inputs.push_back(ValueTensor(v));
    for (int v : n.outputs) s.outputs.push_back(ValueTensor(v));
    Push(std::move(s));
    return Status::Ok();
  }

  // Cost model for Winograd F(4x4, 3x3) (ops/nn_fast.cc): 36 multiplies per
  // 4x4 tile instead of 144, but 4x the weight bytes, which every block of
  // tiles streams again; it pays where a feature map has many tiles to share
  // them. Target-neutral, so every fp32 target shares the packed bytes.
  bool UseWinograd(const Node& n, int64_t oc, int64_t icg, int64_t kh, int64_t kw,
                   int64_t group) const {
    // Level 0 means straightforward kernels; bf16 keeps the direct conv's bf16 packing.
    if (opt_.options.optimization_level == 0) return false;
    if (kh != 3 || kw != 3 || group != 1 || opt_.options.precision == "bf16") return false;
    if (icg < 16 || icg > kernels::kWinogradMaxIc || oc < 16) return false;
    for (int64_t s : n.GetInts("strides", {1, 1}))
      if (s != 1) return false;
    for (int64_t d : n.GetInts("dilations", {1, 1}))
      if (d != 1) return false;
    const ir::Shape& y = g_.values[n.outputs[0]].shape;
    if (y.size() != 4) return false;
    const int64_t tiles = y[0] * ((y[1] + 3) / 4) * ((y[2] + 3) / 4);
    return tiles >= kMinWinogradTiles;
  }
  static constexpr int64_t kMinWinogradTiles = 32;

  Status LowerConv(const Node& n) {
    const ir::TensorData* w = Const(n, 1);
    if (!w || w->dtype != ir::DType::kF32 || w->shape.size() != 4)
      return Unsupported("Conv weights must be a float32 constant of rank 4");
    const ir::TensorData* b = Const(n, 2);
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !b) return Unsupported("Conv bias must be a constant");
    const int64_t oc = w->shape[0], icg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
    const int64_t group = n.GetInt("group", 1);
    const int64_t ic = g_.values[n.inputs[0]].shape[3];
    const bool depthwise = group > 1 && group == ic && oc == ic && icg == 1;
    const float* bias = b ? b->data<float>() : nullptr;
    if (UseWinograd(n, oc, icg, kh, kw, group)) {
      auto s = BaseStep(n, "ConvWinogradNhwc");
      s.inputs.push_back(ValueTensor(n.inputs[0]));
      s.inputs.push_back(AddFloats(n.name + ".w", kernels::PackWinograd(w->data<float>(), oc, icg)));
      s.inputs.push_back(AddFloats(n.name + ".b", kernels::PackConvBias(bias, oc, 1)));
      if (n.inputs.size() > 3) s.inputs.push_back(ValueTensor(n.inputs[3]));
      s.outputs.push_back(ValueTensor(n.outputs[0]));
      Push(std::move(s));
      return Status::Ok();
    }
    auto s = BaseStep(n, "ConvNhwc");
    s.inputs.push_back(ValueTensor(n.inputs[0]));
    if (depthwise) {
      s.inputs.push_back(AddPackedWeights(n.name + ".w", kernels::PackDepthwise(w->data<float>(), oc, kh, kw)));
      s.inputs.push_back(AddFloats(n.name + ".b", kernels::PackDepthwiseBias(bias, oc)));
    } else {
      s.inputs.push_back(AddPackedWeights(n.name + ".w", kernels::PackConv(w->data<float>(), oc, icg, kh, kw, group)));
      s.inputs.push_back(AddFloats(n.name + ".b", kernels::PackConvBias(bias, oc, group)));
    }
    format::AttrDesc dw;
    dw.name = "depthwise";
    dw.ints = {depthwise ? 1 : 0};
    s.attrs.push_back(dw);
    if (n.inputs.size() > 3) s.inputs.push_back(ValueTensor(n.inputs[3]));
    s.outputs.push_back(ValueTensor(n.outputs[0]));
    Push(std::move(s));
    return Status::Ok();
  }

  // Gemm/MatMul whose B is a constant matrix: pack B (alpha folded in) and
  // turn a vector-shaped C (beta folded in) into the bias.
  bool TryLowerGemm(const Node& n) {
    const ir::TensorData* b = Const(n, 1);
    if (!b || b->dtype != ir::DType::kF32 || b->shape.size() != 2) return false;
    const auto& a_shape = g_.values[n.inputs[0]].shape;
    if (g_.values[n.inputs[0]].dtype != ir::DType::kF32 || a_shape.size() < 2) return false;
    const bool gemm = n.op_type == "Gemm";
    if (gemm && (n.GetInt("transA", 0) != 0 || a_shape.size() != 2)) return false;
    const bool trans_b = gemm && n.GetInt("transB", 0) != 0;
    const int64_t k = trans_b ? b->shape[1] : b->shape[0];
    const int64_t nn = trans_b ? b->shape[0] : b->shape[1];
    std::vector<float> bias;
    if (gemm && n.inputs.size() > 2 && n.inputs[2] >= 0) {
      const ir::TensorData* c = Const(n, 2);
      if (!c || c->dtype != ir::DType::kF32) return false;
      const int64_t cn = c->numel();
      const bool vec = (c->shape.size() == 1 && (cn == nn || cn == 1)) ||
                       (c->shape.size() == 2 && c->shape[0] == 1 && (c->shape[1] == nn || c->shape[1] == 1)) ||
                       c->shape.empty();
      if (!vec) return false;
      const float beta = n.GetFloat("beta", 1.f);
      bias.resize(nn);
      for (int64_t j = 0; j < nn; ++j) bias[j] = beta * c->data<float>()[cn == 1 ? 0 : j];
    }
    const float alpha = gemm ? n.GetFloat("alpha", 1.f) : 1.f;
    std::vector<float> src(b->data<float>(), b->data<float>() + b->numel());
    if (alpha != 1.f)
      for (float& x : src) x *= alpha;
    const int64_t ldb = trans_b ? 1 : nn, ldcol = trans_b ? k : 1;
    auto s = BaseStep(n, "GemmPacked");
    const ops::Attrs node_attrs = ops::AttrsFromNode(n);
    s.attrs.clear();
    for (const char* a : {"activation", "activation_alpha", "activation_beta"})
      if (const auto* d = node_attrs.Find(a)) s.attrs.push_back(*d);
    format::AttrDesc an;
    an.name = "n";
    an.ints = {nn};
    s.attrs.push_back(an);
    s.inputs.push_back(ValueTensor(n.inputs[0]));
    s.inputs.push_back(AddPackedWeights(n.name + ".w", kernels::PackGemmB(src.data(), k, nn, ldb, ldcol)));
    s.inputs.push_back(bias.empty() ? -1 : AddFloats(n.name + ".b", bias));
    s.outputs.push_back(ValueTensor(n.outputs[0]));
    Push(std::move(s));
    return true;
  }

  // Runs each step's shape inference on the lowered tensors, as the runtime will.
  Status CheckSteps() {
    for (const auto& s : ctx_.steps) {
      const ops::OpDef* def = ops::FindOp(s.op);
      if (!def) return Unsupported("node '" + s.node + "': operator " + s.op + " is not supported");
      std::vector<ops::TensorInfo> in;
      std::vector<const ir::TensorData*> consts;
      for (int32_t t : s.inputs) {
        if (t < 0) {
          in.push_back({});
          consts.push_back(nullptr);
          continue;
        }
        const auto& d = ctx_.tensors[t];
        in.push_back({static_cast<ir::DType>(d.dtype), d.shape});
        consts.push_back(nullptr);
        if (d.storage == Storage::kWeight && pool_.bytes(d.blob).size() <= ops::kMaxInferConstantBytes) {
          auto td = std::make_shared<ir::TensorData>();
          td->dtype = static_cast<ir::DType>(d.dtype);
          td->shape = d.shape;
          td->bytes = pool_.bytes(d.blob);
          keep_.push_back(td);
          consts.back() = td.get();
        }
      }
      ops::Attrs attrs(s.attrs);
      std::vector<ops::TensorInfo> out;
      ops::InferContext ictx{s.op, attrs, in, consts, static_cast<int>(s.outputs.size())};
      Status st = ops::InferOutputs(*def, ictx, &out);
      if (!st.ok()) return st.Annotate("node '" + s.node + "' (" + s.op + ")");
      for (size_t i = 0; i < out.size(); ++i) {
        const auto& d = ctx_.tensors[s.outputs[i]];
        if (static_cast<ir::DType>(d.dtype) != out[i].dtype || d.shape != out[i].shape)
          return Internal("node '" + s.node + "' (" + s.op + "): lowered output " + d.name + " is " +
                          ir::ShapeToString(d.shape) + " but the op infers " +
                          ir::ShapeToString(out[i].shape));
      }
      keep_.clear();
    }
    return Status::Ok();
  }

  void PlanArena() {
    const int nsteps = static_cast<int>(ctx_.steps.size());
    std::vector<int> arena_index(ctx_.tensors.size(), -1);
    std::vector<BufferLifetime> bufs;
    auto touch = [&](int32_t t, int step, bool def) {
      if (t < 0 || ctx_.tensors[t].storage != Storage::kArena) return;
      if (arena_index[t] < 0) {
        arena_index[t] = static_cast<int>(bufs.size());
        const auto& d = ctx_.tensors[t];
        BufferLifetime b;
        b.bytes = static_cast<uint64_t>(ir::NumElements(d.shape)) * ir::DTypeSize(static_cast<ir::DType>(d.dtype));
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
    MemoryPlan plan = PlanMemory(bufs);
    for (size_t t = 0; t < ctx_.tensors.size(); ++t)
      if (arena_index[t] >= 0) ctx_.tensors[t].offset = plan.offsets[arena_index[t]];
    ctx_.arena_bytes = plan.arena_bytes;
  }

  const Graph& g_;
  // Per node: the index of the depthwise conv a 1x1 conv is lowered with,
  // kLoweredWithProducer for that depthwise conv, else -1.
  static constexpr int kLoweredWithProducer = -2;
  std::vector<int> partner_;
  LowerOptions opt_;
  format::WeightPoolBuilder& pool_;
  std::vector<int32_t> tensor_of_;
  ContextDesc ctx_;
  std::vector<std::shared_ptr<ir::TensorData>> keep_;
  Status error_;  // first allocation failure, reported with the node being lowered
};

}  // namespace

std::string OptionsToJson(const TargetOptions& o) {
  nlohmann::ordered_json j;
  j["optimization_level"] = o.optimization_level;
  j["precision"] = o.precision;
  return j.dump();
}

Result<format::ContextDesc> LowerGraph(const ir::Graph& graph, const std::string& method,
                                       const LowerOptions& options, format::WeightPoolBuilder& pool) {
  return Lowerer(graph, options, pool).Run(method);
}

}  // namespace fcb::compile
