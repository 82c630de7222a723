// Writing and loading .fcb files.
//
// Byte layout, in order (all integers little-endian; format version 2):
//
//   offset size  field
//   0      8     magic "\x89FCB\r\n\x1a\n" (the PNG trick: catches 7-bit and
//                CRLF/LF mangling, and stops `type` on DOS at \x1a)
//   8      4     u32 format version (kFormatVersion = 2)
//   12     4     u32 header size (128)
//   16     4     u32 endianness marker 0x01020304 (bytes 04 03 02 01); a
//                big-endian file is refused with a message saying so
//   20     4     u32 flags, zero
//   24     32    producer version string, e.g. "fcb 0.1.0", NUL padded
//                (FileDesc.producer, cut to 32 bytes)
//   56     8     u64 file size
//   64     8     u64 metadata offset (8-byte aligned, >= 128)
//   72     8     u64 metadata size
//   80     8     u64 metadata XXH3-64
//   88     8     u64 weight-pool offset (4096-byte aligned, after the metadata)
//   96     8     u64 weight-pool size (the pool ends the file)
//   104    8     u64 weight-pool checksum: XXH3-64 of the XXH3-64s of the
//                pool's 1 MiB chunks (all pool bytes, padding included), so
//                the loader verifies chunks on every core (fast_hash.h).
//                Version 1 hashed the pool as one stream.
//   112    8     reserved, zero
//   120    8     u64 XXH3-64 of header bytes [0, 120)
//   128    ...   metadata: a FlatBuffer (schema fcb.fbs, identifier "FCBM")
//                mirroring FileDesc: producer, contexts, blob table
//   ...          zero padding up to the pool offset
//   pool   ...   weight pool: blobs in id order, each 64-byte aligned (4096
//                for blobs of 64 KiB or more) relative to the pool start, zero
//                padding between them, so weights are used in place from the
//                mapping.
//
// Magic, version, header size and endianness marker keep their offsets in
// every future version. Every byte of a valid file is covered by a check:
// the header and metadata by their checksums, the padding after the metadata
// by a zero check, the pool by its checksum (when verify_checksums).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fcb/status.h"
#include "format/file_desc.h"

namespace fcb::format {

inline constexpr uint32_t kFormatVersion = 2;

class MappedFile;

// Builds the weight pool: identical byte strings are stored once. Not
// thread-safe; ids are dense, in order of first addition.
class WeightPoolBuilder {
 public:
  // Returns the id of a blob with exactly these bytes, adding it if new.
  // Identity is XXH3-128 plus length, confirmed by comparing the bytes.
  // `data` may be null when `size` is 0; the bytes are copied.
  int32_t Add(const void* data, uint64_t size);
  // Always adds a new blob, even if an identical one exists (weight_sharing:
  // false). Later Add calls never merge into a blob added this way.
  int32_t AddUnshared(const void* data, uint64_t size);
  size_t size() const { return blobs_.size(); }
  const std::vector<uint8_t>& bytes(int32_t id) const { return blobs_[id]; }
  uint64_t hash_lo(int32_t id) const { return hashes_[id].first; }
  uint64_t hash_hi(int32_t id) const { return hashes_[id].second; }

 private:
  int32_t Append(const void* data, uint64_t size, std::pair<uint64_t, uint64_t> hash);

  std::vector<std::vector<uint8_t>> blobs_;
  std::vector<std::pair<uint64_t, uint64_t>> hashes_;
  // (hash lo, hash hi, size) -> ids added with Add; more than one id only on
  // a true XXH3-128 collision between different bytes.
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, std::vector<int32_t>> index_;
};

// Serializes `desc` (whose blobs table is filled in here from `pool`) and writes
// it atomically: a temporary file `.NAME.tmp.XXXXXX` in the destination folder,
// fsync, rename. Deterministic: the same desc and pool give the same bytes.
// InvalidArgument when `desc` refers to tensors or blobs that do not exist;
// IoError (naming the path and the OS error) when the OS refuses. On any
// failure nothing is left behind and an existing file at `path` is untouched.
Status WriteFcbFile(FileDesc desc, const WeightPoolBuilder& pool, const std::string& path);

// A mapped, verified file. Immutable; safe to share across threads. Pointers
// it hands out stay valid until it is destroyed.
class LoadedFile {
 public:
  ~LoadedFile();
  LoadedFile(const LoadedFile&) = delete;
  LoadedFile& operator=(const LoadedFile&) = delete;

  const FileDesc& desc() const { return desc_; }
  uint64_t file_size() const { return size_; }
  const std::string& path() const { return path_; }  // as given to LoadFcbFile
  uint32_t format_version() const { return format_version_; }
  // Pointer to blob `id`'s bytes inside the mapping (bounds and alignment were
  // validated at load); nullptr when `id` is out of range.
  const uint8_t* blob_data(int32_t id) const;
  uint64_t meta_bytes() const { return meta_size_; }
  uint64_t pool_offset() const { return pool_offset_; }
  uint64_t pool_size() const { return pool_size_; }
  // What the decoded metadata (desc()) takes in memory, near enough.
  uint64_t decoded_bytes() const { return decoded_bytes_; }

  // The pool checksum (all pool bytes against the header's), hashing chunks
  // on up to `max_threads` threads (0: every core). CorruptFile names the
  // file and the pool's offset and size. LoadFcbFile runs it when asked to
  // verify; a loader that defers it calls it itself.
  Status VerifyPool(unsigned max_threads = 0) const;
  // Blob `id`'s bytes against the XXH3-128 the metadata records for it;
  // CorruptFile names the blob, `what` uses it, and its file offset.
  Status VerifyBlob(int32_t id, const std::string& what) const;

 private:
  friend Result<std::unique_ptr<LoadedFile>> LoadFcbFile(const std::string&, bool, uint64_t);
  LoadedFile();
  std::unique_ptr<MappedFile> map_;
  uint64_t size_ = 0;
  uint32_t format_version_ = 0;
  uint64_t meta_size_ = 0;
  uint64_t pool_offset_ = 0;
  uint64_t pool_size_ = 0;
  uint64_t pool_hash_ = 0;
  uint64_t decoded_bytes_ = 0;
  std::string path_;
  FileDesc desc_;
};

// Maps `path` read-only and verifies, in order: the header (magic, endianness,
// version, header checksum, file size, section bounds), the metadata checksum,
// the FlatBuffers verifier, the structure (every index and blob range, blob
// alignment), the zero padding before the pool, and, when verify_checksums,
// the pool checksum (the one check whose cost grows with the weights).
// Errors: CorruptFile naming the path and the byte offset of what failed;
// NotFound when the file does not exist; IoError when it cannot be read
// (a folder, no permission, mmap failure); ResourceExhausted when decoding
// the metadata would take more than `max_decoded_bytes` (see DecodeMetadata).
Result<std::unique_ptr<LoadedFile>> LoadFcbFile(const std::string& path,
                                               bool verify_checksums = true,
                                               uint64_t max_decoded_bytes = UINT64_MAX);

}  // namespace fcb::format
