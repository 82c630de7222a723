// A corrupted or truncated .fcb is refused by `fcb run` and `fcb inspect` with
// "error: ..." and exit status 1: never a crash (signal), never a wrong answer.
#include <gtest/gtest.h>

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "fcb/fcb.h"
#include "fcb/limits.h"
#include "fcb_generated.h"
#include "format/fcb_file.h"
#include "format/format_test_util.h"
#include "format/metadata.h"
#include "ops/names.h"
#include "ops/plan_check.h"
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
  ASSERT_REFUSED(c, StatusCode::kCorruptFile, "(tensor '/conv1/Conv.b') checksum mismatch");
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
                                     [](format::FileDesc* d) { d->plan_version = ops::kPlanVersion + 1; });
  auto p = Program::Load(path);
  ASSERT_REFUSED(p, StatusCode::kUnsupported,
                 "holds plans of encoding version " + std::to_string(ops::kPlanVersion + 1) + ", newer than this runtime's");
  EXPECT_NE(p.status().message().find("newer than this runtime's version"), std::string::npos) << p.status().message();
}

TEST_F(PlanVersionTest, UnversionedPlanIsRefused) {
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("old.fcb"),
                                     [](format::FileDesc* d) { d->plan_version = 0; });
  auto p = Program::Load(path);
  ASSERT_REFUSED(p, StatusCode::kUnsupported, "holds plans of encoding version 0, older than this runtime's");
  EXPECT_NE(p.status().message().find("older than"), std::string::npos) << p.status().message();
}

TEST_F(PlanVersionTest, TooLittleScratchIsRefused) {
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("scratch.fcb"), [](format::FileDesc* d) {
    for (auto& c : d->contexts) c.scratch_bytes = 64;
  });
  auto p = Program::Load(path);
  ASSERT_REFUSED(p, StatusCode::kCorruptFile, "method 'main' declares 64 bytes of scratch per thread; its steps need");
  EXPECT_NE(p.status().message().find("scratch"), std::string::npos) << p.status().message();
}

// The state bindings of a plan (Context.state, plan version 9): the test
// decoder with a static KV buffer (scripts/export_state_models.py), compiled
// with its past_*/present_* pairs as state, loads and runs; each hostile
// edit of the bindings is refused at load naming what is wrong.
class StateFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = testing::TestDataDir() + "/gqa_decoder_static.onnx";
    ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
    CompileSpec spec;
    spec.targets = {"generic"};
    spec.input_shapes["input_ids"] = {1, 1};
    spec.state_auto = true;
    auto r = Compile(model, spec, dir_.File("good.fcb"));
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto f = format::LoadFcbFile(dir_.File("good.fcb"));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f.value()->desc().plan_version, ops::kPlanVersion);
    ASSERT_EQ(f.value()->desc().contexts.at(0).state.size(), 4u);
    ASSERT_TRUE(Program::Load(Rewritten(dir_.File("good.fcb"), dir_.File("same.fcb"), [](format::FileDesc*) {})).ok());
  }
  // The edited file, loaded. An edit that breaks the file's structure
  // (format's CheckDescStructure, which the loader runs) cannot be written:
  // the writer refuses to write what the loader would refuse. For those the
  // writer's refusal is checked to name the same problem, and the loader's
  // metadata decoder is run on the encoded edit.
  Result<std::shared_ptr<const Program>> Edited(void (*edit)(format::FileDesc*)) {
    auto f = format::LoadFcbFile(dir_.File("good.fcb"));
    if (!f.ok()) return f.status();
    format::FileDesc desc = f.value()->desc();
    format::WeightPoolBuilder pool;
    for (size_t b = 0; b < desc.blobs.size(); ++b)
      pool.AddUnshared(f.value()->blob_data(static_cast<int32_t>(b)), desc.blobs[b].size);
    const uint64_t pool_offset = desc.blobs.empty() ? 0 : 4096;
    uint64_t pool_size = 0;
    for (const auto& b : desc.blobs) pool_size = std::max(pool_size, b.offset + b.size);
    edit(&desc);
    const std::string path = dir_.File("edited" + std::to_string(++edits_) + ".fcb");
    Status written = format::WriteFcbFile(desc, pool, path);
    if (written.ok()) return Program::Load(path);
    const std::vector<uint8_t> meta = format::EncodeMetadata(desc);
    auto decoded = format::DecodeMetadata(meta.data(), meta.size(), 128, pool_offset, pool_size);
    EXPECT_FALSE(decoded.ok()) << "the writer refused an edit that the loader accepts: " << written.message();
    if (decoded.ok()) return written;
    // The loader's message starts with where the metadata lies ("metadata [offset ..]: ").
    const std::string& loader = decoded.status().message();
    const size_t at = loader.find("]: ");
    EXPECT_NE(written.message().find(at == std::string::npos ? loader : loader.substr(at + 3)), std::string::npos)
        << "writer: " << written.message() << "\nloader: " << decoded.status().message();
    return decoded.status();
  }
  testing::TempDir dir_;
  int edits_ = 0;
};

