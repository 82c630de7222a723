// fcb: compile / run / inspect / bench / targets / ops. See cli.h and README.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/cli.h"

namespace {

// The arguments run, bench and profile share, with the same words in --help.
void AddProgramOptions(CLI::App* cmd, fcb::cli::ProgramArgs& a) {
  cmd->add_option("file", a.file, ".fcb file")->required();
  cmd->add_option("--method", a.method, "method name (default: the only one)");
  cmd->add_option("--target", a.target, "target to force (default: auto)");
  cmd->add_option("--threads", a.threads, "threads (default 1)");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fcb::cli;
  CLI::App app{"fcb: ahead-of-time compiler and runtime for multi-target Flexible Context Binaries"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("fcb ") + fcb::Version());

  CompileArgs ca;
  auto* compile = app.add_subcommand("compile", "compile ONNX model(s) into one .fcb");
  compile->add_option("model", ca.model, "ONNX model (method 'main'); or use --method");
  compile->add_option("-o,--output", ca.output, "output .fcb file")->required();
  compile->add_option("--target", ca.targets, "target (repeatable; 'all' = every known target)");
  compile->add_option("--target-options", ca.target_options, "JSON options, once per --target, same order, e.g. '{\"optimization_level\": 2, "
                      "\"precision\": \"int8\"}' (precision: fp32, bf16, int8 or int4; int4_head: true/false; int4_activations: int8/float)");
  compile->add_option("--precision", ca.precision,
                      "fp32, bf16, int8 or int4: every target's precision (overrides --target-options' and the spec's)");
  compile->add_flag("--int4-head", ca.int4_head,
                    "with --precision int4: the LM head and embedding tables 4-bit too (default: 8-bit)");
  compile->add_option("--int4-activations", ca.int4_activations,
                      "with --precision int4: int8 (default: activations quantized per block, integer dot "
                      "products) or float (float arithmetic on the dequantized weights)");
  compile->add_option("--spec", ca.spec_path, "JSON compile spec (flags given too override its fields)");
  compile->add_option("--input-shape", ca.input_shapes,
                      "[METHOD:]NAME=1x3x224x224; LO..HI bounds a dim, e.g. NAME=1x1..512 (repeatable)");
  compile->add_option("--input-value", ca.input_values,
                      "[METHOD:]NAME=FILE.npy: fix an input to a constant (repeatable)");
  compile->add_option("--method", ca.methods, "NAME=MODEL.onnx (repeatable)");
  compile->add_option("--attach", ca.attachments,
                      "NAME=FILE: store FILE's bytes in the .fcb as attachment NAME (repeatable)");
  compile->add_flag("--no-weight-sharing", ca.no_weight_sharing, "store per-target weight copies");
  compile->add_option("--state", ca.state,
                      "'auto' (pair past*/present* names) or [METHOD:]PAST=PRESENT: keep a KV cache between runs "
                      "(repeatable)");
  compile->add_option("--kv-capacity", ca.kv_capacity,
                      "with --state: keep a growing past (GroupQueryAttention's, or present = Concat(past, "
                      "new)) as a cache of N positions updated in place");
  compile->add_option("--keep-output", ca.keep_outputs,
                      "[METHOD:]NAME: keep only the outputs named (repeatable; the others and what only they need "
                      "are dropped)");

  RunArgs ra;
  auto* run = app.add_subcommand("run", "run a method of an .fcb on .npy inputs");
  AddProgramOptions(run, ra);
  run->add_option("--input", ra.inputs, "NAME=FILE.npy (repeatable)");
  run->add_option("--output-dir", ra.output_dir, "where to write <output>.npy (default .)");
  run->add_flag("--no-verify", ra.no_verify, "skip checksum verification of the file");
  run->add_option("--max-memory", ra.max_memory,
                  "bytes the load, and the run, may each allocate (default 0: this host's available memory)");

  std::string inspect_file;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "describe an .fcb file");
  inspect->add_option("file", inspect_file, ".fcb file")->required();
  inspect->add_flag("--json", inspect_json, "machine-readable output");

  BenchArgs ba;
  auto* bench = app.add_subcommand("bench", "time loading and running a method");
  AddProgramOptions(bench, ba);
  bench->add_option("--iterations", ba.iterations, "timed runs (default 20)");
  bench->add_flag("--json", ba.json, "machine-readable output");
  bench->add_option("--max-memory", ba.max_memory,
                    "bytes the load, and each run, may allocate (default 0: this host's available memory)");

  ProfileArgs pa;
  auto* profile = app.add_subcommand("profile", "time every step of a method: a table, per-op totals, a trace file");
  AddProgramOptions(profile, pa);
  profile->add_option("--iterations", pa.iterations, "profiled runs; each step's time is its median (default 20)");
  profile->add_option("--input", pa.inputs, "NAME=FILE.npy (repeatable; default: pseudo-random values)");
  profile->add_flag("--json", pa.json, "machine-readable output");
  profile->add_option("--trace", pa.trace, "write a Chrome trace-event JSON file (Perfetto, chrome://tracing)");

  GenerateArgs ga;
  auto* generate = app.add_subcommand("generate", "greedy generation on token ids with a prefill and a decode method");
  generate->add_option("file", ga.file, ".fcb file (methods 'prefill' and 'decode' sharing a state)")->required();
  generate->add_option("--prompt", ga.prompt, "prompt token ids, comma-separated, e.g. 1,2,3")->required();
  generate->add_option("--max-new", ga.max_new, "tokens to generate (default 16)");
  generate->add_option("--threads", ga.threads, "threads (default 1)");
  generate->add_option("--target", ga.target, "target to force (default: auto)");
  generate->add_option("--reference", ga.reference,
                       "FILE.fcb (e.g. the fp32 compile of this model): generate with it too and print the token "
                       "agreement and the logits' rel L2 against it");

  bool targets_json = false, ops_json = false;
  auto* targets = app.add_subcommand("targets", "list known targets and what this host runs");
  targets->add_flag("--json", targets_json, "machine-readable output");
  auto* ops = app.add_subcommand("ops", "list supported ONNX operators");
  ops->add_flag("--json", ops_json, "machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << "\n(run 'fcb --help' or 'fcb SUBCOMMAND --help' for usage)\n";
    return 2;
  }
  if (*compile) return CmdCompile(ca);
  if (*run) return CmdRun(ra);
  if (*inspect) return CmdInspect(inspect_file, inspect_json);
  if (*bench) return CmdBench(ba);
  if (*profile) return CmdProfile(pa);
  if (*generate) return CmdGenerate(ga);
  if (*targets) return CmdTargets(targets_json);
  if (*ops) return CmdOps(ops_json);
  return Fail("no subcommand", 2);
}
