// XXH3-64 of large buffers with the widest vector unit the host has, and the
// weight pool's checksum built on it.
//
// Debian's libxxhash is built for baseline x86-64 (SSE2). Verifying the weight
// pool is the dominant cost of loading a program, so the loader hashes with an
// AVX2 build of the same algorithm when the host runs x86-64-v3; the result is
// identical by definition of XXH3 (the vector width is not part of the hash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fcb::format {

uint64_t Xxh3_64(const void* data, size_t size);

// The pool checksum (format version 2): the pool is cut into chunks of
// kPoolHashChunk bytes (the last may be shorter), each chunk is hashed with
// XXH3-64, and the checksum is XXH3-64 of those chunk hashes as little-endian
// u64s. One XXH3 stream is sequential by construction; chunks let the loader
// verify a pool on every core (a cold start of a 54 MB model spends 4.5 ms
// reading it at one core's memory bandwidth, ~2.3 ms on two).
inline constexpr size_t kPoolHashChunk = size_t{1} << 20;

// Checksum of `size` bytes in memory, hashing chunks on up to `max_threads`
// threads (0: one per hardware thread, at most 8). Falls back to the calling
// thread alone if a thread cannot be started.
uint64_t PoolHash(const void* data, size_t size, unsigned max_threads = 0);

// The same checksum over bytes fed in pieces (the writer streams the pool).
class PoolHasher {
 public:
  PoolHasher();
  ~PoolHasher();
  PoolHasher(const PoolHasher&) = delete;
  PoolHasher& operator=(const PoolHasher&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest();

 private:
  void FinishChunk();
  void* state_;        // XXH3_state_t of the current chunk
  size_t in_chunk_ = 0;
  std::vector<uint64_t> chunk_hashes_;
};

}  // namespace fcb::format
