/* fcb C API: compile, load, describe and run .fcb programs from C or from any
 * language with a C foreign-function interface.
 *
 * The same library as the C++ API (libfcb.so; pkg-config module "fcb"), seen
 * through plain C: opaque handles, explicit create/destroy, and a status for
 * every call that can fail. No C++ type and no exception crosses this header.
 *
 * Status convention. A function that can fail returns fcb_status_t*: NULL
 * means success; otherwise the caller owns the returned status, reads its
 * code (fcb_status_code, the numbers of fcb::StatusCode) and its message
 * (fcb_status_message, the C++ Status message: it names what failed and
 * where), and releases it with fcb_status_destroy. Output parameters are
 * written only on success. A NULL handle or a NULL required pointer is an
 * FCB_STATUS_INVALID_ARGUMENT status, never a crash.
 *
 * Ownership. Every fcb_*_create / fcb_program_load has its fcb_*_destroy;
 * destroy functions accept NULL. Strings returned as `char**` are the
 * caller's and are released with fcb_string_destroy. `const char*` and
 * `const void*` results point into the handle they came from and stay valid
 * as stated for each function.
 *
 * Threads. A program is immutable and may be used by any number of threads
 * at once (including creating executions from it); an execution is used by
 * one thread at a time. An execution keeps its program alive: the program
 * handle may be destroyed before the executions created from it.
 *
 * Stability. FCB_C_API_VERSION_MAJOR changes only when a declaration here
 * changes incompatibly; within a major version, minor versions only add
 * functions and enum values (appended). Structures passed to the library
 * (fcb_tensor_info_t) never change within a major version: new information
 * comes through new functions. Programs built against x.y run with every
 * x.z, z >= y. The library's own version is fcb_version().
 */
#ifndef FCB_FCB_C_H_
#define FCB_FCB_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define FCB_C_API __attribute__((visibility("default")))
#else
#define FCB_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FCB_C_API_VERSION_MAJOR 1
#define FCB_C_API_VERSION_MINOR 2

/* The C API version the library implements: major * 1000 + minor. */
FCB_C_API int fcb_c_api_version(void);
/* The library version, e.g. "0.1.0". Static storage. */
FCB_C_API const char* fcb_version(void);

/* ------------------------------------------------------------- statuses */

/* The codes of fcb::StatusCode (fcb/status.h), with the same numbers. */
typedef enum fcb_status_code {
  FCB_STATUS_OK = 0,
  FCB_STATUS_INVALID_ARGUMENT = 1, /* malformed request: bad spec, shape, name, NULL pointer */
  FCB_STATUS_NOT_FOUND = 2,        /* a named file, method, input or target does not exist */
  FCB_STATUS_UNSUPPORTED = 3,      /* a valid model or request fcb does not implement */
  FCB_STATUS_IO_ERROR = 4,         /* the OS refused a read, write, rename, mmap */
  FCB_STATUS_CORRUPT_FILE = 5,     /* a file failed a structural or checksum check */
  FCB_STATUS_RESOURCE_EXHAUSTED = 6,
  FCB_STATUS_UNAVAILABLE = 7, /* this host cannot run what was asked (target) */
  FCB_STATUS_INTERNAL = 8     /* a bug in fcb */
} fcb_status_code_t;

typedef struct fcb_status fcb_status_t;

/* FCB_STATUS_OK for NULL. */
FCB_C_API fcb_status_code_t fcb_status_code(const fcb_status_t* status);
/* "" for NULL; otherwise valid until fcb_status_destroy(status). */
FCB_C_API const char* fcb_status_message(const fcb_status_t* status);
/* "ok", "invalid argument", ... (static storage). */
FCB_C_API const char* fcb_status_code_name(fcb_status_code_t code);
FCB_C_API void fcb_status_destroy(fcb_status_t* status);

/* Releases a string the library returned through a char** parameter. */
FCB_C_API void fcb_string_destroy(char* s);

/* ------------------------------------------------------------ compiling */

