// `fcb run` and `fcb bench`.
#include <algorithm>
#include <chrono>
#include <functional>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "fcb/npy.h"

namespace fcb::cli {
namespace {

std::string SafeName(const std::string& n) {
  std::string s = n;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return s;
}

// Deterministic values in [-1, 1) for inputs the user did not give.
std::vector<uint8_t> PatternInput(const TensorSpec& t) {
  std::vector<uint8_t> bytes(t.bytes());
  uint32_t s = 12345;
  const size_t n = bytes.size() / std::max<size_t>(DTypeSize(t.dtype), 1);
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
    if (t.dtype == DType::kF32) std::memcpy(bytes.data() + 4 * i, &v, 4);
    if (t.dtype == DType::kI64) {
      const int64_t x = 0;
      std::memcpy(bytes.data() + 8 * i, &x, 8);
    }
  }
  return bytes;
}

}  // namespace

bool IsGrowingState(const Execution& ex, const TensorSpec& in) {
  if (!ex.state() || !in.dynamic()) return false;
  for (const auto& v : ex.state()->variables())
    if (v.name == in.name) return true;
  return false;
}

std::function<Status()> StateRewinder(Execution& ex) {
  // Each growing cache's valid rows now, dense [B, heads, rows, head].
  std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<uint8_t>>>> saved;
  for (const auto& in : ex.info().inputs) {
    if (!IsGrowingState(ex, in)) continue;
    auto buf = ex.state()->data(in.name);
    auto rows = ex.state()->valid_length(in.name);
    if (!buf.ok() || !rows.ok() || in.shape.size() != 4) continue;
    std::vector<int64_t> cap;
    for (const auto& v : ex.state()->variables())
      if (v.name == in.name) cap = v.shape;
    std::vector<int64_t> shape = in.shape;
    shape[2] = rows.value();
    const size_t row = static_cast<size_t>(shape[3]) * DTypeSize(in.dtype);
    std::vector<uint8_t> dense;
    const auto* b = static_cast<const uint8_t*>(buf.value());
    for (int64_t h = 0; h < shape[0] * shape[1]; ++h)
      dense.insert(dense.end(), b + h * cap[2] * row, b + (h * cap[2] + shape[2]) * row);
    saved.push_back({in.name, {shape, std::move(dense)}});
  }
  return [&ex, saved]() -> Status {
    for (const auto& [name, s] : saved) FCB_RETURN_IF_ERROR(ex.SetInput(name, s.second.data(), s.second.size(), s.first));
    return Status::Ok();
  };
}

