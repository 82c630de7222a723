// Writing and loading .fcb files.
//
// Byte layout, in order (all integers little-endian):
//   [0, 128)        fixed header (see kHeader* in fcb_file.cc): magic "\x89FCB\r\n\x1a\n",
//                   format version, producer version string, endianness marker,
//                   file size, offset/size/XXH3-64 of the metadata and of the weight
//                   pool, and an XXH3-64 of the header itself.
//   [meta_offset)   FlatBuffers metadata (schema fcb.fbs): producer, contexts, blob table.
//   [pool_offset)   weight pool, page aligned; each blob 64-byte aligned (4096 for
//                   blobs of 64 KiB or more) so weights are used in place from the mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fcb/status.h"
#include "format/file_desc.h"

namespace fcb::format {

inline constexpr uint32_t kFormatVersion = 1;

// Builds the weight pool: identical byte strings are stored once.
class WeightPoolBuilder {
 public:
  // Returns the id of a blob with exactly these bytes, adding it if new.
  // Identity is XXH3-128 plus length, confirmed by comparing the bytes.
  int32_t Add(const void* data, uint64_t size);
  // Always adds a new blob, even if an identical one exists (weight_sharing: false).
  int32_t AddUnshared(const void* data, uint64_t size);
  size_t size() const { return blobs_.size(); }
  const std::vector<uint8_t>& bytes(int32_t id) const { return blobs_[id]; }
  uint64_t hash_lo(int32_t id) const { return hashes_[id].first; }
  uint64_t hash_hi(int32_t id) const { return hashes_[id].second; }

 private:
  std::vector<std::vector<uint8_t>> blobs_;
  std::vector<std::pair<uint64_t, uint64_t>> hashes_;
};

// Serializes `desc` (whose blobs table is filled in here from `pool`) and writes
// it atomically: a temporary file in the destination folder, fsync, rename. On
// any failure nothing is left behind and an existing file at `path` is untouched.
Status WriteFcbFile(FileDesc desc, const WeightPoolBuilder& pool, const std::string& path);

// A mapped, verified file. Immutable; safe to share across threads.
class LoadedFile {
 public:
  ~LoadedFile();
  LoadedFile(const LoadedFile&) = delete;
  LoadedFile& operator=(const LoadedFile&) = delete;

  const FileDesc& desc() const { return desc_; }
  uint64_t file_size() const { return size_; }
  uint32_t format_version() const { return format_version_; }
  // Pointer to blob `id`'s bytes inside the mapping (validated at load).
  const uint8_t* blob_data(int32_t id) const;
  uint64_t meta_bytes() const { return meta_size_; }
  uint64_t pool_offset() const { return pool_offset_; }

 private:
  friend Result<std::unique_ptr<LoadedFile>> LoadFcbFile(const std::string&, bool);
  LoadedFile() = default;
  void* map_ = nullptr;
  uint64_t size_ = 0;
  uint32_t format_version_ = 0;
  uint64_t meta_size_ = 0;
  uint64_t pool_offset_ = 0;
  FileDesc desc_;
};

// Maps and verifies `path`: header, every offset and size against the file size,
// the FlatBuffers verifier, blob bounds and alignment, and (when
// verify_checksums) the XXH3 checksums of header, metadata and weight pool.
// Errors are kCorruptFile with the byte offset of what failed, or kIoError.
Result<std::unique_ptr<LoadedFile>> LoadFcbFile(const std::string& path,
                                               bool verify_checksums = true);

}  // namespace fcb::format