/* Compiles ONNX models into one .fcb file at out_path.
 * method_names[i] / model_paths[i], i < num_methods: the methods and their
 * ONNX files (one method: name it "main" for the CLI's default).
 * spec_json: a compile spec as JSON text, the format of `fcb compile --spec`
 * (README "Compile specs"), e.g.
 *   {"targets": ["generic", "x86-64-v3"], "input_shapes": {"input": [1, 3, 224, 224]}}
 * (a dim may be a range [lo, hi], e.g. "input_ids": [1, [1, 512]]: the method
 * then takes any size within it at each run, see fcb_execution_set_input_shaped)
 * or NULL for every known target with default options.
 * report_json: NULL, or receives the compile report (release it with
 * fcb_string_destroy):
 *   {"file_size": N, "warnings": ["..."], "int8_accuracy": [{"method": ..., ...}]} */
FCB_C_API fcb_status_t* fcb_compile(const char* const* method_names, const char* const* model_paths,
                                    size_t num_methods, const char* spec_json, const char* out_path,
                                    char** report_json);

/* --------------------------------------------------------------- programs */

typedef struct fcb_program fcb_program_t;

/* Loads and verifies `path`. target: NULL or "auto" for the best target this
 * host runs, or a target name to force (FCB_STATUS_UNAVAILABLE when the host
 * cannot run it). verify_checksums: nonzero to verify the weights' checksums. */
FCB_C_API fcb_status_t* fcb_program_load(const char* path, const char* target, int verify_checksums,
                                         fcb_program_t** program);
/* As fcb_program_load, with a memory limit: max_memory_bytes bounds what the
 * load allocates and what each execution allocates (arena and every thread's
 * scratch); 0 means this host's available memory, which is what
 * fcb_program_load uses. A file asking for more is refused with
 * FCB_STATUS_RESOURCE_EXHAUSTED naming the limit and the bytes asked for. */
FCB_C_API fcb_status_t* fcb_program_load_limited(const char* path, const char* target, int verify_checksums,
                                                 uint64_t max_memory_bytes, fcb_program_t** program);
FCB_C_API void fcb_program_destroy(fcb_program_t* program);

/* The selected target. Valid while the program lives; NULL for a NULL program. */
FCB_C_API const char* fcb_program_target(const fcb_program_t* program);
/* The targets the file holds, in file order; index >= count gives NULL. */
FCB_C_API size_t fcb_program_num_targets_in_file(const fcb_program_t* program);
FCB_C_API const char* fcb_program_target_in_file(const fcb_program_t* program, size_t index);
/* The methods, in file order; index >= count gives NULL. */
FCB_C_API size_t fcb_program_num_methods(const fcb_program_t* program);
FCB_C_API const char* fcb_program_method_name(const fcb_program_t* program, size_t index);
/* Since 1.2. The file's attachments (named byte strings stored with
 * `fcb compile --attach NAME=FILE` or the spec's "attachments"), in file order
 * (sorted by name); index >= count gives NULL. */
FCB_C_API size_t fcb_program_num_attachments(const fcb_program_t* program);
FCB_C_API const char* fcb_program_attachment_name(const fcb_program_t* program, size_t index);
/* Since 1.2. Attachment `name`'s bytes: *data points into the loaded file
 * (valid while the program lives; not NUL-terminated; non-NULL even for an
 * empty attachment) and *size receives their count. The bytes are checked
 * against the file's checksum on every call: FCB_STATUS_CORRUPT_FILE when they
 * do not match, FCB_STATUS_NOT_FOUND listing the names when there is no such
 * attachment. */
FCB_C_API fcb_status_t* fcb_program_attachment(const fcb_program_t* program, const char* name, const void** data,
                                               size_t* size);

/* One input or output of a method. The pointers stay valid while the
 * program (or execution) it was read from lives. For an input or output whose
 * dims are chosen at each run (a range in the compile spec), `shape` and
 * `bytes` are the largest (every range at its upper bound): the method is
 * planned for them. fcb_program_method_input_range gives an input's smallest
 * sizes, fcb_execution_output_shape an output's shape in the last run. */
