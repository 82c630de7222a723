#include "ops/families.h"

namespace fcb::ops {

void RegisterReduceOps(std::vector<OpDef>* ops) {}

}  // namespace fcb::ops
