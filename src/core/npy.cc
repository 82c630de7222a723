#include "fcb/npy.h"

#include "fcb/dtype.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

// The .npy reader's codes are fcb::DType's (the CLI and tests cast between them).
static_assert(fcb::kNpyF32 == static_cast<int32_t>(fcb::DType::kF32) && fcb::kNpyU8 == static_cast<int32_t>(fcb::DType::kU8) &&
              fcb::kNpyI8 == static_cast<int32_t>(fcb::DType::kI8) && fcb::kNpyI32 == static_cast<int32_t>(fcb::DType::kI32) &&
              fcb::kNpyI64 == static_cast<int32_t>(fcb::DType::kI64) && fcb::kNpyBool == static_cast<int32_t>(fcb::DType::kBool) &&
              fcb::kNpyF64 == static_cast<int32_t>(fcb::DType::kF64) && fcb::kNpyU16 == static_cast<int32_t>(fcb::DType::kU16) &&
              fcb::kNpyI16 == static_cast<int32_t>(fcb::DType::kI16) && fcb::kNpyF16 == static_cast<int32_t>(fcb::DType::kF16) &&
              fcb::kNpyU32 == static_cast<int32_t>(fcb::DType::kU32) && fcb::kNpyU64 == static_cast<int32_t>(fcb::DType::kU64),
              ".npy codes must be fcb::DType codes");

namespace fcb {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DTypeEntry {
  int32_t dtype;
  char kind;      // NumPy kind letter: 'f', 'i', 'u', 'b'
  size_t size;
  const char* descr;  // what the writer emits
};
constexpr DTypeEntry kDTypes[] = {
    {kNpyF32, 'f', 4, "<f4"}, {kNpyF64, 'f', 8, "<f8"}, {kNpyI64, 'i', 8, "<i8"},
    {kNpyI32, 'i', 4, "<i4"}, {kNpyU8, 'u', 1, "|u1"},  {kNpyI8, 'i', 1, "|i1"},
    {kNpyBool, 'b', 1, "|b1"}, {kNpyF16, 'f', 2, "<f2"}, {kNpyI16, 'i', 2, "<i2"},
    {kNpyU16, 'u', 2, "<u2"},  {kNpyU32, 'u', 4, "<u4"}, {kNpyU64, 'u', 8, "<u8"},
};

const DTypeEntry* FindDType(int32_t dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return &e;
  }
  return nullptr;
}

// A tiny reader for the one Python literal .npy headers contain: a dict with
// string keys whose values are strings, True/False or tuples of integers.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  size_t pos() const { return pos_; }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= s_.size();
  }
  std::optional<std::string> String() {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    const char quote = s_[pos_];
    const size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  std::optional<bool> Bool() {
    SkipSpace();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const size_t n = std::strlen(word);
      if (s_.substr(pos_, n) == word) {
        pos_ += n;
        return value;
      }
    }
    return std::nullopt;
  }
  // "(2, 3)", "(5,)", "()". Dims are non-negative decimal numbers below 2^63;
  // "5L" (Python 2 files) is accepted.
  std::optional<std::vector<int64_t>> Tuple(std::string* error) {
    if (!Eat('(')) return Fail(error, "expected '(' for the shape");
    std::vector<int64_t> dims;
    while (true) {
      if (Eat(')')) return dims;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == '-') return Fail(error, "negative dimension in shape");
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
        return Fail(error, "expected a dimension in the shape");
      }
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (__builtin_mul_overflow(v, int64_t{10}, &v) ||
            __builtin_add_overflow(v, int64_t{s_[pos_] - '0'}, &v)) {
          return Fail(error, "dimension in shape overflows int64");
        }
        ++pos_;
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
      dims.push_back(v);
      if (Eat(',')) continue;
      if (Eat(')')) return dims;
      return Fail(error, "expected ',' or ')' in the shape");
    }
  }

 private:
  std::nullopt_t Fail(std::string* error, const char* msg) {
    *error = msg;
    return std::nullopt;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

// Maps a descr such as "<f4" to a dtype; the byte-order mark only matters for
// multi-byte types.
Result<int32_t> DTypeFromDescr(const std::string& descr, const std::string& what) {
  if (descr.size() < 3) {
    return CorruptFile(what + ": malformed dtype descr '" + descr + "'");
  }
  const char order = descr[0];
  const char kind = descr[1];
  const std::string size_text = descr.substr(2);
  size_t size = 0;
  if (size_text == "1") size = 1;
  else if (size_text == "2") size = 2;
  else if (size_text == "4") size = 4;
  else if (size_text == "8") size = 8;
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return CorruptFile(what + ": malformed dtype descr '" + descr + "'");
  }
  for (const auto& e : kDTypes) {
    if (e.kind != kind || e.size != size) continue;
    if (size > 1 && order == '>') {
      return Unsupported(what + ": big-endian dtype '" + descr +
                         "' is not supported; save the array as little-endian ('<')");
    }
    if (size > 1 && order == '|') {
      return CorruptFile(what + ": dtype '" + descr + "' needs a byte order");
    }
    return e.dtype;
  }
  return Unsupported(what + ": dtype '" + descr +
                     "' is not supported (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1)");
}

