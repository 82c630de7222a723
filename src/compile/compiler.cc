// The compiler driver: the one code path behind Compile and CompileMethods.
//
//   validate spec -> per method: import, passes (per optimization level and
//   int8-or-not), layout -> per target: lower -> [int8 accuracy] -> one
//   weight pool -> atomic write.
//
// A failure in one method or target does not stop the others; the final error
// lists every failure with its method and target.
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "compile/lower.h"
#include "compile/session.h"
#include "core/target.h"
#include "fcb/fcb.h"
#include "format/fcb_file.h"
#include "compile/onnx_plugin.h"
#include "ops/names.h"
#include "ops/lowering.h"
#include "ops/plan_check.h"
#include "passes/passes.h"

namespace fcb {
namespace {

void Progress(const CompileHooks& h, const std::string& stage, const std::string& method,
              const std::string& target) {
  if (h.progress) h.progress(h.user, stage, method, target);
}

// Input shapes for one method: plain names apply to every method, "METHOD:NAME" to one.
// The same rule for input values.
template <typename T, typename Convert>
void PerMethod(const std::map<std::string, T>& given, const std::string& method, Convert convert,
               std::map<std::string, decltype(convert(std::declval<const T&>()))>* out) {
  for (const auto& [key, v] : given) {
    const auto colon = key.find(':');
    if (colon == std::string::npos) {
      if (!out->count(key)) (*out)[key] = convert(v);
    } else if (key.substr(0, colon) == method) {
      (*out)[key.substr(colon + 1)] = convert(v);
    }
  }
}

ir::ImportOptions ImportOptionsFor(const CompileSpec& spec, const std::string& method) {
  ir::ImportOptions o;
  PerMethod(spec.input_shapes, method, [](const std::vector<InputDim>& d) { return d; }, &o.input_shapes);
  PerMethod(spec.input_values, method, [](const NpyArray& a) -> ir::TensorPtr {
    auto t = std::make_shared<ir::TensorData>();
    t->dtype = static_cast<ir::DType>(a.dtype);  // NumPy codes are ONNX's (fcb/npy.h)
    t->shape = a.shape;
    t->bytes = a.data;
    return t;
  }, &o.input_values);
  o.kv_capacity = spec.kv_capacity;
  return o;
}

// With ranges (`bound`: the method imported at the upper ends, `low` at the
// low ends): a window node whose auto_pad (SAME_UPPER, SAME_LOWER) works its
// padding out from its input's size, with a stride above 1 along a spatial
// dim chosen at each run, pads differently at different sizes (by the size
// modulo the stride); the compiled windows' pads are fixed when compiled, so
// it is refused, naming the node and the ways out. (A unit stride's SAME
// padding is the window's extent less 1 at every size; ConvTranspose's does
// not depend on the size either.)
Status CheckPaddingFollowsSizes(const ir::Graph& bound, const ir::Graph& low) {
  static constexpr std::string_view kOps[] = {"Conv", "MaxPool", "AveragePool", "LpPool", "QLinearConv",
                                              "ConvInteger"};
  std::map<std::string, const ir::Shape*> low_shape;
  for (const auto& v : low.values) low_shape.emplace(v.name, &v.shape);
  for (const ir::Node& n : bound.nodes) {
    if (!n.domain.empty() || std::find(std::begin(kOps), std::end(kOps), n.op_type) == std::end(kOps) ||
        n.inputs.empty() || n.inputs[0] < 0)
      continue;
    const std::string pad = n.GetString("auto_pad", "NOTSET");
    if (pad != "SAME_UPPER" && pad != "SAME_LOWER") continue;
    const ir::Value& x = bound.values[static_cast<size_t>(n.inputs[0])];
    const auto it = low_shape.find(x.name);
    if (it == low_shape.end() || it->second->size() != x.shape.size()) continue;
    const std::vector<int64_t> strides = n.GetInts("strides");
    for (size_t d = 2; d < x.shape.size(); ++d) {
      const int64_t stride = d - 2 < strides.size() ? strides[d - 2] : 1;
      if (stride <= 1 || (*it->second)[d] == x.shape[d]) continue;
      return InvalidArgument("node '" + n.name + "' (" + n.op_type + "): auto_pad " + pad + " with stride " +
                             std::to_string(stride) + " pads its input '" + x.name + "' by its size along dim " +
                             std::to_string(d) + ", which is chosen at each run (" +
                             std::to_string((*it->second)[d]) + ".." + std::to_string(x.shape[d]) +
                             " here), so the padding would change with the size; fcb compiles windows with fixed "
                             "padding: fix that dimension with --input-shape, or export the model with explicit "
                             "pads");
    }
  }
  return Status::Ok();
}

// The graph inputs a com.microsoft.GroupQueryAttention reads as its past
// (inputs 3 and 4): what kv_capacity turns into a static buffer.
std::set<std::string> GqaPastInputs(const ir::Graph& g) {
  std::set<int> inputs(g.inputs.begin(), g.inputs.end());
  std::set<std::string> out;
  for (const auto& n : g.nodes)
    if (n.op_type == "com.microsoft.GroupQueryAttention")
      for (size_t i : {size_t{3}, size_t{4}})
        if (n.inputs.size() > i && n.inputs[i] >= 0 && inputs.count(n.inputs[i]))
          out.insert(g.values[n.inputs[i]].name);
  return out;
}

// The graph inputs a Concat along axis 2 takes first (present = Concat(past,
// new)) that the spec's "state" pairs with an output of the method: the
// growing caches kv_capacity keeps in place (KvAppend).
std::set<std::string> ConcatPastInputs(const ir::Graph& g, const CompileSpec& spec, const std::string& method);

// The output an exporter pairs with cache input `input` (CompileSpec::
// state_auto): past_key_values.N.key -> present.N.key, else past* -> present*.
std::string AutoStateOutput(const std::string& input) {
  static const std::string kPkv = "past_key_values.", kPast = "past";
  if (input.rfind(kPkv, 0) == 0) return "present." + input.substr(kPkv.size());
  if (input.rfind(kPast, 0) == 0) return "present" + input.substr(kPast.size());
  return "";
}

std::set<std::string> ConcatPastInputs(const ir::Graph& g, const CompileSpec& spec, const std::string& method) {
  std::map<std::string, std::string> pairs;
  PerMethod(spec.state, method, [](const std::string& o) { return o; }, &pairs);
  std::set<std::string> outputs;
  for (int v : g.outputs) outputs.insert(g.values[v].name);
  std::set<int> inputs(g.inputs.begin(), g.inputs.end());
  std::set<std::string> out;
  for (const auto& n : g.nodes) {
    if (n.op_type != "Concat" || !n.domain.empty() || n.inputs.size() != 2 || n.inputs[0] < 0 ||
        !inputs.count(n.inputs[0]))
      continue;
    const int64_t axis = n.GetInt("axis", 0);
    if (axis != 2 && axis != -2) continue;
    const std::string& name = g.values[n.inputs[0]].name;
    auto it = pairs.find(name);
    const std::string present = it != pairs.end() ? it->second : spec.state_auto ? AutoStateOutput(name) : "";
    if (!present.empty() && outputs.count(present)) out.insert(name);
  }
  return out;
}

std::string ShapeText(DType d, const std::vector<int64_t>& shape) {
  std::string s = std::string(DTypeName(d)) + " [";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The spec's state pairs for this method (input name -> output name): its
// "state" entries, and with "auto" each cache input whose exporter-named
// output (AutoStateOutput) the method has.
std::map<std::string, std::string> MethodStatePairs(const CompileSpec& spec, const std::string& method,
                                                    const std::vector<std::string>& inputs,
                                                    const std::vector<std::string>& outputs) {
  std::map<std::string, std::string> pairs;
  PerMethod(spec.state, method, [](const std::string& o) { return o; }, &pairs);
  if (spec.state_auto)
    for (const std::string& in : inputs) {
      const std::string out = AutoStateOutput(in);
      if (!out.empty() && !pairs.count(in) && std::find(outputs.begin(), outputs.end(), out) != outputs.end())
        pairs[in] = out;
    }
  return pairs;
}

// The method's state pairs (MethodStatePairs), bound in its plan (ContextDesc::
// state) after checking names, dtypes, shapes and that the output is written
// in place over the input. `*found` is set when a pair was bound.
Status BindState(const CompileSpec& spec, const std::string& method, const std::map<std::string, std::string>& pairs,
                 const std::set<std::string>& kv_inputs, const std::set<std::string>& growing, format::ContextDesc* c,
                 bool* found) {
  auto position = [&](const std::vector<int32_t>& list, const std::string& name) -> int32_t {
    for (size_t i = 0; i < list.size(); ++i)
      if (c->tensors[list[i]].name == name) return static_cast<int32_t>(i);
    return -1;
  };
  auto names = [&](const std::vector<int32_t>& list) {
    std::string out;
    for (int32_t t : list) out += (out.empty() ? "" : ", ") + c->tensors[t].name;
    return out;
  };
  const std::string where = "spec \"state\", method '" + method + "': ";
  for (const auto& [in, out] : pairs) {
    const int32_t i = position(c->inputs, in);
    if (i < 0) return InvalidArgument(where + "no input '" + in + "'; its inputs are: " + names(c->inputs));
    const int32_t o = position(c->outputs, out);
    if (o < 0)
      return InvalidArgument(where + "no output '" + out + "' to carry the next value of '" + in +
                             "'; its outputs are: " + names(c->outputs));
    const auto& ti = c->tensors[c->inputs[i]];
    const auto& to = c->tensors[c->outputs[o]];
    if (kv_inputs.count(in) && ti.dtype == to.dtype && ti.shape.size() == 4 && to.shape.size() == 4 &&
        ti.shape != to.shape)
      return InvalidArgument(where + "'" + out + "' is " + ShapeText(to.dtype, to.shape) + " but kv_capacity " +
                             std::to_string(spec.kv_capacity) + " makes '" + in + "' " +
                             ShapeText(ti.dtype, ti.shape) +
                             ": the sequence a call sees (total_sequence_length, e.g. attention_mask's length) "
                             "reaches " + std::to_string(to.shape[2]) +
                             "; bound it by the capacity in \"input_shapes\" (e.g. attention_mask=1x1.." +
                             std::to_string(spec.kv_capacity) + ") or raise kv_capacity");
    // A growing cache (KvAppend): past [B, kv, P, D] and present [B, kv, P + S, D]
    // over one State buffer of kv_capacity rows; P is chosen at each run.
    const bool grows = growing.count(in) > 0;
    if (grows && (ti.dtype != to.dtype || ti.shape.size() != 4 || to.shape.size() != 4 || ti.shape[0] != to.shape[0] ||
                  ti.shape[1] != to.shape[1] || ti.shape[3] != to.shape[3]))
      return InvalidArgument(where + "'" + out + "' is " + ShapeText(to.dtype, to.shape) + " but '" + in + "' is " +
                             ShapeText(ti.dtype, ti.shape) + "; a growing cache's past and present differ only in "
                             "their rows (dim 2)");
    if (!grows && (ti.dtype != to.dtype || ti.shape != to.shape))
      return InvalidArgument(where + "'" + out + "' is " + ShapeText(to.dtype, to.shape) + " but '" + in + "' is " +
                             ShapeText(ti.dtype, ti.shape) +
                             "; a state's output must have its input's dtype and shape (a static KV buffer: "
                             "GroupQueryAttention with past and present of one capacity); a cache that grows "
                             "(present = Concat(past, new, axis 2)) needs \"kv_capacity\"");
    if (!c->input_symbols.empty()) {
      size_t k = 0;
      for (int32_t j = 0; j < i; ++j) k += c->tensors[c->inputs[j]].shape.size();
      for (size_t d = 0; d < ti.shape.size(); ++d)
        if (c->input_symbols[k + d] >= 0 && !(grows && d == 2))
          return InvalidArgument(where + "'" + in + "' dim " + std::to_string(d) +
                                 " is a range; a state has one shape: give it a fixed size in \"input_shapes\"");
    }
    const format::ContextDesc::StateDesc b{i, o};
    const std::string err = ops::CheckStateBinding(*c, b);
    if (!err.empty()) return Unsupported(where + err);
    c->state.push_back(b);
    *found = true;
  }
  for (const std::string& in : kv_inputs)
    if (!pairs.count(in))
      return InvalidArgument(where + "kv_capacity " + std::to_string(spec.kv_capacity) + " fixes input '" + in +
                             "' (a GroupQueryAttention past) at that capacity, but no state pair binds it: "
                             "add {\"" + in + "\": \"PRESENT_OUTPUT\"} to \"state\" or use \"state\": \"auto\"");
  return Status::Ok();
}

// CompileSpec::outputs for one method: the graph keeps the outputs named for
// it, in the model's order; the others become internal values, which dead-node
// elimination (every optimization level) drops with what only they needed.
// Unchanged when no entry applies to the method.
Status SelectOutputs(const CompileSpec& spec, const std::string& method, ir::Graph* g) {
  std::vector<std::pair<std::string, std::string>> wanted;  // (output name, the entry naming it)
  for (const std::string& entry : spec.outputs) {
    const auto colon = entry.find(':');
    if (colon == std::string::npos) wanted.emplace_back(entry, entry);
    else if (entry.substr(0, colon) == method) wanted.emplace_back(entry.substr(colon + 1), entry);
  }
  if (wanted.empty()) return Status::Ok();
  const std::string where = "spec \"outputs\", method '" + method + "': ";
  auto list = [&](const std::vector<int>& ids) {
    std::string out;
    for (int v : ids) out += (out.empty() ? "" : ", ") + EscapeForDisplay(g->values[v].name);
    return out.empty() ? std::string("(none)") : out;
  };
  std::map<std::string, std::string> chosen;  // output name -> the entry naming it
  for (const auto& [name, entry] : wanted) {
    bool found = false;
    for (int v : g->outputs) found = found || g->values[v].name == name;
    if (!found)
      return InvalidArgument(where + "no output '" + EscapeForDisplay(name) + "' (entry '" + EscapeForDisplay(entry) +
                             "'" + (name == entry ? ", which applies to every method; write METHOD:NAME for one "
                                                    "method" : "") +
                             "); its outputs are: " + list(g->outputs));
    auto [it, fresh] = chosen.emplace(name, entry);
    if (!fresh)
      return InvalidArgument(where + "output '" + EscapeForDisplay(name) + "' is named twice, by '" +
                             EscapeForDisplay(it->second) + "' and '" + EscapeForDisplay(entry) +
                             "'; name each output once");
  }
  // A state pair carries its next value in its output: that output must stay.
  std::map<std::string, std::string> pairs;  // past input -> present output
  PerMethod(spec.state, method, [](const std::string& o) { return o; }, &pairs);
  if (spec.state_auto)
    for (int v : g->inputs) {
      const std::string& in = g->values[v].name;
      const std::string out = AutoStateOutput(in);
      if (out.empty() || pairs.count(in)) continue;
      for (int o : g->outputs)
        if (g->values[o].name == out) pairs[in] = out;
    }
  for (const auto& [in, out] : pairs) {
    bool is_output = false;
    for (int o : g->outputs) is_output = is_output || g->values[o].name == out;
    if (is_output && !chosen.count(out))
      return InvalidArgument(where + "drops output '" + EscapeForDisplay(out) + "', which carries the next value of " +
                             "the state input '" + EscapeForDisplay(in) + "' (\"state\"" +
                             (spec.state_auto ? ": \"auto\"" : "") + "); a state needs its output: add '" +
                             EscapeForDisplay(method + ":" + out) + "' to \"outputs\"");
  }
  std::vector<int> kept;
  for (int v : g->outputs)
    if (chosen.count(g->values[v].name)) kept.push_back(v);
  g->outputs = std::move(kept);
  return Status::Ok();
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

// ------------------------------------------------------- int8 accuracy report

constexpr int kAccuracyInputs = 4;  // seeded input sets per measurement

// Deterministic pseudo-random numbers (SplitMix64), the same on every host.
struct SeededRng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  // Standard normal (Box-Muller).
  double Normal() { return std::sqrt(-2.0 * std::log(Uniform())) * std::cos(6.283185307179586 * Uniform()); }
};

// Input set `sample` for one input: float32/float64 standard-normal values
// seeded by the input's position and the set; every other type zero bytes
// (integer indices 0 and false are valid for every model that takes them).
std::vector<uint8_t> SeededInput(const TensorSpec& t, int input_index, int sample) {
  std::vector<uint8_t> bytes(t.bytes(), 0);
  SeededRng rng{0x1F8B5EEDull + 1000003ull * static_cast<uint64_t>(sample) + static_cast<uint64_t>(input_index)};
  if (t.dtype == DType::kF32) {
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      const float v = static_cast<float>(rng.Normal());
      std::memcpy(&bytes[i], &v, 4);
    }
  } else if (t.dtype == DType::kF64) {
    for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
      const double v = rng.Normal();
      std::memcpy(&bytes[i], &v, 8);
    }
  }
  return bytes;
}

// A private folder under the system's temporary directory, removed with its
// contents on destruction (success or failure).
class ScratchDir {
 public:
  ScratchDir() {
    std::error_code ec;
    std::string base = std::filesystem::temp_directory_path(ec).string();
    if (ec || base.empty()) base = "/tmp";
    std::string templ = base + "/fcb-int8-accuracy-XXXXXX";
    if (mkdtemp(templ.data())) path_ = templ;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Compiles `fp32` and `int8` (two optimized graphs of one method) for
// `target` into a temporary file as the methods "fp32" and "int8", runs both
// on the same seeded inputs and returns ||y_int8 - y_fp32|| / ||y_fp32|| over
// every float32 output of every input set.
Status MeasureInt8(const ir::Graph& fp32, const ir::Graph& int8, TargetId target, const TargetOptions& int8_opts,
                   Int8Accuracy* acc) {
  format::WeightPoolBuilder pool;
  format::FileDesc desc;
  desc.producer = std::string("fcb ") + Version();
  desc.plan_version = ops::kPlanVersion;
  compile::LowerOptions lo;
  lo.target = target;
  lo.options = int8_opts;
  lo.options.precision = ops::PrecisionName(ops::Precision::kFp32);
  FCB_ASSIGN_OR_RETURN(format::ContextDesc c32, compile::LowerGraph(fp32, "fp32", lo, pool));
  lo.options = int8_opts;
  FCB_ASSIGN_OR_RETURN(format::ContextDesc c8, compile::LowerGraph(int8, "int8", lo, pool));
  desc.contexts.push_back(std::move(c32));
  desc.contexts.push_back(std::move(c8));
  ScratchDir dir;
  if (dir.path().empty()) return IoError("cannot create a temporary folder for the int8 accuracy measurement");
  const std::string path = dir.path() + "/accuracy.fcb";
  FCB_RETURN_IF_ERROR(format::WriteFcbFile(std::move(desc), pool, path));
  LoadOptions load;
  load.target = TargetName(target);
  FCB_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, Program::Load(path, load));
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  FCB_ASSIGN_OR_RETURN(std::unique_ptr<Execution> e32, Execution::Create(program, "fp32", threads));
  FCB_ASSIGN_OR_RETURN(std::unique_ptr<Execution> e8, Execution::Create(program, "int8", threads));
  const MethodInfo& info = e32->info();
  double diff2 = 0, ref2 = 0;
  int float_outputs = 0;
  for (const auto& o : info.outputs) float_outputs += o.dtype == DType::kF32;
  for (int sample = 0; sample < kAccuracyInputs; ++sample) {
    for (size_t i = 0; i < info.inputs.size(); ++i) {
      const std::vector<uint8_t> bytes = SeededInput(info.inputs[i], static_cast<int>(i), sample);
      FCB_RETURN_IF_ERROR(e32->SetInput(info.inputs[i].name, bytes.data(), bytes.size()));
      FCB_RETURN_IF_ERROR(e8->SetInput(info.inputs[i].name, bytes.data(), bytes.size()));
    }
    FCB_RETURN_IF_ERROR(e32->Run().Annotate("running the fp32 compile"));
    FCB_RETURN_IF_ERROR(e8->Run().Annotate("running the int8 compile"));
    for (size_t k = 0; k < info.outputs.size(); ++k) {
      if (info.outputs[k].dtype != DType::kF32) continue;
      const size_t n = info.outputs[k].bytes() / 4;
      const float* a = static_cast<const float*>(e8->output_data(k));
      const float* b = static_cast<const float*>(e32->output_data(k));
      for (size_t j = 0; j < n; ++j) {
        const double d = static_cast<double>(a[j]) - b[j];
        diff2 += d * d;
        ref2 += static_cast<double>(b[j]) * b[j];
      }
    }
  }
  acc->inputs = kAccuracyInputs;
  acc->float_outputs = float_outputs;
  if (float_outputs == 0) return Unsupported("the method has no float32 output to compare");
  acc->rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0.0);
  return Status::Ok();
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

