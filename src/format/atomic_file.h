// Writes a file so that readers see either the old file or the complete new
// one, never a partial one: the bytes go to a temporary file in the same folder
// (so rename stays on one file system), which is fsynced and renamed over the
// destination only on Commit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "fcb/status.h"

namespace fcb::format {

// Owns the temporary file's descriptor and path. Destroying an AtomicFile that
// was not committed closes the descriptor and unlinks the temporary file, so
// every early return on an error path cleans up. Not thread-safe.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // `path`: the final destination
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Creates `.NAME.tmp.XXXXXX` beside the destination (mode 0644).
  Status Open();
  // Writes all `size` bytes (retrying short writes and EINTR).
  Status Write(const void* data, size_t size);
  Status WriteZeros(uint64_t size);
  // fsync, close, rename over the destination, then a best-effort fsync of the
  // folder. After an error the destination is untouched and the temp file gone.
  Status Commit();

  const std::string& temp_path() const { return temp_path_; }

 private:
  Status Fail(const char* what, const std::string& subject, int err);

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace fcb::format
