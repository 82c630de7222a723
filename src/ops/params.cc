#include "ops/params.h"

#include <algorithm>

namespace fcb::ops {

const format::AttrDesc* ParamReader::Need(std::string_view name) {
  if (!status_.ok()) return nullptr;
  const format::AttrDesc* d = a_.Find(name);
  if (!d) Fail(name, "is missing");
  return d;
}

void ParamReader::Fail(std::string_view name, const std::string& msg) {
  if (status_.ok())
    status_ = InvalidArgument(std::string(op_) + ": attribute '" + std::string(name) + "' " + msg);
}

void ParamReader::Range(std::string_view name, int64_t v, int64_t lo, int64_t hi) {
  Fail(name, "is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

void ParamReader::Int(std::string_view name, int64_t& v, int64_t lo, int64_t hi) {
  const format::AttrDesc* d = Need(name);
  if (!d) return;
  if (d->ints.size() != 1) return Fail(name, "needs one integer");
  if (d->ints[0] < lo || d->ints[0] > hi) return Range(name, d->ints[0], lo, hi);
  v = d->ints[0];
}

void ParamReader::OptionalInt(std::string_view name, std::optional<int64_t>& v) {
  if (!status_.ok()) return;
  const format::AttrDesc* d = a_.Find(name);
  if (!d) return;
  if (d->ints.size() != 1) return Fail(name, "needs one integer");
  v = d->ints[0];
}

void ParamReader::Float(std::string_view name, float& v) {
  const format::AttrDesc* d = Need(name);
  if (!d) return;
  if (d->floats.size() != 1) return Fail(name, "needs one float");
  v = d->floats[0];
}

void ParamReader::Epilogue(std::string_view act, std::string_view alpha, std::string_view beta,
                           kernels::Epilogue& ep) {
  int64_t code = 0;
  Int(act, code, 0, static_cast<int64_t>(kernels::Act::kLast));
  ep.act = static_cast<kernels::Act>(code);
  Float(alpha, ep.a);
  Float(beta, ep.b);
}

kernels::Epilogue NodeEpilogue(const ir::Node& n) {
  kernels::Epilogue ep;
  const int64_t code = n.GetInt(attr::kActivation, 0);
  if (code > 0 && code <= static_cast<int64_t>(kernels::Act::kLast)) ep.act = static_cast<kernels::Act>(code);
  ep.a = n.GetFloat(attr::kActivationAlpha, 0.f);
  ep.b = n.GetFloat(attr::kActivationBeta, 0.f);
  return ep;
}

Result<kernels::Epilogue> OptionalEpilogue(std::string_view op, const Attrs& a) {
  kernels::Epilogue ep;
  if (!a.Has(attr::kActivation)) return ep;
  ParamReader r(op, a);
  r.Epilogue(attr::kActivation, attr::kActivationAlpha, attr::kActivationBeta, ep);
  if (!r.status().ok()) return r.status();
  return ep;
}

void SetNodeEpilogue(ir::Node* n, const kernels::Epilogue& ep) {
  NodeParamWriter w(n);
  w.Epilogue(attr::kActivation, attr::kActivationAlpha, attr::kActivationBeta, ep);
}

}  // namespace fcb::ops
