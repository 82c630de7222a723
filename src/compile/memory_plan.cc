#include "compile/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace fcb::compile {

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers) {
  constexpr uint64_t kAlign = 64;
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    const auto& buf = buffers[idx];
    const uint64_t size = (std::max<uint64_t>(buf.bytes, 1) + kAlign - 1) / kAlign * kAlign;
    // Conflicting placed buffers sorted by offset; take the first gap that fits.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t p : placed) {
      const auto& o = buffers[p];
      if (o.first <= buf.last && buf.first <= o.last) {
        const uint64_t psize = (std::max<uint64_t>(o.bytes, 1) + kAlign - 1) / kAlign * kAlign;
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + psize);
      }
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size <= b) break;
      offset = std::max(offset, e);
    }
    plan.offsets[idx] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(idx);
  }
  return plan;
}

}  // namespace fcb::compile
