// Named data in the .fcb (CompileSpec::attachments, `fcb compile --attach`,
// the spec's "attachments"): round trips through the C++ and C APIs and the
// CLI, name and file refusals, corrupted bytes, and inspect's listing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fcb/fcb.h"
#include "fcb/fcb_c.h"
#include "fcb/inspect.h"
#include "fcb/limits.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::CliPath;
using testing::FileExists;
using testing::ReadBytes;
using testing::RunCommand;
using testing::TempDir;
using testing::WriteBytes;

const std::string kModel = FCB_SOURCE_DIR "/models/demo_cnn.onnx";

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

CompileSpec Spec() {
  CompileSpec spec;
  spec.targets = {"generic"};
  spec.input_shapes["input"] = {1, 3, 64, 64};
  return spec;
}

std::string Binary() {
  std::string b;
  for (int i = 0; i < 3000; ++i) b.push_back(static_cast<char>(i * 7 % 256));  // zeros and high bytes
  return b;
}

void WriteText(const std::string& path, const std::string& bytes) {
  WriteBytes(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

TEST(Attachments, CppRoundTrip) {
  TempDir dir;
  CompileSpec spec = Spec();
  spec.attachments = {{"vocab.json", "{\"a\": 1}"}, {"blob.bin", Binary()}, {"empty", ""}};
  const std::string out = dir.File("a.fcb");
  ASSERT_TRUE(Compile(kModel, spec, out).ok());
  auto p = Program::Load(out);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->attachments(), (std::vector<std::string>{"blob.bin", "empty", "vocab.json"}));
  for (const auto& [name, bytes] : spec.attachments) {
    auto got = (*p)->attachment(name);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(std::string(got.value()), bytes) << name;
  }
  auto missing = (*p)->attachment("vocab");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), out)) << missing.status().message();
  EXPECT_TRUE(Contains(missing.status().message(), "'vocab'")) << missing.status().message();
  EXPECT_TRUE(Contains(missing.status().message(), "blob.bin, empty, vocab.json")) << missing.status().message();
  // The model still runs.
  auto e = Execution::Create(*p, "main");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
}

TEST(Attachments, FileWithoutAttachmentsListsNone) {
  TempDir dir;
  const std::string out = dir.File("a.fcb");
  ASSERT_TRUE(Compile(kModel, Spec(), out).ok());
  auto p = Program::Load(out);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->attachments().empty());
  auto missing = (*p)->attachment("x");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), "it has none")) << missing.status().message();
}

TEST(Attachments, BadNamesAreRefusedBeforeAnythingIsWritten) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "the attachment name is empty"},
      {"a b", "byte \\x20 at position 1"},
      {"a=b", "byte \\x3d at position 1"},
      {std::string("a\x01", 2), "byte \\x01 at position 1"},
      {"caf\xc3\xa9", "byte \\xc3 at position 3"},
      {std::string(limits::kMaxAttachmentNameBytes + 1, 'n'), "256 bytes long, more than the limit of 255"},
  };
  for (const auto& [name, phrase] : bad) {
    SCOPED_TRACE(phrase);
    TempDir dir;
    CompileSpec spec = Spec();
    spec.attachments[name] = "x";
    const Status s = ValidateSpec(spec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s.message(), phrase)) << s.message();
    EXPECT_EQ(Compile(kModel, spec, dir.File("a.fcb")).status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(FileExists(dir.File("a.fcb")));
  }
  CompileSpec ok = Spec();
  ok.attachments[std::string(limits::kMaxAttachmentNameBytes, '~')] = "";
  EXPECT_TRUE(ValidateSpec(ok).ok());
}

TEST(Attachments, TooManyAreRefused) {
  CompileSpec spec = Spec();
  for (uint64_t i = 0; i <= limits::kMaxAttachments; ++i) spec.attachments["n" + std::to_string(i)] = "";
  const Status s = ValidateSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "4097 attachments, more than the limit of 4096")) << s.message();
  spec.attachments.erase("n0");
  EXPECT_TRUE(ValidateSpec(spec).ok());
}

