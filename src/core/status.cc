#include "fcb/status.h"

namespace fcb {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kCorruptFile: return "corrupt file";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

namespace {

bool Continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs,
// no surrogates, nothing past U+10FFFF), or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  const size_t left = s.size() - i;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && Continuation(b(1)) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !Continuation(b(1)) || !Continuation(b(2))) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !Continuation(b(1)) || !Continuation(b(2)) || !Continuation(b(3))) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) > 0x8F) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

void AppendHex(std::string& out, unsigned char c) {
  static const char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

}  // namespace

std::string EscapeForDisplay(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(c == '\n' && keep_newlines)) || c == 0x7F) {
        AppendHex(out, c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t n = Utf8Length(text, i);
    // C1 controls (U+0080..U+009F: 0xC2 0x80..0x9F) act on terminals too.
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (n == 0 || c1) {
      for (size_t k = 0; k < (c1 ? 2 : 1); ++k) AppendHex(out, static_cast<unsigned char>(text[i + k]));
      i += c1 ? 2 : 1;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

Status::Status(StatusCode code, std::string message)
    : state_(code == StatusCode::kOk ? nullptr
                                     : new State{code, EscapeForDisplay(message, /*keep_newlines=*/true)}) {}

Status::Status(const Status& other)
    : state_(other.state_ ? new State(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_.reset(other.state_ ? new State(*other.state_) : nullptr);
  return *this;
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

Status& Status::Annotate(const std::string& context) & {
  if (state_) state_->message = EscapeForDisplay(context, true) + ": " + state_->message;
  return *this;
}

Status&& Status::Annotate(const std::string& context) && {
  if (state_) state_->message = EscapeForDisplay(context, true) + ": " + state_->message;
  return std::move(*this);
}

std::string Status::ToString() const { return ok() ? "ok" : state_->message; }

Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status Unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
Status IoError(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
Status CorruptFile(std::string m) { return Status(StatusCode::kCorruptFile, std::move(m)); }
Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

}  // namespace fcb
