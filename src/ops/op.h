// The operator registry: one definition per operator, shared by the compiler
// (shape inference, constant folding) and the runtime (validation, execution).
//
// Each op family lives in its own file (elementwise.cc, conv.cc, ...) and adds
// OpDefs through a Register*() function called from registry.cc. An op has:
//   infer  - output dtypes/shapes from input dtypes/shapes, attributes and any
//            compile-time-constant inputs. Also run at load time on every step
//            of a (possibly hostile) file, so it must validate everything and
//            never crash on nonsense.
//   create - a prepared Kernel for fixed shapes; validates again and parses
//            attributes once so Run does no parsing and no allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "fcb/status.h"
#include "format/file_desc.h"
#include "ir/ir.h"
#include "kernels/kernels.h"

namespace fcb::ops {

struct TensorInfo {
  ir::DType dtype = ir::DType::kUndefined;  // kUndefined = absent optional input
  ir::Shape shape;
  bool present() const { return dtype != ir::DType::kUndefined; }
  int64_t numel() const { return ir::NumElements(shape); }
  int64_t bytes() const { return numel() * static_cast<int64_t>(ir::DTypeSize(dtype)); }
};

// Attributes of one op instance (same representation as stored in .fcb steps).
class Attrs {
 public:
  Attrs() = default;
  explicit Attrs(std::vector<format::AttrDesc> a) : a_(std::move(a)) {}
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  int64_t GetInt(std::string_view name, int64_t def) const;
  float GetFloat(std::string_view name, float def) const;
  std::string GetString(std::string_view name, const std::string& def) const;
  std::vector<int64_t> GetInts(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(std::string_view name, std::vector<float> def = {}) const;
  const format::AttrDesc* Find(std::string_view name) const;
  const std::vector<format::AttrDesc>& list() const { return a_; }
  std::vector<format::AttrDesc>& mutable_list() { return a_; }

 private:
  std::vector<format::AttrDesc> a_;
};

// Converts an IR node's attributes (int, float, string, ints, floats; a tensor
// attribute becomes its elements as ints or floats).
Attrs AttrsFromNode(const ir::Node& node);

// Constant inputs up to this size are given to infer/create (at compile time and
// at load time alike); larger ones (weights) are passed as null.
inline constexpr size_t kMaxInferConstantBytes = 65536;
// Floats of the per-thread stack buffer in which ConvExpandDwNhwc (nn.cc)
// makes bands of its intermediate tensor; compile/lower.cc fuses only pairs
// whose rows fit it.
inline constexpr int64_t kExpandDwBandFloats = int64_t{96} << 10;  // 384 KiB

struct InferContext {
  std::string_view op;
  const Attrs& attrs;
  const std::vector<TensorInfo>& inputs;
  // Same length as inputs; non-null where the input's contents are known at
  // compile time (e.g. Reshape's shape). At load time this holds the weight
  // blobs' contents (constant inputs stored in the file).
  const std::vector<const ir::TensorData*>& constants;
  int num_outputs;
};

struct RunContext {
  const kernels::KernelTable* k = nullptr;
  ThreadPool* pool = nullptr;  // never null at run time (a pool may have one thread)
};

// A prepared operator for fixed shapes. Immutable after creation; Run may be
// called concurrently from several executions.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // inputs[i] / outputs[i] point at tensor bytes laid out densely, row-major,
  // with the dtypes and shapes given to create (absent optional inputs: null).
  virtual Status Run(const RunContext& ctx, const void* const* inputs,
                     void* const* outputs) const = 0;
};

struct CreateContext {
  std::string_view op;
  const Attrs& attrs;
  const std::vector<TensorInfo>& inputs;
  const std::vector<TensorInfo>& outputs;
  const std::vector<const ir::TensorData*>& constants;  // as in InferContext
  // Bytes of inputs stored in the file (weights) or constant-folded inputs,
  // whatever their size; null entries (or a null vector) where unknown. Lets a
  // kernel convert weights once at load (e.g. bf16 -> fp32).
  const std::vector<const void*>* input_data = nullptr;
};

using InferFn = Status (*)(const InferContext& ctx, std::vector<TensorInfo>* outputs);
using CreateFn = Result<std::unique_ptr<Kernel>> (*)(const CreateContext& ctx);

struct OpDef {
  std::string name;       // ONNX op_type, or an internal name such as "ConvNhwc"
  bool internal = false;  // true: created by passes, not accepted from ONNX
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  InferFn infer = nullptr;
  CreateFn create = nullptr;
};

// nullptr if unknown.
const OpDef* FindOp(std::string_view name);
// Every registered op, sorted by name.
const std::vector<OpDef>& AllOps();

// Checks the input/output counts against `def`, then runs its infer.
Status InferOutputs(const OpDef& def, const InferContext& ctx, std::vector<TensorInfo>* outputs);

// Evaluates an op on constant inputs with the generic kernels, single-threaded
// (constant folding). Absent optional inputs are null.
Result<std::vector<std::shared_ptr<ir::TensorData>>> Evaluate(
    std::string_view op, const Attrs& attrs, const std::vector<const ir::TensorData*>& inputs,
    int num_outputs);

}  // namespace fcb::ops