TEST_F(StateFieldsTest, HostileBindingsAreRefusedNamingThem) {
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->plan_version = ops::kPlanVersionSymbols; }),
                 StatusCode::kCorruptFile, "has state bindings, which plans of encoding version 8 cannot hold");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state[0].input = 99; }), StatusCode::kCorruptFile,
                 "state binding 0 names method input 99, out of range");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state[1].output = -1; }), StatusCode::kCorruptFile,
                 "state binding 1 names method output -1, out of range");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state[1] = d->contexts[0].state[0]; }),
                 StatusCode::kCorruptFile, "a second time (binding 0)");
  // seqlens_k (input 1) against a cache-shaped output.
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state[0].input = 1; }), StatusCode::kCorruptFile,
                 "of different dtypes or shapes");
  // past_key_0 against present_value_0: one shape, but not written in place from it.
  ASSERT_REFUSED(Edited([](format::FileDesc* d) {
                   auto& st = d->contexts[0].state;
                   std::swap(st[0].output, st[1].output);
                 }),
                 StatusCode::kCorruptFile, "which does not update 'past_key_0' in place");
  // A binding to the logits (an output that is no cache).
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state[0].output = 0; }), StatusCode::kCorruptFile,
                 "of different dtypes or shapes");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) {
                   auto& c = d->contexts[0];
                   c.state.resize(c.inputs.size() + 1);
                 }),
                 StatusCode::kCorruptFile, "state bindings, more than its");
  // A state's tensors have no arena bytes (kState): each must be named by a
  // binding, have no offset, and pair with a tensor of the same storage.
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state.pop_back(); }), StatusCode::kCorruptFile,
                 "is stored in a state, but no state binding names it");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) {
                   auto& c = d->contexts[0];
                   c.tensors[c.inputs[c.state[0].input]].offset = 64;
                 }),
                 StatusCode::kCorruptFile, "a state tensor with an arena offset or a blob");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) {
                   auto& c = d->contexts[0];
                   c.tensors[c.outputs[c.state[0].output]].storage = format::Storage::kArena;
                 }),
                 StatusCode::kCorruptFile, "of two storages");
}

