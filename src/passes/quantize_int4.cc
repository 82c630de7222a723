// QuantizeInt4: the graph rewrite behind precision "int4" (the weights
// quantized; activations quantized per run to int8 by the MatMulNBits step
// at accuracy_level 4, or kept float with int4_activations "float").
//
//   MatMul(A [..., K], B)          B a float32 constant [K, N], or Transpose
//                                  of a constant [N, K] (a tied LM head whose
//                                  table is too large for constant folding)
//   Gemm(A [M, K], B, C)           transA = 0; B [K, N] or, transB, [N, K];
//                                  alpha folded into B before quantizing
//     -> com.microsoft.MatMulNBits(A, Bq, scales)  bits 4, block_size 32,
//        no zero points (the default 8), accuracy_level 4 (int8 activations
//        per block of a row, exact integer dot products: TargetOptions::
//        int4_activations "int8", the default) or 0 (float arithmetic,
//        "float")
//        [-> Add(., C) for Gemm's C; beta folded into a constant C, a fed C
//        only with beta 1]
//   Gather(T, ids) axis 0          T a float32 constant [V, H], ids int32/int64
//                                  token ids: a graph input, directly or
//                                  through Cast/Reshape/(Un)Squeeze/Flatten/
//                                  Identity (not, e.g., positions into a
//                                  rotary cos/sin table)
//     -> GatherRowsNBits(Tq, scales, ids): rows quantized along H in
//        blocks of 32, 8 bits (ops/internal/gather_rows_nbits.cc), each
//        gathered row dequantized as it is copied
//
// The quantization is quantize_int4.h's (symmetric, signed extreme -> -8 or
// -128, round half to even). The LM head is quantized at 8 bits, not 4: a
// rewritten MatMul/Gemm is the head when its output reaches a graph output
// through nothing but Reshape, Squeeze, Unsqueeze, Flatten, Identity, Add,
// Mul, Div or Tanh nodes (a bias, a soft cap), each the only reader of the
// value before it. Embedding tables are 8-bit likewise. `int4_head` makes
// both 4-bit.
//
// Left float: weights of fewer than kInt4MinElements (1024) elements (a
// block scale per 32 values and the panel padding to 16 columns buy little
// there, and such layers are a rounding error of a model's bytes), K or N
// past the packed kernel's bounds (K > 2^16), B with a non-finite value, A
// not float32. Results change by the quantization error, on request.
#include "passes/quantize_int4.h"

#include <algorithm>
#include <cmath>

#include "ops/names.h"
#include "ops/params.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

using ir::DType;

constexpr int64_t kMaxK = int64_t{1} << 16;  // MatMulNBitsPacked's largest K

bool AllFinite(const ir::TensorData& t) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// Whether `v` reaches a graph output through single-reader pass-through nodes
// (the head rule above).
bool ReachesOutput(const ir::Graph& g, const ir::UseIndex& uses, int v) {
  static const char* const kThrough[] = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity",
                                         "Add",     "Mul",     "Div",       "Tanh"};
  for (int hops = 0; hops < 16; ++hops) {
    if (uses.IsGraphOutput(v)) return true;
    const int r = uses.SoleReader(v);
    if (r < 0) return false;
    const ir::Node& n = g.nodes[r];
    if (!n.domain.empty() || n.outputs.size() != 1 ||
        std::none_of(std::begin(kThrough), std::end(kThrough), [&](const char* op) { return n.op_type == op; }))
      return false;
    v = n.outputs[0];
  }
  return false;
}

// Whether `v` is token ids: an integer graph input, directly or through
// Cast, Reshape, Squeeze, Unsqueeze, Flatten or Identity (the embedding rule).
bool IsTokenIds(const ir::Graph& g, const ir::UseIndex& uses, int v) {
  static const char* const kThrough[] = {"Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"};
  for (int hops = 0; hops < 16; ++hops) {
    if (IsGraphInput(g, v)) return true;
    const int p = uses.Producer(v);
    if (p < 0) return false;
    const ir::Node& n = g.nodes[p];
    if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0 ||
        std::none_of(std::begin(kThrough), std::end(kThrough), [&](const char* op) { return n.op_type == op; }))
      return false;
    v = n.inputs[0];
  }
  return false;
}

}  // namespace

float QuantizeBlockSymmetric(const float* w, int64_t len, int64_t stride, int bits, int8_t* q) {
  const int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
  float e = 0.0f;
  for (int64_t i = 0; i < len; ++i)
    if (std::fabs(w[i * stride]) > std::fabs(e)) e = w[i * stride];
  if (e == 0.0f) {
    std::fill(q, q + len, int8_t{0});
    return 0.0f;
  }
  const float scale = e / static_cast<float>(lo);
  for (int64_t i = 0; i < len; ++i) {
    const float r = std::nearbyint(w[i * stride] / scale);  // the default rounding mode: half to even
    q[i] = static_cast<int8_t>(std::clamp(r, static_cast<float>(lo), static_cast<float>(hi)));
  }
  return scale;
}

