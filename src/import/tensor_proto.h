// onnx::TensorProto -> ir::TensorData (internal to the import layer).
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "fcb/status.h"
#include "ir/ir.h"

namespace fcb::import {

// Converts a tensor (initializer, Constant value, tensor attribute). Handles
// raw_data, the typed fields and external data. `base_dir` is the folder
// external files must lie in (empty: external data is refused); `what` names
// the tensor in errors ("initializer 'conv1.weight'").
Result<std::shared_ptr<ir::TensorData>> TensorFromProto(const onnx::TensorProto& t,
                                                        const std::string& base_dir,
                                                        const std::string& what);

// The ir dtype for an ONNX element type code, or kUndefined if fcb lacks it.
ir::DType DTypeFromOnnx(int32_t elem_type);
// "FLOAT16", "STRING", ... for error messages.
std::string OnnxTypeName(int32_t elem_type);

}  // namespace fcb::import
