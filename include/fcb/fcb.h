// fcb public API: compile ONNX models into one multi-target .fcb, load it, run it.
// (fcb/inspect.h describes targets, operators and files; fcb/npy.h reads and
// writes NumPy .npy files.) libfcb.so exports exactly what include/fcb/ marks
// FCB_API, see fcb/export.h.
//
// Ownership and threading, in one sentence each:
// - Compile*/ParseSpecJson are reentrant and thread-safe; they own nothing after returning.
// - A Program is immutable after Load and safe to share across threads (shared_ptr).
// - An Execution is mutable and used by one thread at a time; it keeps its
//   Program alive and owns its arena and thread pool.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fcb/dtype.h"
#include "fcb/export.h"
#include "fcb/npy.h"
#include "fcb/status.h"

namespace fcb {

// ----------------------------------------------------------------- compiling

// Options of one target. Defaults are documented in the README.
struct TargetOptions {
  int optimization_level = 2;    // 0: no fusion, straightforward kernels; 1-3: optimizing pipeline
  // "fp32"; "bf16" (conv/GEMM weights stored as bfloat16); "int8" (Conv/MatMul/
  // Gemm weights quantized per output channel to symmetric int8 at compile time,
  // their inputs quantized per run as DynamicQuantizeLinear does). bf16 and int8
  // need optimization_level >= 1. "int4": weight-only, MatMul/Gemm weights as
  // 4-bit symmetric blocks of 32 (com.microsoft MatMulNBits), the LM head and
  // embedding tables at 8 bits; needs optimization_level >= 1 as well.
  std::string precision = "fp32";
  // With precision "int4": the LM head and embedding tables 4-bit too (default
  // false: they stay 8-bit, where most of int4's accuracy loss would be).
  bool int4_head = false;
  // With precision "int4": how the quantized MatMuls compute. "" or "int8"
  // (the default): activations quantized to int8 per block of 32 values of a
  // row and exact integer dot products with the 4/8-bit weights, scaled in
  // float (MatMulNBits accuracy_level 4: what ONNX Runtime GenAI's CPU int4
  // models use, and what llama.cpp's 4-bit formats do; the VNNI/SDOT kernels);
  // "float": float32 arithmetic on the exactly dequantized weights
  // (accuracy_level 0: no activation rounding, slower).
  std::string int4_activations;
  bool operator==(const TargetOptions&) const = default;
};

// One dimension of an input shape in CompileSpec::input_shapes: a fixed size,
// or a range lo..hi bounded at compile time whose size is chosen at each run.
// An integer converts implicitly, so {1, 3, 224, 224} is four fixed sizes and
// {1, {1, 512}} a fixed 1 and the range 1..512. lo == hi is that fixed size.
// Sizes start at 1; ValidateSpec refuses lo < 1 and lo > hi.
struct InputDim {
  int64_t lo = 1, hi = 1;
  InputDim() = default;
  InputDim(int64_t size) : lo(size), hi(size) {}  // NOLINT: implicit by design
  InputDim(int64_t lo_, int64_t hi_) : lo(lo_), hi(hi_) {}
  bool is_range() const { return lo != hi; }
  bool operator==(const InputDim&) const = default;
};

struct CompileSpec {
  // Ordered target names ("generic", "x86-64-v2", "x86-64-v3", "x86-64-v4"; "all" = every known).
  std::vector<std::string> targets;
  // Empty (every target uses defaults), or exactly one per target, position i for target i.
  std::vector<TargetOptions> target_options;
  bool weight_sharing = true;
  // "NAME" applies to every method, "METHOD:NAME" to one; dims fix symbolic
  // input dims, or bound them (a range). A symbolic dim (ONNX dim_param) is
  // one size at run time: a size or range given for it in one input applies
  // to every input using it. Ranges are validated against the model but not
  // compiled yet: the import refuses a range with lo < hi as unsupported.
  std::map<std::string, std::vector<InputDim>> input_shapes;
  // "NAME" applies to every method, "METHOD:NAME" to one (it wins over "NAME"
  // for that method). Fixes a graph input to a constant: it is no longer an
  // input of that method and is folded like any constant (a flag selecting
  // an If branch picks that branch at compile time). The value is converted
  // to the input's declared type when every element fits (bool only to
  // bool); its shape must fit the model's dims. On an input that also has an
  // initializer (older IR versions), it replaces the initializer's value.
  std::map<std::string, NpyArray> input_values;
  // Named byte strings stored in the file for the application (a tokenizer's
  // vocabulary, generation settings): name -> bytes, read back with
  // Program::attachment. Names: 1 to limits::kMaxAttachmentNameBytes bytes of
  // printable ASCII without spaces or '='; at most limits::kMaxAttachments.
  std::map<std::string, std::string> attachments;
  // State kept between runs (a KV cache; docs/design.md section 14): past
  // input name -> the output that carries its next value ("NAME" applies to
  // every method, "METHOD:NAME" to one, as in input_shapes). Both must have
  // one dtype and fixed shape, and the output must be written in place over
  // the input (a com.microsoft.GroupQueryAttention static buffer: past and
  // present of one capacity); anything else is refused naming the fix. The
  // runtime then keeps them as one buffer in a State shared by the methods.
  std::map<std::string, std::string> state;
  // Also pair, in every method, the inputs and outputs named as exporters
  // name a cache: past_key_values.N.key -> present.N.key (and .value), and
  // any past* -> present* (past_key_N -> present_key_N). The spec's
  // "state": "auto". Refused when no method has such a pair.
  bool state_auto = false;
  // KV capacity (0: off; else 1..kMaxKvCapacity): with "state", every
  // com.microsoft.GroupQueryAttention whose past_key/past_value is a graph
  // input of a growing cache (past [B, kv, P, H] -> present [B, kv, P+S, H],
  // as ONNX Runtime GenAI writes it) is compiled as a static buffer of this
  // many positions: the past input's sequence dim is fixed at kv_capacity,
  // present shares its shape and is written in place (only the new rows),
  // and attention reads only the valid length (seqlens_k). The sequence a
  // call sees (attention_mask's length, total_sequence_length) must then be
  // bounded by kv_capacity in input_shapes. Refused without "state", where
  // no method has such a past input, and where a past it fixes is not bound
  // as a state. The spec's "kv_capacity", fcb compile --kv-capacity.
  int64_t kv_capacity = 0;
  static constexpr int64_t kMaxKvCapacity = int64_t{1} << 20;
  // The outputs a method keeps (empty: every output of every method). "NAME"
  // applies to every method, "METHOD:NAME" to one, as in input_shapes: a
  // method that some entry applies to keeps exactly the outputs named for it,
  // in the model's order; the rest become internal values, and what only they
  // needed is dropped (dead-node elimination). A method no entry applies to
  // (only "OTHER:NAME" entries) keeps all its outputs. Refused, naming the
  // method and its outputs: an entry listed twice (or an output named both as
  // "NAME" and "METHOD:NAME"), a name that is not an output of a method it
  // applies to, a METHOD that is not compiled, and dropping the output that a
  // state pair (explicit or "auto") carries its next value in. The spec's
  // "outputs", fcb compile --keep-output.
  std::vector<std::string> outputs;
};

// What precision "int8" costs one method: its int8 context against an fp32
// compile of the same method (same optimization level), both run on this host
// on the same deterministic inputs (float inputs: seeded standard-normal values;
// integer and bool inputs: zeros; other types: zero bytes).
struct Int8Accuracy {
  std::string method;
  // The target both were compiled for and run on: the best one this host runs
  // among the spec's int8 targets, or, when it runs none of them, this host's
  // best target (compiled with the same int8 options; on_int8_target = false).
  std::string target;
  bool on_int8_target = true;
  // The spec's int8 targets this measurement stands for (their int8 contexts
  // run the same quantized graph; integer arithmetic is exact on every target).
  std::vector<std::string> int8_targets;
  int inputs = 0;          // seeded input sets run
  int float_outputs = 0;   // float32 outputs compared per input set
  // ||y_int8 - y_fp32|| / ||y_fp32||, all float outputs of all input sets
  // together; NaN when it could not be measured (see error).
  double rel_l2 = 0;
  std::string error;  // empty when measured
};

struct CompileReport {
  std::vector<std::string> warnings;  // "weight sharing defeated: ...", already formatted
  uint64_t file_size = 0;
  // One entry per (method, int8 options) when some target has precision "int8".
  std::vector<Int8Accuracy> int8_accuracy;
};

// Progress callback: (stage, method, target). May be null.
using ProgressFn = void (*)(void* user, const std::string& stage, const std::string& method,
                            const std::string& target);

struct CompileHooks {
  ProgressFn progress = nullptr;
  void* user = nullptr;
};

// Compiles one model; the method is named "main". Same as CompileMethods({{"main", model}}).
FCB_API Result<CompileReport> Compile(const std::string& model_path, const CompileSpec& spec,
                                      const std::string& out_path, const CompileHooks& hooks = {});
// Compiles several methods (name -> ONNX path) into one file with a shared weight pool.
FCB_API Result<CompileReport> CompileMethods(const std::map<std::string, std::string>& methods,
                                             const CompileSpec& spec, const std::string& out_path,
                                             const CompileHooks& hooks = {});

// The report as JSON text: {"file_size", "warnings", "int8_accuracy": [{"method",
// "target", "on_int8_target", "int8_targets", "inputs", "float_outputs",
// "rel_l2" (null when not measured), "error"}]}, the form the C API's
// fcb_compile and Python's fcb.compile() return. indent < 0: one line.
FCB_API std::string CompileReportJson(const CompileReport& report, int indent = -1);

// Parses a JSON compile spec (see README). Validation errors name the fix.
// "attachments" ({"NAME": "path"}) are read here with ReadAttachmentFile,
// after every name is checked, so the spec it returns holds their bytes.
FCB_API Result<CompileSpec> ParseSpecJson(const std::string& json_text);
// Parses one target's options object, e.g. {"optimization_level": 1}: its keys
// and their types. The values are checked by ValidateSpec, once it is known
// which target the options belong to (its errors name that target).
FCB_API Result<TargetOptions> ParseTargetOptionsJson(const std::string& json_text);
// The bytes of the regular file at `path`, to store as attachment `name`
// (CompileSpec::attachments; the spec's "attachments" and --attach read files
// this way). NotFound naming the file when it does not exist,
// InvalidArgument when it is not a regular file, IoError when it cannot be read.
FCB_API Result<std::string> ReadAttachmentFile(const std::string& name, const std::string& path);
// Checks a spec before any work: targets, lengths, duplicates, options.
FCB_API Status ValidateSpec(const CompileSpec& spec);

// ------------------------------------------------------------------- running

// Element types: DType, DTypeName, DTypeSize (fcb/dtype.h).

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  // The shape the method was planned for: for an input or output whose dims
  // are chosen at each run (a range in the compile spec), the largest one
  // (every symbol at its upper bound).
  std::vector<int64_t> shape;
  // Inputs only, per dim: the smallest size a run may give it (equal to
  // `shape` where the dim is fixed) and the name of the symbol it is ("" where
  // fixed; dims with one symbol take one size in a run). Empty for outputs
  // and for inputs whose dims are all fixed.
  std::vector<int64_t> min_shape;
  std::vector<std::string> symbols;
  bool dynamic() const { return !min_shape.empty(); }
  FCB_API uint64_t bytes() const;  // of `shape`
};

