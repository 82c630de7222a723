// `fcb inspect`, `fcb targets`, `fcb ops`.
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "core/target.h"
#include "format/fcb_file.h"
#include "format/metadata.h"
#include "ops/op.h"

namespace fcb::cli {

using nlohmann::ordered_json;

namespace {

// Weight accounting for a group of contexts (one context, one target, one
// method): the bytes of the blobs it references, the part no context outside
// the group references, and the rest, which sharing saved it from storing.
struct WeightShare {
  uint64_t plan = 0, referenced = 0, unique = 0;
};

WeightShare ShareOf(const format::FileDesc& d, const std::vector<std::set<int32_t>>& ctx_blobs,
                    const std::vector<uint64_t>& plan_bytes, const std::vector<bool>& in_group) {
  WeightShare w;
  std::set<int32_t> inside, outside;
  for (size_t c = 0; c < d.contexts.size(); ++c) {
    (in_group[c] ? inside : outside).insert(ctx_blobs[c].begin(), ctx_blobs[c].end());
    if (in_group[c]) w.plan += plan_bytes[c];
  }
  for (int32_t b : inside) {
    w.referenced += d.blobs[b].size;
    if (!outside.count(b)) w.unique += d.blobs[b].size;
  }
  return w;
}

ordered_json ShareJson(const WeightShare& w) {
  return {{"plan_bytes", w.plan},
          {"weight_bytes_referenced", w.referenced},
          {"weight_bytes_unique", w.unique},
          {"bytes_saved_by_sharing", w.referenced - w.unique}};
}

void PrintShares(const char* what, const ordered_json& groups) {
  std::printf("\n%-12s %12s %14s %12s %14s\n", what, "plan", "weights ref.", "unique", "sharing saved");
  for (const auto& [name, g] : groups.items())
    std::printf("%-12s %12llu %14llu %12llu %14llu\n", name.c_str(), g["plan_bytes"].get<unsigned long long>(),
                g["weight_bytes_referenced"].get<unsigned long long>(),
                g["weight_bytes_unique"].get<unsigned long long>(),
                g["bytes_saved_by_sharing"].get<unsigned long long>());
}

unsigned long long U(uint64_t v) { return static_cast<unsigned long long>(v); }

}  // namespace

// Every byte of the file is accounted for in the JSON: header + metadata
// + padding after the metadata + the pool's blob bytes + the pool's alignment
// padding = file_size, and metadata = the contexts' plan bytes + the rest
// (recomputed by re-encoding, so the sum checks that encoding is deterministic).
int CmdInspect(const std::string& file, bool as_json) {
  auto loaded = format::LoadFcbFile(file, true);
  if (!loaded.ok()) return Fail(loaded.status());
  const format::LoadedFile& f = *loaded.value();
  const auto& d = f.desc();
  std::vector<std::set<int32_t>> ctx_blobs(d.contexts.size());
  for (size_t c = 0; c < d.contexts.size(); ++c)
    for (const auto& t : d.contexts[c].tensors)
      if (t.storage == format::Storage::kWeight && t.blob >= 0) ctx_blobs[c].insert(t.blob);
  uint64_t meta_rest = 0;
  const std::vector<uint64_t> plan_bytes = format::ContextMetadataBytes(d, &meta_rest);
  uint64_t plan_total = 0;
  for (uint64_t p : plan_bytes) plan_total += p;
  uint64_t pool_bytes = 0, referenced = 0;
  for (const auto& b : d.blobs) pool_bytes += b.size;

  ordered_json j;
  j["file"] = file;
  j["producer"] = d.producer;
  j["format_version"] = f.format_version();
  std::vector<std::string> targets, methods;
  for (const auto& c : d.contexts) {
    if (std::find(targets.begin(), targets.end(), c.target) == targets.end()) targets.push_back(c.target);
    if (std::find(methods.begin(), methods.end(), c.method) == methods.end()) methods.push_back(c.method);
  }
  j["targets"] = targets;
  j["methods"] = methods;
  j["contexts"] = ordered_json::array();
  for (size_t c = 0; c < d.contexts.size(); ++c) {
    const auto& ctx = d.contexts[c];
    std::vector<bool> only(d.contexts.size(), false);
    only[c] = true;
    const WeightShare w = ShareOf(d, ctx_blobs, plan_bytes, only);
    referenced += w.referenced;
    ordered_json cj;
    cj["target"] = ctx.target;
    cj["method"] = ctx.method;
    cj["options"] = ordered_json::parse(ctx.options.empty() ? "{}" : ctx.options, nullptr, false);
    cj["steps"] = ctx.steps.size();
    cj["tensors"] = ctx.tensors.size();
    cj["arena_bytes"] = ctx.arena_bytes;
    cj.update(ShareJson(w));
    ordered_json ins = ordered_json::array(), outs = ordered_json::array();
    for (int32_t t : ctx.inputs)
      if (t >= 0 && static_cast<size_t>(t) < ctx.tensors.size())
        ins.push_back({{"name", ctx.tensors[t].name}, {"shape", ctx.tensors[t].shape}});
    for (int32_t t : ctx.outputs)
      if (t >= 0 && static_cast<size_t>(t) < ctx.tensors.size())
        outs.push_back({{"name", ctx.tensors[t].name}, {"shape", ctx.tensors[t].shape}});
    cj["inputs"] = ins;
    cj["outputs"] = outs;
    j["contexts"].push_back(cj);
  }
  ordered_json per_target = ordered_json::object(), per_method = ordered_json::object();
  for (const auto& t : targets) {
    std::vector<bool> in(d.contexts.size());
    for (size_t c = 0; c < d.contexts.size(); ++c) in[c] = d.contexts[c].target == t;
    per_target[t] = ShareJson(ShareOf(d, ctx_blobs, plan_bytes, in));
  }
  for (const auto& m : methods) {
    std::vector<bool> in(d.contexts.size());
    for (size_t c = 0; c < d.contexts.size(); ++c) in[c] = d.contexts[c].method == m;
    per_method[m] = ShareJson(ShareOf(d, ctx_blobs, plan_bytes, in));
  }
  j["per_target"] = per_target;
  j["per_method"] = per_method;
  const uint64_t pool_region = f.file_size() - f.pool_offset();
  j["weight_pool"] = {{"blobs", d.blobs.size()},
                      {"bytes", pool_bytes},
                      {"bytes_referenced_by_contexts", referenced},
                      {"bytes_saved_by_sharing", referenced - pool_bytes}};
  j["layout"] = {{"header_bytes", 128},
                 {"metadata_bytes", f.meta_bytes()},
                 {"metadata_plan_bytes", plan_total},
                 {"metadata_other_bytes", meta_rest},
                 {"metadata_padding_bytes", f.pool_offset() - 128 - f.meta_bytes()},
                 {"pool_offset", f.pool_offset()},
                 {"pool_blob_bytes", pool_bytes},
                 {"pool_padding_bytes", pool_region - pool_bytes}};
  j["file_size"] = f.file_size();
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s: %llu bytes, format v%u, produced by %s\n", file.c_str(), U(f.file_size()), f.format_version(),
              d.producer.c_str());
  std::printf("targets: ");
  for (size_t i = 0; i < targets.size(); ++i) std::printf("%s%s", i ? ", " : "", targets[i].c_str());
  std::printf("\nmethods: ");
  for (size_t i = 0; i < methods.size(); ++i) std::printf("%s%s", i ? ", " : "", methods[i].c_str());
  std::printf("\n\n%-12s %-10s %6s %12s %10s %14s %12s  %s\n", "target", "method", "steps", "arena", "plan",
              "weights ref.", "unique", "options");
  for (const auto& cj : j["contexts"])
    std::printf("%-12s %-10s %6llu %12llu %10llu %14llu %12llu  %s\n", cj["target"].get<std::string>().c_str(),
                cj["method"].get<std::string>().c_str(), cj["steps"].get<unsigned long long>(),
                cj["arena_bytes"].get<unsigned long long>(), cj["plan_bytes"].get<unsigned long long>(),
                cj["weight_bytes_referenced"].get<unsigned long long>(),
                cj["weight_bytes_unique"].get<unsigned long long>(), cj["options"].dump().c_str());
  PrintShares("per target", per_target);
  PrintShares("per method", per_method);
  std::printf("\nweight pool: %zu unique blobs, %llu bytes; contexts reference %llu bytes; sharing saved %llu bytes\n",
              d.blobs.size(), U(pool_bytes), U(referenced), U(referenced - pool_bytes));
  std::printf("total: header 128 + metadata %llu (plans %llu + other %llu) + padding %llu + weights %llu + "
              "weight alignment %llu = %llu bytes\n",
              U(f.meta_bytes()), U(plan_total), U(meta_rest), U(f.pool_offset() - 128 - f.meta_bytes()),
              U(pool_bytes), U(pool_region - pool_bytes), U(f.file_size()));
  return 0;
}

int CmdTargets(bool as_json) {
  const auto runnable = RunnableTargets();
  const std::string best = runnable.empty() ? "" : TargetName(runnable.front());
  ordered_json j = ordered_json::array();
  for (const auto& t : KnownTargets())
    j.push_back({{"name", t.name}, {"description", t.description}, {"host_can_run", HostCanRun(t.id)}});
  if (as_json) {
    std::cout << ordered_json{{"targets", j}, {"auto", best}}.dump(2) << "\n";
    return 0;
  }
  for (const auto& t : KnownTargets())
    std::printf("%-10s %-4s %s\n", t.name, HostCanRun(t.id) ? (best == t.name ? "auto" : "yes") : "no", t.description);
  return 0;
}

int CmdOps(bool as_json) {
  std::vector<std::string> names;
  for (const auto& op : ops::AllOps())
    if (!op.internal) names.push_back(op.name);
  if (as_json) {
    std::cout << ordered_json{{"operators", names}, {"count", names.size()}}.dump(2) << "\n";
    return 0;
  }
  for (const auto& n : names) std::cout << n << "\n";
  return 0;
}

}  // namespace fcb::cli
