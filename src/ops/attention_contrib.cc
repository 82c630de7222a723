// ONNX Runtime's attention operators (com.microsoft, version 1), as its CPU
// kernels define them.
//
// com.microsoft.GroupQueryAttention
//   inputs   query   [B, S, N*H], or packed [B, S, (N + 2 Nkv) * H] with key
//                    and value absent
//            key, value  [B, S, Nkv*H] (both present or both absent)
//            past_key, past_value  [B, Nkv, P, H] (BNSH; both or neither)
//            seqlens_k  int32 [B]: the valid length of each batch's keys
//                    after this step, minus one
//            total_sequence_length  int32, one element
//            cos_cache, sin_cache  [positions, R / 2] (both or neither;
//                    required with do_rotary = 1)
//            position_ids, attention_bias, head_sink (ORT's later inputs):
//                    refused as Unsupported when given
//   attrs    num_heads N, kv_num_heads Nkv (N a multiple of Nkv), scale (0:
//            1 / sqrt(H)), softcap (0: none), local_window_size (<= 0: none),
//            do_rotary, rotary_interleaved, smooth_softmax and qk_output
//            (refused unless 0)
//   outputs  output [B, S, N*H], present_key, present_value [B, Nkv, T+, H]
//
//   T+ = max(total_sequence_length, P), as ONNX Runtime sizes it. With a
//   constant total_sequence_length that is exact; otherwise the step is
//   compiled for the growing form, T+ = P + S (present = past + new), and a
//   total_sequence_length that gives another length is refused at run time.
//   The static-buffer form (past and present of one capacity, P = T+) is what
//   a constant total_sequence_length <= P gives.
//
//   A step is the first prompt when S == total_sequence_length: batch b's
//   queries are at positions 0..S-1 and its keys are the S new ones. Otherwise
//   batch b has past_b = seqlens_k[b] + 1 - S valid past rows and its S new
//   keys are at positions past_b..past_b+S-1. present_key = the past_b valid
//   past rows, the new rows (rotated with do_rotary) written after them, and
//   zeros up to T+. When the runtime gives present the same memory as past
//   (past_present_share_buffer), only the new rows are written.
//   Query row s of batch b attends to keys [lo, past_b + s + 1) of present,
//   lo = past_b + s + 1 - local_window_size when a window is set (else 0: the
//   window holds local_window_size keys, the row's own included, as ONNX
//   Runtime 1.30 counts it), with
//   scores scale * q.k, then softcap * tanh(score / softcap) when softcap > 0,
//   then a float32 softmax (max subtracted).
//   Rows of a padded first prompt past a batch's valid length (s >= seqlens_k[b]
//   + 1) attend to keys 0..s, which were written from the padding; ONNX
//   Runtime leaves those rows undefined.
//
// com.microsoft.MultiHeadAttention
//   inputs   query [B, S, N*H]
//            key [B, L, N*H] and value [B, L, N*Hv]; or key and value
//                    [B, N, L, H] / [B, N, L, Hv] (cross attention, used as
//                    they are: no bias, no past); packed forms refused
//            bias [N*H + N*H + N*Hv] (added to query, key, value; optional)
//            key_padding_mask int32 [B] (valid key length, right padding) or
//                    [B, T] (1 keeps a key, 0 masks it); T = P + L
//            attention_bias [B or 1, N or 1, S, T] float32, added to scores
//            past_key, past_value [B, N, P, H] / [B, N, P, Hv]
//            past_sequence_length, cache_indirection: refused when given
//   attrs    num_heads, scale (0: 1 / sqrt(H)), mask_filter_value (-10000),
//            unidirectional (causal: key j is masked for query s when j > P + s)
//   outputs  output [B, S, N*Hv], present_key [B, N, P+L, H], present_value
//
//   score = scale * q.k + m + attention_bias, where m = mask_filter_value for a
//   masked key (padding or causal) and 0 otherwise: masked keys are not left
//   out but made negligible, as ONNX Runtime does. Softmax over all T keys.
//
// Both run one query row at a time through the target's fused attention
// kernel (KernelTable::attention): scores for the row's key range only, in
// the thread's scratch, then the weighted sum of the value rows. No
// [heads, S, T] score matrix exists.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr char kGqa[] = "com.microsoft.GroupQueryAttention";
constexpr char kMha[] = "com.microsoft.MultiHeadAttention";

// Largest head count, head size and sequence a step accepts: far above any
// model's, and small enough that row and scratch arithmetic cannot overflow.
constexpr int64_t kMaxHeads = 1 << 12;
constexpr int64_t kMaxHeadSize = 1 << 12;
constexpr int64_t kMaxSeq = int64_t{1} << 24;

