// Round trip, weight dedup, determinism, atomic writes and fault injection for
// the .fcb writer and loader. Corruption tests: format_corruption_test.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "format/fast_hash.h"
#include "format/fcb_file.h"
#include "format/fcb_header.h"
#include "format/format_test_util.h"
#include "format/io_fault_testing.h"
#include "format/metadata.h"
#include "fcb/limits.h"
#include "test_util.h"

namespace fcb::format {
namespace {

using namespace ::fcb::format::test;  // and the file helpers of test_util.h

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(FcbFile, RoundTripKeepsDescAndBytes) {
  TempDir dir;
  WeightPoolBuilder pool;
  FileDesc desc = SampleDesc(pool);
  const std::string path = dir.File("model.fcb");
  ASSERT_TRUE(WriteFcbFile(desc, pool, path).ok());

  auto loaded = LoadFcbFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const LoadedFile& f = **loaded;
  ExpectDescEq(f.desc(), desc);
  EXPECT_EQ(f.format_version(), 2u);
  std::vector<uint8_t> file = ReadBytes(path);
  EXPECT_EQ(f.file_size(), file.size());

  std::vector<std::vector<uint8_t>> blobs = SampleBlobs();
  ASSERT_EQ(f.desc().blobs.size(), blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    SCOPED_TRACE("blob " + std::to_string(i));
    const BlobDesc& b = f.desc().blobs[i];
    XXH128_hash_t h = XXH3_128bits(blobs[i].data(), blobs[i].size());
    EXPECT_EQ(b.size, blobs[i].size());
    EXPECT_EQ(b.hash_lo, h.low64);
    EXPECT_EQ(b.hash_hi, h.high64);
    const uint8_t* p = f.blob_data(static_cast<int32_t>(i));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(std::memcmp(p, blobs[i].data(), blobs[i].size()), 0);
    uintptr_t align = blobs[i].size() >= 65536 ? 4096 : 64;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
  }
  EXPECT_EQ(f.blob_data(-1), nullptr);
  EXPECT_EQ(f.blob_data(static_cast<int32_t>(blobs.size())), nullptr);

  // The header as documented in fcb_file.h.
  const uint8_t magic[8] = {0x89, 'F', 'C', 'B', '\r', '\n', 0x1a, '\n'};
  EXPECT_EQ(std::memcmp(file.data(), magic, 8), 0);
  EXPECT_EQ(Get32(file, kVersionAt), 2u);
  EXPECT_EQ(Get32(file, kHdrSizeAt), 128u);
  EXPECT_EQ(file[kEndianAt], 0x04);
  EXPECT_EQ(file[kEndianAt + 3], 0x01);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&file[kProducerAt])), "fcb 0.1.0");
  EXPECT_EQ(Get64(file, kFileSizeAt), file.size());
  uint64_t mo = Get64(file, kMetaOffAt), ms = Get64(file, kMetaSizeAt);
  uint64_t po = Get64(file, kPoolOffAt), ps = Get64(file, kPoolSizeAt);
  EXPECT_EQ(mo, 128u);
  EXPECT_EQ(f.meta_bytes(), ms);
  EXPECT_EQ(f.pool_offset(), po);
  EXPECT_EQ(po % 4096, 0u);
  EXPECT_GE(po, mo + ms);
  EXPECT_EQ(po + ps, file.size());
  EXPECT_EQ(Get64(file, kMetaHashAt), XXH3_64bits(&file[mo], ms));
  EXPECT_EQ(Get64(file, kPoolHashAt), RefPoolHash(&file[po], ps));
  EXPECT_EQ(Get64(file, kHdrHashAt), XXH3_64bits(file.data(), 120));
  for (size_t i = 112; i < 120; ++i) EXPECT_EQ(file[i], 0) << "reserved byte " << i;
  // Every byte that is not metadata or a blob is zero padding.
  std::vector<bool> used(file.size(), false);
  for (size_t i = 0; i < mo + ms; ++i) used[i] = true;
  for (const BlobDesc& b : f.desc().blobs)
    for (uint64_t i = 0; i < b.size; ++i) used[po + b.offset + i] = true;
  for (size_t i = 0; i < file.size(); ++i)
    if (!used[i]) ASSERT_EQ(file[i], 0) << "padding byte at offset " << i;
}

