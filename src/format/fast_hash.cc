#include "format/fast_hash.h"

#include <xxhash.h>

#include "core/target.h"

namespace fcb::format {

// Defined in fast_hash_avx2.cc, which is compiled with -mavx2 and only called
// when the host can run x86-64-v3.
uint64_t Xxh3_64Avx2(const void* data, size_t size);

uint64_t Xxh3_64(const void* data, size_t size) {
#if defined(__x86_64__)
  static const bool avx2 = HostCanRun(TargetId::kX86_64_V3);
  if (avx2) return Xxh3_64Avx2(data, size);
#endif
  return XXH3_64bits(data, size);
}

}  // namespace fcb::format