NBitsOperands QuantizeNBits(const float* w, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, int bits) {
  NBitsOperands r;
  r.blocks = (k + kInt4Block - 1) / kInt4Block;
  const int64_t blob = kInt4Block * bits / 8;
  r.b = ir::TensorData::Make(DType::kU8, {n, r.blocks, blob});
  r.scales = ir::TensorData::Make(DType::kF32, {n * r.blocks});
  uint8_t* ob = r.b->mutable_data<uint8_t>();
  float* os = r.scales->mutable_data<float>();
  const int zero = 1 << (bits - 1);
  int8_t q[kInt4Block];
  for (int64_t nn = 0; nn < n; ++nn) {
    for (int64_t bb = 0; bb < r.blocks; ++bb) {
      const int64_t k0 = bb * kInt4Block, len = std::min(kInt4Block, k - k0);
      std::fill(q, q + kInt4Block, int8_t{0});
      os[nn * r.blocks + bb] = QuantizeBlockSymmetric(w + k0 * stride_k + nn * stride_n, len, stride_k, bits, q);
      uint8_t* out = ob + (nn * r.blocks + bb) * blob;
      if (bits == 8) {
        for (int64_t i = 0; i < kInt4Block; ++i) out[i] = static_cast<uint8_t>(q[i] + zero);
      } else {
        for (int64_t i = 0; i < kInt4Block; i += 2)
          out[i / 2] = static_cast<uint8_t>((q[i] + zero) | ((q[i + 1] + zero) << 4));
      }
    }
  }
  return r;
}

