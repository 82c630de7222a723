// Test-only (see core/fault_testing.h): excluded from libfcb by CMakeLists.txt.
#include "core/fault_testing.h"

#include <cerrno>
#include <mutex>

namespace fcb::fault {
namespace {

std::mutex g_mu;
struct State {
  int64_t fail_at = 0;
  uint32_t kinds = 0;
  int64_t count = 0;
  bool by_where = false;
  Kind where_kind = Kind::kIo;
  std::set<std::string, std::less<>> wheres;
  bool fired = false;
  std::string fired_at;
} g_state;

bool Decide(Kind kind, std::string_view where) {
  std::lock_guard<std::mutex> lock(g_mu);
  bool fail = false;
  if (g_state.by_where) {
    fail = kind == g_state.where_kind && g_state.wheres.count(where) != 0;
    if (fail) ++g_state.count;
  } else if (static_cast<uint32_t>(kind) & g_state.kinds) {
    fail = ++g_state.count == g_state.fail_at;
  }
  if (fail) {
    g_state.fired = true;
    g_state.fired_at = KindName(kind);
    if (kind == Kind::kIo) errno = EIO;
  }
  return fail;
}

}  // namespace

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kIo: return "io";
    case Kind::kAlloc: return "alloc";
    case Kind::kContext: return "context";
    case Kind::kArena: return "arena";
    case Kind::kThreads: return "threads";
  }
  return "unknown";
}

namespace testing {

Injector::Injector(int64_t n, uint32_t kinds) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_state = State{};
  g_state.fail_at = n;
  g_state.kinds = kinds;
  g_hook.store(&Decide);
}

Injector::Injector(Kind kind, std::set<std::string> wheres) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_state = State{};
  g_state.by_where = true;
  g_state.where_kind = kind;
  g_state.wheres.insert(wheres.begin(), wheres.end());
  g_hook.store(&Decide);
}

Injector::~Injector() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_hook.store(nullptr);
  g_state = State{};
}

int64_t Injector::count() const {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state.count;
}
bool Injector::fired() const {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state.fired;
}
std::string Injector::fired_at() const {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state.fired_at;
}

}  // namespace testing
}  // namespace fcb::fault
