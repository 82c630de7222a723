// XXH3-64 of large buffers with the widest vector unit the host has.
//
// Debian's libxxhash is built for baseline x86-64 (SSE2). Verifying the weight
// pool is the dominant cost of loading a program, so the loader hashes with an
// AVX2 build of the same algorithm when the host runs x86-64-v3; the result is
// identical by definition of XXH3 (the vector width is not part of the hash).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fcb::format {

uint64_t Xxh3_64(const void* data, size_t size);

}  // namespace fcb::format