  // "METHOD:NAME" in "outputs" names a method being compiled.
  for (const std::string& entry : spec_in.outputs) {
    const auto colon = entry.find(':');
    if (colon == std::string::npos || methods.count(entry.substr(0, colon))) continue;
    std::string names;
    for (const auto& m : methods) names += (names.empty() ? "'" : ", '") + m.first + "'";
    return InvalidArgument("spec \"outputs\": entry '" + EscapeForDisplay(entry) + "' names the method '" +
                           EscapeForDisplay(entry.substr(0, colon)) + "', which is not compiled; the methods are " +
                           names);
  }

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
  // Each target's precision (ValidateSpec refused any other spelling).
  std::vector<ops::Precision> precision;
  for (const TargetOptions& o : opts) precision.push_back(ops::ParsePrecision(o.precision).value_or(ops::Precision::kFp32));

  // The int8 targets' options, by optimization level (one accuracy entry each per method).
  std::map<int, std::vector<size_t>> int8_groups;
  for (size_t i = 0; i < spec.targets.size(); ++i)
    if (precision[i] == ops::Precision::kInt8) int8_groups[opts[i].optimization_level].push_back(i);

  CompileReport report;
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
  bool state_found = false;  // some method bound a state pair
  std::vector<std::string> no_kv_methods;  // with kv_capacity: methods without a GroupQueryAttention past input
  for (const auto& entry : methods) {
    // Named copies: C++20 lambdas (clang 14) cannot capture structured bindings.
    const std::string& method = entry.first;
    const std::string& path = entry.second;
    Progress(hooks, "import", method, "");
    auto imported = importer(path, ImportOptionsFor(spec, method));
    if (imported.ok()) {
      if (Status st = SelectOutputs(spec, method, &imported.value()); !st.ok()) imported = st;
    }
    if (!imported.ok()) {
      failures.push_back("method '" + method + "' (" + path + "): " + imported.status().message());
      note(imported.status().code());
      continue;
    }
    const std::set<std::string> kv_inputs =
        spec.kv_capacity > 0 ? GqaPastInputs(imported.value()) : std::set<std::string>();
    const std::set<std::string> growing =
        spec.kv_capacity > 0 ? ConcatPastInputs(imported.value(), spec, method) : std::set<std::string>();
    if (spec.kv_capacity > 0 && kv_inputs.empty() && growing.empty()) no_kv_methods.push_back(method);
    // One optimized graph per (optimization level, graph precision) in use:
    // the graph passes see fp32 (bf16 is the lowering's business), int8, or
    // int4 with its options (bit 0: int4_head, bit 1: float activations).
    using GraphKey = std::tuple<int, ops::Precision, int>;
    auto graph_key = [&](size_t i) {
      const ops::Precision p = precision[i] == ops::Precision::kBf16 ? ops::Precision::kFp32 : precision[i];
      const bool int4 = p == ops::Precision::kInt4;
      return GraphKey(opts[i].optimization_level, p,
                      (int4 && opts[i].int4_head ? 1 : 0) | (int4 && opts[i].int4_activations == "float" ? 2 : 0));
    };
    // A growing cache (form b): its Concat becomes an in-place append and the
    // attention reading it one step (passes::FuseKvCacheAttention).
    // First, so that OptimizeGraph's own attention fusion (dense K and V)
    // leaves these to it.
    auto optimize_graph = [&](ir::Graph& g, const GraphKey& key) -> Status {
      if (!growing.empty())
        FCB_RETURN_IF_ERROR(passes::FuseKvCacheAttention(g, spec.kv_capacity, growing, false));
      passes::GraphPrecision gp;
      gp.precision = std::get<1>(key);
      gp.int4_head = (std::get<2>(key) & 1) != 0;
      gp.int4_float_activations = (std::get<2>(key) & 2) != 0;
      return passes::OptimizeGraph(g, std::get<0>(key), gp);
    };
    std::map<GraphKey, Result<ir::Graph>> optimized;
    auto optimize = [&](const GraphKey& key) -> const Result<ir::Graph>& {
      auto it = optimized.find(key);
      if (it != optimized.end()) return it->second;
      Progress(hooks, "optimize", method, "");
      ir::Graph g = imported.value();
      Status s = optimize_graph(g, key);
      return optimized.emplace(key, s.ok() ? Result<ir::Graph>(std::move(g)) : Result<ir::Graph>(s)).first->second;
    };
    // With ranges: every value's shape with each symbol at its low end (the
    // method imported and optimized there too), which lowering rules whose
    // choice depends on a size consult (LowerContext::LowShape). Empty when
    // that import fails: choices are then made for the bound alone.
    std::map<GraphKey, std::map<std::string, ir::Shape>> low_shapes;
    std::optional<Result<ir::Graph>> low_import;  // the method imported at the low ends, once
    auto import_low = [&]() -> const Result<ir::Graph>& {
      if (!low_import) {
        ir::ImportOptions o = ImportOptionsFor(spec, method);
        for (auto& [input, dims] : o.input_shapes)
          for (auto& d : dims) d = ir::InputDim(d.lo);
        low_import = importer(path, o);
      }
      return *low_import;
    };
    auto low_shapes_for = [&](const GraphKey& key) -> const std::map<std::string, ir::Shape>* {
      if (auto it = low_shapes.find(key); it != low_shapes.end()) return &it->second;
      std::map<std::string, ir::Shape>& names = low_shapes[key];
      const Result<ir::Graph>& low = import_low();
      if (!low.ok()) return &names;
      ir::Graph g = low.value();
      if (!SelectOutputs(spec, method, &g).ok()) return &names;
      if (!optimize_graph(g, key).ok()) return &names;
      for (const auto& v : g.values) names.emplace(v.name, v.shape);
      return &names;
    };
    if (imported.value().dynamic() && import_low().ok()) {
      if (Status st = CheckPaddingFollowsSizes(imported.value(), import_low().value()); !st.ok()) {
        failures.push_back("method '" + method + "' (" + path + "): " + st.message());
        note(st.code());
        continue;
      }
    }
    for (size_t i = 0; i < spec.targets.size(); ++i) {
      const std::string& target = spec.targets[i];
      const auto& g = optimize(graph_key(i));
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
      if (g.value().dynamic()) lo.low_shapes = low_shapes_for(graph_key(i));
      // The state pairs, by the method's input and output names (one set
      // for every target): the lowering keeps them out of the arena, and
      // BindState binds them.
      if (!spec.state.empty() || spec.state_auto) {
        std::vector<std::string> input_names, output_names;
        for (int v : g.value().inputs) input_names.push_back(g.value().values[v].name);
        for (int v : g.value().outputs) output_names.push_back(g.value().values[v].name);
        lo.state_pairs = MethodStatePairs(spec, method, input_names, output_names);
      }
      auto ctx = compile::LowerGraph(g.value(), method, lo, pool);
      if (!ctx.ok()) {
        failures.push_back("target '" + target + "', method '" + method + "': " + ctx.status().message());
        note(ctx.status().code());
        continue;
      }
      if (!spec.state.empty() || spec.state_auto) {
        Status st = BindState(spec, method, lo.state_pairs, kv_inputs, growing, &ctx.value(), &state_found);
        if (!st.ok()) {
          failures.push_back("target '" + target + "', method '" + method + "': " + st.message());
          note(st.code());
          continue;
        }
      }
      desc.contexts.push_back(std::move(ctx).value());
    }
    // What int8 costs this method: measured only when everything so far compiled.
    if (!failures.empty()) continue;
    for (const auto& [level, members] : int8_groups) {
      Int8Accuracy acc;
      acc.method = method;
      std::set<TargetId> int8_targets;
      for (size_t i : members) {
        acc.int8_targets.push_back(spec.targets[i]);
        int8_targets.insert(*TargetFromName(spec.targets[i]));
      }
      // The best target this host runs among the int8 ones (RunnableTargets
      // is best first), else the host's best.
      const std::vector<TargetId> runnable = RunnableTargets();
      std::optional<TargetId> best;
      for (TargetId t : runnable)
        if (int8_targets.count(t)) {
          best = t;
          break;
        }
      if (!best) {
        acc.on_int8_target = false;
        if (!runnable.empty()) best = runnable.front();
      }
      acc.rel_l2 = NAN;
      Status s = Status::Ok();
      if (!best) {
        s = Unavailable("this host runs no target");
      } else {
        acc.target = TargetName(*best);
        Progress(hooks, "measure int8 accuracy", method, acc.target);
        const auto& g8 = optimize(GraphKey(level, ops::Precision::kInt8, 0));
        const auto& g32 = optimize(GraphKey(level, ops::Precision::kFp32, 0));
        if (!g8.ok()) s = g8.status();
        else if (!g32.ok()) s = Status(g32.status()).Annotate("the fp32 reference");
        else s = MeasureInt8(g32.value(), g8.value(), *best, opts[members.front()], &acc);
      }
      if (!s.ok()) {
        acc.rel_l2 = NAN;
        acc.error = s.message();
        report.warnings.push_back("could not measure the int8 accuracy of method '" + method + "'" +
                                  (acc.target.empty() ? "" : " on " + acc.target) + ": " + s.message());
      }
      report.int8_accuracy.push_back(std::move(acc));
    }
  }
  if (spec.kv_capacity > 0 && no_kv_methods.size() == methods.size()) {
    std::string names;
    for (const auto& m : no_kv_methods) names += (names.empty() ? "'" : ", '") + m + "'";
    return InvalidArgument("spec \"kv_capacity\": " + std::to_string(spec.kv_capacity) + ": no method (" + names +
                           ") has a com.microsoft.GroupQueryAttention whose past_key/past_value is a graph input, "
                           "nor a past input concatenated along axis 2 into a present output that \"state\" pairs "
                           "with it, which is what kv_capacity turns into a state buffer; leave kv_capacity out (a model whose "
                           "past and present already share one shape needs only \"state\")");
  }
  if (!failures.empty()) {
    std::string msg = failures.size() == 1 ? "compilation failed: " : "compilation failed in " +
                                                                           std::to_string(failures.size()) + " places:";
    if (failures.size() == 1) return Status(failure_code, msg + failures[0]);
    for (const auto& f : failures) msg += "\n  - " + f;
    return Status(failure_code, msg);
  }
  if (spec.state_auto && !state_found)
    return InvalidArgument("spec \"state\": \"auto\" found no cache inputs to pair: no method has an input "
                           "past_key_values.N.key/.value or past* with a matching present.N.key/.value or present* "
                           "output; name the pairs instead, {\"PAST_INPUT\": \"PRESENT_OUTPUT\"}");
  // Methods of one target sharing a state (by its input's name) give it one
  // dtype and shape: a State holds one buffer for it.
  for (const auto& a : desc.contexts)
    for (const auto& b : desc.contexts) {
      if (&a == &b || a.target != b.target) continue;
      for (const auto& sa : a.state)
        for (const auto& sb : b.state) {
          const auto& ta = a.tensors[a.inputs[sa.input]];
          const auto& tb = b.tensors[b.inputs[sb.input]];
          if (ta.name == tb.name && (ta.dtype != tb.dtype || ta.shape != tb.shape))
            return InvalidArgument("spec \"state\": '" + ta.name + "' is " + ShapeText(ta.dtype, ta.shape) +
                                   " in method '" + a.method + "' but " + ShapeText(tb.dtype, tb.shape) +
                                   " in method '" + b.method + "'; methods sharing a state give it one shape");
        }
    }
  // Attachments are pool blobs of their own (never merged with a weight or
  // with each other, so inspect can tell them apart), in name order.
  for (const auto& [name, bytes] : spec.attachments)
    desc.attachments.push_back({name, pool.AddUnshared(bytes.data(), bytes.size())});
  Progress(hooks, "write", "", "");
  // Version 8 only where a method has ranges: fixed-shape files stay readable by runtimes of version 7.
  // and version 9 only where a method has state.
  desc.plan_version = ops::kPlanVersionFixedShapes;
  for (const auto& c : desc.contexts)
    if (c.dynamic()) desc.plan_version = ops::kPlanVersionSymbols;
  for (const auto& c : desc.contexts)
    if (!c.state.empty()) desc.plan_version = ops::kPlanVersion;
  FCB_RETURN_IF_ERROR(format::WriteFcbFile(desc, pool, out_path));
  std::error_code size_error;
  report.file_size = std::filesystem::file_size(out_path, size_error);
  if (size_error) return IoError("cannot read the size of the written '" + out_path + "': " + size_error.message());
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
