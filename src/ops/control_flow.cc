// If, Loop and Scan: listed by `fcb ops` because models may use them, but
// never graph nodes or plan steps. The importer expands them into ordinary
// operators (src/import/control_flow.cc, docs/design.md "Control flow"): the
// chosen branch or both branches selected by Where, loops and scans unrolled.
// So their infer and create refuse: a graph node or a step of a file named
// If, Loop or Scan is a bug or a forged file, and is rejected at compile
// time and at load.
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

Status NotAStep(std::string_view op) {
  return InvalidArgument(std::string(op) +
                         " is expanded by the ONNX importer into other operators and is never a graph node or "
                         "plan step");
}

Status InferControlFlow(const InferContext& c, std::vector<TensorInfo>*) { return NotAStep(c.op); }

Result<std::unique_ptr<Kernel>> CreateControlFlow(const CreateContext& c) { return NotAStep(c.op); }

// Any count of inputs and outputs: infer itself refuses, whatever they are.
OpDef ControlFlowDef(const char* name) {
  OpDef d;
  d.name = name;
  d.min_inputs = 0;
  d.max_inputs = 1 << 16;
  d.min_outputs = 0;
  d.max_outputs = 1 << 16;
  d.infer = InferControlFlow;
  d.create = CreateControlFlow;
  return d;
}

}  // namespace

void RegisterControlFlowOps(std::vector<OpDef>* ops) {
  for (const char* op : {"If", "Loop", "Scan"}) ops->push_back(ControlFlowDef(op));
}

}  // namespace fcb::ops
