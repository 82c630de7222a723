// Transpose. create() drops size-1 dims and merges input dims that stay
// adjacent in the output, so NCHW->NHWC becomes a batch of 2-D transposes and
// most permutes collapse to rank <= 3. Two run paths remain:
//   rows  - the innermost input dim stays innermost: copy contiguous rows;
//   tiles - otherwise: a blocked 2-D transpose between the output dim that
//           reads the input contiguously and the innermost output dim,
//           batched over the remaining dims. Blocks keep both sides in cache.
// Work is split over rows / (batch, block strip) across threads.
#include <array>
#include <numeric>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

constexpr int64_t kTile = 32;

Status InferTranspose(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  std::vector<int64_t> perm;
  FCB_RETURN_IF_ERROR(ParsePerm(c, &perm));
  ir::Shape s(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) s[i] = x.shape[perm[i]];
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

// Held in place (PlanDims): the kernel adapts (Kernel::adapts), making a plan
// at each run at other shapes without allocating.
struct TransposePlan {
  size_t es = 0;                   // element size
  int64_t total = 0;
  PlanDims out_dims;   // collapsed output dims
  PlanDims src;        // input stride (elements) of each output dim
  PlanDims dst;        // output stride of each output dim
  // rows path: outer = out dims but the last; run = last out dim (contiguous both sides).
  // tiles path: a = output dim that is contiguous in the input, b = last output dim.
  bool rows = true;
  int a = -1;
  PlanDims batch_dims, batch_src, batch_dst;  // out dims other than a and b
  int64_t strips = 0;  // ceil(out_dims[a] / kTile)
};

template <typename Perm>
Status MakePlan(std::string_view op, std::span<const int64_t> in, const Perm& perm, size_t es, TransposePlan* p) {
  *p = TransposePlan();
  p->es = es;
  p->total = ir::NumElements(in);
  // Worked out on the stack; ranks are at most CheckShape's 64.
  constexpr size_t kCap = 64;
  if (in.size() > kCap || perm.size() > kCap) return OpUnsupported(op, "rank " + std::to_string(in.size()));
  // Keep input dims of size > 1, renumbered.
  int64_t newidx[kCap], kept_dims[kCap];
  size_t n_kept = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    newidx[i] = -1;
    if (in[i] != 1) {
      newidx[i] = static_cast<int64_t>(n_kept);
      kept_dims[n_kept++] = in[i];
    }
  }
  // Runs of consecutive input dims, in output order: [first, last] input dims.
  int64_t gfirst[kCap], glast[kCap];
  size_t ng = 0;
  for (size_t j = 0; j < perm.size(); ++j) {
    const int64_t d = newidx[perm[j]];
    if (d < 0) continue;
    if (ng > 0 && glast[ng - 1] + 1 == d) glast[ng - 1] = d;
    else gfirst[ng] = glast[ng] = d, ++ng;
  }
  // Collapsed input: groups sorted by first dim.
  size_t by_in[kCap];
  for (size_t g = 0; g < ng; ++g) by_in[g] = g;
  std::sort(by_in, by_in + ng, [&](size_t x, size_t y) { return gfirst[x] < gfirst[y]; });
  const int k = static_cast<int>(ng);
  if (k > kMaxRank) return OpUnsupported(op, "permutation too complex");
  p->out_dims.assign(ng, 1);
  p->src.assign(ng, 1);
  for (size_t g = 0; g < ng; ++g)
    for (int64_t d = gfirst[g]; d <= glast[g]; ++d) p->out_dims[g] *= kept_dims[d];
  int64_t stride = 1;
  for (size_t j = ng; j-- > 0;) {
    p->src[by_in[j]] = stride;
    stride *= p->out_dims[by_in[j]];
  }
  p->dst.assign(k, 1);
  for (int j = k - 1; j > 0; --j) p->dst[j - 1] = p->dst[j] * p->out_dims[j];
  p->rows = k <= 1 || p->src[k - 1] == 1;
  if (!p->rows) {
    for (int j = 0; j < k; ++j)
      if (p->src[j] == 1) p->a = j;
    for (int j = 0; j < k - 1; ++j)
      if (j != p->a) {
        p->batch_dims.push_back(p->out_dims[j]);
        p->batch_src.push_back(p->src[j]);
        p->batch_dst.push_back(p->dst[j]);
      }
    p->strips = (p->out_dims[p->a] + kTile - 1) / kTile;
  }
  return Status::Ok();
}

void RunRows(const RunContext& ctx, const TransposePlan& p, const uint8_t* x, uint8_t* y) {
  if (p.out_dims.size() <= 1) {
    CopyBytes(y, x, static_cast<size_t>(p.total) * p.es);
    return;
  }
  const int64_t run = p.out_dims.back();
  const int64_t rows = p.total / run;
  // Outer dims are the collapsed dims but the last; the odometer walks them.
  ctx.pool->ParallelFor(rows, GrainFor(run), [&](int64_t b, int64_t e) {
    std::array<int64_t, kMaxRank> idx{};
    const int rk = static_cast<int>(p.out_dims.size()) - 1;
    int64_t off = 0, rem = b;
    for (int d = rk - 1; d >= 0; --d) {
      idx[d] = rem % p.out_dims[d];
      rem /= p.out_dims[d];
      off += idx[d] * p.src[d];
    }
    for (int64_t r = b; r < e; ++r) {
      std::memcpy(y + r * run * p.es, x + off * p.es, static_cast<size_t>(run) * p.es);
      for (int d = rk - 1; d >= 0; --d) {
        off += p.src[d];
        if (++idx[d] < p.out_dims[d]) break;
        off -= idx[d] * p.src[d];
        idx[d] = 0;
      }
    }
  });
}

