// Lowering: an optimized, layout-assigned graph -> one target's context.
//
// A generic driver: each node goes to the lowering rules its op's OpDefs
// registered (ops/lowering.h; the rules, their cost models and packing live
// with the operators in ops/internal/), highest priority first; a node no rule
// takes becomes one step unchanged. The packed layouts are target-neutral, so
// identical bytes land in the weight pool once. Then activations get arena
// offsets from the memory planner and the plan is checked by the loader's own
// checker (ops/plan_check.h), which also sizes the per-thread scratch.
#pragma once

#include <map>

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
  // Graphs with ranges: value name -> its shape with every symbol at its low
  // end (LowerContext::LowShape); null when unknown.
  const std::map<std::string, ir::Shape>* low_shapes = nullptr;
  // The spec's "state" pairs for the method (input name -> output name): both
  // are kept in the State's buffer at run time, so they get no arena bytes
  // (Storage::kState).
  std::map<std::string, std::string> state_pairs;
};

Result<format::ContextDesc> LowerGraph(const ir::Graph& graph, const std::string& method,
                                       const LowerOptions& options,
                                       format::WeightPoolBuilder& pool);

// Canonical JSON of target options as stored in the file.
std::string OptionsToJson(const TargetOptions& o);

}  // namespace fcb::compile
