// Lowering: an optimized, layout-assigned graph -> one target's context.
//
// Target-neutral rewrites (constant-weight Gemm/MatMul -> GemmPacked) and
// weight packing happen here; the packed layouts are shared by every target,
// so identical bytes land in the weight pool once. Then activations get arena
// offsets from the memory planner and every step is checked with the op
// registry's shape inference, exactly as the runtime will check it.
#pragma once

#include <string>

#include "core/target.h"
#include "fcb/fcb.h"
#include "fcb/status.h"
#include "format/fcb_file.h"
#include "ir/ir.h"

namespace fcb::compile {

struct LowerOptions {
  TargetId target = TargetId::kGeneric;
  TargetOptions options;
  bool weight_sharing = true;
};

Result<format::ContextDesc> LowerGraph(const ir::Graph& graph, const std::string& method,
                                       const LowerOptions& options,
                                       format::WeightPoolBuilder& pool);

// Canonical JSON of target options as stored in the file.
std::string OptionsToJson(const TargetOptions& o);

}  // namespace fcb::compile
