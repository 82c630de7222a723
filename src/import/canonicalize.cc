// Opset canonicalization: every node reaches the op registry in the latest
// (opset-18) form, so an op implementation handles one form only. Attributes
// that later opsets turned into inputs become constant inputs; removed
// attributes are dropped; renamed or retired ops map to their successors.
#include <algorithm>
#include <set>

#include "import/import_state.h"
#include "ops/op.h"

namespace fcb::import {
namespace {

ir::TensorPtr Ints1D(const std::vector<int64_t>& v) {
  return ir::TensorData::FromInts({static_cast<int64_t>(v.size())}, v);
}

void SetInput(ir::Node& n, size_t index, int id) {
  if (n.inputs.size() <= index) n.inputs.resize(index + 1, -1);
  n.inputs[index] = id;
}

// Moves an ints attribute to a constant int64 1-D input at `index`.
void IntsAttrToInput(ImportState& s, ir::Node& n, const std::string& attr, size_t index) {
  if (!n.Has(attr)) return;
  int id = s.AddConst(n.name + "/" + attr, Ints1D(n.GetInts(attr)));
  n.attrs.erase(attr);
  SetInput(n, index, id);
}

bool ShapeKnown(const ImportState& s, int id) {
  return id >= 0 && s.Known(id) && s.value(id).has_shape;
}

// Softmax / LogSoftmax / Hardmax before opset 13 coerce the input to 2-D at
// `axis` ([prod(d[:axis]), prod(d[axis:])]) and normalize each row.
Status ExpandCoercedSoftmax(ImportState& s, ir::Node n) {
  const int x = n.inputs.empty() ? -1 : n.inputs[0];
  if (!ShapeKnown(s, x) || n.outputs.size() != 1) return s.Emit(std::move(n));
  const ir::Shape shape = s.value(x).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  int64_t axis = n.GetInt("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r)
    return InvalidArgument(n.Describe() + ": axis " + std::to_string(n.GetInt("axis", 1)) +
                           " out of range for input of rank " + std::to_string(r));
  if (r == 0 || axis == r - 1) {  // already the same as the opset-13 form
    n.SetInt("axis", -1);
    return s.Emit(std::move(n));
  }
  ir::Node flat;
  flat.name = n.name + "/flatten";
  flat.op_type = "Flatten";
  flat.inputs = {x};
  flat.outputs = {s.AddTemp(flat.name)};
  flat.SetInt("axis", axis);
  const int flat_out = flat.outputs[0];
  FCB_RETURN_IF_ERROR(s.Emit(std::move(flat)));

  ir::Node soft = n;
  soft.inputs = {flat_out};
  soft.outputs = {s.AddTemp(n.name + "/2d")};
  soft.SetInt("axis", -1);
  const int soft_out = soft.outputs[0];
  FCB_RETURN_IF_ERROR(s.Emit(std::move(soft)));

  ir::Node back;
  back.name = n.name + "/reshape";
  back.op_type = "Reshape";
  back.inputs = {soft_out, s.AddConst(n.name + "/shape", Ints1D(shape))};
  back.outputs = n.outputs;
  return s.Emit(std::move(back));
}

// Split into n outputs without sizes: explicit sizes, so Split has one form.
// Opset 18's num_outputs allows a smaller last chunk; earlier opsets need equal parts.
void ExplicitSplitSizes(ImportState& s, ir::Node& n) {
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) return;
  if (!ShapeKnown(s, n.inputs[0])) return;
  const ir::Shape& shape = s.value(n.inputs[0]).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  int64_t axis = n.GetInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return;  // Split's own inference reports it
  const int64_t parts = n.GetInt("num_outputs", static_cast<int64_t>(n.outputs.size()));
  if (parts <= 0) return;
  const int64_t dim = shape[axis];
  const int64_t chunk = (dim + parts - 1) / parts;
  if (!n.Has("num_outputs") && dim % parts != 0) return;  // invalid; let inference report it
  std::vector<int64_t> sizes;
  for (int64_t p = 0, left = dim; p < parts; ++p) {
    sizes.push_back(std::min(chunk, left));
    left -= sizes.back();
  }
  n.attrs.erase("num_outputs");
  SetInput(n, 1, s.AddConst(n.name + "/split", Ints1D(sizes)));
}

// Pad at opset 18 may name the padded axes; expand to pads over every axis.
void ExpandPadAxes(ImportState& s, ir::Node& n) {
  if (n.inputs.size() < 4 || n.inputs[3] < 0) return;
  if (!ShapeKnown(s, n.inputs[0]) || n.inputs[1] < 0) return;
  const ir::Value& axes_v = s.value(n.inputs[3]);
  const ir::Value& pads_v = s.value(n.inputs[1]);
  if (!axes_v.is_constant() || !pads_v.is_constant()) return;
  const int64_t r = static_cast<int64_t>(s.value(n.inputs[0]).shape.size());
  const auto axes = axes_v.constant->ToInts();
  const auto pads = pads_v.constant->ToInts();
  if (pads.size() != 2 * axes.size()) return;  // let inference report it
  std::vector<int64_t> full(2 * r, 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r) return;
    full[a] = pads[k];
    full[a + r] = pads[k + axes.size()];
  }
  n.inputs[1] = s.AddConst(n.name + "/pads", Ints1D(full));
  n.inputs.resize(3);
}

const std::set<std::string> kReduceOps = {
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"};

// Operators with a `seed` attribute (src/ops/random.cc).
const std::set<std::string> kRandomOps = {"Bernoulli", "RandomNormal", "RandomNormalLike",
                                          "RandomUniform", "RandomUniformLike"};

// Compress with a constant condition too large for the plan checker to
// re-read at load (ops::kMaxInferConstantBytes) becomes a Gather of the
// selected indices (after a flattening Reshape when there is no axis): the
// same result, with the indices stored as an ordinary weight. Smaller
// conditions stay Compress steps (src/ops/data_shape.cc). Anything Compress
// itself would refuse is left to it.
Status CompressAsGather(ImportState& s, ir::Node n) {
  const int x = n.inputs[0], c = n.inputs[1];
  const ir::TensorData& cond = *s.value(c).constant;
  const ir::Shape xs = s.value(x).shape;
  const bool has_axis = n.Has("axis");
  int64_t axis = n.GetInt("axis", 0), len = ir::NumElements(xs);
  if (has_axis) {
    const int64_t r = static_cast<int64_t>(xs.size());
    if (axis < -r || axis >= r) return s.Emit(std::move(n));
    if (axis < 0) axis += r;
    len = xs[axis];
  }
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!cond.bytes[i]) continue;
    if (i >= len) return s.Emit(std::move(n));  // Compress reports it
    picked.push_back(i);
  }
  int data = x;
  if (!has_axis) {
    ir::Node flat;
    flat.name = n.name + "/flatten";
    flat.op_type = "Reshape";
    flat.inputs = {x, s.AddConst(n.name + "/flat_shape", Ints1D({-1}))};
    flat.outputs = {s.AddTemp(flat.name)};
    data = flat.outputs[0];
    FCB_RETURN_IF_ERROR(s.Emit(std::move(flat)));
    axis = 0;
  }
  ir::Node gather;
  gather.name = n.name;
  gather.op_type = "Gather";
  gather.inputs = {data, s.AddConst(n.name + "/indices", Ints1D(picked))};
  gather.outputs = n.outputs;
  gather.SetInt("axis", axis);
  return s.Emit(std::move(gather));
}

