// Byte-level BPE detokenisation (GPT-2 style, as Whisper's tokenizer uses):
// token ids -> UTF-8 text.
//
// A byte-level BPE vocabulary (vocab.json: token string -> id) spells every
// byte with one printable character (ByteToUnicode: the printable Latin-1
// bytes stand for themselves, the other 68 bytes -- controls, space, DEL, NBSP,
// soft hyphen -- become U+0100 onwards, so a space is 'Ġ' U+0120 and a newline
// 'Ċ' U+010A). Decoding maps each token back to its bytes and joins them; a
// character can be split across tokens, so UTF-8 is only checked on the
// joined bytes, where an invalid or truncated sequence becomes U+FFFD (as the
// reference tokenizers' errors="replace" does).
//
// Special tokens (<|endoftext|>, <|startoftranscript|>, languages, tasks,
// timestamps) are skipped: every id at or above the first special id is one
// (Whisper's multilingual vocabulary: 50257, the id of <|endoftext|>, which
// vocab.json holds; the others, up to 51864, come from added_tokens and are
// not in vocab.json). An id below it that the vocabulary lacks is an error.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fcb/status.h"

namespace fcb::transcribe {

// GPT-2's byte -> character table (code points).
const std::array<char32_t, 256>& ByteToUnicode();

class Detokenizer {
 public:
  // `vocab_json`: the text of vocab.json (an object of token string -> id).
  // `first_special`: ids >= it are special and skipped; -1 takes the id of
  // "<|endoftext|>" in the vocabulary, or one past the largest id if it has
  // none. Refused: malformed JSON (with the byte offset), a value that is not
  // an id (0 to 2^31 - 1), two tokens with one id, a token of an ordinary id
  // with a character that stands for no byte.
  static Result<Detokenizer> FromVocabJson(std::string_view vocab_json, int64_t first_special = -1);
  // Reads vocab.json from `path`; errors name the path.
  static Result<Detokenizer> Load(const std::string& path, int64_t first_special = -1);

  // The UTF-8 text of `ids`, special ids skipped. NotFound for a negative id
  // or an ordinary id that the vocabulary does not hold.
  Result<std::string> Decode(const std::vector<int64_t>& ids) const;

  bool IsSpecial(int64_t id) const { return id >= first_special_; }
  int64_t first_special() const { return first_special_; }
  // The bytes of an ordinary token (empty for an id the vocabulary lacks).
  const std::string& TokenBytes(int64_t id) const;

 private:
  std::vector<std::string> bytes_;  // by id; ids at or above first_special_ are not kept
  std::vector<bool> present_;
  int64_t first_special_ = 0;
};

// `bytes` as well-formed UTF-8: each invalid, overlong, surrogate or
// truncated sequence replaced by U+FFFD.
std::string ReplaceInvalidUtf8(std::string_view bytes);

}  // namespace fcb::transcribe
