// One node test: classify, compile for every target, run on each runnable
// target, compare with the expected outputs; or, exporting, write the
// compiled .fcb files and the data sets out instead of running them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "conformance/conformance.h"
#include "core/target.h"
#include "fcb/fcb.h"
#include "fcb/npy.h"
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
      ir::TensorData& td = *data.value();
      if (idx < declared.size() && declared[idx] == onnx::TensorProto::BFLOAT16 && td.dtype == ir::DType::kU16)
        td.dtype = ir::DType::kBF16;
      NpyArray arr;
      arr.dtype = static_cast<int32_t>(td.dtype);
      arr.shape = td.shape;
      arr.data = std::move(td.bytes);
      (pass == 0 ? ds->inputs : ds->outputs).push_back(std::move(arr));
    }
  }
  return Status::Ok();
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
  // Exporting: the .fcb files written (relative to the test's export folder)
  // and, per data set, the one it runs on.
  std::vector<std::string> fcb_files, set_fcb;
};

// The first input of a data set that is baked into the model in `mode`: the
// inputs before it are fed at run time.
size_t FirstBaked(int mode, size_t n_inputs) { return mode == 0 ? n_inputs : mode == 1 ? 1 : 0; }

// Compiles (mode 0: once per distinct input shapes; else once per data set,
// with inputs baked from `mode` - 1 on) and runs every data set. Exporting
// (opt.export_dir), it writes the .fcb files into opt.export_dir/<name>/
// instead and runs nothing.
RunOutcome RunSets(const std::string& name, const fs::path& plain_model, const onnx::ModelProto& model,
                   const std::vector<std::string>& in_names, const std::vector<bool>& needs_shape,
                   const std::vector<fs::path>& set_dirs,
                   const std::vector<DataSet>& sets, int mode, const Options& opt) {
  RunOutcome o;
  o.mode = mode;
  const size_t first_baked = FirstBaked(mode, in_names.size());
  const bool exporting = !opt.export_dir.empty();
  // The targets a result speaks for: every compiled one when exporting, else
  // those this host runs (a test that fails before running fails on them).
  std::vector<std::string> reported;
  for (const auto& t : opt.targets) {
    const auto id = TargetFromName(t);
    if (exporting || (id && HostCanRun(*id))) reported.push_back(t);
  }
  const fs::path export_dir = fs::path(opt.export_dir) / name;
  if (exporting) {  // what an earlier mode left there is stale
    std::error_code ec;
    fs::remove_all(export_dir, ec);
    if (!fs::create_directories(export_dir, ec) && ec) {
      o.failure = "cannot make " + export_dir.string() + ": " + ec.message();
      for (const auto& t : reported) o.target_pass[t] = false;
      return o;
    }
  }
  fs::path fcb_path = fs::path(opt.tmp_dir) / (name + ".fcb");
  const fs::path baked = fs::path(opt.tmp_dir) / (name + ".onnx");
  bool compiled = false;
  std::map<std::string, std::vector<int64_t>> compiled_shapes;
  std::vector<std::shared_ptr<const Program>> programs;
  std::vector<std::string> program_targets;
  for (const auto& t : reported) o.target_pass[t] = true;
  auto fail_all = [&](std::string why) {
    for (auto& [t, ok] : o.target_pass) ok = false;
    if (o.failure.empty()) o.failure = std::move(why);
  };
  for (size_t si = 0; si < sets.size(); ++si) {
    const DataSet& ds = sets[si];
    std::map<std::string, std::vector<int64_t>> shapes;
    for (size_t k = 0; k < first_baked; ++k)
      if (needs_shape[k]) shapes[in_names[k]] = ds.inputs[k].shape;
    if (mode != 0 || !compiled || shapes != compiled_shapes) {
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
      if (exporting) {
        const std::string file = o.fcb_files.empty() ? "model.fcb" : "model." + std::to_string(si) + ".fcb";
        o.fcb_files.push_back(file);
        fcb_path = export_dir / file;
      }
      CompileSpec spec;
      spec.targets = opt.targets;
      for (const auto& [in, dims] : shapes) spec.input_shapes[in].assign(dims.begin(), dims.end());
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
      compiled = true;
      compiled_shapes = shapes;
      if (!exporting) {  // load it on every target the host runs
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
    }
    if (exporting) {
      o.set_fcb.push_back(o.fcb_files.back());
      continue;
    }
    std::vector<std::string> names(in_names.begin(), in_names.begin() + first_baked);
    DataSet runtime = ds;
    runtime.inputs.resize(first_baked);
    for (size_t i = 0; i < programs.size(); ++i) {
      bool mismatch = false;
      std::string why = RunDataSet(programs[i], names, runtime, opt.tolerance, &mismatch);
      if (!why.empty()) {
        o.target_pass[program_targets[i]] = false;
        if (o.failure.empty()) {
          o.failure = program_targets[i] + ": " + why;
          o.wrong_result = mismatch;
        }
      }
    }
  }
  if (o.target_pass.empty() && !exporting) o.failure = "no target of the file can run on this host";
  return o;
}

// Writes the runtime inputs [0, n_fed) and the expected outputs of every data
// set of an exported test into export_dir/<data set>/ as .npy, and describes them.
Status ExportDataSets(const fs::path& export_dir, const std::vector<fs::path>& set_dirs,
                      const std::vector<DataSet>& sets, const std::vector<std::string>& in_names,
                      const std::vector<std::string>& out_names, size_t n_fed,
                      const std::vector<std::string>& set_fcb, std::vector<ExportedDataSet>* out) {
  for (size_t si = 0; si < sets.size(); ++si) {
    ExportedDataSet e;
    e.name = set_dirs[si].filename().string();
    e.fcb = set_fcb[si];
    std::error_code ec;
    if (!fs::create_directories(export_dir / e.name, ec) && ec)
      return IoError("cannot make " + (export_dir / e.name).string() + ": " + ec.message());
    for (int pass = 0; pass < 2; ++pass) {
      const bool in = pass == 0;
      const size_t n = in ? n_fed : sets[si].outputs.size();
      for (size_t k = 0; k < n; ++k) {
        const NpyArray& t = in ? sets[si].inputs[k] : sets[si].outputs[k];
        ExportedTensor x;
        x.name = in ? in_names[k] : k < out_names.size() ? out_names[k] : "output_" + std::to_string(k);
        x.file = e.name + (in ? "/input_" : "/output_") + std::to_string(k) + ".npy";
        x.dtype = static_cast<DType>(t.dtype);
        x.shape = t.shape;
        auto npy = ToNpy(t);
        if (!npy.ok()) return npy.TakeStatus().Annotate((in ? "input '" : "output '") + x.name + "' of " + e.name);
        Status s = WriteNpy((export_dir / x.file).string(), npy.value());
        if (!s.ok()) return s;
        (in ? e.inputs : e.outputs).push_back(std::move(x));
      }
    }
    out->push_back(std::move(e));
  }
  return Status::Ok();
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

namespace {

// RunTest, or ExportTest when `exported` is set (then opt.export_dir is).
TestResult Test(const std::string& dir_str, const Options& opt, ManifestTest* exported) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir(dir_str);
  TestResult r;
  r.name = dir.filename().string();
  auto finish = [&](Outcome o, std::string reason) {
    r.outcome = o;
    r.reason = ReasonText(reason);
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
  auto op_name = [](const onnx::NodeProto& n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") ? n.op_type() : n.domain() + "." + n.op_type();
  };
  for (const auto& n : model.graph().node()) {
    const std::string op = op_name(n);
    if (std::find(node_ops.begin(), node_ops.end(), op) == node_ops.end()) node_ops.push_back(op);
  }
  // Every operator counts, also those in If/Loop/Scan subgraphs (the
  // importer expands those in place).
  std::vector<const onnx::GraphProto*> graphs = {&model.graph()};
  while (!graphs.empty()) {
    const onnx::GraphProto* g = graphs.back();
    graphs.pop_back();
    for (const auto& n : g->node()) {
      r.ops.insert(op_name(n));
      for (const auto& a : n.attribute()) {
        if (a.has_g()) graphs.push_back(&a.g());
        for (const auto& sg : a.graphs()) graphs.push_back(&sg);
      }
    }
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
      for (const auto& ds : sets) differs = differs || ds.inputs[k].shape != dims;
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
    if (TidyPaths(baked) != TidyPaths(last.failure)) last.failure += " | with inputs baked in as constants: " + baked;
  }
  r.const_inputs = last.mode;
  if (exported && last.failure.empty()) {
    std::vector<std::string> out_names;
    for (const auto& vi : model.graph().output()) out_names.push_back(vi.name());
    Status s = ExportDataSets(fs::path(opt.export_dir) / r.name, set_dirs, sets, in_names, out_names,
                              FirstBaked(last.mode, in_names.size()), last.set_fcb, &exported->data_sets);
    if (!s.ok()) {
      exported->data_sets.clear();
      r.failure_kind = "not exported";
      return finish(Outcome::kFail, "export: " + s.ToString());
    }
    exported->exported = true;
    exported->tolerance = opt.tolerance;
    exported->fcb_files = last.fcb_files;
    return finish(Outcome::kPass, "");
  }
  r.target_pass = last.target_pass;
  bool all = !r.target_pass.empty() && last.failure.empty();
  for (const auto& [t, ok] : r.target_pass) all = all && ok;
  if (!all)
    r.failure_kind = last.refused ? "refused" : last.compile_failed ? "compile error"
                     : last.wrong_result ? "wrong result" : "error";
  return finish(all ? Outcome::kPass : Outcome::kFail, last.failure);
}

}  // namespace

TestResult RunTest(const std::string& dir, const Options& opt) { return Test(dir, opt, nullptr); }

ManifestTest ExportTest(const std::string& dir, const std::string& export_dir, const Options& opt) {
  Options o = opt;
  o.export_dir = export_dir;
  ManifestTest m;
  m.recorded = Test(dir, o, &m);
  if (!m.exported) {  // nothing of it is left to run: no folder
    std::error_code ec;
    fs::remove_all(fs::path(export_dir) / m.recorded.name, ec);
  }
  if (m.exported) m.recorded.target_pass.clear();  // the replay decides
  return m;
}

}  // namespace fcb::conformance
