// RNN, GRU and LSTM (opset 7-14 semantics; layout from opset 14): every
// direction (forward, reverse, bidirectional), default and explicit
// activations with their alpha/beta, clip, initial states, peepholes,
// input_forget, linear_before_reset, sequence_lens (constant or given at run
// time), layout 0 and 1, and every optional output.
//
//   inputs:  X, W, R, [B], [sequence_lens], [initial_h], [initial_c, P: LSTM]
//   outputs: [Y], [Y_h], [Y_c: LSTM]
//
// Gates per direction, in ONNX's order: RNN i; GRU z r h; LSTM i o f c.
// Row b of the batch runs its first sequence_lens[b] steps (from the end for
// the reverse direction); Y is zero past them and Y_h/Y_c hold the state
// after the last step run (zero for a row that runs none, as in ONNX Runtime).
//
// A reference kernel: per step and row, matrix-vector products in float
// with double accumulation; the state lives in per-thread scratch, so Run
// does not allocate.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

enum class Kind { kRnn, kGru, kLstm };

enum class ActKind { kSigmoid, kTanh, kRelu, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                     kSoftsign, kSoftplus, kAffine };

struct Act {
  ActKind kind = ActKind::kSigmoid;
  float alpha = 0, beta = 0;
};

float Apply(const Act& a, float x) {
  switch (a.kind) {
    case ActKind::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case ActKind::kTanh: return std::tanh(x);
    case ActKind::kRelu: return x > 0 ? x : 0.0f;
    case ActKind::kLeakyRelu: return x >= 0 ? x : a.alpha * x;
    case ActKind::kThresholdedRelu: return x > a.alpha ? x : 0.0f;
    case ActKind::kScaledTanh: return a.alpha * std::tanh(a.beta * x);
    case ActKind::kHardSigmoid: return std::fmax(0.0f, std::fmin(1.0f, a.alpha * x + a.beta));
    case ActKind::kElu: return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0f);
    case ActKind::kSoftsign: return x / (1.0f + std::fabs(x));
    case ActKind::kSoftplus: return std::log1p(std::exp(x));
    case ActKind::kAffine: return a.alpha * x + a.beta;
  }
  return x;
}

struct Plan {
  Kind kind = Kind::kLstm;
  int gates = 4;      // per direction
  int dirs = 1;
  bool reverse = false;  // the only direction runs backwards
  int layout = 0;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  std::vector<Act> acts;  // acts_per_dir * dirs
  int acts_per_dir = 3;
  bool clip = false;
  float clip_at = 0;
  bool input_forget = false, linear_before_reset = false;
  bool has_b = false, has_lens = false, has_h0 = false, has_c0 = false, has_p = false;
};

const char* KindName(Kind k) { return k == Kind::kRnn ? "RNN" : k == Kind::kGru ? "GRU" : "LSTM"; }

