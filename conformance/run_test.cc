// One node test: classify, compile for every target, run on each runnable
// target, compare with the expected outputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "conformance/conformance.h"
#include "core/half.h"
#include "core/target.h"
#include "fcb/fcb.h"
#include "import/tensor_proto.h"
#include "ops/op.h"

namespace fcb::conformance {
namespace fs = std::filesystem;
namespace {

bool ReadFile(const fs::path& p, std::string* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return !f.bad();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Clip(const std::string& s, size_t n = 400) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

// Drops the file paths the compiler puts around its messages: the test name
// already says which model it was.
std::string Tidy(std::string s) {
  static const std::regex kPaths(R"((method '[^']*' \([^)]*\): )|(model '[^']*': ))");
  return std::regex_replace(s, kPaths, "");
}

struct DataSet {
  std::vector<std::shared_ptr<ir::TensorData>> inputs, outputs;
};

// Reads input_<k>.pb / output_<k>.pb of one data set folder. `declared` holds
// the model's element type of each input, then of each output.
Status LoadDataSet(const fs::path& dir, size_t n_in, size_t n_out, const std::vector<int32_t>& declared,
                   DataSet* ds) {
  for (int pass = 0; pass < 2; ++pass) {
    const size_t n = pass == 0 ? n_in : n_out;
    for (size_t k = 0; k < n; ++k) {
      const fs::path p = dir / ((pass == 0 ? "input_" : "output_") + std::to_string(k) + ".pb");
      std::string bytes;
      if (!ReadFile(p, &bytes)) return NotFound("missing " + p.string());
      onnx::TensorProto t;
      if (!t.ParseFromString(bytes)) return CorruptFile("cannot parse " + p.string());
      auto data = import::TensorFromProto(t, dir.string(), p.filename().string());
      if (!data.ok()) return data.TakeStatus();
      // ONNX 1.12's generator writes bfloat16 tensors as their uint16 bit
      // patterns (NumPy has no bfloat16); the model says what they are.
      const size_t idx = pass == 0 ? k : n_in + k;
      if (idx < declared.size() && declared[idx] == onnx::TensorProto::BFLOAT16 &&
          data.value()->dtype == ir::DType::kU16)
        data.value()->dtype = ir::DType::kBF16;
      (pass == 0 ? ds->inputs : ds->outputs).push_back(std::move(data).value());
    }
  }
  return Status::Ok();
}

template <typename T>
bool CompareFloat(const T* got, const T* want, int64_t n, double rtol, double atol,
                  std::string* why) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::ostringstream s;
      s << "element " << i << ": got " << g << ", expected " << w;
      *why = s.str();
      return false;
    }
  }
  return true;
}

// Exact comparison for integers and bools (bools: any nonzero byte is true).
bool CompareExact(const ir::TensorData& want, const uint8_t* got, std::string* why) {
  const int64_t n = want.numel();
  for (int64_t i = 0; i < n; ++i) {
    bool eq;
    if (want.dtype == ir::DType::kBool) {
      eq = (got[i] != 0) == (want.bytes[i] != 0);
    } else {
      const size_t es = ir::DTypeSize(want.dtype);
      eq = std::memcmp(got + i * es, want.bytes.data() + i * es, es) == 0;
    }
    if (!eq) {
      ir::TensorData g;
      g.dtype = want.dtype;
      g.shape = {n};
      g.bytes.assign(got, got + n * ir::DTypeSize(want.dtype));
      std::ostringstream s;
      s << "element " << i << ": got " << g.GetInt(i) << ", expected " << want.GetInt(i);
      *why = s.str();
      return false;
    }
  }
  return true;
}

