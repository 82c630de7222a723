#include "bpe.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace fcb::transcribe {
namespace {

constexpr int64_t kMaxId = 0x7FFFFFFF;
constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 if invalid or truncated.
size_t Utf8Sequence(std::string_view s, size_t i, char32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n;
  char32_t v, min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = v << 6 | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

std::string Hex(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

}  // namespace

const std::array<char32_t, 256>& ByteToUnicode() {
  // GPT-2's definition: the bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF
  // map to the same code point; the rest, in byte order, to 256, 257, ...
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

std::string ReplaceInvalidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    char32_t cp;
    const size_t n = Utf8Sequence(bytes, i, &cp);
    if (n == 0) {
      out += kReplacement;
      ++i;  // resynchronise on the next byte
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

Result<Detokenizer> Detokenizer::FromVocabJson(std::string_view vocab_json, int64_t first_special) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(vocab_json.begin(), vocab_json.end());
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidArgument("vocabulary JSON is malformed at byte offset " + std::to_string(e.byte) + ": " + e.what());
  }
  if (!j.is_object()) return InvalidArgument("vocabulary JSON is not an object of token -> id");
  std::unordered_map<char32_t, int> unicode_to_byte;
  for (int b = 0; b < 256; ++b) unicode_to_byte[ByteToUnicode()[b]] = b;

  int64_t max_id = -1, eot = -1;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > kMaxId)
      return InvalidArgument("vocabulary: token \"" + EscapeForDisplay(it.key()) + "\" has the value " +
                             EscapeForDisplay(it.value().dump()) + ", not an id from 0 to 2^31 - 1");
    const int64_t id = it.value().get<int64_t>();
    max_id = std::max(max_id, id);
    if (it.key() == "<|endoftext|>") eot = id;
  }
  Detokenizer d;
  d.first_special_ = first_special >= 0 ? first_special : eot >= 0 ? eot : max_id + 1;
  const int64_t kept = std::min(max_id + 1, d.first_special_);
  d.bytes_.resize(static_cast<size_t>(std::max<int64_t>(kept, 0)));
  d.present_.resize(d.bytes_.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id >= d.first_special_) continue;
    if (d.present_[id])
      return InvalidArgument("vocabulary: id " + std::to_string(id) + " belongs to two tokens, \"" +
                             EscapeForDisplay(d.bytes_[id]) + "\" (as bytes) and \"" + EscapeForDisplay(it.key()) +
                             "\"");
    const std::string& key = it.key();
    std::string bytes;
    for (size_t i = 0; i < key.size();) {
      char32_t cp;
      const size_t n = Utf8Sequence(key, i, &cp);
      auto b = n ? unicode_to_byte.find(cp) : unicode_to_byte.end();
      if (b == unicode_to_byte.end())
        return InvalidArgument("vocabulary: token \"" + EscapeForDisplay(key) + "\" (id " + std::to_string(id) +
                               ") holds " + (n ? Hex(cp) : std::string("invalid UTF-8")) +
                               ", which stands for no byte in byte-level BPE");
      bytes += static_cast<char>(b->second);
      i += n;
    }
    d.bytes_[id] = std::move(bytes);
    d.present_[id] = true;
  }
  return d;
}

Result<Detokenizer> Detokenizer::Load(const std::string& path, int64_t first_special) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open " + path + ": " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto r = FromVocabJson(text, first_special);
  if (!r.ok()) return Status(r.status()).Annotate(path);
  return r;
}

const std::string& Detokenizer::TokenBytes(int64_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < static_cast<int64_t>(bytes_.size()) ? bytes_[id] : kEmpty;
}

Result<std::string> Detokenizer::Decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0) return NotFound("token " + std::to_string(i) + ": id " + std::to_string(id) + " is negative");
    if (IsSpecial(id)) continue;
    if (id >= static_cast<int64_t>(present_.size()) || !present_[id])
      return NotFound("token " + std::to_string(i) + ": id " + std::to_string(id) + " is not in the vocabulary");
    bytes += bytes_[id];
  }
  return ReplaceInvalidUtf8(bytes);
}

}  // namespace fcb::transcribe
