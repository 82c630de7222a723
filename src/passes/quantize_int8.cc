// QuantizeInt8: the graph rewrite behind precision "int8". Every float Conv
// (1-D or 2-D, any group), MatMul and Gemm whose weight is a float32 constant
// becomes the dynamic-quantization form ONNX Runtime's quantize_dynamic
// writes:
//
//   x -> DynamicQuantizeLinear -> (xq uint8, x_scale, x_zero_point)
//   ConvInteger(xq, Wq, x_zero_point, w_zero_point)     (or MatMulInteger)
//     -> Cast(to float) -> Mul(., M) [-> Add(., bias)]
//   M = Mul(x_scale, w_scale)
//
// Weights are quantized at compile time per output channel (Conv: per row of
// W [M, C/g, k...]; MatMul/Gemm: per column of B [K, N]), symmetric int8:
// w_scale[c] = max|W[c]| / 127 (1 for an all-zero channel, whose quantized
// weights are then zero whatever the scale), Wq = saturate(round_half_even(
// W / w_scale)) in [-127, 127], zero point 0. Activations are quantized per
// run, per tensor (DynamicQuantizeLinear: uint8, asymmetric). One
// DynamicQuantizeLinear serves every rewritten consumer of a value.
//
// The rewritten op keeps the original node's name (errors name the user's
// node); the helper nodes are named after it ("<name>/cast", ...). The last
// node of the chain writes the original output value, so consumers and graph
// outputs are unchanged. The float weights lose their last use and
// EliminateDeadNodes removes them: the file stores only the int8 ones.
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/rounding.h"
#include "ops/names.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

bool IsF32(const ir::TensorData* t) { return t && t->dtype == ir::DType::kF32; }

// A weight matrix viewed as `channels` rows of `per` values each, channel c
// at data[c * stride_c + k * stride_k] (lets MatMul's B [K, N] be read per
// column without a copy).
struct WeightView {
  const float* data;
  int64_t channels, per, stride_c, stride_k;
  double alpha = 1.0;  // folded in before quantizing (Gemm)
  double at(int64_t c, int64_t k) const { return alpha * static_cast<double>(data[c * stride_c + k * stride_k]); }
};

// Per-channel symmetric quantization of `v` into `q` (laid out by `q_index`)
// and the channel scales.
template <typename IndexFn>
void QuantizePerChannel(const WeightView& v, int8_t* q, std::vector<float>* scales, IndexFn q_index) {
  scales->resize(v.channels);
  for (int64_t c = 0; c < v.channels; ++c) {
    double m = 0;
    for (int64_t k = 0; k < v.per; ++k) m = std::max(m, std::fabs(v.at(c, k)));
    float s = static_cast<float>(m / 127.0);
    if (!(s > 0.f) || !std::isfinite(s)) s = 1.f;  // all zeros (or a scale too small for float)
    (*scales)[c] = s;
    for (int64_t k = 0; k < v.per; ++k) {
      double r = RoundHalfEven(v.at(c, k) / static_cast<double>(s));
      r = std::min(127.0, std::max(-127.0, r));
      q[q_index(c, k)] = static_cast<int8_t>(r);
    }
  }
}

class Rewriter {
 public:
  explicit Rewriter(ir::Graph& g) : g_(g) {
    for (const auto& v : g.values) names_.insert(v.name);
  }

  Status Run() {
    std::vector<ir::Node> old = std::move(g_.nodes);
    g_.nodes.clear();
    for (ir::Node& n : old) {
      if (!TryRewrite(n)) g_.nodes.push_back(std::move(n));
    }
    return Status::Ok();
  }

 private:
  std::string Unique(const std::string& base) {
    std::string n = base;
    for (int i = 1; names_.count(n); ++i) n = base + "_" + std::to_string(i);
    names_.insert(n);
    return n;
  }

  int NewValue(const std::string& base, ir::DType dt, ir::Shape shape) {
    ir::Value v;
    v.name = Unique(base);
    v.dtype = dt;
    v.shape = std::move(shape);
    v.has_shape = true;
    return g_.AddValue(std::move(v));
  }

  int NewConstant(const std::string& base, std::shared_ptr<ir::TensorData> t) {
    ir::Value v;
    v.name = Unique(base);
    v.dtype = t->dtype;
    v.shape = t->shape;
    v.has_shape = true;
    v.constant = std::move(t);
    return g_.AddValue(std::move(v));
  }

  void Emit(const std::string& name, const std::string& op, std::vector<int> in, std::vector<int> out) {
    ir::Node n;
    n.name = name;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    g_.nodes.push_back(std::move(n));
  }

