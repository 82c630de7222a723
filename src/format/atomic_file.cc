#include "format/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "format/io_fault.h"

namespace fcb::format {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

Status AtomicFile::Fail(const char* what, const std::string& subject, int err) {
  return IoError("writing '" + path_ + "': " + what + " '" + subject + "' failed: " +
                 std::strerror(err));
}

Status AtomicFile::Open() {
  std::string tmpl = DirName(path_) + "/." + BaseName(path_) + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = IoFaultHit() ? -1 : ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) return Fail("creating temporary file", tmpl, errno);
  fd_ = fd;
  temp_path_ = buf.data();
  // mkstemp makes 0600; an artifact is meant to be read by others (the runtime
  // may run as another user), so use the usual 0644.
  if (IoFaultHit() || ::fchmod(fd_, 0644) != 0) return Fail("chmod of", temp_path_, errno);
  return Status::Ok();
}

Status AtomicFile::Write(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; larger requests come back short.
    size_t chunk = std::min<size_t>(size, size_t{1} << 30);
    ssize_t n = IoFaultHit() ? -1 : ::write(fd_, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail("write to", temp_path_, errno);
    }
    if (n == 0) return Fail("write to", temp_path_, EIO);  // no progress: give up
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AtomicFile::WriteZeros(uint64_t size) {
  static const uint8_t kZeros[4096] = {};
  while (size > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, sizeof(kZeros)));
    FCB_RETURN_IF_ERROR(Write(kZeros, chunk));
    size -= chunk;
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (IoFaultHit() || ::fsync(fd_) != 0) return Fail("fsync of", temp_path_, errno);
  int fd = fd_;
  fd_ = -1;  // Linux releases the descriptor even when close reports an error
  if (IoFaultHit()) {
    int err = errno;
    ::close(fd);
    return Fail("close of", temp_path_, err);
  }
  if (::close(fd) != 0) return Fail("close of", temp_path_, errno);
  if (IoFaultHit() || ::rename(temp_path_.c_str(), path_.c_str()) != 0)
    return Fail("rename to the destination of", temp_path_, errno);
  committed_ = true;
  // Make the rename itself durable. Best effort: the new file is already in
  // place and complete, so a failure here must not be reported as "not written".
  int dir = ::open(DirName(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::Ok();
}

}  // namespace fcb::format
