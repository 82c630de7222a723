// Byte-level BPE detokenisation (bpe.h) on a hand-written vocabulary: the
// byte table against GPT-2's definition, spaces (Ġ), newlines (Ċ), characters
// split across tokens, invalid UTF-8, special ids, and every refusal.
#include "bpe.h"

#include <gtest/gtest.h>

#include <set>

namespace fcb::transcribe {
namespace {

// Tokens as a byte-level BPE vocabulary spells them (UTF-8 source):
//   "Ã" + "©" = bytes C3 A9 = "é"; "ĠðŁ" + "ĺĢ" = bytes 20 F0 9F 98 80 = " 😀".
constexpr const char* kVocab = R"({
  "Hello": 0, "Ġworld": 1, "Ċ": 2, "Ã": 3, "©": 4, "ĠðŁ": 5, "ĺĢ": 6, "<|endoftext|>": 7
})";

Detokenizer Make(const char* json = kVocab, int64_t first_special = -1) {
  auto d = Detokenizer::FromVocabJson(json, first_special);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? std::move(d).value() : Detokenizer::FromVocabJson("{}").value();
}

std::string Text(const Detokenizer& d, const std::vector<int64_t>& ids) {
  auto r = d.Decode(ids);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : "";
}

TEST(Bpe, ByteTableIsGpt2s) {
  const auto& t = ByteToUnicode();
  // Bytes that stand for themselves.
  EXPECT_EQ(t['!'], U'!');
  EXPECT_EQ(t['~'], U'~');
  EXPECT_EQ(t[0xA1], U'\u00A1');
  EXPECT_EQ(t[0xAC], U'\u00AC');
  EXPECT_EQ(t[0xAE], U'\u00AE');
  EXPECT_EQ(t[0xFF], U'\u00FF');
  // The others, in byte order from U+0100: 0x00..0x20, 0x7F..0xA0, 0xAD.
  EXPECT_EQ(t[0x00], U'\u0100');
  EXPECT_EQ(t['\n'], U'\u010A');  // Ċ
  EXPECT_EQ(t[' '], U'\u0120');   // Ġ
  EXPECT_EQ(t[0x7F], U'\u0121');
  EXPECT_EQ(t[0x9F], U'\u0141');  // Ł
  EXPECT_EQ(t[0xA0], U'\u0142');
  EXPECT_EQ(t[0xAD], U'\u0143');
  std::set<char32_t> distinct(t.begin(), t.end());
  EXPECT_EQ(distinct.size(), 256u);
}

TEST(Bpe, DecodesSpacesNewlinesAndSplitCharacters) {
  const Detokenizer d = Make();
  EXPECT_EQ(Text(d, {0, 1, 2, 3, 4}), "Hello world\n\u00E9");
  EXPECT_EQ(Text(d, {0, 5, 6}), "Hello \U0001F600");
  EXPECT_EQ(Text(d, {}), "");
  EXPECT_EQ(d.TokenBytes(3), "\xC3");
}

TEST(Bpe, InvalidUtf8BecomesReplacementCharacters) {
  const Detokenizer d = Make();
  EXPECT_EQ(Text(d, {3}), "\uFFFD");           // C3 alone: truncated
  EXPECT_EQ(Text(d, {4, 0}), "\uFFFDHello");   // A9 alone: a stray continuation byte
  EXPECT_EQ(Text(d, {5, 0}), " \uFFFD\uFFFDHello");  // F0 9F, then no more continuation bytes
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\xAF"), "\uFFFD\uFFFD");  // overlong '/'
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // a surrogate
  EXPECT_EQ(ReplaceInvalidUtf8("a\xE2\x82\xAC"), "a\u20AC");
}

TEST(Bpe, SkipsSpecialIds) {
  const Detokenizer d = Make();
  EXPECT_EQ(d.first_special(), 7);
  EXPECT_TRUE(d.IsSpecial(7));
  EXPECT_TRUE(d.IsSpecial(51864));
  EXPECT_FALSE(d.IsSpecial(6));
  // <|endoftext|>, and ids past the vocabulary (Whisper's languages, tasks, timestamps).
  EXPECT_EQ(Text(d, {7, 50, 0, 51864, 1, 7}), "Hello world");
  // An explicit first special id.
  const Detokenizer d5 = Make(kVocab, 5);
  EXPECT_EQ(Text(d5, {0, 5, 6, 1}), "Hello world");
  // Without <|endoftext|>: every id of the vocabulary is ordinary.
  const Detokenizer plain = Make(R"({"a": 0, "b": 1})");
  EXPECT_EQ(plain.first_special(), 2);
  EXPECT_EQ(Text(plain, {1, 0, 2}), "ba");
}

TEST(Bpe, RefusesUnknownIds) {
  const Detokenizer d = Make(R"({"a": 0, "c": 2, "<|endoftext|>": 3})");
  auto r = d.Decode({0, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("token 1: id 1 is not in the vocabulary"), std::string::npos)
      << r.status().message();
  r = d.Decode({-1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("id -1 is negative"), std::string::npos) << r.status().message();
}

void ExpectRefused(const char* json, const std::string& phrase) {
  auto d = Detokenizer::FromVocabJson(json);
  ASSERT_FALSE(d.ok()) << json;
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find(phrase), std::string::npos) << d.status().message();
}

TEST(Bpe, RefusesBadVocabularies) {
  ExpectRefused(R"({"a": 0,)", "malformed at byte offset");
  ExpectRefused(R"(["a"])", "not an object");
  ExpectRefused(R"({"a": "0"})", "token \"a\" has the value \"0\", not an id");
  ExpectRefused(R"({"a": -3})", "not an id");
  ExpectRefused(R"({"a": 1.5})", "not an id");
  ExpectRefused(R"({"a": 0, "b": 0})", "id 0 belongs to two tokens");
  ExpectRefused(R"({"a": 0, "\u4e00": 1})", "(id 1) holds U+4E00, which stands for no byte");
  // A space is spelt Ġ in a byte-level vocabulary; a raw space stands for no byte.
  ExpectRefused(R"({"a b": 0})", "holds U+0020");
  // Special tokens are not decoded, so their spelling is not checked.
  EXPECT_TRUE(Detokenizer::FromVocabJson(R"({"a": 0, "<|endoftext|>": 1, "<|\u4e00|>": 2})").ok());
}

TEST(Bpe, LoadNamesThePath) {
  auto d = Detokenizer::Load("/nonexistent/vocab.json");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("/nonexistent/vocab.json"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace fcb::transcribe
