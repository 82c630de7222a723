// MatMul (NumPy semantics: 1-D promotion, broadcast batch dims) and Gemm with
// variable operands. Constant-weight Gemm/MatMul are lowered to GemmPacked
// (ops/internal/gemm_packed.cc); what reaches these kernels has both operands known
// only at run time, so nothing is packed here.
//
// float32 calls the target's matmul kernel on blocks of kRowBlock rows; each
// (batch, row block) pair is one work item for the thread pool. Transposed
// Gemm operands and integer MatMul use plain loops.
#include <type_traits>

#include "ops/families.h"
#include "ops/matmul_geom.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr int64_t kRowBlock = 16;

// --- MatMul ----------------------------------------------------------------------------

Status MatMulShapes(const InferContext& c, MatMulGeom* g, ir::Shape* out) {
  const TensorInfo &a = Input(c, 0), &b = Input(c, 1);
  if (!a.present() || !b.present()) return OpError(c.op, "needs two inputs");
  if (a.dtype != b.dtype) return OpError(c.op, "inputs have different dtypes");
  if (a.dtype != DType::kF32 && a.dtype != DType::kI32 && a.dtype != DType::kI64)
    return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(a.dtype));
  return MatMulGeometry(c.op, a.shape, b.shape, g, out);
}

}  // namespace

Status MatMulGeometry(std::string_view op, std::span<const int64_t> a, std::span<const int64_t> b, MatMulDims* g) {
  if (a.empty() || b.empty()) return OpError(op, "inputs must have rank >= 1");
  // A 1-D A is a row [1, K], a 1-D B a column [K, 1] (read in place, not copied).
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  g->M = a_vec ? 1 : a[a.size() - 2];
  g->K = a.back();
  g->N = b_vec ? 1 : b.back();
  if ((b_vec ? b[0] : b[b.size() - 2]) != g->K)
    return OpError(op, "inner dims differ: " + ir::ShapeToString(ir::Shape(a.begin(), a.end())) + " x " +
                           ir::ShapeToString(ir::Shape(b.begin(), b.end())));
  // The batch dims (all but the matrix dims), broadcast right-aligned.
  const size_t na = a.size() - (a_vec ? 1 : 2), nb = b.size() - (b_vec ? 1 : 2);
  const size_t n = std::max(na, nb);
  if (n > static_cast<size_t>(kMaxRank)) return OpUnsupported(op, "too many batch dims");
  g->batch.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < na ? a[na - 1 - i] : 1, db = i < nb ? b[nb - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return OpError(op, "shapes " + ir::ShapeToString(ir::Shape(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(na))) +
                             " and " + ir::ShapeToString(ir::Shape(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(nb))) +
                             " cannot be broadcast");
    g->batch[n - 1 - i] = da == 1 ? db : da;
  }
  // Batch strides, right-aligned; a broadcast dim steps 0.
  auto strides = [&](std::span<const int64_t> s, size_t ns, int64_t mat, PlanDims* st) {
    st->assign(n, 0);
    int64_t step = mat;
    for (size_t i = 0; i < ns; ++i) {
      const size_t d = ns - 1 - i;
      (*st)[n - 1 - i] = s[d] == 1 ? 0 : step;
      step *= s[d];
    }
  };
  strides(a, na, g->M * g->K, &g->a_bst);
  strides(b, nb, g->K * g->N, &g->b_bst);
  int64_t batches = 1;  // as SafeProduct: -1 past kMaxElements (the output's check refuses it)
  for (size_t i = 0; i < n && batches >= 0; ++i) {
    const int64_t d = g->batch[i];
    if (d < 0 || (d > 0 && batches > kMaxElements / d)) batches = -1;
    else batches *= d;
  }
  g->batches = batches;
  return Status::Ok();
}

Status MatMulGeometry(std::string_view op, const ir::Shape& a, const ir::Shape& b, MatMulGeom* g, ir::Shape* out) {
  MatMulDims d;
  FCB_RETURN_IF_ERROR(MatMulGeometry(op, a, b, &d));
  // Output dims are checked against kMaxElements by the infer wrapper; their
  // product cannot overflow here (each dim is at most an input's).
  g->M = d.M, g->N = d.N, g->K = d.K, g->batches = d.batches;
  g->batch.assign(d.batch.v.begin(), d.batch.v.begin() + static_cast<std::ptrdiff_t>(d.batch.size()));
  g->a_bst.assign(d.a_bst.v.begin(), d.a_bst.v.begin() + static_cast<std::ptrdiff_t>(d.a_bst.size()));
  g->b_bst.assign(d.b_bst.v.begin(), d.b_bst.v.begin() + static_cast<std::ptrdiff_t>(d.b_bst.size()));
  out->clear();
  out->reserve(g->batch.size() + 2);
  out->assign(g->batch.begin(), g->batch.end());
  if (a.size() != 1) out->push_back(g->M);
  if (b.size() != 1) out->push_back(g->N);
  return Status::Ok();
}

