#include "conformance/manifest.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace fcb::conformance {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "fcb-conformance-export";
constexpr int kVersion = 1;

// The DType named `name` by DTypeName, if any.
bool DTypeFromName(const std::string& name, DType* out) {
  for (int32_t code = 1; code <= 16; ++code) {
    const DType t = static_cast<DType>(code);
    if (DTypeSize(t) != 0 && name == DTypeName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

json TensorJson(const ExportedTensor& t) {
  return {{"name", t.name}, {"file", t.file}, {"dtype", DTypeName(t.dtype)}, {"shape", t.shape}};
}

// Thrown inside ReadManifest with what is wrong where; turned into CorruptFile.
struct BadManifest {
  std::string what;
};

const json& At(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw BadManifest{where + ": no \"" + key + "\""};
  return j.at(key);
}

std::string Str(const json& j, const char* key, const std::string& where) {
  const json& v = At(j, key, where);
  if (!v.is_string()) throw BadManifest{where + ": \"" + key + "\" is not a string"};
  return v.get<std::string>();
}

std::vector<std::string> Strings(const json& j, const char* key, const std::string& where) {
  const json& v = At(j, key, where);
  std::vector<std::string> out;
  if (!v.is_array()) throw BadManifest{where + ": \"" + key + "\" is not a list"};
  for (const auto& e : v) {
    if (!e.is_string()) throw BadManifest{where + ": \"" + key + "\" holds a non-string"};
    out.push_back(e.get<std::string>());
  }
  return out;
}

double Number(const json& j, const char* key, const std::string& where) {
  const json& v = At(j, key, where);
  if (!v.is_number()) throw BadManifest{where + ": \"" + key + "\" is not a number"};
  return v.get<double>();
}

// A path inside the test's folder: relative, no "..".
std::string RelativeFile(const json& j, const char* key, const std::string& where) {
  std::string f = Str(j, key, where);
  if (f.empty() || f[0] == '/' || f.find("..") != std::string::npos)
    throw BadManifest{where + ": \"" + key + "\" '" + f + "' is not a path inside the test's folder"};
  return f;
}

ExportedTensor ParseTensor(const json& j, const std::string& where) {
  ExportedTensor t;
  t.name = Str(j, "name", where);
  const std::string w = where + " '" + t.name + "'";
  t.file = RelativeFile(j, "file", w);
  const std::string dt = Str(j, "dtype", w);
  if (!DTypeFromName(dt, &t.dtype)) throw BadManifest{w + ": unknown dtype '" + dt + "'"};
  const json& shape = At(j, "shape", w);
  if (!shape.is_array()) throw BadManifest{w + ": \"shape\" is not a list"};
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) throw BadManifest{w + ": bad dim in \"shape\""};
    t.shape.push_back(d.get<int64_t>());
  }
  return t;
}

ManifestTest ParseTest(const json& j, size_t index) {
  ManifestTest m;
  std::string where = "tests[" + std::to_string(index) + "]";
  TestResult& r = m.recorded;
  r.name = Str(j, "name", where);
  if (r.name.empty() || r.name.find('/') != std::string::npos || r.name.find("..") != std::string::npos)
    throw BadManifest{where + ": test name '" + r.name + "' is not a folder name"};
  where = "test '" + r.name + "'";
  r.op = Str(j, "op", where);
  for (const auto& op : Strings(j, "ops", where)) r.ops.insert(op);
  const json& ci = At(j, "const_inputs", where);
  if (!ci.is_number_integer() || ci.get<int>() < 0 || ci.get<int>() > 2)
    throw BadManifest{where + ": \"const_inputs\" is not 0, 1 or 2"};
  r.const_inputs = ci.get<int>();
  const std::string outcome = Str(j, "outcome", where);
  if (j.contains("reason")) r.reason = Str(j, "reason", where);
  if (j.contains("failure_kind")) r.failure_kind = Str(j, "failure_kind", where);
  if (outcome != "exported") {
    if (!ParseOutcome(outcome, &r.outcome) || r.outcome == Outcome::kPass)
      throw BadManifest{where + ": \"outcome\" '" + outcome + "' is not exported, fail or unsupported"};
    if (j.contains("targets")) {
      const json& tp = j.at("targets");
      if (!tp.is_object()) throw BadManifest{where + ": \"targets\" is not an object"};
      for (const auto& [tg, ok] : tp.items()) {
        if (!ok.is_boolean()) throw BadManifest{where + ": \"targets\" '" + tg + "' is not true or false"};
        r.target_pass[tg] = ok.get<bool>();
      }
    }
    return m;
  }
  m.exported = true;
  const json& tol = At(j, "tolerance", where);
  m.tolerance.rtol = Number(tol, "rtol", where + " tolerance");
  m.tolerance.atol = Number(tol, "atol", where + " tolerance");
  for (const auto& f : Strings(j, "fcb_files", where)) m.fcb_files.push_back(f);
  const json& sets = At(j, "data_sets", where);
  if (!sets.is_array() || sets.empty()) throw BadManifest{where + ": \"data_sets\" is not a non-empty list"};
  for (const auto& s : sets) {
    ExportedDataSet ds;
    ds.name = Str(s, "name", where + " data set");
    const std::string w = where + " " + ds.name;
    ds.fcb = RelativeFile(s, "fcb", w);
    for (int pass = 0; pass < 2; ++pass) {
      const char* key = pass == 0 ? "inputs" : "outputs";
      const json& list = At(s, key, w);
      if (!list.is_array()) throw BadManifest{w + ": \"" + key + "\" is not a list"};
      for (const auto& t : list)
        (pass == 0 ? ds.inputs : ds.outputs).push_back(ParseTensor(t, w + " " + key));
    }
    m.data_sets.push_back(std::move(ds));
  }
  return m;
}

}  // namespace