TEST(FcbFile, EmptyPoolAndNoContexts) {
  TempDir dir;
  WeightPoolBuilder pool;
  FileDesc desc;
  desc.producer = "a producer string longer than the 32 header bytes";
  ASSERT_TRUE(WriteFcbFile(desc, pool, dir.File("e.fcb")).ok());
  auto loaded = LoadFcbFile(dir.File("e.fcb"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->desc().producer, desc.producer);  // the metadata keeps it whole
  EXPECT_TRUE((*loaded)->desc().contexts.empty());
  EXPECT_TRUE((*loaded)->desc().blobs.empty());
  std::vector<uint8_t> file = ReadBytes(dir.File("e.fcb"));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&file[kProducerAt]), 32),
            desc.producer.substr(0, 32));
}

TEST(WeightPoolBuilder, DedupsIdenticalBytesOnly) {
  WeightPoolBuilder pool;
  std::vector<uint8_t> a = Bytes(5000, 7), b = Bytes(5000, 8), a2 = a;
  int32_t ia = pool.Add(a.data(), a.size());
  EXPECT_EQ(pool.Add(a2.data(), a2.size()), ia);  // a different buffer, same bytes
  int32_t ib = pool.Add(b.data(), b.size());      // same length, different bytes
  EXPECT_NE(ib, ia);
  EXPECT_EQ(pool.Add(a.data(), 4999), 2);          // a prefix is a different blob
  int32_t iu = pool.AddUnshared(a.data(), a.size());
  EXPECT_EQ(iu, 3);
  EXPECT_EQ(pool.Add(a.data(), a.size()), ia);    // never merged into the unshared one
  int32_t e1 = pool.Add(nullptr, 0);
  EXPECT_EQ(pool.Add(nullptr, 0), e1);
  EXPECT_EQ(pool.size(), 5u);
  EXPECT_EQ(pool.bytes(ia), a);
  EXPECT_EQ(pool.bytes(iu), a);
  XXH128_hash_t h = XXH3_128bits(a.data(), a.size());
  EXPECT_EQ(pool.hash_lo(ia), h.low64);
  EXPECT_EQ(pool.hash_hi(ia), h.high64);
}

TEST(FcbFile, SharedWeightsAreStoredOnce) {
  TempDir dir;
  std::vector<uint8_t> w = Bytes(100000, 9);
  FileDesc desc;
  desc.producer = "fcb 0.1.0";
  desc.contexts.resize(2);
  auto write = [&](bool share, const std::string& path) {
    WeightPoolBuilder pool;
    for (ContextDesc& c : desc.contexts) {
      int32_t id = share ? pool.Add(w.data(), w.size()) : pool.AddUnshared(w.data(), w.size());
      c.tensors = {Tensor("w", {25000}, Storage::kWeight, 0, id)};
    }
    EXPECT_EQ(pool.size(), share ? 1u : 2u);
    EXPECT_TRUE(WriteFcbFile(desc, pool, path).ok());
  };
  write(true, dir.File("shared.fcb"));
  write(false, dir.File("unshared.fcb"));
  auto shared = LoadFcbFile(dir.File("shared.fcb"));
  auto unshared = LoadFcbFile(dir.File("unshared.fcb"));
  ASSERT_TRUE(shared.ok() && unshared.ok());
  EXPECT_EQ((*shared)->desc().blobs.size(), 1u);
  EXPECT_EQ((*unshared)->desc().blobs.size(), 2u);
  EXPECT_GE((*unshared)->file_size(), (*shared)->file_size() + w.size());
  const auto& c = (*shared)->desc().contexts;
  EXPECT_EQ(c[0].tensors[0].blob, c[1].tensors[0].blob);
}

