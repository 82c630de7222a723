// fcb-conformance: runs the ONNX backend node tests (conformance/generate.sh
// makes them) through fcb on every target and prints a per-operator table.
//
//   fcb-conformance [DATA_DIR] [--filter SUBSTR] [--jobs N] [--json OUT.json]
//                   [--min-pass-rate 0.95] [--failures] [--target T]...
//
// Pass rate = passed / supported, where a test is supported when every
// operator of its model is in `fcb ops` (whatever its opset or types); tests
// of other operators are listed as unsupported and never counted as passes. A
// test passes only when every data set matches on every target the host can
// run. Exit status 1 when the pass rate is below --min-pass-rate.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "conformance/conformance.h"
#include "core/target.h"

namespace fs = std::filesystem;
using namespace fcb::conformance;

namespace {

struct Args {
  std::string data_dir;
  std::string filter, json_path;
  int jobs = 0;
  double min_pass_rate = 0.95;
  bool list_failures = false;
  std::vector<std::string> targets;
};

int Usage(const char* msg) {
  std::cerr << "error: " << msg << "\n"
            << "usage: fcb-conformance [DATA_DIR] [--filter SUBSTR] [--jobs N] [--json OUT]"
               " [--min-pass-rate R] [--failures] [--target T]...\n";
  return 2;
}

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "fail";
    case Outcome::kUnsupported: return "unsupported";
  }
  return "?";
}