bool CompareOutput(const TensorSpec& spec, const void* got, const ir::TensorData& want,
                   const Options& opt, std::string* why) {
  if (static_cast<int32_t>(spec.dtype) != static_cast<int32_t>(want.dtype)) {
    *why = std::string("dtype ") + DTypeName(spec.dtype) + ", expected " + ir::DTypeName(want.dtype);
    return false;
  }
  if (spec.shape != want.shape) {
    *why = "shape " + ir::ShapeToString(spec.shape) + ", expected " + ir::ShapeToString(want.shape);
    return false;
  }
  const int64_t n = want.numel();
  if (want.dtype == ir::DType::kF16 || want.dtype == ir::DType::kBF16) {
    // Compared as float32 values. The 1.12 data make float32 -> bfloat16 by
    // truncation, fcb rounds to nearest even (as IEEE and later ONNX data do),
    // so bfloat16 results may differ by one unit in the last place (2^-7 relative).
    const bool bf = want.dtype == ir::DType::kBF16;
    std::vector<float> g(n), w(n);
    const auto* gp = static_cast<const uint16_t*>(got);
    const auto* wp = want.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      g[i] = bf ? BFloat16ToFloat(gp[i]) : HalfToFloat(gp[i]);
      w[i] = bf ? BFloat16ToFloat(wp[i]) : HalfToFloat(wp[i]);
    }
    return CompareFloat(g.data(), w.data(), n, bf ? std::max(opt.rtol, 1.0 / 128) : opt.rtol, opt.atol,
                        why);
  }
  if (want.dtype == ir::DType::kF32)
    return CompareFloat(static_cast<const float*>(got), want.data<float>(), n, opt.rtol, opt.atol, why);
  if (want.dtype == ir::DType::kF64)
    return CompareFloat(static_cast<const double*>(got), want.data<double>(), n, opt.rtol, opt.atol,
                        why);
  return CompareExact(want, static_cast<const uint8_t*>(got), why);
}

// Runs one data set on a loaded program; "" on success, else what failed.
std::string RunDataSet(const std::shared_ptr<const Program>& prog, const std::vector<std::string>& in_names,
                       const DataSet& ds, const Options& opt, bool* mismatch) {
  auto method = prog->default_method();
  if (!method.ok()) return method.status().ToString();
  auto ex = Execution::Create(prog, method.value(), 1);
  if (!ex.ok()) return "creating the execution: " + ex.status().ToString();
  Execution& e = *ex.value();
  for (size_t k = 0; k < in_names.size(); ++k) {
    const auto& t = *ds.inputs[k];
    Status s = e.SetInput(in_names[k], t.bytes.data(), t.bytes.size());
    if (!s.ok()) return "input '" + in_names[k] + "': " + s.ToString();
  }
  Status s = e.Run();
  if (!s.ok()) return "run: " + s.ToString();
  const auto& outs = e.info().outputs;
  if (outs.size() != ds.outputs.size())
    return "program has " + std::to_string(outs.size()) + " outputs, expected " +
           std::to_string(ds.outputs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    std::string why;
    if (!CompareOutput(outs[k], e.output_data(k), *ds.outputs[k], opt, &why)) {
      *mismatch = true;
      return "output '" + outs[k].name + "' " + why;
    }
  }
  return "";
}


// Writes `model` with runtime inputs [first, n) turned into initializers
// holding data set `sd`'s values.
Status BakeInputs(const onnx::ModelProto& model, const std::vector<std::string>& in_names, size_t first,
                  const fs::path& sd, const fs::path& out) {
  onnx::ModelProto m = model;
  auto* g = m.mutable_graph();
  for (size_t k = first; k < in_names.size(); ++k) {
    std::string bytes;
    const fs::path p = sd / ("input_" + std::to_string(k) + ".pb");
    onnx::TensorProto t;
    if (!ReadFile(p, &bytes) || !t.ParseFromString(bytes)) return NotFound("cannot read " + p.string());
    t.set_name(in_names[k]);
    for (int i = 0; i < g->input_size(); ++i)  // bfloat16 data stored as uint16 (see LoadDataSet)
      if (g->input(i).name() == in_names[k] &&
          g->input(i).type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16 &&
          t.data_type() == onnx::TensorProto::UINT16)
        t.set_data_type(onnx::TensorProto::BFLOAT16);
    *g->add_initializer() = t;
    for (int i = 0; i < g->input_size(); ++i)
      if (g->input(i).name() == in_names[k]) {
        g->mutable_input()->DeleteSubrange(i, 1);
        break;
      }
  }
  std::ofstream f(out, std::ios::binary);
  if (!f || !m.SerializeToOstream(&f)) return IoError("cannot write " + out.string());
  return Status::Ok();
}