Status QuantizeInt4(ir::Graph& g, bool int4_head, bool float_activations) {
  const ir::UseIndex uses(g);
  const int head_bits = int4_head ? 4 : 8;
  std::vector<ir::Node> out;
  out.reserve(g.nodes.size());
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const bool gemm = n.op_type == "Gemm", matmul = n.op_type == "MatMul", gather = n.op_type == "Gather";
    if (!n.domain.empty() || !(gemm || matmul || gather) || n.outputs.size() != 1 || n.inputs.size() < 2 ||
        n.inputs[0] < 0 || n.inputs[1] < 0) {
      out.push_back(n);  // a copy: later rewrites look back at g.nodes
      continue;
    }
    const std::string base = n.name.empty() ? g.values[n.outputs[0]].name : n.name;
    if (gather) {
      // Gather(T [V, H] constant float, ids) along axis 0.
      const ir::TensorData* t = g.values[n.inputs[0]].constant.get();
      const ir::Value& ids = g.values[n.inputs[1]];
      int64_t axis = n.GetInt("axis", 0);
      if (!t || t->dtype != DType::kF32 || t->shape.size() != 2 || (axis != 0 && axis != -2) || ids.is_constant() ||
          (ids.dtype != DType::kI64 && ids.dtype != DType::kI32) || !IsTokenIds(g, uses, n.inputs[1]) ||
          t->numel() < kInt4MinElements ||
          t->shape[1] > kMaxK || !AllFinite(*t)) {
        out.push_back(n);  // a copy: later rewrites look back at g.nodes
        continue;
      }
      const int64_t v = t->shape[0], h = t->shape[1];
      // Table rows play the part of QuantizeNBits' n: W [h][v], element (k, row) at t[row * h + k].
      NBitsOperands q = QuantizeNBits(t->data<float>(), h, v, 1, h, head_bits);
      ir::Node gq;
      gq.name = n.name;
      gq.op_type = std::string(ops::opname::GatherRowsNBits);
      gq.domain = "fcb";
      gq.inputs = {g.AddConstant(g.UniqueName(base + "/qtable"), q.b),
                   g.AddConstant(g.UniqueName(base + "/qscale"), q.scales), n.inputs[1]};
      gq.outputs = n.outputs;
      gq.SetInt(std::string(ops::attr::kColumns), h);
      gq.SetInt(std::string(ops::attr::kBits), head_bits);
      gq.SetInt(std::string(ops::attr::kBlockSize), kInt4Block);
      out.push_back(std::move(gq));
      changed = true;
      continue;
    }
    const ir::Value& av = g.values[n.inputs[0]];
    const ir::TensorData* b = g.values[n.inputs[1]].constant.get();
    // A tied LM head: MatMul(x, Transpose(E)) with the table E [V, H] too large
    // for constant folding to have transposed it: B = E^T, read transposed.
    bool b_transposed = false;
    if (!b && matmul) {
      const int p = uses.Producer(n.inputs[1]);
      if (p >= 0) {
        const ir::Node& t = g.nodes[p];
        const ir::TensorData* e = t.inputs.size() == 1 && t.inputs[0] >= 0 ? g.values[t.inputs[0]].constant.get()
                                                                            : nullptr;
        if (t.domain.empty() && t.op_type == "Transpose" && e && e->shape.size() == 2 &&
            t.GetInts("perm", {1, 0}) == std::vector<int64_t>{1, 0}) {
          b = e;
          b_transposed = true;
        }
      }
    }
    if (av.is_constant() || av.dtype != DType::kF32 || av.shape.empty() || !b || b->dtype != DType::kF32 ||
        b->shape.size() != 2 || (matmul && n.inputs.size() != 2) || n.Has(ops::attr::kActivation)) {
      out.push_back(n);  // a copy: later rewrites look back at g.nodes
      continue;
    }
    const bool trans_b = (gemm && n.GetInt("transB", 0) != 0) || b_transposed;
    const int64_t k = trans_b ? b->shape[1] : b->shape[0], cols = trans_b ? b->shape[0] : b->shape[1];
    int bias = -1;
    std::shared_ptr<ir::TensorData> bias_t;
    double alpha = 1.0;
    bool ok = av.shape.back() == k && k <= kMaxK && cols <= ops::kMaxChannels && b->numel() >= kInt4MinElements &&
              AllFinite(*b);
    if (ok && gemm) {
      alpha = n.GetFloat("alpha", 1.f);
      ok = n.GetInt("transA", 0) == 0 && av.shape.size() == 2 && std::isfinite(alpha);
      if (ok && n.inputs.size() > 2 && n.inputs[2] >= 0) {
        const float beta = n.GetFloat("beta", 1.f);
        const ir::Value& cv = g.values[n.inputs[2]];
        if (cv.dtype != DType::kF32) {
          ok = false;
        } else if (beta == 1.f) {
          bias = n.inputs[2];
        } else if (cv.is_constant()) {
          bias_t = ir::TensorData::Make(DType::kF32, cv.shape);
          for (int64_t j = 0; j < cv.constant->numel(); ++j)
            bias_t->mutable_data<float>()[j] =
                static_cast<float>(static_cast<double>(beta) * cv.constant->data<float>()[j]);
        } else {
          ok = false;
        }
      }
    }
    if (!ok) {
      out.push_back(n);  // a copy: later rewrites look back at g.nodes
      continue;
    }
    const bool head = ReachesOutput(g, uses, n.outputs[0]);
    const int bits = head ? head_bits : 4;
    std::vector<float> scaled;
    const float* w = b->data<float>();
    if (alpha != 1.0) {
      scaled.resize(b->numel());
      for (int64_t j = 0; j < b->numel(); ++j) scaled[j] = static_cast<float>(alpha * static_cast<double>(w[j]));
      if (!std::all_of(scaled.begin(), scaled.end(), [](float x) { return std::isfinite(x); })) {
        out.push_back(n);  // alpha * B overflows float: left in float
        continue;
      }
      w = scaled.data();
    }
    NBitsOperands q = trans_b ? QuantizeNBits(w, k, cols, 1, k, bits) : QuantizeNBits(w, k, cols, cols, 1, bits);
    ir::Node nb;
    nb.name = n.name;
    nb.op_type = "com.microsoft.MatMulNBits";  // the import's name: domain and op type, domain cleared
    nb.inputs = {n.inputs[0], g.AddConstant(g.UniqueName(base + "/qweight"), q.b),
                 g.AddConstant(g.UniqueName(base + "/qscale"), q.scales)};
    nb.SetInt("K", k);
    nb.SetInt("N", cols);
    nb.SetInt("bits", bits);
    nb.SetInt("block_size", kInt4Block);
    nb.SetInt("accuracy_level", float_activations ? 0 : 4);
    if (bias_t) bias = g.AddConstant(g.UniqueName(base + "/bias_times_beta"), bias_t);
    if (bias < 0) {
      nb.outputs = n.outputs;
      out.push_back(std::move(nb));
    } else {
      const ir::Value& yv = g.values[n.outputs[0]];
      const int y = NewValue(g, yv.name + "_unbiased", DType::kF32, yv.shape);
      nb.outputs = {y};
      ir::Node add;
      add.name = base + "/bias";
      add.op_type = "Add";
      add.inputs = {y, bias};
      add.outputs = n.outputs;
      out.push_back(std::move(nb));
      out.push_back(std::move(add));
    }
    changed = true;
  }
  g.nodes = std::move(out);
  return changed ? g.Validate() : Status::Ok();
}

}  // namespace fcb::passes
