// fcb-conformance: runs the ONNX backend node tests (conformance/generate.sh
// makes them) through fcb on every target and prints a per-operator table.
//
//   fcb-conformance [DATA_DIR] [--filter SUBSTR]... [--jobs N] [--json OUT.json]
//                   [--min-pass-rate 0.95] [--failures] [--target T]... [--targets T1,T2]
//   fcb-conformance [DATA_DIR] --export DIR [--filter SUBSTR]... [--jobs N] [--target T]...
//
// --filter repeats: a test runs when its folder name contains any of them.
// Pass rate = passed / supported, where a test is supported when every
// operator of its model is in `fcb ops` (whatever its opset or types); tests
// of other operators are listed as unsupported and never counted as passes. A
// test passes only when every data set matches on every target the host can
// run. Exit status 1 when the pass rate is below --min-pass-rate.
//
// --export DIR compiles every supported test as a run would, but runs
// nothing: it writes DIR/<test>/ (the .fcb files, the data sets as .npy) and
// DIR/manifest.json (conformance/manifest.h), which fcb-conformance-replay
// runs on any host with libfcb.so alone, e.g. an ARM one. Exit status 1 when
// the export could not be written.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "conformance/conformance.h"
#include "core/target.h"

namespace fs = std::filesystem;
using namespace fcb::conformance;

namespace {

struct Args {
  std::string data_dir;
  std::vector<std::string> filters;  // a test runs when its name contains one
  std::string json_path, export_dir;
  int jobs = 0;
  double min_pass_rate = 0.95;
  bool list_failures = false;
  std::vector<std::string> targets;
};

int Usage(const char* msg) {
  std::cerr << "error: " << msg << "\n"
            << "usage: fcb-conformance [DATA_DIR] [--filter SUBSTR] [--jobs N] [--json OUT]"
               " [--min-pass-rate R] [--failures] [--target T]... [--targets T1,T2] [--export DIR]\n";
  return 2;
}

// --export: compiles and writes out every test, then the manifest.
int Export(const Args& a, const std::vector<std::string>& dirs, const Options& opt) {
  std::error_code ec;
  fs::create_directories(a.export_dir, ec);
  if (!fs::is_directory(a.export_dir)) {
    std::cerr << "error: cannot make the export folder " << a.export_dir << ": " << ec.message() << "\n";
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Manifest m;
  m.producer = std::string("fcb ") + fcb::Version();
  m.source = fs::absolute(a.data_dir).lexically_normal().string();
  m.targets = a.targets;
  m.tests.resize(dirs.size());
  ParallelFor(dirs.size(), a.jobs, [&](size_t i) { m.tests[i] = ExportTest(dirs[i], a.export_dir, opt); });
  const std::string manifest = (fs::path(a.export_dir) / kManifestFile).string();
  fcb::Status s = WriteManifest(manifest, m);
  if (!s.ok()) {
    std::cerr << "error: " << s.ToString() << "\n";
    return 1;
  }
  int exported = 0, sets = 0, files = 0, unsupported = 0, failed = 0, not_exported = 0;
  for (const auto& t : m.tests) {
    if (t.exported) {
      ++exported;
      sets += static_cast<int>(t.data_sets.size());
      files += static_cast<int>(t.fcb_files.size());
    } else if (t.recorded.outcome == Outcome::kUnsupported) {
      ++unsupported;
    } else {
      ++failed;
      if (t.recorded.failure_kind == "not exported") {
        ++not_exported;
        std::fprintf(stderr, "warning: %s not exported: %s\n", t.recorded.name.c_str(), t.recorded.reason.c_str());
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("exported %d of %zu tests (%d data sets, %d .fcb files for %zu targets) to %s in %.1f s;\n"
              "recorded without running: %d with unsupported operators, %d failing before a run"
              " (%d of them not exportable)\n",
              exported, m.tests.size(), sets, files, a.targets.size(), a.export_dir.c_str(), seconds,
              unsupported, failed, not_exported);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (s == "--filter" || s == "--json" || s == "--jobs" || s == "--min-pass-rate" || s == "--target" ||
        s == "--targets" || s == "--export") {
      const char* v = next();
      if (!v) return Usage(("missing value after " + s).c_str());
      if (s == "--filter") a.filters.push_back(v);
      else if (s == "--json") a.json_path = v;
      else if (s == "--jobs") a.jobs = std::atoi(v);
      else if (s == "--target") a.targets.push_back(v);
      else if (s == "--export") a.export_dir = v;
      else if (s == "--targets")
        for (const auto& t : SplitList(v)) a.targets.push_back(t);
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
  for (const auto& t : a.targets)
    if (!fcb::TargetFromName(t)) return Usage(("unknown target '" + t + "'").c_str());
  if (!a.export_dir.empty() && (!a.json_path.empty() || a.list_failures))
    return Usage("--export runs nothing: --json and --failures belong to fcb-conformance-replay");
  if (a.jobs <= 0) a.jobs = std::max(1u, std::thread::hardware_concurrency());

  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(a.data_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !fs::exists(e.path() / "model.onnx")) continue;
    if (!Selected(name, a.filters)) continue;
    dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());

  const fs::path tmp = fs::temp_directory_path() / ("fcb-conformance-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  Options opt;
  opt.targets = a.targets;
  opt.tmp_dir = tmp.string();

  if (!a.export_dir.empty()) {
    const int rc = Export(a, dirs, opt);
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return rc;
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TestResult> results(dirs.size());
  ParallelFor(dirs.size(), a.jobs, [&](size_t i) { results[i] = RunTest(dirs[i], opt); });
  ReportOptions ro;
  ro.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // Every target is compiled (so each context must compile), but only those
  // this host runs have a pass rate to report.
  for (const auto& t : a.targets) {
    const auto id = fcb::TargetFromName(t);
    if (id && fcb::HostCanRun(*id)) ro.targets.push_back(t);
  }
  ro.json_path = a.json_path;
  ro.min_pass_rate = a.min_pass_rate;
  ro.list_failures = a.list_failures;
  return Report(results, ro);
}
