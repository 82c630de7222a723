// Typed parameters of internal operators, encoded once.
//
// An internal operator keeps its parameters in a plain struct with one member
// function listing its fields:
//
//   struct PoolParams {
//     std::array<int64_t, 2> kernel{1, 1};
//     int64_t ceil_mode = 0;
//     template <typename V> void Fields(V& v) {
//       v.Ints(attr::kKernelShape, kernel, 1, kMaxWindow);
//       v.Int(attr::kCeilMode, ceil_mode, 0, 1);
//     }
//   };
//
// (v.OptionalInt declares a field that steps may leave out, such as the
// channel slice a conv writes into) and that list is the whole encoding: EncodeParams writes the fields as plan
// attributes (compiler), SetNodeParams as graph-node attributes (passes), and
// DecodeParams reads them back from a plan step or a node, refusing a missing
// field, a wrong count or a value out of its range (runtime, on untrusted
// files). The attribute names come from ops/names.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fcb/status.h"
#include "format/file_desc.h"
#include "ir/ir.h"
#include "kernels/kernels.h"
#include "ops/names.h"
#include "ops/op.h"

namespace fcb::ops {

// Writes fields as plan attributes.
class ParamWriter {
 public:
  void Int(std::string_view name, int64_t v, int64_t = 0, int64_t = 0) { Add(name).ints = {v}; }
  template <size_t N>
  void Ints(std::string_view name, const std::array<int64_t, N>& v, int64_t = 0, int64_t = 0) {
    Add(name).ints.assign(v.begin(), v.end());
  }
  void Float(std::string_view name, float v) { Add(name).floats = {v}; }
  void OptionalInt(std::string_view name, const std::optional<int64_t>& v) {
    if (v) Add(name).ints = {*v};
  }
  void Epilogue(std::string_view act, std::string_view alpha, std::string_view beta,
                const kernels::Epilogue& ep) {
    Int(act, static_cast<int64_t>(ep.act));
    Float(alpha, ep.a);
    Float(beta, ep.b);
  }
  std::vector<format::AttrDesc> Take() { return std::move(attrs_); }

 private:
  format::AttrDesc& Add(std::string_view name) {
    attrs_.emplace_back();
    attrs_.back().name = std::string(name);
    return attrs_.back();
  }
  std::vector<format::AttrDesc> attrs_;
};

// Writes fields as attributes of a graph node.
class NodeParamWriter {
 public:
  explicit NodeParamWriter(ir::Node* n) : n_(n) {}
  void Int(std::string_view name, int64_t v, int64_t = 0, int64_t = 0) { n_->SetInt(name, v); }
  template <size_t N>
  void Ints(std::string_view name, const std::array<int64_t, N>& v, int64_t = 0, int64_t = 0) {
    n_->SetInts(name, std::vector<int64_t>(v.begin(), v.end()));
  }
  void Float(std::string_view name, float v) { n_->SetFloat(name, v); }
  void OptionalInt(std::string_view name, const std::optional<int64_t>& v) {
    if (v) n_->SetInt(name, *v);
  }
  void Epilogue(std::string_view act, std::string_view alpha, std::string_view beta,
                const kernels::Epilogue& ep) {
    Int(act, static_cast<int64_t>(ep.act));
    Float(alpha, ep.a);
    Float(beta, ep.b);
  }

 private:
  ir::Node* n_;
};

// Reads and range-checks fields; the first problem is kept in status().
class ParamReader {
 public:
  ParamReader(std::string_view op, const Attrs& a) : op_(op), a_(a) {}
  void Int(std::string_view name, int64_t& v, int64_t lo, int64_t hi);
  template <size_t N>
  void Ints(std::string_view name, std::array<int64_t, N>& v, int64_t lo, int64_t hi) {
    const format::AttrDesc* d = Need(name);
    if (!d) return;
    if (d->ints.size() != N) return Fail(name, "needs " + std::to_string(N) + " values, got " +
                                                   std::to_string(d->ints.size()));
    for (size_t i = 0; i < N; ++i) {
      if (d->ints[i] < lo || d->ints[i] > hi) return Range(name, d->ints[i], lo, hi);
      v[i] = d->ints[i];
    }
  }
  void Float(std::string_view name, float& v);
  // A field that may be absent (nullopt); its range is the operator's to check.
  void OptionalInt(std::string_view name, std::optional<int64_t>& v);
  void Epilogue(std::string_view act, std::string_view alpha, std::string_view beta,
                kernels::Epilogue& ep);
  const Status& status() const { return status_; }

 private:
  const format::AttrDesc* Need(std::string_view name);
  void Fail(std::string_view name, const std::string& msg);
  void Range(std::string_view name, int64_t v, int64_t lo, int64_t hi);
  std::string_view op_;
  const Attrs& a_;
  Status status_;
};

template <typename P>
std::vector<format::AttrDesc> EncodeParams(P p) {
  ParamWriter w;
  p.Fields(w);
  return w.Take();
}

template <typename P>
void SetNodeParams(ir::Node* n, P p) {
  NodeParamWriter w(n);
  p.Fields(w);
}

template <typename P>
Result<P> DecodeParams(std::string_view op, const Attrs& a) {
  P p;
  ParamReader r(op, a);
  p.Fields(r);
  if (!r.status().ok()) return r.status();
  return p;
}

// Limits shared by the window-based operators' fields.
inline constexpr int64_t kMaxWindow = int64_t{1} << 20;    // kernel, stride, dilation, pad
inline constexpr int64_t kMaxChannels = int64_t{1} << 24;  // channels, columns

// A fused activation as graph-node attributes (FuseActivations writes it on
// ONNX Conv/Gemm/MatMul nodes; the NHWC forms and GemmPacked carry it on).
kernels::Epilogue NodeEpilogue(const ir::Node& n);
// The same attributes on an ONNX op's step (absent: no activation; a code out
// of range is an error).
Result<kernels::Epilogue> OptionalEpilogue(std::string_view op, const Attrs& a);
void SetNodeEpilogue(ir::Node* n, const kernels::Epilogue& ep);

}  // namespace fcb::ops
