// The export of the conformance suite: what `fcb-conformance --export DIR`
// writes and `fcb-conformance-replay DIR` runs, so the tests compiled on a
// host with the ONNX importer run on one without it (an ARM board, qemu).
//
// DIR/manifest.json, one entry per test folder, in name order:
//   {"format": "fcb-conformance-export", "version": 1, "producer": "fcb 0.1.0",
//    "source": "<the node test folder>", "targets": ["generic", ...],
//    "tests": [
//      {"name": "test_abs", "op": "Abs", "ops": ["Abs"], "const_inputs": 0,
//       "outcome": "exported",
//       "tolerance": {"rtol": 0.001, "atol": 1e-07},
//       "fcb_files": ["model.fcb"],
//       "data_sets": [{"name": "test_data_set_0", "fcb": "model.fcb",
//         "inputs": [{"name": "x", "file": "test_data_set_0/input_0.npy",
//                     "dtype": "float32", "shape": [3, 4, 5]}],
//         "outputs": [{"name": "y", "file": "test_data_set_0/output_0.npy",
//                      "dtype": "float32", "shape": [3, 4, 5]}]}]},
//      {"name": "test_cast_STRING_to_FLOAT", "op": "Cast", "ops": ["Cast"],
//       "const_inputs": 0, "outcome": "fail", "failure_kind": "refused",
//       "reason": "compile: ...", "targets": {"generic": false, ...}},
//      {"name": "test_adagrad", ..., "outcome": "unsupported", "reason": "not in fcb ops: ..."}]}
//
// Files are relative to DIR/<name>/. "outcome" is "exported" (the replay runs
// it and decides), or the outcome the exporter already knows, "fail" (it did
// not compile; its test data could not be read or written) or "unsupported",
// which the replay reports as they are ("targets": where fcb-conformance's own
// run would say it failed on every target, as a compile error does). "inputs" are the inputs fed at run
// time, in the order of data set's input_<k>.pb (those baked in as constants,
// "const_inputs", are in the .fcb); "outputs" are every model output in order.
// Each data set names the .fcb compiled for it: one per test, or one per data
// set when its input shapes differ from the previous one's or its inputs are
// baked in. Every .fcb holds "targets". A tensor's "dtype" is fcb's name
// (DTypeName); .npy cannot hold bfloat16, so a "bfloat16" tensor's file holds
// its uint16 bit patterns. "tolerance" is the comparison's (compare.h).
#pragma once

#include <string>
#include <vector>

#include "conformance/compare.h"
#include "conformance/report.h"
#include "fcb/status.h"

namespace fcb::conformance {

inline constexpr const char* kManifestFile = "manifest.json";

struct ExportedTensor {
  std::string name;  // the model's input or output name
  std::string file;  // .npy, relative to the test's folder
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

struct ExportedDataSet {
  std::string name;  // "test_data_set_0"
  std::string fcb;   // the .fcb to run it on, relative to the test's folder
  std::vector<ExportedTensor> inputs, outputs;
};

struct ManifestTest {
  // name, op, ops and const_inputs always; outcome, failure_kind, reason and
  // target_pass when the test was not exported.
  TestResult recorded;
  bool exported = false;
  Tolerance tolerance;
  std::vector<std::string> fcb_files;
  std::vector<ExportedDataSet> data_sets;
};

struct Manifest {
  std::string producer;              // "fcb <version>" of the exporter
  std::string source;                // the node test folder it was made from
  std::vector<std::string> targets;  // every .fcb holds these
  std::vector<ManifestTest> tests;
};

// Writes `m` to `path` (IoError naming it on failure).
Status WriteManifest(const std::string& path, const Manifest& m);

// Reads and checks `path`: NotFound, IoError, or CorruptFile naming the file,
// the test and the key that is missing or wrong.
Result<Manifest> ReadManifest(const std::string& path);

// The .npy image of a tensor of dtype `dtype`: bfloat16 goes as its uint16
// bit patterns. Unsupported when .npy cannot hold the type at all.
Result<NpyArray> ToNpy(NpyArray t);

// Reads `t`'s file (under `test_dir`) and checks it is what the manifest
// says; bfloat16 files come back with dtype kBF16.
Result<NpyArray> ReadExportedTensor(const std::string& test_dir, const ExportedTensor& t);

}  // namespace fcb::conformance