std::string Str(int64_t v) { return std::to_string(v); }
std::string ShapeStr(const ir::Shape& s) { return ir::ShapeToString(s); }

Status CheckAttrRange(std::string_view op, const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return OpError(op, std::string(name) + " must be in [" + Str(lo) + ", " + Str(hi) + "], not " + Str(v));
  return Status::Ok();
}

Status CheckFlag(std::string_view op, const Attrs& a, const char* name, bool* out) {
  const int64_t v = a.GetInt(name, 0);
  if (v != 0 && v != 1) return OpError(op, std::string(name) + " must be 0 or 1, not " + Str(v));
  *out = v == 1;
  return Status::Ok();
}

// scale: 0 means 1 / sqrt(head size); otherwise finite.
Status ReadScale(std::string_view op, const Attrs& a, int64_t head, float* scale) {
  const float s = a.GetFloat("scale", 0.f);
  if (!std::isfinite(s)) return OpError(op, "scale must be finite");
  *scale = s == 0.f ? 1.f / std::sqrt(static_cast<float>(head)) : s;
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// GroupQueryAttention

struct GqaPlan {
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head = 0;
  int64_t past = 0, present = 0;  // rows of past_key (0: absent) and of present_key
  int64_t rot = 0, positions = 0;  // rotary dimension (0: no rotary) and cos_cache rows
  int64_t window = 0;              // local_window_size when > 0, else 0
  int64_t total_const = -1;        // total_sequence_length when constant
  bool packed = false, interleaved = false, has_past = false;
  float scale = 1.f, softcap = 0.f;
};

Status ResolveGqa(const InferContext& c, GqaPlan* p) {
  const auto& op = c.op;
  const TensorInfo &q = Input(c, 0), &k = Input(c, 1), &v = Input(c, 2), &pk = Input(c, 3), &pv = Input(c, 4);
  const TensorInfo &sl = Input(c, 5), &tl = Input(c, 6), &cs = Input(c, 7), &sn = Input(c, 8);
  for (size_t i = 9; i < c.inputs.size(); ++i)
    if (c.inputs[i].present())
      return OpUnsupported(op, std::string(i == 9 ? "position_ids" : i == 10 ? "attention_bias" : "head_sink") +
                                   " (input " + Str(static_cast<int64_t>(i)) + ") is not supported");
  if (c.num_outputs > 3) return OpUnsupported(op, "output_qk (output 3) is not supported");
  // The present outputs are where the step keeps its keys (and what a
  // shared cache is), so they must exist.
  if (c.num_outputs < 3) return OpError(op, "present_key and present_value outputs are required");
  const int64_t heads = c.attrs.GetInt("num_heads", 0), kv_heads = c.attrs.GetInt("kv_num_heads", 0);
  FCB_RETURN_IF_ERROR(CheckAttrRange(op, "num_heads", heads, 1, kMaxHeads));
  FCB_RETURN_IF_ERROR(CheckAttrRange(op, "kv_num_heads", kv_heads, 1, kMaxHeads));
  if (heads % kv_heads != 0)
    return OpError(op, "num_heads " + Str(heads) + " must be a multiple of kv_num_heads " + Str(kv_heads));
  p->heads = heads;
  p->kv_heads = kv_heads;
  bool rotary = false;
  FCB_RETURN_IF_ERROR(CheckFlag(op, c.attrs, "do_rotary", &rotary));
  FCB_RETURN_IF_ERROR(CheckFlag(op, c.attrs, "rotary_interleaved", &p->interleaved));
  if (c.attrs.GetInt("smooth_softmax", 0) != 0) return OpUnsupported(op, "smooth_softmax = 1 is not supported");
  if (c.attrs.GetInt("qk_output", 0) != 0) return OpUnsupported(op, "qk_output is not supported");
  p->softcap = c.attrs.GetFloat("softcap", 0.f);
  if (!std::isfinite(p->softcap) || p->softcap < 0) return OpError(op, "softcap must be a finite value >= 0");
  const int64_t window = c.attrs.GetInt("local_window_size", -1);
  FCB_RETURN_IF_ERROR(CheckAttrRange(op, "local_window_size", window, -1, kMaxSeq));
  p->window = window > 0 ? window : 0;

  if (!q.present()) return OpError(op, "needs query");
  FCB_RETURN_IF_ERROR(SupportedF32(op, q, "query"));
  if (q.shape.size() != 3) return OpError(op, "query must be 3-D [batch, sequence, hidden], not " + ShapeStr(q.shape));
  p->batch = q.shape[0];
  p->seq = q.shape[1];
  if (p->batch < 1 || p->seq < 1 || p->seq > kMaxSeq)
    return OpError(op, "query " + ShapeStr(q.shape) + " needs batch and sequence >= 1");
  if (k.present() != v.present()) return OpError(op, "key and value must be both present or both absent");
  p->packed = !k.present();
  const int64_t width = p->packed ? heads + 2 * kv_heads : heads;
  if (q.shape[2] % width != 0 || q.shape[2] == 0)
    return OpError(op, "query's hidden size " + Str(q.shape[2]) + " is not a multiple of " +
                           (p->packed ? "num_heads + 2 * kv_num_heads = " : "num_heads = ") + Str(width));
  p->head = q.shape[2] / width;
  if (p->head > kMaxHeadSize) return OpError(op, "head size " + Str(p->head) + " is too large");
  const ir::Shape kv_shape{p->batch, p->seq, kv_heads * p->head};
  if (!p->packed) {
    FCB_RETURN_IF_ERROR(SupportedF32(op, k, "key"));
    FCB_RETURN_IF_ERROR(SupportedF32(op, v, "value"));
    if (k.shape != kv_shape || v.shape != kv_shape)
      return OpError(op, "key " + ShapeStr(k.shape) + " and value " + ShapeStr(v.shape) + " must be " +
                             ShapeStr(kv_shape) + " (batch, sequence, kv_num_heads * head size)");
  }
  if (pk.present() != pv.present()) return OpError(op, "past_key and past_value must be both present or both absent");
  p->has_past = pk.present();
  if (p->has_past) {
    FCB_RETURN_IF_ERROR(SupportedF32(op, pk, "past_key"));
    FCB_RETURN_IF_ERROR(SupportedF32(op, pv, "past_value"));
    if (pk.shape.size() != 4 || pk.shape != pv.shape || pk.shape[0] != p->batch || pk.shape[1] != kv_heads ||
        pk.shape[3] != p->head)
      return OpError(op, "past_key " + ShapeStr(pk.shape) + " and past_value " + ShapeStr(pv.shape) +
                             " must both be [" + Str(p->batch) + ", " + Str(kv_heads) + ", past, " + Str(p->head) +
                             "] (BNSH)");
    p->past = pk.shape[2];
    if (p->past > kMaxSeq) return OpError(op, "past_key's sequence " + Str(p->past) + " is too long");
  }
  if (!sl.present() || sl.dtype != DType::kI32 || sl.shape != ir::Shape{p->batch})
    return OpError(op, "seqlens_k must be int32 [batch] = [" + Str(p->batch) + "]");
  if (!tl.present() || tl.dtype != DType::kI32 || tl.numel() != 1 || tl.shape.size() > 1)
    return OpError(op, "total_sequence_length must be one int32 element");
  if (const ir::TensorData* t = Constant(c, 6); t && t->bytes.size() == 4) {
    int32_t total = 0;
    std::memcpy(&total, t->bytes.data(), 4);
    if (total < 1 || total > kMaxSeq) return OpError(op, "total_sequence_length " + Str(total) + " is out of range");
    p->total_const = total;
  }
  FCB_RETURN_IF_ERROR(ReadScale(op, c.attrs, p->head, &p->scale));
  p->present = p->total_const >= 0 ? std::max(p->total_const, p->past) : p->past + p->seq;
  if (cs.present() != sn.present()) return OpError(op, "cos_cache and sin_cache must be both present or both absent");
  if (rotary && !cs.present()) return OpError(op, "do_rotary = 1 needs cos_cache and sin_cache");
  if (rotary) {
    FCB_RETURN_IF_ERROR(SupportedF32(op, cs, "cos_cache"));
    FCB_RETURN_IF_ERROR(SupportedF32(op, sn, "sin_cache"));
    if (cs.shape.size() != 2 || cs.shape != sn.shape || cs.shape[1] < 1 || 2 * cs.shape[1] > p->head)
      return OpError(op, "cos_cache " + ShapeStr(cs.shape) + " and sin_cache " + ShapeStr(sn.shape) +
                             " must be of one shape [positions, rotary_dim / 2] with rotary_dim <= head size " +
                             Str(p->head));
    p->rot = 2 * cs.shape[1];
    p->positions = cs.shape[0];
  }
  return Status::Ok();
}

Status InferGqa(const InferContext& c, std::vector<TensorInfo>* outs) {
  GqaPlan p;
  FCB_RETURN_IF_ERROR(ResolveGqa(c, &p));
  outs->push_back(TensorInfo{DType::kF32, {p.batch, p.seq, p.heads * p.head}});
  const ir::Shape present{p.batch, p.kv_heads, p.present, p.head};
  if (c.num_outputs > 1) outs->push_back(TensorInfo{DType::kF32, present});
  if (c.num_outputs > 2) outs->push_back(TensorInfo{DType::kF32, present});
  return Status::Ok();
}


// Per-thread scratch of the attention kernel for rows of up to `keys` keys:
// kernels::AttentionScratchFloats, plus one head vector (the rotated query)
// and one row of additive mask.
uint64_t RowScratchBytes(int64_t keys, int64_t head) {
  return static_cast<uint64_t>(kernels::AttentionScratchFloats(keys, head) + head + keys + 32) * sizeof(float);
}

Result<uint64_t> ScratchGqa(const CreateContext& c) {
  GqaPlan p;
  FCB_RETURN_IF_ERROR(ResolveGqa(AsInfer(c), &p));
  return RowScratchBytes(p.present, p.head);
}

Result<std::unique_ptr<Kernel>> CreateGqa(const CreateContext& c) {
  GqaPlan p;
  FCB_RETURN_IF_ERROR(ResolveGqa(AsInfer(c), &p));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* q = static_cast<const float*>(in[0]);
    const float* kin = p.packed ? q + p.heads * p.head : static_cast<const float*>(in[1]);
    const float* vin = p.packed ? q + (p.heads + p.kv_heads) * p.head : static_cast<const float*>(in[2]);
    const float* past_k = p.has_past ? static_cast<const float*>(in[3]) : nullptr;
    const float* past_v = p.has_past ? static_cast<const float*>(in[4]) : nullptr;
    const int32_t* seqlens = static_cast<const int32_t*>(in[5]);
    const int32_t total = *static_cast<const int32_t*>(in[6]);
    const float* cos_cache = p.rot ? static_cast<const float*>(in[7]) : nullptr;
    const float* sin_cache = p.rot ? static_cast<const float*>(in[8]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    // Every value is checked before anything is written: a bad one fails the
    // step and leaves the outputs (and a shared cache) as they were.
    const int64_t present_rows = std::max<int64_t>(total, p.past);
    if (total < 1 || present_rows != p.present)
      return InvalidArgument(std::string(kGqa) + ": total_sequence_length " + Str(total) + " gives " +
                             Str(present_rows) + " present rows; the step was compiled for " + Str(p.present) +
                             (p.total_const < 0 ? " (a growing cache: past + sequence)" : ""));
    const bool first = p.seq == total;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t tb = int64_t{seqlens[b]} + 1;
      const int64_t past_b = first ? 0 : tb - p.seq;
      const bool ok = first ? tb >= 1 && tb <= p.seq : tb <= total && past_b >= 0 && past_b <= p.past;
      if (!ok)
        return InvalidArgument(std::string(kGqa) + ": seqlens_k[" + Str(b) + "] = " + Str(seqlens[b]) +
                               " does not fit " + (first ? "a first prompt of " + Str(p.seq) + " tokens" :
                               "total_sequence_length " + Str(total) + ", " + Str(p.seq) + " new tokens and " +
                               Str(p.past) + " past rows"));
      if (p.rot && past_b + p.seq > p.positions)
        return InvalidArgument(std::string(kGqa) + ": position " + Str(past_b + p.seq - 1) + " of batch " + Str(b) +
                               " is outside cos_cache and sin_cache (" + Str(p.positions) + " positions)");
    }
    float* pres_k = static_cast<float*>(out[1]);
    float* pres_v = static_cast<float*>(out[2]);
    const bool shared = pres_k == past_k && pres_v == past_v && p.has_past && p.past == p.present;
    const int64_t H = p.head, S = p.seq, T = p.present;
    const int64_t q_row = (p.packed ? p.heads + 2 * p.kv_heads : p.heads) * H;  // floats per query token
    const int64_t kv_row = p.packed ? q_row : p.kv_heads * H;
    const int64_t half = p.rot / 2;
    auto past_of = [&](int64_t b) { return first ? int64_t{0} : int64_t{seqlens[b]} + 1 - S; };

    // 1. present = valid past rows, new rows (keys rotated), zeros. Keys and
    // values are separate items, so two threads share even a single KV head.
    ctx.pool->ParallelFor(p.batch * p.kv_heads * 2, 1, [&](int64_t b0, int64_t e0) {
      for (int64_t item = b0; item < e0; ++item) {
        const bool is_v = item % 2 == 1;
        const int64_t it = item / 2, b = it / p.kv_heads, h = it % p.kv_heads, pb = past_of(b);
        float* dst = (is_v ? pres_v : pres_k) + it * T * H;
        const float* past_src = is_v ? past_v : past_k;
        const float* src = is_v ? vin : kin;
        if (!shared && pb > 0)
          std::memcpy(dst, past_src + it * p.past * H, static_cast<size_t>(pb * H) * sizeof(float));
        for (int64_t s = 0; s < S; ++s) {
          const float* x = src + (b * S + s) * kv_row + h * H;
          float* row = dst + (pb + s) * H;
          if (p.rot && !is_v) {
            const int64_t pos = pb + s;
            RotateHead(x, row, H, p.rot, p.interleaved, cos_cache + pos * half, sin_cache + pos * half);
          } else {
            std::memcpy(row, x, static_cast<size_t>(H) * sizeof(float));
          }
        }
        if (!shared && pb + S < T)
          std::memset(dst + (pb + S) * H, 0, static_cast<size_t>((T - pb - S) * H) * sizeof(float));
      }
    });

    // 2. Each query row over its key range of present.
    const int64_t group = p.heads / p.kv_heads;
    const int64_t rows = p.batch * p.heads * S;
    const auto attention = ctx.k->f32.attention;
    ctx.pool->ParallelForThreads(rows, 1, [&](int t, int64_t b0, int64_t e0) {
      float* scratch = static_cast<float*>(ctx.ThreadScratch(t));
      float* qrot = scratch + kernels::AttentionScratchFloats(T, H);
      for (int64_t it = b0; it < e0; ++it) {
        const int64_t s = it % S, n = (it / S) % p.heads, b = it / (S * p.heads);
        const int64_t pb = past_of(b), kvh = n / group;
        const float* qs = q + (b * S + s) * q_row + n * H;
        if (p.rot) {
          const int64_t pos = pb + s;
          RotateHead(qs, qrot, H, p.rot, p.interleaved, cos_cache + pos * half, sin_cache + pos * half);
          qs = qrot;
        }
        const int64_t hi = pb + s + 1;
        const int64_t lo = p.window > 0 && hi > p.window ? hi - p.window : 0;
        const int64_t base = (b * p.kv_heads + kvh) * T * H + lo * H;
        const kernels::AttentionRow row{qs,      pres_k + base, pres_v + base, H, H, hi - lo, nullptr, p.scale,
                                        p.softcap, y + (b * S + s) * p.heads * H + n * H, H, H};
        attention(row, scratch);
      }
    });
    return Status::Ok();
  });
}