// "activations" arrives as the names joined with ','.
Status ParseActs(const InferContext& c, Plan* p) {
  static const std::vector<std::vector<ActKind>> kDefaults = {
      {ActKind::kTanh}, {ActKind::kSigmoid, ActKind::kTanh}, {ActKind::kSigmoid, ActKind::kTanh, ActKind::kTanh}};
  const int per = p->acts_per_dir;
  std::vector<std::string> names;
  const std::string joined = c.attrs.GetString("activations", "");
  for (size_t at = 0; !joined.empty() && at <= joined.size();) {
    const size_t comma = joined.find(',', at);
    names.push_back(joined.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (names.empty()) {
    for (int d = 0; d < p->dirs; ++d)
      for (ActKind k : kDefaults[per - 1]) p->acts.push_back(Act{k, 0, 0});
    return Status::Ok();
  }
  if (static_cast<int>(names.size()) != per * p->dirs)
    return OpError(c.op, "activations lists " + std::to_string(names.size()) + " functions; " + KindName(p->kind) +
                             " needs " + std::to_string(per) + " per direction, " + std::to_string(per * p->dirs) +
                             " in all");
  const std::vector<float> alphas = c.attrs.GetFloats("activation_alpha"), betas = c.attrs.GetFloats("activation_beta");
  size_t ai = 0, bi = 0;
  // Functions that take alpha (beta) consume the next value of the list, or
  // use the operator's default when the list is shorter.
  auto alpha = [&](float def) { return ai < alphas.size() ? alphas[ai++] : def; };
  auto beta = [&](float def) { return bi < betas.size() ? betas[bi++] : def; };
  for (const auto& raw : names) {
    std::string n;
    for (char ch : raw) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    Act a;
    if (n == "sigmoid") a.kind = ActKind::kSigmoid;
    else if (n == "tanh") a.kind = ActKind::kTanh;
    else if (n == "relu") a.kind = ActKind::kRelu;
    else if (n == "leakyrelu") a = {ActKind::kLeakyRelu, alpha(0.01f), 0};
    else if (n == "thresholdedrelu") a = {ActKind::kThresholdedRelu, alpha(1.0f), 0};
    else if (n == "scaledtanh") { a.kind = ActKind::kScaledTanh; a.alpha = alpha(1.0f); a.beta = beta(1.0f); }
    else if (n == "hardsigmoid") { a.kind = ActKind::kHardSigmoid; a.alpha = alpha(0.2f); a.beta = beta(0.5f); }
    else if (n == "elu") a = {ActKind::kElu, alpha(1.0f), 0};
    else if (n == "softsign") a.kind = ActKind::kSoftsign;
    else if (n == "softplus") a.kind = ActKind::kSoftplus;
    else if (n == "affine") { a.kind = ActKind::kAffine; a.alpha = alpha(1.0f); a.beta = beta(0.0f); }
    else return OpUnsupported(c.op, "activation '" + raw + "' is not one of Sigmoid, Tanh, Relu, LeakyRelu, "
                                    "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus, Affine");
    p->acts.push_back(a);
  }
  return Status::Ok();
}

Status ExpectShape(const InferContext& c, const TensorInfo& t, const char* what, const ir::Shape& want) {
  if (t.dtype != DType::kF32) return OpUnsupported(c.op, std::string(what) + " must be float32");
  if (t.shape != want)
    return OpError(c.op, std::string(what) + " has shape " + ir::ShapeToString(t.shape) + ", expected " +
                             ir::ShapeToString(want));
  return Status::Ok();
}

Status Parse(const InferContext& c, Kind kind, Plan* p) {
  p->kind = kind;
  p->gates = kind == Kind::kRnn ? 1 : kind == Kind::kGru ? 3 : 4;
  p->acts_per_dir = p->gates == 4 ? 3 : p->gates == 3 ? 2 : 1;
  const std::string dir = c.attrs.GetString("direction", "forward");
  if (dir == "forward" || dir == "reverse") {
    p->dirs = 1;
    p->reverse = dir == "reverse";
  } else if (dir == "bidirectional") {
    p->dirs = 2;
  } else {
    return OpError(c.op, "direction '" + dir + "' is not forward, reverse or bidirectional");
  }
  p->layout = static_cast<int>(c.attrs.GetInt("layout", 0));
  if (p->layout != 0 && p->layout != 1) return OpError(c.op, "layout must be 0 or 1");
  const TensorInfo &x = Input(c, 0), &w = Input(c, 1), &r = Input(c, 2);
  if (!x.present() || !w.present() || !r.present()) return OpError(c.op, "needs X, W and R");
  if (x.dtype != DType::kF32) return OpUnsupported(c.op, "X must be float32");
  if (x.shape.size() != 3) return OpError(c.op, "X must have rank 3, got " + ir::ShapeToString(x.shape));
  p->seq = p->layout == 0 ? x.shape[0] : x.shape[1];
  p->batch = p->layout == 0 ? x.shape[1] : x.shape[0];
  p->input = x.shape[2];
  if (r.shape.size() != 3) return OpError(c.op, "R must have rank 3, got " + ir::ShapeToString(r.shape));
  p->hidden = c.attrs.GetInt("hidden_size", r.shape[2]);
  if (p->hidden < 1) return OpError(c.op, "hidden_size must be >= 1");
  // R's last dim is the hidden size (checked before G * H is formed: R's dims
  // are bounded by its element count, hidden_size is any integer).
  if (p->hidden != r.shape[2])
    return OpError(c.op, "hidden_size " + std::to_string(p->hidden) + " does not match R's last dim " +
                             std::to_string(r.shape[2]));
  const int64_t G = p->gates, H = p->hidden, D = p->dirs;
  FCB_RETURN_IF_ERROR(ExpectShape(c, w, "W", {D, G * H, p->input}));
  FCB_RETURN_IF_ERROR(ExpectShape(c, r, "R", {D, G * H, H}));
  if (const TensorInfo& b = Input(c, 3); b.present()) {
    FCB_RETURN_IF_ERROR(ExpectShape(c, b, "B", {D, 2 * G * H}));
    p->has_b = true;
  }
  if (const TensorInfo& l = Input(c, 4); l.present()) {
    if (l.dtype != DType::kI32) return OpError(c.op, "sequence_lens must be int32");
    if (l.shape != ir::Shape{p->batch})
      return OpError(c.op, "sequence_lens has shape " + ir::ShapeToString(l.shape) + ", expected [" +
                               std::to_string(p->batch) + "]");
    p->has_lens = true;
  }
  const ir::Shape state = p->layout == 0 ? ir::Shape{D, p->batch, H} : ir::Shape{p->batch, D, H};
  if (const TensorInfo& h0 = Input(c, 5); h0.present()) {
    FCB_RETURN_IF_ERROR(ExpectShape(c, h0, "initial_h", state));
    p->has_h0 = true;
  }
  if (kind == Kind::kLstm) {
    if (const TensorInfo& c0 = Input(c, 6); c0.present()) {
      FCB_RETURN_IF_ERROR(ExpectShape(c, c0, "initial_c", state));
      p->has_c0 = true;
    }
    if (const TensorInfo& pp = Input(c, 7); pp.present()) {
      FCB_RETURN_IF_ERROR(ExpectShape(c, pp, "P", {D, 3 * H}));
      p->has_p = true;
    }
    p->input_forget = c.attrs.GetInt("input_forget", 0) != 0;
  }
  if (kind == Kind::kGru) p->linear_before_reset = c.attrs.GetInt("linear_before_reset", 0) != 0;
  if (c.attrs.Has("clip")) {
    p->clip = true;
    p->clip_at = c.attrs.GetFloat("clip", 0);
    if (!(p->clip_at > 0)) return OpError(c.op, "clip must be > 0");
  }
  if (SafeProduct(ir::Shape{p->seq, p->batch, D, H}, 0, 4) < 0 ||
      SafeProduct(ir::Shape{D, G * H, p->input + H}, 0, 3) < 0)
    return OpError(c.op, "tensor sizes exceed the supported range");
  return ParseActs(c, p);
}

template <Kind K>
Status InferRecurrent(const InferContext& c, std::vector<TensorInfo>* outs) {
  Plan p;
  FCB_RETURN_IF_ERROR(Parse(c, K, &p));
  const int64_t D = p.dirs, H = p.hidden;
  const ir::Shape y = p.layout == 0 ? ir::Shape{p.seq, D, p.batch, H} : ir::Shape{p.batch, p.seq, D, H};
  const ir::Shape state = p.layout == 0 ? ir::Shape{D, p.batch, H} : ir::Shape{p.batch, D, H};
  for (int i = 0; i < c.num_outputs; ++i) outs->push_back(TensorInfo{DType::kF32, i == 0 ? y : state});
  return Status::Ok();
}

// Scratch: h, c, gates (G*H), two GRU temporaries, in floats.
uint64_t ScratchFloats(const Plan& p) { return static_cast<uint64_t>(p.hidden) * (p.gates + 4); }

template <Kind K>
Result<uint64_t> ScratchRecurrent(const CreateContext& c) {
  Plan p;
  FCB_RETURN_IF_ERROR(Parse(AsInfer(c), K, &p));
  return ScratchFloats(p) * sizeof(float);
}

// dot(a, b) over n in double: stable sums for long inputs.
inline float Dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(a[k]) * b[k];
  return static_cast<float>(s);
}

Status RunRecurrent(const Plan& p, const RunContext& ctx, const void* const* in, void* const* out, int n_out) {
  const int64_t G = p.gates, H = p.hidden, I = p.input, B = p.batch, S = p.seq, D = p.dirs;
  const float* x = static_cast<const float*>(in[0]);
  const float* W = static_cast<const float*>(in[1]);
  const float* R = static_cast<const float*>(in[2]);
  const float* bias = p.has_b ? static_cast<const float*>(in[3]) : nullptr;
  const int32_t* lens = p.has_lens ? static_cast<const int32_t*>(in[4]) : nullptr;
  const float* h0 = p.has_h0 ? static_cast<const float*>(in[5]) : nullptr;
  const float* c0 = p.has_c0 ? static_cast<const float*>(in[6]) : nullptr;
  const float* peep = p.has_p ? static_cast<const float*>(in[7]) : nullptr;
  float* Y = n_out > 0 ? static_cast<float*>(out[0]) : nullptr;
  float* Yh = n_out > 1 ? static_cast<float*>(out[1]) : nullptr;
  float* Yc = n_out > 2 ? static_cast<float*>(out[2]) : nullptr;
  if (lens)
    for (int64_t b = 0; b < B; ++b)
      if (lens[b] < 0 || lens[b] > S)
        return OpError(KindName(p.kind), "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[b]) +
                                             " is outside [0, " + std::to_string(S) + "]");
  // Element offsets by layout.
  auto x_at = [&](int64_t t, int64_t b) { return p.layout == 0 ? (t * B + b) * I : (b * S + t) * I; };
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return p.layout == 0 ? ((t * D + d) * B + b) * H : ((b * S + t) * D + d) * H;
  };
  auto s_at = [&](int64_t d, int64_t b) { return p.layout == 0 ? (d * B + b) * H : (b * D + d) * H; };
  if (Y) std::memset(Y, 0, static_cast<size_t>(S * D * B * H) * sizeof(float));
  float* h = static_cast<float*>(ctx.ThreadScratch(0));
  float* cell = h + H;
  float* g = cell + H;
  float* t1 = g + G * H;
  float* t2 = t1 + H;
  auto clip = [&](float v) { return p.clip ? std::fmin(p.clip_at, std::fmax(-p.clip_at, v)) : v; };
  for (int64_t d = 0; d < D; ++d) {
    const bool rev = D == 2 ? d == 1 : p.reverse;
    const float* Wd = W + d * G * H * I;
    const float* Rd = R + d * G * H * H;
    const float* Wb = bias ? bias + d * 2 * G * H : nullptr;
    const float* Rb = bias ? Wb + G * H : nullptr;
    const float* Pd = peep ? peep + d * 3 * H : nullptr;
    const Act* acts = p.acts.data() + d * p.acts_per_dir;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = lens ? lens[b] : S;
      for (int64_t j = 0; j < H; ++j) {
        h[j] = h0 ? h0[s_at(d, b) + j] : 0.0f;
        cell[j] = c0 ? c0[s_at(d, b) + j] : 0.0f;
      }
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = rev ? len - 1 - s : s;
        const float* xt = x + x_at(t, b);
        // Input and bias parts of every gate.
        for (int64_t k = 0; k < G * H; ++k)
          g[k] = Dot(Wd + k * I, xt, I) + (Wb ? Wb[k] : 0.0f) + (Rb && p.kind != Kind::kGru ? Rb[k] : 0.0f);
        if (p.kind == Kind::kRnn) {
          for (int64_t j = 0; j < H; ++j) t1[j] = Apply(acts[0], clip(g[j] + Dot(Rd + j * H, h, H)));
          std::memcpy(h, t1, static_cast<size_t>(H) * sizeof(float));
        } else if (p.kind == Kind::kGru) {
          // z, r from the previous state; then the candidate.
          for (int64_t k = 0; k < 2 * H; ++k) g[k] = Apply(acts[0], clip(g[k] + Dot(Rd + k * H, h, H) + (Rb ? Rb[k] : 0.0f)));
          const float* z = g;
          const float* r = g + H;
          const float* Rh = Rd + 2 * H * H;
          if (!p.linear_before_reset)
            for (int64_t k = 0; k < H; ++k) t2[k] = r[k] * h[k];
          for (int64_t j = 0; j < H; ++j) {
            const float rbh = Rb ? Rb[2 * H + j] : 0.0f;
            // linear_before_reset: r * (Rh h + Rbh); otherwise Rh (r * h) + Rbh.
            const float pre = p.linear_before_reset ? g[2 * H + j] + r[j] * (Dot(Rh + j * H, h, H) + rbh)
                                                    : g[2 * H + j] + Dot(Rh + j * H, t2, H) + rbh;
            t1[j] = Apply(acts[1], clip(pre));
          }
          for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - z[j]) * t1[j] + z[j] * h[j];
        } else {
          for (int64_t k = 0; k < 4 * H; ++k) g[k] += Dot(Rd + k * H, h, H);
          float* gi = g;
          float* go = g + H;
          float* gf = g + 2 * H;
          float* gc = g + 3 * H;
          for (int64_t j = 0; j < H; ++j) {
            const float i_t = Apply(acts[0], clip(gi[j] + (Pd ? Pd[j] * cell[j] : 0.0f)));
            const float f_t = p.input_forget ? 1.0f - i_t
                                             : Apply(acts[0], clip(gf[j] + (Pd ? Pd[2 * H + j] * cell[j] : 0.0f)));
            const float c_t = Apply(acts[1], clip(gc[j]));
            cell[j] = f_t * cell[j] + i_t * c_t;
            const float o_t = Apply(acts[0], clip(go[j] + (Pd ? Pd[H + j] * cell[j] : 0.0f)));
            h[j] = o_t * Apply(acts[2], cell[j]);
          }
        }
        if (Y) std::memcpy(Y + y_at(t, d, b), h, static_cast<size_t>(H) * sizeof(float));
      }
      if (len == 0) {  // no step run: zero states, as ONNX Runtime gives them (not the initial ones)
        std::fill(h, h + H, 0.0f);
        std::fill(cell, cell + H, 0.0f);
      }
      if (Yh) std::memcpy(Yh + s_at(d, b), h, static_cast<size_t>(H) * sizeof(float));
      if (Yc) std::memcpy(Yc + s_at(d, b), cell, static_cast<size_t>(H) * sizeof(float));
    }
  }
  return Status::Ok();
}

template <Kind K>
Result<std::unique_ptr<Kernel>> CreateRecurrent(const CreateContext& c) {
  Plan p;
  FCB_RETURN_IF_ERROR(Parse(AsInfer(c), K, &p));
  const int n_out = static_cast<int>(c.outputs.size());
  return MakeKernel([p, n_out](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    return RunRecurrent(p, ctx, in, out, n_out);
  });
}

template <Kind K>
OpDef RecurrentDef(const char* name, int max_in, int max_out) {
  OpDef d = Def<InferRecurrent<K>, CreateRecurrent<K>>(name, 3, max_in, 0, max_out);
  d.scratch = &ScratchRecurrent<K>;
  return d;
}

}  // namespace

void RegisterRecurrentOps(std::vector<OpDef>* ops) {
  ops->push_back(RecurrentDef<Kind::kRnn>("RNN", 6, 2));
  ops->push_back(RecurrentDef<Kind::kGru>("GRU", 6, 2));
  ops->push_back(RecurrentDef<Kind::kLstm>("LSTM", 8, 3));
}

}  // namespace fcb::ops
