// The C API (include/fcb/fcb_c.h): the demo model compiled, loaded and run
// through it matches ONNX Runtime; every failure comes back as a status with
// the C++ API's code and message (no crash on NULL, corrupt files, bad sizes
// or indices); handles are released on every path (run under LeakSanitizer
// in CI: .ci/sanitized_tests).
#include "fcb/fcb_c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;

// Owns a status; the test reads it and it is released at scope end.
struct StatusPtr {
  fcb_status_t* s;
  explicit StatusPtr(fcb_status_t* status) : s(status) {}
  ~StatusPtr() { fcb_status_destroy(s); }
  StatusPtr(const StatusPtr&) = delete;
  StatusPtr& operator=(const StatusPtr&) = delete;
  bool ok() const { return s == nullptr; }
  fcb_status_code_t code() const { return fcb_status_code(s); }
  std::string message() const { return fcb_status_message(s); }
};

struct ProgramDeleter {
  void operator()(fcb_program_t* p) const { fcb_program_destroy(p); }
};
struct ExecutionDeleter {
  void operator()(fcb_execution_t* e) const { fcb_execution_destroy(e); }
};
using ProgramHandle = std::unique_ptr<fcb_program_t, ProgramDeleter>;
using ExecutionHandle = std::unique_ptr<fcb_execution_t, ExecutionDeleter>;

const char kSpec[] = R"({"targets": ["generic", "x86-64-v2"], "input_shapes": {"input": [1, 3, 64, 64]}})";

class CApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const char* names[] = {"main"};
    const char* models[] = {FCB_SOURCE_DIR "/models/demo_cnn.onnx"};
    char* report = nullptr;
    StatusPtr s(fcb_compile(names, models, 1, kSpec, dir_->File("demo.fcb").c_str(), &report));
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_NE(report, nullptr);
    report_ = report;
    fcb_string_destroy(report);
  }
  static void TearDownTestSuite() { delete dir_; }

  static ProgramHandle Load(const std::string& path, const char* target = nullptr) {
    fcb_program_t* p = nullptr;
    StatusPtr s(fcb_program_load(path.c_str(), target, 1, &p));
    EXPECT_TRUE(s.ok()) << s.message();
    return ProgramHandle(p);
  }

  static TempDir* dir_;
  static std::string report_;
};

TempDir* CApiTest::dir_ = nullptr;
std::string CApiTest::report_;

TEST_F(CApiTest, VersionsAndNullStatus) {
  EXPECT_STREQ(fcb_version(), fcb::Version());
  EXPECT_EQ(fcb_c_api_version(), FCB_C_API_VERSION_MAJOR * 1000 + FCB_C_API_VERSION_MINOR);
  EXPECT_EQ(fcb_status_code(nullptr), FCB_STATUS_OK);
  EXPECT_STREQ(fcb_status_message(nullptr), "");
  EXPECT_STREQ(fcb_status_code_name(FCB_STATUS_CORRUPT_FILE), StatusCodeName(StatusCode::kCorruptFile));
  fcb_status_destroy(nullptr);
  fcb_program_destroy(nullptr);
  fcb_execution_destroy(nullptr);
  fcb_string_destroy(nullptr);
}

TEST_F(CApiTest, ReportNamesTheFileSize) {
  const uint64_t size = testing::ReadBytes(dir_->File("demo.fcb")).size();
  EXPECT_NE(report_.find("\"file_size\":" + std::to_string(size)), std::string::npos) << report_;
  EXPECT_NE(report_.find("\"warnings\":[]"), std::string::npos) << report_;
}

