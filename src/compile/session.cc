#include "compile/session.h"

namespace fcb::compile {

std::atomic<const SessionObserver*> g_session_observer{nullptr};

}  // namespace fcb::compile
