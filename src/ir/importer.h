// Where the ONNX importer is found. The importer (src/import, with libonnx and
// protobuf behind it) is not part of libfcb: it is the plugin libfcb_onnx.so,
// loaded on the first compile (compile/onnx_plugin.h), so that loading a
// program to run it maps neither library (~2 ms of dynamic linking in every
// `fcb run`). Programs that link the import layer's objects directly (unit
// tests, fcb-conformance) register it at start-up instead. libfcb.so exports
// only the public API, so the plugin holds its own copies of the layers below
// import and hands its function over through one C entry point.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/status.h"
#include "ir/ir.h"

namespace fcb::ir {

// A size or a range lo..hi (fcb/fcb.h).
using ::fcb::InputDim;

struct ImportOptions {
  // Graph input name -> dims. Fixes or bounds symbolic/unknown dims; must
  // agree with every dim the model fixes (a range on one is refused). A
  // symbolic dim (dim_param) is one symbol across all inputs: what one entry
  // gives it applies to every input using it, and two entries giving it
  // different sizes or ranges are refused. An unnamed unknown dim is the
  // symbol "<input>.<dim index>". The import records every symbol with its
  // size or range and its uses in Graph::symbols; the compiler does not plan
  // ranges yet, so a range with lo < hi is refused as unsupported (the one
  // place: Importer::RefuseRanges in src/import/onnx_import.cc).
  std::map<std::string, std::vector<InputDim>> input_shapes;
  // Graph input name -> a value that fixes it: the input becomes a constant
  // (folded like any other) and leaves the graph's inputs. The value is
  // converted to the input's declared type when every element is
  // representable in it (bool only to bool); its shape must fit the declared
  // one (and input_shapes, if that names it too). On an input that also has
  // an initializer, it replaces the initializer's value.
  std::map<std::string, TensorPtr> input_values;
  // > 0: every graph input read as past_key / past_value (inputs 3 and 4) of
  // a com.microsoft.GroupQueryAttention has its sequence dim (2) fixed at
  // this size, whatever input_shapes gives it (CompileSpec::kv_capacity);
  // a model that fixes that dim to another size is refused.
  int64_t kv_capacity = 0;
};

// Reads the ONNX model at `path` into a graph with static shapes.
using OnnxImportFn = Result<Graph> (*)(const std::string& path, const ImportOptions& opts);

// The plugin's one exported symbol: a C function that, given the fcb version
// of the library loading it, returns the plugin's import function, or null when
// the plugin was built from another version (src/import/register.cc). libfcb
// registers what it returns (compile/onnx_plugin.cc).
inline constexpr char kOnnxPluginEntry[] = "fcb_onnx_importer_v1";
using OnnxPluginEntryFn = OnnxImportFn (*)(const char* fcb_version);

// Thread-safe; the last registration wins (there is one importer).
void RegisterOnnxImporter(OnnxImportFn fn);
// The registered importer, or null.
OnnxImportFn RegisteredOnnxImporter();

}  // namespace fcb::ir
