#include "format/fcb_file.h"
#include "format/fast_hash.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>

#include "format/atomic_file.h"
#include "format/fcb_header.h"
#include "format/mapped_file.h"
#include "format/metadata.h"

namespace fcb::format {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Walks the pool as the file stores it: padding (zeros) and blob bytes in
// order. One walk drives both the checksum and the write, so they agree.
template <typename Fn>
Status ForEachPoolChunk(const std::vector<BlobDesc>& blobs, const WeightPoolBuilder& pool,
                        Fn&& fn) {
  static const uint8_t kZeros[kPoolAlign] = {};
  uint64_t pos = 0;
  for (size_t id = 0; id < blobs.size(); ++id) {
    // Padding is below the largest alignment (4096), so one zero chunk covers it.
    if (blobs[id].offset > pos) FCB_RETURN_IF_ERROR(fn(kZeros, blobs[id].offset - pos));
    const std::vector<uint8_t>& bytes = pool.bytes(static_cast<int32_t>(id));
    if (!bytes.empty()) FCB_RETURN_IF_ERROR(fn(bytes.data(), bytes.size()));
    pos = blobs[id].offset + blobs[id].size;
  }
  return Status::Ok();
}

uint64_t PoolChecksum(const std::vector<BlobDesc>& blobs, const WeightPoolBuilder& pool) {
  PoolHasher hasher;
  Status ignored = ForEachPoolChunk(blobs, pool, [&](const void* p, uint64_t n) {
    hasher.Update(p, n);
    return Status::Ok();
  });
  (void)ignored;
  return hasher.Digest();
}

}  // namespace

// ---- WeightPoolBuilder ----------------------------------------------------

int32_t WeightPoolBuilder::Append(const void* data, uint64_t size,
                                  std::pair<uint64_t, uint64_t> hash) {
  const auto* p = static_cast<const uint8_t*>(data);
  blobs_.emplace_back(p, p + size);
  hashes_.push_back(hash);
  return static_cast<int32_t>(blobs_.size() - 1);
}

int32_t WeightPoolBuilder::Add(const void* data, uint64_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  std::vector<int32_t>& ids = index_[{h.low64, h.high64, size}];
  for (int32_t id : ids) {
    // A hash match is only a hint; merge only byte-identical blobs.
    if (size == 0 || std::memcmp(blobs_[id].data(), data, size) == 0) return id;
  }
  int32_t id = Append(data, size, {h.low64, h.high64});
  ids.push_back(id);
  return id;
}

int32_t WeightPoolBuilder::AddUnshared(const void* data, uint64_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  return Append(data, size, {h.low64, h.high64});
}

// ---- Writer ----------------------------------------------------------------

Status WriteFcbFile(FileDesc desc, const WeightPoolBuilder& pool, const std::string& path) {
  // Lay out the pool: blobs in id order, aligned, zero padding between them.
  desc.blobs.clear();
  uint64_t pool_size = 0;
  for (size_t id = 0; id < pool.size(); ++id) {
    int32_t i = static_cast<int32_t>(id);
    uint64_t size = pool.bytes(i).size();
    uint64_t offset = AlignUp(pool_size, size >= kLargeBlob ? kPoolAlign : kBlobAlign);
    desc.blobs.push_back(BlobDesc{offset, size, pool.hash_lo(i), pool.hash_hi(i)});
    pool_size = offset + size;
  }

  FileHeader h;
  h.producer = desc.producer;
  h.meta_offset = kHeaderSize;
  std::vector<uint8_t> meta = EncodeMetadata(desc);
  h.meta_size = meta.size();
  h.meta_hash = XXH3_64bits(meta.data(), meta.size());
  h.pool_offset = AlignUp(h.meta_offset + h.meta_size, kPoolAlign);
  h.pool_size = pool_size;
  h.pool_hash = PoolChecksum(desc.blobs, pool);
  h.file_size = h.pool_offset + h.pool_size;

  // Refuse to write what the loader would refuse to load.
  std::string err = CheckDescStructure(desc, h.pool_offset, h.pool_size);
  if (!err.empty()) return InvalidArgument("writing '" + path + "': " + err);

  uint8_t header[kHeaderSize];
  EncodeHeader(h, header);

  AtomicFile out(path);
  FCB_RETURN_IF_ERROR(out.Open());
  FCB_RETURN_IF_ERROR(out.Write(header, sizeof(header)));
  FCB_RETURN_IF_ERROR(out.Write(meta.data(), meta.size()));
  FCB_RETURN_IF_ERROR(out.WriteZeros(h.pool_offset - h.meta_offset - h.meta_size));
  FCB_RETURN_IF_ERROR(ForEachPoolChunk(
      desc.blobs, pool, [&](const void* p, uint64_t n) { return out.Write(p, n); }));
  return out.Commit();
}

