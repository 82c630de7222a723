// Helpers shared by the format tests (header only: not part of the library).
// The byte layout here is written from the documentation in fcb_file.h, not
// from the writer's code, so the tests check the writer against the spec.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "format/fcb_file.h"
#include "test_util.h"

namespace fcb::format::test {

// The file helpers of tests/test_util.h these tests use.
using ::fcb::testing::ReadBytes;
using ::fcb::testing::TempDir;
using ::fcb::testing::WriteBytes;

// Documented header offsets (fcb_file.h).
inline constexpr size_t kHdrSize = 128, kVersionAt = 8, kHdrSizeAt = 12, kEndianAt = 16,
                        kProducerAt = 24, kFileSizeAt = 56, kMetaOffAt = 64, kMetaSizeAt = 72,
                        kMetaHashAt = 80, kPoolOffAt = 88, kPoolSizeAt = 96, kPoolHashAt = 104,
                        kHdrHashAt = 120;

inline uint64_t Get64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
inline uint32_t Get32(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint32_t>(b[at] | b[at + 1] << 8 | b[at + 2] << 16 |
                               static_cast<uint32_t>(b[at + 3]) << 24);
}
inline void Put64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void Put32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the metadata, pool and header checksums of a file image, so that
// only the structural checks can catch a hostile edit.
// The pool checksum as fcb_file.h documents it (format version 2), written
// out independently of fast_hash.cc with plain libxxhash calls: XXH3-64 of
// the little-endian XXH3-64s of 1 MiB chunks.
inline uint64_t RefPoolHash(const uint8_t* p, uint64_t size) {
  std::vector<uint8_t> le;
  for (uint64_t off = 0; off < size; off += uint64_t{1} << 20) {
    const uint64_t h = XXH3_64bits(p + off, std::min<uint64_t>(uint64_t{1} << 20, size - off));
    for (int i = 0; i < 8; ++i) le.push_back(static_cast<uint8_t>(h >> (8 * i)));
  }
  return XXH3_64bits(le.data(), le.size());
}

inline void Rehash(std::vector<uint8_t>& b) {
  uint64_t mo = Get64(b, kMetaOffAt), ms = Get64(b, kMetaSizeAt);
  uint64_t po = Get64(b, kPoolOffAt), ps = Get64(b, kPoolSizeAt);
  // Sections out of bounds (hostile tests) keep their old hash.
  auto inside = [&](uint64_t off, uint64_t size) { return off <= b.size() && size <= b.size() - off; };
  if (inside(mo, ms)) Put64(b, kMetaHashAt, XXH3_64bits(b.data() + mo, ms));
  if (inside(po, ps)) Put64(b, kPoolHashAt, RefPoolHash(b.data() + po, ps));
  Put64(b, kHdrHashAt, XXH3_64bits(b.data(), kHdrHashAt));
}

// Deterministic pseudo-random bytes.
inline std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// Blobs of the sample file: small, large (>= 64 KiB), small, large, tiny.
inline std::vector<std::vector<uint8_t>> SampleBlobs() {
  return {Bytes(100, 1), Bytes(65536 + 123, 2), Bytes(1000, 3), Bytes(70000, 4), Bytes(3, 5)};
}

inline AttrDesc Attr(std::string name, std::vector<int64_t> ints, std::vector<float> floats,
                     std::string str) {
  AttrDesc a;
  a.name = std::move(name);
  a.ints = std::move(ints);
  a.floats = std::move(floats);
  a.str = std::move(str);
  return a;
}

inline TensorDesc Tensor(std::string name, std::vector<int64_t> shape, Storage storage,
                         uint64_t offset, int32_t blob, int32_t dtype = 1) {
  TensorDesc t;
  t.name = std::move(name);
  t.dtype = static_cast<DType>(dtype);
  t.shape = std::move(shape);
  t.storage = storage;
  t.offset = offset;
  t.blob = blob;
  return t;
}

// Two contexts of one method, attributes of every kind, weights shared.
inline FileDesc SampleDesc(WeightPoolBuilder& pool) {
  std::vector<int32_t> ids;
  for (const auto& b : SampleBlobs()) ids.push_back(pool.Add(b.data(), b.size()));
  FileDesc d;
  d.producer = "fcb 0.1.0";
  d.plan_version = 7;
  for (const char* target : {"generic", "x86-64-v3"}) {
    ContextDesc c;
    c.method = "main";
    c.target = target;
    c.options = std::string("{\"optimization_level\":") + (target[0] == 'g' ? "1" : "3") + "}";
    c.tensors.push_back(Tensor("input", {1, 3, 8, 8}, Storage::kArena, 0, -1));
    c.tensors.push_back(Tensor("conv.w", {4, 3, 3, 3}, Storage::kWeight, 0, ids[1]));
    c.tensors.push_back(Tensor("conv.b", {4}, Storage::kWeight, 0, ids[0]));
    c.tensors.push_back(Tensor("fc.w", {16, 4}, Storage::kWeight, 0, ids[3]));
    c.tensors.push_back(Tensor("shape", {}, Storage::kWeight, 0, ids[4], 7));
    c.tensors.push_back(Tensor("mid", {1, 4, 8, 8}, Storage::kArena, 768, -1));
    c.tensors.push_back(Tensor("output", {1, 16}, Storage::kArena, 1792, -1));
    StepDesc conv;
    conv.op = "Conv";  // any name: the format layer does not interpret steps
    conv.node = "conv1";
    conv.inputs = {0, 1, 2};
    conv.outputs = {5};
    conv.attrs = {Attr("strides", {1, 1}, {}, ""), Attr("alpha", {}, {0.5f, -2.25f}, ""),
                  Attr("auto_pad", {}, {}, "SAME_UPPER"), Attr("empty", {}, {}, "")};
    StepDesc fc;
    fc.op = "Gemm";
    fc.node = "fc";
    fc.inputs = {5, 3, -1};  // -1: absent optional bias
    fc.outputs = {6};
    fc.attrs = {Attr("transB", {1}, {}, ""), Attr("mixed", {-5, 1LL << 40}, {1e-3f}, "x")};
    c.steps = {conv, fc};
    c.inputs = {0};
    c.outputs = {6};
    c.arena_bytes = 1856;
    c.scratch_bytes = 4096;
    d.contexts.push_back(std::move(c));
  }
  return d;
}

inline void ExpectDescEq(const FileDesc& a, const FileDesc& b) {
  EXPECT_EQ(a.producer, b.producer);
  EXPECT_EQ(a.plan_version, b.plan_version);
  ASSERT_EQ(a.contexts.size(), b.contexts.size());
  for (size_t i = 0; i < a.contexts.size(); ++i) {
    const ContextDesc &x = a.contexts[i], &y = b.contexts[i];
    SCOPED_TRACE("context " + std::to_string(i));
    EXPECT_EQ(x.method, y.method);
    EXPECT_EQ(x.target, y.target);
    EXPECT_EQ(x.options, y.options);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.outputs, y.outputs);
    EXPECT_EQ(x.arena_bytes, y.arena_bytes);
    EXPECT_EQ(x.scratch_bytes, y.scratch_bytes);
    ASSERT_EQ(x.tensors.size(), y.tensors.size());
    for (size_t t = 0; t < x.tensors.size(); ++t) {
      EXPECT_EQ(x.tensors[t].name, y.tensors[t].name);
      EXPECT_EQ(x.tensors[t].dtype, y.tensors[t].dtype);
      EXPECT_EQ(x.tensors[t].shape, y.tensors[t].shape);
      EXPECT_EQ(x.tensors[t].storage, y.tensors[t].storage);
      EXPECT_EQ(x.tensors[t].offset, y.tensors[t].offset);
      EXPECT_EQ(x.tensors[t].blob, y.tensors[t].blob);
    }
    ASSERT_EQ(x.steps.size(), y.steps.size());
    for (size_t s = 0; s < x.steps.size(); ++s) {
      EXPECT_EQ(x.steps[s].op, y.steps[s].op);
      EXPECT_EQ(x.steps[s].node, y.steps[s].node);
      EXPECT_EQ(x.steps[s].inputs, y.steps[s].inputs);
      EXPECT_EQ(x.steps[s].outputs, y.steps[s].outputs);
      ASSERT_EQ(x.steps[s].attrs.size(), y.steps[s].attrs.size());
      for (size_t k = 0; k < x.steps[s].attrs.size(); ++k) {
        EXPECT_EQ(x.steps[s].attrs[k].name, y.steps[s].attrs[k].name);
        EXPECT_EQ(x.steps[s].attrs[k].ints, y.steps[s].attrs[k].ints);
        EXPECT_EQ(x.steps[s].attrs[k].floats, y.steps[s].attrs[k].floats);
        EXPECT_EQ(x.steps[s].attrs[k].str, y.steps[s].attrs[k].str);
      }
    }
  }
}

inline std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.insert(n);
    }
    closedir(d);
  }
  return names;
}

inline size_t OpenFdCount() { return ListDir("/proc/self/fd").size(); }

}  // namespace fcb::format::test
