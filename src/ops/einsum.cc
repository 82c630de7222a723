// Einsum: any equation of letters with an optional "..." (broadcast like
// NumPy), explicit or implicit output, repeated labels in one operand
// (diagonals), summation over labels absent from the output. One generic
// loop: for every output element, sum over the summed labels of the product
// of the operands. The plan (label sizes, per-operand strides) is made once.
#include <array>
#include <map>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

// Labels: 0-51 for letters, 100 + k for the k-th ellipsis dim.
constexpr int kEllipsisBase = 100;

struct Plan {
  std::vector<int> out_labels, sum_labels;
  std::vector<int64_t> out_dims, sum_dims;
  // strides[operand][i]: stride of out label i (then sum label i) in that operand.
  std::vector<std::vector<int64_t>> out_strides, sum_strides;
  ir::Shape out_shape;
};

int LetterLabel(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

// Parses one term into labels; `ell` receives the position of "..." (or -1).
Status ParseTerm(std::string_view op, const std::string& t, std::vector<int>* labels, int* ell) {
  *ell = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ' ') continue;
    if (t.compare(i, 3, "...") == 0) {
      if (*ell >= 0) return OpError(op, "more than one ellipsis in a term");
      *ell = static_cast<int>(labels->size());
      i += 2;
      continue;
    }
    const int l = LetterLabel(t[i]);
    if (l < 0) return OpError(op, std::string("invalid character '") + t[i] + "' in the equation");
    labels->push_back(l);
  }
  return Status::Ok();
}

Status MakePlan(const InferContext& c, Plan* p) {
  const std::string eq = c.attrs.GetString("equation", "");
  if (eq.empty()) return OpError(c.op, "equation is required");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t comma = lhs.find(',', s);
    terms.push_back(lhs.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
    if (comma == std::string::npos) break;
    s = comma + 1;
  }
  const size_t n = c.inputs.size();
  if (terms.size() != n) return OpError(c.op, "the equation has " + std::to_string(terms.size()) +
                                                  " terms for " + std::to_string(n) + " inputs");
  const DType dt = Input(c, 0).dtype;
  if (!IsNumeric(dt)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(dt));
  // Expand every term to one label per dim.
  std::vector<std::vector<int>> labels(n);
  int ell_rank = 0;
  std::vector<int> ell_pos(n);
  for (size_t i = 0; i < n; ++i) {
    const TensorInfo& t = Input(c, i);
    if (!t.present() || t.dtype != dt) return OpError(c.op, "inputs must share one dtype");
    FCB_RETURN_IF_ERROR(ParseTerm(c.op, terms[i], &labels[i], &ell_pos[i]));
    const int rank = static_cast<int>(t.shape.size());
    const int explicit_dims = static_cast<int>(labels[i].size());
    if (ell_pos[i] < 0 ? explicit_dims != rank : explicit_dims > rank)
      return OpError(c.op, "term '" + terms[i] + "' does not match input rank " + std::to_string(rank));
    ell_rank = std::max(ell_rank, rank - explicit_dims);
  }
  for (size_t i = 0; i < n; ++i) {
    if (ell_pos[i] < 0) continue;
    const int e = static_cast<int>(Input(c, i).shape.size() - labels[i].size());
    std::vector<int> ins;
    for (int k = 0; k < e; ++k) ins.push_back(kEllipsisBase + ell_rank - e + k);
    labels[i].insert(labels[i].begin() + ell_pos[i], ins.begin(), ins.end());
  }
  // Label sizes (1 broadcasts).
  std::map<int, int64_t> size;
  std::map<int, int> count;
  for (size_t i = 0; i < n; ++i)
    for (size_t d = 0; d < labels[i].size(); ++d) {
      const int l = labels[i][d];
      const int64_t dim = Input(c, i).shape[d];
      ++count[l];
      auto it = size.find(l);
      if (it == size.end() || it->second == 1) size[l] = dim;
      else if (dim != 1 && dim != it->second) return OpError(c.op, "label dims do not match");
    }
  // Output labels.
  p->out_labels.clear();
  if (arrow != std::string::npos) {
    int ell = -1;
    FCB_RETURN_IF_ERROR(ParseTerm(c.op, eq.substr(arrow + 2), &p->out_labels, &ell));
    if (ell >= 0) {
      std::vector<int> ins;
      for (int k = 0; k < ell_rank; ++k) ins.push_back(kEllipsisBase + k);
      p->out_labels.insert(p->out_labels.begin() + ell, ins.begin(), ins.end());
    }
    for (int l : p->out_labels)
      if (!size.count(l)) return OpError(c.op, "output label not found in the inputs");
  } else {
    for (int k = 0; k < ell_rank; ++k) p->out_labels.push_back(kEllipsisBase + k);
    for (const auto& [l, cnt] : count)
      if (l < kEllipsisBase && cnt == 1) p->out_labels.push_back(l);
  }
  p->sum_labels.clear();
  for (const auto& [l, s] : size)
    if (std::find(p->out_labels.begin(), p->out_labels.end(), l) == p->out_labels.end())
      p->sum_labels.push_back(l);
  if (p->out_labels.size() > static_cast<size_t>(kMaxRank) || p->sum_labels.size() > static_cast<size_t>(kMaxRank))
    return OpUnsupported(c.op, "more than 16 labels");
  p->out_dims.clear();
  p->sum_dims.clear();
  for (int l : p->out_labels) p->out_dims.push_back(size[l]);
  for (int l : p->sum_labels) p->sum_dims.push_back(size[l]);
  p->out_shape = p->out_dims;
  p->out_strides.assign(n, {});
  p->sum_strides.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const auto st = DenseStrides(Input(c, i).shape);
    auto stride_of = [&](int l) {
      int64_t s = 0;
      for (size_t d = 0; d < labels[i].size(); ++d)
        if (labels[i][d] == l && Input(c, i).shape[d] != 1) s += st[d];
      return s;
    };
    for (int l : p->out_labels) p->out_strides[i].push_back(stride_of(l));
    for (int l : p->sum_labels) p->sum_strides[i].push_back(stride_of(l));
  }
  return CheckShape(c.op, p->out_shape, "output");
}

