// A plan with symbols read symbolically: every tensor's shape as integer
// expressions over the method's bounded symbols (ir::DimExpr), worked out
// once from the plan checked at the bound instead of at each size.
//
// What it is for: `fcb inspect` shows each output's shape as the runs will
// see it ("1x4x(past_sequence_length+1)x16") and the relations between the
// inputs' symbols that every accepted run meets; and it is the ground for
// resolving a new size by evaluating compiled expressions (ir::DimProgram)
// instead of walking the plan (docs/design.md §13).
//
// Where a step's outputs cannot be worked out symbolically (an op without a
// symbolic rule, operands whose relation is not known) they are left
// unknown, as is everything computed from them; what is worked out is exact:
// for symbol values at which the plan resolves (ops::ResolvePlan accepts the
// sizes), every known shape evaluates to the resolution's. The tests check
// this at every size of the test models (SymbolicDifference).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "format/file_desc.h"
#include "ir/symbolic.h"
#include "ops/plan_check.h"

namespace fcb::ops {

struct SymbolicPlan {
  ir::SymbolTable symbols;  // the method's, in its order (ContextDesc::symbols)
  // Per tensor: its shape over the symbols where worked out, else nullopt.
  std::vector<std::optional<ir::SymShape>> shapes;
  // Per tensor: its elements (row-major) where it is a small integer tensor
  // whose elements are known as expressions (weights, values computed from
  // the shapes such as Shape -> Gather -> Concat), else nullopt.
  std::vector<std::optional<std::vector<ir::DimExpr>>> values;
  // Equalities every run the plan accepts meets, as the steps require them
  // (operands that broadcast without either being 1, a MatMul's inner dims,
  // Concat's other dims): left == right. Each once, in the order found.
  std::vector<std::pair<ir::DimExpr, ir::DimExpr>> requires_equal;
  // The outputs of the steps a change of size reaches, and how many of them
  // have their shapes worked out.
  size_t reached = 0, known = 0;
};

// Works out the symbolic shapes of plan `c` (with symbols) from its check at
// the bound. Never fails: what it cannot work out stays unknown.
SymbolicPlan InferSymbolicPlan(const format::ContextDesc& c, const CheckedPlan& bound);

// Compiles into `bound` (the check at the bound `sym` was inferred from) the
// values plan `c` computes from the shapes that `sym` knows: every computed
// step reached by a change of sizes whose outputs are int64 tensors of one
// shape at every size with every element known, and that needs no scratch,
// gets its elements from CheckedPlan::value_program (see there); and the
// output shapes of the reached steps that cannot refuse at any size within
// the ranges come from the same program (CheckedPlan::proven_step_index and
// what follows it: a resolution neither walks nor checks them). Leaves the
// plan as it was where none does or the expressions do not compile.
void CompileComputedValues(const format::ContextDesc& c, const SymbolicPlan& sym, CheckedPlan* bound);

// Where `sym` disagrees with resolution `r` of the same plan at symbol
// values `values` (one per symbol): a known shape that evaluates to another
// shape than r's, or a required equality that does not hold. Empty when
// they agree.
std::string SymbolicDifference(const format::ContextDesc& c, const SymbolicPlan& sym,
                               const std::vector<int64_t>& values, const ResolvedPlan& r);

// "1x4x(past_sequence_length+1)x16": constant dims as numbers, the others in
// parentheses unless they are a lone symbol.
std::string SymShapeText(const ir::SymShape& s, const ir::SymbolTable& symbols);

}  // namespace fcb::ops