// The compiler keeps a state's input and output out of the arena
// (Storage::kState); a file whose state tensors have arena slots (as files
// written before kState did) still loads and runs the same.
TEST_F(StateFieldsTest, StateTensorsTakeNoArenaBytesAndArenaSlotsStillLoad) {
  auto f = format::LoadFcbFile(dir_.File("good.fcb"));
  ASSERT_TRUE(f.ok());
  const format::ContextDesc& c = f.value()->desc().contexts.at(0);
  uint64_t state_bytes = 0;
  for (const auto& b : c.state)
    for (int32_t t : {c.inputs[b.input], c.outputs[b.output]}) {
      EXPECT_EQ(c.tensors[t].storage, format::Storage::kState) << c.tensors[t].name;
      state_bytes += static_cast<uint64_t>(ir::NumElements(c.tensors[t].shape)) * ir::DTypeSize(c.tensors[t].dtype);
    }
  EXPECT_LT(c.arena_bytes, state_bytes) << "the arena holds no cache";
  auto run = [](const std::shared_ptr<const Program>& p) {
    auto e = Execution::Create(p, "main", 1);
    EXPECT_TRUE(e.ok()) << e.status().message();
    if (!e.ok()) return std::vector<float>{};
    // Three tokens, each step reading the cache the ones before wrote.
    for (int32_t step = 0; step < 3; ++step) {
      const int64_t token = 3 + 5 * step;
      EXPECT_TRUE(e.value()->SetInput("input_ids", &token, sizeof(token)).ok());
      EXPECT_TRUE(e.value()->SetInput("seqlens_k", &step, sizeof(step)).ok());
      EXPECT_TRUE(e.value()->Run().ok());
    }
    const auto* y = static_cast<const float*>(e.value()->output_data(0));
    return std::vector<float>(y, y + e.value()->info().outputs[0].bytes() / sizeof(float));
  };
  auto good = Program::Load(dir_.File("good.fcb"));
  ASSERT_TRUE(good.ok());
  auto arena = Edited([](format::FileDesc* d) {
    auto& c = d->contexts[0];
    for (const auto& b : c.state)
      for (int32_t t : {c.inputs[b.input], c.outputs[b.output]}) {
        c.tensors[t].storage = format::Storage::kArena;
        c.tensors[t].offset = (c.arena_bytes + 63) / 64 * 64;
        c.arena_bytes = c.tensors[t].offset +
                        static_cast<uint64_t>(ir::NumElements(c.tensors[t].shape)) * ir::DTypeSize(c.tensors[t].dtype);
      }
  });
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  const std::vector<float> want = run(good.value()), got = run(arena.value());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(want, got);
}

// A growing cache (form b with kv_capacity: KvAppend writing the present over
// the past, AttentionFused reading it at the buffer's stride): a KvAppend no
// state binding holds, an attention whose row capacity no KvAppend writes,
// and a KvAppend of another capacity than its readers are refused as
// CorruptFile, naming the step (they would write or read a tensor at the
// buffer's stride that is not the buffer, or at another stride).
class GrowingStateFieldsTest : public StateFieldsTest {
 protected:
  void SetUp() override {
    const std::string model = testing::TestDataDir() + "/llm_tiny_b.onnx";
    ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
    CompileSpec spec;
    spec.targets = {"generic"};
    spec.input_shapes["input_ids"] = {1, 1};
    spec.input_shapes["attention_mask"] = {1, {1, 128}};
    spec.state_auto = true;
    spec.kv_capacity = 128;
    auto r = Compile(model, spec, dir_.File("good.fcb"));
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto f = format::LoadFcbFile(dir_.File("good.fcb"));
    ASSERT_TRUE(f.ok());
    ASSERT_EQ(f.value()->desc().contexts.at(0).state.size(), 4u);
    ASSERT_TRUE(Program::Load(Rewritten(dir_.File("good.fcb"), dir_.File("same.fcb"), [](format::FileDesc*) {})).ok());
  }
};

void SetRowCapacity(format::FileDesc* d, std::string_view op, int64_t rows) {
  for (auto& s : d->contexts[0].steps)
    if (s.op == op)
      for (auto& a : s.attrs)
        if (a.name == ops::attr::kRowCapacity) a.ints = {rows};
}

TEST_F(GrowingStateFieldsTest, HostileGrowingCachesAreRefusedNamingThem) {
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { d->contexts[0].state.erase(d->contexts[0].state.begin()); }),
                 StatusCode::kCorruptFile, "is stored in a state, but no state binding names it");
  // The same with the unbound pair given arena slots (as files before kState).
  ASSERT_REFUSED(Edited([](format::FileDesc* d) {
                   auto& c = d->contexts[0];
                   for (int32_t t : {c.inputs[c.state[0].input], c.outputs[c.state[0].output]}) {
                     c.tensors[t].storage = format::Storage::kArena;
                     c.tensors[t].offset = (c.arena_bytes + 63) / 64 * 64;
                     c.arena_bytes = c.tensors[t].offset + static_cast<uint64_t>(ir::NumElements(c.tensors[t].shape)) *
                                                               ir::DTypeSize(c.tensors[t].dtype);
                   }
                   c.state.erase(c.state.begin());
                 }),
                 StatusCode::kCorruptFile, "writes a cache that no state binding holds");
  // An attention reading the buffer at another stride than it was written.
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { SetRowCapacity(d, ops::opname::AttentionFused, 64); }),
                 StatusCode::kCorruptFile, "(AttentionFused, node 'MatMul_node_224/attention_fused') reads "
                                           "'present.0.key', a cache kept in place with 128 rows per head");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) { SetRowCapacity(d, ops::opname::KvAppend, 256); }),
                 StatusCode::kCorruptFile, "which only a fused attention reads");
  ASSERT_REFUSED(Edited([](format::FileDesc* d) {
                   auto& st = d->contexts[0].state;
                   std::swap(st[0].output, st[1].output);
                 }),
                 StatusCode::kCorruptFile, "in place");
}

