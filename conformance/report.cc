#include "conformance/report.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

namespace fcb::conformance {
namespace {

struct Row {
  int tests = 0, passed = 0, failed = 0, refused = 0, unsupported = 0, const_inputs = 0;
};

}  // namespace

const char* ExpectedFailureReason(const std::string& name) {
  static const char kRandom[] =
      "reference values are draws of NumPy's random generator, which fcb's documented generator "
      "(src/ops/random.cc) does not reproduce; statistics and determinism are tested in src/ops/extra_ops_test.cc";
  static const std::set<std::string> kRandomTests = {
      "test_bernoulli",          "test_bernoulli_double", "test_bernoulli_double_expanded",
      "test_bernoulli_expanded", "test_bernoulli_seed",   "test_bernoulli_seed_expanded"};
  return kRandomTests.count(name) ? kRandom : nullptr;
}

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "fail";
    case Outcome::kUnsupported: return "unsupported";
  }
  return "?";
}

bool ParseOutcome(const std::string& name, Outcome* o) {
  for (Outcome c : {Outcome::kPass, Outcome::kFail, Outcome::kUnsupported})
    if (name == OutcomeName(c)) {
      *o = c;
      return true;
    }
  return false;
}

std::string TidyPaths(const std::string& message) {
  static const std::regex kPaths(R"((method '[^']*' \([^)]*\): )|(model '[^']*': ))");
  return std::regex_replace(message, kPaths, "");
}

std::string ReasonText(const std::string& message) {
  std::string s = TidyPaths(message);
  return s.size() <= 400 ? s : s.substr(0, 400) + "...";
}

void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < jobs; ++w)
    workers.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
    });
  for (auto& w : workers) w.join();
}

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  for (size_t p = 0; p <= list.size();) {
    const size_t c = std::min(list.find(',', p), list.size());
    if (c > p) out.push_back(list.substr(p, c - p));
    p = c + 1;
  }
  return out;
}

bool Selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const auto& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

int Report(const std::vector<TestResult>& results, const ReportOptions& opt) {
  // Per-operator table.
  std::map<std::string, Row> rows;
  std::map<std::string, std::pair<int, int>> per_target;  // target -> (passed, ran)
  int supported = 0, passed = 0, unsupported = 0, baked = 0, all_baked = 0, expected = 0;
  std::map<std::string, int> kinds;  // failure kind -> tests
  auto expected_failure = [](const TestResult& r) {
    return r.outcome == Outcome::kFail && ExpectedFailureReason(r.name) != nullptr;
  };
  for (const auto& r : results) {
    Row& row = rows[r.op];
    ++row.tests;
    switch (r.outcome) {
      case Outcome::kPass: ++row.passed; ++passed; ++supported; break;
      case Outcome::kFail:
        ++row.failed;
        ++supported;
        if (expected_failure(r)) {
          ++expected;
          ++kinds["expected"];
          break;
        }
        ++kinds[r.failure_kind.empty() ? "error" : r.failure_kind];
        if (r.failure_kind == "refused") ++row.refused;
        break;
      case Outcome::kUnsupported: ++row.unsupported; ++unsupported; break;
    }
    if (r.outcome == Outcome::kUnsupported || expected_failure(r)) continue;
    if (r.outcome == Outcome::kPass && r.const_inputs) ++row.const_inputs, ++baked;
    if (r.outcome == Outcome::kPass && r.const_inputs == 2) ++all_baked;
    for (const auto& t : opt.targets) {
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
  const int rated = supported - expected;  // expected failures are outside the rate
  const double rate = rated ? static_cast<double>(passed) / rated : 0.0;
  std::printf("\n%zu tests: %d supported (every operator in fcb ops), %d with unsupported operators; "
              "%d of %d supported passed (%.1f%%) in %.1f s\n",
              results.size(), supported, unsupported, passed, rated, 100.0 * rate, opt.seconds);
  if (expected)
    std::printf("  %d expected failures (listed below with their reason) are outside the rate: "
                "%d of %d counting them\n", expected, passed, supported);
  std::string by_kind;
  for (const auto& [k, n] : kinds) by_kind += (by_kind.empty() ? "" : ", ") + std::to_string(n) + " " + k;
  std::printf("  failures by kind: %s\n", by_kind.empty() ? "none" : by_kind.c_str());
  for (const auto& [t, pr] : per_target)
    std::printf("  %-10s %d of %d passed (%.1f%%)\n", t.c_str(), pr.first, pr.second,
                pr.second ? 100.0 * pr.first / pr.second : 0.0);
  std::printf("  %d of the passes needed shape-like inputs baked in as constants (const-in); in %d of them\n"
              "  every input was, so they ran as compile-time constant folding\n", baked, all_baked);
  if (opt.list_failures) {
    std::printf("\nfailures:\n");
    for (const auto& r : results)
      if (r.outcome == Outcome::kFail) {
        if (const char* why = expected_failure(r) ? ExpectedFailureReason(r.name) : nullptr)
          std::printf("  %s [%s] expected (%s): %s\n", r.name.c_str(), r.op.c_str(), why, r.reason.c_str());
        else
          std::printf("  %s [%s] %s: %s\n", r.name.c_str(), r.op.c_str(), r.failure_kind.c_str(),
                      r.reason.c_str());
      }
  }
  std::fflush(stdout);

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["tests"] = results.size();
    j["supported"] = supported;
    j["passed"] = passed;
    j["expected_failures"] = expected;
    j["unsupported"] = unsupported;
    for (const auto& [k, n] : kinds) j["failures_by_kind"][k] = n;
    j["pass_rate"] = rate;
    j["seconds"] = opt.seconds;
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
      if (expected_failure(r)) t["expected_failure"] = ExpectedFailureReason(r.name);
      for (const auto& [tg, ok] : r.target_pass) t["targets"][tg] = ok;
      j["results"].push_back(std::move(t));
    }
    std::ofstream f(opt.json_path);
    f << j.dump(1) << "\n";
    if (!f) {
      std::cerr << "error: cannot write " << opt.json_path << "\n";
      return 1;
    }
  }
  if (rate < opt.min_pass_rate) {
    std::fprintf(stderr, "error: conformance pass rate %.1f%% is below the required %.1f%%\n",
                 100.0 * rate, 100.0 * opt.min_pass_rate);
    return 1;
  }
  return 0;
}

}  // namespace fcb::conformance