TEST_F(CApiTest, RunMatchesOnnxRuntime) {
  auto input = ReadNpy(testing::TestDataDir() + "/demo_cnn.input.npy");
  auto want = ReadNpy(testing::TestDataDir() + "/demo_cnn.ref/output.npy");
  ASSERT_TRUE(input.ok() && want.ok()) << "run scripts/prepare_testdata.sh";
  for (const auto& t : ListTargets()) {
    if (!t.host_can_run || (t.name != "generic" && t.name != "x86-64-v2")) continue;
    SCOPED_TRACE(t.name);
    ProgramHandle p = Load(dir_->File("demo.fcb"), t.name.c_str());
    ASSERT_TRUE(p);
    EXPECT_EQ(std::string(fcb_program_target(p.get())), t.name);
    ASSERT_EQ(fcb_program_num_targets_in_file(p.get()), 2u);
    EXPECT_STREQ(fcb_program_target_in_file(p.get(), 0), "generic");
    EXPECT_STREQ(fcb_program_target_in_file(p.get(), 1), "x86-64-v2");
    EXPECT_EQ(fcb_program_target_in_file(p.get(), 2), nullptr);
    ASSERT_EQ(fcb_program_num_methods(p.get()), 1u);
    EXPECT_STREQ(fcb_program_method_name(p.get(), 0), "main");

    size_t n_in = 0, n_out = 0;
    StatusPtr c(fcb_program_method_io_count(p.get(), nullptr, &n_in, &n_out));
    ASSERT_TRUE(c.ok()) << c.message();
    ASSERT_EQ(n_in, 1u);
    ASSERT_EQ(n_out, 1u);
    fcb_tensor_info_t in{};
    StatusPtr i(fcb_program_method_input(p.get(), "main", 0, &in));
    ASSERT_TRUE(i.ok()) << i.message();
    EXPECT_STREQ(in.name, "input");
    EXPECT_EQ(in.dtype, static_cast<int32_t>(DType::kF32));
    EXPECT_STREQ(in.dtype_name, "float32");
    ASSERT_EQ(std::vector<int64_t>(in.shape, in.shape + in.rank), (std::vector<int64_t>{1, 3, 64, 64}));
    EXPECT_EQ(in.bytes, input.value().data.size());

    fcb_execution_t* raw = nullptr;
    StatusPtr e(fcb_execution_create(p.get(), nullptr, 2, &raw));
    ASSERT_TRUE(e.ok()) << e.message();
    ExecutionHandle ex(raw);
    p.reset();  // the execution keeps the program alive
    StatusPtr si(fcb_execution_set_input(ex.get(), "input", input.value().data.data(), input.value().data.size()));
    ASSERT_TRUE(si.ok()) << si.message();
    StatusPtr r(fcb_execution_run(ex.get()));
    ASSERT_TRUE(r.ok()) << r.message();
    fcb_tensor_info_t out{};
    StatusPtr oi(fcb_execution_output_info(ex.get(), 0, &out));
    ASSERT_TRUE(oi.ok()) << oi.message();
    ASSERT_EQ(std::vector<int64_t>(out.shape, out.shape + out.rank), want.value().shape);
    const void* data = nullptr;
    size_t bytes = 0;
    StatusPtr o(fcb_execution_output(ex.get(), 0, &data, &bytes));
    ASSERT_TRUE(o.ok()) << o.message();
    ASSERT_EQ(bytes, want.value().data.size());
    std::vector<float> got(bytes / 4), ref(bytes / 4);
    std::memcpy(got.data(), data, bytes);
    std::memcpy(ref.data(), want.value().data.data(), bytes);
    auto d = testing::Compare(got, ref);
    EXPECT_LT(d.rel_l2, 1e-4);
    EXPECT_LT(d.max_abs, 1e-3);
  }
}

TEST_F(CApiTest, InspectJsonIsTheCliDocument) {
  char* json = nullptr;
  StatusPtr s(fcb_inspect_json(dir_->File("demo.fcb").c_str(), &json));
  ASSERT_TRUE(s.ok()) << s.message();
  std::string got(json);
  fcb_string_destroy(json);
  auto r = testing::RunCommand(testing::CliPath() + " inspect '" + dir_->File("demo.fcb") + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(got + "\n", r.out);
}

TEST_F(CApiTest, NullArgumentsAreStatusesNotCrashes) {
  const char* names[] = {"main"};
  const char* models[] = {FCB_SOURCE_DIR "/models/demo_cnn.onnx"};
  fcb_program_t* p = nullptr;
  for (fcb_status_t* raw :
       {fcb_compile(nullptr, models, 1, kSpec, "x.fcb", nullptr), fcb_compile(names, nullptr, 1, kSpec, "x.fcb", nullptr),
        fcb_compile(names, models, 1, kSpec, nullptr, nullptr), fcb_compile(names, models, 0, kSpec, "x.fcb", nullptr),
        fcb_program_load(nullptr, nullptr, 1, &p), fcb_program_load("x.fcb", nullptr, 1, nullptr),
        fcb_program_method_io_count(nullptr, nullptr, nullptr, nullptr),
        fcb_execution_create(nullptr, nullptr, 1, nullptr), fcb_execution_run(nullptr),
        fcb_execution_set_input(nullptr, "input", nullptr, 0), fcb_execution_output(nullptr, 0, nullptr, nullptr),
        fcb_execution_set_input_shaped(nullptr, "input", nullptr, 0, nullptr, 0),
        fcb_execution_output_shape(nullptr, 0, nullptr, 0, nullptr),
        fcb_execution_input_range(nullptr, 0, nullptr, nullptr, 0, nullptr),
        fcb_program_method_input_range(nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr),
        fcb_inspect_json(nullptr, nullptr)}) {
    StatusPtr s(raw);
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT) << s.message();
    EXPECT_FALSE(s.message().empty());
  }
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(fcb_program_target(nullptr), nullptr);
  EXPECT_EQ(fcb_program_num_methods(nullptr), 0u);
  EXPECT_EQ(fcb_execution_num_inputs(nullptr), 0u);
}

