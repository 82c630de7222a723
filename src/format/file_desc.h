// In-memory description of an .fcb file: what the compiler writes and what the
// runtime reads back after verification. Plain C++ structs; the FlatBuffers
// schema (fcb.fbs) and its generated code stay private to src/format.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fcb/dtype.h"

namespace fcb::format {

enum class Storage : uint8_t {
  kArena = 0,   // lives in the execution's arena at `offset` (inputs/outputs too)
  kWeight = 1,  // read-only bytes of weight-pool blob `blob`, used in place
  kState = 2,   // a method input or output a state binding names (ContextDesc::state): its bytes
                // are the bound State's buffer, no arena bytes (offset 0, blob -1)
};

struct TensorDesc {
  std::string name;
  DType dtype = DType::kF32;  // any code a file holds; checked by ops/plan_check
  std::vector<int64_t> shape;
  Storage storage = Storage::kArena;
  uint64_t offset = 0;        // byte offset in the arena (kArena)
  int32_t blob = -1;          // weight-pool blob id (kWeight)
  bool operator==(const TensorDesc&) const = default;
};

// One attribute of a step: ints, floats or a string (unused fields empty).
struct AttrDesc {
  std::string name;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string str;
  // Floats compare by their bits: equal descriptions encode to equal bytes.
  bool operator==(const AttrDesc& o) const {
    return name == o.name && ints == o.ints && str == o.str && floats.size() == o.floats.size() &&
           (floats.empty() || std::memcmp(floats.data(), o.floats.data(), floats.size() * sizeof(float)) == 0);
  }
};

struct StepDesc {
  std::string op;         // runtime op name: an ONNX op ("Add") or an internal one (ops/names.h)
  std::string node;       // originating ONNX node name, for errors
  std::vector<int32_t> inputs;   // tensor indices in the context; -1 = absent optional
  std::vector<int32_t> outputs;
  std::vector<AttrDesc> attrs;
  // Empty, or (plans with symbols) when the step runs: {kind, tile,
  // threshold} over its output 0 of shape [N, H, W, C], whose tiles are
  // N * ceil(H / tile) * ceil(W / tile): kind 1 runs it when tiles >=
  // threshold, kind 2 when tiles < threshold. Two variants of one node
  // (e.g. a Winograd and a direct convolution) write one output, each
  // guarded, and the sizes of a run pick one (ops::GuardHolds).
  std::vector<int64_t> guard;
  bool operator==(const StepDesc&) const = default;
};

// The compiled plan of one method for one target.
struct ContextDesc {
  std::string method;
  std::string target;         // target name, e.g. "x86-64-v3"
  std::string options;        // the target options it was compiled with, canonical JSON
  std::vector<TensorDesc> tensors;
  std::vector<StepDesc> steps;
  std::vector<int32_t> inputs;   // tensor indices of the method's inputs, in ONNX order
  std::vector<int32_t> outputs;  // tensor indices of the method's outputs, in ONNX order
  uint64_t arena_bytes = 0;
  // Per-thread scratch bytes (64-byte multiple) kernels use; the execution
  // allocates one slice per thread beside its arena.
  uint64_t scratch_bytes = 0;
  // Dimensions chosen at each run. Empty when every dim is fixed. Shapes
  // above (tensors, arena, scratch) are planned at every symbol's hi;
  // input_symbols has one entry per dim of each input in order: the index of
  // the symbol that dim is, or -1 where the dim is fixed.
  struct Symbol {
    std::string name;
    int64_t lo = 1, hi = 1;
    bool operator==(const Symbol&) const = default;
  };
  std::vector<Symbol> symbols;
  std::vector<int32_t> input_symbols;
  bool dynamic() const { return !symbols.empty(); }
  // State kept between runs (plan version 9; docs/design.md section 14):
  // method input `input` (the past, by position in `inputs`) and method
  // output `output` (its next value, by position in `outputs`) of one dtype
  // and shape are one buffer that outlives the run, written in place by the
  // step producing the output. Empty: the method has no state.
  struct StateDesc {
    int32_t input = -1, output = -1;
    bool operator==(const StateDesc&) const = default;
  };
  std::vector<StateDesc> state;
};

// A blob of the weight pool. `offset` is relative to the start of the pool.
struct BlobDesc {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t hash_lo = 0, hash_hi = 0;  // XXH3-128 of the bytes
};

// A named byte string the application stored in the file (CompileSpec::
// attachments): its bytes are blob `blob` of the weight pool.
struct AttachmentDesc {
  std::string name;
  int32_t blob = -1;
  bool operator==(const AttachmentDesc&) const = default;
};

struct FileDesc {
  std::string producer;              // e.g. "fcb 0.1.0"
  // Version of the plan encoding (ops::kPlanVersion when written); the
  // loader refuses versions it does not know.
  uint32_t plan_version = 0;
  std::vector<ContextDesc> contexts;
  std::vector<BlobDesc> blobs;
  // Sorted by name, names unique (CheckDescStructure).
  std::vector<AttachmentDesc> attachments;
};

}  // namespace fcb::format