// One step of a profiled run (Execution::RunProfiled).
struct StepTiming {
  std::string op;                    // what the step runs: an ONNX operator, or an fcb kernel such as ConvNhwc
  std::string node;                  // the ONNX node it was compiled from
  DType output_dtype = DType::kF32;  // its first output's
  std::vector<int64_t> output_shape;
  double start_ms = 0;               // from the start of the run
  double ms = 0;                     // its duration
  uint64_t flops = 0;                // arithmetic operations (2 per multiply-add); 0 where not defined
  // Bytes the step writes: its outputs' bytes (the first at this run's
  // shape, the others at the planned one), except that an output updated in
  // place in a State counts only the rows the step appends (new tokens x
  // batch x heads x row bytes), which is what shows a cache is not copied.
  uint64_t bytes_written = 0;
};

struct MethodInfo {
  std::string name;
  std::vector<TensorSpec> inputs, outputs;
};

struct LoadOptions {
  std::string target = "auto";   // "auto" = best the host can run, or a target name to force
  bool verify_checksums = true;
  // The most memory one execution may allocate: its arena plus every
  // thread's scratch, as the file declares them (sizes come from the file,
  // so they are checked before anything is allocated). 0 = the memory this
  // host has available when the program loads (MemAvailable, else physical
  // memory). Load refuses a method that cannot run within it even on one
  // thread, Execution::Create a thread count that would pass it: both with
  // ResourceExhausted naming the limit and the bytes asked for.
  uint64_t max_memory_bytes = 0;
};