TEST(FcbFile, WritingIsDeterministic) {
  TempDir dir;
  WeightPoolBuilder pool1, pool2;
  FileDesc d1 = SampleDesc(pool1), d2 = SampleDesc(pool2);  // built twice, independently
  ASSERT_TRUE(WriteFcbFile(d1, pool1, dir.File("a.fcb")).ok());
  ASSERT_TRUE(WriteFcbFile(d2, pool2, dir.File("b.fcb")).ok());
  ASSERT_TRUE(WriteFcbFile(d1, pool1, dir.File("a.fcb")).ok());  // over an existing file
  std::vector<uint8_t> a = ReadBytes(dir.File("a.fcb")), b = ReadBytes(dir.File("b.fcb"));
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b);
  EXPECT_EQ(ListDir(dir.path()), (std::set<std::string>{"a.fcb", "b.fcb"}));
  struct stat st;
  ASSERT_EQ(stat(dir.File("a.fcb").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(FcbFile, WriteIntoMissingFolderFails) {
  TempDir dir;
  WeightPoolBuilder pool;
  FileDesc desc = SampleDesc(pool);
  const std::string path = dir.File("no/such/folder/model.fcb");
  Status s = WriteFcbFile(desc, pool, path);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_TRUE(Contains(s.message(), path)) << s.message();
  EXPECT_TRUE(Contains(s.message(), "No such file or directory")) << s.message();
  EXPECT_TRUE(ListDir(dir.path()).empty());
}

TEST(FcbFile, InvalidDescIsRefusedAndLeavesDestinationAlone) {
  TempDir dir;
  const std::string path = dir.File("model.fcb");
  WriteBytes(path, {'o', 'l', 'd'});
  {
    WeightPoolBuilder pool;
    FileDesc desc = SampleDesc(pool);
    desc.contexts[1].tensors[3].blob = 42;
    Status s = WriteFcbFile(desc, pool, path);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s.message(), "blob id 42 out of range")) << s.message();
    EXPECT_TRUE(Contains(s.message(), "context 1")) << s.message();
    EXPECT_TRUE(Contains(s.message(), "'fc.w'")) << s.message();
  }
  {
    WeightPoolBuilder pool;
    FileDesc desc = SampleDesc(pool);
    desc.contexts[0].steps[1].inputs[1] = 7;
    Status s = WriteFcbFile(desc, pool, path);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s.message(), "node 'fc'")) << s.message();
  }
  EXPECT_EQ(ReadBytes(path), (std::vector<uint8_t>{'o', 'l', 'd'}));
  EXPECT_EQ(ListDir(dir.path()), (std::set<std::string>{"model.fcb"}));
}

// Fails each I/O step of the writer in turn: every failure is an IoError
// naming the path, leaves the old destination byte for byte, leaves no
// temporary file and leaks no descriptor.
TEST(FcbFile, FailureAtEveryWriteStepLeavesNothingBehind) {
  TempDir dir;
  const std::string path = dir.File("model.fcb");
  const std::vector<uint8_t> old = Bytes(777, 11);
  WriteBytes(path, old);
  WeightPoolBuilder pool;
  FileDesc desc = SampleDesc(pool);
  int failures = 0;
  for (int n = 1; n < 1000; ++n) {
    SCOPED_TRACE("failing I/O step " + std::to_string(n));
    size_t fds = OpenFdCount();
    Status s;
    bool fired;
    {
      testing::FailAt fault(n);
      s = WriteFcbFile(desc, pool, path);
      fired = fault.fired();
    }
    EXPECT_EQ(OpenFdCount(), fds);
    if (!fired) {
      ASSERT_TRUE(s.ok()) << s.ToString();
      break;
    }
    ++failures;
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_TRUE(Contains(s.message(), path)) << s.message();
    EXPECT_TRUE(Contains(s.message(), "Input/output error")) << s.message();
    EXPECT_EQ(ReadBytes(path), old);
    EXPECT_EQ(ListDir(dir.path()), (std::set<std::string>{"model.fcb"}));
  }
  // mkstemp, fchmod, header, metadata, padding, blobs..., fsync, close, rename.
  EXPECT_GE(failures, 10);
  auto loaded = LoadFcbFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectDescEq((*loaded)->desc(), desc);
}

