// The C API (include/fcb/fcb_c.h): a thin layer over the C++ API. Every entry
// point catches whatever the C++ side might throw (allocation failures), so
// no exception crosses into C; errors travel as fcb_status_t objects that
// carry the C++ Status's code and message unchanged.
#include "fcb/fcb_c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/inspect.h"

struct fcb_status {
  fcb::StatusCode code;
  std::string message;
};

// A program and the descriptions the C API hands out pointers into: every
// method's MethodInfo (read once at load) and the names' C strings.
struct fcb_program {
  std::shared_ptr<const fcb::Program> program;
  std::vector<std::string> targets_in_file, methods, attachments;
  std::map<std::string, fcb::MethodInfo> infos;
};

struct fcb_execution {
  std::shared_ptr<const fcb::Program> program;  // kept alive for the execution
  std::unique_ptr<fcb::Execution> execution;
};

struct fcb_state {
  std::shared_ptr<fcb::State> state;
};

namespace {

// Out of memory while reporting an error: this preallocated status says so
// (fcb_status_destroy leaves it alone).
fcb_status kOutOfMemory{fcb::StatusCode::kResourceExhausted, "out of memory"};

fcb_status_t* Make(fcb::StatusCode code, std::string message) noexcept {
  try {
    return new fcb_status{code, std::move(message)};
  } catch (...) {
    return &kOutOfMemory;
  }
}

fcb_status_t* FromStatus(const fcb::Status& s) {
  return s.ok() ? nullptr : Make(s.code(), s.message());
}

fcb_status_t* NullArgument(const char* function, const char* parameter) {
  return Make(fcb::StatusCode::kInvalidArgument,
              std::string(function) + ": '" + parameter + "' must not be NULL");
}

// Runs `body` (returning fcb_status_t*) with every exception turned into a status.
template <typename F>
fcb_status_t* Guard(const char* function, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Make(fcb::StatusCode::kResourceExhausted, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return Make(fcb::StatusCode::kInternal, std::string(function) + ": " + e.what());
  } catch (...) {
    return Make(fcb::StatusCode::kInternal, std::string(function) + ": unknown exception");
  }
}

char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void Fill(const fcb::TensorSpec& t, fcb_tensor_info_t* info) {
  info->name = t.name.c_str();
  info->dtype = static_cast<int32_t>(t.dtype);
  info->dtype_name = fcb::DTypeName(t.dtype);
  info->rank = t.shape.size();
  info->shape = t.shape.data();
  info->bytes = t.bytes();
}

// The method `method` names (NULL: the only one) of a loaded program.
fcb::Result<const fcb::MethodInfo*> FindMethod(const fcb_program_t* p, const char* method) {
  std::string name;
  if (method) {
    name = method;
  } else {
    FCB_ASSIGN_OR_RETURN(name, p->program->default_method());
  }
  auto it = p->infos.find(name);
  if (it == p->infos.end()) return p->program->method(name).TakeStatus();  // NotFound listing the methods
  return &it->second;
}

fcb_status_t* Io(const char* function, const std::vector<fcb::TensorSpec>& v, const char* what, size_t index,
                 fcb_tensor_info_t* info) {
  if (!info) return NullArgument(function, "info");
  if (index >= v.size())
    return Make(fcb::StatusCode::kInvalidArgument, std::string(function) + ": " + what + " index " +
                                                       std::to_string(index) + " is out of range; there are " +
                                                       std::to_string(v.size()));
  Fill(v[index], info);
  return nullptr;
}

// Checks a caller's buffer `out` (parameter `parameter`, room for `capacity`
// dims) for the `n` dims of `what`: the convention of
// fcb_execution_output_shape and the *_input_range calls (NULL with capacity
// 0 asks for the rank alone).
fcb_status_t* CheckDimsBuffer(const char* function, const char* parameter, const std::string& what, size_t n,
                              const void* out, size_t capacity, size_t* rank) {
  if (!rank) return NullArgument(function, "rank");
  if (!out && capacity > 0) return NullArgument(function, parameter);
  if (out && capacity < n)
    return Make(fcb::StatusCode::kInvalidArgument,
                std::string(function) + ": capacity " + std::to_string(capacity) + " is below the rank of " + what +
                    " (" + std::to_string(n) + "); pass room for " + std::to_string(n) + " dims");
  return nullptr;
}

fcb_status_t* Range(const char* function, const std::vector<fcb::TensorSpec>& inputs, size_t index,
                    int64_t* min_shape, const char** symbols, size_t capacity, size_t* rank) {
  if (index >= inputs.size())
    return Make(fcb::StatusCode::kInvalidArgument, std::string(function) + ": input index " + std::to_string(index) +
                                                       " is out of range; there are " + std::to_string(inputs.size()));
  const fcb::TensorSpec& t = inputs[index];
  const size_t n = t.shape.size();
  if (fcb_status_t* s = CheckDimsBuffer(function, "min_shape", "input '" + t.name + "'", n, min_shape, capacity, rank))
    return s;
  if (!min_shape && capacity == 0) {
    *rank = n;
    return nullptr;
  }
  for (size_t d = 0; d < n; ++d) {
    min_shape[d] = t.dynamic() ? t.min_shape[d] : t.shape[d];
    if (symbols) symbols[d] = t.dynamic() ? t.symbols[d].c_str() : "";
  }
  *rank = n;
  return nullptr;
}

}  // namespace

