#include "core/arena_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace fcb {

ArenaMemory::~ArenaMemory() { Release(); }

void ArenaMemory::Release() {
  if (mapped_ != 0) munmap(data_, mapped_);
  else std::free(data_);
  data_ = nullptr;
  mapped_ = 0;
}

bool ArenaMemory::Allocate(uint64_t bytes) {
  Release();
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  if (bytes < (uint64_t{1} << 20)) {
    data_ = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (data_) std::memset(data_, 0, bytes);
    return data_ != nullptr;
  }
  const uint64_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  // Trim to a 2 MiB-aligned run of `size` bytes.
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHuge - 1) / kHuge * kHuge;
  if (aligned > start) munmap(p, aligned - start);
  const uintptr_t tail = start + size + kHuge - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  data_ = reinterpret_cast<uint8_t*>(aligned);
  mapped_ = size;
  return true;
}

}  // namespace fcb
