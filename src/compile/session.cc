#include "compile/session.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

namespace fcb::compile {
namespace {

std::mutex g_mu;
std::vector<std::pair<uint64_t, std::string>>& Registry() {
  static auto* r = new std::vector<std::pair<uint64_t, std::string>>();  // never destroyed: safe at exit
  return *r;
}
std::atomic<uint64_t> g_next_id{1};

}  // namespace

CompileSession::CompileSession(std::string output_path) : output_(std::move(output_path)) {
  std::lock_guard<std::mutex> lock(g_mu);
  id_ = g_next_id++;
  depth_ = static_cast<int>(Registry().size());
  Registry().emplace_back(id_, output_);
}

CompileSession::~CompileSession() {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& r = Registry();
  r.erase(std::remove_if(r.begin(), r.end(), [&](const auto& e) { return e.first == id_; }), r.end());
}

std::vector<std::string> ActiveCompileSessions() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<std::string> out;
  for (const auto& e : Registry()) out.push_back(e.second);
  return out;
}

}  // namespace fcb::compile
