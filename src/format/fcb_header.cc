#include "format/fcb_header.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "format/fcb_file.h"

namespace fcb::format {
namespace {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The producer field is read before the header checksum is checked, so it
// may be garbage: keep it printable for error messages.
std::string PrintableProducer(const uint8_t* p) {
  std::string s;
  for (uint64_t i = 0; i < kProducerBytes && p[i] != 0; ++i)
    s += (p[i] >= 0x20 && p[i] < 0x7f) ? static_cast<char>(p[i]) : '?';
  return s;
}

std::string Range(const char* what, uint64_t offset, uint64_t size) {
  return std::string(what) + " [offset " + std::to_string(offset) + ", size " +
         std::to_string(size) + "]";
}

}  // namespace

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint32_t LoadLe32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void StoreLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void StoreLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void EncodeHeader(const FileHeader& h, uint8_t out[kHeaderSize]) {
  std::memset(out, 0, kHeaderSize);
  std::memcpy(out + kOffMagic, kMagic, sizeof(kMagic));
  StoreLe32(out + kOffVersion, kFormatVersion);
  StoreLe32(out + kOffHeaderSize, static_cast<uint32_t>(kHeaderSize));
  StoreLe32(out + kOffEndian, kEndianMarker);
  std::memcpy(out + kOffProducer, h.producer.data(),
              std::min<size_t>(h.producer.size(), kProducerBytes));
  StoreLe64(out + kOffFileSize, h.file_size);
  StoreLe64(out + kOffMetaOffset, h.meta_offset);
  StoreLe64(out + kOffMetaSize, h.meta_size);
  StoreLe64(out + kOffMetaHash, h.meta_hash);
  StoreLe64(out + kOffPoolOffset, h.pool_offset);
  StoreLe64(out + kOffPoolSize, h.pool_size);
  StoreLe64(out + kOffPoolHash, h.pool_hash);
  StoreLe64(out + kOffHeaderHash, XXH3_64bits(out, kOffHeaderHash));
}

Status CheckHostByteOrder(bool host_is_little_endian) {
  if (host_is_little_endian) return Status::Ok();
  return Unavailable(
      "this host is big-endian: .fcb files are little-endian and fcb reads them in place, so it runs only on "
      "little-endian hosts (x86-64, little-endian AArch64)");
}

Result<FileHeader> DecodeHeader(const uint8_t* data, uint64_t file_size,
                                const std::string& path) {
  FCB_RETURN_IF_ERROR(CheckHostByteOrder());
  auto corrupt = [&](uint64_t offset, const std::string& what) {
    return CorruptFile("fcb file '" + path + "': at offset " + std::to_string(offset) + ": " +
                       what);
  };
  if (file_size < kHeaderSize)
    return CorruptFile("fcb file '" + path + "': file is " + std::to_string(file_size) +
                       " bytes, shorter than the " + std::to_string(kHeaderSize) +
                       "-byte header (truncated or not an .fcb file)");
  if (std::memcmp(data + kOffMagic, kMagic, sizeof(kMagic)) != 0)
    return corrupt(kOffMagic, "bad magic (not an .fcb file)");

  // Endianness before version: a big-endian file would otherwise be reported
  // as a nonsense version number.
  uint32_t endian = LoadLe32(data + kOffEndian);
  if (endian == __builtin_bswap32(kEndianMarker))
    return corrupt(kOffEndian, "big-endian .fcb file; only little-endian files are supported");
  if (endian != kEndianMarker)
    return corrupt(kOffEndian, "bad endianness marker " + Hex(endian) + " (expected " +
                                   Hex(kEndianMarker) + ")");

  FileHeader h;
  h.format_version = LoadLe32(data + kOffVersion);
  if (h.format_version == 0) return corrupt(kOffVersion, "format version 0 is invalid");
  if (h.format_version > kFormatVersion)
    return corrupt(kOffVersion,
                   "file has format version " + std::to_string(h.format_version) +
                       " (written by '" + PrintableProducer(data + kOffProducer) +
                       "') but this build of fcb reads format version " +
                       std::to_string(kFormatVersion) + " only; use a newer fcb");
  if (h.format_version < kFormatVersion)
    return corrupt(kOffVersion,
                   "file has format version " + std::to_string(h.format_version) +
                       " (written by '" + PrintableProducer(data + kOffProducer) +
                       "'), which this build of fcb no longer reads (it reads version " +
                       std::to_string(kFormatVersion) + "); compile the model again");
  uint32_t header_size = LoadLe32(data + kOffHeaderSize);
  if (header_size != kHeaderSize)
    return corrupt(kOffHeaderSize, "header size " + std::to_string(header_size) +
                                       " (format version " + std::to_string(kFormatVersion) + " has " +
                                       std::to_string(kHeaderSize) + ")");
  uint64_t want_hash = LoadLe64(data + kOffHeaderHash);
  uint64_t got_hash = XXH3_64bits(data, kOffHeaderHash);
  if (got_hash != want_hash)
    return corrupt(kOffHeaderHash, "header checksum mismatch (stored " + Hex(want_hash) +
                                       ", computed " + Hex(got_hash) + ")");
  if (LoadLe32(data + kOffFlags) != 0) return corrupt(kOffFlags, "reserved flags are not zero");
  if (LoadLe64(data + kOffReserved) != 0)
    return corrupt(kOffReserved, "reserved header bytes are not zero");

  h.producer = PrintableProducer(data + kOffProducer);
  h.file_size = LoadLe64(data + kOffFileSize);
  h.meta_offset = LoadLe64(data + kOffMetaOffset);
  h.meta_size = LoadLe64(data + kOffMetaSize);
  h.meta_hash = LoadLe64(data + kOffMetaHash);
  h.pool_offset = LoadLe64(data + kOffPoolOffset);
  h.pool_size = LoadLe64(data + kOffPoolSize);
  h.pool_hash = LoadLe64(data + kOffPoolHash);

  if (h.file_size != file_size)
    return corrupt(kOffFileSize, "header records file size " + std::to_string(h.file_size) +
                                     " but the file has " + std::to_string(file_size) +
                                     " bytes (truncated or extended)");

  uint64_t meta_end = 0, pool_end = 0;
  std::string meta = Range("metadata", h.meta_offset, h.meta_size);
  std::string pool = Range("weight pool", h.pool_offset, h.pool_size);
  std::string eof = " (size " + std::to_string(file_size) + ")";
  if (__builtin_add_overflow(h.meta_offset, h.meta_size, &meta_end) || meta_end > file_size)
    return corrupt(kOffMetaOffset, meta + " extends past end of file" + eof);
  if (h.meta_offset < kHeaderSize)
    return corrupt(kOffMetaOffset, meta + " overlaps the header");
  if (h.meta_offset % kMetaAlign != 0)
    return corrupt(kOffMetaOffset, meta + " is not " + std::to_string(kMetaAlign) +
                                       "-byte aligned");
  if (h.meta_size == 0) return corrupt(kOffMetaSize, meta + " is empty");
  if (__builtin_add_overflow(h.pool_offset, h.pool_size, &pool_end) || pool_end > file_size)
    return corrupt(kOffPoolOffset, pool + " extends past end of file" + eof);
  if (h.pool_offset < meta_end)
    return corrupt(kOffPoolOffset, pool + " overlaps the " + meta);
  if (h.pool_offset % kPoolAlign != 0)
    return corrupt(kOffPoolOffset, pool + " is not " + std::to_string(kPoolAlign) +
                                       "-byte aligned");
  if (pool_end != file_size)
    return corrupt(pool_end, std::to_string(file_size - pool_end) +
                                 " unexpected bytes after the " + pool);
  return h;
}

}  // namespace fcb::format
