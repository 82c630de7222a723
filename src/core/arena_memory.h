// Memory for activations: an execution's arena, and the operands that the
// kernel benchmarks and the step profiler give kernels, placed the same way.
//
// From 1 MiB on it is an anonymous mapping, 2 MiB aligned and offered to the
// kernel as transparent huge pages: a few page faults instead of hundreds on
// the first run, fewer TLB misses while activations stream through, and no
// memset (fresh anonymous memory is zero). Smaller blocks come from the heap,
// 64-byte aligned, and are cleared.
#pragma once

#include <cstdint>

namespace fcb {

class ArenaMemory {
 public:
  ArenaMemory() = default;
  ArenaMemory(const ArenaMemory&) = delete;
  ArenaMemory& operator=(const ArenaMemory&) = delete;
  ~ArenaMemory();

  // `bytes` zeroed bytes (replacing what was held); false when out of memory,
  // and then holds nothing.
  bool Allocate(uint64_t bytes);
  uint8_t* data() const { return data_; }

 private:
  void Release();

  uint8_t* data_ = nullptr;
  uint64_t mapped_ = 0;  // bytes mapped with mmap, or 0 when from the heap
};

}  // namespace fcb
