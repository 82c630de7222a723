/* A C program on fcb's C API (fcb/fcb_c.h): compiles an ONNX model into a
 * .fcb file, prints what the file holds (the JSON of `fcb inspect --json`),
 * loads it, runs its only method on the deterministic inputs `fcb run` uses
 * for inputs it is not given, and prints every output value.
 *
 *   usage: fcb_c_example MODEL.onnx OUT.fcb [SPEC_JSON]
 *
 * SPEC_JSON defaults to {"targets": "all"}. Build it against an installed fcb:
 *   cc run_model.c $(pkg-config --cflags --libs fcb) -o fcb_c_example
 * Exit status: 0 on success, 1 with "error: <code>: <message>" on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcb/fcb_c.h>

/* Prints a failed status, releases it and returns 1; returns 0 for success. */
static int failed(fcb_status_t* status, const char* what) {
  if (status == NULL) return 0;
  fprintf(stderr, "error: %s: %s: %s\n", what, fcb_status_code_name(fcb_status_code(status)),
          fcb_status_message(status));
  fcb_status_destroy(status);
  return 1;
}

/* The values `fcb run` feeds an input it is not given: float32 elements in
 * [-1, 1) from a linear congruential sequence, integer elements zero. */
static void fill_pattern(const fcb_tensor_info_t* info, unsigned char* bytes) {
  uint32_t s = 12345;
  size_t element = 1, n, i;
  memset(bytes, 0, (size_t)info->bytes);
  if (info->dtype == 7) element = 8;     /* int64 */
  else if (info->dtype == 1) element = 4; /* float32 */
  else return;                           /* other types: zero bytes */
  n = (size_t)info->bytes / element;
  for (i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    if (info->dtype == 1) {
      float v = (float)(s >> 8) / 8388608.0f - 1.0f;
      memcpy(bytes + 4 * i, &v, 4);
    }
  }
}

static void print_dims(const fcb_tensor_info_t* info) {
  size_t d;
  for (d = 0; d < info->rank; ++d) printf("%s%lld", d ? "x" : "", (long long)info->shape[d]);
}

int main(int argc, char** argv) {
  const char* spec = argc > 3 ? argv[3] : "{\"targets\": \"all\"}";
  const char* names[1] = {"main"};
  const char* models[1];
  char* report = NULL;
  char* json = NULL;
  fcb_program_t* program = NULL;
  fcb_execution_t* execution = NULL;
  size_t i, j;
  int rc = 1;

  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s MODEL.onnx OUT.fcb [SPEC_JSON]\n", argv[0]);
    return 2;
  }
  models[0] = argv[1];
  if (failed(fcb_compile(names, models, 1, spec, argv[2], &report), "compile")) goto done;
  fprintf(stderr, "compiled %s (report: %s)\n", argv[2], report);

  if (failed(fcb_inspect_json(argv[2], &json), "inspect")) goto done;
  printf("%s\n", json);

  if (failed(fcb_program_load(argv[2], NULL, 1, &program), "load")) goto done;
  printf("target: %s; file holds:", fcb_program_target(program));
  for (i = 0; i < fcb_program_num_targets_in_file(program); ++i)
    printf(" %s", fcb_program_target_in_file(program, i));
  printf("\n");

  if (failed(fcb_execution_create(program, NULL, 1, &execution), "create execution")) goto done;
  /* The execution keeps what it needs of the program. */
  fcb_program_destroy(program);
  program = NULL;

  for (i = 0; i < fcb_execution_num_inputs(execution); ++i) {
    fcb_tensor_info_t in;
    unsigned char* bytes;
    fcb_status_t* st;
    if (failed(fcb_execution_input_info(execution, i, &in), "input info")) goto done;
    bytes = (unsigned char*)malloc((size_t)in.bytes ? (size_t)in.bytes : 1);
    if (!bytes) {
      fprintf(stderr, "error: out of memory\n");
      goto done;
    }
    fill_pattern(&in, bytes);
    st = fcb_execution_set_input(execution, in.name, bytes, (size_t)in.bytes);
    free(bytes);
    if (failed(st, "set input")) goto done;
    printf("input: %s %s ", in.name, in.dtype_name);
    print_dims(&in);
    printf("\n");
  }

  if (failed(fcb_execution_run(execution), "run")) goto done;

  for (i = 0; i < fcb_execution_num_outputs(execution); ++i) {
    fcb_tensor_info_t out;
    const void* data;
    size_t bytes;
    if (failed(fcb_execution_output_info(execution, i, &out), "output info")) goto done;
    if (failed(fcb_execution_output(execution, i, &data, &bytes), "output")) goto done;
    printf("output: %s %s ", out.name, out.dtype_name);
    print_dims(&out);
    printf("\n");
    if (out.dtype == 1) { /* float32: every value, exactly (9 significant digits) */
      const float* v = (const float*)data;
      for (j = 0; j < bytes / 4; ++j) printf("%.9g\n", (double)v[j]);
    }
  }
  rc = 0;

done:
  fcb_execution_destroy(execution);
  fcb_program_destroy(program);
  fcb_string_destroy(json);
  fcb_string_destroy(report);
  return rc;
}