struct Header {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
};

Result<Header> ParseHeader(std::string_view text, const std::string& what) {
  HeaderParser p(text);
  std::string error;
  auto bad = [&](const std::string& msg) {
    return CorruptFile(what + ": malformed .npy header at character " +
                       std::to_string(p.pos()) + ": " + msg + " (header: " +
                       std::string(text.substr(0, 200)) + ")");
  };
  if (!p.Eat('{')) return bad("expected '{'");
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  while (!p.Eat('}')) {
    auto key = p.String();
    if (!key) return bad("expected a quoted key or '}'");
    if (!p.Eat(':')) return bad("expected ':' after '" + *key + "'");
    if (*key == "descr") {
      if (descr) return bad("duplicate key 'descr'");
      descr = p.String();
      if (!descr) return bad("'descr' is not a simple dtype string (structured dtypes are not supported)");
    } else if (*key == "fortran_order") {
      if (fortran) return bad("duplicate key 'fortran_order'");
      fortran = p.Bool();
      if (!fortran) return bad("'fortran_order' must be True or False");
    } else if (*key == "shape") {
      if (shape) return bad("duplicate key 'shape'");
      shape = p.Tuple(&error);
      if (!shape) return bad(error);
    } else {
      return bad("unexpected key '" + *key + "'");
    }
    if (!p.Eat(',')) {
      if (!p.Eat('}')) return bad("expected ',' or '}'");
      break;
    }
  }
  if (!p.AtEnd()) return bad("unexpected text after '}'");
  if (!descr || !fortran || !shape) {
    return bad("missing key (needs 'descr', 'fortran_order' and 'shape')");
  }
  if (*fortran) {
    return Unsupported(what + ": Fortran-order arrays are not supported; save a C-order array "
                              "(numpy.ascontiguousarray)");
  }
  Header h;
  FCB_ASSIGN_OR_RETURN(h.dtype, DTypeFromDescr(*descr, what));
  h.shape = std::move(*shape);
  return h;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Number of data bytes `shape` needs, or nullopt when that overflows.
std::optional<uint64_t> DataBytes(const std::vector<int64_t>& shape, size_t element_size) {
  uint64_t n = element_size;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

}  // namespace

size_t NpyElementSize(int32_t dtype) {
  const DTypeEntry* e = FindDType(dtype);
  return e ? e->size : 0;
}

namespace {

// Parses an .npy image. With `owned` (holding exactly these bytes) the data
// stays in that buffer (shifted over the header) instead of being copied to a
// fresh one: a fresh copy of a large input costs a page fault per 4 KiB, more
// than reading the file.
Result<NpyArray> ParseNpyImpl(const uint8_t* bytes, size_t size, const std::string& what,
                              std::vector<uint8_t>* owned) {
  if (size < 10 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    return CorruptFile(what + ": not a NumPy .npy file (" +
                       (size < 10 ? "only " + std::to_string(size) + " bytes" : "bad magic") +
                       ")");
  }
  const uint8_t major = bytes[6], minor = bytes[7];
  size_t header_start = 0;
  uint64_t header_len = 0;
  if (major == 1) {
    header_start = 10;
    header_len = bytes[8] | (uint64_t{bytes[9]} << 8);
  } else if (major == 2 || major == 3) {
    header_start = 12;
    if (size < header_start) {
      return CorruptFile(what + ": truncated .npy header (" + std::to_string(size) + " bytes)");
    }
    header_len = bytes[8] | (uint64_t{bytes[9]} << 8) | (uint64_t{bytes[10]} << 16) |
                 (uint64_t{bytes[11]} << 24);
  } else {
    return Unsupported(what + ": .npy format version " + std::to_string(major) + "." +
                       std::to_string(minor) + " is not supported (1.0, 2.0, 3.0 are)");
  }
  if (header_len > size - header_start) {
    return CorruptFile(what + ": .npy header length " + std::to_string(header_len) +
                       " at offset 8 runs past the end of the file (" + std::to_string(size) +
                       " bytes)");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes + header_start), header_len);
  FCB_ASSIGN_OR_RETURN(Header h, ParseHeader(text, what));

  const size_t data_start = header_start + header_len;
  const size_t elem = NpyElementSize(h.dtype);
  const std::optional<uint64_t> need = DataBytes(h.shape, elem);
  if (!need) {
    return CorruptFile(what + ": shape " + ShapeText(h.shape) + " is too large");
  }
  const uint64_t have = size - data_start;
  if (have != *need) {
    return CorruptFile(what + ": data at offset " + std::to_string(data_start) + " is " +
                       std::to_string(have) + " bytes, but shape " + ShapeText(h.shape) +
                       " needs " + std::to_string(*need) +
                       (have < *need ? " (truncated file)" : " (trailing bytes)"));
  }
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = std::move(h.shape);
  if (owned) {
    owned->erase(owned->begin(), owned->begin() + static_cast<std::ptrdiff_t>(data_start));
    a.data = std::move(*owned);
  } else {
    a.data.assign(bytes + data_start, bytes + size);
  }
  // NumPy treats any non-zero byte as True; fcb kernels expect exactly 0 or 1.
  if (a.dtype == kNpyBool) {
    for (uint8_t& b : a.data) b = b != 0;
  }
  return a;
}

}  // namespace

