// `fcb profile`: every step of a method timed in place (Execution::RunProfiled)
// over several runs. Prints each step (op, node, output, median ms, share,
// GFLOP/s where the op counts its arithmetic), the totals per op, and
// optionally a Chrome trace-event file of every profiled run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/cli.h"

namespace fcb::cli {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The trace-event format's "complete" events (ph X, microseconds), one
// process, one thread track, the profiled runs one after another.
nlohmann::ordered_json Trace(const std::vector<std::vector<StepTiming>>& runs, const std::string& title) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", title}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "steps"}}}});
  double offset_us = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    double end_us = offset_us;
    for (size_t i = 0; i < runs[r].size(); ++i) {
      const StepTiming& t = runs[r][i];
      const double ts = offset_us + t.start_ms * 1000.0, dur = t.ms * 1000.0;
      nlohmann::ordered_json args = {{"step", i}, {"node", t.node}, {"output", ShapeText(t.output_shape)},
                                     {"dtype", DTypeName(t.output_dtype)}, {"run", r}};
      if (t.flops) args["gflops"] = static_cast<double>(t.flops) / 1e9;
      events.push_back({{"name", t.op + " " + t.node}, {"cat", t.op}, {"ph", "X"}, {"ts", ts}, {"dur", dur},
                        {"pid", 1}, {"tid", 1}, {"args", args}});
      end_us = std::max(end_us, ts + dur);
    }
    offset_us = end_us;
  }
  nlohmann::ordered_json j;
  j["traceEvents"] = events;
  j["displayTimeUnit"] = "ms";
  return j;
}

}  // namespace

int CmdProfile(const ProfileArgs& a) {
  if (a.iterations < 1) return Fail("--iterations must be at least 1", 2);
  auto loaded = LoadForRun(a.file, a.target, a.method, true);
  if (!loaded.ok()) return Fail(loaded.status());
  const auto& l = loaded.value();
  auto ex = Execution::Create(l.program, l.method, a.threads);
  if (!ex.ok()) return Fail(ex.status());
  if (Status s = BindInputs(*ex.value(), a.inputs, true); !s.ok()) return Fail(s);
  // Two unprofiled runs first: first-touch page faults and cold caches are
  // the first run's, not the steps'.
  // A growing KV cache is set back before each run (each run appends to it).
  const auto rewind = StateRewinder(*ex.value());
  for (int i = 0; i < 2; ++i)
    if (Status s = rewind(); !s.ok() || !(s = ex.value()->Run()).ok()) return Fail(s);
  std::vector<std::vector<StepTiming>> runs(a.iterations);
  for (auto& r : runs)
    if (Status s = rewind(); !s.ok() || !(s = ex.value()->RunProfiled(&r)).ok()) return Fail(s);
  const size_t n = runs[0].size();
  std::vector<double> med(n), run_total;
  for (const auto& r : runs) {
    double t = 0;
    for (const auto& s : r) t += s.ms;
    run_total.push_back(t);
  }
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r[i].ms);
    med[i] = Median(v);
    sum += med[i];
  }
  struct OpTotal {
    double ms = 0;
    int steps = 0;
    uint64_t flops = 0;
  };
  std::map<std::string, OpTotal> per_op;
  for (size_t i = 0; i < n; ++i) {
    OpTotal& o = per_op[runs[0][i].op];
    o.ms += med[i];
    o.steps += 1;
    o.flops += runs[0][i].flops;
  }
  std::vector<std::pair<std::string, OpTotal>> ops(per_op.begin(), per_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.second.ms > y.second.ms; });
  auto gflops = [](uint64_t flops, double ms) { return ms > 0 ? static_cast<double>(flops) / (ms * 1e6) : 0.0; };

  if (!a.trace.empty()) {
    // Written beside and renamed into place: never a half-written trace.
    const std::string tmp = a.trace + ".tmp";
    std::ofstream f(tmp, std::ios::binary);
    f << Json(Trace(runs, "fcb " + l.method + " (" + l.program->target() + ")"), 1) << "\n";
    f.close();
    if (!f || std::rename(tmp.c_str(), a.trace.c_str()) != 0) {
      std::remove(tmp.c_str());
      return Fail(IoError("cannot write the trace file '" + a.trace + "'"));
    }
  }
  // What one run writes (StepTiming::bytes_written): a cache updated in
  // place counts only its new rows, so a decode step shows no cache copy.
  uint64_t written = 0;
  for (size_t i = 0; i < n; ++i) written += runs[0][i].bytes_written;
  if (a.json) {
    nlohmann::ordered_json j = TimingJson(l, a.threads, a.iterations);
    j["run_median_ms"] = Median(run_total);
    j["step_median_sum_ms"] = sum;
    j["bytes_written"] = written;
    j["steps"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n; ++i) {
      const StepTiming& t = runs[0][i];
      nlohmann::ordered_json s = {{"step", i},
                                  {"op", t.op},
                                  {"node", t.node},
                                  {"output", ShapeText(t.output_shape)},
                                  {"dtype", DTypeName(t.output_dtype)},
                                  {"ms", med[i]},
                                  {"percent", sum > 0 ? 100 * med[i] / sum : 0}};
      if (t.flops) s["gflops_per_s"] = gflops(t.flops, med[i]);
      s["bytes_written"] = t.bytes_written;
      j["steps"].push_back(s);
    }
    j["ops"] = nlohmann::ordered_json::array();
    for (const auto& [name, o] : ops) {
      nlohmann::ordered_json e = {{"op", name}, {"steps", o.steps}, {"ms", o.ms}, {"percent", sum > 0 ? 100 * o.ms / sum : 0}};
      if (o.flops) e["gflops_per_s"] = gflops(o.flops, o.ms);
      j["ops"].push_back(e);
    }
    std::cout << Json(j) << "\n";
    return 0;
  }
  std::printf("target %s, method %s, %d thread(s), %d profiled runs: median run %.3f ms, sum of step medians %.3f ms\n",
              Shown(l.program->target()).c_str(), Shown(l.method).c_str(), a.threads, a.iterations,
              Median(run_total), sum);
  std::printf("%5s  %-20s %-32s %-18s %9s %6s %8s\n", "step", "op", "node", "output", "ms", "%", "GFLOP/s");
  for (size_t i = 0; i < n; ++i) {
    const StepTiming& t = runs[0][i];
    std::string gf = t.flops ? std::to_string(static_cast<int64_t>(gflops(t.flops, med[i]) + 0.5)) : "";
    std::printf("%5zu  %-20s %-32s %-18s %9.3f %6.1f %8s\n", i, Shown(t.op).c_str(), Shown(t.node).c_str(),
                ShapeText(t.output_shape).c_str(), med[i], sum > 0 ? 100 * med[i] / sum : 0, gf.c_str());
  }
  std::printf("\nper op:\n%-20s %6s %9s %6s %8s\n", "op", "steps", "ms", "%", "GFLOP/s");
  for (const auto& [name, o] : ops) {
    std::string gf = o.flops ? std::to_string(static_cast<int64_t>(gflops(o.flops, o.ms) + 0.5)) : "";
    std::printf("%-20s %6d %9.3f %6.1f %8s\n", Shown(name).c_str(), o.steps, o.ms, sum > 0 ? 100 * o.ms / sum : 0,
                gf.c_str());
  }
  std::printf("\nbytes written per run: %llu (a state updated in place counts only its new rows)\n",
              static_cast<unsigned long long>(written));
  if (!a.trace.empty()) std::printf("\ntrace: %s\n", Shown(a.trace).c_str());
  return 0;
}

}  // namespace fcb::cli
