// The limits fcb holds every file to, whatever wrote it. A .fcb or ONNX model
// past one of them is refused, before anything is allocated for it, with an
// error naming the limit and the value found; the compiler refuses to write a
// file past them, so what it writes always loads. They sit far above any real
// model (the largest exported LLM graphs hold some 10^4 nodes) and far below
// what would let a small hostile file make fcb allocate or loop without bound.
//
// Memory is bounded separately: LoadOptions::max_memory_bytes (fcb.h) caps
// both what a load allocates (decoded metadata, converted weights) and what
// one execution allocates (arena and scratch).
#pragma once

#include <cstdint>

namespace fcb::limits {

// Compiled contexts (one per method and target) in one .fcb file.
inline constexpr uint64_t kMaxContexts = 4096;
// Tensors, and steps, in one context (one method's plan for one target).
inline constexpr uint64_t kMaxTensorsPerContext = uint64_t{1} << 20;
inline constexpr uint64_t kMaxStepsPerContext = uint64_t{1} << 20;
// Symbols (dimensions chosen at each run) of one context.
inline constexpr uint64_t kMaxSymbols = 256;
// Dimensions of one tensor.
inline constexpr int kMaxRank = 16;
// Elements of one tensor, and its bytes (so element count x element size and
// arena offset + size never overflow 64 bits).
inline constexpr uint64_t kMaxTensorElements = uint64_t{1} << 48;
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 50;
// Nesting depth of ONNX subgraphs (the bodies of If, Loop and Scan, and the
// subgraphs inside those).
inline constexpr int kMaxSubgraphDepth = 32;
// Nodes in one ONNX graph, subgraphs included.
inline constexpr uint64_t kMaxNodes = uint64_t{1} << 20;

// Named attachments (CompileSpec::attachments) in one .fcb file, and the
// bytes of one attachment's name.
inline constexpr uint64_t kMaxAttachments = 4096;
inline constexpr uint64_t kMaxAttachmentNameBytes = 255;

}  // namespace fcb::limits