// A step whose output shares arena bytes with one of its inputs: every
// kernel assumes they are apart (a memcpy between them is undefined, and the
// fuzzer found one). The planner never writes it; a hostile file is refused
// at load, naming the step and both byte ranges. `shift` places the output
// that many bytes after the input's start (0: exactly on it).
void OverlapFirstStep(format::FileDesc* d, uint64_t shift) {
  for (auto& c : d->contexts) {
    for (const auto& s : c.steps) {
      if (s.outputs.empty() || s.inputs.empty() || s.inputs[0] < 0) continue;
      const auto& x = c.tensors[s.inputs[0]];
      auto& y = c.tensors[s.outputs[0]];
      if (x.storage != format::Storage::kArena) continue;
      y.offset = x.offset + shift;
      uint64_t bytes = 4;  // float tensors
      for (int64_t e : y.shape) bytes *= static_cast<uint64_t>(e);
      c.arena_bytes = std::max(c.arena_bytes, (y.offset + bytes + 63) / 64 * 64);
      break;
    }
  }
}

TEST_F(PlanVersionTest, StepWhoseOutputOverlapsItsInputIsRefused) {
  const std::string shifted = Rewritten(dir_.File("good.fcb"), dir_.File("shifted.fcb"),
                                        [](format::FileDesc* d) { OverlapFirstStep(d, 64); });
  const std::string same = Rewritten(dir_.File("good.fcb"), dir_.File("same_bytes.fcb"),
                                     [](format::FileDesc* d) { OverlapFirstStep(d, 0); });
  for (const std::string& path : {shifted, same}) {
    auto p = Program::Load(path);
    ASSERT_REFUSED(p, StatusCode::kCorruptFile, "overlaps input 0") << path;
    EXPECT_EQ(p.status().code(), StatusCode::kCorruptFile);
    const std::string& m = p.status().message();
    EXPECT_NE(m.find("step 0 ("), std::string::npos) << m;
    EXPECT_NE(m.find("output 0 (tensor"), std::string::npos) << m;
    EXPECT_NE(m.find("overlaps input 0"), std::string::npos) << m;
    auto r = RunCommand(CliPath() + " run '" + path + "' --output-dir '" + dir_.File("o") + "'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("overlaps input 0"), std::string::npos) << r.err;
  }
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
  ASSERT_REFUSED(p, StatusCode::kResourceExhausted, "needs a 1099511627776-byte arena");
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
  ASSERT_REFUSED(refused, StatusCode::kResourceExhausted, "more than the memory limit of");
  EXPECT_NE(refused.status().message().find("memory limit of " + std::to_string(one - 1) + " bytes"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("LoadOptions::max_memory_bytes"), std::string::npos);
  // The CLI's --max-memory is the same limit.
  auto cli = RunCommand(CliPath() + " run '" + dir_.File("good.fcb") + "' --max-memory " + std::to_string(one - 1) +
                        " --output-dir '" + dir_.File("o") + "'");
  EXPECT_EQ(cli.exit_code, 1) << cli.err;
  EXPECT_NE(cli.err.find("memory limit of " + std::to_string(one - 1) + " bytes"), std::string::npos) << cli.err;
  lo.max_memory_bytes = one;  // exactly enough for one thread
  auto p = Program::Load(dir_.File("good.fcb"), lo);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto ex = Execution::Create(p.value(), "main", 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  ASSERT_TRUE(ex.value()->Run().ok());
  if (c.scratch_bytes > 0) {
    auto two = Execution::Create(p.value(), "main", 2);
    ASSERT_REFUSED(two, StatusCode::kResourceExhausted, "more than the memory limit of");
    EXPECT_NE(two.status().message().find("(2 threads)"), std::string::npos) << two.status().message();
  }
}

// The count limits (fcb/limits.h) and the load's own memory total.

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void WriteAll(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

// `good`'s header and weight pool around other metadata bytes, with every
// checksum right: what a hostile writer can make that the fcb writer never would.
std::vector<uint8_t> WithMetadata(const std::vector<uint8_t>& good, const std::vector<uint8_t>& meta) {
  using namespace format::test;
  const uint64_t po = Get64(good, kPoolOffAt), ps = Get64(good, kPoolSizeAt);
  std::vector<uint8_t> out(good.begin(), good.begin() + kHdrSize);
  out.insert(out.end(), meta.begin(), meta.end());
  const uint64_t new_po = (out.size() + 4095) / 4096 * 4096;
  out.resize(new_po, 0);
  out.insert(out.end(), good.begin() + po, good.begin() + po + ps);
  Put64(out, kMetaOffAt, kHdrSize);
  Put64(out, kMetaSizeAt, meta.size());
  Put64(out, kPoolOffAt, new_po);
  Put64(out, kFileSizeAt, out.size());
  Rehash(out);
  return out;
}

// Contexts whose plans are equal share one tensor list and one step list in
// the file, but decode to one copy each: a file of a few kilobytes more can
// ask for many times its size. The load counts what decoding takes against
// the memory limit before decoding.
TEST_F(PlanVersionTest, MetadataThatDecodesPastTheLimitIsRefused) {
  const std::string path = Rewritten(dir_.File("good.fcb"), dir_.File("shared.fcb"), [](format::FileDesc* d) {
    const format::ContextDesc c = d->contexts.at(0);
    for (int i = 0; i < 600; ++i) {
      d->contexts.push_back(c);
      d->contexts.back().method = "m" + std::to_string(i);
    }
  });
  auto f = format::LoadFcbFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const uint64_t decoded = f.value()->decoded_bytes(), meta = f.value()->meta_bytes();
  EXPECT_GT(decoded, 20 * meta) << "the shared lists should decode to far more than the metadata's size";
  const uint64_t arena = f.value()->desc().contexts[0].arena_bytes + f.value()->desc().contexts[0].scratch_bytes;
  LoadOptions lo;
  lo.max_memory_bytes = std::max(arena, decoded / 2);  // enough for an execution, not for the load
  ASSERT_LT(lo.max_memory_bytes, decoded);
  auto p = Program::Load(path, lo);
  ASSERT_REFUSED(p, StatusCode::kResourceExhausted, "bytes, more than the memory limit of");
  EXPECT_NE(p.status().message().find("decoding it takes " + std::to_string(decoded) + " bytes"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("memory limit of " + std::to_string(lo.max_memory_bytes)), std::string::npos);
  EXPECT_NE(p.status().message().find("LoadOptions::max_memory_bytes"), std::string::npos);
  lo.max_memory_bytes = decoded + arena;  // enough for both
  EXPECT_TRUE(Program::Load(path, lo).ok());
}

// The writer refuses what the loader would: more contexts than a file may
// hold, a tensor of more dimensions than fcb handles.
TEST_F(PlanVersionTest, WriterRefusesFilesPastTheCountLimits) {
  auto f = format::LoadFcbFile(dir_.File("good.fcb"));
  ASSERT_TRUE(f.ok());
  format::WeightPoolBuilder pool;
  for (size_t b = 0; b < f.value()->desc().blobs.size(); ++b)
    pool.AddUnshared(f.value()->blob_data(static_cast<int32_t>(b)), f.value()->desc().blobs[b].size);
  format::FileDesc many = f.value()->desc();
  many.contexts.resize(limits::kMaxContexts + 1, many.contexts[0]);
  Status s = format::WriteFcbFile(many, pool, dir_.File("many.fcb"));
  ASSERT_REFUSED(s, StatusCode::kInvalidArgument, "4097 compiled contexts, more than the limit of 4096 per file");
  EXPECT_NE(s.message().find(std::to_string(limits::kMaxContexts + 1) + " compiled contexts, more than the limit of " +
                             std::to_string(limits::kMaxContexts)),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(std::ifstream(dir_.File("many.fcb")).good()) << "nothing is left behind";
  format::FileDesc deep = f.value()->desc();
  deep.contexts[0].tensors[0].shape.assign(limits::kMaxRank + 1, 1);
  s = format::WriteFcbFile(deep, pool, dir_.File("deep.fcb"));
  ASSERT_REFUSED(s, StatusCode::kInvalidArgument, "17 dimensions, more than the limit of 16 (fcb/limits.h)");
  EXPECT_NE(s.message().find(std::to_string(limits::kMaxRank + 1) + " dimensions, more than the limit of " +
                             std::to_string(limits::kMaxRank)),
            std::string::npos)
      << s.message();
}

// A hand-made file: one context whose step list holds kMaxStepsPerContext + 1
// entries that all point at one step table (4 MiB of metadata; decoded, it
// would take some hundreds of megabytes). Refused from the counts alone,
// before anything is decoded; the same with tensors; and so are more
// contexts than a file may hold.
class CountLimitTest : public PlanVersionTest {
 protected:
  // Metadata of `contexts` contexts, each with `steps` steps and `tensors`
  // tensors, all entries sharing one table.
  static std::vector<uint8_t> Meta(uint64_t contexts, uint64_t steps, uint64_t tensors) {
    flatbuffers::FlatBufferBuilder b;
    const std::vector<int32_t> none;
    auto step = fb::CreateStep(b, b.CreateString("Relu"), b.CreateString("n"), b.CreateVector(none),
                                       b.CreateVector(none));
    const std::vector<int64_t> shape = {1};
    auto tensor = fb::CreateTensor(b, b.CreateString("t"), 1, b.CreateVector(shape));
    std::vector<flatbuffers::Offset<fb::Step>> step_list(steps, step);
    std::vector<flatbuffers::Offset<fb::Tensor>> tensor_list(tensors, tensor);
    auto ctx = fb::CreateContext(b, b.CreateString("main"), b.CreateString("generic"), b.CreateString("{}"),
                                         b.CreateVector(tensor_list), b.CreateVector(step_list), b.CreateVector(none),
                                         b.CreateVector(none), 64, 0);
    std::vector<flatbuffers::Offset<fb::Context>> ctxs(contexts, ctx);
    std::vector<fb::Blob> blobs;
    b.Finish(fb::CreateFile(b, b.CreateString("fcb test"), b.CreateVector(ctxs),
                                    b.CreateVectorOfStructs(blobs), ops::kPlanVersion),
             fb::FileIdentifier());
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
  Status LoadMeta(const std::vector<uint8_t>& meta, const std::string& name) {
    const std::string path = dir_.File(name);
    WriteAll(path, WithMetadata(ReadAll(dir_.File("good.fcb")), meta));
    auto p = Program::Load(path);
    return p.ok() ? Status::Ok() : p.status();
  }
};

TEST_F(CountLimitTest, ShapedLikeTheLimitsButWithinThemLoadsAsFarAsThePlan) {
  // Within every limit the file passes the format's checks (the plan check
  // then refuses a Relu with no inputs): the limits are what refuse below.
  Status s = LoadMeta(Meta(2, 3, 1), "small.fcb");
  ASSERT_REFUSED(s, StatusCode::kCorruptFile, "Relu takes 1 to 1 inputs, got 0");
  EXPECT_EQ(s.message().find("limit"), std::string::npos) << s.message();
}

TEST_F(CountLimitTest, MoreStepsThanAContextMayHold) {
  Status s = LoadMeta(Meta(1, limits::kMaxStepsPerContext + 1, 1), "steps.fcb");
  ASSERT_REFUSED(s, StatusCode::kCorruptFile, "context 0 holds 1 tensors and 1048577 steps; the limits are 1048576");
  EXPECT_EQ(s.code(), StatusCode::kCorruptFile);
  EXPECT_NE(s.message().find(std::to_string(limits::kMaxStepsPerContext + 1) + " steps; the limits are"),
            std::string::npos)
      << s.message();
}

TEST_F(CountLimitTest, MoreTensorsThanAContextMayHold) {
  Status s = LoadMeta(Meta(1, 1, limits::kMaxTensorsPerContext + 1), "tensors.fcb");
  ASSERT_REFUSED(s, StatusCode::kCorruptFile, "context 0 holds 1048577 tensors and 1 steps; the limits are 1048576");
  EXPECT_EQ(s.code(), StatusCode::kCorruptFile);
  EXPECT_NE(s.message().find("holds " + std::to_string(limits::kMaxTensorsPerContext + 1) + " tensors"),
            std::string::npos)
      << s.message();
}

TEST_F(CountLimitTest, MoreContextsThanAFileMayHold) {
  Status s = LoadMeta(Meta(limits::kMaxContexts + 1, 1, 1), "contexts.fcb");
  ASSERT_REFUSED(s, StatusCode::kCorruptFile, "4097 compiled contexts, more than the limit of 4096 per file");
  EXPECT_EQ(s.code(), StatusCode::kCorruptFile);
  EXPECT_NE(s.message().find(std::to_string(limits::kMaxContexts + 1) + " compiled contexts, more than the limit"),
            std::string::npos)
      << s.message();
}

// The fields of a plan with ranges (Context.symbols, Context.input_symbols):
// a one-step plan made by hand, Relu over an input whose one dim is the
// symbol 'n' in 1..8. As written it loads and runs at any n; each field
// broken is refused at load with CorruptFile naming it.
class SymbolFieldsTest : public CountLimitTest {
 protected:
  struct Sym {
    std::string name;
    int64_t lo, hi;
  };
  static std::vector<uint8_t> Meta(const std::vector<Sym>& syms, const std::vector<int32_t>& input_symbols,
                                   const std::vector<int64_t>& guard = {}) {
    flatbuffers::FlatBufferBuilder b;
    const std::vector<int64_t> shape = {8};
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors = {
        fb::CreateTensor(b, b.CreateString("x"), 1, b.CreateVector(shape), fb::Storage_Arena, 0),
        fb::CreateTensor(b, b.CreateString("y"), 1, b.CreateVector(shape), fb::Storage_Arena, 64)};
    const std::vector<int32_t> in = {0}, out = {1};
    std::vector<flatbuffers::Offset<fb::Step>> steps = {
        fb::CreateStep(b, b.CreateString("Relu"), b.CreateString("relu"), b.CreateVector(in), b.CreateVector(out), 0,
                       guard.empty() ? 0 : b.CreateVector(guard))};
    std::vector<flatbuffers::Offset<fb::Symbol>> sym_list;
    for (const auto& s : syms) sym_list.push_back(fb::CreateSymbol(b, b.CreateString(s.name), s.lo, s.hi));
    auto ctx = fb::CreateContext(b, b.CreateString("main"), b.CreateString("generic"), b.CreateString("{}"),
                                 b.CreateVector(tensors), b.CreateVector(steps), b.CreateVector(in),
                                 b.CreateVector(out), 128, 0, b.CreateVector(sym_list), b.CreateVector(input_symbols));
    std::vector<flatbuffers::Offset<fb::Context>> ctxs = {ctx};
    std::vector<fb::Blob> blobs;
    b.Finish(fb::CreateFile(b, b.CreateString("fcb test"), b.CreateVector(ctxs), b.CreateVectorOfStructs(blobs),
                            ops::kPlanVersion),
             fb::FileIdentifier());
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
};

TEST_F(SymbolFieldsTest, AHandMadePlanWithARangeRunsAtEverySize) {
  const std::string path = dir_.File("ranged.fcb");
  WriteAll(path, WithMetadata(ReadAll(dir_.File("good.fcb")), Meta({{"n", 1, 8}}, {0})));
  auto p = Program::Load(path);
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto info = p.value()->method("main");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info.value().inputs[0].min_shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(info.value().inputs[0].symbols, (std::vector<std::string>{"n"}));
  auto ex = Execution::Create(p.value(), "main", 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  for (int64_t n : {3, 8, 1, 3}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 2 ? i : -i);
    ASSERT_TRUE(ex.value()->SetInput("x", x.data(), n * 4, {n}).ok());
    ASSERT_TRUE(ex.value()->Run().ok());
    ASSERT_EQ(ex.value()->output_shape(0), (std::vector<int64_t>{n}));
    ASSERT_EQ(ex.value()->output_bytes(0), static_cast<uint64_t>(n * 4));
    const float* y = static_cast<const float*>(ex.value()->output_data(0));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], std::max(x[i], 0.f)) << "n = " << n << ", element " << i;
  }
  // Outside 1..8: refused, nothing written, the execution still runs.
  std::vector<float> nine(9, 1.f);
  ASSERT_REFUSED(ex.value()->SetInput("x", nine.data(), 9 * 4, {9}), StatusCode::kInvalidArgument,
                 "input 'x' of method 'main' is given the shape 9, but its dim 0 is the symbol 'n' with the range 1..8");
  ASSERT_REFUSED(ex.value()->SetInput("x", nine.data(), 9 * 4, {3, 3}), StatusCode::kInvalidArgument,
                 "(rank 2); it has rank 1");
  ASSERT_REFUSED(ex.value()->SetInput("x", nine.data(), 8, {3}), StatusCode::kInvalidArgument,
                 "which needs 12 bytes (float32), got 8");
  EXPECT_TRUE(ex.value()->Run().ok());
  EXPECT_EQ(ex.value()->output_shape(0), (std::vector<int64_t>{3}));
}

TEST_F(SymbolFieldsTest, BrokenSymbolFieldsAreRefusedNamingThem) {
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 1, 8}}, {3}), "index.fcb"), StatusCode::kCorruptFile,
                 "method input 0 'x' dim 0 refers to symbol 3, out of range (context has 1 symbols)");
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 1, 4}}, {0}), "bound.fcb"), StatusCode::kCorruptFile,
                 "method input 0 'x' dim 0 is 8, not the bound 4 of its symbol 'n'");
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 9, 8}}, {0}), "order.fcb"), StatusCode::kCorruptFile,
                 "symbol 0 'n' has the range 9..8 (needs 0 <= lo <= hi");
  ASSERT_REFUSED(LoadMeta(Meta({{"n", -1, 8}}, {0}), "negative.fcb"), StatusCode::kCorruptFile,
                 "symbol 0 'n' has the range -1..8");
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 1, 8}}, {0, 0}), "count.fcb"), StatusCode::kCorruptFile,
                 "input_symbols has 2 entries; the inputs have 1 dims");
  ASSERT_REFUSED(LoadMeta(Meta({{"", 1, 8}}, {0}), "name.fcb"), StatusCode::kCorruptFile,
                 "symbol 0 has a name of 0 bytes (1 to 256)");
  // A step guard (two variants of one node, each run at the sizes it suits):
  // its form, and an output of rank 4 to test.
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 1, 8}}, {0}, {3, 4, 16}), "guard_kind.fcb"), StatusCode::kCorruptFile,
                 "guard must be [kind 1 or 2, tile 1..64, threshold >= 0]");
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 1, 8}}, {0}, {1, 4}), "guard_size.fcb"), StatusCode::kCorruptFile,
                 "guard must be [kind 1 or 2, tile 1..64, threshold >= 0]");
  ASSERT_REFUSED(LoadMeta(Meta({{"n", 1, 8}}, {0}, {1, 4, 16}), "guard_rank.fcb"), StatusCode::kCorruptFile,
                 "a guarded step needs an output of rank 4");
  std::vector<Sym> many(limits::kMaxSymbols + 1, Sym{"n", 1, 8});
  ASSERT_REFUSED(LoadMeta(Meta(many, {0}), "many.fcb"), StatusCode::kCorruptFile,
                 "holds 257 symbols, more than the limit of 256 per context");
}

// The two variants of a node under guards {1, tile, t} and {2, tile, t}:
// exactly one runs at every size (tiles = N * ceil(H/tile) * ceil(W/tile)).
TEST(StepGuard, ExactlyOneOfTwoVariantsRunsAtEverySize) {
  for (int64_t n : {1, 2})
    for (int64_t h = 1; h <= 40; h += 3)
      for (int64_t w = 1; w <= 40; w += 5) {
        const ir::Shape y = {n, h, w, 8};
        const int64_t tiles = n * ((h + 3) / 4) * ((w + 3) / 4);
        EXPECT_EQ(ops::GuardHolds({1, 4, 16}, y), tiles >= 16) << ir::ShapeToString(y);
        EXPECT_NE(ops::GuardHolds({1, 4, 16}, y), ops::GuardHolds({2, 4, 16}, y)) << ir::ShapeToString(y);
      }
  EXPECT_TRUE(ops::GuardHolds({}, {1, 2, 3, 4}));  // no guard: always runs
}

}  // namespace
}  // namespace fcb
