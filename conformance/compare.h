// Running one data set of a node test on a loaded program and comparing its
// outputs with the expected ones: the rule both fcb-conformance (which reads
// the test data from TensorProto files) and fcb-conformance-replay (which reads
// an export's .npy files) apply. Public API only (fcb/fcb.h, fcb/npy.h): the
// replay builds where only libfcb.so exists.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/npy.h"

namespace fcb::conformance {

// |got - want| <= atol + rtol * |want| for float types, NaN matches NaN, an
// infinity matches itself; float16 and bfloat16 are compared as float32
// values, bfloat16 with at least 2^-7 relative (see CompareOutput);
// integers and bools exactly (bools: any nonzero byte is true).
struct Tolerance {
  double rtol = 1e-3, atol = 1e-7;
};

// One data set: the tensors fed at run time, in the order of the program's
// inputs that are fed, and the expected outputs, in the program's output
// order. A tensor's dtype is a fcb::DType code: kBF16 (16) included, which
// .npy files cannot hold (the export writes those as uint16 bit patterns).
struct DataSet {
  std::vector<NpyArray> inputs, outputs;
};

// Compares output `got` (laid out as `spec`) with `want`; false with the
// first difference in *why.
bool CompareOutput(const TensorSpec& spec, const void* got, const NpyArray& want, const Tolerance& tol,
                   std::string* why);

// Runs `ds` on `prog`'s only method on one thread, feeding ds.inputs[k] to
// input `in_names[k]`, and compares every output. "" when they all match,
// else what failed; *mismatch is set when that is a wrong value (not an error).
std::string RunDataSet(const std::shared_ptr<const Program>& prog, const std::vector<std::string>& in_names,
                       const DataSet& ds, const Tolerance& tol, bool* mismatch);

// "2x3", "scalar" for rank 0.
std::string ShapeText(const std::vector<int64_t>& shape);

}  // namespace fcb::conformance
