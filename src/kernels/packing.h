// Target-neutral weight packing, done once at compile time.
//
// All layouts pad the output-channel (or column) dimension to whole panels of
// kPanel = 16 floats, zero-filled, so that every target's kernel reads full
// vectors and the stored bytes are identical for every target.
#pragma once

#include <cstdint>
#include <vector>

namespace fcb::kernels {

// Output channels (or columns) per panel: one AVX-512 vector, two AVX2
// vectors, four SSE or NEON vectors. The int8 layouts (int8.h) use the same.
inline constexpr int64_t kPanel = 16;
// Panels covering n channels, and n rounded up to whole panels: the padded
// size of every packed layout here and in int8.h.
constexpr int64_t PanelCount(int64_t n) { return (n + kPanel - 1) / kPanel; }
constexpr int64_t RoundUpToPanel(int64_t n) { return PanelCount(n) * kPanel; }

// Dense/grouped conv weights, ONNX layout [oc][ic/groups][kh][kw] ->
// [g][panel p of ceil(ocg/16)][ky][kx][icg][16] where lane j is output channel
// g*ocg + p*16 + j of the group (zero when >= ocg).
int64_t PackedConvFloats(int64_t oc, int64_t icg, int64_t kh, int64_t kw, int64_t groups);
std::vector<float> PackConv(const float* w, int64_t oc, int64_t icg, int64_t kh, int64_t kw,
                            int64_t groups);
// Bias [oc] (or null for zeros) -> [g][ceil(ocg/16)*16].
std::vector<float> PackConvBias(const float* bias, int64_t oc, int64_t groups);

// Depthwise weights [c][1][kh][kw] -> [ky][kx][ceil(c/16)*16]; bias -> [ceil(c/16)*16].
std::vector<float> PackDepthwise(const float* w, int64_t c, int64_t kh, int64_t kw);
std::vector<float> PackDepthwiseBias(const float* bias, int64_t c);

// Grouped conv weights with s input and output channels per group (s divides
// 16), ONNX [c][s][kh][kw] -> [ceil(c/16)][ky][kx][j < s][16], where lane l of
// block b is output channel 16b + l and j its group's j-th input channel (the
// layout of KernelTable::grouped_small); bias as PackDepthwiseBias.
bool GroupedSmallFits(int64_t c, int64_t groups);  // s = c / groups qualifies
int64_t PackedGroupedSmallFloats(int64_t c, int64_t s, int64_t kh, int64_t kw);
std::vector<float> PackGroupedSmall(const float* w, int64_t c, int64_t s, int64_t kh, int64_t kw);

// Winograd F(4x4, 3x3) weights: ONNX [oc][ic][3][3] -> U = G g G^T per
// (output, input) channel pair, laid out [36 positions][ceil(oc/16)][ic][16]
// (each position is a PackGemmB-style matrix of ic x oc).
int64_t PackedWinogradFloats(int64_t oc, int64_t ic);
std::vector<float> PackWinograd(const float* w, int64_t oc, int64_t ic);

// GEMM B operand, logical [k][n] given with row stride ldb and column stride
// ldcol (so a transposed source is ldb=1, ldcol=k) -> [ceil(n/16)][k][16].
std::vector<float> PackGemmB(const float* b, int64_t k, int64_t n, int64_t ldb, int64_t ldcol);

}  // namespace fcb::kernels