class ProgramImpl;
struct ProgramAccess;  // the runtime's own way in (src/runtime/program_impl.h)

class FCB_API Program {
 public:
  // Maps and verifies `path`, then selects the target. Errors: CorruptFile (with
  // the byte offset), Unavailable (forced target not runnable or none runnable:
  // the message lists what the file holds and what the host supports).
  // The bulk float weights are checksummed on a background thread while the
  // caller goes on (everything that can steer control flow or addressing is
  // checked before Load returns): Execution::Run waits for that check and
  // fails with CorruptFile if it did not pass.
  static Result<std::shared_ptr<const Program>> Load(const std::string& path,
                                                     const LoadOptions& options = {});
  ~Program();

  const std::string& target() const;           // the selected target
  std::vector<std::string> targets_in_file() const;
  std::vector<std::string> methods() const;
  // The method's inputs/outputs; NotFound lists the methods.
  Result<MethodInfo> method(const std::string& name) const;
  // The only method's name, or InvalidArgument listing them when there are several.
  Result<std::string> default_method() const;
  // The names of the file's attachments (CompileSpec::attachments), in file
  // order, which is sorted by name.
  std::vector<std::string> attachments() const;
  // Attachment `name`'s bytes: a view into the file's read-only mapping,
  // valid while this Program lives. Checked against the checksum the file
  // records for them on every call (CorruptFile on mismatch, whatever
  // LoadOptions::verify_checksums says); NotFound names the file and lists
  // the names it has.
  Result<std::string_view> attachment(const std::string& name) const;