// ---------------------------------------------------------------------------
// MultiHeadAttention

struct MhaPlan {
  int64_t batch = 0, seq = 0, heads = 0, head = 0, vhead = 0;
  int64_t kv_len = 0, past = 0, total = 0;  // new key rows, past rows, all key rows
  bool bnsh_kv = false;                     // key/value given as [B, N, L, H]
  bool has_bias = false, has_past = false, causal = false;
  int mask_kind = 0;                        // 0 none, 1 lengths [B], 2 [B, T] keep/mask
  bool has_attn_bias = false, bias_batch = false, bias_heads = false;
  float scale = 1.f, mask_value = -10000.f;
};

Status ResolveMha(const InferContext& c, MhaPlan* p) {
  const auto& op = c.op;
  const TensorInfo &q = Input(c, 0), &k = Input(c, 1), &v = Input(c, 2), &bias = Input(c, 3);
  const TensorInfo &mask = Input(c, 4), &ab = Input(c, 5), &pk = Input(c, 6), &pv = Input(c, 7);
  for (size_t i = 8; i < c.inputs.size(); ++i)
    if (c.inputs[i].present())
      return OpUnsupported(op, std::string(i == 8 ? "past_sequence_length" : "cache_indirection") + " (input " +
                                   Str(static_cast<int64_t>(i)) + ") is not supported");
  if (c.num_outputs > 3) return OpUnsupported(op, "output_qk (output 3) is not supported");
  const int64_t heads = c.attrs.GetInt("num_heads", 0);
  FCB_RETURN_IF_ERROR(CheckAttrRange(op, "num_heads", heads, 1, kMaxHeads));
  p->heads = heads;
  FCB_RETURN_IF_ERROR(CheckFlag(op, c.attrs, "unidirectional", &p->causal));
  p->mask_value = c.attrs.GetFloat("mask_filter_value", -10000.f);
  if (std::isnan(p->mask_value)) return OpError(op, "mask_filter_value must not be NaN");
  if (!q.present()) return OpError(op, "needs query");
  FCB_RETURN_IF_ERROR(SupportedF32(op, q, "query"));
  if (q.shape.size() != 3)
    return OpUnsupported(op, "query " + ShapeStr(q.shape) + ": only a 3-D query [batch, sequence, hidden] is supported"
                             " (packed QKV is not)");
  p->batch = q.shape[0];
  p->seq = q.shape[1];
  if (p->batch < 1 || p->seq < 1 || p->seq > kMaxSeq)
    return OpError(op, "query " + ShapeStr(q.shape) + " needs batch and sequence >= 1");
  if (q.shape[2] % heads != 0 || q.shape[2] == 0)
    return OpError(op, "query's hidden size " + Str(q.shape[2]) + " is not a multiple of num_heads " + Str(heads));
  p->head = q.shape[2] / heads;
  if (p->head > kMaxHeadSize) return OpError(op, "head size " + Str(p->head) + " is too large");
  if (!k.present() || !v.present())
    return OpUnsupported(op, "key and value must both be given (packed QKV or KV is not supported)");
  FCB_RETURN_IF_ERROR(SupportedF32(op, k, "key"));
  FCB_RETURN_IF_ERROR(SupportedF32(op, v, "value"));
  if (k.shape.size() == 3 && v.shape.size() == 3) {
    if (k.shape[0] != p->batch || v.shape[0] != p->batch || k.shape[1] != v.shape[1] || k.shape[2] != q.shape[2] ||
        v.shape[2] % heads != 0 || v.shape[2] == 0)
      return OpError(op, "key " + ShapeStr(k.shape) + " and value " + ShapeStr(v.shape) +
                             " must be [batch, length, num_heads * head size] with query's batch and hidden size");
    p->kv_len = k.shape[1];
    p->vhead = v.shape[2] / heads;
  } else if (k.shape.size() == 4 && v.shape.size() == 4) {
    if (k.shape[0] != p->batch || k.shape[1] != heads || k.shape[3] != p->head || v.shape[0] != p->batch ||
        v.shape[1] != heads || v.shape[2] != k.shape[2] || v.shape[3] < 1)
      return OpError(op, "key " + ShapeStr(k.shape) + " and value " + ShapeStr(v.shape) +
                             " must be [batch, num_heads, length, head size] (BNSH)");
    p->bnsh_kv = true;
    p->kv_len = k.shape[2];
    p->vhead = v.shape[3];
  } else {
    return OpUnsupported(op, "key " + ShapeStr(k.shape) + " and value " + ShapeStr(v.shape) +
                             ": only 3-D [batch, length, hidden] or 4-D BNSH key and value are supported");
  }
  if (p->kv_len < 1 || p->kv_len > kMaxSeq || p->vhead > kMaxHeadSize)
    return OpError(op, "key and value need a length in [1, " + Str(kMaxSeq) + "]");
  FCB_RETURN_IF_ERROR(ReadScale(op, c.attrs, p->head, &p->scale));
  if (bias.present()) {
    FCB_RETURN_IF_ERROR(SupportedF32(op, bias, "bias"));
    const int64_t want = heads * (2 * p->head + p->vhead);
    if (bias.shape != ir::Shape{want}) return OpError(op, "bias must be [" + Str(want) + "], not " + ShapeStr(bias.shape));
    if (p->bnsh_kv) return OpUnsupported(op, "bias with BNSH key and value is not supported");
    p->has_bias = true;
  }
  if (pk.present() != pv.present()) return OpError(op, "past_key and past_value must be both present or both absent");
  p->has_past = pk.present();
  if (p->has_past) {
    if (p->bnsh_kv) return OpUnsupported(op, "past_key with BNSH key and value is not supported");
    FCB_RETURN_IF_ERROR(SupportedF32(op, pk, "past_key"));
    FCB_RETURN_IF_ERROR(SupportedF32(op, pv, "past_value"));
    if (pk.shape.size() != 4 || pv.shape.size() != 4 || pk.shape[0] != p->batch || pk.shape[1] != heads ||
        pk.shape[3] != p->head || pv.shape[0] != p->batch || pv.shape[1] != heads || pv.shape[2] != pk.shape[2] ||
        pv.shape[3] != p->vhead)
      return OpError(op, "past_key " + ShapeStr(pk.shape) + " and past_value " + ShapeStr(pv.shape) +
                             " must be [batch, num_heads, past, head size] (BNSH)");
    p->past = pk.shape[2];
    if (p->past > kMaxSeq) return OpError(op, "past_key's sequence " + Str(p->past) + " is too long");
  }
  p->total = p->past + p->kv_len;
  if (mask.present()) {
    if (mask.dtype != DType::kI32) return OpUnsupported(op, "key_padding_mask must be int32");
    if (mask.shape == ir::Shape{p->batch}) {
      p->mask_kind = 1;
    } else if (mask.shape == ir::Shape{p->batch, p->total}) {
      p->mask_kind = 2;
    } else {
      return OpUnsupported(op, "key_padding_mask " + ShapeStr(mask.shape) + ": only [batch] = [" + Str(p->batch) +
                                   "] and [batch, total length] = [" + Str(p->batch) + ", " + Str(p->total) +
                                   "] are supported");
    }
  }
  if (ab.present()) {
    FCB_RETURN_IF_ERROR(SupportedF32(op, ab, "attention_bias"));
    if (ab.shape.size() != 4 || (ab.shape[0] != 1 && ab.shape[0] != p->batch) ||
        (ab.shape[1] != 1 && ab.shape[1] != heads) || ab.shape[2] != p->seq || ab.shape[3] != p->total)
      return OpError(op, "attention_bias " + ShapeStr(ab.shape) + " must be [batch or 1, num_heads or 1, " +
                             Str(p->seq) + ", " + Str(p->total) + "]");
    p->has_attn_bias = true;
    p->bias_batch = ab.shape[0] != 1 || p->batch == 1;
    p->bias_heads = ab.shape[1] != 1 || heads == 1;
  }
  return Status::Ok();
}

