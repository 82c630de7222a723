// A read-only, private memory mapping of a whole file, unmapped on destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fcb/status.h"

namespace fcb::format {

// Immutable after Open; safe to read from many threads. The bytes stay valid
// until the MappedFile is destroyed. An empty file has data() == nullptr.
class MappedFile {
 public:
  // NotFound when `path` does not exist; IoError (naming the path and the OS
  // error) when it cannot be opened, is not a regular file, or cannot be mapped.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  uint64_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace fcb::format
