#include "ops/families.h"

namespace fcb::ops {

void RegisterTensorOps(std::vector<OpDef>* ops) {}

}  // namespace fcb::ops