struct Row {
  int tests = 0, passed = 0, failed = 0, refused = 0, unsupported = 0, const_inputs = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (s == "--filter" || s == "--json" || s == "--jobs" || s == "--min-pass-rate" || s == "--target") {
      const char* v = next();
      if (!v) return Usage(("missing value after " + s).c_str());
      if (s == "--filter") a.filter = v;
      else if (s == "--json") a.json_path = v;
      else if (s == "--jobs") a.jobs = std::atoi(v);
      else if (s == "--target") a.targets.push_back(v);
      else a.min_pass_rate = std::atof(v);
    } else if (s == "--failures") {
      a.list_failures = true;
    } else if (s == "-h" || s == "--help") {
      return Usage("help");
    } else if (!s.empty() && s[0] == '-') {
      return Usage(("unknown flag " + s).c_str());
    } else {
      a.data_dir = s;
    }
  }
  if (a.data_dir.empty()) a.data_dir = std::string(FCB_SOURCE_DIR) + "/build/conformance-data/node";
  if (!fs::is_directory(a.data_dir))
    return Usage(("no test folder " + a.data_dir + " (run conformance/generate.sh first)").c_str());
  if (a.targets.empty())
    for (const auto& t : fcb::KnownTargets()) a.targets.push_back(t.name);
  if (a.jobs <= 0) a.jobs = std::max(1u, std::thread::hardware_concurrency());

  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(a.data_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !fs::exists(e.path() / "model.onnx")) continue;
    if (!a.filter.empty() && name.find(a.filter) == std::string::npos) continue;
    dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());

  const fs::path tmp = fs::temp_directory_path() / ("fcb-conformance-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  Options opt;
  opt.targets = a.targets;
  opt.tmp_dir = tmp.string();

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TestResult> results(dirs.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < a.jobs; ++w)
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < dirs.size();) results[i] = RunTest(dirs[i], opt);
    });
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ec;
  fs::remove_all(tmp, ec);

  // Per-operator table.
  std::map<std::string, Row> rows;
  std::map<std::string, std::pair<int, int>> per_target;  // target -> (passed, ran)
  int supported = 0, passed = 0, unsupported = 0, baked = 0, all_baked = 0;
  std::map<std::string, int> kinds;  // failure kind -> tests
  for (const auto& r : results) {
    Row& row = rows[r.op];
    ++row.tests;
    switch (r.outcome) {
      case Outcome::kPass: ++row.passed; ++passed; ++supported; break;
      case Outcome::kFail:
        ++row.failed;
        ++supported;
        ++kinds[r.failure_kind.empty() ? "error" : r.failure_kind];
        if (r.failure_kind == "refused") ++row.refused;
        break;
      case Outcome::kUnsupported: ++row.unsupported; ++unsupported; break;
    }
    if (r.outcome == Outcome::kUnsupported) continue;
    if (r.outcome == Outcome::kPass && r.const_inputs) ++row.const_inputs, ++baked;
    if (r.outcome == Outcome::kPass && r.const_inputs == 2) ++all_baked;
    for (const auto& t : a.targets) {
      auto it = r.target_pass.find(t);
      auto& pt = per_target[t];
      ++pt.second;  // a test that failed to compile counts as failed on every target
      if (it != r.target_pass.end() && it->second) ++pt.first;
    }
  }
  // refused: of the failures, those fcb refuses at compile time (Unsupported).
  // const-in: passes that needed shape-like inputs baked in as constants.
  std::printf("%-28s %6s %7s %7s %8s %12s %9s\n", "operator", "tests", "passed", "failed",
              "refused", "unsupported", "const-in");
  for (const auto& [op, row] : rows)
    std::printf("%-28s %6d %7d %7d %8d %12d %9d\n", op.c_str(), row.tests, row.passed, row.failed,
                row.refused, row.unsupported, row.const_inputs);
  const double rate = supported ? static_cast<double>(passed) / supported : 0.0;
  std::printf("\n%zu tests: %d supported (every operator in fcb ops), %d with unsupported operators; "
              "%d of %d supported passed (%.1f%%) in %.1f s\n",
              results.size(), supported, unsupported, passed, supported, 100.0 * rate, seconds);
  std::string by_kind;
  for (const auto& [k, n] : kinds) by_kind += (by_kind.empty() ? "" : ", ") + std::to_string(n) + " " + k;
  std::printf("  failures by kind: %s\n", by_kind.empty() ? "none" : by_kind.c_str());
  for (const auto& [t, pr] : per_target)
    std::printf("  %-10s %d of %d passed (%.1f%%)\n", t.c_str(), pr.first, pr.second,
                pr.second ? 100.0 * pr.first / pr.second : 0.0);
  std::printf("  %d of the passes needed shape-like inputs baked in as constants (const-in); in %d of them\n"
              "  every input was, so they ran as compile-time constant folding\n", baked, all_baked);
  if (a.list_failures) {
    std::printf("\nfailures:\n");
    for (const auto& r : results)
      if (r.outcome == Outcome::kFail)
        std::printf("  %s [%s] %s: %s\n", r.name.c_str(), r.op.c_str(), r.failure_kind.c_str(),
                    r.reason.c_str());
  }

  if (!a.json_path.empty()) {
    nlohmann::json j;
    j["tests"] = results.size();
    j["supported"] = supported;
    j["passed"] = passed;
    j["unsupported"] = unsupported;
    for (const auto& [k, n] : kinds) j["failures_by_kind"][k] = n;
    j["pass_rate"] = rate;
    j["seconds"] = seconds;
    j["const_inputs_passes"] = baked;
    j["all_inputs_constant_passes"] = all_baked;
    for (const auto& [t, pr] : per_target) j["targets"][t] = {{"passed", pr.first}, {"ran", pr.second}};
    for (const auto& [op, row] : rows)
      j["operators"][op] = {{"tests", row.tests}, {"passed", row.passed}, {"failed", row.failed},
                            {"refused", row.refused}, {"unsupported", row.unsupported}, {"const_inputs", row.const_inputs}};
    for (const auto& r : results) {
      nlohmann::json t = {{"name", r.name}, {"op", r.op}, {"outcome", OutcomeName(r.outcome)},
                          {"seconds", r.seconds}, {"const_inputs", r.const_inputs}};
      if (!r.reason.empty()) t["reason"] = r.reason;
      if (!r.failure_kind.empty()) t["failure_kind"] = r.failure_kind;
      for (const auto& [tg, ok] : r.target_pass) t["targets"][tg] = ok;
      j["results"].push_back(std::move(t));
    }
    std::ofstream f(a.json_path);
    f << j.dump(1) << "\n";
    if (!f) {
      std::cerr << "error: cannot write " << a.json_path << "\n";
      return 1;
    }
  }
  if (rate < a.min_pass_rate) {
    std::fprintf(stderr, "error: conformance pass rate %.1f%% is below the required %.1f%%\n",
                 100.0 * rate, 100.0 * a.min_pass_rate);
    return 1;
  }
  return 0;
}
