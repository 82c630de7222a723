#include "ops/plan_check.h"

#include <algorithm>

#include "fcb/limits.h"
#include "ops/conv_geom.h"
#include "ops/op_util.h"

namespace fcb::ops {

namespace {

// A step's kernels assume that what they write does not overlap what they
// read (they copy with memcpy, keep pointers __restrict, tile in place): no
// arena output of a step may share a byte with another of its outputs or
// with any of its arena inputs. The memory planner never places them so
// (their lifetimes meet at the step); a hostile file could.
Status CheckStepOverlap(const format::ContextDesc& c, const format::StepDesc& s, const OpDef& def,
                        const std::vector<uint64_t>& bytes, const std::string& where) {
  auto range = [&](int32_t t) {
    return std::string("[offset ") + std::to_string(c.tensors[t].offset) + ", " + std::to_string(bytes[t]) + " bytes]";
  };
  auto overlaps = [&](int32_t a, int32_t b) {
    if (c.tensors[a].storage != format::Storage::kArena || c.tensors[b].storage != format::Storage::kArena)
      return false;
    if (bytes[a] == 0 || bytes[b] == 0) return false;
    const uint64_t a0 = c.tensors[a].offset, b0 = c.tensors[b].offset;  // both ends checked against the arena
    return a0 < b0 + bytes[b] && b0 < a0 + bytes[a];
  };
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    const int32_t y = s.outputs[o];
    for (size_t o2 = 0; o2 < o; ++o2)
      if (overlaps(y, s.outputs[o2]))
        return InvalidArgument(where + ": output " + std::to_string(o) + " (tensor " + std::to_string(y) + " " +
                               range(y) + ") overlaps output " + std::to_string(o2) + " (tensor " +
                               std::to_string(s.outputs[o2]) + " " + range(s.outputs[o2]) + ") in the arena");
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const int32_t x = s.inputs[i];
      // A view step (plans with symbols): a view op's output over exactly its input's bytes; its kernel
      // copies nothing then.
      if (o == 0 && i == 0 && x >= 0 && (def.traits & kTraitView) && s.outputs.size() == 1 &&
          c.tensors[x].storage == format::Storage::kArena && c.tensors[x].offset == c.tensors[y].offset &&
          bytes[x] == bytes[y])
        continue;
      if (x >= 0 && overlaps(y, x))
        return InvalidArgument(where + ": output " + std::to_string(o) + " (tensor " + std::to_string(y) + " " +
                               range(y) + ") overlaps input " + std::to_string(i) + " (tensor " + std::to_string(x) +
                               " " + range(x) + ") in the arena");
    }
  }
  return Status::Ok();
}


}  // namespace

bool GuardHolds(const std::vector<int64_t>& guard, const ir::Shape& out0) {
  if (guard.size() != 3 || out0.size() != 4) return true;
  const int64_t tile = guard[1];
  const int64_t tiles = out0[0] * ((out0[1] + tile - 1) / tile) * ((out0[2] + tile - 1) / tile);
  return guard[0] == 1 ? tiles >= guard[2] : tiles < guard[2];
}

bool ComputedFromShapes(const format::StepDesc& s, const std::vector<bool>& computed,
                        const std::vector<std::shared_ptr<ir::TensorData>>& small_constants,
                        const std::vector<TensorInfo>& outputs) {
  if (s.op == "Shape" || s.op == "Size") return s.inputs.size() == 1 && s.inputs[0] >= 0;
  bool any_computed = false;
  for (int32_t t : s.inputs) {
    if (t < 0) continue;
    if (!small_constants[t]) return false;
    any_computed = any_computed || computed[t];
  }
  uint64_t bytes = 0;
  for (const auto& o : outputs) bytes += static_cast<uint64_t>(o.bytes());
  return any_computed && bytes <= kMaxInferConstantBytes;
}

