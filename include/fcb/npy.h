// fcb public API: NumPy .npy files, how tensors enter `fcb run` and leave it,
// and how programs and tests exchange data with NumPy and ONNX Runtime.
//
// Byte layout (NumPy format 1.0; 2.0 and 3.0 differ only where noted):
//   offset 0   6 bytes   magic "\x93NUMPY"
//   offset 6   1 byte    major version (1, 2 or 3)
//   offset 7   1 byte    minor version (0)
//   offset 8   2 bytes   header length H, little-endian (4 bytes in 2.0 / 3.0,
//                        so the header starts at 12 instead of 10)
//   offset 10  H bytes   a Python dict literal, padded with spaces and ended by
//                        '\n': {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }
//   offset 10+H          the elements, C order, little-endian, no padding.
// The writer pads the header so the data starts at a multiple of 64 bytes.
//
// Only what fcb needs is accepted: the dtypes below, little-endian, C order.
// Anything else, and every malformed or truncated file, is refused with a
// Status naming the file; parsing never crashes or over-reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fcb/export.h"
#include "fcb/status.h"

namespace fcb {

// Element types, as ONNX TensorProto codes (the same numbers as fcb::DType).
inline constexpr int32_t kNpyF32 = 1;   // '<f4'
inline constexpr int32_t kNpyU8 = 2;    // '|u1'
inline constexpr int32_t kNpyI8 = 3;    // '|i1'
inline constexpr int32_t kNpyI32 = 6;   // '<i4'
inline constexpr int32_t kNpyI64 = 7;   // '<i8'
inline constexpr int32_t kNpyBool = 9;  // '|b1', one byte per element, 0 or 1
inline constexpr int32_t kNpyF64 = 11;  // '<f8'
inline constexpr int32_t kNpyU16 = 4;   // '<u2'
inline constexpr int32_t kNpyI16 = 5;   // '<i2'
inline constexpr int32_t kNpyF16 = 10;  // '<f2' (IEEE float16; NumPy has no bfloat16)
inline constexpr int32_t kNpyU32 = 12;  // '<u4'
inline constexpr int32_t kNpyU64 = 13;  // '<u8'

// Bytes per element of an ONNX dtype code, or 0 when .npy I/O does not handle it.
FCB_API size_t NpyElementSize(int32_t dtype);

struct NpyArray {
  int32_t dtype = kNpyF32;        // an ONNX TensorProto code from the list above
  std::vector<int64_t> shape;     // empty = scalar (one element)
  std::vector<uint8_t> data;      // C-order elements, little-endian
};

// Reads and validates `path`. NotFound when it does not exist, IoError when it
// cannot be read, CorruptFile when malformed, Unsupported for valid .npy files
// fcb does not handle (Fortran order, big-endian, other dtypes).
FCB_API Result<NpyArray> ReadNpy(const std::string& path);

// Parses an in-memory .npy image of `size` bytes; the bytes are not kept.
// `what_for_errors` names the source in messages (usually the file path).
FCB_API Result<NpyArray> ParseNpy(const uint8_t* bytes, size_t size, const std::string& what_for_errors);

// Serializes `a` (format 1.0, or 2.0 when the header would not fit 1.0).
// InvalidArgument when the dtype is unknown, a dim is negative or the data
// size does not match the shape.
FCB_API Result<std::vector<uint8_t>> SerializeNpy(const NpyArray& a);

// Writes `a` to `path` through a temporary file and a rename, so readers
// never see a partial file.
FCB_API Status WriteNpy(const std::string& path, const NpyArray& a);

}  // namespace fcb
