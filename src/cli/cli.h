// The fcb command-line tool: one function per subcommand, sharing helpers.
// Contract (README "Command line", docs/design.md "Errors"): exit 0 on success; otherwise non-zero with
// "error: ..." on stderr; warnings as "warning: ...".
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fcb/fcb.h"

namespace fcb::cli {

struct CompileArgs {
  std::string model, output, spec_path;
  std::vector<std::string> targets, target_options, input_shapes, input_values, methods;
  std::vector<std::string> attachments;  // --attach NAME=FILE
  bool no_weight_sharing = false;
  std::vector<std::string> state;  // --state auto | [METHOD:]PAST=PRESENT
  int64_t kv_capacity = -1;        // --kv-capacity N (-1: the spec's)
  std::vector<std::string> keep_outputs;  // --keep-output [METHOD:]NAME (replaces the spec's "outputs")
  std::string precision;           // --precision P: every target's precision ("" : the options')
  bool int4_head = false;
  std::string int4_activations;    // --int4-activations int8|float          // --int4-head: precision int4 keeps the LM head and embeddings 4-bit
};
// fcb generate: greedy generation on token ids with the prefill and decode
// methods sharing one State.
struct GenerateArgs {
  std::string file, target = "auto", prompt;
  int threads = 1;
  int max_new = 16;
  std::string reference;  // --reference FILE.fcb: compare tokens and logits with its generation
};
// What run, bench and profile share: the file, the method, the target, threads.
struct ProgramArgs {
  std::string file, method, target = "auto";
  int threads = 1;
};
struct RunArgs : ProgramArgs {
  std::string output_dir = ".";
  std::vector<std::string> inputs;
  bool no_verify = false;
  uint64_t max_memory = 0;  // LoadOptions::max_memory_bytes
};
struct ProfileArgs : ProgramArgs {
  std::string trace;
  std::vector<std::string> inputs;
  int iterations = 20;
  bool json = false;
};
struct BenchArgs : ProgramArgs {
  int iterations = 20;
  bool json = false;
  uint64_t max_memory = 0;  // LoadOptions::max_memory_bytes
};

int CmdCompile(const CompileArgs& a);
int CmdRun(const RunArgs& a);
int CmdInspect(const std::string& file, bool json);
int CmdBench(const BenchArgs& a);
int CmdProfile(const ProfileArgs& a);
int CmdGenerate(const GenerateArgs& a);
int CmdTargets(bool json);
int CmdOps(bool json);

// Prints "error: <msg>" and returns 1 (2 for usage errors).
int Fail(const Status& s);
int Fail(const std::string& msg, int code = 1);
void Warn(const std::string& msg);
// A name from a file (method, input, output, target) made safe to print
// (fcb::EscapeForDisplay): control bytes and invalid UTF-8 as \xNN.
std::string Shown(const std::string& name);
// "1x3x64x64"; "scalar" for rank 0.
std::string ShapeText(const std::vector<int64_t>& s);
// JSON text that never throws on invalid UTF-8 in strings from files.
std::string Json(const nlohmann::ordered_json& j, int indent = -1);

// Splits "NAME=VALUE" at the last '=' ... first '='; errors name the flag.
Result<std::pair<std::string, std::string>> SplitAssign(const std::string& s, const std::string& flag);
// "1x3x224x224" -> dims; a range is LO..HI, e.g. "1x1..512".
Result<std::vector<InputDim>> ParseDims(const std::string& s, const std::string& flag);

// Shared by run and bench: loads the program and picks the method.
struct Loaded {
  std::shared_ptr<const Program> program;
  std::string method;
  double load_ms = 0;
};
// Sets each input from a --input NAME=FILE.npy in `given`, and every other
// input to deterministic pseudo-random values (saying so unless `quiet`).
Status BindInputs(Execution& ex, const std::vector<std::string>& given, bool quiet);
// Whether `in` is a growing KV cache of the execution's State (kv_capacity
// with present = Concat(past, new)): BindInputs leaves it to the State
// (empty unless --input loads rows).
bool IsGrowingState(const Execution& ex, const TensorSpec& in);
// A callable that sets every growing KV cache back to its valid rows now, so
// that repeated runs (profile, bench) each start from the same cache.
std::function<Status()> StateRewinder(Execution& ex);

// The head of bench's and profile's --json document: target, method,
// threads, iterations.
nlohmann::ordered_json TimingJson(const Loaded& l, int threads, int iterations);

Result<Loaded> LoadForRun(const std::string& file, const std::string& target, const std::string& method,
                          bool verify,
                          uint64_t max_memory_bytes = 0);

}  // namespace fcb::cli
