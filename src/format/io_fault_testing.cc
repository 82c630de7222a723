// Test-only (see format/io_fault_testing.h): excluded from libfcb by CMakeLists.txt.
#include "format/io_fault_testing.h"

#include "core/fault_testing.h"

namespace fcb::format::testing {

// Delegates to the process-wide injector, counting I/O steps only.
FailAt::FailAt(int64_t n)
    : injector_(std::make_unique<fault::testing::Injector>(n, static_cast<uint32_t>(fault::Kind::kIo))) {}
FailAt::~FailAt() = default;
int64_t FailAt::steps() const { return injector_->count(); }
bool FailAt::fired() const { return injector_->fired(); }

}  // namespace fcb::format::testing