Status BindInputs(Execution& ex, const std::vector<std::string>& given, bool quiet) {
  std::vector<std::string> bound;
  for (const auto& g : given) {
    FCB_ASSIGN_OR_RETURN(auto kv, SplitAssign(g, "--input"));
    FCB_ASSIGN_OR_RETURN(NpyArray a, ReadNpy(kv.second));
    const TensorSpec* spec = nullptr;
    for (const auto& in : ex.info().inputs)
      if (in.name == kv.first) spec = &in;
    if (!spec) {
      std::string names;
      for (const auto& in : ex.info().inputs) names += (names.empty() ? "" : ", ") + in.name;
      return NotFound("--input '" + kv.first + "': method '" + ex.info().name + "' has no such input; its inputs are: " + names);
    }
    if (spec->dynamic() && a.dtype == static_cast<int32_t>(spec->dtype)) {
      // Any shape within the ranges; SetInput names a dim outside them.
      Status s = ex.SetInput(kv.first, a.data.data(), a.data.size(), a.shape);
      if (!s.ok()) return s.Annotate("--input '" + kv.first + "' from " + kv.second);
      bound.push_back(kv.first);
      continue;
    }
    if (a.dtype != static_cast<int32_t>(spec->dtype) || a.shape != spec->shape) {
      std::string dims;
      for (auto d : a.shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
      std::string want;
      for (auto d : spec->shape) want += (want.empty() ? "" : "x") + std::to_string(d);
      return InvalidArgument("--input '" + kv.first + "' from " + kv.second + " is " + DTypeName(static_cast<DType>(a.dtype)) +
                             " " + dims + ", but the method expects " + DTypeName(spec->dtype) + " " + want);
    }
    FCB_RETURN_IF_ERROR(ex.SetInput(kv.first, a.data.data(), a.data.size()));
    bound.push_back(kv.first);
  }
  for (const auto& in : ex.info().inputs) {
    if (std::find(bound.begin(), bound.end(), in.name) != bound.end()) continue;
    if (IsGrowingState(ex, in)) {
      if (!quiet) Warn("input '" + in.name + "' is a KV cache kept in the State; it starts empty (give --input " +
                       in.name + "=FILE.npy with its valid rows to load them)");
      continue;
    }
    if (!quiet) Warn("input '" + in.name + "' not given; using deterministic pseudo-random values");
    auto bytes = PatternInput(in);
    FCB_RETURN_IF_ERROR(ex.SetInput(in.name, bytes.data(), bytes.size()));
  }
  return Status::Ok();
}

namespace {

double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int CmdRun(const RunArgs& a) {
  auto loaded = LoadForRun(a.file, a.target, a.method, !a.no_verify, a.max_memory);
  if (!loaded.ok()) return Fail(loaded.status());
  const auto& l = loaded.value();
  auto ex = Execution::Create(l.program, l.method, a.threads);
  if (!ex.ok()) return Fail(ex.status());
  if (Status s = BindInputs(*ex.value(), a.inputs, false); !s.ok()) return Fail(s);
  if (Status s = ex.value()->Run(); !s.ok()) return Fail(s);
  std::cout << "target: " << Shown(l.program->target()) << (a.target == "auto" ? " (auto-selected)" : " (forced)")
            << "; file holds:";
  for (const auto& t : l.program->targets_in_file()) std::cout << " " << Shown(t);
  std::cout << "\nmethod: " << Shown(l.method) << "\n";
  std::error_code ec;
  std::filesystem::create_directories(a.output_dir, ec);
  const auto& outs = ex.value()->info().outputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    NpyArray arr;
    arr.dtype = static_cast<int32_t>(outs[i].dtype);
    arr.shape = ex.value()->output_shape(i);  // this run's: sizes chosen per run change it
    const auto* p = static_cast<const uint8_t*>(ex.value()->output_data(i));
    arr.data.assign(p, p + ex.value()->output_bytes(i));
    if (outs[i].dtype == DType::kBF16) {
      // NumPy has no bfloat16: the bit patterns as uint16, which
      // np.load(f).view(ml_dtypes.bfloat16) reads as bfloat16.
      arr.dtype = static_cast<int32_t>(DType::kU16);
      Warn("output '" + outs[i].name + "' is bfloat16, which NumPy has no dtype for: written as its uint16 bit "
           "patterns (np.load(f).view(ml_dtypes.bfloat16), or (x.astype(np.uint32) << 16).view(np.float32))");
    }
    const std::string path = (std::filesystem::path(a.output_dir) / (SafeName(outs[i].name) + ".npy")).string();
    if (Status s = WriteNpy(path, arr); !s.ok()) return Fail(s);
    std::string dims;
    for (auto d : arr.shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    std::cout << "output: " << Shown(outs[i].name) << " " << DTypeName(outs[i].dtype) << " " << dims << " -> " << Shown(path) << "\n";
  }
  return 0;
}

int CmdBench(const BenchArgs& a) {
  if (a.iterations < 1) return Fail("--iterations must be at least 1", 2);
  auto loaded = LoadForRun(a.file, a.target, a.method, true, a.max_memory);
  if (!loaded.ok()) return Fail(loaded.status());
  const auto& l = loaded.value();
  auto ex = Execution::Create(l.program, l.method, a.threads);
  if (!ex.ok()) return Fail(ex.status());
  if (Status s = BindInputs(*ex.value(), {}, true); !s.ok()) return Fail(s);
  // A growing KV cache is set back before each run (each run appends to it).
  const auto rewind = StateRewinder(*ex.value());
  auto t0 = std::chrono::steady_clock::now();
  if (Status s = ex.value()->Run(); !s.ok()) return Fail(s);
  const double first = Ms(t0, std::chrono::steady_clock::now());
  std::vector<double> times;
  for (int i = 0; i < a.iterations; ++i) {
    if (Status s = rewind(); !s.ok()) return Fail(s);
    t0 = std::chrono::steady_clock::now();
    if (Status s = ex.value()->Run(); !s.ok()) return Fail(s);
    times.push_back(Ms(t0, std::chrono::steady_clock::now()));
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  if (a.json) {
    nlohmann::ordered_json j = TimingJson(l, a.threads, a.iterations);
    j["load_ms"] = l.load_ms;
    j["first_run_ms"] = first;
    j["min_ms"] = times.front();
    j["median_ms"] = med;
    j["max_ms"] = times.back();
    std::cout << Json(j) << "\n";
  } else {
    std::printf("target %s, method %s, %d thread(s), %d iterations\n", Shown(l.program->target()).c_str(), Shown(l.method).c_str(),
                a.threads, a.iterations);
    std::printf("load %.2f ms, first run %.2f ms, min %.3f ms, median %.3f ms, max %.3f ms\n", l.load_ms, first,
                times.front(), med, times.back());
  }
  return 0;
}

}  // namespace fcb::cli
