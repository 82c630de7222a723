#include "format/io_fault.h"

#include "core/fault.h"

namespace fcb::format {

bool IoFaultHit() { return fault::Hit(fault::Kind::kIo); }

namespace testing {

// Delegates to the process-wide injector, counting I/O steps only.
struct FailAtState {
  fault::testing::Injector injector;
  int64_t n;
};

namespace {
FailAtState* g_failat = nullptr;
}

FailAt::FailAt(int64_t n) { g_failat = new FailAtState{fault::testing::Injector(n, static_cast<uint32_t>(fault::Kind::kIo)), n}; }
FailAt::~FailAt() {
  delete g_failat;
  g_failat = nullptr;
}
int64_t FailAt::steps() const { return g_failat->injector.count(); }
bool FailAt::fired() const { return g_failat->injector.fired(); }

}  // namespace testing
}  // namespace fcb::format
