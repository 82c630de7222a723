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

Status::Status(StatusCode code, std::string message)
    : state_(code == StatusCode::kOk ? nullptr : new State{code, std::move(message)}) {}

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
  if (state_) state_->message = context + ": " + state_->message;
  return *this;
}

Status&& Status::Annotate(const std::string& context) && {
  if (state_) state_->message = context + ": " + state_->message;
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
