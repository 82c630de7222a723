// What sizes chosen at each run cost (a benchmark, never a test):
//
//   dynamic_bench FILE METHOD FEEDS_DIR [--threads N] [--iterations N] [--shapes N] [--exact FILE]
//                 [--breakdown N]
//
// FEEDS_DIR holds NAME.npy per input of METHOD, of any shape within its
// ranges. Prints the median run time (ms) of
//   run      - METHOD on those inputs, the same shape every run;
//   exact    - with --exact, the same inputs through a file compiled for
//              exactly their shapes (interleaved with `run`, same thread count);
//   switch   - runs alternating between those shapes and the bound's (each
//              shape seen before, so its resolution is cached): the extra
//              cost per run over `run` and the bound's own run time is what a
//              change of shape adds;
//   resolve  - runs at a shape not seen before each time (every ranged dim
//              one smaller than the last, --shapes of them, default 200, so
//              most runs also evict the least recently used resolution; the
//              inputs are all cut before timing, and every run, first or
//              repeat, follows the same SetInput of every input): per shape
//              the first run minus a repeat run at that shape (the third run
//              at it), the median (and quartiles) over the shapes: what a
//              shape change adds, resolution included; and the minor page
//              faults of each;
//   second   - the second run at each of those shapes, which makes the
//              kernels for exactly that shape (Execution runs the bound's
//              adapting kernels in a first run), against the repeat;
//   breakdown - with --breakdown N: the same through RunProfiled, the
//              resolution apart from the steps, and the N steps whose first
//              run exceeds their repeat the most;
//   outside  - (with --breakdown) the first run's time outside its steps
//              minus the repeat's (RunProfiled's own bookkeeping cancels):
//              the resolution as a first run pays it; over all the new
//              shapes, and over those after the first 16 (the execution's
//              cache of resolutions full, as in a long session).
//
// The figures in README and docs/design.md §13 (test data from
// scripts/prepare_testdata.sh in build/testdata; f.npy / t.npy hold a
// one-element bool array, false / true; an indented line continues the
// command above it):
//
//   T=build/testdata; P=
//   for p in past_key_values.{0,1}.{key,value}; do
//     P="$P --input-shape prefill:$p=1x4x1x16 --input-shape decode:$p=1x4x1..1023x16"; done
//   build/fcb compile --method prefill=$T/decoder_merged.onnx --method decode=$T/decoder_merged.onnx
//     --input-value prefill:use_cache_branch=f.npy --input-value decode:use_cache_branch=t.npy
//     --input-shape prefill:input_ids=1x1..64 --input-shape prefill:attention_mask=1x1..64
//     --input-shape decode:input_ids=1x1 --input-shape decode:attention_mask=1x2..1024 $P -o dec.fcb
//   build/bench/dynamic_bench dec.fcb decode $T/decoder_merged.decode.P1023.feeds --shapes 300 [--breakdown 5]
//   build/bench/dynamic_bench dec.fcb prefill $T/decoder_merged.prefill.T64.feeds
//   build/fcb compile $T/bert_dyn.onnx --input-shape input_ids=1x1..512
//     --input-shape attention_mask=1x1..512 -o bert.fcb
//   build/bench/dynamic_bench bert.fcb main $T/bert_dyn.L333.feeds --shapes 60
//
// Against a file compiled for exactly the feeds' shapes (--exact), e.g. the
// decode step at past length P (feeds: the P1023 ones cut to P rows of past
// and P+1 of attention_mask) and the encoder at length L:
//
//   S=; for p in past_key_values.{0,1}.{key,value}; do S="$S --input-shape $p=1x4xPx16"; done
//   build/fcb compile $T/decoder_merged.onnx --input-value use_cache_branch=t.npy
//     --input-shape input_ids=1x1 --input-shape attention_mask=1x(P+1) $S -o dec_P.fcb
//   build/bench/dynamic_bench dec.fcb decode FEEDS_P --shapes 1 --exact dec_P.fcb
//   build/fcb compile $T/bert_dyn.onnx --input-shape input_ids=1xL --input-shape attention_mask=1xL -o bert_L.fcb
//   build/bench/dynamic_bench bert.fcb main $T/bert_dyn.LL.feeds --shapes 1 --exact bert_L.fcb
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "fcb/fcb.h"
#include "fcb/npy.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "dynamic_bench: %s\n", m.c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// The first `shape` of `a` along every dim (a prefix in each).
std::vector<uint8_t> Cut(const fcb::NpyArray& a, const std::vector<int64_t>& shape, size_t elem) {
  std::vector<uint8_t> out;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t n = 1;
  for (auto d : shape) n *= d;
  out.reserve(static_cast<size_t>(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * a.shape[d] + idx[d];
    const uint8_t* p = a.data.data() + off * elem;
    out.insert(out.end(), p, p + elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

struct Feeds {
  std::map<std::string, fcb::NpyArray> arrays;
};

void Set(fcb::Execution& ex, const std::string& name, const void* p, size_t bytes, const std::vector<int64_t>& shape) {
  fcb::Status s = ex.SetInput(name, p, bytes, shape);
  if (!s.ok()) Die(s.message());
}

double TimeRun(fcb::Execution& ex) {
  const auto t0 = Clock::now();
  fcb::Status s = ex.Run();
  if (!s.ok()) Die(s.message());
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A profiled run: its wall time, and per step its time (RunProfiled
// resolves before its first step, so wall - the steps' sum is the resolution).
double TimeProfiled(fcb::Execution& ex, std::vector<fcb::StepTiming>* steps) {
  const auto t0 = Clock::now();
  fcb::Status s = ex.RunProfiled(steps);
  if (!s.ok()) Die(s.message());
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) Die("usage: dynamic_bench FILE METHOD FEEDS_DIR [--threads N] [--iterations N] [--shapes N] [--exact FILE] [--breakdown N]");
  const std::string file = argv[1], method = argv[2], dir = argv[3];
  int threads = 1, iterations = 50, shapes = 200, breakdown = 0;
  std::string exact_file;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::atoi(argv[i + 1]);
    else if (k == "--iterations") iterations = std::atoi(argv[i + 1]);
    else if (k == "--exact") exact_file = argv[i + 1];
    else if (k == "--shapes") shapes = std::atoi(argv[i + 1]);
    else if (k == "--breakdown") breakdown = std::atoi(argv[i + 1]);
    else Die("unknown option " + k);
  }
  auto program = fcb::Program::Load(file);
  if (!program.ok()) Die(program.status().message());
  auto made = fcb::Execution::Create(program.value(), method, threads);
  if (!made.ok()) Die(made.status().message());
  fcb::Execution& ex = *made.value();
  std::map<std::string, fcb::NpyArray> feeds;
  for (const auto& in : ex.info().inputs) {
    auto a = fcb::ReadNpy((std::filesystem::path(dir) / (in.name + ".npy")).string());
    if (!a.ok()) Die(a.status().message());
    feeds[in.name] = std::move(a).value();
  }
  auto set_feeds = [&](fcb::Execution& e) {
    for (const auto& [name, a] : feeds) Set(e, name, a.data.data(), a.data.size(), a.shape);
  };
  // The bound: each input's planned shape, the feeds' values repeated into it.
  std::vector<std::vector<uint8_t>> bound_bytes;
  for (const auto& in : ex.info().inputs) {
    std::vector<uint8_t> b(in.bytes());
    const auto& src = feeds[in.name].data;
    for (size_t i = 0; i < b.size(); ++i) b[i] = src[i % src.size()];
    bound_bytes.push_back(std::move(b));
  }
  auto set_bound = [&]() {
    for (size_t i = 0; i < ex.info().inputs.size(); ++i)
      Set(ex, ex.info().inputs[i].name, bound_bytes[i].data(), bound_bytes[i].size(), ex.info().inputs[i].shape);
  };

  std::unique_ptr<fcb::Execution> exact;
  if (!exact_file.empty()) {
    auto p = fcb::Program::Load(exact_file);
    if (!p.ok()) Die(p.status().message());
    auto e = fcb::Execution::Create(p.value(), method, threads);
    if (!e.ok()) Die(e.status().message());
    exact = std::move(e).value();
    for (const auto& [name, a] : feeds) {
      fcb::Status s = exact->SetInput(name, a.data.data(), a.data.size());
      if (!s.ok()) Die("--exact: " + s.message());
    }
  }
  set_feeds(ex);
  TimeRun(ex);
  if (exact) TimeRun(*exact);
  std::vector<double> run, ex_run, bound, sw_feeds, sw_bound;
  for (int i = 0; i < iterations; ++i) {
    run.push_back(TimeRun(ex));
    if (exact) ex_run.push_back(TimeRun(*exact));
  }
  set_bound();
  TimeRun(ex);
  for (int i = 0; i < iterations; ++i) bound.push_back(TimeRun(ex));
  // Alternating: the feeds' shape, then the bound's, each a change.
  for (int i = 0; i < iterations; ++i) {
    set_feeds(ex);
    sw_feeds.push_back(TimeRun(ex));
    set_bound();
    sw_bound.push_back(TimeRun(ex));
  }
  std::printf("run      %.4f ms (the feeds' shapes, same every run)\n", Median(run));
  if (exact)
    std::printf("exact    %.4f ms (a file compiled for exactly those shapes): ranged/exact = %.3f\n", Median(ex_run),
                Median(run) / Median(ex_run));
  std::printf("bound    %.4f ms (every ranged dim at its upper end)\n", Median(bound));
  const double change = ((Median(sw_feeds) - Median(run)) + (Median(sw_bound) - Median(bound))) / 2;
  std::printf("switch   %.4f / %.4f ms alternating the two shapes (each cached): %+.1f us per change\n",
              Median(sw_feeds), Median(sw_bound), change * 1000);
  // New shapes: every ranged dim one smaller each run (cut from the feeds).
  std::vector<double> fresh, second, again, fresh_resolve, again_outside, fresh_steps, again_steps, fresh_faults,
      again_faults;
  std::vector<std::vector<double>> step_extra;  // per step, per shape: fresh - again (with --breakdown)
  std::vector<fcb::StepTiming> t_fresh, t_again;
  // Every new shape's inputs are cut first, so that cutting them disturbs no
  // timed run; each run, first and repeat alike, follows the same copy in
  // (SetInput of every input), so their difference is the shape change alone.
  struct NewShape {
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<std::vector<int64_t>> shape;
  };
  std::vector<NewShape> new_shapes;
  for (int i = 1; i <= shapes; ++i) {
    bool any = false;
    NewShape ns;
    for (size_t k = 0; k < ex.info().inputs.size(); ++k) {
      const auto& in = ex.info().inputs[k];
      const auto& a = feeds[in.name];
      std::vector<int64_t> shape = a.shape;
      for (size_t d = 0; d < shape.size(); ++d)
        if (in.dynamic() && in.min_shape[d] != in.shape[d] && a.shape[d] - i >= in.min_shape[d])
          shape[d] = a.shape[d] - i, any = true;
      ns.bytes.push_back(Cut(a, shape, fcb::DTypeSize(in.dtype)));
      ns.shape.push_back(std::move(shape));
    }
    if (!any) break;
    new_shapes.push_back(std::move(ns));
  }
  for (const NewShape& ns : new_shapes) {
    auto feed = [&] {
      for (size_t k = 0; k < ex.info().inputs.size(); ++k)
        Set(ex, ex.info().inputs[k].name, ns.bytes[k].data(), ns.bytes[k].size(), ns.shape[k]);
    };
    feed();
    if (breakdown == 0) {
      const long f0 = MinorFaults();
      fresh.push_back(TimeRun(ex));
      feed();
      second.push_back(TimeRun(ex));  // kernels made for exactly this shape (Execution's second run at it)
      const long f1 = MinorFaults();
      feed();
      again.push_back(TimeRun(ex));  // the same shape, resolved and specialized now
      fresh_faults.push_back(static_cast<double>(f1 - f0));
      again_faults.push_back(static_cast<double>(MinorFaults() - f1));
      continue;
    }
    const double wf = TimeProfiled(ex, &t_fresh);
    feed();
    second.push_back(TimeRun(ex));
    feed();
    const double wa = TimeProfiled(ex, &t_again);
    double sf = 0, sa = 0;
    step_extra.resize(t_fresh.size());
    for (size_t k = 0; k < t_fresh.size(); ++k) {
      sf += t_fresh[k].ms, sa += t_again[k].ms;
      step_extra[k].push_back((t_fresh[k].ms - t_again[k].ms) * 1000);
    }
    fresh.push_back(wf), again.push_back(wa);
    fresh_resolve.push_back((wf - sf) * 1000), again_outside.push_back((wa - sa) * 1000);
    fresh_steps.push_back(sf), again_steps.push_back(sa);
  }
  if (!fresh.empty()) {
    std::vector<double> extra;
    for (size_t k = 0; k < fresh.size(); ++k) extra.push_back((fresh[k] - again[k]) * 1000);
    std::printf("resolve  %.4f ms per run at a shape not seen before, %.4f ms at it again: %+.1f us to resolve "
                "(median of first - repeat over %zu shapes; quartiles %+.1f / %+.1f us)\n",
                Median(fresh), Median(again), Median(extra), fresh.size(), Quantile(extra, 0.25),
                Quantile(extra, 0.75));
    std::vector<double> second_extra;
    for (size_t k = 0; k < second.size(); ++k) second_extra.push_back((second[k] - again[k]) * 1000);
    std::printf("second   %.4f ms the second run at each (its kernels made for exactly that shape): %+.1f us "
                "(median of second - repeat)\n",
                Median(second), Median(second_extra));
    if (!fresh_faults.empty())
      std::printf("faults   %.0f minor page faults in a first run at a new shape, %.0f in the repeat (median)\n",
                  Median(fresh_faults), Median(again_faults));
  }
  if (breakdown > 0 && !fresh.empty()) {
    std::vector<double> resolve_extra;
    for (size_t k = 0; k < fresh_resolve.size(); ++k) resolve_extra.push_back(fresh_resolve[k] - again_outside[k]);
    std::printf("outside  the first run's time outside its steps %.1f us, the repeat's %.1f us: %+.1f us "
                "(median of the differences)\n",
                Median(fresh_resolve), Median(again_outside), Median(resolve_extra));
    // An execution caches 16 resolutions: the shapes after the first 16 new
    // ones resolve over its least recently used entry (no new allocations),
    // as every new shape of a long session does.
    if (resolve_extra.size() > 16) {
      const std::vector<double> full(resolve_extra.begin() + 16, resolve_extra.end());
      std::printf("outside  of the %zu shapes after the first 16 (the cache full, each resolved over its least "
                  "recently used entry): %+.1f us (median)\n",
                  full.size(), Median(full));
    }
    std::printf("breakdown (RunProfiled, median over %zu shapes): resolution %.1f us, steps %+.1f us "
                "(first %.4f ms, repeat %.4f ms)\n",
                fresh.size(), Median(fresh_resolve), (Median(fresh_steps) - Median(again_steps)) * 1000,
                Median(fresh_steps), Median(again_steps));
    std::vector<std::pair<double, size_t>> order;
    for (size_t k = 0; k < step_extra.size(); ++k) order.push_back({Median(step_extra[k]), k});
    std::sort(order.rbegin(), order.rend());
    for (int k = 0; k < breakdown && k < static_cast<int>(order.size()); ++k)
      std::printf("  step %3zu %-24s %-40.40s %+6.2f us\n", order[k].second, t_fresh[order[k].second].op.c_str(),
                  t_fresh[order[k].second].node.c_str(), order[k].first);
  }
  return 0;
}