TEST(FcbFile, FailureWithoutDestinationLeavesNoFile) {
  TempDir dir;
  WeightPoolBuilder pool;
  FileDesc desc = SampleDesc(pool);
  for (int n : {1, 3, 5}) {
    testing::FailAt fault(n);
    EXPECT_EQ(WriteFcbFile(desc, pool, dir.File("m.fcb")).code(), StatusCode::kIoError);
    EXPECT_TRUE(ListDir(dir.path()).empty());
  }
}

TEST(FcbFile, FailureAtEveryLoadStepIsAnIoErrorWithoutLeaks) {
  TempDir dir;
  WeightPoolBuilder pool;
  FileDesc desc = SampleDesc(pool);
  const std::string path = dir.File("model.fcb");
  ASSERT_TRUE(WriteFcbFile(desc, pool, path).ok());
  int failures = 0;
  for (int n = 1; n < 100; ++n) {
    size_t fds = OpenFdCount();
    testing::FailAt fault(n);
    auto loaded = LoadFcbFile(path);
    if (!fault.fired()) {
      EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
      break;
    }
    ++failures;
    EXPECT_EQ(loaded.status().code(), StatusCode::kIoError) << loaded.status().ToString();
    EXPECT_TRUE(Contains(loaded.status().message(), path));
    EXPECT_EQ(OpenFdCount(), fds);
  }
  EXPECT_EQ(failures, 3);  // open, fstat, mmap
}

TEST(FcbFile, MissingFileAndFolderAreReportedWithThePath) {
  TempDir dir;
  auto missing = LoadFcbFile(dir.File("nope.fcb"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), dir.File("nope.fcb")));
  auto folder = LoadFcbFile(dir.path());
  EXPECT_EQ(folder.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(Contains(folder.status().message(), dir.path()));
  EXPECT_TRUE(Contains(folder.status().message(), "directory")) << folder.status().message();
  WriteBytes(dir.File("empty.fcb"), {});
  auto empty = LoadFcbFile(dir.File("empty.fcb"));
  EXPECT_EQ(empty.status().code(), StatusCode::kCorruptFile);
  EXPECT_TRUE(Contains(empty.status().message(), "shorter than the 128-byte header"));
}

// The chunked pool checksum: parallel verification and the writer's streaming
// hasher agree with the documented definition, whatever the thread count and
// however the bytes are fed, and a flip in any chunk changes it.
TEST(PoolChecksum, ChunkedHashMatchesTheDefinition) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, (size_t{1} << 20), (size_t{11} << 19) + 77}) {
    const std::vector<uint8_t> data = Bytes(n, static_cast<uint32_t>(n + 1));
    const uint64_t want = RefPoolHash(data.data(), n);
    for (unsigned threads : {1u, 2u, 3u, 8u})
      EXPECT_EQ(PoolHash(data.data(), n, threads), want) << n << " bytes, " << threads << " threads";
    PoolHasher streamed;
    for (size_t off = 0, piece = 1; off < n; off += piece, piece = piece * 3 + 1)
      streamed.Update(data.data() + off, std::min(piece, n - off));
    EXPECT_EQ(streamed.Digest(), want) << n << " bytes streamed";
  }
  std::vector<uint8_t> data = Bytes((size_t{11} << 19) + 77, 5);
  const uint64_t good = PoolHash(data.data(), data.size(), 2);
  for (size_t off : {size_t{0}, (size_t{1} << 20) - 1, size_t{3} << 20, data.size() - 1}) {
    data[off] ^= 0x10;
    EXPECT_NE(PoolHash(data.data(), data.size(), 2), good) << "flip at " << off;
    data[off] ^= 0x10;
  }
}

