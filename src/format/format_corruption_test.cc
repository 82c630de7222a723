// A damaged or hostile .fcb must be refused with CorruptFile, never crash:
// byte flips in every section, truncation, and files whose checksums were
// recomputed after a hostile edit so that only the structural checks stand
// between them and the runtime. Run under ASan/UBSan too (FCB_SANITIZE=ON).
#include <fcntl.h>
#include <unistd.h>

#include <limits>

#include "fcb_generated.h"
#include "format/fcb_file.h"
#include "format/format_test_util.h"
#include "test_util.h"

namespace fcb::format {
namespace {

using namespace ::fcb::format::test;  // and the file helpers of test_util.h

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    WeightPoolBuilder pool;
    desc_ = SampleDesc(pool);
    path_ = dir_.File("model.fcb");
    ASSERT_TRUE(WriteFcbFile(desc_, pool, path_).ok());
    good_ = ReadBytes(path_);
    meta_off_ = Get64(good_, kMetaOffAt);
    meta_end_ = meta_off_ + Get64(good_, kMetaSizeAt);
    pool_off_ = Get64(good_, kPoolOffAt);
    auto loaded = LoadFcbFile(path_);
    ASSERT_TRUE(loaded.ok());
    blobs_ = (*loaded)->desc().blobs;
  }

  Status Load(const std::vector<uint8_t>& bytes, bool verify = true) {
    WriteBytes(path_, bytes);
    return LoadFcbFile(path_, verify).status();
  }

  // Patches one byte of the file in place (cheaper than rewriting it).
  void Poke(int fd, uint64_t offset, uint8_t value) {
    ASSERT_EQ(pwrite(fd, &value, 1, static_cast<off_t>(offset)), 1);
  }

  const fb::File* Meta(const std::vector<uint8_t>& bytes) {
    return fb::GetFile(bytes.data() + meta_off_);
  }
  // File offset of a field of a FlatBuffers table (generated tables inherit
  // flatbuffers::Table privately, hence the cast).
  template <typename T>
  size_t FieldAt(const std::vector<uint8_t>& bytes, const T* table, uint16_t vt) {
    const uint8_t* p = reinterpret_cast<const flatbuffers::Table*>(table)->GetAddressOf(vt);
    EXPECT_NE(p, nullptr);
    return static_cast<size_t>(p - bytes.data());
  }
  size_t BlobAt(const std::vector<uint8_t>& bytes, size_t id) {
    return static_cast<size_t>(reinterpret_cast<const uint8_t*>(Meta(bytes)->blobs()->Get(id)) -
                               bytes.data());
  }

  void ExpectCorrupt(const std::vector<uint8_t>& bytes, const std::string& part) {
    Status s = Load(bytes);
    EXPECT_EQ(s.code(), StatusCode::kCorruptFile) << s.ToString();
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  }

  TempDir dir_;
  std::string path_;
  FileDesc desc_;
  std::vector<uint8_t> good_;
  std::vector<BlobDesc> blobs_;
  uint64_t meta_off_ = 0, meta_end_ = 0, pool_off_ = 0;
};

// Every byte of header, metadata and the padding after it, and a sample of
// the pool including all padding between blobs: one flipped byte is refused.
TEST_F(Corruption, EveryFlippedByteIsRefused) {
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < pool_off_; ++i) offsets.push_back(i);
  std::vector<bool> in_blob(good_.size() - pool_off_, false);
  for (const BlobDesc& b : blobs_)
    for (uint64_t i = 0; i < b.size; ++i) in_blob[b.offset + i] = true;
  for (uint64_t i = 0; i < in_blob.size(); ++i)
    if (!in_blob[i] || i % 97 == 0) offsets.push_back(pool_off_ + i);
  offsets.push_back(good_.size() - 1);
  ASSERT_GT(offsets.size(), 3000u);

  int fd = open(path_.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  for (uint64_t off : offsets) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0xff}}) {
      Poke(fd, off, good_[off] ^ mask);
      auto r = LoadFcbFile(path_, /*verify_checksums=*/true);
      ASSERT_EQ(r.status().code(), StatusCode::kCorruptFile)
          << "flip 0x" << std::hex << int(mask) << " at offset " << std::dec << off << ": "
          << r.status().ToString();
      // Without pool checksums, only pool flips may go unnoticed.
      auto fast = LoadFcbFile(path_, /*verify_checksums=*/false);
      if (off < pool_off_) {
        ASSERT_EQ(fast.status().code(), StatusCode::kCorruptFile) << "offset " << off;
      }
      Poke(fd, off, good_[off]);
    }
  }
  close(fd);
  EXPECT_TRUE(LoadFcbFile(path_).ok());
}

