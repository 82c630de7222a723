#include <algorithm>
// `fcb inspect`, `fcb targets`, `fcb ops`: print what the public description
// calls (fcb/inspect.h) return.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "fcb/inspect.h"

namespace fcb::cli {

using nlohmann::ordered_json;

namespace {

unsigned long long U(uint64_t v) { return static_cast<unsigned long long>(v); }

void PrintShares(const char* what, const std::vector<std::pair<std::string, WeightShare>>& groups) {
  std::printf("\n%-12s %12s %14s %12s %14s\n", what, "plan", "weights ref.", "unique", "sharing saved");
  for (const auto& [name, g] : groups)
    std::printf("%-12s %12llu %14llu %12llu %14llu\n", Shown(name).c_str(), U(g.plan_bytes), U(g.weight_bytes_referenced),
                U(g.weight_bytes_unique), U(g.bytes_saved_by_sharing));
}

}  // namespace

int CmdInspect(const std::string& file, bool as_json) {
  auto inspected = InspectFile(file);
  if (!inspected.ok()) return Fail(inspected.status());
  const FileSummary& s = inspected.value();
  if (as_json) {
    std::cout << FileSummaryJson(s, 2) << "\n";
    return 0;
  }
  std::printf("%s: %llu bytes, format v%u, plan v%u, produced by %s\n", Shown(file).c_str(), U(s.file_size),
              s.format_version, s.plan_version, Shown(s.producer).c_str());
  std::printf("targets: ");
  for (size_t i = 0; i < s.targets.size(); ++i) std::printf("%s%s", i ? ", " : "", Shown(s.targets[i]).c_str());
  std::printf("\nmethods: ");
  for (size_t i = 0; i < s.methods.size(); ++i) std::printf("%s%s", i ? ", " : "", Shown(s.methods[i]).c_str());
  std::printf("\n\n%-12s %-10s %6s %12s %12s %10s %14s %12s  %s\n", "target", "method", "steps", "arena",
              "scratch/thr", "plan", "weights ref.", "unique", "options");
  for (const auto& c : s.contexts)
    std::printf("%-12s %-10s %6llu %12llu %12llu %10llu %14llu %12llu  %s\n", Shown(c.target).c_str(), Shown(c.method).c_str(),
                U(c.steps), U(c.arena_bytes), U(c.scratch_bytes), U(c.share.plan_bytes), U(c.share.weight_bytes_referenced),
                U(c.share.weight_bytes_unique), Json(ordered_json::parse(c.options_json, nullptr, false)).c_str());
  // Methods with dims chosen at each run: their inputs' ranges (memory and
  // every shape above are planned at the upper ends).
  std::vector<std::string> shown;
  for (const auto& c : s.contexts) {
    bool dynamic = false;
    for (const auto& in : c.inputs) dynamic = dynamic || in.dynamic();
    if (!dynamic || std::find(shown.begin(), shown.end(), c.method) != shown.end()) continue;
    shown.push_back(c.method);
    std::printf("\nmethod %s: sizes chosen at each run, memory planned at the upper bounds\n", Shown(c.method).c_str());
    for (const auto& in : c.inputs) {
      std::string dims, syms;
      for (size_t d = 0; d < in.shape.size(); ++d) {
        dims += d ? "x" : "";
        if (in.dynamic() && in.min_shape[d] != in.shape[d]) {
          const std::string range = std::to_string(in.min_shape[d]) + ".." + std::to_string(in.shape[d]);
          dims += "[" + range + "]";
          const std::string entry = Shown(in.symbols[d]) + " = " + range;
          if (syms.find(entry) == std::string::npos) syms += (syms.empty() ? "" : ", ") + entry;
        } else {
          dims += std::to_string(in.shape[d]);
        }
      }
      std::printf("  input '%s' %s %s%s\n", Shown(in.name).c_str(), DTypeName(in.dtype), dims.c_str(),
                  syms.empty() ? "" : (" (" + syms + ")").c_str());
    }
    // The outputs' shapes over those symbols, where worked out (else the
    // shape at the upper bounds), and what every run must meet.
    for (size_t i = 0; i < c.outputs.size() && i < c.output_shapes.size(); ++i) {
      const auto& out = c.outputs[i];
      const std::string& sym = c.output_shapes[i];
      std::printf("  output '%s' %s %s\n", Shown(out.name).c_str(), DTypeName(out.dtype),
                  sym.empty() ? ("not worked out symbolically, " + ShapeText(out.shape) + " at the upper bounds").c_str()
                              : Shown(sym).c_str());
    }
    for (const auto& r : c.requirements) std::printf("  every run needs %s\n", Shown(r).c_str());
  }
  PrintShares("per target", s.per_target);
  PrintShares("per method", s.per_method);
  const WeightPoolSummary& p = s.weight_pool;
  std::printf("\nweight pool: %llu unique blobs, %llu bytes; contexts reference %llu bytes; sharing saved %llu bytes\n",
              U(p.blobs), U(p.bytes), U(p.bytes_referenced_by_contexts), U(p.bytes_saved_by_sharing));
  if (!s.attachments.empty()) {
    std::printf("\nattachments: %zu, %llu bytes\n%-32s %12s  %s\n", s.attachments.size(), U(s.layout.attachment_bytes),
                "name", "bytes", "xxh3-128");
    for (const auto& a : s.attachments)
      std::printf("%-32s %12llu  %s\n", Shown(a.name).c_str(), U(a.size), a.checksum.c_str());
  }
  const FileLayout& l = s.layout;
  const std::string attached =
      l.attachment_bytes ? " + attachments " + std::to_string(l.attachment_bytes) : std::string();
  std::printf("total: header %llu + metadata %llu (plans %llu + other %llu) + padding %llu + weights %llu%s + "
              "weight alignment %llu = %llu bytes\n",
              U(l.header_bytes), U(l.metadata_bytes), U(l.metadata_plan_bytes), U(l.metadata_other_bytes),
              U(l.metadata_padding_bytes), U(l.pool_blob_bytes - l.attachment_bytes), attached.c_str(),
              U(l.pool_padding_bytes), U(s.file_size));
  return 0;
}

int CmdTargets(bool as_json) {
  const std::vector<TargetDesc> targets = ListTargets();
  std::string best;
  for (const auto& t : targets)
    if (t.auto_choice) best = t.name;
  if (as_json) {
    ordered_json j = ordered_json::array();
    for (const auto& t : targets)
      j.push_back({{"name", t.name}, {"arch", t.arch}, {"description", t.description},
                   {"host_can_run", t.host_can_run}, {"why_not", t.why_not}});
    std::cout << Json(ordered_json{{"targets", j}, {"auto", best}}, 2) << "\n";
    return 0;
  }
  // "here": whether this host can run it; "auto" marks the one auto picks.
  std::printf("%-14s %-8s %-5s %s\n", "target", "arch", "here", "description");
  for (const auto& t : targets) {
    std::printf("%-14s %-8s %-5s %s\n", t.name.c_str(), t.arch.c_str(),
                t.host_can_run ? (t.auto_choice ? "auto" : "yes") : "no", t.description.c_str());
    // Why a target of this host's own family cannot run (what the CPU lacks).
    if (!t.host_can_run && t.why_not.rfind("it holds", 0) != 0) std::printf("%30s(%s)\n", "", t.why_not.c_str());
  }
  return 0;
}

int CmdOps(bool as_json) {
  std::vector<std::string> names;
  for (const auto& op : ListOperators())
    if (!op.internal) names.push_back(op.name);
  if (as_json) {
    std::cout << Json(ordered_json{{"operators", names}, {"count", names.size()}}, 2) << "\n";
    return 0;
  }
  for (const auto& n : names) std::cout << n << "\n";
  return 0;
}

}  // namespace fcb::cli