  struct Quantized {
    int xq, scale, zero_point;
  };

  // The DynamicQuantizeLinear outputs of float value x, made before the first
  // consumer that needs them.
  Quantized QuantizeInput(int x, const std::string& consumer) {
    auto it = dql_.find(x);
    if (it != dql_.end()) return it->second;
    const ir::Value xv = g_.values[x];  // copy: AddValue may reallocate
    Quantized q;
    q.xq = NewValue(xv.name + "_quantized", ir::DType::kU8, xv.shape);
    q.scale = NewValue(xv.name + "_scale", ir::DType::kF32, {});
    q.zero_point = NewValue(xv.name + "_zero_point", ir::DType::kU8, {});
    Emit(consumer + "/quantize_input", "DynamicQuantizeLinear", {x}, {q.xq, q.scale, q.zero_point});
    dql_.emplace(x, q);
    return q;
  }

  // acc (int32) -> Cast -> Mul(., Mul(x_scale, w_scale)) [-> Add(., bias)] -> out.
  void EmitTail(const std::string& name, int acc, const Quantized& q, const std::vector<float>& scales,
                const ir::Shape& scale_shape, int bias, int out) {
    const ir::Shape out_shape = g_.values[out].shape;
    const std::string oname = g_.values[out].name;
    const int cast = NewValue(oname + "_int32_as_float", ir::DType::kF32, out_shape);
    Emit(name + "/cast", "Cast", {acc}, {cast});
    g_.nodes.back().SetInt("to", 1);  // FLOAT
    const int ws = NewConstant(oname + "_weight_scale", ir::TensorData::FromFloats(scale_shape, scales));
    const int m = NewValue(oname + "_scale", ir::DType::kF32, scale_shape);
    Emit(name + "/scale", "Mul", {q.scale, ws}, {m});
    if (bias < 0) {
      Emit(name + "/rescale", "Mul", {cast, m}, {out});
      return;
    }
    const int scaled = NewValue(oname + "_rescaled", ir::DType::kF32, out_shape);
    Emit(name + "/rescale", "Mul", {cast, m}, {scaled});
    Emit(name + "/bias", "Add", {scaled, bias}, {out});
  }