Result<CheckedPlan> CheckPlan(const format::ContextDesc& c, PlanWeights& weights,
                              const std::vector<ir::Shape>* input_shapes,
                              const std::vector<std::shared_ptr<ir::TensorData>>* weight_constants) {
  if (weight_constants && weight_constants->size() != c.tensors.size()) weight_constants = nullptr;
  CheckedPlan p;
  const size_t nt = c.tensors.size();
  p.infos.resize(nt);
  p.bytes.assign(nt, 0);
  p.weights.assign(nt, nullptr);
  p.small_constants.resize(nt);
  for (size_t i = 0; i < nt; ++i) {
    const auto& t = c.tensors[i];
    auto where = [&] { return "tensor " + std::to_string(i) + " ('" + t.name + "')"; };  // for errors only
    const ir::DType dtype = t.dtype;
    const size_t es = ir::DTypeSize(dtype);
    if (es == 0) return InvalidArgument(where() + " has unknown dtype code " + std::to_string(static_cast<int32_t>(t.dtype)));
    if (t.shape.size() > static_cast<size_t>(limits::kMaxRank))
      return InvalidArgument(where() + " has " + std::to_string(t.shape.size()) + " dimensions, more than the limit of " +
                             std::to_string(limits::kMaxRank) + " (fcb/limits.h)");
    auto numel = CheckedNumel(t.shape);
    if (!numel.ok()) return InvalidArgument(where() + ": " + numel.status().message());
    if (static_cast<uint64_t>(numel.value()) > limits::kMaxTensorElements)
      return InvalidArgument(where() + " has " + std::to_string(numel.value()) + " elements, more than the limit of " +
                             std::to_string(limits::kMaxTensorElements) + " (fcb/limits.h)");
    const uint64_t bytes = static_cast<uint64_t>(numel.value()) * es;
    p.bytes[i] = bytes;
    p.infos[i] = {dtype, t.shape};
    if (t.storage == format::Storage::kArena) {
      if (t.offset > c.arena_bytes || bytes > c.arena_bytes - t.offset)
        return InvalidArgument(where() + " [offset " + std::to_string(t.offset) + ", " + std::to_string(bytes) +
                               " bytes] lies outside the arena of " + std::to_string(c.arena_bytes) + " bytes");
      if (t.offset % 64 != 0) return InvalidArgument(where() + " is not 64-byte aligned in the arena");
    } else if (t.storage == format::Storage::kWeight) {
      if (t.blob < 0 || static_cast<size_t>(t.blob) >= weights.count())
        return InvalidArgument(where() + " refers to weight blob " + std::to_string(t.blob) + " which does not exist");
      if (bytes > weights.size(t.blob))
        return InvalidArgument(where() + " needs " + std::to_string(bytes) + " bytes but blob " + std::to_string(t.blob) +
                               " holds " + std::to_string(weights.size(t.blob)));
      p.weights[i] = weights.data(t.blob);
      const bool floating = dtype == ir::DType::kF32 || dtype == ir::DType::kF16 ||
                            dtype == ir::DType::kBF16 || dtype == ir::DType::kF64;
      const bool small = bytes <= kMaxInferConstantBytes;
      if (small && weight_constants && (*weight_constants)[i]) {
        p.small_constants[i] = (*weight_constants)[i];  // read (and verified) before
        continue;
      }
      if (!floating || small) FCB_RETURN_IF_ERROR(weights.Verify(t.blob, t.name));
      if (small) {
        auto td = std::make_shared<ir::TensorData>();
        td->dtype = dtype;
        td->shape = t.shape;
        const auto* b = static_cast<const uint8_t*>(p.weights[i]);
        td->bytes.assign(b, b + bytes);
        p.small_constants[i] = std::move(td);
      }
    } else {
      return InvalidArgument(where() + " has unknown storage kind");
    }
  }
  auto is_arena = [&](int32_t t) {
    return t >= 0 && static_cast<size_t>(t) < nt && c.tensors[t].storage == format::Storage::kArena;
  };
  for (int32_t t : c.inputs)
    if (!is_arena(t)) return InvalidArgument("method '" + c.method + "' input refers to an invalid tensor");
  for (int32_t t : c.outputs)
    if (!is_arena(t)) return InvalidArgument("method '" + c.method + "' output refers to an invalid tensor");
  const bool resolving = input_shapes != nullptr;
  if (resolving) {
    if (!c.dynamic() || input_shapes->size() != c.inputs.size())
      return InvalidArgument("method '" + c.method + "': input shapes given for a plan without symbols");
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      TensorInfo& info = p.infos[c.inputs[i]];
      const TensorInfo given{info.dtype, (*input_shapes)[i]};
      if (given.shape.size() != info.shape.size() || given.numel() < 0 ||
          static_cast<uint64_t>(given.bytes()) > p.bytes[c.inputs[i]])
        return InvalidArgument("method '" + c.method + "' input " + std::to_string(i) + " cannot be " +
                               ir::ShapeToString(given.shape));
      info = given;
    }
  }
  // Per tensor: computed from shapes alone at this size (plans with symbols).
  std::vector<bool> computed(nt, false);
  p.computed_steps.assign(c.steps.size(), false);
  p.guarded_off.assign(c.steps.size(), false);
  p.needed.assign(nt, false);
  for (size_t si = 0; si < c.steps.size(); ++si) {
    const auto& s = c.steps[si];
    CheckedStep cs;
    cs.where = "step " + std::to_string(si) + " (" + s.op + ", node '" + s.node + "')";
    cs.def = FindOp(s.op);
    if (!cs.def) return InvalidArgument(cs.where + ": operator '" + s.op + "' is unknown to this runtime");
    for (int32_t t : s.inputs) {
      if (t == -1) {
        cs.inputs.push_back({});
        cs.constants.push_back(nullptr);
        cs.data.push_back(nullptr);
        continue;
      }
      if (t < 0 || static_cast<size_t>(t) >= nt) return InvalidArgument(cs.where + ": input tensor index out of range");
      cs.inputs.push_back(p.infos[t]);
      cs.constants.push_back(p.small_constants[t].get());
      cs.data.push_back(p.weights[t]);
    }
    std::vector<TensorInfo> declared;
    for (int32_t t : s.outputs) {
      if (!is_arena(t)) return InvalidArgument(cs.where + ": output must be an arena tensor");
      declared.push_back(p.infos[t]);
    }
    FCB_RETURN_IF_ERROR(CheckStepOverlap(c, s, *cs.def, p.bytes, cs.where));
    cs.attrs = Attrs(s.attrs);
    InferContext ictx{s.op, cs.attrs, cs.inputs, cs.constants, static_cast<int>(s.outputs.size())};
    Status st = InferOutputs(*cs.def, ictx, &cs.outputs);
    if (!st.ok()) return InvalidArgument(cs.where + ": " + st.message());
    for (size_t i = 0; i < cs.outputs.size(); ++i) {
      if (!resolving) {
        if (cs.outputs[i].dtype != declared[i].dtype || cs.outputs[i].shape != declared[i].shape)
          return InvalidArgument(cs.where + ": output " + std::to_string(i) + " is declared " +
                                 ir::DTypeName(declared[i].dtype) + " " + ir::ShapeToString(declared[i].shape) +
                                 " but its inputs give " + ir::DTypeName(cs.outputs[i].dtype) + " " +
                                 ir::ShapeToString(cs.outputs[i].shape));
        continue;
      }
      const int32_t t = s.outputs[i];
      if (cs.outputs[i].dtype != declared[i].dtype || cs.outputs[i].shape.size() != declared[i].shape.size())
        return InvalidArgument(cs.where + ": output " + std::to_string(i) + " is declared " +
                               ir::DTypeName(declared[i].dtype) + " of rank " +
                               std::to_string(declared[i].shape.size()) + " but at this size its inputs give " +
                               ir::DTypeName(cs.outputs[i].dtype) + " " + ir::ShapeToString(cs.outputs[i].shape));
      auto numel = CheckedNumel(cs.outputs[i].shape);
      if (!numel.ok() || static_cast<uint64_t>(numel.value()) * ir::DTypeSize(declared[i].dtype) > p.bytes[t])
        return InvalidArgument(cs.where + ": output " + std::to_string(i) + " ('" + c.tensors[t].name + "') is " +
                               ir::ShapeToString(cs.outputs[i].shape) + " at this size, more than the " +
                               std::to_string(p.bytes[t]) + " bytes planned for it at the bound (" +
                               ir::ShapeToString(declared[i].shape) + ")");
      p.infos[t] = cs.outputs[i];
    }
    if (!s.guard.empty()) {
      if (cs.outputs.empty() || cs.outputs[0].shape.size() != 4)
        return InvalidArgument(cs.where + ": a guarded step needs an output of rank 4 ([N, H, W, C])");
      p.guarded_off[si] = !GuardHolds(s.guard, cs.outputs[0].shape);
    }
    if (c.dynamic() && ComputedFromShapes(s, computed, p.small_constants, cs.outputs)) {
      std::vector<std::shared_ptr<ir::TensorData>> values;
      if (s.op == "Shape" || s.op == "Size") {
        const auto v = ShapeOpValues(s.op, cs.attrs, cs.inputs[0].shape);
        values.push_back(s.op == "Size" ? ir::TensorData::FromInts({}, v)
                                        : ir::TensorData::FromInts({static_cast<int64_t>(v.size())}, v));
      } else {
        auto ev = Evaluate(s.op, cs.attrs, cs.constants, static_cast<int>(s.outputs.size()));
        if (!ev.ok()) return InvalidArgument(cs.where + ": evaluating it from the shapes: " + ev.status().message());
        values = std::move(ev).value();
      }
      p.computed_steps[si] = true;
      for (size_t i = 0; i < s.outputs.size() && i < values.size(); ++i) {
        if (values[i]->dtype != cs.outputs[i].dtype || values[i]->shape != cs.outputs[i].shape)
          return InvalidArgument(cs.where + ": its value from the shapes disagrees with its inferred output");
        p.small_constants[s.outputs[i]] = std::move(values[i]);
        computed[s.outputs[i]] = true;
      }
    }
    if (cs.def->scratch) {
      auto scratch = cs.def->scratch(cs.create_context());
      if (!scratch.ok()) return InvalidArgument(cs.where + ": " + scratch.status().message());
      cs.scratch = scratch.value();
      if (cs.scratch > (uint64_t{1} << 30)) return InvalidArgument(cs.where + ": scratch of " + std::to_string(cs.scratch) + " bytes is too large");
      p.scratch_bytes = std::max(p.scratch_bytes, (cs.scratch + 63) / 64 * 64);
    }
    p.steps.push_back(std::move(cs));
  }
  for (size_t si = 0; si < c.steps.size(); ++si)
    if (!p.computed_steps[si])
      for (int32_t t : c.steps[si].inputs)
        if (t >= 0) p.needed[t] = true;
  for (int32_t t : c.outputs) p.needed[t] = true;
  p.computed_tensors = std::move(computed);
  return p;
}

