// Test-only (see compile/session_testing.h): excluded from libfcb by CMakeLists.txt.
#include "compile/session_testing.h"

#include <algorithm>
#include <mutex>
#include <utility>

namespace fcb::compile {
namespace {

std::mutex g_mu;
uint64_t g_next_token = 1;
std::vector<std::pair<uint64_t, std::string>>& Registry() {
  static auto* r = new std::vector<std::pair<uint64_t, std::string>>();  // never destroyed: safe at exit
  return *r;
}

uint64_t Began(const std::string& output_path) {
  std::lock_guard<std::mutex> lock(g_mu);
  const uint64_t token = g_next_token++;
  Registry().emplace_back(token, output_path);
  return token;
}

void Ended(uint64_t token) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& r = Registry();
  r.erase(std::remove_if(r.begin(), r.end(), [&](const auto& e) { return e.first == token; }), r.end());
}

const SessionObserver kRegistry{&Began, &Ended};

const bool g_installed = [] {
  g_session_observer.store(&kRegistry, std::memory_order_release);
  return true;
}();

}  // namespace

std::vector<std::string> ActiveCompileSessions() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> out;
  for (const auto& e : Registry()) out.push_back(e.second);
  return out;
}

}  // namespace fcb::compile
