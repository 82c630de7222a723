// fcb public API: what the library knows (targets, operators) and what a .fcb
// file holds. Plain data; `fcb targets`, `fcb ops` and `fcb inspect` print
// these and nothing else. All functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fcb/export.h"
#include "fcb/fcb.h"
#include "fcb/status.h"

namespace fcb {

// ------------------------------------------------------------------- targets

struct TargetDesc {
  std::string name;         // stable name used in specs, files and LoadOptions::target
  std::string description;  // the instruction set, in words
  int score = 0;            // higher = preferred by "auto" when the host can run it
  std::string arch;         // the CPU family its code is for: "any", "x86-64" or "aarch64"
  bool host_can_run = false;
  bool auto_choice = false;  // the target "auto" picks from a file that holds every target
  std::string why_not;       // when !host_can_run: why, in words (what the CPU lacks, or another family)
};

// Every target fcb knows, in a fixed order (generic first). Exactly one has
// auto_choice set (generic runs everywhere).
FCB_API std::vector<TargetDesc> ListTargets();

// ----------------------------------------------------------------- operators

struct OperatorDesc {
  std::string name;       // ONNX op_type, or the name of one of fcb's internal operators
  bool internal = false;  // true: made by the compiler's passes, not accepted from ONNX
  int min_inputs = 0, max_inputs = 0;
  int min_outputs = 0, max_outputs = 0;
};

// Every operator the runtime implements, sorted by name, internal ones included.
FCB_API std::vector<OperatorDesc> ListOperators();

// ------------------------------------------------------------------ a file

// Weight accounting for a group of contexts (one context, one target, one
// method): its plan (metadata) bytes, the bytes of the weight blobs it
// references, the part of those no context outside the group references, and
// the rest, which sharing saved it from storing.
struct WeightShare {
  uint64_t plan_bytes = 0;
  uint64_t weight_bytes_referenced = 0;
  uint64_t weight_bytes_unique = 0;
  uint64_t bytes_saved_by_sharing = 0;  // referenced - unique
};

struct ContextSummary {
  std::string target, method;
  std::string options_json;  // the target options it was compiled with, as stored ("{}" if none)
  uint64_t steps = 0, tensors = 0, arena_bytes = 0;
  uint64_t scratch_bytes = 0;  // kernel scratch per thread of an execution, beside its arena
  WeightShare share;
  std::vector<TensorSpec> inputs, outputs;
  // Methods with dims chosen at each run: each output's shape over the
  // inputs' symbols as the runs see it ("1x4x(past_sequence_length+1)x16";
  // "" where it is not worked out), and the relations between the symbols
  // that every run must meet, as the method's steps require them
  // ("total_sequence_length == past_sequence_length+1"). Empty otherwise.
  std::vector<std::string> output_shapes;
  std::vector<std::string> requirements;
};

struct WeightPoolSummary {
  uint64_t blobs = 0;
  uint64_t bytes = 0;                         // stored once
  uint64_t bytes_referenced_by_contexts = 0;  // summed over contexts
  uint64_t bytes_saved_by_sharing = 0;        // referenced - stored
};

// One named attachment (CompileSpec::attachments).
struct AttachmentSummary {
  std::string name;
  uint64_t size = 0;
  uint64_t offset = 0;    // of its bytes in the file
  std::string checksum;   // the XXH3-128 the file records for the bytes, 32 hex digits
};

// Every byte of the file: header_bytes + metadata_bytes + metadata_padding_bytes
// + pool_blob_bytes + pool_padding_bytes = file_size (the pool's blobs are the
// weights and the attachments: pool_blob_bytes = weight_pool.bytes +
// attachment_bytes), and metadata_bytes =
// metadata_plan_bytes (the contexts' plans) + metadata_other_bytes.
struct FileLayout {
  uint64_t header_bytes = 0;
  uint64_t metadata_bytes = 0;
  uint64_t metadata_plan_bytes = 0;
  uint64_t metadata_other_bytes = 0;
  uint64_t metadata_padding_bytes = 0;
  uint64_t pool_offset = 0;
  uint64_t pool_blob_bytes = 0;
  uint64_t pool_padding_bytes = 0;
  uint64_t attachment_bytes = 0;
};

struct FileSummary {
  std::string path;
  std::string producer;  // "fcb 0.1.0"
  uint32_t format_version = 0;
  uint32_t plan_version = 0;  // encoding of the compiled plans (operators, parameters, packed layouts)
  uint64_t file_size = 0;
  std::vector<std::string> targets, methods;  // in the order the file first names them
  std::vector<ContextSummary> contexts;       // one per (method, target), in file order
  // Grouped accounting, in the order of `targets` and `methods`.
  std::vector<std::pair<std::string, WeightShare>> per_target, per_method;
  WeightPoolSummary weight_pool;  // the weight blobs (attachments not included)
  std::vector<AttachmentSummary> attachments;  // sorted by name
  FileLayout layout;
};

// Reads and verifies (structure and every checksum) the .fcb file at `path`
// and describes it. It is not loaded for running: any target may be described,
// whether this host can run it or not. Errors: NotFound, IoError, CorruptFile.
FCB_API Result<FileSummary> InspectFile(const std::string& path);

// The summary as JSON text, the document `fcb inspect --json` prints (and the
// Python fcb.inspect() and C fcb_inspect_json() return): every number of
// FileSummary under the same names. indent < 0: one line; otherwise pretty-
// printed with that many spaces per level.
FCB_API std::string FileSummaryJson(const FileSummary& summary, int indent = 2);

}  // namespace fcb
