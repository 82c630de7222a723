#include "ops/families.h"

namespace fcb::ops {

void RegisterNnOps(std::vector<OpDef>* ops) {}

}  // namespace fcb::ops
