// The ONNX backend node-test runner: one test = a folder with model.onnx and
// test_data_set_*/{input,output}_*.pb. Each supported test is compiled once
// for every target into one .fcb, then run and compared on each target the
// host can run; or, with an export folder, compiled and written out with its
// data as .npy for fcb-conformance-replay to run elsewhere (manifest.h).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "conformance/compare.h"
#include "conformance/manifest.h"
#include "conformance/report.h"

namespace fcb::conformance {

struct Options {
  std::vector<std::string> targets;  // compiled into one .fcb; those the host can run are run
  Tolerance tolerance;
  std::string tmp_dir;               // per-test scratch files go here
  // Set by ExportTest: the folder the test's own folder is made in.
  std::string export_dir;
};

// Names of the ONNX operators fcb accepts (`fcb ops`).
const std::set<std::string>& SupportedOps();

// The operator a test is counted under: for one-node models that node's
// op_type; otherwise the ONNX operator named by the test folder
// (test_reduce_log_sum_exp_* -> ReduceLogSumExp; "_expanded" tests).
std::string PrimaryOp(const std::string& test_name, const std::vector<std::string>& node_ops);

// Runs one test folder.
TestResult RunTest(const std::string& dir, const Options& opt);

// Classifies and compiles one test folder as RunTest does, but instead of
// running it writes export_dir/<test name>/ (its .fcb files and the data sets
// as .npy) and returns its manifest entry: exported, or the outcome already
// known (unsupported, or a failure before anything could run).
ManifestTest ExportTest(const std::string& dir, const std::string& export_dir, const Options& opt);

}  // namespace fcb::conformance