Status WriteManifest(const std::string& path, const Manifest& m) {
  json j = {{"format", kFormat}, {"version", kVersion}, {"producer", m.producer},
            {"source", m.source}, {"targets", m.targets}};
  j["tests"] = json::array();
  for (const auto& t : m.tests) {
    const TestResult& r = t.recorded;
    json e = {{"name", r.name}, {"op", r.op}, {"ops", r.ops}, {"const_inputs", r.const_inputs},
              {"outcome", t.exported ? "exported" : OutcomeName(r.outcome)}};
    if (!r.reason.empty()) e["reason"] = r.reason;
    if (!r.failure_kind.empty()) e["failure_kind"] = r.failure_kind;
    if (!t.exported)
      for (const auto& [tg, ok] : r.target_pass) e["targets"][tg] = ok;
    if (t.exported) {
      e["tolerance"] = {{"rtol", t.tolerance.rtol}, {"atol", t.tolerance.atol}};
      e["fcb_files"] = t.fcb_files;
      e["data_sets"] = json::array();
      for (const auto& ds : t.data_sets) {
        json s = {{"name", ds.name}, {"fcb", ds.fcb}, {"inputs", json::array()}, {"outputs", json::array()}};
        for (const auto& in : ds.inputs) s["inputs"].push_back(TensorJson(in));
        for (const auto& out : ds.outputs) s["outputs"].push_back(TensorJson(out));
        e["data_sets"].push_back(std::move(s));
      }
    }
    j["tests"].push_back(std::move(e));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump(1) << "\n";
    if (!f) return IoError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return IoError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Result<Manifest> ReadManifest(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    const int err = errno;
    return err == ENOENT ? NotFound(path + ": no such file (made by fcb-conformance --export DIR)")
                         : IoError(path + ": cannot open: " + std::strerror(err));
  }
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return IoError(path + ": cannot read");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return CorruptFile(path + ": not valid JSON");
  Manifest m;
  try {
    if (Str(j, "format", "manifest") != kFormat)
      throw BadManifest{"\"format\" is not \"" + std::string(kFormat) + "\""};
    const json& v = At(j, "version", "manifest");
    if (!v.is_number_integer() || v.get<int>() != kVersion)
      throw BadManifest{"\"version\" " + v.dump() + " is not " + std::to_string(kVersion) +
                        " (made by another fcb-conformance)"};
    m.producer = Str(j, "producer", "manifest");
    m.source = Str(j, "source", "manifest");
    m.targets = Strings(j, "targets", "manifest");
    const json& tests = At(j, "tests", "manifest");
    if (!tests.is_array()) throw BadManifest{"\"tests\" is not a list"};
    for (size_t i = 0; i < tests.size(); ++i) m.tests.push_back(ParseTest(tests[i], i));
  } catch (const BadManifest& e) {
    return CorruptFile(path + ": " + e.what);
  } catch (const json::exception& e) {  // a value of the wrong type where get<> expects another
    return CorruptFile(path + ": " + e.what());
  }
  return m;
}

Result<NpyArray> ToNpy(NpyArray t) {
  if (static_cast<DType>(t.dtype) == DType::kBF16) t.dtype = kNpyU16;
  if (NpyElementSize(t.dtype) == 0)
    return Unsupported(std::string(DTypeName(static_cast<DType>(t.dtype))) + " tensors cannot be written as .npy");
  return t;
}

Result<NpyArray> ReadExportedTensor(const std::string& test_dir, const ExportedTensor& t) {
  const std::string path = test_dir + "/" + t.file;
  auto a = ReadNpy(path);
  if (!a.ok()) return a.TakeStatus();
  NpyArray arr = std::move(a).value();
  const bool bf16 = t.dtype == DType::kBF16;
  const int32_t stored = bf16 ? kNpyU16 : static_cast<int32_t>(t.dtype);
  if (arr.dtype != stored)
    return CorruptFile(path + ": holds " + DTypeName(static_cast<DType>(arr.dtype)) + ", the manifest says " +
                       DTypeName(t.dtype) + (bf16 ? " (as uint16)" : ""));
  if (arr.shape != t.shape)
    return CorruptFile(path + ": shape " + ShapeText(arr.shape) + ", the manifest says " + ShapeText(t.shape));
  if (bf16) arr.dtype = static_cast<int32_t>(DType::kBF16);
  return arr;
}

}  // namespace fcb::conformance
