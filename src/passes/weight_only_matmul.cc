// WeightOnlyInt8MatMul: a MatMul whose weight is a dequantized constant int8
// or uint8 matrix, as weight-only quantization writes it,
//
//   y = MatMul(A [..., K], DequantizeLinear(Wq [K, N], scale, zero_point))
//   y = MatMul(A, DequantizeLinear(Transpose(Wq [N, K])))    (a tied embedding
//   y = MatMul(A, Transpose(DequantizeLinear(Wq [N, K])))     read as LM head)
//
// with scale and zero point constants, per tensor or per column (the axis of
// the dequantization runs along N), becomes
//
//   y = com.microsoft.MatMulNBits(A, B, scales, zero_points)   bits 8
//
// whose lowering (ops/internal/matmul_nbits_packed.cc) packs the weight once,
// still 8-bit, and runs it as a GEMV per row (decode) or dequantizes panels
// into the GEMM (prefill). The weight is then read as bytes at run time
// instead of a float copy that the graph would otherwise rebuild every run
// (a weight above the constant-fold limit) or hold at four times the size.
//
// Exactness: MatMulNBits' w = scale[n][b] * (q - zp[n][b]) with the column's
// scale replicated into every block along K is the same float product as
// DequantizeLinear's (q - zp) * scale; int8 q becomes uint8 q + 128 with zero
// point zp + 128 (the difference q - zp is unchanged). The block size is the
// power of two in [16, 2^16] that pads K least (the fewest blocks among ties).
//
// When: a weight of more than `fold_limit` elements always (FoldConstants
// leaves it, so the graph would dequantize it on every run; the packed form
// reads it once per run either way). A smaller weight only when A has at
// most kGemvRows rows (at the bound, so at every size a range allows): there
// the 8-bit GEMV beat the float GEMV of the folded weight 2.3-4.2x (K x N
// from 256 x 256 to 1024 x 4096, one thread, AMD EPYC, AVX-512), while with
// 16 rows the float GEMM with prepacked weights was 3.5-10x faster than
// dequantizing panels into it, so those stay float.
// Anything else (per-row scales along K, blocked DequantizeLinear, a weight
// that is not constant, A not float32, K > 2^16) is left unchanged. The
// DequantizeLinear and Transpose stay for their other readers (a Gather of
// the same table), or go with EliminateDeadNodes.
#include <algorithm>

#include "ops/params.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

using ir::DType;

// The packed kernel's largest K (kMaxK in matmul_nbits_packed.cc).
constexpr int64_t kMaxK = int64_t{1} << 16;
// Rows of A up to which the packed kernel runs a GEMV per row (kGemvRows
// there).
constexpr int64_t kGemvRows = 2;

bool IsPlainTranspose(const ir::Graph& g, const ir::Node& t) {
  if (t.inputs.size() != 1 || t.outputs.size() != 1 || t.inputs[0] < 0) return false;
  if (g.values[t.inputs[0]].shape.size() != 2) return false;
  const std::vector<int64_t> perm = t.GetInts("perm", {1, 0});
  return perm == std::vector<int64_t>{1, 0};
}

// Whether `t` is per tensor (one element) or a vector along an axis of `len`.
bool PerIndex(const ir::TensorData* t, int64_t len) {
  return t && (t->numel() == 1 || (t->shape.size() == 1 && t->shape[0] == len));
}

// The power of two in [16, 2^16] that pads k least; the larger one among ties.
int64_t ChooseBlock(int64_t k) {
  int64_t best = 16, best_pad = -1;
  for (int64_t b = 16; b <= kMaxK; b *= 2) {
    const int64_t padded = (k + b - 1) / b * b;
    if (best_pad < 0 || padded <= best_pad) best = b, best_pad = padded;  // ties: the larger block
    if (b >= k) break;                                                    // larger blocks only pad more
  }
  return best;
}

}  // namespace

