// A corrupted or truncated .fcb is refused by `fcb run` and `fcb inspect` with
// "error: ..." and exit status 1: never a crash (signal), never a wrong answer.
#include <gtest/gtest.h>

#include "fcb/fcb.h"
#include "format/fcb_file.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::CliPath;
using testing::RunCommand;
using testing::TempDir;

class CorruptFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    CompileSpec spec;
    spec.targets = {"generic", "x86-64-v3"};
    spec.input_shapes["input"] = {1, 3, 64, 64};
    auto r = Compile(FCB_SOURCE_DIR "/models/demo_cnn.onnx", spec, dir_->File("good.fcb"));
    ASSERT_TRUE(r.ok()) << r.status().message();
    good_ = testing::ReadBytes(dir_->File("good.fcb"));
    auto f = format::LoadFcbFile(dir_->File("good.fcb"));
    ASSERT_TRUE(f.ok());
    meta_end_ = 128 + f.value()->meta_bytes();
    pool_offset_ = f.value()->pool_offset();
  }
  static void TearDownTestSuite() { delete dir_; }

  // Both commands must fail cleanly on `bytes`.
  void ExpectRefused(const std::vector<uint8_t>& bytes, const std::string& what) {
    const std::string path = dir_->File("bad.fcb");
    testing::WriteBytes(path, bytes);
    for (const std::string cmd : {"inspect '" + path + "'", "run '" + path + "' --output-dir '" + dir_->File("o") + "'"}) {
      auto r = RunCommand(CliPath() + " " + cmd);
      EXPECT_EQ(r.exit_code, 1) << what << ": fcb " << cmd << "\nstderr: " << r.err;
      EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << ": " << r.err;
    }
  }

  static TempDir* dir_;
  static std::vector<uint8_t> good_;
  static uint64_t meta_end_, pool_offset_;
};

TempDir* CorruptFileTest::dir_ = nullptr;
std::vector<uint8_t> CorruptFileTest::good_;
uint64_t CorruptFileTest::meta_end_ = 0;
uint64_t CorruptFileTest::pool_offset_ = 0;

