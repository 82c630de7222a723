#include <algorithm>
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

std::string ShapeText(const std::vector<int64_t>& s) {
  if (s.empty()) return "scalar";
  std::string t;
  for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t;
}

Result<std::vector<InputDim>> ParseDims(const std::string& s, const std::string& flag) {
  const std::string what = flag + " dims '" + s + "'";
  const std::string form = "must be positive integers joined by 'x', e.g. 1x3x224x224, where a bounded dim is "
                           "a range LO..HI, e.g. 1x1..512";
  // The parts between the 'x's; an example is the user's dims with one part replaced.
  std::vector<std::string> parts;
  for (size_t pos = 0;;) {
    const size_t x = s.find('x', pos);
    parts.push_back(s.substr(pos, x == std::string::npos ? std::string::npos : x - pos));
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  auto with = [&](size_t i, const std::string& part) {
    std::string out;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k) out += 'x';
      out += k == i ? part : parts[k];
    }
    return out;
  };
  auto is_number = [](const std::string& t) {
    return !t.empty() && t.size() <= 12 && t.find_first_not_of("0123456789") == std::string::npos;
  };
  // The form of every part first, so that an example built from the user's
  // dims is itself well-formed; then the values.
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const size_t dots = part.find("..");
    if (dots == std::string::npos) {
      if (!is_number(part)) return InvalidArgument(what + " " + form);
    } else if (!is_number(part.substr(0, dots)) || !is_number(part.substr(dots + 2))) {
      return InvalidArgument(what + ": dim " + std::to_string(i) + " '" + part +
                             "' is not a range; write a range as LO..HI with both ends positive integers, "
                             "e.g. 1x1..512");
    }
  }
  std::vector<InputDim> dims;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const size_t dots = part.find("..");
    if (dots == std::string::npos) {
      dims.emplace_back(std::stoll(part));
      if (dims.back().lo < 1) return InvalidArgument(what + " must all be >= 1 (dimensions start at 1)");
      continue;
    }
    const std::string lo_text = part.substr(0, dots), hi_text = part.substr(dots + 2);
    const int64_t lo = std::stoll(lo_text), hi = std::stoll(hi_text);
    if (lo < 1)
      return InvalidArgument(what + ": dim " + std::to_string(i) + " is the range " + part +
                             ", which starts below 1; dimensions start at 1, e.g. " +
                             with(i, "1.." + std::to_string(std::max<int64_t>(hi, 1))));
    if (lo > hi)
      return InvalidArgument(what + ": dim " + std::to_string(i) + " is the range " + part +
                             ", whose low end is above its high end; write " + with(i, hi_text + ".." + lo_text));
    dims.emplace_back(lo, hi);
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