typedef struct fcb_tensor_info {
  const char* name;
  int32_t dtype;        /* fcb::DType: ONNX TensorProto.DataType codes (1 = float32, 7 = int64, ...) */
  const char* dtype_name; /* "float32", "int64", ... */
  size_t rank;
  const int64_t* shape; /* rank dimensions */
  uint64_t bytes;       /* the size of its data */
} fcb_tensor_info_t;

/* A method's inputs and outputs. method: NULL for the only method (an
 * FCB_STATUS_INVALID_ARGUMENT status listing them when there are several). */
FCB_C_API fcb_status_t* fcb_program_method_io_count(const fcb_program_t* program, const char* method,
                                                    size_t* num_inputs, size_t* num_outputs);
FCB_C_API fcb_status_t* fcb_program_method_input(const fcb_program_t* program, const char* method, size_t index,
                                                 fcb_tensor_info_t* info);
FCB_C_API fcb_status_t* fcb_program_method_output(const fcb_program_t* program, const char* method,
                                                  size_t index, fcb_tensor_info_t* info);

/* Since 1.1. The ranges of input `index`, per dim: min_shape[d] receives the
 * smallest size a run may give dim d (the largest is fcb_tensor_info_t.shape;
 * a fixed dim has both equal) and, when symbols is not NULL, symbols[d] the
 * name of the symbol dim d is ("" where fixed; dims that are one symbol take
 * one size in a run; the strings stay valid while the program lives).
 * capacity is the length of min_shape (and of symbols): at least the input's
 * rank, which *rank receives; with min_shape NULL and capacity 0 only *rank
 * is written. A smaller capacity is FCB_STATUS_INVALID_ARGUMENT naming the
 * rank. An input with every dim fixed reports min_shape = shape. */
FCB_C_API fcb_status_t* fcb_program_method_input_range(const fcb_program_t* program, const char* method,
                                                       size_t index, int64_t* min_shape, const char** symbols,
                                                       size_t capacity, size_t* rank);

/* ------------------------------------------------------------- executions */

typedef struct fcb_execution fcb_execution_t;

/* An execution of one method: its arena, inputs and outputs. method: NULL
 * for the only method. num_threads >= 1 (1 = the calling thread only). */
FCB_C_API fcb_status_t* fcb_execution_create(const fcb_program_t* program, const char* method, int num_threads,
                                             fcb_execution_t** execution);
FCB_C_API void fcb_execution_destroy(fcb_execution_t* execution);

FCB_C_API size_t fcb_execution_num_inputs(const fcb_execution_t* execution);
FCB_C_API size_t fcb_execution_num_outputs(const fcb_execution_t* execution);
FCB_C_API fcb_status_t* fcb_execution_input_info(const fcb_execution_t* execution, size_t index,
                                                 fcb_tensor_info_t* info);
FCB_C_API fcb_status_t* fcb_execution_output_info(const fcb_execution_t* execution, size_t index,
                                                  fcb_tensor_info_t* info);

/* Since 1.1. fcb_program_method_input_range for the execution's method
 * (symbols valid while the execution lives). */
FCB_C_API fcb_status_t* fcb_execution_input_range(const fcb_execution_t* execution, size_t index,
                                                  int64_t* min_shape, const char** symbols, size_t capacity,
                                                  size_t* rank);

/* Copies `bytes` bytes into input `name`; bytes must equal its size at the
 * shape it has now (its planned shape, or the one last given to
 * fcb_execution_set_input_shaped). An input keeps its value until it is set
 * again, so only the inputs that change need setting. */
FCB_C_API fcb_status_t* fcb_execution_set_input(fcb_execution_t* execution, const char* name, const void* data,
                                                size_t bytes);