 private:
  friend struct ProgramAccess;
  FCB_INTERNAL explicit Program(std::unique_ptr<ProgramImpl> impl);
  std::unique_ptr<ProgramImpl> impl_;
};

class StateImpl;

// The state a program's methods keep between runs (a KV cache; the compile
// spec's "state" declares it, docs/design.md section 14): one buffer per
// state variable, which the executions bound to this State read and update
// in place, so that one method (prefill) fills a cache and another (decode)
// continues it with nothing copied between runs. Two States of one program
// are independent. A State is used by one thread at a time: the executions
// bound to it must not run concurrently.
class FCB_API State {
 public:
  // Zeroed buffers for every state variable of the program's methods (none:
  // an empty State). ResourceExhausted when they cannot be allocated.
  static Result<std::shared_ptr<State>> Create(std::shared_ptr<const Program> program);
  ~State();
  // The state variables: the bound inputs' names, dtypes and shapes.
  std::vector<TensorSpec> variables() const;
  // Variable `name`'s bytes (valid while the State lives); NotFound lists the names.
  Result<void*> data(const std::string& name);
  // Zeroes every variable (an empty cache) and every valid length.
  void Reset();
  // The valid rows per head of variable `name` when it is a growing cache
  // (kv_capacity with present = Concat(past, new): its buffer is [B, heads,
  // capacity, head] and each run appends its new rows after these); 0 for a
  // static buffer (GroupQueryAttention's, whose valid length is seqlens_k).
  // NotFound lists the names.
  Result<int64_t> valid_length(const std::string& name) const;

