#include "ops/families.h"

namespace fcb::ops {

void RegisterMatMulOps(std::vector<OpDef>* ops) {}

}  // namespace fcb::ops