TEST_F(CorruptFileTest, GoodFileRuns) {
  auto r = RunCommand(CliPath() + " run '" + dir_->File("good.fcb") + "' --output-dir '" + dir_->File("o") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CorruptFileTest, FlippedBytesInEverySection) {
  std::vector<uint64_t> offsets;
  for (uint64_t o = 0; o < 128; o += 3) offsets.push_back(o);                       // header
  for (uint64_t o = 128; o < meta_end_; o += std::max<uint64_t>(1, (meta_end_ - 128) / 40)) offsets.push_back(o);  // metadata
  for (uint64_t o = pool_offset_; o < good_.size(); o += std::max<uint64_t>(1, (good_.size() - pool_offset_) / 40))
    offsets.push_back(o);                                                               // weights
  offsets.push_back(good_.size() - 1);
  for (uint64_t o : offsets) {
    auto bad = good_;
    bad[o] ^= 0x5a;
    ExpectRefused(bad, "byte " + std::to_string(o) + " flipped");
  }
}

TEST_F(CorruptFileTest, TruncatedAtManyOffsets) {
  std::vector<uint64_t> sizes = {0, 1, 7, 8, 64, 127, 128, 129, meta_end_ - 1, meta_end_, pool_offset_,
                                 pool_offset_ + 1, good_.size() - 1};
  for (uint64_t s = 0; s < good_.size(); s += good_.size() / 60 + 1) sizes.push_back(s);
  for (uint64_t s : sizes) {
    if (s >= good_.size()) continue;
    std::vector<uint8_t> bad(good_.begin(), good_.begin() + static_cast<long>(s));
    ExpectRefused(bad, "truncated to " + std::to_string(s) + " bytes");
  }
}

// The pool checksum runs in the background (runtime/pool_check.h): a flipped
// float weight lets Load return but fails every Run, and `fcb run` writes no
// output; a flipped small constant (read while kernels are prepared) fails
// Load itself, naming the blob and its tensor.
TEST(DeferredPoolCheck, FailsRunsNotJustLoad) {
  // resnet18: its weights are far over the 64 KiB of a small constant.
  TempDir dir;
  CompileSpec spec;
  spec.targets = {"x86-64-v3"};
  ASSERT_TRUE(Compile(FCB_TESTDATA_DIR "/resnet18.onnx", spec, dir.File("good.fcb")).ok());
  const std::vector<uint8_t> good = testing::ReadBytes(dir.File("good.fcb"));
  auto f = format::LoadFcbFile(dir.File("good.fcb"));
  ASSERT_TRUE(f.ok());
  const format::FileDesc& desc = f.value()->desc();
  int32_t large = -1, small = -1;
  for (const auto& c : desc.contexts) {
    if (c.target != "x86-64-v3") continue;
    for (const auto& t : c.tensors) {
      if (t.storage != format::Storage::kWeight || t.dtype != DType::kF32) continue;
      const uint64_t size = desc.blobs[t.blob].size;
      if (size > 65536 && (large < 0 || size > desc.blobs[large].size)) large = t.blob;
      if (size <= 1024 && small < 0) small = t.blob;
    }
  }
  ASSERT_GE(large, 0) << "no float weight over 64 KiB";
  ASSERT_GE(small, 0) << "no small float constant";
  const uint64_t pool_offset = f.value()->pool_offset();
  LoadOptions opts;
  opts.target = "x86-64-v3";

  auto flipped = [&](int32_t blob, const std::string& name) {
    auto bad = good;
    bad[pool_offset + desc.blobs[blob].offset + desc.blobs[blob].size / 2] ^= 0x40;
    const std::string path = dir.File(name);
    testing::WriteBytes(path, bad);
    return path;
  };

  const std::string weight = flipped(large, "weight.fcb");
  auto p = Program::Load(weight, opts);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto ex = Execution::Create(p.value(), "main", 1);
  ASSERT_TRUE(ex.ok());
  for (int i = 0; i < 2; ++i) {
    Status s = ex.value()->Run();
    EXPECT_EQ(s.code(), StatusCode::kCorruptFile) << s.message();
    EXPECT_NE(s.message().find("weight pool"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
  }
  LoadOptions unchecked = opts;
  unchecked.verify_checksums = false;
  auto q = Program::Load(weight, unchecked);
  ASSERT_TRUE(q.ok());
  auto ex2 = Execution::Create(q.value(), "main", 1);
  ASSERT_TRUE(ex2.ok());
  EXPECT_TRUE(ex2.value()->Run().ok());
  const std::string out = dir.File("deferred_out");
  auto r = RunCommand(CliPath() + " run '" + weight + "' --target x86-64-v3 --output-dir '" + out + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
  EXPECT_TRUE(testing::ReadBytes(out + "/output.npy").empty()) << "an output was written";

  const std::string constant = flipped(small, "constant.fcb");
  auto c = Program::Load(constant, opts);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kCorruptFile);
  EXPECT_NE(c.status().message().find("weight blob " + std::to_string(small)), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("tensor '"), std::string::npos) << c.status().message();
}

TEST_F(CorruptFileTest, ExtendedFileIsRefused) {
  auto bad = good_;
  bad.resize(bad.size() + 100, 0);
  ExpectRefused(bad, "100 bytes appended");
}

}  // namespace
}  // namespace fcb

namespace fcb {
namespace {

// A copy of a compiled file with its metadata edited by `edit`, rewritten
// with the same weight pool (blob ids kept).
std::string Rewritten(const std::string& good, const std::string& out,
                      void (*edit)(format::FileDesc*)) {
  auto f = format::LoadFcbFile(good);
  EXPECT_TRUE(f.ok());
  if (!f.ok()) return out;
  format::FileDesc desc = f.value()->desc();
  format::WeightPoolBuilder pool;
  for (size_t b = 0; b < desc.blobs.size(); ++b)
    EXPECT_EQ(pool.AddUnshared(f.value()->blob_data(static_cast<int32_t>(b)), desc.blobs[b].size),
              static_cast<int32_t>(b));
  edit(&desc);
  EXPECT_TRUE(format::WriteFcbFile(desc, pool, out).ok());
  return out;
}

class PlanVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CompileSpec spec;
    spec.targets = {"generic"};
    spec.input_shapes["input"] = {1, 3, 64, 64};
    auto r = Compile(FCB_SOURCE_DIR "/models/demo_cnn.onnx", spec, dir_.File("good.fcb"));
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_TRUE(Program::Load(dir_.File("good.fcb")).ok());  // the rewrite alone changes nothing
    ASSERT_TRUE(Program::Load(Rewritten(dir_.File("good.fcb"), dir_.File("same.fcb"), [](format::FileDesc*) {})).ok());
  }
  testing::TempDir dir_;
};

TEST_F(PlanVersionTest, NewerPlanIsRefusedNamingBothVersions) {
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("newer.fcb"),
                                     [](format::FileDesc* d) { d->plan_version += 1; });
  auto p = Program::Load(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(p.status().message().find("newer than this runtime's version"), std::string::npos) << p.status().message();
}

TEST_F(PlanVersionTest, UnversionedPlanIsRefused) {
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("old.fcb"),
                                     [](format::FileDesc* d) { d->plan_version = 0; });
  auto p = Program::Load(path);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("older than"), std::string::npos) << p.status().message();
}