Status InferEinsum(const InferContext& c, std::vector<TensorInfo>* outs) {
  if (c.inputs.empty()) return OpError(c.op, "needs at least one input");
  Plan p;
  FCB_RETURN_IF_ERROR(MakePlan(c, &p));
  outs->push_back(TensorInfo{Input(c, 0).dtype, p.out_shape});
  return Status::Ok();
}

template <typename T>
void RunEinsum(const Plan& p, const void* const* in, T* y) {
  const size_t n = p.out_strides.size();
  const size_t ro = p.out_dims.size(), rs = p.sum_dims.size();
  const int64_t total = ir::NumElements(p.out_dims), sums = ir::NumElements(p.sum_dims);
  std::array<int64_t, kMaxRank> oi{}, si{};
  for (int64_t e = 0; e < total; ++e) {
    std::array<int64_t, 8> base{};
    for (size_t i = 0; i < n && i < 8; ++i)
      for (size_t d = 0; d < ro; ++d) base[i] += oi[d] * p.out_strides[i][d];
    T acc = T(0);
    si.fill(0);
    for (int64_t s = 0; s < sums; ++s) {
      T prod = T(1);
      for (size_t i = 0; i < n; ++i) {
        int64_t off = base[i];
        for (size_t d = 0; d < rs; ++d) off += si[d] * p.sum_strides[i][d];
        prod = static_cast<T>(prod * static_cast<const T*>(in[i])[off]);
      }
      acc = static_cast<T>(acc + prod);
      for (int d = static_cast<int>(rs) - 1; d >= 0; --d) {
        if (++si[d] < p.sum_dims[d]) break;
        si[d] = 0;
      }
    }
    y[e] = acc;
    for (int d = static_cast<int>(ro) - 1; d >= 0; --d) {
      if (++oi[d] < p.out_dims[d]) break;
      oi[d] = 0;
    }
  }
}

Result<std::unique_ptr<Kernel>> CreateEinsum(const CreateContext& c) {
  Plan p;
  FCB_RETURN_IF_ERROR(MakePlan(AsInfer(c), &p));
  if (c.inputs.size() > 8) return OpUnsupported(c.op, "more than 8 inputs");
  const DType dt = c.inputs[0].dtype;
  return MakeKernel([p = std::move(p), dt](const RunContext&, const void* const* in, void* const* out) -> Status {
    DispatchNumeric(dt, [&](auto tag) {
      using T = decltype(tag);
      RunEinsum<T>(p, in, static_cast<T*>(out[0]));
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterEinsumOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferEinsum, CreateEinsum>("Einsum", 1, 8));
}

}  // namespace fcb::ops