 private:
  friend class Execution;
  friend class ExecutionImpl;
  FCB_INTERNAL explicit State(std::unique_ptr<StateImpl> impl);
  std::unique_ptr<StateImpl> impl_;
};

class ExecutionImpl;

class FCB_API Execution {
 public:
  // num_threads >= 1 (1 = run on the calling thread only). A method with
  // state gets a State of its own (State::Create).
  static Result<std::unique_ptr<Execution>> Create(std::shared_ptr<const Program> program,
                                                   const std::string& method, int num_threads = 1);
  // The same, bound to `state` (a State of the same program; null: one of
  // its own): the method's state inputs and outputs are that State's
  // buffers. Run reads a state input from the buffer and the step producing
  // its output updates it there (no copy in or out); SetInput on a state
  // input writes the buffer, output_data of a state output points into it.
  // Before any step runs, Run refuses a step whose valid length would pass a
  // state's capacity (InvalidArgument naming the method, input and
  // capacity; the state is left as it was).
  static Result<std::unique_ptr<Execution>> Create(std::shared_ptr<const Program> program,
                                                   const std::string& method, int num_threads,
                                                   std::shared_ptr<State> state);
  ~Execution();

  // The State this execution is bound to (null when the method has none).
  const std::shared_ptr<State>& state() const;
  // Zeroes the bound State (every variable, also those of other methods).
  void ResetState();

  const MethodInfo& info() const;
  // Copies `bytes` bytes into input `name`; the size must match its spec.
  // An input keeps its value until it is set again: Run reads the inputs and
  // never overwrites them, so only the inputs that change need setting. An
  // input with dims chosen at each run keeps the shape it was last given
  // (at first the largest, TensorSpec::shape).
  Status SetInput(const std::string& name, const void* data, size_t bytes);
  // The same with the input's shape for this run: any shape within the
  // ranges the method was compiled for (TensorSpec::min_shape .. shape).
  // A shape outside them is refused (InvalidArgument naming the input, the
  // dim, its symbol and its range) and nothing is written; the execution
  // stays usable. Dims that are one symbol must agree across inputs, which
  // Run checks. The first run at a new combination of sizes resolves every
  // step's shapes once (kept for the next runs at those sizes).
  Status SetInput(const std::string& name, const void* data, size_t bytes, const std::vector<int64_t>& shape);
  // The shape input i has now.
  const std::vector<int64_t>& input_shape(size_t i) const;
  Status Run();
  // Run, timing every step: `steps` gets one entry per step, in order. The
  // same kernels and results as Run, plus a clock read per step.
  Status RunProfiled(std::vector<StepTiming>* steps);
  // Pointer to output i's bytes, valid until the next Run or destruction.
  const void* output_data(size_t i) const;
  // Output i's shape in the last run (before any run: the planned shape),
  // and its bytes (densely laid out at output_data).
  const std::vector<int64_t>& output_shape(size_t i) const;
  uint64_t output_bytes(size_t i) const;

 private:
  FCB_INTERNAL explicit Execution(std::unique_ptr<ExecutionImpl> impl);
  std::unique_ptr<ExecutionImpl> impl_;
};

FCB_API const char* Version();

}  // namespace fcb