// A big-endian host is refused before anything in the file is read (this
// host is little-endian, so the refusal is exercised by asking directly).
TEST(FcbHeader, BigEndianHostIsRefusedClearly) {
  EXPECT_TRUE(CheckHostByteOrder(true).ok());
  const Status s = CheckHostByteOrder(false);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("big-endian"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckHostByteOrder().ok()) << "the test hosts (x86-64, AArch64) are little-endian";
}

}  // namespace
}  // namespace fcb::format

namespace fcb::format {
namespace {

using namespace ::fcb::format::test;

// Attachments: unshared blobs named by the File's attachment table.
FileDesc DescWithAttachments(WeightPoolBuilder& pool, const std::vector<std::pair<std::string, std::string>>& named) {
  FileDesc desc = SampleDesc(pool);
  for (const auto& [name, bytes] : named) desc.attachments.push_back({name, pool.AddUnshared(bytes.data(), bytes.size())});
  return desc;
}

// Decodes `desc` with its blob table filled from `pool` (each blob 4096-aligned,
// which satisfies every alignment rule), as the loader would see it.
Result<FileDesc> Decode(FileDesc desc, const WeightPoolBuilder& pool) {
  desc.blobs.clear();
  uint64_t pool_size = 0;
  for (size_t id = 0; id < pool.size(); ++id) {
    const uint64_t size = pool.bytes(static_cast<int32_t>(id)).size();
    desc.blobs.push_back(BlobDesc{pool_size, size, 0, 0});
    pool_size += (size + 4095) / 4096 * 4096;
  }
  const std::vector<uint8_t> meta = EncodeMetadata(desc);
  return DecodeMetadata(meta.data(), meta.size(), 128, 4096, pool_size);
}
Status DecodeStatus(const FileDesc& desc, const WeightPoolBuilder& pool) { return Decode(desc, pool).status(); }

TEST(Attachments, RoundTripThroughTheFile) {
  TempDir dir;
  WeightPoolBuilder pool;
  // The same bytes as a weight blob (SampleBlobs()[4]) and as each other: still separate blobs.
  const std::vector<uint8_t> b4 = SampleBlobs()[4];
  const std::string same(b4.begin(), b4.end());
  FileDesc desc = DescWithAttachments(pool, {{"a.txt", same}, {"b", same}, {"empty", ""}});
  const std::string path = dir.File("a.fcb");
  ASSERT_TRUE(WriteFcbFile(desc, pool, path).ok());
  auto loaded = LoadFcbFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const LoadedFile& f = **loaded;
  ASSERT_EQ(f.desc().attachments, desc.attachments);
  EXPECT_EQ(f.desc().blobs.size(), SampleBlobs().size() + 3);
  std::set<int32_t> ids;
  for (const AttachmentDesc& a : f.desc().attachments) {
    ids.insert(a.blob);
    EXPECT_TRUE(f.VerifyBlob(a.blob, a.name).ok());
  }
  EXPECT_EQ(ids.size(), 3u);
  const AttachmentDesc& a = f.desc().attachments[0];
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.blob_data(a.blob)), f.desc().blobs[a.blob].size), same);
  EXPECT_EQ(f.desc().blobs[f.desc().attachments[2].blob].size, 0u);
}

TEST(Attachments, FileWithoutThemEncodesWithoutTheTable) {
  WeightPoolBuilder pool;
  FileDesc desc = SampleDesc(pool);
  auto decoded = Decode(desc, pool);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(decoded->attachments.empty());
}

