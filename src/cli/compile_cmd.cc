// `fcb compile`: flags and an optional --spec file combine as documented in
// the README: the spec is read first; --target / --target-options / --keep-output given on the
// command line replace the spec's lists; --input-shape entries are added to
// (and override) the spec's; --no-weight-sharing turns sharing off.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/cli.h"

namespace fcb::cli {
namespace {

void ShowProgress(void* user, const std::string& stage, const std::string& method, const std::string& target) {
  std::string line = "[fcb] " + stage;
  if (!method.empty()) line += " " + Shown(method);
  if (!target.empty()) line += " for " + target;
  std::cerr << "\r\033[K" << line << std::flush;
}

// The library names an input shape as the spec entry that sets it,
// "input_shapes['NAME'] = [1, [1, 512], 224]" (a range is [lo, hi]); on the
// command line that is the flag --input-shape NAME=1x1..512x224, and a bare
// input_shapes['NAME'] is --input-shape NAME (input_values['NAME'] is
// --input-value NAME).
Status FlagWords(const Status& s) {
  std::string m = s.message();
  const std::string key = "input_shapes['";
  size_t at = 0;
  while ((at = m.find(key, at)) != std::string::npos) {
    const size_t name_end = m.find("']", at + key.size());
    if (name_end == std::string::npos) break;
    std::string flag = "--input-shape " + m.substr(at + key.size(), name_end - at - key.size());
    size_t end = name_end + 2;
    if (m.compare(end, 4, " = [") == 0) {
      // The dims up to the matching ']': ", " joins dims at depth 1 and a range's ends at depth 2.
      std::string flag_dims;
      int depth = 0;
      size_t i = end + 3;
      for (; i < m.size(); ++i) {
        const char c = m[i];
        if (c == '[') {
          ++depth;
        } else if (c == ']') {
          if (--depth == 0) break;
        } else if (c == ',') {
          flag_dims += depth == 1 ? "x" : "..";
        } else if (c != ' ') {
          flag_dims += c;
        }
      }
      if (i == m.size()) break;
      flag += "=" + flag_dims;
      end = i + 1;
    }
    m.replace(at, end - at, flag);
    at += flag.size();
  }
  const std::string vkey = "input_values['";
  for (at = 0; (at = m.find(vkey, at)) != std::string::npos;) {
    const size_t name_end = m.find("']", at + vkey.size());
    if (name_end == std::string::npos) break;
    const std::string flag = "--input-value " + m.substr(at + vkey.size(), name_end - at - vkey.size());
    m.replace(at, name_end + 2 - at, flag);
    at += flag.size();
  }
  for (at = 0; (at = m.find("input_values names", at)) != std::string::npos;) m.replace(at, 18, "--input-value names");
  for (at = 0; (at = m.find("in input_shapes", at)) != std::string::npos;) m.replace(at, 15, "with --input-shape");
  for (at = 0; (at = m.find("input_shapes names", at)) != std::string::npos;) m.replace(at, 18, "--input-shape names");
  return Status(s.code(), m);
}

}  // namespace

int CmdCompile(const CompileArgs& a) {
  CompileSpec spec;
  if (!a.spec_path.empty()) {
    std::ifstream f(a.spec_path);
    if (!f) return Fail("cannot read spec file '" + a.spec_path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    auto parsed = ParseSpecJson(ss.str());
    if (!parsed.ok()) return Fail(parsed.TakeStatus().Annotate("spec '" + a.spec_path + "'"));
    spec = parsed.value();
  }
  if (!a.targets.empty()) spec.targets = a.targets;
  if (!a.target_options.empty()) {
    spec.target_options.clear();
    for (size_t i = 0; i < a.target_options.size(); ++i) {
      // Keys and types now; the values are checked by ValidateSpec below, once
      // each object is paired with its target, so errors name that target.
      auto one = ParseTargetOptionsJson(a.target_options[i]);
      if (!one.ok())
        return Fail(one.TakeStatus().Annotate("--target-options #" + std::to_string(i + 1) + " '" + a.target_options[i] + "'"));
      spec.target_options.push_back(one.value());
    }
  } else if (!a.targets.empty() && !spec.target_options.empty() && spec.target_options.size() != a.targets.size()) {
    spec.target_options.clear();  // the spec's options belonged to the spec's targets
  }
  if (spec.targets.empty()) spec.targets = {"all"};
  // --precision / --int4-head: set in every target's options (made where none were given).
  if (!a.precision.empty() || a.int4_head || !a.int4_activations.empty()) {
    if (spec.target_options.empty()) spec.target_options.assign(spec.targets.size(), TargetOptions{});
    for (TargetOptions& o : spec.target_options) {
      if (!a.precision.empty()) o.precision = a.precision;
      if (a.int4_head) o.int4_head = true;
      if (!a.int4_activations.empty()) o.int4_activations = a.int4_activations;
    }
  }
  for (const auto& s : a.input_shapes) {
    auto kv = SplitAssign(s, "--input-shape");
    if (!kv.ok()) return Fail(kv.status());
    auto dims = ParseDims(kv.value().second, "--input-shape");
    if (!dims.ok()) return Fail(dims.status());
    spec.input_shapes[kv.value().first] = dims.value();
  }
  for (const auto& s : a.input_values) {
    auto kv = SplitAssign(s, "--input-value");
    if (!kv.ok()) return Fail(kv.status());
    auto value = ReadNpy(kv.value().second);
    if (!value.ok()) return Fail(value.TakeStatus().Annotate("--input-value " + kv.value().first));
    spec.input_values[kv.value().first] = std::move(value.value());
  }
  // --attach entries are added to (and override) the spec's attachments.
  std::set<std::string> attached;
  for (const auto& s : a.attachments) {
    auto kv = SplitAssign(s, "--attach");
    if (!kv.ok()) return Fail(kv.status());
    const auto& [name, file] = kv.value();
    if (!attached.insert(name).second)
      return Fail("attachment '" + Shown(name) + "' is given twice with --attach; name each attachment once", 2);
    auto bytes = ReadAttachmentFile(name, file);
    if (!bytes.ok()) return Fail(bytes.TakeStatus().Annotate("--attach " + Shown(name)));
    spec.attachments[name] = std::move(bytes).value();
  }
  if (a.no_weight_sharing) spec.weight_sharing = false;
  // --state auto, or [METHOD:]PAST=PRESENT pairs added to the spec's.
  for (const auto& s : a.state) {
    if (s == "auto") {
      spec.state_auto = true;
      continue;
    }
    auto kv = SplitAssign(s, "--state");
    if (!kv.ok()) return Fail(kv.status());
    spec.state[kv.value().first] = kv.value().second;
  }
  if (a.kv_capacity >= 0) spec.kv_capacity = a.kv_capacity;
  // --keep-output entries replace the spec's "outputs" (as --target replaces "targets").
  if (!a.keep_outputs.empty()) spec.outputs = a.keep_outputs;
  if (Status s = ValidateSpec(spec); !s.ok()) return Fail(s);

  std::map<std::string, std::string> methods;
  if (!a.model.empty()) methods["main"] = a.model;
  for (const auto& m : a.methods) {
    auto kv = SplitAssign(m, "--method");
    if (!kv.ok()) return Fail(kv.status());
    if (methods.count(kv.value().first)) return Fail("method '" + kv.value().first + "' is given twice; name each method once", 2);
    methods[kv.value().first] = kv.value().second;
  }
  if (methods.empty()) return Fail("no model given: fcb compile MODEL.onnx -o OUT.fcb, or --method NAME=MODEL.onnx", 2);

  CompileHooks hooks;
  const bool tty = isatty(STDERR_FILENO);
  if (tty) hooks.progress = ShowProgress;
  auto report = CompileMethods(methods, spec, a.output, hooks);
  if (tty) std::cerr << "\r\033[K" << std::flush;
  if (!report.ok()) return Fail(FlagWords(report.status()));
  for (const auto& w : report.value().warnings) Warn(w);
  // What precision int8 costs, one line per method (a failed measurement is a warning above).
  for (const auto& acc : report.value().int8_accuracy) {
    if (!acc.error.empty()) continue;
    char num[32];
    std::snprintf(num, sizeof num, "%.1e", acc.rel_l2);
    std::string line = "int8 accuracy: method " + acc.method + ", target " + acc.target + ": rel L2 vs fp32 = " +
                       num + " on " + std::to_string(acc.inputs) + " seeded inputs";
    if (!acc.on_int8_target)
      line += " (this host runs none of the int8 targets; measured on its best target compiled with precision int8)";
    else if (acc.int8_targets.size() > 1)
      line += " (stands for all " + std::to_string(acc.int8_targets.size()) + " int8 targets)";
    std::cout << EscapeForDisplay(line) << "\n";
  }
  return 0;
}

}  // namespace fcb::cli