namespace {

// Offsets of batch item `b` in A and B.
inline void BatchOffsets(const MatMulDims& g, int64_t b, int64_t* ao, int64_t* bo) {
  *ao = *bo = 0;
  for (size_t d = g.batch.size(); d-- > 0;) {
    const int64_t i = b % g.batch[d];
    b /= g.batch[d];
    *ao += i * g.a_bst[d];
    *bo += i * g.b_bst[d];
  }
}

template <typename T>
void IntMatMulRows(const T* a, const T* b, T* y, int64_t N, int64_t K, int64_t m0, int64_t m1) {
  using U = std::make_unsigned_t<T>;  // wrap on overflow instead of undefined behaviour
  for (int64_t m = m0; m < m1; ++m) {
    T* yr = y + m * N;
    for (int64_t n = 0; n < N; ++n) yr[n] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const U av = static_cast<U>(a[m * K + k]);
      const T* br = b + k * N;
      for (int64_t n = 0; n < N; ++n)
        yr[n] = static_cast<T>(static_cast<U>(yr[n]) + av * static_cast<U>(br[n]));
    }
  }
}

Result<std::unique_ptr<Kernel>> CreateMatMul(const CreateContext& c) {
  MatMulDims made;
  FCB_RETURN_IF_ERROR(MatMulGeometry(c.op, c.inputs[0].shape, c.inputs[1].shape, &made));
  const DType t = c.inputs[0].dtype;
  return MakeAdaptingKernel([made, t](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    MatMulDims at;
    if (ctx.shapes) FCB_RETURN_IF_ERROR(MatMulGeometry("MatMul", ctx.shapes[0], ctx.shapes[1], &at));
    const MatMulDims& g = ctx.shapes ? at : made;
    const int64_t blocks = (g.M + kRowBlock - 1) / kRowBlock;
    const int64_t items = g.batches * blocks;
    const int64_t per_item = std::max<int64_t>(1, std::min(g.M, kRowBlock) * g.N * std::max<int64_t>(g.K, 1));
    auto body = [&](auto tag) {
      using T = decltype(tag);
      const T* a = static_cast<const T*>(in[0]);
      const T* b = static_cast<const T*>(in[1]);
      T* y = static_cast<T*>(out[0]);
      ctx.pool->ParallelFor(items, GrainFor(per_item, 1 << 16), [&](int64_t s0, int64_t e0) {
        for (int64_t it = s0; it < e0; ++it) {
          const int64_t bi = it / blocks, m0 = (it % blocks) * kRowBlock;
          const int64_t m1 = std::min(g.M, m0 + kRowBlock);
          int64_t ao, bo;
          BatchOffsets(g, bi, &ao, &bo);
          T* yb = y + bi * g.M * g.N;
          if (g.K == 0) {
            std::fill(yb + m0 * g.N, yb + m1 * g.N, T(0));
          } else if constexpr (std::is_same_v<T, float>) {
            ctx.k->f32.matmul(g.M, g.N, g.K, a + ao, g.K, b + bo, g.N, yb, g.N, m0, m1);
          } else {
            IntMatMulRows(a + ao, b + bo, yb, g.N, g.K, m0, m1);
          }
        }
      });
    };
    if (t == DType::kF32) body(float{});
    else if (t == DType::kI32) body(int32_t{});
    else body(int64_t{});
    return Status::Ok();
  });
}

// --- Gemm -------------------------------------------------------------------------------

struct GemmParams {
  int64_t M = 0, N = 0, K = 0;
  bool ta = false, tb = false;
  float alpha = 1, beta = 1;
  bool has_c = false;
  int64_t c_sm = 0, c_sn = 0;  // C strides over (m, n); 0 = broadcast
};

Status ParseGemm(const InferContext& c, GemmParams* p) {
  const TensorInfo &a = Input(c, 0), &b = Input(c, 1), &cc = Input(c, 2);
  if (!a.present() || !b.present()) return OpError(c.op, "needs A and B");
  if (a.dtype != DType::kF32 || b.dtype != DType::kF32)
    return OpUnsupported(c.op, "only float32 is supported");
  if (a.shape.size() != 2 || b.shape.size() != 2) return OpError(c.op, "A and B must be 2-D");
  p->ta = c.attrs.GetInt("transA", 0) != 0;
  p->tb = c.attrs.GetInt("transB", 0) != 0;
  p->alpha = c.attrs.GetFloat("alpha", 1.0f);
  p->beta = c.attrs.GetFloat("beta", 1.0f);
  p->M = p->ta ? a.shape[1] : a.shape[0];
  p->K = p->ta ? a.shape[0] : a.shape[1];
  const int64_t kb = p->tb ? b.shape[1] : b.shape[0];
  p->N = p->tb ? b.shape[0] : b.shape[1];
  if (kb != p->K)
    return OpError(c.op, "inner dims differ: A " + ir::ShapeToString(a.shape) + ", B " +
                             ir::ShapeToString(b.shape));
  if (cc.present()) {
    if (cc.dtype != DType::kF32) return OpError(c.op, "C must be float32");
    if (cc.shape.size() > 2) return OpError(c.op, "C must have rank <= 2");
    const int64_t cm = cc.shape.size() == 2 ? cc.shape[0] : 1;
    const int64_t cn = cc.shape.empty() ? 1 : cc.shape.back();
    if ((cm != 1 && cm != p->M) || (cn != 1 && cn != p->N))
      return OpError(c.op, "C " + ir::ShapeToString(cc.shape) + " does not broadcast to " +
                               std::to_string(p->M) + "x" + std::to_string(p->N));
    p->has_c = p->beta != 0;
    p->c_sn = cn == 1 ? 0 : 1;
    p->c_sm = cm == 1 ? 0 : cn;
  }
  return Status::Ok();
}