// Input and output offsets of batch index `batch` over the plan's batch dims.
void BatchOffsets(const TransposePlan& p, int64_t batch, int64_t* xo, int64_t* yo) {
  *xo = 0, *yo = 0;
  for (size_t d = p.batch_dims.size(); d-- > 0;) {
    const int64_t i = batch % p.batch_dims[d];
    batch /= p.batch_dims[d];
    *xo += i * p.batch_src[d];
    *yo += i * p.batch_dst[d];
  }
}

template <typename T>
void RunTiles(const RunContext& ctx, const TransposePlan& p, const T* x, T* y) {
  const int64_t na = p.out_dims[p.a], nb = p.out_dims.back();
  const int64_t sb = p.src.back(), da = p.dst[p.a];
  const int64_t items = (p.total / (na * nb)) * p.strips;
  ctx.pool->ParallelFor(items, GrainFor(kTile * nb), [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t batch = it / p.strips;
      const int64_t a0 = (it % p.strips) * kTile, a1 = std::min(na, a0 + kTile);
      int64_t xo, yo;
      BatchOffsets(p, batch, &xo, &yo);
      for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
        const int64_t b1 = std::min(nb, b0 + kTile);
        for (int64_t ai = a0; ai < a1; ++ai) {
          const T* xs = x + xo + ai;
          T* ys = y + yo + ai * da;
          for (int64_t bi = b0; bi < b1; ++bi) ys[bi] = xs[bi * sb];
        }
      }
    }
  });
}

// Few output columns (nb <= 4) that are the innermost output dim, the rows
// being the next one out (NCHW -> NHWC of an RGB image, the first step of
// every CNN): each output row is nb values gathered from nb input rows, so the
// whole block of rows [a0, a1) is one contiguous output run. With nb fixed at
// compile time the compiler vectorizes the gather into interleaving shuffles;
// the per-element tile loop ran at one element per nanosecond.
template <typename T, int NB>
void RunFewColumns(const RunContext& ctx, const TransposePlan& p, const T* x, T* y) {
  const int64_t na = p.out_dims[p.a], sb = p.src.back();
  constexpr int64_t kRun = 4096;  // output rows per work item
  const int64_t runs = (na + kRun - 1) / kRun;
  const int64_t items = (p.total / (na * NB)) * runs;
  ctx.pool->ParallelFor(items, 1, [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t batch = it / runs;
      const int64_t a0 = (it % runs) * kRun, a1 = std::min(na, a0 + kRun);
      int64_t xo, yo;
      BatchOffsets(p, batch, &xo, &yo);
      const T* xs = x + xo;
      T* __restrict ys = y + yo;
      for (int64_t ai = a0; ai < a1; ++ai)
        for (int c = 0; c < NB; ++c) ys[ai * NB + c] = xs[c * sb + ai];
    }
  });
}

// Runs `p` by its path; false for an element size without one.
bool RunPlan(const RunContext& ctx, const TransposePlan& p, const void* in, void* out) {
  if (p.total == 0) return true;
  if (p.rows) {
    RunRows(ctx, p, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out));
    return true;
  }
  const int k = static_cast<int>(p.out_dims.size());
  const int64_t nb = p.out_dims.back();
  const bool few = p.a == k - 2 && p.dst[p.a] == nb && nb >= 2 && nb <= 4;
  return DispatchBySize(p.es, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    if (!few) RunTiles(ctx, p, x, y);
    else if (nb == 2) RunFewColumns<T, 2>(ctx, p, x, y);
    else if (nb == 3) RunFewColumns<T, 3>(ctx, p, x, y);
    else RunFewColumns<T, 4>(ctx, p, x, y);
  });
}

Result<std::unique_ptr<Kernel>> CreateTranspose(const CreateContext& c) {
  std::vector<int64_t> parsed;
  FCB_RETURN_IF_ERROR(ParsePerm(AsInfer(c), &parsed));
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  if (!DispatchBySize(es, [](auto) {})) return OpUnsupported(c.op, "element size");
  TransposePlan made;
  FCB_RETURN_IF_ERROR(MakePlan(c.op, c.inputs[0].shape, parsed, es, &made));
  if (parsed.size() > static_cast<size_t>(kMaxRank)) {  // collapsed to kMaxRank dims or fewer, but not kept
    return MakeKernel([made](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      RunPlan(ctx, made, in[0], out[0]);
      return Status::Ok();
    });
  }
  PlanDims perm;
  perm.assign(parsed.data(), parsed.data() + parsed.size());
  return MakeAdaptingKernel([made, perm](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    TransposePlan at;
    if (ctx.shapes) FCB_RETURN_IF_ERROR(MakePlan("Transpose", ctx.shapes[0], perm, made.es, &at));
    RunPlan(ctx, ctx.shapes ? at : made, in[0], out[0]);
    return Status::Ok();
  });
}

}  // namespace

void RegisterTransposeOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferTranspose, CreateTranspose>("Transpose", 1, 1));
}

}  // namespace fcb::ops
