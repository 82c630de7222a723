// Per-step profile of a compiled model: loads an .fcb, runs every step of one
// method `iterations` times on its own and prints where the time goes, heaviest
// first. A developer tool for finding hot spots (not a test, not the CLI).
//
//   profile_steps MODEL.fcb [--target T] [--threads N] [--iterations N] [--in-sequence 0|1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/arena_memory.h"
#include "core/thread_pool.h"
#include "fcb/fcb.h"
#include "runtime/program_impl.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: profile_steps MODEL.fcb [--target T] [--threads N] [--iterations N] [--in-sequence 0|1]\n");
    return 2;
  }
  fcb::LoadOptions lo;
  int threads = 1, iters = 20;
  bool in_sequence = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--target")) lo.target = argv[i + 1];
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--iterations")) iters = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--in-sequence")) in_sequence = std::atoi(argv[i + 1]) != 0;
  }
  auto prog = fcb::Program::Load(argv[1], lo);
  if (!prog.ok()) {
    std::fprintf(stderr, "error: %s\n", prog.status().message().c_str());
    return 1;
  }
  const fcb::ProgramImpl& p = fcb::ProgramAccess::Of(*prog.value());
  const fcb::PreparedMethod& m = p.methods.at(0);
  // The arena placed as an Execution places it (huge pages from 1 MiB).
  fcb::ArenaMemory arena;
  if (!arena.Allocate(std::max<uint64_t>(m.context->arena_bytes, 64))) {
    std::fprintf(stderr, "error: cannot allocate the arena\n");
    return 1;
  }
  std::vector<void*> ptr(m.context->tensors.size());
  for (size_t t = 0; t < ptr.size(); ++t)
    ptr[t] = m.weights[t] ? const_cast<void*>(m.weights[t]) : arena.data() + m.context->tensors[t].offset;
  fcb::ThreadPool pool(threads);
  // Each thread's kernel scratch, as an Execution lays it out.
  fcb::ArenaMemory scratch;
  const uint64_t scratch_bytes = m.context->scratch_bytes * static_cast<uint64_t>(threads);
  if (scratch_bytes && !scratch.Allocate(scratch_bytes)) {
    std::fprintf(stderr, "error: cannot allocate the scratch\n");
    return 1;
  }
  fcb::ops::RunContext ctx{p.kernels, &pool, scratch_bytes ? scratch.data() : nullptr,
                           static_cast<size_t>(m.context->scratch_bytes), p.target};
  struct Row {
    double ms;
    size_t i;
  };
  std::vector<Row> rows;
  double total = 0;
  // --in-sequence 1: time every step inside whole runs (its inputs and
  // weights as cold as in a real inference); default: each step repeated on
  // its own (warm caches), which shows the kernel's own speed.
  std::vector<std::vector<const void*>> ins(m.steps.size());
  std::vector<std::vector<void*>> outs(m.steps.size());
  for (size_t i = 0; i < m.steps.size(); ++i) {
    for (int32_t t : m.steps[i].inputs) ins[i].push_back(t < 0 ? nullptr : ptr[t]);
    for (int32_t t : m.steps[i].outputs) outs[i].push_back(ptr[t]);
  }
  std::vector<double> best(m.steps.size(), 1e30);
  auto time_step = [&](size_t i) {
    const auto b = std::chrono::steady_clock::now();
    (void)m.steps[i].kernel->Run(ctx, ins[i].data(), outs[i].data());
    best[i] = std::min(best[i], std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b).count());
  };
  if (in_sequence) {
    for (int it = 0; it < iters; ++it)
      for (size_t i = 0; i < m.steps.size(); ++i) time_step(i);
  } else {
    for (size_t i = 0; i < m.steps.size(); ++i)
      for (int it = 0; it < iters; ++it) time_step(i);
  }
  for (size_t i = 0; i < m.steps.size(); ++i) {
    rows.push_back({best[i], i});
    total += best[i];
  }
  std::printf("target %s, %d thread(s): sum of per-step minima %.3f ms\n", p.target_name.c_str(), threads, total);
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  for (const Row& r : rows) {
    const auto& sd = m.context->steps[r.i];
    std::string shape;
    for (int32_t t : sd.outputs)
      for (int64_t d : m.context->tensors[t].shape) shape += std::to_string(d) + "x";
    std::printf("%8.3f ms %5.1f%%  %-40s %-18s out %s\n", r.ms, 100 * r.ms / total, m.steps[r.i].where.c_str(),
                sd.op.c_str(), shape.c_str());
  }
  return 0;
}