// ---- Loader ----------------------------------------------------------------

LoadedFile::LoadedFile() = default;
LoadedFile::~LoadedFile() = default;

const uint8_t* LoadedFile::blob_data(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= desc_.blobs.size()) return nullptr;
  return map_->data() + pool_offset_ + desc_.blobs[id].offset;
}

Result<std::unique_ptr<LoadedFile>> LoadFcbFile(const std::string& path,
                                               bool verify_checksums, uint64_t max_decoded_bytes) {
  FCB_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::Open(path));
  const uint8_t* data = map->data();
  FCB_ASSIGN_OR_RETURN(FileHeader h, DecodeHeader(data, map->size(), path));
  auto corrupt = [&](uint64_t offset, const std::string& what) {
    return CorruptFile("fcb file '" + path + "': at offset " + std::to_string(offset) + ": " +
                       what);
  };

  // The metadata checksum always runs: the metadata is small, and the
  // verifier below is no substitute for detecting a flipped index.
  uint64_t meta_hash = XXH3_64bits(data + h.meta_offset, h.meta_size);
  if (meta_hash != h.meta_hash)
    return corrupt(h.meta_offset, "metadata [offset " + std::to_string(h.meta_offset) +
                                      ", size " + std::to_string(h.meta_size) +
                                      "] checksum mismatch (stored " + Hex(h.meta_hash) +
                                      ", computed " + Hex(meta_hash) + ")");
  uint64_t decoded_bytes = 0;
  Result<FileDesc> desc = DecodeMetadata(data + h.meta_offset, h.meta_size, h.meta_offset,
                                         h.pool_offset, h.pool_size, max_decoded_bytes, &decoded_bytes);
  if (!desc.ok()) return desc.TakeStatus().Annotate("fcb file '" + path + "'");

  for (uint64_t i = h.meta_offset + h.meta_size; i < h.pool_offset; ++i) {
    if (data[i] != 0) return corrupt(i, "padding before the weight pool is not zero");
  }
  std::unique_ptr<LoadedFile> file(new LoadedFile());
  file->map_ = std::move(map);
  file->size_ = h.file_size;
  file->format_version_ = h.format_version;
  file->meta_size_ = h.meta_size;
  file->pool_offset_ = h.pool_offset;
  file->pool_size_ = h.pool_size;
  file->pool_hash_ = h.pool_hash;
  file->decoded_bytes_ = decoded_bytes;
  file->path_ = path;
  file->desc_ = std::move(desc).value();
  if (verify_checksums) FCB_RETURN_IF_ERROR(file->VerifyPool());
  return file;
}

Status LoadedFile::VerifyPool(unsigned max_threads) const {
  const uint64_t got = PoolHash(map_->data() + pool_offset_, pool_size_, max_threads);
  if (got == pool_hash_) return Status::Ok();
  return CorruptFile("fcb file '" + path_ + "': at offset " + std::to_string(pool_offset_) +
                     ": weight pool [offset " + std::to_string(pool_offset_) + ", size " +
                     std::to_string(pool_size_) + "] checksum mismatch (stored " + Hex(pool_hash_) +
                     ", computed " + Hex(got) + ")");
}

Status LoadedFile::VerifyBlob(int32_t id, const std::string& what) const {
  const uint8_t* p = blob_data(id);
  if (!p) return CorruptFile("fcb file '" + path_ + "': " + what + " refers to blob " + std::to_string(id) + " which does not exist");
  const BlobDesc& b = desc_.blobs[id];
  const XXH128_hash_t h = XXH3_128bits(p, b.size);
  if (h.low64 == b.hash_lo && h.high64 == b.hash_hi) return Status::Ok();
  const uint64_t at = pool_offset_ + b.offset;
  return CorruptFile("fcb file '" + path_ + "': at offset " + std::to_string(at) + ": weight blob " +
                     std::to_string(id) + " [offset " + std::to_string(at) + ", size " +
                     std::to_string(b.size) + "] (" + what + ") checksum mismatch");
}

}  // namespace fcb::format
