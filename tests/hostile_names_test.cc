// Names that come from files (node, tensor, input, output and method names)
// never reach a terminal raw: fcb::EscapeForDisplay shows control characters,
// C1 controls and invalid UTF-8 as \xNN. Checked on the function itself, on
// the compile error of a model whose node name carries terminal escape
// sequences (API message and `fcb compile`), and on `fcb inspect` (text and
// JSON) and `fcb run` of a file whose method, input and output names do.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "fcb/fcb.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::CliPath;
using testing::RunCommand;
using testing::TempDir;

const std::string kEvilNode = "evil\x1b[31mRED\x1b[0m\x07";
const std::string kEvilNodeShown = "evil\\x1b[31mRED\\x1b[0m\\x07";

// The first byte that must not reach a terminal: a C0 control other than
// '\n', DEL, or a byte that is not part of well-formed UTF-8 (checked
// coarsely: any byte >= 0x80 must be inside a valid sequence). npos if none.
size_t FirstUnsafeByte(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n') || c == 0x7F) return i;
      ++i;
      continue;
    }
    const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    if (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F) return i;  // C1 control
    i += n;
  }
  return std::string::npos;
}

TEST(HostileNames, EscapeForDisplayShowsControlsAndInvalidUtf8AsHex) {
  EXPECT_EQ(EscapeForDisplay("conv_1/weight:0"), "conv_1/weight:0");
  EXPECT_EQ(EscapeForDisplay(kEvilNode), kEvilNodeShown);
  // Well-formed UTF-8 stays: Latin-1 range, CJK, a 4-byte emoji.
  EXPECT_EQ(EscapeForDisplay("na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82"),
            "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82");
  EXPECT_EQ(EscapeForDisplay(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeForDisplay("del\x7f"), "del\\x7f");
  EXPECT_EQ(EscapeForDisplay("csi\xc2\x9b" "2J"), "csi\\xc2\\x9b2J");   // C1 control U+009B
  EXPECT_EQ(EscapeForDisplay("lone\xff"), "lone\\xff");
  EXPECT_EQ(EscapeForDisplay("cont\x80x"), "cont\\x80x");
  EXPECT_EQ(EscapeForDisplay("trunc\xe2\x82"), "trunc\\xe2\\x82");
  EXPECT_EQ(EscapeForDisplay("overlong\xc0\xaf"), "overlong\\xc0\\xaf");
  EXPECT_EQ(EscapeForDisplay("overlong3\xe0\x80\xaf"), "overlong3\\xe0\\x80\\xaf");
  EXPECT_EQ(EscapeForDisplay("surrogate\xed\xa0\x80"), "surrogate\\xed\\xa0\\x80");
  EXPECT_EQ(EscapeForDisplay("big\xf4\x90\x80\x80"), "big\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(EscapeForDisplay("two\nlines\r"), "two\\x0alines\\x0d");
  EXPECT_EQ(EscapeForDisplay("two\nlines\r", /*keep_newlines=*/true), "two\nlines\\x0d");
  // Escaping is idempotent: a shown name shows the same again.
  EXPECT_EQ(EscapeForDisplay(kEvilNodeShown), kEvilNodeShown);
  // Status messages are escaped when made, newlines kept; Annotate too.
  Status s = Unsupported("node '" + kEvilNode + "'\nsecond line");
  EXPECT_EQ(s.message(), "node '" + kEvilNodeShown + "'\nsecond line");
  s.Annotate("method '\x1b[1m'");
  EXPECT_EQ(s.message(), "method '\\x1b[1m': node '" + kEvilNodeShown + "'\nsecond line");
}

void AddFloatValue(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

// x -> <op named `node`> -> y, with the given input and output names.
std::string WriteModel(const TempDir& dir, const std::string& file, const std::string& op, const std::string& node,
                       const std::string& in, const std::string& out) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("hostile");
  AddFloatValue(g->add_input(), in, {1, 4});
  auto* n = g->add_node();
  n->set_name(node);
  n->set_op_type(op);
  n->add_input(in);
  n->add_output(out);
  AddFloatValue(g->add_output(), out, {1, 4});
  const std::string path = dir.File(file);
  std::ofstream f(path, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&f));
  return path;
}

TEST(HostileNames, CompileErrorShowsTheNodeNameEscaped) {
  TempDir tmp;
  const std::string model = WriteModel(tmp, "evil.onnx", "NoSuchOp", kEvilNode, "x", "y");
  CompileSpec spec;
  spec.targets = {"generic"};
  auto r = Compile(model, spec, tmp.File("evil.fcb"));
  ASSERT_REFUSED(r, StatusCode::kUnsupported, "operator NoSuchOp is not supported (`fcb ops` lists those that are)");
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find(kEvilNodeShown), std::string::npos) << msg;
  EXPECT_EQ(FirstUnsafeByte(msg), std::string::npos) << msg;

  const auto cli = RunCommand(CliPath() + " compile " + model + " -o " + tmp.File("evil_cli.fcb") + " --target generic");
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.err.find(kEvilNodeShown), std::string::npos) << cli.err;
  EXPECT_EQ(FirstUnsafeByte(cli.err), std::string::npos) << "raw control bytes on stderr at "
                                                          << FirstUnsafeByte(cli.err);
  EXPECT_EQ(FirstUnsafeByte(cli.out), std::string::npos);
  EXPECT_FALSE(testing::FileExists(tmp.File("evil_cli.fcb")));
}

