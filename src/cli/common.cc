#include <chrono>
#include <iostream>

#include "cli/cli.h"

namespace fcb::cli {

int Fail(const Status& s) {
  std::cerr << "error: " << EscapeForDisplay(s.message(), true) << "\n";
  return 1;
}

int Fail(const std::string& msg, int code) {
  std::cerr << "error: " << EscapeForDisplay(msg, true) << "\n";
  return code;
}

void Warn(const std::string& msg) { std::cerr << "warning: " << EscapeForDisplay(msg, true) << "\n"; }

std::string Shown(const std::string& name) { return EscapeForDisplay(name); }

std::string Json(const nlohmann::ordered_json& j, int indent) {
  // Strings from files may hold any bytes: invalid UTF-8 becomes U+FFFD
  // instead of an exception; control characters are escaped by JSON itself.
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<std::pair<std::string, std::string>> SplitAssign(const std::string& s, const std::string& flag) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    return InvalidArgument(flag + " '" + s + "' must look like NAME=VALUE");
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

Result<std::vector<int64_t>> ParseDims(const std::string& s, const std::string& flag) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t x = s.find('x', pos);
    const std::string part = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12)
      return InvalidArgument(flag + " dims '" + s + "' must be positive integers joined by 'x', e.g. 1x3x224x224");
    dims.push_back(std::stoll(part));
    if (dims.back() < 1) return InvalidArgument(flag + " dims '" + s + "' must all be >= 1");
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return dims;
}

nlohmann::ordered_json TimingJson(const Loaded& l, int threads, int iterations) {
  nlohmann::ordered_json j;
  j["target"] = l.program->target();
  j["method"] = l.method;
  j["threads"] = threads;
  j["iterations"] = iterations;
  return j;
}

Result<Loaded> LoadForRun(const std::string& file, const std::string& target, const std::string& method,
                          bool verify, uint64_t max_memory_bytes) {
  Loaded l;
  LoadOptions lo;
  lo.target = target;
  lo.verify_checksums = verify;
  lo.max_memory_bytes = max_memory_bytes;
  const auto t0 = std::chrono::steady_clock::now();
  FCB_ASSIGN_OR_RETURN(l.program, Program::Load(file, lo));
  l.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (method.empty()) {
    auto only = l.program->default_method();
    if (!only.ok()) {
      std::string names;
      for (const auto& m : l.program->methods()) names += (names.empty() ? "" : ", ") + m;
      return Status(only.status().code(), "the program has several methods; choose one with --method: " + names);
    }
    l.method = only.value();
  } else {
    FCB_RETURN_IF_ERROR(l.program->method(method).status());
    l.method = method;
  }
  return l;
}

}  // namespace fcb::cli
