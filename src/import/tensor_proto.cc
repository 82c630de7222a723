#include "import/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

// fcb::DType's codes are ONNX's TensorProto.DataType: the importer casts one
// to the other.
#define FCB_SAME_CODE(ours, theirs) \
  static_assert(static_cast<int>(::fcb::DType::ours) == onnx::TensorProto_DataType_##theirs, #ours " != " #theirs)
FCB_SAME_CODE(kUndefined, UNDEFINED);
FCB_SAME_CODE(kF32, FLOAT);
FCB_SAME_CODE(kU8, UINT8);
FCB_SAME_CODE(kI8, INT8);
FCB_SAME_CODE(kU16, UINT16);
FCB_SAME_CODE(kI16, INT16);
FCB_SAME_CODE(kI32, INT32);
FCB_SAME_CODE(kI64, INT64);
FCB_SAME_CODE(kBool, BOOL);
FCB_SAME_CODE(kF16, FLOAT16);
FCB_SAME_CODE(kF64, DOUBLE);
FCB_SAME_CODE(kU32, UINT32);
FCB_SAME_CODE(kU64, UINT64);
FCB_SAME_CODE(kBF16, BFLOAT16);
#undef FCB_SAME_CODE

namespace fcb::import {
namespace {

namespace fs = std::filesystem;

// Tensors beyond this many bytes are refused: a corrupt dims field must not
// turn into a huge allocation.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;

// Copies typed repeated-field values into `out`, converting element type.
template <typename Dst, typename Field>
void CopyTyped(const Field& field, ir::TensorData* out) {
  Dst* dst = out->mutable_data<Dst>();
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<Dst>(field.Get(i));
}

// A relative path that stays inside its folder: no absolute path, no "..".
Status CheckRelativePath(const std::string& location, const std::string& what) {
  fs::path p(location);
  if (location.empty()) return CorruptFile(what + ": external data has an empty location");
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory())
    return InvalidArgument(what + ": external data location '" + location +
                           "' is an absolute path; it must be relative to the model's folder");
  for (const auto& part : p)
    if (part == "..")
      return InvalidArgument(what + ": external data location '" + location +
                             "' escapes the model's folder (contains '..')");
  return Status::Ok();
}

Status ReadExternal(const onnx::TensorProto& t, const std::string& base_dir,
                    const std::string& what, ir::TensorData* out) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    const std::string& k = kv.key();
    try {
      if (k == "location") location = kv.value();
      else if (k == "offset") offset = std::stoll(kv.value());
      else if (k == "length") length = std::stoll(kv.value());
    } catch (...) {
      return CorruptFile(what + ": external data key '" + k + "' has a non-numeric value '" +
                         kv.value() + "'");
    }
  }
  if (base_dir.empty())
    return InvalidArgument(what + ": uses external data, but the model was given as bytes "
                           "without a folder to resolve '" + location + "' against");
  FCB_RETURN_IF_ERROR(CheckRelativePath(location, what));
  // Symlinks could still lead outside; compare resolved paths too.
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  fs::path file = fs::weakly_canonical(fs::path(base_dir) / location, ec);
  if (ec) return NotFound(what + ": external data file '" + location + "' not found");
  auto rel = file.lexically_relative(base);
  if (rel.empty() || *rel.begin() == "..")
    return InvalidArgument(what + ": external data file '" + location +
                           "' resolves outside the model's folder");
  const int64_t want = static_cast<int64_t>(out->bytes.size());
  if (offset < 0) return CorruptFile(what + ": external data offset " + std::to_string(offset) + " is negative");
  if (length >= 0 && length != want)
    return CorruptFile(what + ": external data length " + std::to_string(length) +
                       " does not match the tensor's " + std::to_string(want) + " bytes");
  std::ifstream in(file, std::ios::binary);
  if (!in) return NotFound(what + ": cannot open external data file '" + file.string() + "'");
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (offset > size || want > size - offset)
    return CorruptFile(what + ": external data range [" + std::to_string(offset) + ", " +
                       std::to_string(offset + want) + ") lies outside '" + location + "' (" +
                       std::to_string(size) + " bytes)");
  in.seekg(offset);
  in.read(reinterpret_cast<char*>(out->bytes.data()), want);
  if (!in) return IoError(what + ": reading external data file '" + file.string() + "' failed");
  return Status::Ok();
}

}  // namespace