Result<NpyArray> ParseNpy(const uint8_t* bytes, size_t size, const std::string& what) {
  return ParseNpyImpl(bytes, size, what, nullptr);
}

Result<NpyArray> ReadNpy(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno;
    std::string msg = path + ": cannot open .npy file: " + std::strerror(err);
    return err == ENOENT ? NotFound(msg) : IoError(msg);
  }
  // One buffer of the file's size, filled without intermediate copies (read
  // to EOF all the same, in case the file is not regular or grows).
  std::vector<uint8_t> bytes;
  struct stat st;
  const bool sized = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  bytes.resize(sized ? static_cast<size_t>(st.st_size) : size_t{1} << 16);
  size_t used = 0;
  for (;;) {
    if (used == bytes.size()) {  // full: grow only if there is more to read
      uint8_t probe;
      if (std::fread(&probe, 1, 1, f) == 0) break;
      bytes.resize(bytes.size() * 2);
      bytes[used++] = probe;
    }
    const size_t n = std::fread(bytes.data() + used, 1, bytes.size() - used, f);
    if (n == 0) break;
    used += n;
  }
  bytes.resize(used);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return IoError(path + ": read error after " + std::to_string(used) + " bytes");
  const uint8_t* data = bytes.data();
  return ParseNpyImpl(data, used, path, &bytes);
}

Result<std::vector<uint8_t>> SerializeNpy(const NpyArray& a) {
  const DTypeEntry* e = FindDType(a.dtype);
  if (!e) {
    return InvalidArgument("cannot write .npy: dtype code " + std::to_string(a.dtype) +
                           (a.dtype == 16 ? " (bfloat16, which NumPy has no dtype for)" : "") +
                           " is not supported");
  }
  const std::optional<uint64_t> need = DataBytes(a.shape, e->size);
  if (!need) {
    return InvalidArgument("cannot write .npy: shape " + ShapeText(a.shape) +
                           " has a negative dimension or is too large");
  }
  if (*need != a.data.size()) {
    return InvalidArgument("cannot write .npy: shape " + ShapeText(a.shape) + " needs " +
                           std::to_string(*need) + " bytes, data has " +
                           std::to_string(a.data.size()));
  }
  std::string header = std::string("{'descr': '") + e->descr +
                       "', 'fortran_order': False, 'shape': " + ShapeText(a.shape) + ", }";
  // Version 1.0 stores the header length in 16 bits; fall back to 2.0 beyond.
  size_t prefix = 10;
  if (header.size() + 1 + 64 > 0xFFFF) prefix = 12;
  const size_t unpadded = prefix + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  std::vector<uint8_t> out;
  out.reserve(prefix + header.size() + a.data.size());
  out.insert(out.end(), kMagic, kMagic + kMagicSize);
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  const size_t len = header.size();
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<uint8_t>(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

Status WriteNpy(const std::string& path, const NpyArray& a) {
  auto bytes = SerializeNpy(a);
  if (!bytes.ok()) return bytes.TakeStatus().Annotate(path);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return IoError(tmp + ": cannot create: " + std::strerror(errno));
  const bool wrote = std::fwrite(bytes->data(), 1, bytes->size(), f) == bytes->size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    std::remove(tmp.c_str());
    return IoError(tmp + ": write failed: " + std::strerror(wrote ? errno : write_errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return IoError(path + ": cannot rename " + tmp + " into place: " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace fcb