TEST_F(CApiTest, SpecErrorsCarryTheCppMessage) {
  const char* names[] = {"main"};
  const char* models[] = {FCB_SOURCE_DIR "/models/demo_cnn.onnx"};
  const std::pair<const char*, const char*> specs[] = {
      {R"({"targets": []})", "the compile spec lists no targets"},
      {R"({"targets": ["generik"]})", "unknown target 'generik'"},
      {R"({"targets": "generic", "target_options": {"optimisation_level": 1}})", "unknown option 'optimisation_level'"},
      {R"({"targets": ["generic", "generic"]})", "target 'generic' is listed more than once"},
      {"not json", "the spec is not valid JSON"},
      {R"({"targets": "generic", "input_shapes": {"input": [[8, 1], 3, 64, 64]}})",
       "input_shapes['input'] dim 0 is the range [8, 1], whose low end is above its high end"},
      {R"({"targets": "generic", "input_shapes": {"input": [[1], 3, 64, 64]}})",
       "input_shapes['input'] dim 0 is [1]: a range is a list of two integers [lo, hi]"}};
  for (const auto& [spec, why] : specs) {
    SCOPED_TRACE(spec);
    StatusPtr s(fcb_compile(names, models, 1, spec, dir_->File("never.fcb").c_str(), nullptr));
    auto cpp = ParseSpecJson(spec);
    ASSERT_REFUSED(cpp, StatusCode::kInvalidArgument, why);
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(s.message(), cpp.status().message());
    EXPECT_FALSE(testing::FileExists(dir_->File("never.fcb")));
  }
  // A valid range compiles: the input takes any batch of 1..8 at each run.
  StatusPtr range(fcb_compile(names, models, 1, R"({"targets": "generic", "input_shapes": {"input": [[1, 8], 3, 64, 64]}})",
                              dir_->File("range.fcb").c_str(), nullptr));
  ASSERT_TRUE(range.ok()) << range.message();
  ProgramHandle p = Load(dir_->File("range.fcb"));
  ASSERT_TRUE(p);
  fcb_tensor_info_t in{};
  StatusPtr i(fcb_program_method_input(p.get(), nullptr, 0, &in));
  ASSERT_TRUE(i.ok()) << i.message();
  EXPECT_EQ(std::vector<int64_t>(in.shape, in.shape + in.rank), (std::vector<int64_t>{8, 3, 64, 64}));
  int64_t min_shape[4] = {};
  const char* symbols[4] = {};
  size_t rank = 0;
  StatusPtr r(fcb_program_method_input_range(p.get(), nullptr, 0, min_shape, symbols, 4, &rank));
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(rank, 4u);
  EXPECT_EQ(std::vector<int64_t>(min_shape, min_shape + 4), (std::vector<int64_t>{1, 3, 64, 64}));
  EXPECT_STREQ(symbols[0], "batch");
  EXPECT_STREQ(symbols[1], "");
  const char* twice[] = {"a", "a"};
  const char* two_models[] = {models[0], models[0]};
  StatusPtr dup(fcb_compile(twice, two_models, 2, kSpec, dir_->File("never.fcb").c_str(), nullptr));
  EXPECT_EQ(dup.code(), FCB_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(dup.message().find("'a' is given twice"), std::string::npos) << dup.message();
}

// fcb_program_load_limited passes the memory limit through: one byte short
// of what the demo model's execution needs is refused (with the C++ API's
// message), exactly enough loads and runs.
TEST_F(CApiTest, LoadLimitedBoundsMemoryLikeLoadOptions) {
  const std::string path = dir_->File("demo.fcb");
  uint64_t needed = 0;
  for (uint64_t lo = 1, hi = uint64_t{1} << 34; lo <= hi;) {  // the least limit that loads
    const uint64_t mid = lo + (hi - lo) / 2;
    LoadOptions o;
    o.max_memory_bytes = mid;
    if (Program::Load(path, o).ok()) {
      needed = mid;
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  ASSERT_GT(needed, 1u);
  fcb_program_t* p = nullptr;
  {
    StatusPtr s(fcb_program_load_limited(path.c_str(), nullptr, 1, needed - 1, &p));
    LoadOptions o;
    o.max_memory_bytes = needed - 1;
    auto cpp = Program::Load(path, o);
    ASSERT_REFUSED(cpp, StatusCode::kResourceExhausted, "more than the memory limit of");
    EXPECT_EQ(s.code(), FCB_STATUS_RESOURCE_EXHAUSTED) << s.message();
    EXPECT_EQ(s.message(), cpp.status().message());
    EXPECT_NE(s.message().find("memory limit of " + std::to_string(needed - 1) + " bytes"), std::string::npos);
    EXPECT_EQ(p, nullptr);
  }
  StatusPtr s(fcb_program_load_limited(path.c_str(), nullptr, 1, needed, &p));
  ASSERT_TRUE(s.ok()) << s.message();
  ProgramHandle owned(p);
  fcb_execution_t* raw = nullptr;
  StatusPtr c(fcb_execution_create(p, nullptr, 1, &raw));
  ASSERT_TRUE(c.ok()) << c.message();
  ExecutionHandle ex(raw);
  std::vector<float> zeros(3 * 64 * 64);
  StatusPtr si(fcb_execution_set_input(ex.get(), "input", zeros.data(), zeros.size() * 4));
  ASSERT_TRUE(si.ok()) << si.message();
  StatusPtr r(fcb_execution_run(ex.get()));
  EXPECT_TRUE(r.ok()) << r.message();
}

TEST_F(CApiTest, CorruptAndMissingFilesAreRefusedLikeTheCppApi) {
  const auto good = testing::ReadBytes(dir_->File("demo.fcb"));
  const std::string bad = dir_->File("bad.fcb");
  testing::WriteBytes(bad, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(good.size() / 2)));
  fcb_program_t* p = nullptr;
  {
    StatusPtr s(fcb_program_load(bad.c_str(), nullptr, 1, &p));
    auto cpp = Program::Load(bad);
    EXPECT_REFUSED(cpp, StatusCode::kCorruptFile, "header records file size");
    EXPECT_EQ(s.code(), FCB_STATUS_CORRUPT_FILE) << s.message();
    EXPECT_EQ(s.message(), cpp.status().message());
    EXPECT_EQ(p, nullptr);
  }
  {
    char* json = nullptr;
    StatusPtr s(fcb_inspect_json(bad.c_str(), &json));
    EXPECT_EQ(s.code(), FCB_STATUS_CORRUPT_FILE) << s.message();
    EXPECT_EQ(json, nullptr);
  }
  {
    StatusPtr s(fcb_program_load(dir_->File("missing.fcb").c_str(), nullptr, 1, &p));
    EXPECT_EQ(s.code(), FCB_STATUS_NOT_FOUND) << s.message();
    EXPECT_NE(s.message().find("missing.fcb"), std::string::npos) << s.message();
  }
  // A flipped weight byte: refused at load or, after the background check, at run.
  auto flipped = good;
  flipped[good.size() - 1] ^= 0x5a;
  testing::WriteBytes(bad, flipped);
  StatusPtr s(fcb_program_load(bad.c_str(), nullptr, 1, &p));
  ProgramHandle owned(p);
  if (s.ok()) {
    fcb_execution_t* raw = nullptr;
    StatusPtr c(fcb_execution_create(p, nullptr, 1, &raw));
    ASSERT_TRUE(c.ok()) << c.message();
    ExecutionHandle ex(raw);
    std::vector<float> zeros(3 * 64 * 64);
    StatusPtr si(fcb_execution_set_input(ex.get(), "input", zeros.data(), zeros.size() * 4));
    ASSERT_TRUE(si.ok());
    StatusPtr r(fcb_execution_run(ex.get()));
    EXPECT_EQ(r.code(), FCB_STATUS_CORRUPT_FILE) << r.message();
  } else {
    EXPECT_EQ(s.code(), FCB_STATUS_CORRUPT_FILE) << s.message();
  }
}

TEST_F(CApiTest, WrongNamesSizesAndIndices) {
  ProgramHandle p = Load(dir_->File("demo.fcb"));
  ASSERT_TRUE(p);
  fcb_tensor_info_t info{};
  {
    StatusPtr s(fcb_program_method_input(p.get(), "decode", 0, &info));
    auto cpp = Program::Load(dir_->File("demo.fcb")).value()->method("decode");
    EXPECT_EQ(s.code(), FCB_STATUS_NOT_FOUND);
    EXPECT_EQ(s.message(), cpp.status().message());
  }
  {
    StatusPtr s(fcb_program_method_output(p.get(), nullptr, 1, &info));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("index 1 is out of range"), std::string::npos) << s.message();
  }
  {
    fcb_execution_t* raw = nullptr;
    StatusPtr s(fcb_execution_create(p.get(), nullptr, 0, &raw));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT) << s.message();
    EXPECT_EQ(raw, nullptr);
  }
  fcb_execution_t* raw = nullptr;
  StatusPtr c(fcb_execution_create(p.get(), "main", 1, &raw));
  ASSERT_TRUE(c.ok()) << c.message();
  ExecutionHandle ex(raw);
  std::vector<float> buf(3 * 64 * 64);
  {
    StatusPtr s(fcb_execution_set_input(ex.get(), "input", buf.data(), 12));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT) << s.message();
  }
  {
    StatusPtr s(fcb_execution_set_input(ex.get(), "image", buf.data(), buf.size() * 4));
    EXPECT_NE(s.code(), FCB_STATUS_OK);
    EXPECT_NE(s.message().find("image"), std::string::npos) << s.message();
  }
  {
    const void* data = nullptr;
    StatusPtr s(fcb_execution_output(ex.get(), 3, &data, nullptr));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(data, nullptr);
  }
}

