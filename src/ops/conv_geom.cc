#include "ops/conv_geom.h"

#include <algorithm>

namespace fcb::ops {

bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

Result<int64_t> CheckedNumel(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return InvalidArgument("negative dimension in shape " + ir::ShapeToString(s));
    if (MulOverflows(n, d, &n) || n > (int64_t{1} << 48))
      return InvalidArgument("shape " + ir::ShapeToString(s) + " is too large");
  }
  return n;
}

int64_t WindowOutputSize(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t extent, int64_t stride,
                         bool ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - extent;
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // The last window must start inside the input or its leading padding.
  if (ceil_mode && (o - 1) * stride >= in + pad_begin) --o;
  return o;
}

SamePadding SamePad(int64_t in, int64_t extent, int64_t stride, bool upper) {
  SamePadding p;
  p.out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (p.out - 1) * stride + extent - in);
  p.pad_begin = upper ? total / 2 : total - total / 2;
  p.pad_end = total - p.pad_begin;
  return p;
}

namespace {
Status Pair(const Attrs& a, const char* name, int64_t def, int64_t* x, int64_t* y) {
  std::vector<int64_t> v = a.GetInts(name, {def, def});
  if (v.size() != 2)
    return InvalidArgument(std::string(name) + " must have 2 values for a 2-D window, got " +
                           std::to_string(v.size()));
  *x = v[0];
  *y = v[1];
  return Status::Ok();
}
}  // namespace

Result<Window2d> ResolveWindow2d(const Attrs& a, int64_t ih, int64_t iw, int64_t kernel_h,
                                 int64_t kernel_w, bool allow_ceil_mode) {
  Window2d w;
  w.kh = kernel_h;
  w.kw = kernel_w;
  if (a.Has("kernel_shape")) FCB_RETURN_IF_ERROR(Pair(a, "kernel_shape", 1, &w.kh, &w.kw));
  FCB_RETURN_IF_ERROR(Pair(a, "strides", 1, &w.sh, &w.sw));
  FCB_RETURN_IF_ERROR(Pair(a, "dilations", 1, &w.dh, &w.dw));
  const int64_t kLimit = 1 << 20;
  for (int64_t v : {w.kh, w.kw, w.sh, w.sw, w.dh, w.dw})
    if (v < 1 || v > kLimit) return InvalidArgument("kernel, stride and dilation values must be in [1, 2^20]");
  if (ih < 1 || iw < 1 || ih > kLimit || iw > kLimit)
    return InvalidArgument("spatial input size " + std::to_string(ih) + "x" + std::to_string(iw) +
                           " is out of range");
  const int64_t ekh = (w.kh - 1) * w.dh + 1, ekw = (w.kw - 1) * w.dw + 1;
  const std::string auto_pad = a.GetString("auto_pad", "NOTSET");
  const bool ceil_mode = allow_ceil_mode && a.GetInt("ceil_mode", 0) != 0;
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    std::vector<int64_t> p = a.GetInts("pads", {0, 0, 0, 0});
    if (p.size() != 4) return InvalidArgument("pads must have 4 values for a 2-D window");
    for (int64_t v : p)
      if (v < 0 || v > kLimit) return InvalidArgument("pads must be in [0, 2^20]");
    w.pad_t = p[0];
    w.pad_l = p[1];
    w.pad_b = p[2];
    w.pad_r = p[3];
    w.oh = WindowOutputSize(ih, w.pad_t, w.pad_b, ekh, w.sh, ceil_mode);
    w.ow = WindowOutputSize(iw, w.pad_l, w.pad_r, ekw, w.sw, ceil_mode);
  } else if (auto_pad == "VALID") {
    w.oh = WindowOutputSize(ih, 0, 0, ekh, w.sh, false);
    w.ow = WindowOutputSize(iw, 0, 0, ekw, w.sw, false);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const bool upper = auto_pad == "SAME_UPPER";
    const SamePadding h = SamePad(ih, ekh, w.sh, upper), v = SamePad(iw, ekw, w.sw, upper);
    w.oh = h.out, w.pad_t = h.pad_begin, w.pad_b = h.pad_end;
    w.ow = v.out, w.pad_l = v.pad_begin, w.pad_r = v.pad_end;
  } else {
    return InvalidArgument("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  if (w.oh < 1 || w.ow < 1)
    return InvalidArgument("window " + std::to_string(ekh) + "x" + std::to_string(ekw) +
                           " does not fit the padded input " + std::to_string(ih) + "x" +
                           std::to_string(iw));
  return w;
}

}  // namespace fcb::ops