// Whether a Dropout with a training_mode input computes the identity: its
// training_mode is a constant false, or a constant true with a constant ratio
// of 0 (torch exports nn.Dropout(p=0.0) so, e.g. torchvision's swin_t
// attention dropout). Anything else stays a Dropout, which refuses to drop
// at random.
bool DropoutIsIdentity(const ImportState& s, const ir::Node& n) {
  auto constant = [&](size_t i) -> const ir::TensorData* {
    if (i >= n.inputs.size() || n.inputs[i] < 0 || !s.Known(n.inputs[i])) return nullptr;
    const ir::TensorData* t = s.value(n.inputs[i]).constant.get();
    return t && t->numel() == 1 ? t : nullptr;
  };
  const ir::TensorData* mode = constant(2);
  if (!mode || mode->dtype != ir::DType::kBool || mode->bytes.size() != 1) return false;
  if (mode->bytes[0] == 0) return true;
  const ir::TensorData* ratio = constant(1);
  return ratio && (ratio->dtype == ir::DType::kF32 || ratio->dtype == ir::DType::kF64) && ratio->GetDouble(0) == 0.0;
}

}  // namespace

bool IsRandomOp(const std::string& op) { return kRandomOps.count(op) > 0; }

Status CanonicalizeAndEmit(ImportState& s, ir::Node n) {
  const int64_t opset = s.opset;
  const std::string& op = n.op_type;

  if (op == "Compress" && n.inputs.size() == 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0 &&
      ShapeKnown(s, n.inputs[0]) && s.Known(n.inputs[1]) && s.value(n.inputs[1]).is_constant() &&
      s.value(n.inputs[1]).constant->dtype == ir::DType::kBool &&
      s.value(n.inputs[1]).constant->bytes.size() > ops::kMaxInferConstantBytes && n.outputs.size() == 1)
    return CompressAsGather(s, std::move(n));

  if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && opset < 13)
    return ExpandCoercedSoftmax(s, std::move(n));

  if ((op == "Squeeze" || op == "Unsqueeze") && opset < 13) {
    IntsAttrToInput(s, n, "axes", 1);
  } else if (op == "Slice" && opset < 10) {
    IntsAttrToInput(s, n, "starts", 1);
    IntsAttrToInput(s, n, "ends", 2);
    IntsAttrToInput(s, n, "axes", 3);
  } else if (kReduceOps.count(op) && (opset < 18 && !(op == "ReduceSum" && opset >= 13))) {
    IntsAttrToInput(s, n, "axes", 1);
  } else if (op == "Split") {
    if (opset < 13) IntsAttrToInput(s, n, "split", 1);
    ExplicitSplitSizes(s, n);
  } else if (op == "TopK" && opset < 10) {
    if (n.Has("k")) {
      SetInput(n, 1, s.AddConst(n.name + "/k", Ints1D({n.GetInt("k", 0)})));
      n.attrs.erase("k");
    }
  } else if (op == "Clip" && opset < 11) {
    // Clip-6 is float-only; its min/max become scalar inputs.
    for (const auto& [attr, index] : {std::pair<std::string, size_t>{"min", 1}, {"max", 2}}) {
      if (!n.Has(attr)) continue;
      SetInput(n, index, s.AddConst(n.name + "/" + attr,
                                    ir::TensorData::FromFloats({}, {n.GetFloat(attr, 0)})));
      n.attrs.erase(attr);
    }
  } else if (op == "Pad") {
    if (opset < 11) {
      IntsAttrToInput(s, n, "pads", 1);
      if (n.Has("value")) {
        // constant_value has the data's dtype.
        const float v = n.GetFloat("value", 0);
        n.attrs.erase("value");
        if (v != 0 && ShapeKnown(s, n.inputs[0])) {
          auto t = ir::TensorData::Make(s.value(n.inputs[0]).dtype, {});
          if (t->dtype == ir::DType::kF32) *t->mutable_data<float>() = v;
          else if (t->dtype == ir::DType::kF64) *t->mutable_data<double>() = v;
          else return Unsupported(n.Describe() + ": Pad value on non-float data");
          SetInput(n, 2, s.AddConst(n.name + "/value", t));
        }
      }
    }
    ExpandPadAxes(s, n);
  } else if (op == "Upsample" || (op == "Resize" && opset < 11)) {
    // Both mean asymmetric coordinates with floor rounding in Resize-13 terms.
    std::vector<int> in = n.inputs;
    int scales = in.size() > 1 ? in[1] : -1;
    if (n.Has("scales")) {
      std::vector<float> f = n.GetFloats("scales");
      scales = s.AddConst(n.name + "/scales",
                          ir::TensorData::FromFloats({static_cast<int64_t>(f.size())}, f));
    }
    std::string mode = n.GetString("mode", "nearest");
    if (mode == "bilinear") mode = "linear";
    n.attrs.clear();
    n.op_type = "Resize";
    n.inputs = {in.empty() ? -1 : in[0], -1, scales};
    n.SetString("mode", mode);
    n.SetString("coordinate_transformation_mode", "asymmetric");
    n.SetString("nearest_mode", "floor");
  } else if (op == "BatchNormalization") {
    // Attributes removed in later opsets; training outputs are not computed.
    n.attrs.erase("spatial");
    n.attrs.erase("consumed_inputs");
    n.attrs.erase("is_test");
    n.attrs.erase("momentum");
    if (n.GetInt("training_mode", 0) == 0) n.attrs.erase("training_mode");  // 1: infer refuses it
    n.outputs.resize(std::min<size_t>(n.outputs.size(), 1));
  } else if (op == "Dropout" && n.inputs.size() > 2 && n.inputs[2] >= 0 && !DropoutIsIdentity(s, n)) {
    // A training_mode input that may drop: the Dropout op itself refuses a true one.
    n.attrs.clear();
  } else if (op == "Dropout") {
    // Inference (or nothing to drop): identity; a requested mask is all true, a constant.
    if (n.outputs.size() > 1 && ShapeKnown(s, n.inputs[0])) {
      auto mask = ir::TensorData::Make(ir::DType::kBool, s.value(n.inputs[0]).shape);
      std::fill(mask->bytes.begin(), mask->bytes.end(), uint8_t{1});
      ir::Value& v = s.g.values[n.outputs[1]];
      v.dtype = ir::DType::kBool;
      v.shape = mask->shape;
      v.has_shape = true;
      v.constant = std::move(mask);
    }
    n.op_type = "Identity";
    n.attrs.clear();
    n.inputs.resize(std::min<size_t>(n.inputs.size(), 1));
    n.outputs.resize(std::min<size_t>(n.outputs.size(), 1));
  } else if (op == "RoiAlign" && opset < 16 && !n.Has("coordinate_transformation_mode")) {
    // RoiAlign-10 has no attribute and means what opset 16 calls output_half_pixel.
    n.SetString("coordinate_transformation_mode", "output_half_pixel");
  } else if (kRandomOps.count(op) && !n.Has("seed")) {
    // A seed fixed at compile time (see src/ops/random.cc): FNV-1a of the
    // node's name and output names, 24 bits so the float attribute holds it.
    uint32_t h = 2166136261u;
    auto mix = [&h](const std::string& text) {
      for (unsigned char ch : text) h = (h ^ ch) * 16777619u;
      h = (h ^ 0xffu) * 16777619u;  // separator
    };
    mix(n.name);
    for (int o : n.outputs)
      if (o >= 0) mix(s.g.values[o].name);
    n.SetFloat("seed", static_cast<float>(h & 0xffffffu));
  }
  return s.Emit(std::move(n));
}

}  // namespace fcb::import
