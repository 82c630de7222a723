#include "ir/ir.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/half.h"

namespace fcb {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kU8: return 1;
    case DType::kI8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kBool: return 1;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kU16: return 2;
    case DType::kI16: return 2;
    case DType::kF16: return 2;
    case DType::kU32: return 4;
    case DType::kU64: return 8;
    default: return 0;
  }
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kU8: return "uint8";
    case DType::kI8: return "int8";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kBool: return "bool";
    case DType::kF64: return "float64";
    case DType::kBF16: return "bfloat16";
    case DType::kU16: return "uint16";
    case DType::kI16: return "int16";
    case DType::kF16: return "float16";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
    default: return "undefined";
  }
}

namespace ir {

int64_t NumElements(const Shape& s) { return NumElements(std::span<const int64_t>(s)); }

int64_t NumElements(std::span<const int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string ShapeToString(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += "x";
    out += std::to_string(s[i]);
  }
  return out;
}

double TensorData::GetDouble(int64_t i) const {
  switch (dtype) {
    case DType::kF32: return data<float>()[i];
    case DType::kF64: return data<double>()[i];
    case DType::kI64: return static_cast<double>(data<int64_t>()[i]);
    case DType::kI32: return data<int32_t>()[i];
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kI8: return data<int8_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::kU16: return data<uint16_t>()[i];
    case DType::kI16: return data<int16_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kU64: return static_cast<double>(data<uint64_t>()[i]);
    case DType::kF16: return HalfToDouble(data<uint16_t>()[i]);
    case DType::kBF16: return BFloat16ToDouble(data<uint16_t>()[i]);
    default: return 0;
  }
}

namespace {
// float -> int64 without undefined behaviour: NaN -> 0, out of range saturates.
int64_t FloatToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}
}  // namespace

int64_t TensorData::GetInt(int64_t i) const {
  switch (dtype) {
    case DType::kF32: return FloatToInt(data<float>()[i]);
    case DType::kF64: return FloatToInt(data<double>()[i]);
    case DType::kI64: return data<int64_t>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kU8: return data<uint8_t>()[i];
    case DType::kI8: return data<int8_t>()[i];
    case DType::kBool: return data<uint8_t>()[i] ? 1 : 0;
    case DType::kU16: return data<uint16_t>()[i];
    case DType::kI16: return data<int16_t>()[i];
    case DType::kU32: return data<uint32_t>()[i];
    case DType::kU64: return static_cast<int64_t>(data<uint64_t>()[i]);  // wraps above 2^63
    case DType::kF16: return FloatToInt(HalfToDouble(data<uint16_t>()[i]));
    case DType::kBF16: return FloatToInt(BFloat16ToDouble(data<uint16_t>()[i]));
    default: return 0;
  }
}

std::vector<int64_t> TensorData::ToInts() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = GetInt(i);
  return v;
}

std::shared_ptr<TensorData> TensorData::Make(DType dtype, Shape shape) {
  auto t = std::make_shared<TensorData>();
  t->dtype = dtype;
  t->shape = std::move(shape);
  t->bytes.assign(static_cast<size_t>(NumElements(t->shape)) * DTypeSize(dtype), 0);
  return t;
}

std::shared_ptr<TensorData> TensorData::FromFloats(Shape shape, const std::vector<float>& v) {
  auto t = Make(DType::kF32, std::move(shape));
  if (!t->bytes.empty()) std::memcpy(t->bytes.data(), v.data(), t->bytes.size());
  return t;
}

std::shared_ptr<TensorData> TensorData::FromInts(Shape shape, const std::vector<int64_t>& v) {
  auto t = Make(DType::kI64, std::move(shape));
  if (!t->bytes.empty()) std::memcpy(t->bytes.data(), v.data(), t->bytes.size());
  return t;
}

