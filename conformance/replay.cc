// fcb-conformance-replay: runs an export of the ONNX backend node tests
// (`fcb-conformance --export DIR`, conformance/manifest.h) on this host and
// prints the same report as fcb-conformance.
//
//   fcb-conformance-replay DIR [--targets T1,T2] [--target T]... [--json OUT.json]
//                          [--min-pass-rate 0.95] [--failures] [--filter SUBSTR]... [--jobs N]
//
// It needs nothing but libfcb.so's public API: the exporter compiled the
// tests (with the ONNX importer, on a host that has it), so the replay runs
// where the runtime alone is built, such as an ARM board or qemu-user. Each
// exported test's .fcb is loaded for every chosen target, each data set run
// and compared (conformance/compare.h); tests the exporter could not export
// (unsupported operators, compile failures) count as it recorded them, as
// fcb-conformance would count them. Default targets: every target of the
// export this host can run. Exit status 1 below --min-pass-rate, 2 on a bad
// command line or export.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "conformance/compare.h"
#include "conformance/manifest.h"
#include "conformance/report.h"
#include "fcb/fcb.h"
#include "fcb/inspect.h"

namespace fs = std::filesystem;
using namespace fcb::conformance;

namespace {

struct Args {
  std::string dir;
  std::vector<std::string> filters, targets;
  std::string json_path;
  int jobs = 0;
  double min_pass_rate = 0.95;
  bool list_failures = false;
};

int Usage(const std::string& msg) {
  std::cerr << "error: " << msg << "\n"
            << "usage: fcb-conformance-replay DIR [--targets T1,T2] [--target T]... [--json OUT]"
               " [--min-pass-rate R] [--failures] [--filter SUBSTR]... [--jobs N]\n";
  return 2;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

// Runs one exported test on `targets` (all runnable here), as fcb-conformance
// runs a test after compiling it: a target fails when its program does not
// load or a data set fails on it; the first failure is the reason.
TestResult Replay(const std::string& dir, const ManifestTest& t, const std::vector<std::string>& targets) {
  const auto t0 = std::chrono::steady_clock::now();
  TestResult r = t.recorded;
  r.target_pass.clear();
  auto finish = [&]() {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  if (!t.exported) {  // as recorded, on the targets replayed
    for (const auto& tg : targets) {
      auto it = t.recorded.target_pass.find(tg);
      if (it != t.recorded.target_pass.end()) r.target_pass[tg] = it->second;
    }
    return finish();
  }
  const std::string test_dir = (fs::path(dir) / r.name).string();
  std::string failure;
  bool wrong_result = false;
  for (const auto& tg : targets) r.target_pass[tg] = true;
  auto fail_all = [&](const std::string& why) {
    for (auto& [tg, ok] : r.target_pass) ok = false;
    if (failure.empty()) failure = why;
  };
  std::string loaded;  // the .fcb the programs were loaded from
  std::vector<std::pair<std::string, std::shared_ptr<const fcb::Program>>> programs;
  for (const auto& set : t.data_sets) {
    if (set.fcb != loaded) {
      programs.clear();
      loaded = set.fcb;
      const std::string path = test_dir + "/" + set.fcb;
      for (const auto& tg : targets) {
        fcb::LoadOptions lo;
        lo.target = tg;
        auto p = fcb::Program::Load(path, lo);
        if (!p.ok()) {
          r.target_pass[tg] = false;
          if (failure.empty()) failure = tg + ": load: " + p.status().ToString();
          continue;
        }
        programs.emplace_back(tg, std::move(p).value());
      }
    }
    DataSet ds;
    std::vector<std::string> names;
    fcb::Status bad;
    for (int pass = 0; pass < 2 && bad.ok(); ++pass)
      for (const auto& x : pass == 0 ? set.inputs : set.outputs) {
        auto a = ReadExportedTensor(test_dir, x);
        if (!a.ok()) {
          bad = a.TakeStatus();
          break;
        }
        (pass == 0 ? ds.inputs : ds.outputs).push_back(std::move(a).value());
        if (pass == 0) names.push_back(x.name);
      }
    if (!bad.ok()) {
      fail_all("test data: " + bad.ToString());
      break;
    }
    for (const auto& [tg, prog] : programs) {
      bool mismatch = false;
      const std::string why = RunDataSet(prog, names, ds, t.tolerance, &mismatch);
      if (!why.empty()) {
        r.target_pass[tg] = false;
        if (failure.empty()) {
          failure = tg + ": " + why;
          wrong_result = mismatch;
        }
      }
    }
  }
  bool all = !r.target_pass.empty() && failure.empty();
  for (const auto& [tg, ok] : r.target_pass) all = all && ok;
  r.outcome = all ? Outcome::kPass : Outcome::kFail;
  r.failure_kind = all ? "" : wrong_result ? "wrong result" : "error";
  r.reason = ReasonText(failure);
  return finish();
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--targets" || s == "--target" || s == "--json" || s == "--min-pass-rate" || s == "--filter" ||
        s == "--jobs") {
      if (i + 1 >= argc) return Usage("missing value after " + s);
      const std::string v = argv[++i];
      if (s == "--targets") {
        for (const auto& t : SplitList(v)) a.targets.push_back(t);
      } else if (s == "--target") {
        a.targets.push_back(v);
      } else if (s == "--json") {
        a.json_path = v;
      } else if (s == "--filter") {
        a.filters.push_back(v);
      } else {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || *end) return Usage(s + " takes a number, not '" + v + "'");
        if (s == "--jobs") a.jobs = static_cast<int>(x);
        else a.min_pass_rate = x;
      }
    } else if (s == "--failures") {
      a.list_failures = true;
    } else if (s == "-h" || s == "--help") {
      return Usage("help");
    } else if (!s.empty() && s[0] == '-') {
      return Usage("unknown flag " + s);
    } else if (a.dir.empty()) {
      a.dir = s;
    } else {
      return Usage("one export folder only (got " + a.dir + " and " + s + ")");
    }
  }
  if (a.dir.empty()) return Usage("no export folder (made by fcb-conformance --export DIR)");
  auto manifest = ReadManifest((fs::path(a.dir) / kManifestFile).string());
  if (!manifest.ok()) {
    std::cerr << "error: " << manifest.status().ToString() << "\n";
    return 2;
  }
  const Manifest& m = manifest.value();