extern "C" {

int fcb_c_api_version(void) { return FCB_C_API_VERSION_MAJOR * 1000 + FCB_C_API_VERSION_MINOR; }

const char* fcb_version(void) { return fcb::Version(); }

fcb_status_code_t fcb_status_code(const fcb_status_t* status) {
  return status ? static_cast<fcb_status_code_t>(status->code) : FCB_STATUS_OK;
}

const char* fcb_status_message(const fcb_status_t* status) { return status ? status->message.c_str() : ""; }

const char* fcb_status_code_name(fcb_status_code_t code) {
  return fcb::StatusCodeName(static_cast<fcb::StatusCode>(code));
}

void fcb_status_destroy(fcb_status_t* status) {
  if (status != &kOutOfMemory) delete status;
}

void fcb_string_destroy(char* s) { std::free(s); }

fcb_status_t* fcb_compile(const char* const* method_names, const char* const* model_paths, size_t num_methods,
                          const char* spec_json, const char* out_path, char** report_json) {
  return Guard("fcb_compile", [&]() -> fcb_status_t* {
    if (num_methods == 0)
      return Make(fcb::StatusCode::kInvalidArgument, "fcb_compile: no methods given; pass at least one model");
    if (!method_names) return NullArgument("fcb_compile", "method_names");
    if (!model_paths) return NullArgument("fcb_compile", "model_paths");
    if (!out_path) return NullArgument("fcb_compile", "out_path");
    std::map<std::string, std::string> methods;
    for (size_t i = 0; i < num_methods; ++i) {
      if (!method_names[i] || !model_paths[i])
        return Make(fcb::StatusCode::kInvalidArgument,
                    "fcb_compile: method " + std::to_string(i) + " has a NULL name or model path");
      if (!methods.emplace(method_names[i], model_paths[i]).second)
        return Make(fcb::StatusCode::kInvalidArgument, std::string("fcb_compile: method '") + method_names[i] +
                                                           "' is given twice; name each method once");
    }
    fcb::CompileSpec spec;
    if (spec_json) {
      auto parsed = fcb::ParseSpecJson(spec_json);
      if (!parsed.ok()) return FromStatus(parsed.status());
      spec = std::move(parsed).value();
    } else {
      spec.targets = {"all"};
    }
    auto report = fcb::CompileMethods(methods, spec, out_path);
    if (!report.ok()) return FromStatus(report.status());
    if (report_json) *report_json = CopyString(fcb::CompileReportJson(report.value()));
    return nullptr;
  });
}

fcb_status_t* fcb_program_load(const char* path, const char* target, int verify_checksums,
                               fcb_program_t** program) {
  return fcb_program_load_limited(path, target, verify_checksums, 0, program);
}

fcb_status_t* fcb_program_load_limited(const char* path, const char* target, int verify_checksums,
                                       uint64_t max_memory_bytes, fcb_program_t** program) {
  return Guard("fcb_program_load", [&]() -> fcb_status_t* {
    if (!path) return NullArgument("fcb_program_load", "path");
    if (!program) return NullArgument("fcb_program_load", "program");
    fcb::LoadOptions options;
    options.target = target ? target : "auto";
    options.verify_checksums = verify_checksums != 0;
    options.max_memory_bytes = max_memory_bytes;
    auto loaded = fcb::Program::Load(path, options);
    if (!loaded.ok()) return FromStatus(loaded.status());
    auto p = std::make_unique<fcb_program>();
    p->program = std::move(loaded).value();
    p->targets_in_file = p->program->targets_in_file();
    p->methods = p->program->methods();
    p->attachments = p->program->attachments();
    for (const auto& m : p->methods) {
      auto info = p->program->method(m);
      if (!info.ok()) return FromStatus(info.status());
      p->infos.emplace(m, std::move(info).value());
    }
    *program = p.release();
    return nullptr;
  });
}

void fcb_program_destroy(fcb_program_t* program) { delete program; }

const char* fcb_program_target(const fcb_program_t* program) {
  return program ? program->program->target().c_str() : nullptr;
}

size_t fcb_program_num_targets_in_file(const fcb_program_t* program) {
  return program ? program->targets_in_file.size() : 0;
}

const char* fcb_program_target_in_file(const fcb_program_t* program, size_t index) {
  return program && index < program->targets_in_file.size() ? program->targets_in_file[index].c_str() : nullptr;
}

size_t fcb_program_num_methods(const fcb_program_t* program) { return program ? program->methods.size() : 0; }

const char* fcb_program_method_name(const fcb_program_t* program, size_t index) {
  return program && index < program->methods.size() ? program->methods[index].c_str() : nullptr;
}

size_t fcb_program_num_attachments(const fcb_program_t* program) {
  return program ? program->attachments.size() : 0;
}

const char* fcb_program_attachment_name(const fcb_program_t* program, size_t index) {
  return program && index < program->attachments.size() ? program->attachments[index].c_str() : nullptr;
}

fcb_status_t* fcb_program_attachment(const fcb_program_t* program, const char* name, const void** data,
                                     size_t* size) {
  return Guard("fcb_program_attachment", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_program_attachment", "program");
    if (!name) return NullArgument("fcb_program_attachment", "name");
    if (!data) return NullArgument("fcb_program_attachment", "data");
    if (!size) return NullArgument("fcb_program_attachment", "size");
    auto bytes = program->program->attachment(name);
    if (!bytes.ok()) return FromStatus(bytes.status());
    static const char kEmpty = 0;
    *data = bytes.value().data() ? static_cast<const void*>(bytes.value().data()) : &kEmpty;
    *size = bytes.value().size();
    return nullptr;
  });
}

