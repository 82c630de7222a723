#include <algorithm>
#include <cstring>

#include "ops/op.h"
#include "ops/families.h"
#include "ops/internal/internal.h"

namespace fcb::ops {

const format::AttrDesc* Attrs::Find(std::string_view name) const {
  for (const auto& a : a_)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t Attrs::GetInt(std::string_view name, int64_t def) const {
  const auto* a = Find(name);
  if (!a) return def;
  if (!a->ints.empty()) return a->ints[0];
  if (!a->floats.empty()) return static_cast<int64_t>(a->floats[0]);
  return def;
}

float Attrs::GetFloat(std::string_view name, float def) const {
  const auto* a = Find(name);
  if (!a) return def;
  if (!a->floats.empty()) return a->floats[0];
  if (!a->ints.empty()) return static_cast<float>(a->ints[0]);
  return def;
}

std::string Attrs::GetString(std::string_view name, const std::string& def) const {
  const auto* a = Find(name);
  return a ? a->str : def;
}

std::vector<int64_t> Attrs::GetInts(std::string_view name, std::vector<int64_t> def) const {
  const auto* a = Find(name);
  return a ? a->ints : def;
}

std::vector<float> Attrs::GetFloats(std::string_view name, std::vector<float> def) const {
  const auto* a = Find(name);
  return a ? a->floats : def;
}

Attrs AttrsFromNode(const ir::Node& node) {
  std::vector<format::AttrDesc> out;
  for (const auto& [name, at] : node.attrs) {
    format::AttrDesc d;
    d.name = name;
    using K = ir::Attribute::Kind;
    switch (at.kind) {
      case K::kInt: d.ints = {at.i}; break;
      case K::kFloat: d.floats = {at.f}; break;
      case K::kString: d.str = at.s; break;
      case K::kInts: d.ints = at.ints; break;
      case K::kFloats: d.floats = at.floats; break;
      case K::kStrings:
        for (const auto& s : at.strings) d.str += (d.str.empty() ? "" : ",") + s;
        break;
      case K::kTensor:
        if (at.t) {
          // A tensor attribute (ConstantOfShape's value, ...) keeps its dtype code in "dtype".
          if (at.t->dtype == ir::DType::kF32 || at.t->dtype == ir::DType::kF64) {
            for (int64_t i = 0; i < at.t->numel(); ++i)
              d.floats.push_back(static_cast<float>(at.t->GetDouble(i)));
          } else {
            d.ints = at.t->ToInts();
          }
          format::AttrDesc dt;
          dt.name = name + ".dtype";
          dt.ints = {static_cast<int64_t>(at.t->dtype)};
          out.push_back(std::move(dt));
        }
        break;
    }
    out.push_back(std::move(d));
  }
  return Attrs(std::move(out));
}

const std::vector<OpDef>& AllOps() {
  static const std::vector<OpDef> kOps = [] {
    std::vector<OpDef> v;
    // The ONNX families, in the groups of families.h.
    RegisterElementwiseOps(&v);
    RegisterUnaryOps(&v);
    RegisterActivationExtraOps(&v);
    RegisterTensorOps(&v);
    RegisterTransposeOps(&v);
    RegisterCopyOps(&v);
    RegisterPadTileOps(&v);
    RegisterGatherScatterOps(&v);
    RegisterSpaceDepthOps(&v);
    RegisterTensorExtraOps(&v);
    RegisterDataShapeOps(&v);
    RegisterReduceOps(&v);
    RegisterSoftmaxOps(&v);
    RegisterLayerNormOps(&v);
    RegisterNormOps(&v);
    RegisterTopKHardmaxOps(&v);
    RegisterScanOneHotOps(&v);
    RegisterMatMulOps(&v);
    RegisterEinsumOps(&v);
    RegisterNnOps(&v);
    RegisterConvRefOps(&v);
    RegisterRecurrentOps(&v);
    RegisterQuantizeLinearOps(&v);
    RegisterIntegerQuantOps(&v);
    RegisterResizeOps(&v);
    RegisterSamplingOps(&v);
    RegisterSignalOps(&v);
    RegisterRandomOps(&v);
    RegisterControlFlowOps(&v);
    RegisterTransformerNormOps(&v);
    RegisterTransformerActivationOps(&v);
    RegisterRotaryOps(&v);
    RegisterAttentionContribOps(&v);
    RegisterMatMulNBitsOps(&v);
    // The internal operators, one file each (ops/internal/).
#define FCB_ADD_INTERNAL(name, def) v.push_back(def());
    FCB_INTERNAL_OPS(FCB_ADD_INTERNAL)
#undef FCB_ADD_INTERNAL
    std::sort(v.begin(), v.end(), [](const OpDef& a, const OpDef& b) { return a.name < b.name; });
    return v;
  }();
  return kOps;
}

std::string RegistryName(std::string_view domain, std::string_view op_type) {
  if (domain.empty() || domain == "ai.onnx") return std::string(op_type);
  return std::string(domain) + "." + std::string(op_type);
}

const OpDef* FindOp(std::string_view name) {
  const auto& ops = AllOps();
  auto it = std::lower_bound(ops.begin(), ops.end(), name,
                             [](const OpDef& d, std::string_view n) { return d.name < n; });
  return (it != ops.end() && it->name == name) ? &*it : nullptr;
}

Status InferOutputs(const OpDef& def, const InferContext& ctx, std::vector<TensorInfo>* outputs) {
  const int n_in = static_cast<int>(ctx.inputs.size());
  if (n_in < def.min_inputs || n_in > def.max_inputs)
    return InvalidArgument(def.name + " takes " + std::to_string(def.min_inputs) + " to " +
                           std::to_string(def.max_inputs) + " inputs, got " + std::to_string(n_in));
  if (ctx.num_outputs < def.min_outputs || ctx.num_outputs > def.max_outputs)
    return InvalidArgument(def.name + " produces " + std::to_string(def.min_outputs) + " to " +
                           std::to_string(def.max_outputs) + " outputs, got " +
                           std::to_string(ctx.num_outputs));
  if (ctx.constants.size() != ctx.inputs.size()) return Internal("constants/inputs size mismatch");
  outputs->clear();
  FCB_RETURN_IF_ERROR(def.infer(ctx, outputs));
  if (static_cast<int>(outputs->size()) != ctx.num_outputs)
    return Internal(def.name + ": shape inference produced the wrong number of outputs");
  return Status::Ok();
}

Result<std::vector<std::shared_ptr<ir::TensorData>>> Evaluate(
    std::string_view op, const Attrs& attrs, const std::vector<const ir::TensorData*>& inputs,
    int num_outputs) {
  const OpDef* def = FindOp(op);
  if (!def) return Unsupported("operator " + std::string(op) + " is not supported");
  std::vector<TensorInfo> in_info(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) in_info[i] = TensorInfo{inputs[i]->dtype, inputs[i]->shape};
  std::vector<TensorInfo> out_info;
  InferContext ictx{op, attrs, in_info, inputs, num_outputs};
  FCB_RETURN_IF_ERROR(InferOutputs(*def, ictx, &out_info));
  return Evaluate(*def, attrs, inputs, in_info, out_info);
}

Result<std::vector<std::shared_ptr<ir::TensorData>>> Evaluate(const OpDef& def, const Attrs& attrs,
                                                              const std::vector<const ir::TensorData*>& inputs,
                                                              const std::vector<TensorInfo>& in_info,
                                                              const std::vector<TensorInfo>& out_info) {
  std::vector<const void*> data;
  data.reserve(inputs.size());
  for (const auto* t : inputs) data.push_back(t ? t->bytes.data() : nullptr);
  CreateContext cctx{def.name, attrs, in_info, out_info, inputs, &data, true};
  FCB_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, def.create(cctx));
  std::vector<std::shared_ptr<ir::TensorData>> outs;
  std::vector<void*> out_ptrs;
  outs.reserve(out_info.size());
  out_ptrs.reserve(out_info.size());
  for (const auto& o : out_info) {
    outs.push_back(ir::TensorData::Make(o.dtype, o.shape));
    out_ptrs.push_back(outs.back()->bytes.data());
  }
  ThreadPool pool(1);
  RunContext rctx{&kernels::GetKernelBundle(TargetId::kGeneric), &pool};
  std::vector<uint64_t> scratch;  // 8-byte units, 64-byte aligned by over-allocating
  if (def.scratch) {
    FCB_ASSIGN_OR_RETURN(uint64_t bytes, def.scratch(cctx));
    scratch.resize((bytes + 64) / 8 + 8);
    const auto addr = reinterpret_cast<uintptr_t>(scratch.data());
    rctx.scratch = reinterpret_cast<uint8_t*>((addr + 63) / 64 * 64);
    rctx.scratch_stride = bytes;
  }
  FCB_RETURN_IF_ERROR(kernel->Run(rctx, data.data(), out_ptrs.data()));
  return outs;
}

}  // namespace fcb::ops