// bert_dyn (scripts/export_dynamic_models.py: input_ids and attention_mask
// int64 [1, seq], output [1, seq, 128]) compiled once for seq 1..512 and run
// through the C API at several lengths on one execution: each matches ONNX
// Runtime at its own output shape and size; a shape outside the range or of
// another rank is refused with the C++ message and the execution runs on.
class CApiRangesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string model = testing::TestDataDir() + "/bert_dyn.onnx";
    if (!testing::FileExists(model)) return;  // each test fails, naming the missing file
    dir_ = new TempDir();
    const char* names[] = {"main"};
    const char* models[] = {model.c_str()};
    StatusPtr s(fcb_compile(names, models, 1,
                            R"({"targets": ["generic", "x86-64-v2"],
                                "input_shapes": {"input_ids": [1, [1, 512]], "attention_mask": [1, [1, 512]]}})",
                            dir_->File("bert.fcb").c_str(), nullptr));
    ASSERT_TRUE(s.ok()) << s.message();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(testing::FileExists(testing::TestDataDir() + "/bert_dyn.onnx"))
        << "bert_dyn.onnx is missing: run scripts/prepare_testdata.sh";
    ASSERT_NE(dir_, nullptr);
  }

  static ExecutionHandle Create(const char* target) {
    fcb_program_t* p = nullptr;
    StatusPtr l(fcb_program_load(dir_->File("bert.fcb").c_str(), target, 1, &p));
    EXPECT_TRUE(l.ok()) << l.message();
    ProgramHandle owned(p);
    if (!p) return nullptr;
    fcb_execution_t* raw = nullptr;
    StatusPtr c(fcb_execution_create(p, nullptr, 2, &raw));
    EXPECT_TRUE(c.ok()) << c.message();
    return ExecutionHandle(raw);
  }

  // Sets both inputs from case bert_dyn.L<n> (unless set_inputs is false:
  // they hold that case already), runs, and compares the output with ONNX
  // Runtime's: shape, bytes and values.
  static void RunCase(fcb_execution_t* ex, int n, bool set_inputs = true) {
    SCOPED_TRACE("length " + std::to_string(n));
    const std::string stem = testing::TestDataDir() + "/bert_dyn.L" + std::to_string(n);
    const auto feeds = testing::ReadNpyFolder(stem + ".feeds");
    const auto want = testing::ReadNpyFolder(stem + ".ref");
    ASSERT_EQ(feeds.size(), 2u) << stem << ".feeds: run scripts/prepare_testdata.sh";
    ASSERT_EQ(want.count("last_hidden_state"), 1u) << stem << ".ref: run scripts/prepare_testdata.sh";
    for (const auto& [name, a] : feeds) {
      ASSERT_EQ(a.shape, (std::vector<int64_t>{1, n})) << name;
      if (!set_inputs) continue;
      StatusPtr s(fcb_execution_set_input_shaped(ex, name.c_str(), a.data.data(), a.data.size(), a.shape.data(),
                                                 a.shape.size()));
      ASSERT_TRUE(s.ok()) << name << ": " << s.message();
    }
    StatusPtr r(fcb_execution_run(ex));
    ASSERT_TRUE(r.ok()) << r.message();
    const NpyArray& ref = want.at("last_hidden_state");
    ASSERT_EQ(ref.shape, (std::vector<int64_t>{1, n, 128}));
    int64_t shape[4] = {-1, -1, -1, -1};
    size_t rank = 0;
    StatusPtr sh(fcb_execution_output_shape(ex, 0, shape, 4, &rank));
    ASSERT_TRUE(sh.ok()) << sh.message();
    ASSERT_EQ(std::vector<int64_t>(shape, shape + rank), ref.shape);
    EXPECT_EQ(shape[3], -1);  // nothing written past the rank
    const void* data = nullptr;
    size_t bytes = 0;
    StatusPtr o(fcb_execution_output(ex, 0, &data, &bytes));
    ASSERT_TRUE(o.ok()) << o.message();
    ASSERT_EQ(bytes, ref.data.size());
    std::vector<float> got(bytes / 4), wanted(bytes / 4);
    std::memcpy(got.data(), data, bytes);
    std::memcpy(wanted.data(), ref.data.data(), bytes);
    EXPECT_LE(testing::Compare(got, wanted).rel_l2, 1e-4);
  }

  static TempDir* dir_;
};

