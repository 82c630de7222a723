// The compiler driver: the one code path behind Compile and CompileMethods.
//
//   validate spec -> per method: import, passes (per optimization level),
//   layout -> per target: lower -> one weight pool -> atomic write.
//
// A failure in one method or target does not stop the others; the final error
// lists every failure with its method and target.
#include <map>
#include <set>

#include "compile/lower.h"
#include "compile/session.h"
#include "core/target.h"
#include "fcb/fcb.h"
#include "format/fcb_file.h"
#include "compile/onnx_plugin.h"
#include "ops/names.h"
#include "passes/fuse_residual.h"
#include "passes/layout.h"
#include "passes/passes.h"

namespace fcb {
namespace {

void Progress(const CompileHooks& h, const std::string& stage, const std::string& method,
              const std::string& target) {
  if (h.progress) h.progress(h.user, stage, method, target);
}

// Input shapes for one method: plain names apply to every method, "METHOD:NAME" to one.
ir::ImportOptions ImportOptionsFor(const CompileSpec& spec, const std::string& method) {
  ir::ImportOptions o;
  for (const auto& [key, dims] : spec.input_shapes) {
    const auto colon = key.find(':');
    if (colon == std::string::npos) {
      if (!o.input_shapes.count(key)) o.input_shapes[key] = dims;
    } else if (key.substr(0, colon) == method) {
      o.input_shapes[key.substr(colon + 1)] = dims;
    }
  }
  return o;
}

// The weight bytes each target would need on its own, to report what a mix of
// targets or options costs in sharing.
void WarnAboutSharing(const CompileSpec& spec, const std::vector<TargetOptions>& opts,
                      const format::FileDesc& desc, CompileReport* report) {
  if (!spec.weight_sharing) return;
  std::map<std::string, std::set<int32_t>> blobs_of_target;
  for (const auto& c : desc.contexts)
    for (const auto& t : c.tensors)
      if (t.storage == format::Storage::kWeight) blobs_of_target[c.target].insert(t.blob);
  std::set<int32_t> all;
  uint64_t max_one = 0;
  for (const auto& [target, blobs] : blobs_of_target) {
    uint64_t bytes = 0;
    for (int32_t b : blobs) bytes += desc.blobs[b].size, all.insert(b);
    max_one = std::max(max_one, bytes);
  }
  uint64_t total = 0;
  for (int32_t b : all) total += desc.blobs[b].size;
  if (blobs_of_target.size() > 1 && total > max_one + max_one / 100) {
    std::string which;
    for (size_t i = 0; i < opts.size(); ++i)
      which += (which.empty() ? "" : ", ") + spec.targets[i] + " (" + compile::OptionsToJson(opts[i]) + ")";
    report->warnings.push_back("weight sharing is partly defeated by the mix of targets/options [" + which +
                               "]: the weight pool holds " + std::to_string(total) + " bytes where one target needs " +
                               std::to_string(max_one) + "; the mix costs " + std::to_string(total - max_one) +
                               " extra bytes");
  }
}

}  // namespace

namespace {

Result<CompileReport> CompileMethodsImpl(const std::map<std::string, std::string>& methods,
                                         const CompileSpec& spec_in, const std::string& out_path,
                                         const CompileHooks& hooks) {
  FCB_RETURN_IF_ERROR(ValidateSpec(spec_in));
  if (methods.empty()) return InvalidArgument("nothing to compile: the method map is empty; give at least one method name and its ONNX model path");
  if (out_path.empty()) return InvalidArgument("no output path given for the .fcb file");
  for (const auto& [name, path] : methods)
    if (name.empty() || path.empty())
      return InvalidArgument("every method needs a non-empty name and ONNX model path");

  FCB_ASSIGN_OR_RETURN(ir::OnnxImportFn importer, compile::OnnxImporter());

  // Expand "all" and pair each target with its options.
  CompileSpec spec = spec_in;
  std::vector<TargetOptions> opts = spec.target_options;
  if (spec.targets.size() == 1 && spec.targets[0] == "all") {
    const TargetOptions o = opts.empty() ? TargetOptions{} : opts[0];
    spec.targets.clear();
    for (const auto& t : KnownTargets()) spec.targets.push_back(t.name);
    opts.assign(spec.targets.size(), o);
  }
  if (opts.empty()) opts.assign(spec.targets.size(), TargetOptions{});

  std::vector<std::string> failures;
  // The failures' common status code (e.g. Unsupported), or InvalidArgument when they differ.
  StatusCode failure_code = StatusCode::kOk;
  auto note = [&](StatusCode c) {
    failure_code = failure_code == StatusCode::kOk || failure_code == c ? c : StatusCode::kInvalidArgument;
  };
  format::FileDesc desc;
  desc.producer = std::string("fcb ") + Version();
  desc.plan_version = ops::kPlanVersion;
  format::WeightPoolBuilder pool;
  for (const auto& [method, path] : methods) {
    Progress(hooks, "import", method, "");
    auto imported = importer(path, ImportOptionsFor(spec, method));
    if (!imported.ok()) {
      failures.push_back("method '" + method + "' (" + path + "): " + imported.status().message());
      note(imported.status().code());
      continue;
    }
    // One optimized graph per optimization level in use.
    std::map<int, Result<ir::Graph>> optimized;
    for (size_t i = 0; i < spec.targets.size(); ++i) {
      const int level = opts[i].optimization_level;
      if (!optimized.count(level)) {
        Progress(hooks, "optimize", method, "");
        ir::Graph g = imported.value();
        Status s = passes::RunDefaultPasses(g, level);
        if (s.ok()) s = passes::AssignLayouts(g);
        if (s.ok() && level >= 1) s = passes::FuseResidualAdd(g);
        if (s.ok()) s = g.Validate();
        optimized.emplace(level, s.ok() ? Result<ir::Graph>(std::move(g)) : Result<ir::Graph>(s));
      }
      const std::string& target = spec.targets[i];
      const auto& g = optimized.at(level);
      if (!g.ok()) {
        failures.push_back("target '" + target + "', method '" + method + "': " + g.status().message());
        note(g.status().code());
        continue;
      }
      Progress(hooks, "lower", method, target);
      compile::LowerOptions lo;
      lo.target = *TargetFromName(target);
      lo.options = opts[i];
      lo.weight_sharing = spec.weight_sharing;
      auto ctx = compile::LowerGraph(g.value(), method, lo, pool);
      if (!ctx.ok()) {
        failures.push_back("target '" + target + "', method '" + method + "': " + ctx.status().message());
        note(ctx.status().code());
        continue;
      }
      desc.contexts.push_back(std::move(ctx).value());
    }
  }
  if (!failures.empty()) {
    std::string msg = failures.size() == 1 ? "compilation failed: " : "compilation failed in " +
                                                                           std::to_string(failures.size()) + " places:";
    if (failures.size() == 1) return Status(failure_code, msg + failures[0]);
    for (const auto& f : failures) msg += "\n  - " + f;
    return Status(failure_code, msg);
  }
  Progress(hooks, "write", "", "");
  CompileReport report;
  FCB_RETURN_IF_ERROR(format::WriteFcbFile(desc, pool, out_path));
  // Blob sizes are filled in by the writer; recompute from the pool for the warning.
  desc.blobs.resize(pool.size());
  for (size_t b = 0; b < pool.size(); ++b) desc.blobs[b].size = pool.bytes(static_cast<int32_t>(b)).size();
  WarnAboutSharing(spec, opts, desc, &report);
  return report;
}

}  // namespace

Result<CompileReport> CompileMethods(const std::map<std::string, std::string>& methods,
                                     const CompileSpec& spec, const std::string& out_path,
                                     const CompileHooks& hooks) {
  compile::CompileSession session(out_path);
  try {
    return CompileMethodsImpl(methods, spec, out_path, hooks);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while compiling '" + out_path + "'");
  } catch (const std::exception& e) {
    return Internal(std::string("unexpected exception while compiling: ") + e.what());
  }
}

Result<CompileReport> Compile(const std::string& model_path, const CompileSpec& spec,
                              const std::string& out_path, const CompileHooks& hooks) {
  return CompileMethods({{"main", model_path}}, spec, out_path, hooks);
}

const char* Version() { return FCB_VERSION; }

}  // namespace fcb
