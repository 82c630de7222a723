// ONNX import: an .onnx model (opsets 7-18; 1-6 when every node's operator
// version is the one opset 7 uses) becomes an ir::Graph with every
// value's dtype and shape static, opset differences canonicalized to the
// latest semantics, and every compile-time-computable subgraph (shape chains,
// ConstantOfShape, Range, ...) folded into constants.
//
// Errors name what failed and where: the file, the input and dim, the
// initializer, or the node (all unsupported nodes are listed in one error).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fcb/status.h"
#include "ir/importer.h"
#include "ir/ir.h"

namespace fcb::import {

using ImportOptions = ir::ImportOptions;

// Reads the model at `path`; external data files are resolved relative to the
// model's folder.
Result<ir::Graph> ImportOnnx(const std::string& path, const ImportOptions& opts);

// Same, from serialized ModelProto bytes. `base_dir` is the folder external
// data is resolved against; empty = the model may not use external data.
Result<ir::Graph> ImportOnnxBytes(const std::string& bytes, const std::string& base_dir,
                                  const ImportOptions& opts);

}  // namespace fcb::import