ir::DType DTypeFromOnnx(int32_t e) {
  using TP = onnx::TensorProto;
  switch (e) {
    case TP::FLOAT: return ir::DType::kF32;
    case TP::UINT8: return ir::DType::kU8;
    case TP::INT8: return ir::DType::kI8;
    case TP::INT32: return ir::DType::kI32;
    case TP::INT64: return ir::DType::kI64;
    case TP::BOOL: return ir::DType::kBool;
    case TP::DOUBLE: return ir::DType::kF64;
    case TP::INT16: return ir::DType::kI16;
    case TP::UINT16: return ir::DType::kU16;
    case TP::UINT32: return ir::DType::kU32;
    case TP::UINT64: return ir::DType::kU64;
    case TP::FLOAT16: return ir::DType::kF16;
    case TP::BFLOAT16: return ir::DType::kBF16;
    default: return ir::DType::kUndefined;
  }
}

std::string OnnxTypeName(int32_t e) {
  if (onnx::TensorProto_DataType_IsValid(e))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(e));
  return "type code " + std::to_string(e);
}

Result<std::shared_ptr<ir::TensorData>> TensorFromProto(const onnx::TensorProto& t,
                                                        const std::string& base_dir,
                                                        const std::string& what) {
  const ir::DType dtype = DTypeFromOnnx(t.data_type());
  if (dtype == ir::DType::kUndefined)
    return Unsupported(what + ": element type " + OnnxTypeName(t.data_type()) + " is not supported");
  if (t.has_segment()) return Unsupported(what + ": segmented tensors are not supported");
  ir::Shape shape;
  const int64_t elem = static_cast<int64_t>(ir::DTypeSize(dtype));
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return CorruptFile(what + ": negative dim " + std::to_string(d));
    if (d != 0 && numel > kMaxTensorBytes / elem / d)
      return CorruptFile(what + ": dims describe more than 2^40 bytes");
    numel *= d;
    shape.push_back(d);
  }
  auto out = ir::TensorData::Make(dtype, shape);
  const size_t nbytes = out->bytes.size();

  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FCB_RETURN_IF_ERROR(ReadExternal(t, base_dir, what, out.get()));
    return out;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      return CorruptFile(what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                         " bytes, shape " + ir::ShapeToString(shape) + " of " +
                         ir::DTypeName(dtype) + " needs " + std::to_string(nbytes));
    if (nbytes) std::memcpy(out->bytes.data(), t.raw_data().data(), nbytes);  // little-endian host
    return out;
  }

  // Typed fields: which one holds the data depends on the element type.
  int count = 0;
  switch (dtype) {
    case ir::DType::kF32: count = t.float_data_size(); break;
    case ir::DType::kF64: count = t.double_data_size(); break;
    case ir::DType::kI64: count = t.int64_data_size(); break;
    case ir::DType::kU32: case ir::DType::kU64: count = t.uint64_data_size(); break;
    // int32, int8, uint8, int16, uint16, bool; float16 and bfloat16 as their bits.
    default: count = t.int32_data_size(); break;
  }
  if (count != numel)
    return CorruptFile(what + ": holds " + std::to_string(count) + " values, shape " +
                       ir::ShapeToString(shape) + " needs " + std::to_string(numel));
  switch (dtype) {
    case ir::DType::kF32: CopyTyped<float>(t.float_data(), out.get()); break;
    case ir::DType::kF64: CopyTyped<double>(t.double_data(), out.get()); break;
    case ir::DType::kI64: CopyTyped<int64_t>(t.int64_data(), out.get()); break;
    case ir::DType::kI32: CopyTyped<int32_t>(t.int32_data(), out.get()); break;
    case ir::DType::kI8: CopyTyped<int8_t>(t.int32_data(), out.get()); break;
    case ir::DType::kU8: CopyTyped<uint8_t>(t.int32_data(), out.get()); break;
    case ir::DType::kI16: CopyTyped<int16_t>(t.int32_data(), out.get()); break;
    case ir::DType::kU16: case ir::DType::kF16: case ir::DType::kBF16:
      CopyTyped<uint16_t>(t.int32_data(), out.get());
      break;
    case ir::DType::kU32: CopyTyped<uint32_t>(t.uint64_data(), out.get()); break;
    case ir::DType::kU64: CopyTyped<uint64_t>(t.uint64_data(), out.get()); break;
    case ir::DType::kBool: {
      uint8_t* dst = out->mutable_data<uint8_t>();
      for (int i = 0; i < count; ++i) dst[i] = t.int32_data(i) != 0;
      break;
    }
    default: break;
  }
  return out;
}

}  // namespace fcb::import