  bool TryRewrite(const ir::Node& n) {
    if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() < 2 || n.inputs[0] < 0) return false;
    if (n.Has(ops::attr::kActivation)) return false;
    const int x = n.inputs[0], y = n.outputs[0];
    if (g_.values[x].dtype != ir::DType::kF32 || g_.values[y].dtype != ir::DType::kF32) return false;
    if (n.op_type == "Conv") return RewriteConv(n);
    if (n.op_type == "MatMul" || n.op_type == "Gemm") return RewriteMatMul(n);
    return false;
  }

  bool RewriteConv(const ir::Node& n) {
    const ir::TensorData* w = ConstInput(g_, n, 1);
    const ir::Value& xv = g_.values[n.inputs[0]];
    if (!IsF32(w) || (w->shape.size() != 3 && w->shape.size() != 4) || xv.shape.size() != w->shape.size())
      return false;
    const int64_t oc = w->shape[0];
    if (oc <= 0 || w->numel() == 0) return false;
    // Depthwise convolutions stay float: nine multiply-adds per output leave
    // int8 nothing to gain in speed (they are bound by memory traffic, which
    // the quantize pass in front of them adds to), and a per-tensor
    // activation scale over channels of very different ranges is where
    // quantization loses the most accuracy.
    const int64_t group = n.GetInt("group", 1);
    if (group > 1 && w->shape[1] == 1 && group == oc) return false;
    const int64_t per = w->numel() / oc;
    const ir::TensorData* b = nullptr;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      b = ConstInput(g_, n, 2);
      if (!IsF32(b) || b->numel() != oc) return false;
    }
    auto wq = ir::TensorData::Make(ir::DType::kI8, w->shape);
    std::vector<float> scales;
    QuantizePerChannel(WeightView{w->data<float>(), oc, per, per, 1}, wq->mutable_data<int8_t>(), &scales,
                       [per](int64_t c, int64_t k) { return c * per + k; });
    const std::string wname = g_.values[n.inputs[1]].name;
    // [oc, 1, 1] (2-D) or [oc, 1] (1-D): broadcasts against [N, oc, spatial...].
    ir::Shape per_channel(w->shape.size() - 1, 1);
    per_channel[0] = oc;
    int bias = -1;
    if (b) {
      auto bt = ir::TensorData::Make(ir::DType::kF32, per_channel);
      std::copy(b->data<float>(), b->data<float>() + oc, bt->mutable_data<float>());
      bias = NewConstant(g_.values[n.inputs[2]].name + "_per_channel", bt);
    }
    const int wqi = NewConstant(wname + "_int8", wq);
    const int wzp = NewConstant(wname + "_zero_point", ir::TensorData::Make(ir::DType::kI8, {oc}));
    const Quantized q = QuantizeInput(n.inputs[0], n.name);
    const int acc = NewValue(g_.values[n.outputs[0]].name + "_int32", ir::DType::kI32, g_.values[n.outputs[0]].shape);
    ir::Node ci;
    ci.name = n.name;
    ci.op_type = "ConvInteger";
    ci.inputs = {q.xq, wqi, q.zero_point, wzp};
    ci.outputs = {acc};
    for (const char* a : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}) {
      auto it = n.attrs.find(a);
      if (it != n.attrs.end()) ci.attrs.emplace(it->first, it->second);
    }
    g_.nodes.push_back(std::move(ci));
    EmitTail(n.name, acc, q, scales, per_channel, bias, n.outputs[0]);
    return true;
  }

  bool RewriteMatMul(const ir::Node& n) {
    const bool gemm = n.op_type == "Gemm";
    const ir::TensorData* b = ConstInput(g_, n, 1);
    const ir::Value& av = g_.values[n.inputs[0]];
    if (!IsF32(b) || b->shape.size() != 2 || av.shape.size() < 2) return false;
    if (gemm && (n.GetInt("transA", 0) != 0 || av.shape.size() != 2)) return false;
    const bool trans_b = gemm && n.GetInt("transB", 0) != 0;
    const int64_t k = trans_b ? b->shape[1] : b->shape[0];
    const int64_t cols = trans_b ? b->shape[0] : b->shape[1];
    if (k <= 0 || cols <= 0) return false;
    const double alpha = gemm ? n.GetFloat("alpha", 1.f) : 1.0;
    // Gemm's C: beta folded into a constant, or a fed C added as is when beta is 1.
    int bias = -1;
    std::shared_ptr<ir::TensorData> bias_t;
    if (gemm && n.inputs.size() > 2 && n.inputs[2] >= 0) {
      const float beta = n.GetFloat("beta", 1.f);
      const ir::Value& cv = g_.values[n.inputs[2]];
      if (cv.dtype != ir::DType::kF32) return false;
      if (cv.is_constant()) {
        if (beta != 1.f) {
          bias_t = ir::TensorData::Make(ir::DType::kF32, cv.shape);
          const float* src = cv.constant->data<float>();
          for (int64_t i = 0; i < cv.constant->numel(); ++i)
            bias_t->mutable_data<float>()[i] = static_cast<float>(static_cast<double>(beta) * src[i]);
        } else {
          bias = n.inputs[2];
        }
      } else if (beta == 1.f) {
        bias = n.inputs[2];
      } else {
        return false;
      }
    }
    if (!std::isfinite(alpha)) return false;
    auto wq = ir::TensorData::Make(ir::DType::kI8, {k, cols});
    std::vector<float> scales;
    // Column c of B' = B[:, c] (stride cols) or, transposed, row c of B.
    const WeightView view = trans_b ? WeightView{b->data<float>(), cols, k, k, 1, alpha}
                                    : WeightView{b->data<float>(), cols, k, 1, cols, alpha};
    QuantizePerChannel(view, wq->mutable_data<int8_t>(), &scales,
                       [cols](int64_t c, int64_t kk) { return kk * cols + c; });
    const std::string wname = g_.values[n.inputs[1]].name;
    if (bias_t) bias = NewConstant(g_.values[n.inputs[2]].name + "_times_beta", bias_t);
    const int wqi = NewConstant(wname + "_int8", wq);
    const int wzp = NewConstant(wname + "_zero_point", ir::TensorData::Make(ir::DType::kI8, {cols}));
    const Quantized q = QuantizeInput(n.inputs[0], n.name);
    const int acc = NewValue(g_.values[n.outputs[0]].name + "_int32", ir::DType::kI32, g_.values[n.outputs[0]].shape);
    Emit(n.name, "MatMulInteger", {q.xq, wqi, q.zero_point, wzp}, {acc});
    EmitTail(n.name, acc, q, scales, {cols}, bias, n.outputs[0]);
    return true;
  }

  ir::Graph& g_;
  std::set<std::string> names_;
  std::map<int, Quantized> dql_;
};

}  // namespace

Status QuantizeInt8(ir::Graph& g) { return Rewriter(g).Run(); }

}  // namespace fcb::passes