TEST_F(PlanVersionTest, TooLittleScratchIsRefused) {
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("scratch.fcb"), [](format::FileDesc* d) {
    for (auto& c : d->contexts) c.scratch_bytes = 64;
  });
  auto p = Program::Load(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kCorruptFile);
  EXPECT_NE(p.status().message().find("scratch"), std::string::npos) << p.status().message();
}

// Resource limits: what a file asks for is checked before it is allocated.
// A file whose context declares a 1 TiB arena (a few bytes of metadata
// changed, checksums valid) is refused at load, naming the limit and the
// bytes asked for; LoadOptions::max_memory_bytes sets the limit, and an
// execution whose threads' scratch would pass it is refused too.
TEST_F(PlanVersionTest, HugeArenaIsRefusedAtLoadNamingTheLimit) {
  const uint64_t tib = uint64_t{1} << 40;
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("huge.fcb"), [](format::FileDesc* d) {
    for (auto& c : d->contexts) c.arena_bytes = uint64_t{1} << 40;
  });
  auto p = Program::Load(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find(std::to_string(tib) + "-byte arena"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("memory limit"), std::string::npos) << p.status().message();
  LoadOptions lo;
  lo.max_memory_bytes = UINT64_MAX;  // a limit that allows it: then it loads (nothing is allocated yet)
  EXPECT_TRUE(Program::Load(path, lo).ok());
  auto r = RunCommand(CliPath() + " run '" + path + "' --output-dir '" + dir_.File("o") + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("memory limit"), std::string::npos) << r.err;
}

TEST_F(PlanVersionTest, MaxMemoryBytesBoundsLoadAndExecution) {
  auto f = format::LoadFcbFile(dir_.File("good.fcb"));
  ASSERT_TRUE(f.ok());
  const auto& c = f.value()->desc().contexts.at(0);
  const uint64_t one = c.arena_bytes + c.scratch_bytes;
  LoadOptions lo;
  lo.max_memory_bytes = one - 1;
  auto refused = Program::Load(dir_.File("good.fcb"), lo);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("memory limit of " + std::to_string(one - 1) + " bytes"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("LoadOptions::max_memory_bytes"), std::string::npos);
  lo.max_memory_bytes = one;  // exactly enough for one thread
  auto p = Program::Load(dir_.File("good.fcb"), lo);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto ex = Execution::Create(p.value(), "main", 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  ASSERT_TRUE(ex.value()->Run().ok());
  if (c.scratch_bytes > 0) {
    auto two = Execution::Create(p.value(), "main", 2);
    ASSERT_FALSE(two.ok());
    EXPECT_EQ(two.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(two.status().message().find("(2 threads)"), std::string::npos) << two.status().message();
  }
}

}  // namespace
}  // namespace fcb
