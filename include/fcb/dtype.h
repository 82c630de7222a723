// Element types: the one definition used by the public API, the IR, the file
// format and the kernels. The numeric codes are ONNX TensorProto.DataType's
// (static_asserts where codes cross a boundary: the ONNX importer, the .fcb
// metadata schema, the .npy reader). kF16 and kBF16 elements are the 16-bit
// patterns of IEEE float16 and bfloat16 values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fcb/export.h"

namespace fcb {

enum class DType : int32_t {
  kUndefined = 0,  // no element type: an absent optional operand
  kF32 = 1, kU8 = 2, kI8 = 3, kU16 = 4, kI16 = 5, kI32 = 6, kI64 = 7, kBool = 9,
  kF16 = 10, kF64 = 11, kU32 = 12, kU64 = 13, kBF16 = 16
};
// "float32", "int64", ...; "undefined" for kUndefined and unknown codes.
FCB_API const char* DTypeName(DType t);
// Bytes per element; 0 for kUndefined and unknown codes.
FCB_API size_t DTypeSize(DType t);

}  // namespace fcb