// Flipped metadata whose checksums are recomputed reaches the FlatBuffers
// verifier and the structural checks: whatever they decide, no crash, and
// what they accept is internally consistent.
TEST_F(Corruption, RehashedMetadataFlipsNeverCrash) {
  int refused = 0, accepted = 0;
  for (uint64_t off = meta_off_; off < meta_end_; ++off) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<uint8_t> bytes = good_;
      bytes[off] ^= mask;
      Rehash(bytes);
      WriteBytes(path_, bytes);
      auto r = LoadFcbFile(path_);
      if (!r.ok()) {
        ASSERT_EQ(r.status().code(), StatusCode::kCorruptFile) << r.status().ToString();
        ++refused;
        continue;
      }
      ++accepted;
      const LoadedFile& f = **r;
      for (size_t id = 0; id < f.desc().blobs.size(); ++id) {
        const uint8_t* p = f.blob_data(static_cast<int32_t>(id));
        uint64_t at = f.pool_offset() + f.desc().blobs[id].offset;
        ASSERT_LE(at + f.desc().blobs[id].size, f.file_size());
        ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
      }
      for (const ContextDesc& c : f.desc().contexts)
        for (const TensorDesc& t : c.tensors)
          if (t.storage == Storage::kWeight) ASSERT_LT(size_t(t.blob), f.desc().blobs.size());
    }
  }
  // Flipped values (a dim, an arena offset) pass; flipped offsets do not.
  EXPECT_GT(refused, 100);
  EXPECT_GT(accepted, 100);
}

TEST_F(Corruption, TruncationAndExtensionAreRefused) {
  for (int i = 0; i < 200; ++i) {
    size_t len = good_.size() * i / 200 + (i % 7);  // spread, not only round offsets
    if (len >= good_.size()) len = good_.size() - 1;
    Status s = Load(std::vector<uint8_t>(good_.begin(), good_.begin() + len));
    ASSERT_EQ(s.code(), StatusCode::kCorruptFile) << "truncated to " << len << ": " << s.ToString();
  }
  std::vector<uint8_t> longer = good_;
  longer.push_back(0);
  ExpectCorrupt(longer, "records file size");
  // A file that grows a trailing page, with the size field and hash fixed up.
  longer.resize(good_.size() + 4096, 0);
  Put64(longer, kFileSizeAt, longer.size());
  Rehash(longer);
  ExpectCorrupt(longer, "unexpected bytes after the weight pool");
}

