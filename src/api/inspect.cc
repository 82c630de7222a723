// The public description calls (fcb/inspect.h): targets, operators, a file.
#include "fcb/inspect.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "core/target.h"
#include "format/fcb_file.h"
#include "format/fcb_header.h"
#include "format/metadata.h"
#include "ops/op.h"
#include "runtime/program_impl.h"

namespace fcb {
namespace {

// WeightShare of the contexts with in_group[c]: the plan bytes, the bytes of
// the blobs they reference, and the part no context outside the group references.
WeightShare ShareOf(const format::FileDesc& d, const std::vector<std::set<int32_t>>& ctx_blobs,
                    const std::vector<uint64_t>& plan_bytes, const std::vector<bool>& in_group) {
  WeightShare w;
  std::set<int32_t> inside, outside;
  for (size_t c = 0; c < d.contexts.size(); ++c) {
    (in_group[c] ? inside : outside).insert(ctx_blobs[c].begin(), ctx_blobs[c].end());
    if (in_group[c]) w.plan_bytes += plan_bytes[c];
  }
  for (int32_t b : inside) {
    w.weight_bytes_referenced += d.blobs[b].size;
    if (!outside.count(b)) w.weight_bytes_unique += d.blobs[b].size;
  }
  w.bytes_saved_by_sharing = w.weight_bytes_referenced - w.weight_bytes_unique;
  return w;
}

void AddOnce(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

using nlohmann::ordered_json;

ordered_json ShareJson(const WeightShare& w) {
  return {{"plan_bytes", w.plan_bytes},
          {"weight_bytes_referenced", w.weight_bytes_referenced},
          {"weight_bytes_unique", w.weight_bytes_unique},
          {"bytes_saved_by_sharing", w.bytes_saved_by_sharing}};
}

ordered_json IoJson(const std::vector<TensorSpec>& v) {
  ordered_json a = ordered_json::array();
  for (const auto& t : v) {
    ordered_json e = {{"name", t.name}, {"shape", t.shape}};
    if (t.dynamic()) e["min_shape"] = t.min_shape, e["symbols"] = t.symbols;  // dims chosen at each run
    a.push_back(std::move(e));
  }
  return a;
}

ordered_json SummaryJson(const FileSummary& s) {
  ordered_json j;
  j["file"] = s.path;
  j["producer"] = s.producer;
  j["format_version"] = s.format_version;
  j["plan_version"] = s.plan_version;
  j["targets"] = s.targets;
  j["methods"] = s.methods;
  j["contexts"] = ordered_json::array();
  for (const auto& c : s.contexts) {
    ordered_json cj;
    cj["target"] = c.target;
    cj["method"] = c.method;
    cj["options"] = ordered_json::parse(c.options_json, nullptr, false);
    cj["steps"] = c.steps;
    cj["tensors"] = c.tensors;
    cj["arena_bytes"] = c.arena_bytes;
    cj["scratch_bytes_per_thread"] = c.scratch_bytes;
    cj.update(ShareJson(c.share));
    cj["inputs"] = IoJson(c.inputs);
    cj["outputs"] = IoJson(c.outputs);
    for (size_t i = 0; i < c.output_shapes.size() && i < cj["outputs"].size(); ++i)
      cj["outputs"][i]["symbolic_shape"] = c.output_shapes[i];  // "" where not worked out
    if (!c.requirements.empty()) cj["requirements"] = c.requirements;
    j["contexts"].push_back(cj);
  }
  ordered_json per_target = ordered_json::object(), per_method = ordered_json::object();
  for (const auto& [t, w] : s.per_target) per_target[t] = ShareJson(w);
  for (const auto& [m, w] : s.per_method) per_method[m] = ShareJson(w);
  j["per_target"] = per_target;
  j["per_method"] = per_method;
  j["weight_pool"] = {{"blobs", s.weight_pool.blobs},
                      {"bytes", s.weight_pool.bytes},
                      {"bytes_referenced_by_contexts", s.weight_pool.bytes_referenced_by_contexts},
                      {"bytes_saved_by_sharing", s.weight_pool.bytes_saved_by_sharing}};
  const FileLayout& l = s.layout;
  j["layout"] = {{"header_bytes", l.header_bytes},
                 {"metadata_bytes", l.metadata_bytes},
                 {"metadata_plan_bytes", l.metadata_plan_bytes},
                 {"metadata_other_bytes", l.metadata_other_bytes},
                 {"metadata_padding_bytes", l.metadata_padding_bytes},
                 {"pool_offset", l.pool_offset},
                 {"pool_blob_bytes", l.pool_blob_bytes},
                 {"pool_padding_bytes", l.pool_padding_bytes},
                 {"attachment_bytes", l.attachment_bytes}};
  j["attachments"] = ordered_json::array();
  for (const auto& a : s.attachments)
    j["attachments"].push_back({{"name", a.name}, {"size", a.size}, {"offset", a.offset}, {"checksum", a.checksum}});
  j["file_size"] = s.file_size;
  return j;
}

}  // namespace

std::vector<TargetDesc> ListTargets() {
  const auto runnable = RunnableTargets();  // best first
  std::vector<TargetDesc> out;
  for (const auto& t : KnownTargets()) {
    TargetDesc d;
    d.name = t.name;
    d.description = t.description;
    d.score = t.score;
    d.arch = ArchName(t.arch);
    d.host_can_run = HostCanRun(t.id);
    if (!d.host_can_run) d.why_not = WhyHostCannotRun(DetectHost(), t.id);
    d.auto_choice = !runnable.empty() && runnable.front() == t.id;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<OperatorDesc> ListOperators() {
  std::vector<OperatorDesc> out;
  for (const auto& op : ops::AllOps())
    out.push_back({op.name, op.internal, op.min_inputs, op.max_inputs, op.min_outputs, op.max_outputs});
  return out;
}

// Every byte of the file is accounted for: header + metadata + padding after
// the metadata + the pool's blob bytes + the pool's alignment padding =
// file_size, and metadata = the contexts' plan bytes + the rest (recomputed
// by re-encoding, so the sum also checks that encoding is deterministic).
Result<FileSummary> InspectFile(const std::string& path) {
  FCB_ASSIGN_OR_RETURN(auto loaded, format::LoadFcbFile(path, /*verify_checksums=*/true));
  const format::LoadedFile& f = *loaded;
  const format::FileDesc& d = f.desc();
  FileSummary s;
  s.path = path;
  s.producer = d.producer;
  s.plan_version = d.plan_version;
  s.format_version = f.format_version();
  s.file_size = f.file_size();

  std::vector<std::set<int32_t>> ctx_blobs(d.contexts.size());
  for (size_t c = 0; c < d.contexts.size(); ++c)
    for (const auto& t : d.contexts[c].tensors)
      if (t.storage == format::Storage::kWeight && t.blob >= 0) ctx_blobs[c].insert(t.blob);
  uint64_t meta_rest = 0;
  const std::vector<uint64_t> plan_bytes = format::ContextMetadataBytes(d, &meta_rest);
  uint64_t plan_total = 0;
  for (uint64_t p : plan_bytes) plan_total += p;
  uint64_t pool_bytes = 0, referenced = 0, attachment_bytes = 0;
  // Attachment blobs are never shared with weights (the compiler stores them
  // unshared); the weight pool's numbers leave them out.
  std::set<int32_t> attachment_blobs;
  for (const auto& a : d.attachments) {
    attachment_blobs.insert(a.blob);
    const format::BlobDesc& b = d.blobs[a.blob];
    char hex[40];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(b.hash_hi),
                  static_cast<unsigned long long>(b.hash_lo));
    s.attachments.push_back({a.name, b.size, f.pool_offset() + b.offset, hex});
  }
  for (int32_t id : attachment_blobs) attachment_bytes += d.blobs[id].size;
  uint64_t weight_blobs = 0;
  for (size_t id = 0; id < d.blobs.size(); ++id)
    if (!attachment_blobs.count(static_cast<int32_t>(id))) pool_bytes += d.blobs[id].size, ++weight_blobs;

  for (const auto& c : d.contexts) AddOnce(s.targets, c.target), AddOnce(s.methods, c.method);
  auto specs = [](const format::ContextDesc& ctx, const std::vector<int32_t>& ids) {
    std::vector<TensorSpec> v;
    for (int32_t t : ids)
      if (t >= 0 && static_cast<size_t>(t) < ctx.tensors.size())
        v.push_back({ctx.tensors[t].name, static_cast<DType>(ctx.tensors[t].dtype), ctx.tensors[t].shape, {}, {}});
    return v;
  };
  for (size_t c = 0; c < d.contexts.size(); ++c) {
    const auto& ctx = d.contexts[c];
    std::vector<bool> only(d.contexts.size(), false);
    only[c] = true;
    ContextSummary cs;
    cs.target = ctx.target;
    cs.method = ctx.method;
    cs.options_json = ctx.options.empty() ? "{}" : ctx.options;
    cs.steps = ctx.steps.size();
    cs.tensors = ctx.tensors.size();
    cs.arena_bytes = ctx.arena_bytes;
    cs.scratch_bytes = ctx.scratch_bytes;
    cs.share = ShareOf(d, ctx_blobs, plan_bytes, only);
    cs.inputs = specs(ctx, ctx.inputs);
    // Dims chosen at each run: the range and symbol of each (the metadata
    // checks matched input_symbols to the inputs' dims).
    if (ctx.dynamic() && cs.inputs.size() == ctx.inputs.size()) {
      size_t k = 0;
      for (auto& in : cs.inputs) {
        std::vector<int64_t> lo = in.shape;
        std::vector<std::string> names(in.shape.size());
        bool any = false;
        for (size_t dim = 0; dim < in.shape.size() && k < ctx.input_symbols.size(); ++dim, ++k) {
          const int32_t sym = ctx.input_symbols[k];
          if (sym < 0 || static_cast<size_t>(sym) >= ctx.symbols.size()) continue;
          lo[dim] = ctx.symbols[sym].lo, names[dim] = ctx.symbols[sym].name, any = true;
        }
        if (any) in.min_shape = std::move(lo), in.symbols = std::move(names);
      }
    }
    cs.outputs = specs(ctx, ctx.outputs);
    if (ctx.dynamic()) {
      // A plan that does not check (a load refuses it, naming why) is
      // described without them.
      auto sym = SymbolicPlanOf(f, ctx);
      if (sym.ok()) {
        const ops::SymbolicPlan& p = sym.value();
        for (int32_t t : ctx.outputs) {
          const bool known = t >= 0 && static_cast<size_t>(t) < p.shapes.size() && p.shapes[t];
          cs.output_shapes.push_back(known ? ops::SymShapeText(*p.shapes[t], p.symbols) : "");
        }
        for (const auto& [a, b] : p.requires_equal)
          cs.requirements.push_back(a.ToString(&p.symbols) + " == " + b.ToString(&p.symbols));
      }
    }
    referenced += cs.share.weight_bytes_referenced;
    s.contexts.push_back(std::move(cs));
  }
  for (const auto& t : s.targets) {
    std::vector<bool> in(d.contexts.size());
    for (size_t c = 0; c < d.contexts.size(); ++c) in[c] = d.contexts[c].target == t;
    s.per_target.emplace_back(t, ShareOf(d, ctx_blobs, plan_bytes, in));
  }
  for (const auto& m : s.methods) {
    std::vector<bool> in(d.contexts.size());
    for (size_t c = 0; c < d.contexts.size(); ++c) in[c] = d.contexts[c].method == m;
    s.per_method.emplace_back(m, ShareOf(d, ctx_blobs, plan_bytes, in));
  }
  // A hostile file may point a tensor at an attachment's blob: saturate.
  s.weight_pool = {weight_blobs, pool_bytes, referenced, referenced > pool_bytes ? referenced - pool_bytes : 0};
  const uint64_t pool_region = f.file_size() - f.pool_offset();
  s.layout.header_bytes = format::kHeaderSize;
  s.layout.metadata_bytes = f.meta_bytes();
  s.layout.metadata_plan_bytes = plan_total;
  s.layout.metadata_other_bytes = meta_rest;
  s.layout.metadata_padding_bytes = f.pool_offset() - format::kHeaderSize - f.meta_bytes();
  s.layout.pool_offset = f.pool_offset();
  s.layout.pool_blob_bytes = pool_bytes + attachment_bytes;
  s.layout.attachment_bytes = attachment_bytes;
  s.layout.pool_padding_bytes = pool_region - pool_bytes - attachment_bytes;
  return s;
}

std::string FileSummaryJson(const FileSummary& summary, int indent) {
  // Names from the file may hold any bytes: invalid UTF-8 becomes U+FFFD
  // instead of an exception (control characters JSON escapes itself).
  return SummaryJson(summary).dump(indent < 0 ? -1 : indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fcb