struct RunOutcome {
  int mode = 0;
  bool compile_failed = false;
  bool refused = false;       // compile failed with Unsupported
  bool wrong_result = false;  // the first failure is a mismatch, not an error
  std::string failure;
  std::map<std::string, bool> target_pass;
};

// Compiles (mode 0: once per distinct input shapes; else once per data set,
// with inputs baked from `mode` - 1 on) and runs every data set.
RunOutcome RunSets(const std::string& name, const fs::path& plain_model, const onnx::ModelProto& model,
                   const std::vector<std::string>& in_names, const std::vector<bool>& needs_shape,
                   const std::vector<fs::path>& set_dirs,
                   const std::vector<DataSet>& sets, int mode, const Options& opt) {
  RunOutcome o;
  o.mode = mode;
  const size_t first_baked = mode == 0 ? in_names.size() : mode == 1 ? 1 : 0;
  const fs::path fcb_path = fs::path(opt.tmp_dir) / (name + ".fcb");
  const fs::path baked = fs::path(opt.tmp_dir) / (name + ".onnx");
  std::map<std::string, std::vector<int64_t>> compiled_shapes;
  std::vector<std::shared_ptr<const Program>> programs;
  std::vector<std::string> program_targets;
  for (const auto& t : opt.targets) o.target_pass[t] = true;
  auto fail_all = [&](std::string why) {
    for (auto& [t, ok] : o.target_pass) ok = false;
    if (o.failure.empty()) o.failure = std::move(why);
  };
  for (size_t si = 0; si < sets.size(); ++si) {
    const DataSet& ds = sets[si];
    std::map<std::string, std::vector<int64_t>> shapes;
    for (size_t k = 0; k < first_baked; ++k)
      if (needs_shape[k]) shapes[in_names[k]] = ds.inputs[k]->shape;
    if (mode != 0 || programs.empty() || shapes != compiled_shapes) {
      programs.clear();
      program_targets.clear();
      std::string model_path = plain_model.string();
      if (mode != 0) {
        Status s = BakeInputs(model, in_names, first_baked, set_dirs[si], baked);
        if (!s.ok()) {
          fail_all("baking inputs: " + s.ToString());
          return o;
        }
        model_path = baked.string();
      }
      CompileSpec spec;
      spec.targets = opt.targets;
      spec.input_shapes = shapes;
      auto c = Compile(model_path, spec, fcb_path.string());
      std::error_code ec;
      fs::remove(baked, ec);
      if (!c.ok()) {
        fs::remove(fcb_path, ec);
        o.compile_failed = true;
        o.refused = c.status().code() == StatusCode::kUnsupported;
        fail_all("compile: " + c.status().ToString());
        return o;
      }
      compiled_shapes = shapes;
      for (const auto& t : opt.targets) {
        auto id = TargetFromName(t);
        if (!id || !HostCanRun(*id)) {
          o.target_pass.erase(t);
          continue;
        }
        LoadOptions lo;
        lo.target = t;
        auto p = Program::Load(fcb_path.string(), lo);
        if (!p.ok()) {
          o.target_pass[t] = false;
          if (o.failure.empty()) o.failure = t + ": load: " + p.status().ToString();
          continue;
        }
        programs.push_back(std::move(p).value());
        program_targets.push_back(t);
      }
      fs::remove(fcb_path, ec);  // a loaded program keeps its own mapping
    }
    std::vector<std::string> names(in_names.begin(), in_names.begin() + first_baked);
    DataSet runtime = ds;
    runtime.inputs.resize(first_baked);
    for (size_t i = 0; i < programs.size(); ++i) {
      bool mismatch = false;
      std::string why = RunDataSet(programs[i], names, runtime, opt, &mismatch);
      if (!why.empty()) {
        o.target_pass[program_targets[i]] = false;
        if (o.failure.empty()) {
          o.failure = program_targets[i] + ": " + why;
          o.wrong_result = mismatch;
        }
      }
    }
  }
  if (o.target_pass.empty()) o.failure = "no target of the file can run on this host";
  return o;
}

}  // namespace

