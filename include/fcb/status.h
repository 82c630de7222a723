// fcb — status and result types used across every public API.
//
// The runtime and compiler return Status / Result<T> instead of throwing: success
// costs one null pointer, and an error carries a code plus a message that gains
// context ("node 'conv1' (Conv): ...", "target x86-64-v3: ...") as it travels up.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "fcb/export.h"

namespace fcb {

// Error families. Each code is documented once here.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // caller passed something malformed (bad spec, bad shape, bad flag)
  kNotFound = 2,          // a named thing (file, method, input, target) does not exist
  kUnsupported = 3,       // valid request fcb does not implement (operator, dtype, attribute)
  kIoError = 4,           // the OS refused a read, write, rename, mmap, ...
  kCorruptFile = 5,       // an .fcb (or .onnx/.npy) failed a structural or checksum check
  kResourceExhausted = 6, // allocation failure
  kUnavailable = 7,       // the host cannot run what was asked (forced target, no runnable target)
  kInternal = 8,          // a bug in fcb
};

FCB_API const char* StatusCodeName(StatusCode code);

// `text` made safe to print to a terminal: every byte that is a C0 control
// character (except '\n' when keep_newlines), DEL, part of a C1 control
// (U+0080..U+009F) or not part of well-formed UTF-8 appears as "\xNN"; all
// else is kept. Names from files (node, tensor, input, output, method) go
// through this wherever fcb prints them, so a hostile model cannot send
// terminal control sequences; Status messages are escaped when made
// (keeping newlines, which multi-line messages use).
FCB_API std::string EscapeForDisplay(std::string_view text, bool keep_newlines = false);

class [[nodiscard]] FCB_API Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }
  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;

  // Prefixes context: Annotate("method 'decode'") turns "x" into "method 'decode': x".
  Status& Annotate(const std::string& context) &;
  Status&& Annotate(const std::string& context) &&;

  std::string ToString() const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

// Helpers that read like the error family they create.
FCB_API Status InvalidArgument(std::string msg);
FCB_API Status NotFound(std::string msg);
FCB_API Status Unsupported(std::string msg);
FCB_API Status IoError(std::string msg);
FCB_API Status CorruptFile(std::string msg);
FCB_API Status ResourceExhausted(std::string msg);
FCB_API Status Unavailable(std::string msg);
FCB_API Status Internal(std::string msg);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}             // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}      // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  Status TakeStatus() { return ok() ? Status() : std::move(std::get<Status>(v_)); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace fcb

#define FCB_CONCAT_INNER(a, b) a##b
#define FCB_CONCAT(a, b) FCB_CONCAT_INNER(a, b)

#define FCB_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::fcb::Status fcb_status_ = (expr);           \
    if (!fcb_status_.ok()) return fcb_status_;    \
  } while (0)

#define FCB_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.TakeStatus();         \
  lhs = std::move(tmp).value()

#define FCB_ASSIGN_OR_RETURN(lhs, expr) \
  FCB_ASSIGN_OR_RETURN_IMPL(FCB_CONCAT(fcb_result_, __LINE__), lhs, expr)