TEST(Attachments, CorruptedBytesAreRefusedOnRead) {
  TempDir dir;
  CompileSpec spec = Spec();
  const std::string text = "a distinctive attachment text, found in the file by its bytes";
  spec.attachments = {{"notes", text}, {"other", "fine"}};
  const std::string out = dir.File("a.fcb");
  ASSERT_TRUE(Compile(kModel, spec, out).ok());
  std::vector<uint8_t> file = ReadBytes(out);
  auto at = std::search(file.begin(), file.end(), text.begin(), text.end());
  ASSERT_NE(at, file.end());
  at[5] ^= 0x01;
  WriteBytes(out, file);
  // Without the pool checksum at load only the attachment's own check sees it.
  LoadOptions options;
  options.verify_checksums = false;
  auto p = Program::Load(out, options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto got = (*p)->attachment("notes");
  EXPECT_EQ(got.status().code(), StatusCode::kCorruptFile);
  EXPECT_TRUE(Contains(got.status().message(), "attachment 'notes'")) << got.status().message();
  EXPECT_TRUE(Contains(got.status().message(), "checksum mismatch")) << got.status().message();
  EXPECT_EQ(std::string((*p)->attachment("other").value()), "fine");
  // With it (the pool check runs behind the load), the attachment's own check still answers.
  auto checked = Program::Load(out);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ((*checked)->attachment("notes").status().code(), StatusCode::kCorruptFile);
}

TEST(Attachments, CApiRoundTrip) {
  TempDir dir;
  const std::string vocab = dir.File("vocab.txt"), bin = dir.File("b.bin"), empty = dir.File("empty");
  WriteText(vocab, "hello\nworld\n");
  WriteText(bin, Binary());
  WriteText(empty, "");
  const std::string spec = "{\"targets\": \"generic\", \"input_shapes\": {\"input\": [1, 3, 64, 64]}, "
                           "\"attachments\": {\"vocab\": \"" + vocab + "\", \"b.bin\": \"" + bin +
                           "\", \"empty\": \"" + empty + "\"}}";
  const char* names[] = {"main"};
  const char* models[] = {kModel.c_str()};
  const std::string out = dir.File("c.fcb");
  fcb_status_t* s = fcb_compile(names, models, 1, spec.c_str(), out.c_str(), nullptr);
  ASSERT_EQ(fcb_status_code(s), FCB_STATUS_OK) << fcb_status_message(s);
  fcb_program_t* p = nullptr;
  s = fcb_program_load(out.c_str(), nullptr, 1, &p);
  ASSERT_EQ(fcb_status_code(s), FCB_STATUS_OK) << fcb_status_message(s);
  EXPECT_GE(fcb_c_api_version(), 1002);
  ASSERT_EQ(fcb_program_num_attachments(p), 3u);
  EXPECT_STREQ(fcb_program_attachment_name(p, 0), "b.bin");
  EXPECT_STREQ(fcb_program_attachment_name(p, 1), "empty");
  EXPECT_STREQ(fcb_program_attachment_name(p, 2), "vocab");
  EXPECT_EQ(fcb_program_attachment_name(p, 3), nullptr);
  EXPECT_EQ(fcb_program_num_attachments(nullptr), 0u);
  EXPECT_EQ(fcb_program_attachment_name(nullptr, 0), nullptr);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"b.bin", Binary()}, {"empty", ""}, {"vocab", "hello\nworld\n"}};
  for (const auto& [name, bytes] : want) {
    const void* data = nullptr;
    size_t size = 99;
    s = fcb_program_attachment(p, name.c_str(), &data, &size);
    ASSERT_EQ(fcb_status_code(s), FCB_STATUS_OK) << fcb_status_message(s);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(std::string(static_cast<const char*>(data), size), bytes) << name;
  }
  const void* data = nullptr;
  size_t size = 0;
  s = fcb_program_attachment(p, "nope", &data, &size);
  EXPECT_EQ(fcb_status_code(s), FCB_STATUS_NOT_FOUND);
  EXPECT_TRUE(Contains(fcb_status_message(s), "b.bin, empty, vocab")) << fcb_status_message(s);
  fcb_status_destroy(s);
  s = fcb_program_attachment(p, "vocab", nullptr, &size);
  EXPECT_EQ(fcb_status_code(s), FCB_STATUS_INVALID_ARGUMENT);
  fcb_status_destroy(s);
  s = fcb_program_attachment(p, nullptr, &data, &size);
  EXPECT_EQ(fcb_status_code(s), FCB_STATUS_INVALID_ARGUMENT);
  fcb_status_destroy(s);
  fcb_program_destroy(p);
}