std::string CheckStateBinding(const format::ContextDesc& c, const format::ContextDesc::StateDesc& b,
                              int32_t* step) {
  const int32_t in = c.inputs[b.input], out = c.outputs[b.output];
  const std::string pair = "state '" + c.tensors[in].name + "' -> '" + c.tensors[out].name + "'";
  int32_t producer = -1;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const auto& s = c.steps[i];
    for (int32_t t : s.outputs)
      if (t == out) {
        if (producer >= 0)
          return pair + ": '" + c.tensors[out].name + "' is written by two steps (" + std::to_string(producer) +
                 " and " + std::to_string(i) + ")";
        producer = static_cast<int32_t>(i);
      }
  }
  if (producer < 0) return pair + ": no step writes '" + c.tensors[out].name + "'";
  const auto& s = c.steps[producer];
  // The steps that update a state in place, and which input each output
  // continues: GroupQueryAttention's present_key (1) / present_value (2)
  // over past_key (3) / past_value (4).
  const bool gqa = s.op == "com.microsoft.GroupQueryAttention";
  bool in_place = false;
  if (gqa)
    for (int k : {1, 2})
      if (s.outputs.size() > static_cast<size_t>(k) && s.outputs[k] == out && s.inputs.size() > static_cast<size_t>(k + 2) &&
          s.inputs[k + 2] == in)
        in_place = true;
  if (!in_place)
    return pair + ": '" + c.tensors[out].name + "' is written by step " + std::to_string(producer) + " (" + s.op +
           ", node '" + s.node + "'), which does not update '" + c.tensors[in].name +
           "' in place; fcb keeps a state in place where a com.microsoft.GroupQueryAttention with a static "
           "buffer (past and present of one shape) writes it";
  for (size_t i = 0; i < c.steps.size(); ++i) {
    if (static_cast<int32_t>(i) == producer) continue;
    for (int32_t t : c.steps[i].inputs)
      if (t == in)
        return pair + ": step " + std::to_string(i) + " (" + c.steps[i].op + ", node '" + c.steps[i].node +
               "') also reads '" + c.tensors[in].name + "', whose bytes the update overwrites";
  }
  for (int32_t t : c.outputs)
    if (t == in) return pair + ": '" + c.tensors[in].name + "' is also a method output";
  if (step) *step = producer;
  return "";
}

}  // namespace fcb::ops