TempDir* CApiRangesTest::dir_ = nullptr;

TEST_F(CApiRangesTest, InfoGivesTheBoundTheRangeAndTheSymbols) {
  fcb_program_t* raw = nullptr;
  StatusPtr l(fcb_program_load(dir_->File("bert.fcb").c_str(), nullptr, 1, &raw));
  ASSERT_TRUE(l.ok()) << l.message();
  ProgramHandle p(raw);
  ExecutionHandle ex = Create(nullptr);
  ASSERT_TRUE(ex);
  for (size_t i = 0; i < 2; ++i) {
    fcb_tensor_info_t info{};
    StatusPtr s(fcb_program_method_input(p.get(), nullptr, i, &info));
    ASSERT_TRUE(s.ok()) << s.message();
    SCOPED_TRACE(info.name);
    EXPECT_EQ(std::vector<int64_t>(info.shape, info.shape + info.rank), (std::vector<int64_t>{1, 512}));
    EXPECT_EQ(info.bytes, 512u * 8);
    size_t rank = 0;
    StatusPtr q(fcb_program_method_input_range(p.get(), nullptr, i, nullptr, nullptr, 0, &rank));  // the rank alone
    ASSERT_TRUE(q.ok()) << q.message();
    EXPECT_EQ(rank, 2u);
    int64_t min_shape[2] = {};
    const char* symbols[2] = {};
    StatusPtr r(fcb_program_method_input_range(p.get(), nullptr, i, min_shape, symbols, 2, &rank));
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(std::vector<int64_t>(min_shape, min_shape + 2), (std::vector<int64_t>{1, 1}));
    EXPECT_STREQ(symbols[0], "");
    EXPECT_STREQ(symbols[1], "seq");
    int64_t from_ex[2] = {};
    StatusPtr e(fcb_execution_input_range(ex.get(), i, from_ex, nullptr, 2, &rank));
    ASSERT_TRUE(e.ok()) << e.message();
    EXPECT_EQ(std::vector<int64_t>(from_ex, from_ex + 2), (std::vector<int64_t>{1, 1}));
    StatusPtr small(fcb_program_method_input_range(p.get(), nullptr, i, min_shape, nullptr, 1, &rank));
    EXPECT_EQ(small.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(small.message().find("capacity 1 is below the rank of input '" + std::string(info.name) + "' (2)"),
              std::string::npos)
        << small.message();
  }
  // Before any run an output reports its planned (largest) shape.
  int64_t shape[3] = {};
  size_t rank = 0;
  StatusPtr s(fcb_execution_output_shape(ex.get(), 0, shape, 3, &rank));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(std::vector<int64_t>(shape, shape + rank), (std::vector<int64_t>{1, 512, 128}));
  StatusPtr small(fcb_execution_output_shape(ex.get(), 0, shape, 2, &rank));
  EXPECT_EQ(small.code(), FCB_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(small.message().find("capacity 2 is below the rank of output 'last_hidden_state' (3)"), std::string::npos)
      << small.message();
  StatusPtr bad(fcb_execution_output_shape(ex.get(), 1, shape, 3, &rank));
  EXPECT_EQ(bad.code(), FCB_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(bad.message().find("output index 1 is out of range"), std::string::npos) << bad.message();
  StatusPtr range(fcb_execution_input_range(ex.get(), 2, nullptr, nullptr, 0, &rank));
  EXPECT_EQ(range.code(), FCB_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(range.message().find("input index 2 is out of range"), std::string::npos) << range.message();
}

TEST_F(CApiRangesTest, LengthsWithinTheRangeMatchOnnxRuntime) {
  for (const char* target : {"generic", "x86-64-v2"}) {
    bool runs = false;
    for (const auto& t : ListTargets()) runs = runs || (t.name == target && t.host_can_run);
    if (!runs) continue;
    SCOPED_TRACE(target);
    ExecutionHandle ex = Create(target);
    ASSERT_TRUE(ex);
    RunCase(ex.get(), 7);
    RunCase(ex.get(), 333);
    RunCase(ex.get(), 7);  // back to a length seen before
  }
}

TEST_F(CApiRangesTest, OutOfRangeAndWrongRankAreRefusedAndTheExecutionRunsOn) {
  ExecutionHandle ex = Create(nullptr);
  ASSERT_TRUE(ex);
  RunCase(ex.get(), 7);
  std::vector<int64_t> ids(600, 1);
  {
    const int64_t shape[] = {1, 600};
    StatusPtr s(fcb_execution_set_input_shaped(ex.get(), "input_ids", ids.data(), 600 * 8, shape, 2));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("input 'input_ids' of method 'main' is given the shape 1x600, but its dim 1 is the "
                               "symbol 'seq' with the range 1..512"),
              std::string::npos)
        << s.message();
  }
  {
    const int64_t shape[] = {7};
    StatusPtr s(fcb_execution_set_input_shaped(ex.get(), "attention_mask", ids.data(), 7 * 8, shape, 1));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("input 'attention_mask' of method 'main' is given the shape 7 (rank 1); it has "
                               "rank 2"),
              std::string::npos)
        << s.message();
  }
  {
    const int64_t shape[] = {1, 7};
    StatusPtr s(fcb_execution_set_input_shaped(ex.get(), "input_ids", ids.data(), 6 * 8, shape, 2));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("which needs 56 bytes"), std::string::npos) << s.message();
  }
  {
    StatusPtr s(fcb_execution_set_input_shaped(ex.get(), "input_ids", ids.data(), 16, nullptr, 2));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("'shape' must not be NULL"), std::string::npos) << s.message();
  }
  // Nothing was written: the inputs of length 7 still give that case's output.
  RunCase(ex.get(), 7, /*set_inputs=*/false);
  // Without a shape, the data must fit the shape the input has now.
  {
    StatusPtr s(fcb_execution_set_input(ex.get(), "input_ids", ids.data(), 512 * 8));
    EXPECT_EQ(s.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("input 'input_ids' needs 56 bytes"), std::string::npos) << s.message();
    StatusPtr ok(fcb_execution_set_input(ex.get(), "input_ids", ids.data(), 7 * 8));
    EXPECT_TRUE(ok.ok()) << ok.message();
  }
  // Two inputs of one symbol at different lengths: refused by the run.
  {
    const int64_t shape[] = {1, 9};
    StatusPtr s(fcb_execution_set_input_shaped(ex.get(), "input_ids", ids.data(), 9 * 8, shape, 2));
    ASSERT_TRUE(s.ok()) << s.message();
    StatusPtr r(fcb_execution_run(ex.get()));
    EXPECT_EQ(r.code(), FCB_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(r.message().find("both are the symbol 'seq', one size per run"), std::string::npos) << r.message();
  }
  RunCase(ex.get(), 333);
}

}  // namespace
}  // namespace fcb
