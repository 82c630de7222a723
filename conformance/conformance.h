// The ONNX backend node-test runner: one test = a folder with model.onnx and
// test_data_set_*/{input,output}_*.pb. Each supported test is compiled once
// for every target into one .fcb, then run and compared on each target the
// host can run.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace fcb::conformance {

enum class Outcome {
  kPass,         // every data set matches on every runnable target
  kFail,         // a mismatch, a compile error or a run error
  kUnsupported,  // the model uses an operator that `fcb ops` does not list
};

struct TestResult {
  std::string name;            // folder name, e.g. "test_conv_with_strides_padding"
  std::string op;              // the operator the test is counted under
  std::set<std::string> ops;   // every op_type of the model's nodes
  Outcome outcome = Outcome::kFail;
  std::string reason;          // why it failed / what is unsupported
  // For kFail, the kind of failure: "refused" (compiling failed with
  // Unsupported: a type, mode or attribute value fcb does not handle),
  // "compile error", "error" (test data, load or run) or "wrong result".
  std::string failure_kind;
  std::map<std::string, bool> target_pass;  // target -> passed (targets that ran)
  // 0: every input fed at run time; 1: inputs after the first baked in as
  // initializers; 2: all inputs baked (see run_test.cc).
  int const_inputs = 0;
  double seconds = 0;
};

struct Options {
  std::vector<std::string> targets;  // compiled into one .fcb; those the host can run are run
  double rtol = 1e-3, atol = 1e-7;
  std::string tmp_dir;               // per-test scratch files go here
};

// Names of the ONNX operators fcb accepts (`fcb ops`).
const std::set<std::string>& SupportedOps();

// The operator a test is counted under: for one-node models that node's
// op_type; otherwise the ONNX operator named by the test folder
// (test_reduce_log_sum_exp_* -> ReduceLogSumExp; "_expanded" tests).
std::string PrimaryOp(const std::string& test_name, const std::vector<std::string>& node_ops);

// Runs one test folder.
TestResult RunTest(const std::string& dir, const Options& opt);

}  // namespace fcb::conformance