TEST_F(Corruption, HeaderFieldsAreCheckedWithClearMessages) {
  std::vector<uint8_t> b = good_;
  b[3] = 'X';
  ExpectCorrupt(b, "bad magic");

  b = good_;
  Put32(b, kVersionAt, 3);
  ExpectCorrupt(b, "format version 3 (written by 'fcb 0.1.0') but this build of fcb reads "
                   "format version 2");

  // Version 1 hashed the pool as one stream; such files are refused by
  // version, not misreported as a checksum mismatch.
  b = good_;
  Put32(b, kVersionAt, 1);
  Rehash(b);
  ExpectCorrupt(b, "format version 1 (written by 'fcb 0.1.0'), which this build of fcb no "
                   "longer reads (it reads version 2); compile the model again");

  b = good_;
  Put32(b, kVersionAt, 0);
  Rehash(b);
  ExpectCorrupt(b, "format version 0");

  b = good_;  // a big-endian writer would store every field byte-swapped
  for (size_t at : {kVersionAt, kHdrSizeAt, kEndianAt})
    Put32(b, at, __builtin_bswap32(Get32(good_, at)));
  ExpectCorrupt(b, "big-endian");

  b = good_;
  b[kProducerAt] ^= 1;
  ExpectCorrupt(b, "header checksum mismatch");

  b = good_;
  Put64(b, kMetaSizeAt, std::numeric_limits<uint64_t>::max());
  Rehash(b);
  ExpectCorrupt(b, "metadata [offset 128, size 18446744073709551615] extends past end of file");

  b = good_;
  Put64(b, kMetaSizeAt, Get64(good_, kMetaSizeAt) + good_.size());
  Rehash(b);
  ExpectCorrupt(b, "extends past end of file (size " + std::to_string(good_.size()) + ")");

  b = good_;
  Put64(b, kPoolOffAt, std::numeric_limits<uint64_t>::max() - 4095);
  Put64(b, kPoolSizeAt, 8192);
  Rehash(b);
  ExpectCorrupt(b, "weight pool");

  b = good_;
  Put64(b, kPoolOffAt, pool_off_ + 64);
  Put64(b, kPoolSizeAt, Get64(good_, kPoolSizeAt) - 64);
  Rehash(b);
  ExpectCorrupt(b, "not 4096-byte aligned");

  b = good_;
  Put64(b, kPoolOffAt, 64);
  Rehash(b);
  ExpectCorrupt(b, "overlaps");

  b = good_;
  Put64(b, kMetaOffAt, 132);
  Put64(b, kMetaSizeAt, Get64(good_, kMetaSizeAt) - 4);
  Rehash(b);
  ExpectCorrupt(b, "not 8-byte aligned");

  b = good_;
  b[pool_off_ - 1] = 1;
  ExpectCorrupt(b, "at offset " + std::to_string(pool_off_ - 1) + ": padding");
}

TEST_F(Corruption, HostileBlobTableIsRefusedDespiteChecksums) {
  const uint64_t pool_size = Get64(good_, kPoolSizeAt);
  std::vector<uint8_t> b = good_;
  Put64(b, BlobAt(b, 0), (pool_size + 4096) / 64 * 64);  // offset past the pool
  Rehash(b);
  ExpectCorrupt(b, "blob 0 [pool offset");
  ExpectCorrupt(b, "extends past the end of the weight pool");

  b = good_;
  Put64(b, BlobAt(b, 2), std::numeric_limits<uint64_t>::max() - 63);  // offset + size wraps
  Rehash(b);
  ExpectCorrupt(b, "blob 2");

  b = good_;
  Put64(b, BlobAt(b, 4) + 8, pool_size);  // size runs past the pool
  Rehash(b);
  ExpectCorrupt(b, "blob 4");

  b = good_;
  Put64(b, BlobAt(b, 0), blobs_[0].offset + 8);
  Rehash(b);
  ExpectCorrupt(b, "is not 64-byte aligned");

  b = good_;
  Put64(b, BlobAt(b, 1), blobs_[1].offset + 64);  // a large blob must be page aligned
  Rehash(b);
  ExpectCorrupt(b, "is not 4096-byte aligned");
}

