// The fixed 128-byte header of an .fcb file: encoding and the checks that run
// before anything else in the file is trusted. Layout: see fcb_file.h.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

#include "fcb/status.h"

namespace fcb::format {

inline constexpr uint64_t kHeaderSize = 128;
inline constexpr uint8_t kMagic[8] = {0x89, 'F', 'C', 'B', '\r', '\n', 0x1a, '\n'};
inline constexpr uint32_t kEndianMarker = 0x01020304;
inline constexpr uint64_t kProducerBytes = 32;
inline constexpr uint64_t kPoolAlign = 4096;        // pool start; blobs >= kLargeBlob
inline constexpr uint64_t kBlobAlign = 64;          // every blob
inline constexpr uint64_t kLargeBlob = 64 * 1024;   // from this size on, page aligned
inline constexpr uint64_t kMetaAlign = 8;           // FlatBuffers scalars read in place

// Byte offsets of the header fields (format versions 1 and 2). Magic, version, header
// size and endianness marker keep their offsets in every future version so a
// reader can always say what it is looking at.
enum HeaderOffset : uint64_t {
  kOffMagic = 0,
  kOffVersion = 8,
  kOffHeaderSize = 12,
  kOffEndian = 16,
  kOffFlags = 20,        // u32, zero
  kOffProducer = 24,     // 32 bytes, NUL padded
  kOffFileSize = 56,
  kOffMetaOffset = 64,
  kOffMetaSize = 72,
  kOffMetaHash = 80,
  kOffPoolOffset = 88,
  kOffPoolSize = 96,
  kOffPoolHash = 104,
  kOffReserved = 112,    // u64, zero
  kOffHeaderHash = 120,  // XXH3-64 of bytes [0, 120)
};

struct FileHeader {
  uint32_t format_version = 0;
  std::string producer;  // at most 32 bytes are stored
  uint64_t file_size = 0;
  uint64_t meta_offset = 0, meta_size = 0, meta_hash = 0;
  uint64_t pool_offset = 0, pool_size = 0, pool_hash = 0;
};

// Writes `h` (with version kFormatVersion) and its checksum into `out`.
void EncodeHeader(const FileHeader& h, uint8_t out[kHeaderSize]);

// Checks, in order: size >= header, magic, endianness, version, header size,
// header checksum, reserved bytes, recorded file size, and that metadata and
// pool lie inside the file, in order, aligned, without overflow. `data` holds
// the whole file of `file_size` bytes. Errors: CorruptFile naming `path` and
// the byte offset of the offending field.
Result<FileHeader> DecodeHeader(const uint8_t* data, uint64_t file_size,
                                const std::string& path);

// .fcb files are little-endian and the loader reads weights and metadata in
// place from the mapping, so a big-endian host would misread every number:
// Unavailable there (DecodeHeader checks it first), Ok on little-endian hosts.
Status CheckHostByteOrder(bool host_is_little_endian = std::endian::native == std::endian::little);

uint64_t LoadLe64(const uint8_t* p);
uint32_t LoadLe32(const uint8_t* p);
void StoreLe64(uint8_t* p, uint64_t v);
void StoreLe32(uint8_t* p, uint32_t v);

}  // namespace fcb::format