Status WeightOnlyInt8MatMul(ir::Graph& g, int64_t fold_limit) {
  const PatternMatcher pm(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& mm = g.nodes[i];
    if (!mm.domain.empty() || mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const int a = mm.inputs[0];
    if (a < 0 || mm.inputs[1] < 0 || g.values[a].is_constant() || g.values[a].dtype != DType::kF32 ||
        g.values[a].shape.empty())
      continue;
    // B = [Transpose] (DequantizeLinear ([Transpose] (constant))).
    int b = mm.inputs[1];
    bool transposed = false;
    if (const ir::Node* t = pm.Producer(b, "Transpose")) {
      if (!IsPlainTranspose(g, *t)) continue;
      transposed = true;
      b = t->inputs[0];
    }
    const ir::Node* dq = pm.Producer(b, "DequantizeLinear");
    if (!dq || dq->inputs.size() < 2 || dq->inputs[0] < 0) continue;
    int q = dq->inputs[0];
    bool q_transposed = false;
    if (const ir::Node* t = pm.Producer(q, "Transpose")) {
      if (!IsPlainTranspose(g, *t)) continue;
      q_transposed = true;
      q = t->inputs[0];
    }
    const ir::TensorData* wq = g.values[q].constant.get();
    if (!wq || (wq->dtype != DType::kI8 && wq->dtype != DType::kU8) || wq->shape.size() != 2) continue;
    if (dq->GetInt("block_size", 0) != 0) continue;
    const ir::TensorData* scale = ConstInput(g, *dq, 1);
    const ir::TensorData* zp = ConstInput(g, *dq, 2);
    const bool has_zp = dq->inputs.size() > 2 && dq->inputs[2] >= 0;
    if (!scale || scale->dtype != DType::kF32 || (has_zp && (!zp || zp->dtype != wq->dtype))) continue;
    // The DequantizeLinear's input D is Wq or Wq^T; B is D or D^T.
    const ir::Shape d_shape =
        q_transposed ? ir::Shape{wq->shape[1], wq->shape[0]} : ir::Shape{wq->shape[0], wq->shape[1]};
    const bool wq_is_nk = transposed != q_transposed;  // Wq is [N, K] (else [K, N])
    const int64_t k = wq_is_nk ? wq->shape[1] : wq->shape[0], n = wq_is_nk ? wq->shape[0] : wq->shape[1];
    if (g.values[a].shape.back() != k || k > kMaxK || n > ops::kMaxChannels) continue;
    const int64_t rows = ir::NumElements(g.values[a].shape) / k;
    if (k * n <= fold_limit && rows > kGemvRows) continue;
    // Per-axis parameters must run along N: D's axis 1, or 0 when B = D^T.
    int64_t axis = dq->GetInt("axis", 1);
    if (axis < 0) axis += 2;
    const bool per_tensor = scale->numel() == 1 && (!has_zp || zp->numel() == 1);
    if (!per_tensor) {
      const int64_t n_axis = transposed ? 0 : 1;
      if (axis != n_axis || !PerIndex(scale, d_shape[n_axis]) || (has_zp && !PerIndex(zp, d_shape[n_axis]))) continue;
    }
    // MatMulNBits' operands: B [N, blocks, block] uint8, scales and zero points
    // [N * blocks].
    const int64_t block = ChooseBlock(k), blocks = (k + block - 1) / block;
    const int shift = wq->dtype == DType::kI8 ? 128 : 0;
    auto qb = ir::TensorData::Make(DType::kU8, {n, blocks, block});
    auto qs = ir::TensorData::Make(DType::kF32, {n * blocks});
    auto qz = ir::TensorData::Make(DType::kU8, {n * blocks});
    uint8_t* ob = qb->mutable_data<uint8_t>();
    std::fill(qb->bytes.begin(), qb->bytes.end(), uint8_t{0});
    const uint8_t* src = wq->data<uint8_t>();
    const bool sgn = wq->dtype == DType::kI8;
    auto at = [&](int64_t kk, int64_t nn) {
      const uint8_t v = wq_is_nk ? src[nn * k + kk] : src[kk * n + nn];
      return static_cast<uint8_t>(sgn ? static_cast<int>(static_cast<int8_t>(v)) + shift : v);
    };
    for (int64_t nn = 0; nn < n; ++nn) {
      uint8_t* col = ob + nn * blocks * block;
      for (int64_t kk = 0; kk < k; ++kk) col[kk] = at(kk, nn);  // the padding past k stays 0
      const float s = scale->data<float>()[scale->numel() == 1 ? 0 : nn];
      int z = 0;
      if (has_zp) {
        const int64_t zi = zp->numel() == 1 ? 0 : nn;
        z = sgn ? static_cast<int>(zp->data<int8_t>()[zi]) : static_cast<int>(zp->data<uint8_t>()[zi]);
      }
      for (int64_t bb = 0; bb < blocks; ++bb) {
        qs->mutable_data<float>()[nn * blocks + bb] = s;
        qz->mutable_data<uint8_t>()[nn * blocks + bb] = static_cast<uint8_t>(z + shift);
      }
    }
    const std::string base = mm.name.empty() ? g.values[mm.outputs[0]].name : mm.name;
    ir::Node nb;
    nb.name = mm.name;
    nb.op_type = "com.microsoft.MatMulNBits";  // the import's name: domain and op type, domain cleared
    nb.inputs = {a, g.AddConstant(g.UniqueName(base + "/qweight"), qb),
                 g.AddConstant(g.UniqueName(base + "/qscale"), qs),
                 g.AddConstant(g.UniqueName(base + "/qzero_point"), qz)};
    nb.outputs = mm.outputs;
    nb.SetInt("K", k);
    nb.SetInt("N", n);
    nb.SetInt("bits", 8);
    nb.SetInt("block_size", block);
    g.nodes[i] = std::move(nb);
    changed = true;
  }
  return changed ? g.Validate() : Status::Ok();
}

}  // namespace fcb::passes