TEST(HostileNames, InspectAndRunShowMethodInputAndOutputNamesEscaped) {
  TempDir tmp;
  const std::string in = "in\x1b[2J", out = "out\x1b]0;pwned\x07\xff", node = "relu\xc2\x9b";
  const std::string method = "m\x1b[1m";
  const std::string model = WriteModel(tmp, "names.onnx", "Relu", node, in, out);
  CompileSpec spec;
  spec.targets = {"generic"};
  const std::string file = tmp.File("names.fcb");
  auto r = CompileMethods({{method, model}}, spec, file);
  ASSERT_TRUE(r.ok()) << r.status().message();

  const auto text = RunCommand(CliPath() + " inspect " + file);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("m\\x1b[1m"), std::string::npos) << text.out;
  EXPECT_EQ(FirstUnsafeByte(text.out), std::string::npos) << text.out;

  const auto json = RunCommand(CliPath() + " inspect --json " + file);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(FirstUnsafeByte(json.out), std::string::npos);
  const auto parsed = nlohmann::json::parse(json.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(parsed.is_discarded()) << json.out;
  EXPECT_NE(parsed.dump().find("m\\u001b[1m"), std::string::npos) << json.out;  // JSON's own escape

  const auto run = RunCommand(CliPath() + " run " + file + " --output-dir " + tmp.File("out"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(FirstUnsafeByte(run.out), std::string::npos) << run.out;
  EXPECT_EQ(FirstUnsafeByte(run.err), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("method: m\\x1b[1m"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("output: out\\x1b]0;pwned\\x07\\xff"), std::string::npos) << run.out;
  // The input was not given: the warning names it, escaped.
  EXPECT_NE(run.err.find("in\\x1b[2J"), std::string::npos) << run.err;

  const auto bench = RunCommand(CliPath() + " bench " + file + " --iterations 1");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_EQ(FirstUnsafeByte(bench.out), std::string::npos) << bench.out;
  const auto bench_json = RunCommand(CliPath() + " bench --json " + file + " --iterations 1");
  ASSERT_EQ(bench_json.exit_code, 0) << bench_json.err;
  EXPECT_FALSE(nlohmann::json::parse(bench_json.out, nullptr, false).is_discarded()) << bench_json.out;
}

}  // namespace
}  // namespace fcb