Status InferMha(const InferContext& c, std::vector<TensorInfo>* outs) {
  MhaPlan p;
  FCB_RETURN_IF_ERROR(ResolveMha(c, &p));
  outs->push_back(TensorInfo{DType::kF32, {p.batch, p.seq, p.heads * p.vhead}});
  if (c.num_outputs > 1) outs->push_back(TensorInfo{DType::kF32, {p.batch, p.heads, p.total, p.head}});
  if (c.num_outputs > 2) outs->push_back(TensorInfo{DType::kF32, {p.batch, p.heads, p.total, p.vhead}});
  return Status::Ok();
}

// The per-thread scratch: the kernel's, the query with its bias, one
// additive mask row and, with bias or past rows, one head's keys and values.
Result<uint64_t> ScratchMha(const CreateContext& c) {
  MhaPlan p;
  FCB_RETURN_IF_ERROR(ResolveMha(AsInfer(c), &p));
  const bool block = p.has_bias || p.has_past;  // keys and values assembled per head
  return RowScratchBytes(p.total, std::max(p.head, p.vhead)) +
         (block ? static_cast<uint64_t>(p.total * (p.head + p.vhead)) * sizeof(float) : 0);
}

Result<std::unique_ptr<Kernel>> CreateMha(const CreateContext& c) {
  MhaPlan p;
  FCB_RETURN_IF_ERROR(ResolveMha(AsInfer(c), &p));
  const int n_out = static_cast<int>(c.outputs.size());
  return MakeKernel([p, n_out](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* q = static_cast<const float*>(in[0]);
    const float* kin = static_cast<const float*>(in[1]);
    const float* vin = static_cast<const float*>(in[2]);
    const float* bias = p.has_bias ? static_cast<const float*>(in[3]) : nullptr;
    const int32_t* mask = p.mask_kind ? static_cast<const int32_t*>(in[4]) : nullptr;
    const float* ab = p.has_attn_bias ? static_cast<const float*>(in[5]) : nullptr;
    const float* past_k = p.has_past ? static_cast<const float*>(in[6]) : nullptr;
    const float* past_v = p.has_past ? static_cast<const float*>(in[7]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const int64_t N = p.heads, H = p.head, Hv = p.vhead, S = p.seq, L = p.kv_len, P = p.past, T = p.total;
    // Keys and values of every head as [B, N, T, H] with past rows and bias:
    // the present outputs when the graph has them; else, with bias or past
    // rows, a block of the thread's scratch per head; else the key and value
    // inputs themselves, through strides.
    float* pres_k = n_out > 1 ? static_cast<float*>(out[1]) : nullptr;
    float* pres_v = n_out > 2 ? static_cast<float*>(out[2]) : nullptr;
    const bool direct = !p.has_past && !p.has_bias;
    // Head `it` (= b * N + n): its T key rows into dk, value rows into dv (either may be null).
    const auto fill = [&](int64_t it, float* dk, float* dv) {
      const int64_t b = it / N, n = it % N;
      if (dk) {
        if (P > 0) std::memcpy(dk, past_k + it * P * H, static_cast<size_t>(P * H) * sizeof(float));
        for (int64_t l = 0; l < L; ++l) {
          const float* ks = p.bnsh_kv ? kin + (it * L + l) * H : kin + (b * L + l) * N * H + n * H;
          float* kd = dk + (P + l) * H;
          for (int64_t i = 0; i < H; ++i) kd[i] = ks[i] + (bias ? bias[N * H + n * H + i] : 0.f);
        }
      }
      if (dv) {
        if (P > 0) std::memcpy(dv, past_v + it * P * Hv, static_cast<size_t>(P * Hv) * sizeof(float));
        for (int64_t l = 0; l < L; ++l) {
          const float* vs = p.bnsh_kv ? vin + (it * L + l) * Hv : vin + (b * L + l) * N * Hv + n * Hv;
          float* vd = dv + (P + l) * Hv;
          for (int64_t i = 0; i < Hv; ++i) vd[i] = vs[i] + (bias ? bias[2 * N * H + n * Hv + i] : 0.f);
        }
      }
    };
    if (pres_k || pres_v) {
      ctx.pool->ParallelFor(p.batch * N, 1, [&](int64_t b0, int64_t e0) {
        for (int64_t it = b0; it < e0; ++it)
          fill(it, pres_k ? pres_k + it * T * H : nullptr, pres_v ? pres_v + it * T * Hv : nullptr);
      });
    }
    const auto attention = ctx.k->f32.attention;
    const int64_t hmax = std::max(H, Hv);
    const bool any_add = p.mask_kind || p.causal || ab;
    ctx.pool->ParallelForThreads(p.batch * N, 1, [&](int t, int64_t b0, int64_t e0) {
      float* scratch = static_cast<float*>(ctx.ThreadScratch(t));
      float* qb = scratch + kernels::AttentionScratchFloats(T, hmax);
      float* add = qb + hmax;
      float* block = add + T + 32;  // [T, H] keys, then [T, Hv] values
      for (int64_t it = b0; it < e0; ++it) {
        const int64_t b = it / N, n = it % N;
        const float *kk, *vv;
        int64_t ks = H, vs = Hv;
        if (pres_k && pres_v) {
          kk = pres_k + it * T * H;
          vv = pres_v + it * T * Hv;
        } else if (!direct) {
          fill(it, block, block + T * H);
          kk = block;
          vv = block + T * H;
        } else if (p.bnsh_kv) {
          kk = kin + it * L * H;
          vv = vin + it * L * Hv;
        } else {
          kk = kin + b * L * N * H + n * H;
          vv = vin + b * L * N * Hv + n * Hv;
          ks = N * H;
          vs = N * Hv;
        }
        for (int64_t s = 0; s < S; ++s) {
          const float* qs = q + (b * S + s) * N * H + n * H;
          if (bias) {
            for (int64_t i = 0; i < H; ++i) qb[i] = qs[i] + bias[n * H + i];
            qs = qb;
          }
          // The additive row: mask_filter_value where masked, plus attention_bias.
          if (any_add) {
            for (int64_t j = 0; j < T; ++j) {
              bool masked = p.causal && j > P + s;
              if (p.mask_kind == 1) masked = masked || j >= mask[b];
              if (p.mask_kind == 2) masked = masked || mask[b * T + j] == 0;
              add[j] = masked ? p.mask_value : 0.f;
            }
            if (ab) {
              const int64_t bb = p.bias_batch ? b : 0, nn = p.bias_heads ? n : 0;
              const float* r = ab + ((bb * (p.bias_heads ? N : 1) + nn) * S + s) * T;
              for (int64_t j = 0; j < T; ++j) add[j] += r[j];
            }
          }
          const kernels::AttentionRow row{qs, kk, vv, ks, vs, T, any_add ? add : nullptr, p.scale, 0.f,
                                          y + (b * S + s) * N * Hv + n * Hv, H, Hv};
          attention(row, scratch);
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterAttentionContribOps(std::vector<OpDef>* ops) {
  OpDef gqa = Def<InferGqa, CreateGqa>(kGqa, 7, 12, 1, 4);
  gqa.scratch = ScratchGqa;
  ops->push_back(std::move(gqa));
  OpDef mha = Def<InferMha, CreateMha>(kMha, 1, 10, 1, 4);
  mha.scratch = ScratchMha;
  ops->push_back(std::move(mha));
}

}  // namespace fcb::ops