TEST(Attachments, HostileTablesAreRefusedAtLoad) {
  struct Case {
    std::function<void(FileDesc&)> edit;
    std::string phrase;
  };
  const std::vector<Case> cases = {
      {[](FileDesc& d) { d.attachments[0].blob = 99; }, "refers to blob 99, out of range"},
      {[](FileDesc& d) { d.attachments[0].blob = -1; }, "refers to blob -1, out of range"},
      {[](FileDesc& d) { d.attachments[1].name = d.attachments[0].name; }, "must be unique and sorted"},
      {[](FileDesc& d) { std::swap(d.attachments[0], d.attachments[1]); }, "must be unique and sorted"},
      {[](FileDesc& d) { d.attachments[0].name = ""; }, "the attachment name is empty"},
      {[](FileDesc& d) { d.attachments[0].name = "a b"; }, "byte \\x20 at position 1"},
      {[](FileDesc& d) { d.attachments[0].name = "a=b"; }, "byte \\x3d at position 1"},
      {[](FileDesc& d) { d.attachments[0].name = std::string("a\n", 2); }, "byte \\x0a at position 1"},
      {[](FileDesc& d) { d.attachments[0].name = std::string(256, 'x'); }, "256 bytes long, more than the limit of 255"},
      {[](FileDesc& d) {
         d.attachments.clear();
         for (uint64_t i = 0; i <= limits::kMaxAttachments; ++i) d.attachments.push_back({"n" + std::to_string(100000 + i), 0});
       },
       "4097 attachments, more than the limit of 4096"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.phrase);
    WeightPoolBuilder pool;
    FileDesc desc = DescWithAttachments(pool, {{"a", "x"}, {"b", "y"}});
    ASSERT_TRUE(DecodeStatus(desc, pool).ok()) << DecodeStatus(desc, pool).ToString();
    c.edit(desc);
    const Status s = DecodeStatus(desc, pool);
    EXPECT_EQ(s.code(), StatusCode::kCorruptFile);
    EXPECT_TRUE(Contains(s.message(), c.phrase)) << s.message();
    // The writer refuses the same desc, leaving nothing behind.
    TempDir dir;
    const Status w = WriteFcbFile(desc, pool, dir.File("w.fcb"));
    EXPECT_EQ(w.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(w.message(), c.phrase)) << w.message();
    EXPECT_TRUE(ListDir(dir.path()).empty());
  }
}

TEST(Attachments, ExactlyTheLimitIsAccepted) {
  WeightPoolBuilder pool;
  FileDesc desc = DescWithAttachments(pool, {{"a", "x"}});
  desc.attachments.clear();
  for (uint64_t i = 0; i < limits::kMaxAttachments; ++i) desc.attachments.push_back({"n" + std::to_string(100000 + i), 0});
  desc.attachments[0].name = std::string(limits::kMaxAttachmentNameBytes, '~');
  std::sort(desc.attachments.begin(), desc.attachments.end(),
            [](const AttachmentDesc& x, const AttachmentDesc& y) { return x.name < y.name; });
  EXPECT_TRUE(DecodeStatus(desc, pool).ok()) << DecodeStatus(desc, pool).ToString();
}

TEST(Attachments, CorruptedBytesFailTheirBlobCheck) {
  TempDir dir;
  WeightPoolBuilder pool;
  FileDesc desc = DescWithAttachments(pool, {{"vocab", "hello attachment"}});
  const std::string path = dir.File("a.fcb");
  ASSERT_TRUE(WriteFcbFile(desc, pool, path).ok());
  const uint64_t at = [&] {
    auto f = LoadFcbFile(path);
    return (*f)->pool_offset() + (*f)->desc().blobs[(*f)->desc().attachments[0].blob].offset;
  }();
  std::vector<uint8_t> file = ReadBytes(path);
  file[at + 3] ^= 0x20;
  Rehash(file);  // only the blob's own checksum can tell
  WriteBytes(path, file);
  auto f = LoadFcbFile(path, /*verify_checksums=*/false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Status s = (*f)->VerifyBlob((*f)->desc().attachments[0].blob, "attachment 'vocab'");
  EXPECT_EQ(s.code(), StatusCode::kCorruptFile);
  EXPECT_TRUE(Contains(s.message(), "attachment 'vocab'")) << s.message();
}

}  // namespace
}  // namespace fcb::format