fcb_status_t* fcb_program_method_io_count(const fcb_program_t* program, const char* method, size_t* num_inputs,
                                          size_t* num_outputs) {
  return Guard("fcb_program_method_io_count", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_program_method_io_count", "program");
    auto m = FindMethod(program, method);
    if (!m.ok()) return FromStatus(m.status());
    if (num_inputs) *num_inputs = m.value()->inputs.size();
    if (num_outputs) *num_outputs = m.value()->outputs.size();
    return nullptr;
  });
}

fcb_status_t* fcb_program_method_input(const fcb_program_t* program, const char* method, size_t index,
                                       fcb_tensor_info_t* info) {
  return Guard("fcb_program_method_input", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_program_method_input", "program");
    auto m = FindMethod(program, method);
    if (!m.ok()) return FromStatus(m.status());
    return Io("fcb_program_method_input", m.value()->inputs, "input", index, info);
  });
}

fcb_status_t* fcb_program_method_output(const fcb_program_t* program, const char* method, size_t index,
                                        fcb_tensor_info_t* info) {
  return Guard("fcb_program_method_output", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_program_method_output", "program");
    auto m = FindMethod(program, method);
    if (!m.ok()) return FromStatus(m.status());
    return Io("fcb_program_method_output", m.value()->outputs, "output", index, info);
  });
}