  // Targets: those asked for must be in the export and runnable here.
  std::vector<std::string> runnable;
  for (const auto& t : fcb::ListTargets())
    if (t.host_can_run) runnable.push_back(t.name);
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (a.targets.empty()) {
    for (const auto& t : m.targets)
      if (has(runnable, t)) a.targets.push_back(t);
    if (a.targets.empty())
      return Usage("this host runs none of the export's targets (" + Joined(m.targets) +
                   "); it runs: " + Joined(runnable));
  }
  for (const auto& t : a.targets) {
    if (!has(m.targets, t))
      return Usage("target '" + t + "' is not in the export " + a.dir + " (it holds: " + Joined(m.targets) + ")");
    if (!has(runnable, t))
      return Usage("this host cannot run target '" + t + "' (it runs: " + Joined(runnable) + ")");
  }
  if (a.jobs <= 0) a.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::vector<const ManifestTest*> tests;
  for (const auto& t : m.tests)
    if (Selected(t.recorded.name, a.filters)) tests.push_back(&t);
  std::printf("replaying %zu tests of %s (exported by %s from %s) on %s\n", tests.size(), a.dir.c_str(),
              m.producer.c_str(), m.source.c_str(), Joined(a.targets).c_str());

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TestResult> results(tests.size());
  ParallelFor(tests.size(), a.jobs, [&](size_t i) { results[i] = Replay(a.dir, *tests[i], a.targets); });

  ReportOptions ro;
  ro.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ro.targets = a.targets;
  ro.json_path = a.json_path;
  ro.min_pass_rate = a.min_pass_rate;
  ro.list_failures = a.list_failures;
  return Report(results, ro);
}
