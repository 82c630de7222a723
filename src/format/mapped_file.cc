#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "format/io_fault.h"

namespace fcb::format {
namespace {

// Closes a descriptor on every path; the mapping keeps the file alive after.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

Status OsError(const std::string& path, const char* what, int err) {
  std::string msg = "fcb file '" + path + "': " + what + " failed: " + std::strerror(err);
  return err == ENOENT ? NotFound(std::move(msg)) : IoError(std::move(msg));
}

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = IoFaultHit() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(path, "open", errno);
  FdCloser closer{fd};
  struct stat st;
  if (IoFaultHit() || ::fstat(fd, &st) != 0) return OsError(path, "fstat", errno);
  if (S_ISDIR(st.st_mode)) return IoError("fcb file '" + path + "': is a directory");
  if (!S_ISREG(st.st_mode)) return IoError("fcb file '" + path + "': not a regular file");
  if (static_cast<uint64_t>(st.st_size) > SIZE_MAX)
    return IoError("fcb file '" + path + "': too large to map on this platform");

  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ == 0) return file;  // mmap refuses length 0; the loader reports it
  // MAP_PRIVATE + PROT_READ: the weights are used in place and never written.
  // MAP_POPULATE maps every page up front: the checksum pass reads them all
  // anyway, and one bulk fault is far cheaper than one fault per page.
  void* addr = IoFaultHit() ? MAP_FAILED
                            : ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED) return OsError(path, "mmap", errno);
  file->addr_ = addr;
  return file;
}

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

}  // namespace fcb::format