TEST_F(Corruption, HostileIndicesAreRefusedDespiteChecksums) {
  std::vector<uint8_t> b = good_;
  // Equal plans are written once (metadata.cc EncodeContext): the targets'
  // tensor lists are one list, so a bad entry is reported at the first
  // context that reads it.
  ASSERT_EQ(Meta(b)->contexts()->Get(0)->tensors(), Meta(b)->contexts()->Get(1)->tensors());
  const fb::Tensor* w = Meta(b)->contexts()->Get(1)->tensors()->Get(3);
  Put32(b, FieldAt(b, w, fb::Tensor::VT_BLOB), 99);
  Rehash(b);
  ExpectCorrupt(b, "context 0 (method 'main', target 'generic'): tensor 3 'fc.w': blob id 99 "
                   "out of range (file has 5 blobs)");

  b = good_;
  w = Meta(b)->contexts()->Get(0)->tensors()->Get(1);
  Put32(b, FieldAt(b, w, fb::Tensor::VT_BLOB), static_cast<uint32_t>(-5));
  Rehash(b);
  ExpectCorrupt(b, "blob id -5 out of range");

  b = good_;
  w = Meta(b)->contexts()->Get(0)->tensors()->Get(1);
  b[FieldAt(b, w, fb::Tensor::VT_STORAGE)] = 7;
  Rehash(b);
  ExpectCorrupt(b, "unknown storage kind 7");

  b = good_;
  const fb::Step* step = Meta(b)->contexts()->Get(0)->steps()->Get(1);
  size_t at = static_cast<size_t>(reinterpret_cast<const uint8_t*>(step->inputs()->data()) -
                                  b.data());
  Put32(b, at + 4, 1000);
  Rehash(b);
  ExpectCorrupt(b, "step 1 'Gemm' (node 'fc'): input 1 is tensor 1000, out of range");

  b = good_;
  const fb::Context* ctx = Meta(b)->contexts()->Get(0);
  at = static_cast<size_t>(reinterpret_cast<const uint8_t*>(ctx->outputs()->data()) - b.data());
  Put32(b, at, static_cast<uint32_t>(-1));  // -1 is only allowed for step inputs
  Rehash(b);
  ExpectCorrupt(b, "method output 0 is tensor -1");
}

// Metadata that the FlatBuffers verifier must refuse: a required field
// missing, a wrong file identifier. Assembled by hand around a valid header.
TEST_F(Corruption, MalformedFlatBufferIsRefused) {
  auto assemble = [&](const flatbuffers::FlatBufferBuilder& fbb) {
    std::vector<uint8_t> b(good_.begin(), good_.begin() + kHdrSize);
    b.resize(kHdrSize + fbb.GetSize());
    std::memcpy(b.data() + kHdrSize, fbb.GetBufferPointer(), fbb.GetSize());
    uint64_t pool = (b.size() + 4095) / 4096 * 4096;
    Put64(b, kMetaSizeAt, fbb.GetSize());
    Put64(b, kPoolOffAt, pool);
    Put64(b, kPoolSizeAt, 0);
    Put64(b, kFileSizeAt, pool);
    b.resize(pool, 0);
    Rehash(b);
    return b;
  };
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto producer = fbb.CreateString("fcb 0.1.0");
    auto start = fbb.StartTable();  // a File without its required contexts and blobs
    fbb.AddOffset(fb::File::VT_PRODUCER, producer);
    fbb.Finish(flatbuffers::Offset<fb::File>(fbb.EndTable(start)), fb::FileIdentifier());
    ExpectCorrupt(assemble(fbb), "FlatBuffers verification failed");
  }
  {
    flatbuffers::FlatBufferBuilder fbb;
    auto file = fb::CreateFile(fbb, fbb.CreateString("x"),
                               fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Context>>{}),
                               fbb.CreateVectorOfStructs(std::vector<fb::Blob>{}));
    fbb.Finish(file, "NOPE");
    ExpectCorrupt(assemble(fbb), "FlatBuffers verification failed");
  }
  {  // the same, correctly identified, is a valid (empty) file: the test's assembly is right
    flatbuffers::FlatBufferBuilder fbb;
    auto file = fb::CreateFile(fbb, fbb.CreateString("x"),
                               fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Context>>{}),
                               fbb.CreateVectorOfStructs(std::vector<fb::Blob>{}));
    fbb.Finish(file, fb::FileIdentifier());
    EXPECT_TRUE(Load(assemble(fbb)).ok());
  }
}

}  // namespace
}  // namespace fcb::format