fcb_status_t* fcb_program_method_input_range(const fcb_program_t* program, const char* method, size_t index,
                                             int64_t* min_shape, const char** symbols, size_t capacity,
                                             size_t* rank) {
  return Guard("fcb_program_method_input_range", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_program_method_input_range", "program");
    auto m = FindMethod(program, method);
    if (!m.ok()) return FromStatus(m.status());
    return Range("fcb_program_method_input_range", m.value()->inputs, index, min_shape, symbols, capacity, rank);
  });
}

fcb_status_t* fcb_execution_create(const fcb_program_t* program, const char* method, int num_threads,
                                   fcb_execution_t** execution) {
  return fcb_execution_create_with_state(program, method, num_threads, nullptr, execution);
}

fcb_status_t* fcb_state_create(const fcb_program_t* program, fcb_state_t** state) {
  return Guard("fcb_state_create", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_state_create", "program");
    if (!state) return NullArgument("fcb_state_create", "state");
    auto created = fcb::State::Create(program->program);
    if (!created.ok()) return FromStatus(created.status());
    auto st = std::make_unique<fcb_state>();
    st->state = std::move(created).value();
    *state = st.release();
    return nullptr;
  });
}

void fcb_state_destroy(fcb_state_t* state) { delete state; }

void fcb_state_reset(fcb_state_t* state) {
  if (state && state->state) state->state->Reset();
}

fcb_status_t* fcb_state_valid_length(const fcb_state_t* state, const char* name, int64_t* length) {
  return Guard("fcb_state_valid_length", [&]() -> fcb_status_t* {
    if (!state || !state->state) return NullArgument("fcb_state_valid_length", "state");
    if (!name) return NullArgument("fcb_state_valid_length", "name");
    if (!length) return NullArgument("fcb_state_valid_length", "length");
    auto n = state->state->valid_length(name);
    if (!n.ok()) return FromStatus(n.status());
    *length = n.value();
    return nullptr;
  });
}

void fcb_execution_reset_state(fcb_execution_t* execution) {
  if (execution && execution->execution) execution->execution->ResetState();
}

fcb_status_t* fcb_execution_create_with_state(const fcb_program_t* program, const char* method, int num_threads,
                                              fcb_state_t* state, fcb_execution_t** execution) {
  return Guard("fcb_execution_create", [&]() -> fcb_status_t* {
    if (!program) return NullArgument("fcb_execution_create", "program");
    if (!execution) return NullArgument("fcb_execution_create", "execution");
    auto m = FindMethod(program, method);
    if (!m.ok()) return FromStatus(m.status());
    auto created = fcb::Execution::Create(program->program, m.value()->name, num_threads,
                                          state ? state->state : nullptr);
    if (!created.ok()) return FromStatus(created.status());
    auto e = std::make_unique<fcb_execution>();
    e->program = program->program;
    e->execution = std::move(created).value();
    *execution = e.release();
    return nullptr;
  });
}

void fcb_execution_destroy(fcb_execution_t* execution) { delete execution; }

size_t fcb_execution_num_inputs(const fcb_execution_t* execution) {
  return execution ? execution->execution->info().inputs.size() : 0;
}

size_t fcb_execution_num_outputs(const fcb_execution_t* execution) {
  return execution ? execution->execution->info().outputs.size() : 0;
}

fcb_status_t* fcb_execution_input_info(const fcb_execution_t* execution, size_t index, fcb_tensor_info_t* info) {
  return Guard("fcb_execution_input_info", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_input_info", "execution");
    return Io("fcb_execution_input_info", execution->execution->info().inputs, "input", index, info);
  });
}

fcb_status_t* fcb_execution_output_info(const fcb_execution_t* execution, size_t index, fcb_tensor_info_t* info) {
  return Guard("fcb_execution_output_info", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_output_info", "execution");
    return Io("fcb_execution_output_info", execution->execution->info().outputs, "output", index, info);
  });
}

