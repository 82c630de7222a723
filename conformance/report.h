// The results of a conformance run and how they are reported: the
// per-operator table, the pass rate per target, the failures, the JSON file.
// fcb-conformance and fcb-conformance-replay print the same report through
// this one function. Depends on nothing of fcb's.
#pragma once

#include <functional>
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

// "pass", "fail", "unsupported"; ParseOutcome is its inverse (false: unknown).
const char* OutcomeName(Outcome o);
bool ParseOutcome(const std::string& name, Outcome* o);

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

struct ReportOptions {
  std::vector<std::string> targets;  // the targets of the per-target pass rates
  double seconds = 0;                // wall time of the whole run
  std::string json_path;             // "" = no JSON file
  double min_pass_rate = 0.95;
  bool list_failures = false;
};

// Drops the file paths the compiler puts around its messages ("model '...': ",
// "method 'main' (...): "): the test name already says which model it was.
std::string TidyPaths(const std::string& message);
// A failure's reason as reported: TidyPaths, clipped to 400 characters.
std::string ReasonText(const std::string& message);

// Runs fn(i) for every i in [0, n) on `jobs` threads.
void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn);

// "a,b,,c" -> {"a", "b", "c"}: the value of a --targets flag.
std::vector<std::string> SplitList(const std::string& comma_separated);

// Whether test `name` is selected by --filter flags: it contains one of them
// (no filters: every test).
bool Selected(const std::string& name, const std::vector<std::string>& filters);

// Expected failures: tests no implementation of the operator's specification
// can pass, each with the reason. Their expected outputs are draws of NumPy's
// random generator (the Bernoulli tests and their RandomUniformLike
// expansions), which fcb's own documented generator (src/ops/random.cc) does
// not reproduce. Such a test still compiles and runs on every target; when it
// fails, the report counts it as failure kind "expected", lists it with this
// reason, and leaves it out of the pass rate (passed / (supported - expected
// failures)); the total is printed beside the rate. Null: not listed.
const char* ExpectedFailureReason(const std::string& test_name);

// Prints the report of `results` (in their order) to stdout, writes the JSON
// file when asked. 0, or 1 when the pass rate is below opt.min_pass_rate or
// the JSON file cannot be written (with "error: ..." on stderr).
int Report(const std::vector<TestResult>& results, const ReportOptions& opt);

}  // namespace fcb::conformance
