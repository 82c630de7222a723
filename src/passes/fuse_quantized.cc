// FuseQuantized: quantized-graph patterns -> one int8 kernel node (QConv /
// QConvNhwc, ops/internal/qconv_nhwc.cc, which documents the modes).
#include <cmath>
#include <string>

#include "ops/names.h"
#include "ops/op.h"
#include "ops/params.h"
#include "ops/quant_nodes.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

using ir::DType;
using ir::Graph;
using ir::Node;

constexpr int64_t kOnnxFloat = 1;  // TensorProto FLOAT (Cast "to")
using Mode = ops::QConvMode;
constexpr Mode kInt32 = ops::kQInt32, kScaled = ops::kQScaled, kMultiplier = ops::kQMultiplier, kQdq = ops::kQQdq,
               kQLinear = ops::kQLinear;

constexpr auto IsQ = ir::IsInt8Type;

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), index_(g) {
    erase_.assign(g.nodes.size(), false);
    replace_.assign(g.nodes.size(), -1);
  }

  Status Run() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (erase_[i]) continue;
      const std::string& op = g_.nodes[i].op_type;
      if (!g_.nodes[i].domain.empty()) continue;
      if (op == "QLinearConv" || op == "QLinearMatMul") TryQLinear(static_cast<int>(i));
      else if (op == "ConvInteger" || op == "MatMulInteger") TryInteger(static_cast<int>(i));
      else if (op == "Conv" || op == "MatMul" || op == "Gemm") TryQdq(static_cast<int>(i));
    }
    // Then what is left between a DequantizeLinear and a QuantizeLinear.
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!erase_[i] && g_.nodes[i].domain.empty() && g_.nodes[i].op_type == "DequantizeLinear")
        FCB_RETURN_IF_ERROR(TryLookup(static_cast<int>(i)));
    std::vector<Node> out;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (replace_[i] >= 0) out.push_back(std::move(fused_[replace_[i]]));
      else if (!erase_[i]) out.push_back(std::move(g_.nodes[i]));
    }
    g_.nodes = std::move(out);
    return Status::Ok();
  }

 private:
  const ir::TensorData* Const(int v) const { return v >= 0 ? g_.values[v].constant.get() : nullptr; }
  int In(const Node& n, size_t i) const { return i < n.inputs.size() ? n.inputs[i] : -1; }
  int64_t Numel(int v) const { return ir::NumElements(g_.values[v].shape); }
  // The node that alone reads v (v not a graph output), or -1.
  int Sole(int v) const {
    const int r = index_.SoleReader(v);
    return r < 0 || erase_[r] ? -1 : r;
  }
  bool Scalar(int v) const { return v >= 0 && Numel(v) == 1; }

  // A per-output-channel (or per-tensor) constant of `n` values whose shape
  // broadcasts over the output the way the channel axis does: [n] / [1, n]
  // for matrices, [n,1,1] / [1,n,1,1] for NCHW convolutions.
  bool ChannelShaped(int v, int64_t n, bool conv) const {
    if (v < 0) return false;
    const ir::Shape& s = g_.values[v].shape;
    if (ir::NumElements(s) == 1) return true;
    if (ir::NumElements(s) != n) return false;
    if (!conv) return s.back() == n;
    return (s.size() == 3 && s[0] == n) || (s.size() == 4 && s[1] == n);
  }

  // Relu or Clip (constant bounds) reading v alone -> its epilogue; -1 if none.
  int Activation(int v, kernels::Epilogue* ep) const {
    const int r = Sole(v);
    if (r < 0 || g_.values[g_.nodes[r].outputs[0]].dtype != DType::kF32) return -1;
    const kernels::Epilogue e = ActivationEpilogue(g_, g_.nodes[r]);
    if (e.act != kernels::Act::kRelu && e.act != kernels::Act::kClip) return -1;
    *ep = e;
    return r;
  }

  // The weight operand of a conv (rank 4) or matrix product (rank 2) as a
  // constant int8/uint8 tensor; `conv` says which.
  bool Weights(int v, bool conv) const {
    const ir::TensorData* w = Const(v);
    return w && IsQ(w->dtype) && static_cast<int>(w->shape.size()) == (conv ? 4 : 2);
  }

  Node MakeNode(const Node& from, bool conv, Mode mode, std::vector<int> inputs, int output,
                const kernels::Epilogue& ep) {
    if (conv) return ops::MakeQConvNode(from, mode, std::move(inputs), output, ep);
    // A matrix product: a 1x1 convolution over the rows; input 3 the [K, N] weights.
    const int64_t columns = g_.values[inputs[3]].shape[1];
    return ops::MakeQMatMulNode(from, mode, std::move(inputs), output, columns, ep);
  }

  // Replaces the chain of nodes `chain` (the last one writes the output) by `n`.
  void Commit(const std::vector<int>& chain, Node n) {
    int last = -1;
    for (int c : chain) last = std::max(last, c);
    for (int c : chain) erase_[c] = true;
    replace_[last] = static_cast<int>(fused_.size());
    fused_.push_back(std::move(n));
  }

  bool ConvInputOk(const Node& n) const {
    const int x = In(n, 0);
    return x >= 0 && g_.values[x].shape.size() == 4;
  }

  int NumOut(int w, bool conv) const {
    const ir::Shape& s = g_.values[w].shape;
    return static_cast<int>(conv ? s[0] : s[1]);
  }

  void TryQLinear(int i) {
    const Node& n = g_.nodes[i];
    const bool conv = n.op_type == "QLinearConv";
    const int x = In(n, 0), xs = In(n, 1), xz = In(n, 2), w = In(n, 3), ws = In(n, 4), wz = In(n, 5);
    const int ys = In(n, 6), yz = In(n, 7), b = conv ? In(n, 8) : -1;
    if (!IsQ(g_.values[x].dtype) || !Weights(w, conv) || !Scalar(xs) || !Scalar(ys) || !Scalar(yz)) return;
    if (xz >= 0 && !Scalar(xz)) return;
    if (conv && !ConvInputOk(n)) return;
    const int64_t oc = NumOut(w, conv);
    if (!Const(ws) || (Numel(ws) != 1 && Numel(ws) != oc)) return;
    if (wz >= 0 && (!Const(wz) || (Numel(wz) != 1 && Numel(wz) != oc))) return;
    if (b >= 0 && (!Const(b) || Const(b)->dtype != DType::kI32 || Numel(b) != oc)) return;
    Commit({i}, MakeNode(n, conv, kQLinear, {x, xs, xz, w, ws, wz, b, ys, yz, -1}, n.outputs[0], {}));
  }

  void TryInteger(int i) {
    const Node& n = g_.nodes[i];
    const bool conv = n.op_type == "ConvInteger";
    const int x = In(n, 0), w = In(n, 1), xz = In(n, 2), wz = In(n, 3);
    if (!IsQ(g_.values[x].dtype) || !Weights(w, conv)) return;
    if (xz >= 0 && !Scalar(xz)) return;
    if (conv && !ConvInputOk(n)) return;
    if (!conv && g_.values[x].shape.size() < 2) return;  // MatMul of a vector drops a dimension
    const int64_t oc = NumOut(w, conv);
    if (wz >= 0 && (!Const(wz) || (Numel(wz) != 1 && Numel(wz) != oc))) return;
    // -> Cast(float) -> Mul(multiplier) [-> Add(bias)] [-> Relu/Clip]
    std::vector<int> chain = {i};
    int out = n.outputs[0];
    int m = -1, bias = -1;
    kernels::Epilogue ep;
    Mode mode = kInt32;
    const int cast = Sole(out);
    if (cast >= 0 && g_.nodes[cast].op_type == "Cast" && g_.nodes[cast].GetInt("to", 0) == kOnnxFloat) {
      const int mul = Sole(g_.nodes[cast].outputs[0]);
      if (mul >= 0 && g_.nodes[mul].op_type == "Mul") {
        const Node& mn = g_.nodes[mul];
        const int other = mn.inputs[0] == g_.nodes[cast].outputs[0] ? mn.inputs[1] : mn.inputs[0];
        if (g_.values[other].dtype == DType::kF32 && ChannelShaped(other, oc, conv) &&
            g_.values[mn.outputs[0]].shape == g_.values[out].shape) {
          chain.push_back(cast);
          chain.push_back(mul);
          m = other;
          mode = kMultiplier;
          out = mn.outputs[0];
          const int add = Sole(out);
          if (add >= 0 && g_.nodes[add].op_type == "Add") {
            const Node& an = g_.nodes[add];
            const int bv = an.inputs[0] == out ? an.inputs[1] : an.inputs[0];
            if (Const(bv) && Const(bv)->dtype == DType::kF32 && ChannelShaped(bv, oc, conv) &&
                g_.values[an.outputs[0]].shape == g_.values[out].shape) {
              chain.push_back(add);
              bias = bv;
              out = an.outputs[0];
            }
          }
          const int act = Activation(out, &ep);
          if (act >= 0) {
            chain.push_back(act);
            out = g_.nodes[act].outputs[0];
          }
        }
      }
    }
    int b = bias;
    if (b >= 0) b = Flatten(b, oc);
    if (m >= 0 && Const(m)) m = Flatten(m, oc);
    Commit(chain, MakeNode(n, conv, mode, {x, -1, xz, w, -1, wz, b, -1, -1, m}, out, ep));
  }

  // A constant reshaped to [n] (or kept when it has one element).
  int Flatten(int v, int64_t n) {
    const ir::TensorData* t = Const(v);
    if (!t || t->numel() == 1 || g_.values[v].shape == ir::Shape{n}) return v;
    auto c = ir::TensorData::Make(t->dtype, {n});
    c->bytes = t->bytes;
    return g_.AddConstant(g_.values[v].name + "_flat", c);
  }

  // The DequantizeLinear node producing v, with a per-tensor scale and zero
  // point and a quantized input; -1 otherwise.
  int DqOfActivation(int v) const {
    const int p = index_.Producer(v);
    if (p < 0 || erase_[p] || g_.nodes[p].op_type != "DequantizeLinear") return -1;
    const Node& d = g_.nodes[p];
    if (!IsQ(g_.values[d.inputs[0]].dtype) || !Scalar(In(d, 1))) return -1;
    if (In(d, 2) >= 0 && !Scalar(In(d, 2))) return -1;
    return p;
  }

  void TryQdq(int i) {
    const Node& n = g_.nodes[i];
    const bool conv = n.op_type == "Conv";
    const bool gemm = n.op_type == "Gemm";
    if (conv && !ConvInputOk(n)) return;
    if (gemm && (n.GetInt("transA", 0) != 0 || n.GetFloat("alpha", 1.f) != 1.f || n.GetFloat("beta", 1.f) != 1.f))
      return;
    const int dx = DqOfActivation(In(n, 0));
    if (dx < 0) return;
    if (!conv && g_.values[In(g_.nodes[dx], 0)].shape.size() < 2) return;  // MatMul of a vector drops a dimension
    // Weights: DequantizeLinear of a constant int8/uint8 tensor, scales per
    // output channel (conv axis 0; matrix [K][N] axis 1; Gemm transB [N][K] axis 0).
    const int wv = In(n, 1);
    const int pw = index_.Producer(wv);
    if (pw < 0 || g_.nodes[pw].op_type != "DequantizeLinear") return;
    const Node& dw = g_.nodes[pw];
    const int wq = In(dw, 0), wsv = In(dw, 1), wzv = In(dw, 2);
    const bool trans_b = gemm && n.GetInt("transB", 0) != 0;
    const ir::TensorData* wt = Const(wq);
    if (!wt || !IsQ(wt->dtype) || static_cast<int>(wt->shape.size()) != (conv ? 4 : 2)) return;
    const int64_t oc = conv || trans_b ? wt->shape[0] : wt->shape[1];
    const ir::TensorData* wst = Const(wsv);
    if (!wst || wst->dtype != DType::kF32 || (wst->numel() != 1 && wst->numel() != oc)) return;
    if (wst->numel() != 1 && wst->shape.size() != 1) return;
    if (wst->numel() > 1) {
      int64_t axis = dw.GetInt("axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(wt->shape.size());
      if (axis != (conv || trans_b ? 0 : 1)) return;
    }
    if (wzv >= 0 && (!Const(wzv) || Const(wzv)->numel() != wst->numel())) return;
    // Bias: a float constant, or DequantizeLinear of a constant int32 one.
    int bias = -1;
    // An int32 bias whose scale is x_scale * w_scale (what quantizers write)
    // allows ONNX Runtime's QLinearConv arithmetic below: set when it is one.
    int bias_i32 = -1;
    bool bias_i32_scaled = false;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      const int bv = n.inputs[2];
      if (const ir::TensorData* bt = Const(bv)) {
        if (bt->dtype != DType::kF32 || bt->numel() != oc) return;
        bias = Flatten(bv, oc);
      } else {
        const int pb = index_.Producer(bv);
        if (pb < 0 || g_.nodes[pb].op_type != "DequantizeLinear") return;
        const Node& db = g_.nodes[pb];
        const ir::TensorData* bq = Const(In(db, 0));
        const ir::TensorData* bs = Const(In(db, 1));
        const ir::TensorData* bz = In(db, 2) >= 0 ? Const(In(db, 2)) : nullptr;
        if (!bq || bq->dtype != DType::kI32 || bq->numel() != oc || !bs || bs->dtype != DType::kF32) return;
        if (bs->numel() != 1 && bs->numel() != oc) return;
        if (In(db, 2) >= 0 && !bz) return;
        // The float bias is what that DequantizeLinear computes.
        auto f = ops::Evaluate(db.op_type, ops::AttrsFromNode(db), {bq, bs, bz}, 1);
        if (!f.ok() || f.value()[0]->dtype != DType::kF32 || f.value()[0]->numel() != oc) return;
        bias = Flatten(g_.AddConstant(n.name + "_qbias", f.value()[0]), oc);
        const ir::TensorData* sxt = Const(In(g_.nodes[dx], 1));
        bool ok = sxt && sxt->dtype == DType::kF32;
        for (int64_t o = 0; ok && o < oc; ++o) {
          const float want = sxt->data<float>()[0] * wst->data<float>()[wst->numel() == 1 ? 0 : o];
          ok = (bz == nullptr || bz->GetInt(bz->numel() == 1 ? 0 : o) == 0) &&
               bs->data<float>()[bs->numel() == 1 ? 0 : o] == want;
        }
        if (ok) {
          bias_i32 = Flatten(In(db, 0), oc);
          bias_i32_scaled = true;
        }
      }
    }
    // Weights as the kernel node wants them: conv [oc][icg][kh][kw], matrix [K][N].
    int w = wq;
    if (trans_b) {
      const int64_t nn = wt->shape[0], k = wt->shape[1];
      auto t = ir::TensorData::Make(wt->dtype, {k, nn});
      for (int64_t r = 0; r < nn; ++r)
        for (int64_t c = 0; c < k; ++c) t->bytes[c * nn + r] = wt->bytes[r * k + c];
      w = g_.AddConstant(g_.values[wq].name + "_t", t);
    }
    std::vector<int> chain = {i};
    int out = n.outputs[0];
    kernels::Epilogue ep = ops::NodeEpilogue(n);
    if (ep.act == kernels::Act::kNone) {
      const int act = Activation(out, &ep);
      if (act >= 0) {
        chain.push_back(act);
        out = g_.nodes[act].outputs[0];
      }
    } else if (ep.act != kernels::Act::kRelu && ep.act != kernels::Act::kClip) {
      return;  // other fused activations stay with the float path
    }
    // -> QuantizeLinear (per tensor): int8/uint8 output.
    Mode mode = kScaled;
    int ys = -1, yz = -1;
    const int q = Sole(out);
    if (q >= 0 && g_.nodes[q].op_type == "QuantizeLinear" && Scalar(In(g_.nodes[q], 1)) &&
        In(g_.nodes[q], 2) >= 0 && Scalar(In(g_.nodes[q], 2)) && g_.values[In(g_.nodes[q], 1)].dtype == DType::kF32 &&
        IsQ(g_.values[g_.nodes[q].outputs[0]].dtype)) {
      chain.push_back(q);
      ys = In(g_.nodes[q], 1);
      yz = In(g_.nodes[q], 2);
      out = g_.nodes[q].outputs[0];
      mode = kQdq;
      // With a constant output scale, and the bias absent or int32 at scale
      // x_scale * w_scale, this is exactly a QLinearConv / QLinearMatMul (the
      // form ONNX Runtime fuses QDQ groups into): requantize float(acc +
      // bias) by (x_scale * w_scale) / y_scale, no per-element division. A
      // Clip's bounds move to output units.
      const ir::TensorData* yst = Const(ys);
      const ir::TensorData* sxt = Const(In(g_.nodes[dx], 1));
      if (yst && yst->dtype == DType::kF32 && sxt && (bias < 0 || bias_i32_scaled)) {
        const float sy = yst->data<float>()[0];
        if (sy > 0 && std::isfinite(sy)) {
          mode = kQLinear;
          bias = bias_i32;
          if (ep.act == kernels::Act::kClip) ep.a /= sy, ep.b /= sy;
        }
      }
    }
    const Node& d = g_.nodes[dx];
    Commit(chain, MakeNode(n, conv, mode, {In(d, 0), In(d, 1), In(d, 2), w, wsv, wzv, bias, ys, yz, -1}, out, ep));
  }

  // Whether v is a constant one-element tensor of type t (any 8-bit integer
  // type when t is kUndefined).
  bool ScalarConst(int v, DType t) const {
    const ir::TensorData* c = Const(v);
    return c && c->numel() == 1 && (t == DType::kUndefined ? IsQ(c->dtype) : c->dtype == t);
  }

  // An elementwise float op reading `v` whose other operands are constant
  // scalars (so it is a function of one value).
  bool ScalarFunctionOf(const Node& n, int v) const {
    if (!n.domain.empty() || n.outputs.size() != 1 || g_.values[n.outputs[0]].dtype != DType::kF32 ||
        g_.values[n.outputs[0]].shape != g_.values[v].shape || n.inputs.empty() || n.inputs[0] < 0)
      return false;
    static const char* const kBinary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
    bool ok = false;
    if (const ops::OpDef* d = ops::FindOp(n.op_type)) ok = (d->traits & ops::kTraitElementwise) && n.op_type != "Cast";
    for (const char* b : kBinary) ok = ok || n.op_type == b;
    if (!ok) return false;
    int uses = 0;
    for (int in : n.inputs) {
      if (in < 0) continue;
      if (in == v) {
        ++uses;
        continue;
      }
      const ir::TensorData* c = Const(in);
      if (!c || c->numel() != 1) return false;
    }
    return uses == 1;
  }

  // DequantizeLinear -> [scalar functions] -> QuantizeLinear, per tensor with
  // constant parameters -> QLookup with the table those nodes compute.
  Status TryLookup(int i) {
    const Node& d = g_.nodes[i];
    const int x = In(d, 0);
    if (x < 0 || !IsQ(g_.values[x].dtype) || !ScalarConst(In(d, 1), DType::kF32)) return Status::Ok();
    if (In(d, 2) >= 0 && !ScalarConst(In(d, 2), DType::kUndefined)) return Status::Ok();
    std::vector<int> chain = {i};
    int v = d.outputs[0];
    int q = -1;
    for (int steps = 0; steps < 16; ++steps) {
      const int r = Sole(v);
      if (r < 0) return Status::Ok();
      const Node& n = g_.nodes[r];
      if (n.op_type == "QuantizeLinear" && n.domain.empty()) {
        if (!ScalarConst(In(n, 1), DType::kF32) || In(n, 2) < 0 || !ScalarConst(In(n, 2), DType::kUndefined))
          return Status::Ok();
        q = r;
        break;
      }
      if (!ScalarFunctionOf(n, v)) return Status::Ok();
      chain.push_back(r);
      v = n.outputs[0];
    }
    if (q < 0) return Status::Ok();
    // Every input value, through the very nodes of the chain.
    auto all = ir::TensorData::Make(g_.values[x].dtype, {256});
    for (int k = 0; k < 256; ++k) all->bytes[k] = static_cast<uint8_t>(g_.values[x].dtype == DType::kI8 ? k ^ 0x80 : k);
    ir::TensorPtr cur = all;
    int cur_value = x;
    for (int idx : chain) {
      const Node& n = g_.nodes[idx];
      std::vector<const ir::TensorData*> in;
      for (int k : n.inputs) in.push_back(k < 0 ? nullptr : k == cur_value ? cur.get() : Const(k));
      auto out = ops::Evaluate(n.op_type, ops::AttrsFromNode(n), in, 1);
      if (!out.ok()) return Status::Ok();  // not evaluable here: leave the nodes
      // Scalar parameters keep every intermediate [256].
      if (out.value()[0]->numel() != 256) return Status::Ok();
      cur = out.value()[0];
      cur_value = n.outputs[0];
    }
    const Node& qn = g_.nodes[q];
    std::vector<const ir::TensorData*> in = {cur.get(), Const(In(qn, 1)), Const(In(qn, 2))};
    auto table = ops::Evaluate(qn.op_type, ops::AttrsFromNode(qn), in, 1);
    if (!table.ok() || table.value()[0]->numel() != 256) return Status::Ok();
    const int t = g_.AddConstant(qn.name + "_table", table.value()[0]);
    chain.push_back(q);
    Commit(chain, ops::MakeQLookupNode(qn.name, x, t, qn.outputs[0]));
    return Status::Ok();
  }

  Graph& g_;
  const ir::UseIndex index_;  // the graph before this pass
  std::vector<bool> erase_;
  std::vector<int> replace_;
  std::vector<Node> fused_;
};

}  // namespace

Status FuseQuantized(ir::Graph& g) { return Fuser(g).Run(); }

}  // namespace fcb::passes
