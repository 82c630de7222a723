#include "core/fault.h"

namespace fcb::fault {

std::atomic<HookFn> g_hook{nullptr};

}  // namespace fcb::fault
