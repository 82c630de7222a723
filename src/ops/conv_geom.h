// Resolving ONNX convolution / pooling attributes into explicit 2-D geometry.
// Shared by shape inference, the layout pass and the NHWC kernels' ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fcb/status.h"
#include "ops/op.h"

namespace fcb::ops {

struct Window2d {
  int64_t kh = 1, kw = 1;
  int64_t sh = 1, sw = 1;
  int64_t dh = 1, dw = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int64_t oh = 0, ow = 0;
};

// The window arithmetic of one spatial axis, the one formula behind every
// convolution and pool (ResolveWindow2d, the reference N-D kernels of
// conv_ref.cc, the NHWC operators' WindowOutput):
//
// Output positions of a window of dilated extent `extent` ((k - 1) * d + 1)
// and stride `stride` over `in` input positions padded by `pad_begin` and
// `pad_end`; with ceil_mode a partial last window counts, unless it would
// start inside the end padding. 0 when the window does not fit.
int64_t WindowOutputSize(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t extent, int64_t stride,
                         bool ceil_mode);
// auto_pad SAME_UPPER / SAME_LOWER: ceil(in / stride) outputs and the padding
// that gives them, split evenly with the odd pixel at the end (UPPER) or the
// beginning (LOWER).
struct SamePadding {
  int64_t out = 0, pad_begin = 0, pad_end = 0;
};
SamePadding SamePad(int64_t in, int64_t extent, int64_t stride, bool upper);

// Resolves kernel_shape (or `kernel` when the attribute is absent), strides,
// dilations, pads / auto_pad and ceil_mode for an input of spatial size ih x iw.
// Validates every value (positive sizes, non-negative pads, output >= 1).
Result<Window2d> ResolveWindow2d(const Attrs& attrs, int64_t ih, int64_t iw, int64_t kernel_h,
                                 int64_t kernel_w, bool allow_ceil_mode);

// Checked arithmetic for shape products coming from untrusted files.
bool MulOverflows(int64_t a, int64_t b, int64_t* out);
// Product of dims, or an error if any is negative or the product exceeds 2^48 elements.
Result<int64_t> CheckedNumel(const ir::Shape& s);

}  // namespace fcb::ops