Status InferGemm(const InferContext& c, std::vector<TensorInfo>* outs) {
  GemmParams p;
  FCB_RETURN_IF_ERROR(ParseGemm(c, &p));
  outs->push_back(TensorInfo{DType::kF32, {p.M, p.N}});
  return Status::Ok();
}

// Rows [m0, m1) of op(A) * op(B) for the transposed layouts (plain loops).
void GemmRowsTransposed(const GemmParams& p, const float* a, const float* b, float* y, int64_t m0,
                        int64_t m1) {
  const int64_t M = p.M, N = p.N, K = p.K;
  for (int64_t m = m0; m < m1; ++m) {
    float* yr = y + m * N;
    if (p.tb) {
      for (int64_t n = 0; n < N; ++n) {
        float acc = 0;
        const float* br = b + n * K;  // B is [N][K]
        if (p.ta) for (int64_t k = 0; k < K; ++k) acc += a[k * M + m] * br[k];
        else for (int64_t k = 0; k < K; ++k) acc += a[m * K + k] * br[k];
        yr[n] = acc;
      }
    } else {  // transA only: A is [K][M]
      for (int64_t n = 0; n < N; ++n) yr[n] = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float av = a[k * M + m];
        const float* br = b + k * N;
        for (int64_t n = 0; n < N; ++n) yr[n] += av * br[n];
      }
    }
  }
}

Result<std::unique_ptr<Kernel>> CreateGemm(const CreateContext& c) {
  GemmParams p;
  FCB_RETURN_IF_ERROR(ParseGemm(AsInfer(c), &p));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* a = static_cast<const float*>(in[0]);
    const float* b = static_cast<const float*>(in[1]);
    const float* cc = p.has_c ? static_cast<const float*>(in[2]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const int64_t blocks = (p.M + kRowBlock - 1) / kRowBlock;
    const int64_t per_item = std::max<int64_t>(1, std::min(p.M, kRowBlock) * p.N * std::max<int64_t>(p.K, 1));
    ctx.pool->ParallelFor(blocks, GrainFor(per_item, 1 << 16), [&](int64_t s0, int64_t e0) {
      for (int64_t blk = s0; blk < e0; ++blk) {
        const int64_t m0 = blk * kRowBlock, m1 = std::min(p.M, m0 + kRowBlock);
        if (p.K == 0) std::fill(y + m0 * p.N, y + m1 * p.N, 0.0f);
        else if (!p.ta && !p.tb) ctx.k->f32.matmul(p.M, p.N, p.K, a, p.K, b, p.N, y, p.N, m0, m1);
        else GemmRowsTransposed(p, a, b, y, m0, m1);
        if (p.alpha == 1.0f && !cc) continue;
        for (int64_t m = m0; m < m1; ++m) {
          float* yr = y + m * p.N;
          if (cc) {
            const float* cr = cc + m * p.c_sm;
            for (int64_t n = 0; n < p.N; ++n) yr[n] = p.alpha * yr[n] + p.beta * cr[n * p.c_sn];
          } else {
            for (int64_t n = 0; n < p.N; ++n) yr[n] *= p.alpha;
          }
        }
      }
    });
    return Status::Ok();
  });
}

// MatMul and Gemm: 2 x (output elements) x (the reduced dimension).
uint64_t MatMulFlops(const CreateContext& c) {
  if (c.inputs.empty() || c.outputs.empty() || c.inputs[0].shape.empty()) return 0;
  const auto& a = c.inputs[0].shape;
  int64_t k = a.back();
  if (c.op == "Gemm" && a.size() == 2 && c.attrs.GetInt("transA", 0) != 0) k = a[0];
  const double f = 2.0 * static_cast<double>(c.outputs[0].numel()) * static_cast<double>(k);
  return f > 0 && f < 1.8e19 ? static_cast<uint64_t>(f) : 0;
}

}  // namespace

void RegisterMatMulOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferFromShape<MatMulGeom, MatMulShapes>, CreateMatMul>("MatMul", 2, 2));
  ops->back().flops = MatMulFlops;
  ops->push_back(Def<InferGemm, CreateGemm>("Gemm", 2, 3));
  ops->back().flops = MatMulFlops;
}

}  // namespace fcb::ops