TEST(Attachments, CliAttachAndSpecAndInspect) {
  TempDir dir;
  const std::string vocab = dir.File("vocab.txt"), cfg = dir.File("cfg.json"), empty = dir.File("empty");
  WriteText(vocab, "a\nb\n");
  WriteText(cfg, "{\"temperature\": 0.7}");
  WriteText(empty, "");
  const std::string spec_path = dir.File("spec.json");
  WriteText(spec_path, "{\"targets\": \"generic\", \"input_shapes\": {\"input\": [1, 3, 64, 64]}, "
                       "\"attachments\": {\"cfg\": \"" + cfg + "\", \"vocab\": \"" + empty + "\"}}");
  const std::string out = dir.File("a.fcb");
  // --attach adds to the spec's attachments and replaces one of the same name.
  auto r = RunCommand(CliPath() + " compile " + kModel + " -o " + out + " --spec " + spec_path + " --attach vocab=" +
                      vocab + " --attach none=" + empty);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto p = Program::Load(out);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->attachments(), (std::vector<std::string>{"cfg", "none", "vocab"}));
  EXPECT_EQ(std::string((*p)->attachment("vocab").value()), "a\nb\n");
  EXPECT_EQ(std::string((*p)->attachment("cfg").value()), "{\"temperature\": 0.7}");
  EXPECT_EQ((*p)->attachment("none").value().size(), 0u);

  // inspect, text and JSON: every attachment's name and size.
  r = RunCommand(CliPath() + " inspect " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "attachments: 3, 24 bytes")) << r.out;
  EXPECT_TRUE(Contains(r.out, "+ attachments 24 +")) << r.out;
  r = RunCommand(CliPath() + " inspect --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["attachments"].size(), 3u);
  EXPECT_EQ(j["attachments"][0]["name"], "cfg");
  EXPECT_EQ(j["attachments"][0]["size"], 20);
  EXPECT_EQ(j["attachments"][1]["name"], "none");
  EXPECT_EQ(j["attachments"][1]["size"], 0);
  EXPECT_EQ(j["attachments"][2]["name"], "vocab");
  EXPECT_EQ(j["attachments"][2]["size"], 4);
  EXPECT_EQ(j["layout"]["attachment_bytes"], 24);
  auto s = InspectFile(out);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->layout.header_bytes + s->layout.metadata_bytes + s->layout.metadata_padding_bytes +
                s->layout.pool_blob_bytes + s->layout.pool_padding_bytes,
            s->file_size);
  EXPECT_EQ(s->layout.pool_blob_bytes, s->weight_pool.bytes + 24);
}

TEST(Attachments, CliRefusalsWriteNothing) {
  TempDir dir;
  const std::string data = dir.File("data");
  WriteText(data, "x");
  const std::string out = dir.File("a.fcb");
  const std::string base = CliPath() + " compile " + kModel + " -o " + out + " --target generic";
  struct Case {
    std::string args, phrase;
  };
  const std::vector<Case> cases = {
      {" --attach v=" + dir.File("missing"), "file '" + dir.File("missing") + "' does not exist"},
      {" --attach v=" + dir.path(), "is not a regular file"},
      {" --attach novalue", "--attach"},
      {" --attach 'a b=" + data + "'", "byte \\x20 at position 1"},
      {" --attach v=" + data + " --attach v=" + data, "'v' is given twice with --attach"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    auto r = RunCommand(base + c.args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(Contains(r.err, c.phrase)) << r.err;
    EXPECT_FALSE(FileExists(out));
  }
  // The spec: a missing file, a duplicate key, a name refused before any file is read.
  const std::vector<Case> specs = {
      {"{\"m\": \"" + dir.File("missing") + "\"}", "does not exist"},
      {"{\"m\": \"" + data + "\", \"m\": \"" + data + "\"}", "'m' is given more than once in \"attachments\""},
      {"{\"a=b\": \"" + dir.File("missing") + "\"}", "byte \\x3d at position 1"},
      {"{\"m\": 3}", "must be a file path"},
      {"[\"m\"]", "\"attachments\" must be an object"},
  };
  for (const Case& c : specs) {
    SCOPED_TRACE(c.args);
    WriteText(dir.File("spec.json"), "{\"targets\": \"generic\", \"attachments\": " + c.args + "}");
    auto r = RunCommand(base.substr(0, base.find(" --target")) + " --spec " + dir.File("spec.json"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(Contains(r.err, c.phrase)) << r.err;
    EXPECT_FALSE(FileExists(out));
  }
}

}  // namespace
}  // namespace fcb
