#include "conformance/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace fcb::conformance {
namespace {

// float16 / bfloat16 bit patterns as float32 (exact: both fit in a float).
float Float16Value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float v;
  if (exponent == 0x1f)
    v = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else if (exponent == 0)  // zero or subnormal: mantissa * 2^-24
    v = std::ldexp(static_cast<float>(mantissa), -24);
  else
    v = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return (h & 0x8000) ? -v : v;
}

float BFloat16Value(uint16_t h) {  // the top half of a float32
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <typename T>
bool CompareFloat(const T* got, const T* want, int64_t n, double rtol, double atol, std::string* why) {
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

// Element i of an integer or bool tensor, as text.
std::string IntText(DType t, const uint8_t* p, int64_t i) {
  auto at = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p + i * sizeof v, sizeof v);
    return v;
  };
  switch (t) {
    case DType::kBool: return p[i] ? "1" : "0";
    case DType::kU8: return std::to_string(at(uint8_t{}));
    case DType::kI8: return std::to_string(at(int8_t{}));
    case DType::kU16: return std::to_string(at(uint16_t{}));
    case DType::kI16: return std::to_string(at(int16_t{}));
    case DType::kU32: return std::to_string(at(uint32_t{}));
    case DType::kI32: return std::to_string(at(int32_t{}));
    case DType::kU64: return std::to_string(at(uint64_t{}));
    case DType::kI64: return std::to_string(at(int64_t{}));
    default: return "?";
  }
}

// Exact comparison for integers and bools (bools: any nonzero byte is true).
bool CompareExact(DType t, const uint8_t* got, const uint8_t* want, int64_t n, std::string* why) {
  const size_t es = DTypeSize(t);
  for (int64_t i = 0; i < n; ++i) {
    const bool eq = t == DType::kBool ? (got[i] != 0) == (want[i] != 0)
                                      : std::memcmp(got + i * es, want + i * es, es) == 0;
    if (!eq) {
      *why = "element " + std::to_string(i) + ": got " + IntText(t, got, i) + ", expected " +
             IntText(t, want, i);
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ShapeText(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

bool CompareOutput(const TensorSpec& spec, const void* got, const NpyArray& want, const Tolerance& tol,
                   std::string* why) {
  const DType wt = static_cast<DType>(want.dtype);
  if (spec.dtype != wt) {
    *why = std::string("dtype ") + DTypeName(spec.dtype) + ", expected " + DTypeName(wt);
    return false;
  }
  if (spec.shape != want.shape) {
    *why = "shape " + ShapeText(spec.shape) + ", expected " + ShapeText(want.shape);
    return false;
  }
  int64_t n = 1;
  for (int64_t d : want.shape) n *= d;
  const size_t es = DTypeSize(wt);
  if (es == 0 || want.data.size() != static_cast<size_t>(n) * es) {
    *why = "expected data holds " + std::to_string(want.data.size()) + " bytes, not " +
           std::to_string(n) + " " + DTypeName(wt) + " elements";
    return false;
  }
  if (wt == DType::kF16 || wt == DType::kBF16) {
    // Compared as float32 values. The 1.12 data make float32 -> bfloat16 by
    // truncation, fcb rounds to nearest even (as IEEE and later ONNX data do),
    // so bfloat16 results may differ by one unit in the last place (2^-7 relative).
    const bool bf = wt == DType::kBF16;
    std::vector<float> g(n), w(n);
    std::vector<uint16_t> wbits(n);
    if (n > 0) std::memcpy(wbits.data(), want.data.data(), n * sizeof(uint16_t));
    const auto* gp = static_cast<const uint16_t*>(got);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = bf ? BFloat16Value(gp[i]) : Float16Value(gp[i]);
      w[i] = bf ? BFloat16Value(wbits[i]) : Float16Value(wbits[i]);
    }
    return CompareFloat(g.data(), w.data(), n, bf ? std::max(tol.rtol, 1.0 / 128) : tol.rtol, tol.atol, why);
  }
  if (wt == DType::kF32 || wt == DType::kF64) {
    // The expected bytes are copied out: a std::vector<uint8_t>'s storage
    // carries no promise of float alignment.
    if (wt == DType::kF32) {
      std::vector<float> w(n);
      if (n > 0) std::memcpy(w.data(), want.data.data(), want.data.size());  // empty tensors: null pointers
      return CompareFloat(static_cast<const float*>(got), w.data(), n, tol.rtol, tol.atol, why);
    }
    std::vector<double> w(n);
    if (n > 0) std::memcpy(w.data(), want.data.data(), want.data.size());
    return CompareFloat(static_cast<const double*>(got), w.data(), n, tol.rtol, tol.atol, why);
  }
  return CompareExact(wt, static_cast<const uint8_t*>(got), want.data.data(), n, why);
}

std::string RunDataSet(const std::shared_ptr<const Program>& prog, const std::vector<std::string>& in_names,
                       const DataSet& ds, const Tolerance& tol, bool* mismatch) {
  auto method = prog->default_method();
  if (!method.ok()) return method.status().ToString();
  auto ex = Execution::Create(prog, method.value(), 1);
  if (!ex.ok()) return "creating the execution: " + ex.status().ToString();
  Execution& e = *ex.value();
  if (in_names.size() != ds.inputs.size())
    return std::to_string(ds.inputs.size()) + " input tensors for " + std::to_string(in_names.size()) +
           " input names";
  for (size_t k = 0; k < in_names.size(); ++k) {
    const auto& t = ds.inputs[k];
    Status s = e.SetInput(in_names[k], t.data.data(), t.data.size());
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
    if (!CompareOutput(outs[k], e.output_data(k), ds.outputs[k], tol, &why)) {
      *mismatch = true;
      return "output '" + outs[k].name + "' " + why;
    }
  }
  return "";
}

}  // namespace fcb::conformance