int64_t Node::GetInt(std::string_view a, int64_t def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.i;
}
float Node::GetFloat(std::string_view a, float def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.f;
}
std::string Node::GetString(std::string_view a, const std::string& def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.s;
}
std::vector<int64_t> Node::GetInts(std::string_view a, std::vector<int64_t> def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.ints;
}
std::vector<float> Node::GetFloats(std::string_view a, std::vector<float> def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.floats;
}
void Node::SetInt(std::string_view a, int64_t v) {
  Attribute at;
  at.kind = Attribute::Kind::kInt;
  at.i = v;
  attrs[std::string(a)] = std::move(at);
}
void Node::SetFloat(std::string_view a, float v) {
  Attribute at;
  at.kind = Attribute::Kind::kFloat;
  at.f = v;
  attrs[std::string(a)] = std::move(at);
}
void Node::SetInts(std::string_view a, std::vector<int64_t> v) {
  Attribute at;
  at.kind = Attribute::Kind::kInts;
  at.ints = std::move(v);
  attrs[std::string(a)] = std::move(at);
}
void Node::SetString(std::string_view a, std::string v) {
  Attribute at;
  at.kind = Attribute::Kind::kString;
  at.s = std::move(v);
  attrs[std::string(a)] = std::move(at);
}
std::string Node::Describe() const { return "node '" + name + "' (" + op_type + ")"; }

int Graph::AddValue(Value v) {
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

int Graph::AddConstant(const std::string& name, TensorPtr t) {
  Value v;
  v.name = UniqueName(name);
  v.dtype = t->dtype;
  v.shape = t->shape;
  v.has_shape = true;
  v.constant = std::move(t);
  return AddValue(std::move(v));
}

bool Graph::NameTaken(const std::string& name) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (names_indexed_ > values.size() || attempt == 1) {
      name_index_.clear();
      names_indexed_ = 0;
    }
    for (; names_indexed_ < values.size(); ++names_indexed_)
      name_index_.emplace(values[names_indexed_].name, static_cast<int>(names_indexed_));
    auto it = name_index_.find(name);
    if (it == name_index_.end()) return false;
    const size_t id = static_cast<size_t>(it->second);
    if (id < values.size() && values[id].name == name) return true;
    // The value indexed under `name` was renamed or removed since: index again.
  }
  return false;
}

std::string Graph::UniqueName(const std::string& base) {
  if (!NameTaken(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!NameTaken(n)) return n;
  }
}

std::vector<int> Graph::UseCounts() const {
  const UseIndex index(*this);
  std::vector<int> uses(values.size());
  for (size_t v = 0; v < values.size(); ++v) uses[v] = index.Uses(static_cast<int>(v));
  return uses;
}

UseIndex::UseIndex(const Graph& g)
    : producer_(g.values.size(), -1), readers_(g.values.size(), 0), outputs_(g.values.size(), 0),
      last_reader_(g.values.size(), -1) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs)
      if (Known(o)) producer_[o] = static_cast<int>(i);
    for (int in : g.nodes[i].inputs)
      if (Known(in)) ++readers_[in], last_reader_[in] = static_cast<int>(i);
  }
  for (int o : g.outputs)
    if (Known(o)) ++outputs_[o];
}

Status Graph::Validate() const {
  std::vector<bool> ready(values.size(), false);
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].is_constant()) ready[i] = true;
  for (int i : inputs) {
    if (i < 0 || i >= static_cast<int>(values.size())) return Internal("graph input index out of range");
    ready[i] = true;
  }
  for (const auto& n : nodes) {
    for (int i : n.inputs) {
      if (i < -1 || i >= static_cast<int>(values.size()))
        return Internal(n.Describe() + ": input index out of range");
      if (i >= 0 && !ready[i])
        return Internal(n.Describe() + ": input '" + values[i].name + "' is used before it is produced");
      if (i >= 0 && !values[i].has_shape)
        return Internal(n.Describe() + ": input '" + values[i].name + "' has no inferred shape");
    }
    for (int o : n.outputs) {
      if (o < 0 || o >= static_cast<int>(values.size()))
        return Internal(n.Describe() + ": output index out of range");
      ready[o] = true;
    }
  }
  for (int o : outputs)
    if (o < 0 || o >= static_cast<int>(values.size()) || !ready[o])
      return Internal("graph output is never produced");
  return Status::Ok();
}

bool IsWeightDequantize(const Graph& g, const Node& n) {
  if (n.op_type != "DequantizeLinear" || !n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0) return false;
  const Value& x = g.values[n.inputs[0]];
  return x.is_constant() && (IsInt8Type(x.dtype) || x.dtype == DType::kI32);
}

}  // namespace ir

}  // namespace fcb
