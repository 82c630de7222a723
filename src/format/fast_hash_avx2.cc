// AVX2 build of XXH3-64 (see fast_hash.h). This translation unit is compiled
// with -mavx2; everything in it is static inline except the one entry point.
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace fcb::format {

uint64_t Xxh3_64Avx2(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace fcb::format
#endif
