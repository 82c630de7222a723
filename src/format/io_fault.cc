#include "format/io_fault.h"

#include <atomic>
#include <cerrno>

namespace fcb::format {
namespace {

std::atomic<bool> g_armed{false};
std::atomic<int64_t> g_fail_at{0};
std::atomic<int64_t> g_steps{0};

}  // namespace

bool IoFaultHit() {
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  int64_t step = g_steps.fetch_add(1) + 1;
  if (step != g_fail_at.load()) return false;
  errno = EIO;
  return true;
}

namespace testing {

FailAt::FailAt(int64_t n) {
  g_steps.store(0);
  g_fail_at.store(n);
  g_armed.store(true);
}

FailAt::~FailAt() {
  g_armed.store(false);
  g_fail_at.store(0);
}

int64_t FailAt::steps() const { return g_steps.load(); }
bool FailAt::fired() const { return g_fail_at.load() > 0 && g_steps.load() >= g_fail_at.load(); }

}  // namespace testing
}  // namespace fcb::format
