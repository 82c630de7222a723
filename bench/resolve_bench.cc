// What resolving a ranged plan at a new combination of sizes costs, alone
// (a benchmark, never a test; it reaches inside the runtime, so it links the
// layers' objects like the internal tests):
//
//   resolve_bench TESTDATA_DIR [--reps N] [--target NAME] [--only MODEL]
//
// Compiles the test models with ranges (the BERT-like encoder 1..512, the
// decoder's prefill 1..64 and decode past 1..1023, resnet18 64..512 by
// 64..512) for the host's best target (or --target), loads each and times
// ResolveMethod (ops::ResolvePlan + the kernels it remakes) at many sizes:
// per size the best of N (default 7) resolutions, then the median over the
// sizes. Also prints the median of ResolvePlan alone, the steps inferred again
// (and how: shapes kept, FastShape, the op's inference) and the kernels
// remade, the allocations, and the same resolution made over
// the one of the size before (its storage reused, as an execution's full
// cache does).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <new>
#include <map>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "ops/plan_check.h"
#include "runtime/program_impl.h"

// Allocations counted (operator new), to report them per resolution.
static uint64_t g_news = 0;
void* operator new(size_t n) {
  ++g_news;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace fcb {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "resolve_bench: %s\n", m.c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

NpyArray Bool(bool b) {
  NpyArray a;
  a.dtype = static_cast<int32_t>(DType::kBool);
  a.shape = {1};
  a.data = {static_cast<uint8_t>(b)};
  return a;
}

using SizesFn = std::function<std::vector<std::vector<int64_t>>(const format::ContextDesc&)>;

// Every symbol from its low end up, together, every `step`-th size below the bound.
SizesFn Together(int64_t step) {
  return [step](const format::ContextDesc& c) {
    std::vector<std::vector<int64_t>> v;
    for (int64_t i = 0; c.symbols[0].lo + i < c.symbols[0].hi; i += step) {
      std::vector<int64_t> one;
      for (const auto& sym : c.symbols) one.push_back(std::min(sym.lo + i, sym.hi));
      v.push_back(std::move(one));
    }
    return v;
  };
}

void Bench(const std::string& label, const std::map<std::string, std::string>& methods, const CompileSpec& spec,
           const std::string& target, int reps, const SizesFn& sizes_of) {
  const std::string out = (std::filesystem::temp_directory_path() / ("resolve_bench_" + label + ".fcb")).string();
  auto report = CompileMethods(methods, spec, out);
  if (!report.ok()) Die(label + ": " + report.status().message());
  LoadOptions lo;
  lo.target = target;
  auto program = Program::Load(out, lo);
  if (!program.ok()) Die(label + ": " + program.status().message());
  const ProgramImpl& p = ProgramAccess::Of(*program.value());
  for (const PreparedMethod& m : p.methods) {
    const format::ContextDesc& c = *m.context;
    std::vector<double> whole, plan_only;
    std::vector<double> inferred, remade, news, plan_news, over, recycled_news, kept, fast, generic, proven;
    std::unique_ptr<ResolvedMethod> recycled;
    for (const auto& values : sizes_of(c)) {
      const std::vector<ir::Shape> shapes = m.InputShapesAt(values);
      double best = 1e30, best_plan = 1e30, best_recycled = 1e30;
      for (int r = 0; r < reps; ++r) {
        const uint64_t n0 = g_news;
        const auto t0 = Clock::now();
        auto resolved = ResolveMethod(p, m, shapes);
        const auto t1 = Clock::now();
        const uint64_t n1 = g_news;
        if (!resolved.ok()) Die(label + " " + m.info.name + ": " + resolved.status().message());
        best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count());
        if (r == 0) {
          news.push_back(static_cast<double>(n1 - n0));
          const auto& slots = resolved.value()->plan.step_slot;
          inferred.push_back(static_cast<double>(std::count_if(slots.begin(), slots.end(), [](int32_t k) { return k >= 0; })));
          remade.push_back(static_cast<double>(resolved.value()->made.size()));
          kept.push_back(resolved.value()->plan.shapes_kept);
          fast.push_back(resolved.value()->plan.shapes_fast);
          generic.push_back(resolved.value()->plan.shapes_inferred);
          proven.push_back(resolved.value()->plan.shapes_proven);
        }
        // Over the resolution of the size before, as an execution's full
        // cache resolves over its least recently used entry.
        const uint64_t n4 = g_news;
        const auto t4 = Clock::now();
        auto again = ResolveMethod(p, m, shapes, std::move(recycled));
        const auto t5 = Clock::now();
        if (r == 0) recycled_news.push_back(static_cast<double>(g_news - n4));
        if (!again.ok()) Die(label + " " + m.info.name + ": " + again.status().message());
        recycled = std::move(again).value();
        best_recycled = std::min(best_recycled, std::chrono::duration<double, std::micro>(t5 - t4).count());
        ops::ResolvedPlan rp;
        const auto t2 = Clock::now();
        const uint64_t n2 = g_news;
        Status s = ops::ResolvePlan(c, *m.bound_plan, shapes, &rp);
        const auto t3 = Clock::now();
        if (r == 0) plan_news.push_back(static_cast<double>(g_news - n2));
        if (!s.ok()) Die(s.message());
        best_plan = std::min(best_plan, std::chrono::duration<double, std::micro>(t3 - t2).count());
      }
      whole.push_back(best);
      over.push_back(best_recycled);
      plan_only.push_back(best_plan);
    }
    std::printf("%-8s %-8s %4zu steps: resolve %7.1f us (ResolvePlan %6.1f us), %3.0f steps inferred, %3.0f kernels "
                "remade, %.0f allocations (%.0f in ResolvePlan); over a recycled resolution %.1f us, %.0f allocations "
                "(median over %zu sizes, best of %d)\n",
                label.c_str(), m.info.name.c_str(), c.steps.size(), Median(whole), Median(plan_only),
                Median(inferred), Median(remade), Median(news), Median(plan_news), Median(over), Median(recycled_news),
                whole.size(), reps);
    std::printf("%-8s %-8s   of the steps inferred again: %.0f proven (their shapes from the program, not walked), "
                "%.0f kept the bound's shapes, %.0f shaped in place (FastShape), %.0f by their op's inference\n",
                label.c_str(), m.info.name.c_str(), Median(proven), Median(kept), Median(fast), Median(generic));
  }
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace fcb

int main(int argc, char** argv) {
  using namespace fcb;
  if (argc < 2) Die("usage: resolve_bench TESTDATA_DIR [--reps N] [--target NAME] [--only MODEL]");
  const std::string dir = argv[1];
  int reps = 7;
  std::string target = "auto", only;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--reps") reps = std::atoi(argv[i + 1]);
    else if (k == "--target") target = argv[i + 1];
    else if (k == "--only") only = argv[i + 1];
    else Die("unknown option " + k);
  }
  auto want = [&](const char* m) { return only.empty() || only == m; };
  std::vector<std::string> targets = {"all"};
  if (want("decoder")) {
    CompileSpec spec;
    spec.targets = targets;
    spec.input_values["prefill:use_cache_branch"] = Bool(false);
    spec.input_values["decode:use_cache_branch"] = Bool(true);
    spec.input_shapes["prefill:input_ids"] = {1, {1, 64}};
    spec.input_shapes["prefill:attention_mask"] = {1, {1, 64}};
    spec.input_shapes["decode:input_ids"] = {1, 1};
    spec.input_shapes["decode:attention_mask"] = {1, {2, 1024}};
    for (const char* p : {"past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key",
                          "past_key_values.1.value"}) {
      spec.input_shapes[std::string("prefill:") + p] = {1, 4, 1, 16};
      spec.input_shapes[std::string("decode:") + p] = {1, 4, {1, 1023}, 16};
    }
    const std::string model = dir + "/decoder_merged.onnx";
    Bench("decoder", {{"prefill", model}, {"decode", model}}, spec, target, reps,
          [](const format::ContextDesc& c) { return Together(c.method == "decode" ? 7 : 1)(c); });
  }
  if (want("bert")) {
    CompileSpec spec;
    spec.targets = targets;
    spec.input_shapes["main:input_ids"] = {1, {1, 512}};
    spec.input_shapes["main:attention_mask"] = {1, {1, 512}};
    Bench("bert", {{"main", dir + "/bert_dyn.onnx"}}, spec, target, reps, Together(5));
  }
  if (want("resnet18")) {
    CompileSpec spec;
    spec.targets = targets;
    spec.input_shapes["main:input"] = {1, 3, {64, 512}, {64, 512}};
    Bench("resnet18", {{"main", dir + "/resnet18_dyn.onnx"}}, spec, target, reps, [](const format::ContextDesc&) {
      std::vector<std::vector<int64_t>> grid;
      for (int64_t h = 64; h < 512; h += 41)
        for (int64_t w = 64; w < 512; w += 43) grid.push_back({h, w});
      return grid;
    });
  }
  return 0;
}