fcb_status_t* fcb_execution_input_range(const fcb_execution_t* execution, size_t index, int64_t* min_shape,
                                        const char** symbols, size_t capacity, size_t* rank) {
  return Guard("fcb_execution_input_range", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_input_range", "execution");
    return Range("fcb_execution_input_range", execution->execution->info().inputs, index, min_shape, symbols,
                 capacity, rank);
  });
}

fcb_status_t* fcb_execution_set_input(fcb_execution_t* execution, const char* name, const void* data,
                                      size_t bytes) {
  return Guard("fcb_execution_set_input", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_set_input", "execution");
    if (!name) return NullArgument("fcb_execution_set_input", "name");
    if (!data && bytes > 0) return NullArgument("fcb_execution_set_input", "data");
    return FromStatus(execution->execution->SetInput(name, data, bytes));
  });
}

fcb_status_t* fcb_execution_set_input_shaped(fcb_execution_t* execution, const char* name, const void* data,
                                             size_t bytes, const int64_t* shape, size_t rank) {
  return Guard("fcb_execution_set_input_shaped", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_set_input_shaped", "execution");
    if (!name) return NullArgument("fcb_execution_set_input_shaped", "name");
    if (!data && bytes > 0) return NullArgument("fcb_execution_set_input_shaped", "data");
    if (!shape && rank > 0) return NullArgument("fcb_execution_set_input_shaped", "shape");
    const std::vector<int64_t> dims(shape, shape + rank);
    return FromStatus(execution->execution->SetInput(name, data, bytes, dims));
  });
}

fcb_status_t* fcb_execution_run(fcb_execution_t* execution) {
  return Guard("fcb_execution_run", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_run", "execution");
    return FromStatus(execution->execution->Run());
  });
}

fcb_status_t* fcb_execution_output(const fcb_execution_t* execution, size_t index, const void** data,
                                   size_t* bytes) {
  return Guard("fcb_execution_output", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_output", "execution");
    if (!data) return NullArgument("fcb_execution_output", "data");
    const auto& outs = execution->execution->info().outputs;
    if (index >= outs.size())
      return Make(fcb::StatusCode::kInvalidArgument, "fcb_execution_output: output index " + std::to_string(index) +
                                                         " is out of range; method '" +
                                                         execution->execution->info().name + "' has " +
                                                         std::to_string(outs.size()) + " outputs");
    *data = execution->execution->output_data(index);
    if (bytes) *bytes = execution->execution->output_bytes(index);
    return nullptr;
  });
}

fcb_status_t* fcb_execution_output_shape(const fcb_execution_t* execution, size_t index, int64_t* shape,
                                         size_t capacity, size_t* rank) {
  return Guard("fcb_execution_output_shape", [&]() -> fcb_status_t* {
    if (!execution) return NullArgument("fcb_execution_output_shape", "execution");
    const fcb::MethodInfo& info = execution->execution->info();
    if (index >= info.outputs.size())
      return Make(fcb::StatusCode::kInvalidArgument, "fcb_execution_output_shape: output index " +
                                                         std::to_string(index) + " is out of range; method '" +
                                                         info.name + "' has " + std::to_string(info.outputs.size()) +
                                                         " outputs");
    const std::vector<int64_t>& dims = execution->execution->output_shape(index);
    const std::string what = "output '" + info.outputs[index].name + "'";
    if (fcb_status_t* s =
            CheckDimsBuffer("fcb_execution_output_shape", "shape", what, dims.size(), shape, capacity, rank))
      return s;
    if (shape) std::copy(dims.begin(), dims.end(), shape);
    *rank = dims.size();
    return nullptr;
  });
}

fcb_status_t* fcb_inspect_json(const char* path, char** json) {
  return Guard("fcb_inspect_json", [&]() -> fcb_status_t* {
    if (!path) return NullArgument("fcb_inspect_json", "path");
    if (!json) return NullArgument("fcb_inspect_json", "json");
    auto summary = fcb::InspectFile(path);
    if (!summary.ok()) return FromStatus(summary.status());
    *json = CopyString(fcb::FileSummaryJson(summary.value(), 2));
    return nullptr;
  });
}

}  // extern "C"
