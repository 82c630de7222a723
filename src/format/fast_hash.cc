#include "format/fast_hash.h"

#include <xxhash.h>

#include <algorithm>
#include <system_error>
#include <thread>

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

namespace {

uint64_t HashOfChunkHashes(const std::vector<uint64_t>& hashes) {
  std::vector<uint8_t> le(hashes.size() * 8);
  for (size_t i = 0; i < hashes.size(); ++i)
    for (int b = 0; b < 8; ++b) le[i * 8 + b] = static_cast<uint8_t>(hashes[i] >> (8 * b));
  return XXH3_64bits(le.data(), le.size());
}

}  // namespace

uint64_t PoolHash(const void* data, size_t size, unsigned max_threads) {
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t chunks = (size + kPoolHashChunk - 1) / kPoolHashChunk;
  std::vector<uint64_t> hashes(chunks);
  auto hash_range = [&](size_t begin, size_t end) {
    for (size_t c = begin; c < end; ++c) {
      const size_t off = c * kPoolHashChunk;
      hashes[c] = Xxh3_64(p + off, std::min(kPoolHashChunk, size - off));
    }
  };
  unsigned threads = max_threads ? max_threads : std::min(8u, std::thread::hardware_concurrency());
  // Below ~4 chunks per thread the start-up of a thread (~50 us) is not repaid.
  threads = static_cast<unsigned>(std::clamp<size_t>(chunks / 4, 1, std::max(1u, threads)));
  std::vector<std::thread> helpers;
  size_t next = 0;  // contiguous ranges: each thread streams its own part of memory
  for (unsigned t = 1; t < threads; ++t) {
    const size_t begin = chunks * t / threads, end = chunks * (t + 1) / threads;
    try {
      helpers.emplace_back(hash_range, begin, end);
    } catch (const std::system_error&) {
      break;  // no thread: the caller hashes what was not handed out
    }
    next = t;
  }
  // The calling thread takes range 0 and every range no helper took.
  hash_range(0, chunks / threads);
  if (next + 1 < threads) hash_range(chunks * (next + 1) / threads, chunks);
  for (std::thread& h : helpers) h.join();
  return HashOfChunkHashes(hashes);
}

PoolHasher::PoolHasher() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

PoolHasher::~PoolHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void PoolHasher::FinishChunk() {
  auto* s = static_cast<XXH3_state_t*>(state_);
  chunk_hashes_.push_back(XXH3_64bits_digest(s));
  XXH3_64bits_reset(s);
  in_chunk_ = 0;
}

void PoolHasher::Update(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const size_t n = std::min(size, kPoolHashChunk - in_chunk_);
    XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), p, n);
    in_chunk_ += n, p += n, size -= n;
    if (in_chunk_ == kPoolHashChunk) FinishChunk();
  }
}

uint64_t PoolHasher::Digest() {
  if (in_chunk_ > 0) FinishChunk();
  return HashOfChunkHashes(chunk_hashes_);
}

}  // namespace fcb::format
