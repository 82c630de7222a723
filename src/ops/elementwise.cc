#include "ops/families.h"

namespace fcb::ops {

void RegisterElementwiseOps(std::vector<OpDef>* ops) {}

}  // namespace fcb::ops
