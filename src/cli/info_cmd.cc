// `fcb inspect`, `fcb targets`, `fcb ops`.
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "core/target.h"
#include "format/fcb_file.h"
#include "ops/op.h"

namespace fcb::cli {

using nlohmann::ordered_json;

int CmdInspect(const std::string& file, bool as_json) {
  auto loaded = format::LoadFcbFile(file, true);
  if (!loaded.ok()) return Fail(loaded.status());
  const format::LoadedFile& f = *loaded.value();
  const auto& d = f.desc();
  // Which contexts use each blob.
  std::vector<int> users(d.blobs.size(), 0);
  std::vector<std::set<int32_t>> ctx_blobs(d.contexts.size());
  for (size_t c = 0; c < d.contexts.size(); ++c) {
    for (const auto& t : d.contexts[c].tensors)
      if (t.storage == format::Storage::kWeight && t.blob >= 0) ctx_blobs[c].insert(t.blob);
    for (int32_t b : ctx_blobs[c]) users[b]++;
  }
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
    uint64_t wb = 0, unique = 0;
    for (int32_t b : ctx_blobs[c]) {
      wb += d.blobs[b].size;
      if (users[b] == 1) unique += d.blobs[b].size;
    }
    referenced += wb;
    ordered_json cj;
    cj["target"] = ctx.target;
    cj["method"] = ctx.method;
    cj["options"] = ordered_json::parse(ctx.options.empty() ? "{}" : ctx.options, nullptr, false);
    cj["steps"] = ctx.steps.size();
    cj["tensors"] = ctx.tensors.size();
    cj["arena_bytes"] = ctx.arena_bytes;
    cj["weight_bytes_referenced"] = wb;
    cj["weight_bytes_unique"] = unique;
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
  const uint64_t pool_region = f.file_size() - f.pool_offset();
  j["weight_pool"] = {{"blobs", d.blobs.size()},
                      {"bytes", pool_bytes},
                      {"bytes_referenced_by_contexts", referenced},
                      {"bytes_saved_by_sharing", referenced - pool_bytes}};
  j["layout"] = {{"header_bytes", 128},
                 {"metadata_bytes", f.meta_bytes()},
                 {"pool_offset", f.pool_offset()},
                 {"pool_region_bytes", pool_region},
                 {"padding_bytes", f.file_size() - 128 - f.meta_bytes() - pool_bytes}};
  j["file_size"] = f.file_size();
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s: %llu bytes, format v%u, produced by %s\n", file.c_str(),
              static_cast<unsigned long long>(f.file_size()), f.format_version(), d.producer.c_str());
  std::printf("targets: ");
  for (size_t i = 0; i < targets.size(); ++i) std::printf("%s%s", i ? ", " : "", targets[i].c_str());
  std::printf("\nmethods: ");
  for (size_t i = 0; i < methods.size(); ++i) std::printf("%s%s", i ? ", " : "", methods[i].c_str());
  std::printf("\n\n%-12s %-10s %6s %12s %14s %12s  %s\n", "target", "method", "steps", "arena", "weights ref.",
              "unique", "options");
  for (const auto& cj : j["contexts"])
    std::printf("%-12s %-10s %6llu %12llu %14llu %12llu  %s\n", cj["target"].get<std::string>().c_str(),
                cj["method"].get<std::string>().c_str(), cj["steps"].get<unsigned long long>(),
                cj["arena_bytes"].get<unsigned long long>(), cj["weight_bytes_referenced"].get<unsigned long long>(),
                cj["weight_bytes_unique"].get<unsigned long long>(), cj["options"].dump().c_str());
  std::printf("\nweight pool: %zu unique blobs, %llu bytes; contexts reference %llu bytes; sharing saved %llu bytes\n",
              d.blobs.size(), static_cast<unsigned long long>(pool_bytes), static_cast<unsigned long long>(referenced),
              static_cast<unsigned long long>(referenced - pool_bytes));
  std::printf("layout: header 128 + metadata %llu + weights %llu + alignment padding %llu = %llu bytes\n",
              static_cast<unsigned long long>(f.meta_bytes()), static_cast<unsigned long long>(pool_bytes),
              static_cast<unsigned long long>(f.file_size() - 128 - f.meta_bytes() - pool_bytes),
              static_cast<unsigned long long>(f.file_size()));
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