/* Since 1.1. The same with the input's shape for this and the next runs
 * (`rank` dims at `shape`): any shape within the ranges the method was
 * compiled for (fcb_execution_input_range .. fcb_tensor_info_t.shape), and
 * bytes its size. A rank that differs from the input's, or a dim outside its
 * range, is FCB_STATUS_INVALID_ARGUMENT naming the input, the dim, its symbol
 * and its range; nothing is written and the execution stays usable. Dims that
 * are one symbol must be given one size across the inputs (checked by
 * fcb_execution_run). The first run at new sizes resolves the method's
 * shapes for them once (kept for later runs at those sizes). */
FCB_C_API fcb_status_t* fcb_execution_set_input_shaped(fcb_execution_t* execution, const char* name,
                                                       const void* data, size_t bytes, const int64_t* shape,
                                                       size_t rank);
FCB_C_API fcb_status_t* fcb_execution_run(fcb_execution_t* execution);
/* Output `index`'s data and its size in the last run (densely laid out at its
 * shape, fcb_execution_output_shape), valid until the next run or
 * destruction. Before any run: the planned size. */
FCB_C_API fcb_status_t* fcb_execution_output(const fcb_execution_t* execution, size_t index, const void** data,
                                             size_t* bytes);
/* Since 1.1. Output `index`'s shape in the last run (before any run: the
 * planned shape, fcb_tensor_info_t.shape): shape[0..*rank) receives it.
 * capacity is the length of shape, at least the output's rank (a smaller one
 * is FCB_STATUS_INVALID_ARGUMENT naming the rank); with shape NULL and
 * capacity 0 only *rank is written. */
FCB_C_API fcb_status_t* fcb_execution_output_shape(const fcb_execution_t* execution, size_t index, int64_t* shape,
                                                   size_t capacity, size_t* rank);

/* ------------------------------------------------------------------ state */

/* Since 1.3. The state a program's methods keep between runs (a KV cache
 * declared by the compile spec's "state"; fcb::State): one buffer per state
 * variable, read and updated in place by the executions bound to it, so that
 * a prefill execution fills a cache and a decode execution continues it with
 * nothing copied. Two states are independent. A state is used by one thread
 * at a time: the executions bound to it must not run concurrently. It keeps
 * its program alive; destroy it after (or before) its executions, which keep
 * it alive in turn. */
typedef struct fcb_state fcb_state_t;
/* Zeroed buffers for every state variable of the program (none: an empty state). */
FCB_C_API fcb_status_t* fcb_state_create(const fcb_program_t* program, fcb_state_t** state);
FCB_C_API void fcb_state_destroy(fcb_state_t* state);
/* Zeroes every variable (an empty cache) and every valid length. */
FCB_C_API void fcb_state_reset(fcb_state_t* state);
/* Since 1.3. The valid rows per head of variable `name` when it is a growing
 * cache (kv_capacity with present = Concat(past, new): a buffer [B, heads,
 * capacity, head] that each run appends to); 0 for a static buffer.
 * fcb::State::valid_length. */
FCB_C_API fcb_status_t* fcb_state_valid_length(const fcb_state_t* state, const char* name, int64_t* length);
/* fcb_execution_create bound to `state` (a state of the same program; NULL:
 * one of its own, as fcb_execution_create gives a method with state). */
FCB_C_API fcb_status_t* fcb_execution_create_with_state(const fcb_program_t* program, const char* method,
                                                        int num_threads, fcb_state_t* state,
                                                        fcb_execution_t** execution);
/* Zeroes the state the execution is bound to (nothing when its method has none). */
FCB_C_API void fcb_execution_reset_state(fcb_execution_t* execution);

/* ------------------------------------------------------------ describing */

/* The file's description as JSON, the document `fcb inspect --json` prints
 * (without its final newline). Release it with fcb_string_destroy. */
FCB_C_API fcb_status_t* fcb_inspect_json(const char* path, char** json);

#ifdef __cplusplus
}
#endif

#endif /* FCB_FCB_C_H_ */
