// Static memory planning: every activation gets an offset in one arena.
#pragma once

#include <cstdint>
#include <vector>

namespace fcb::compile {

struct BufferLifetime {
  uint64_t bytes = 0;
  int first = 0;  // step that writes it (-1 for method inputs)
  int last = 0;   // last step that reads it (INT_MAX-like for method outputs)
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // per buffer, 64-byte aligned
  uint64_t arena_bytes = 0;
};

// Greedy by size: largest buffers first, each at the lowest offset that does
// not overlap a placed buffer whose lifetime intersects its own.
MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers);

}  // namespace fcb::compile