const std::set<std::string>& SupportedOps() {
  static const std::set<std::string> kOps = [] {
    std::set<std::string> s;
    for (const auto& d : ops::AllOps())
      if (!d.internal) s.insert(d.name);
    // Constant never reaches the registry: import turns it into a value.
    s.insert("Constant");
    return s;
  }();
  return kOps;
}

std::string PrimaryOp(const std::string& test_name, const std::vector<std::string>& node_ops) {
  if (node_ops.size() == 1) return node_ops[0];
  // The longest ONNX operator whose lower-case name is the start of the test
  // name's words joined without underscores.
  std::string joined;
  {
    std::string rest = test_name.rfind("test_", 0) == 0 ? test_name.substr(5) : test_name;
    for (char c : rest)
      if (c != '_') joined += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::string best;
  for (const auto& s : onnx::OpSchemaRegistry::get_all_schemas()) {
    const auto* schema = &s;
    if (!schema->domain().empty()) continue;
    const std::string name = schema->Name();
    const std::string low = Lower(name);
    if (joined.rfind(low, 0) == 0 && low.size() > best.size()) best = name;
  }
  if (!best.empty()) return best;
  return node_ops.empty() ? "(none)" : node_ops[0];
}

TestResult RunTest(const std::string& dir_str, const Options& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir(dir_str);
  TestResult r;
  r.name = dir.filename().string();
  auto finish = [&](Outcome o, std::string reason) {
    r.outcome = o;
    r.reason = Clip(Tidy(reason));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };

  std::string bytes;
  onnx::ModelProto model;
  if (!ReadFile(dir / "model.onnx", &bytes) || !model.ParseFromString(bytes)) {
    r.op = "(unreadable)";
    return finish(Outcome::kFail, "cannot read model.onnx");
  }
  std::vector<std::string> node_ops;
  std::string missing;
  for (const auto& n : model.graph().node()) {
    const std::string op = (n.domain().empty() || n.domain() == "ai.onnx") ? n.op_type()
                                                                           : n.domain() + "." + n.op_type();
    if (std::find(node_ops.begin(), node_ops.end(), op) == node_ops.end()) node_ops.push_back(op);
    r.ops.insert(op);
  }
  for (const auto& op : r.ops)
    if (!SupportedOps().count(op)) missing += (missing.empty() ? "" : ", ") + op;
  r.op = PrimaryOp(r.name, node_ops);
  if (!missing.empty()) return finish(Outcome::kUnsupported, "not in fcb ops: " + missing);

  // Runtime inputs are the graph inputs that are not initializers; those with
  // symbolic or unknown dims get their shapes from the test data.
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> in_names;
  std::vector<bool> needs_shape;
  std::vector<int> input_index;   // position in graph().input()
  std::vector<int32_t> declared;  // element types of the runtime inputs, then the outputs
  for (int i = 0; i < model.graph().input_size(); ++i) {
    const auto& vi = model.graph().input(i);
    if (inits.count(vi.name())) continue;
    in_names.push_back(vi.name());
    input_index.push_back(i);
    declared.push_back(vi.type().tensor_type().elem_type());
    bool fixed = vi.type().has_tensor_type() && vi.type().tensor_type().has_shape();
    for (const auto& d : vi.type().tensor_type().shape().dim()) fixed = fixed && d.has_dim_value();
    needs_shape.push_back(!fixed);
  }
  for (const auto& vi : model.graph().output()) declared.push_back(vi.type().tensor_type().elem_type());

  std::vector<DataSet> sets;
  std::vector<fs::path> set_dirs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      set_dirs.push_back(e.path());
  std::sort(set_dirs.begin(), set_dirs.end());
  for (const auto& sd : set_dirs) {
    DataSet ds;
    Status s = LoadDataSet(sd, in_names.size(), model.graph().output_size(), declared, &ds);
    if (!s.ok()) {
      // Data fcb cannot read (strings, sequences, optionals) usually belongs
      // to a model fcb refuses; then that is the reason to report.
      CompileSpec spec;
      spec.targets = opt.targets;
      const fs::path out = fs::path(opt.tmp_dir) / (r.name + ".fcb");
      auto c = Compile((dir / "model.onnx").string(), spec, out.string());
      std::error_code ec;
      fs::remove(out, ec);
      if (!c.ok() && c.status().code() == StatusCode::kUnsupported) {
        r.failure_kind = "refused";
        return finish(Outcome::kFail, "compile: " + c.status().ToString());
      }
      return finish(Outcome::kFail, "test data: " + s.ToString());
    }
    sets.push_back(std::move(ds));
  }
  if (sets.empty()) return finish(Outcome::kFail, "no test_data_set_* folder");

  // A few tests declare an input shape their own data contradicts (e.g. a
  // CastLike 'like' input declared 3x4, fed as one element; CastLike reads
  // only its type). Such inputs take the data's shapes, like symbolic ones.
  fs::path plain_model = dir / "model.onnx";
  {
    bool relaxed = false;
    for (size_t k = 0; k < in_names.size(); ++k) {
      if (needs_shape[k]) continue;
      auto* vi = model.mutable_graph()->mutable_input(input_index[k]);
      std::vector<int64_t> dims;
      for (const auto& d : vi->type().tensor_type().shape().dim()) dims.push_back(d.dim_value());
      bool differs = false;
      for (const auto& ds : sets) differs = differs || ds.inputs[k]->shape != dims;
      if (!differs) continue;
      vi->mutable_type()->mutable_tensor_type()->clear_shape();
      needs_shape[k] = true;
      relaxed = true;
    }
    if (relaxed) {
      plain_model = fs::path(opt.tmp_dir) / (r.name + ".relaxed.onnx");
      std::ofstream f(plain_model, std::ios::binary);
      if (!f || !model.SerializeToOstream(&f)) return finish(Outcome::kFail, "cannot write " + plain_model.string());
    }
  }

  // Shape-like inputs (Reshape's shape, Resize's scales, ...) must be
  // compile-time constants for fcb, as they are in exported models; the node
  // tests feed them as inputs. A test that fails to compile
  // is retried with the inputs after the first baked in as initializers, then
  // with all of them (r.const_inputs records which).
  const int max_mode = in_names.empty() ? 0 : 2;
  RunOutcome last, first;
  for (int mode = 0; mode <= max_mode; ++mode) {
    if (mode == 1 && in_names.size() < 2) continue;
    last = RunSets(r.name, plain_model, model, in_names, needs_shape, set_dirs, sets, mode, opt);
    if (mode == 0) first = last;
    if (!last.compile_failed || mode == max_mode) break;
  }
  if (plain_model != dir / "model.onnx") {
    std::error_code ec;
    fs::remove(plain_model, ec);
  }
  // When no mode compiles, the plain model's error is the one to show.
  if (last.compile_failed && last.mode != first.mode) {
    const std::string baked = last.failure;
    last = first;
    if (Tidy(baked) != Tidy(last.failure)) last.failure += " | with inputs baked in as constants: " + baked;
  }
  r.const_inputs = last.mode;
  r.target_pass = last.target_pass;
  bool all = !r.target_pass.empty() && last.failure.empty();
  for (const auto& [t, ok] : r.target_pass) all = all && ok;
  if (!all)
    r.failure_kind = last.refused ? "refused" : last.compile_failed ? "compile error"
                     : last.wrong_result ? "wrong result" : "error";
  return finish(all ? Outcome::kPass : Outcome::kFail, last.failure);
}

}  // namespace fcb::conformance
