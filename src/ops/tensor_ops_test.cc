// Tensor ops (shape ops, Transpose, Concat, Split, Gather, Slice, Expand,
// Tile, Pad, Trilu, ConstantOfShape, Range) against references.
#include <numeric>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.f);
  return v;
}

TEST(Shape, ReshapeFlattenSqueezeUnsqueeze) {
  auto x = F32({2, 3, 4}, Iota(24));
  auto as = [&](Shape s) { return F32(s, Iota(24)); };
  Check("Reshape", A(), {x, I64({3}, {0, -1, 2})}, {as({2, 6, 2})});
  Check("Reshape", A(), {x, I64({2}, {-1, 4})}, {as({6, 4})});
  EXPECT_REFUSED(Fails("Reshape", A(), {F32({0, 3}, {}), I64({2}, {3, 0})}), StatusCode::kInvalidArgument, "cannot reshape 0x3 to 3x3");  // 0 copies dim 1 (3)
  Check("Reshape", A().I("allowzero", 1), {F32({0, 3}, {}), I64({2}, {3, 0})}, {F32({3, 0}, {})});
  Check("Flatten", A().I("axis", -1), {x}, {as({6, 4})});
  Check("Flatten", A().I("axis", 0), {x}, {as({1, 24})});
  Check("Flatten", A().I("axis", 3), {x}, {as({24, 1})});
  auto y = F32({1, 3, 1, 2}, Iota(6));
  Check("Squeeze", A(), {y}, {F32({3, 2}, Iota(6))});
  Check("Squeeze", A(), {y, I64({1}, {-2})}, {F32({1, 3, 2}, Iota(6))});
  Check("Squeeze", A().Is("axes", {0}), {y}, {F32({3, 1, 2}, Iota(6))});
  Check("Unsqueeze", A(), {x, I64({2}, {0, -1})}, {as({1, 2, 3, 4, 1})});
  Check("Unsqueeze", A().Is("axes", {2}), {x}, {as({2, 3, 1, 4})});
  Check("Shape", A(), {x}, {I64({3}, {2, 3, 4})});
  Check("Shape", A().I("start", -2), {x}, {I64({2}, {3, 4})});
  Check("Shape", A().I("start", 1).I("end", -1), {x}, {I64({1}, {3})});
  Check("Shape", A().I("start", 5), {x}, {I64({0}, {})});
  Check("Size", A(), {x}, {I64({}, {24})});

  EXPECT_REFUSED(Fails("Reshape", A(), {x, I64({2}, {5, -1})}), StatusCode::kInvalidArgument, "cannot infer -1 reshaping 2x3x4");
  EXPECT_REFUSED(Fails("Reshape", A(), {x, I64({2}, {-1, -1})}), StatusCode::kInvalidArgument, "shape has more than one -1");
  EXPECT_REFUSED(Fails("Reshape", A(), {x, I64({1}, {-2})}), StatusCode::kInvalidArgument, "shape has a negative dim -2");
  EXPECT_REFUSED(Fails("Reshape", A(), {x, I64({4}, {0, 0, 0, 0})}), StatusCode::kInvalidArgument, "shape copies a dim the input lacks");
  EXPECT_REFUSED(Fails("Reshape", A().I("allowzero", 1), {x, I64({2}, {0, -1})}), StatusCode::kInvalidArgument, "shape has both 0 and -1 with allowzero=1");
  // A shape input that is not a compile-time constant is refused as Unsupported.
  Status s = Fails("Reshape", A(), {x, I64({2}, {6, 4})}, 1, {false, false});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_REFUSED(Fails("Flatten", A().I("axis", 4), {x}), StatusCode::kInvalidArgument, "Flatten: axis 4 out of range");
  EXPECT_REFUSED(Fails("Squeeze", A(), {x, I64({1}, {1})}), StatusCode::kInvalidArgument, "cannot squeeze dim 1 of size 3");  // dim 3 != 1
  EXPECT_REFUSED(Fails("Squeeze", A(), {x, I64({1}, {3})}), StatusCode::kInvalidArgument, "axis 3 is out of range for rank 3");
  EXPECT_REFUSED(Fails("Unsqueeze", A(), {x, I64({2}, {1, 1})}), StatusCode::kInvalidArgument, "axes contain a duplicate");
  EXPECT_REFUSED(Fails("Unsqueeze", A(), {x, I64({1}, {5})}), StatusCode::kInvalidArgument, "axis 5 is out of range for rank 4");
  EXPECT_REFUSED(Fails("Unsqueeze", A(), {x}), StatusCode::kInvalidArgument, "Unsqueeze: axes are required");
}

// Reference transpose.
TensorPtr RefTranspose(const TensorPtr& x, const std::vector<int64_t>& perm) {
  Shape os(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) os[i] = x->shape[perm[i]];
  auto y = ir::TensorData::Make(x->dtype, os);
  const size_t es = ir::DTypeSize(x->dtype);
  const auto st = [&] {
    std::vector<int64_t> s(x->shape.size(), 1);
    for (size_t i = x->shape.size(); i-- > 1;) s[i - 1] = s[i] * x->shape[i];
    return s;
  }();
  for (int64_t i = 0; i < y->numel(); ++i) {
    const auto idx = Unravel(i, os);
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d) src += idx[d] * st[perm[d]];
    std::memcpy(y->bytes.data() + i * es, x->bytes.data() + src * es, es);
  }
  return y;
}

TEST(Transpose, MatchesReference) {
  struct C {
    Shape s;
    std::vector<int64_t> perm;
  };
  const std::vector<C> cases = {
      {{37, 53}, {1, 0}},             // 2-D, odd sizes, tiles with remainders
      {{2, 5, 7, 3}, {0, 2, 3, 1}},   // NCHW -> NHWC
      {{2, 7, 3, 5}, {0, 3, 1, 2}},   // NHWC -> NCHW
      {{3, 4, 5}, {2, 0, 1}},
      {{3, 4, 5}, {1, 0, 2}},         // innermost stays: row copies
      {{1, 6, 1, 5}, {3, 2, 1, 0}},   // size-1 dims dropped
      {{2, 3, 4, 5, 6}, {4, 1, 3, 0, 2}},
      {{300, 70}, {1, 0}},            // several strips per thread
      {{4}, {0}},
      {{2, 0, 3}, {2, 1, 0}},
      // Few output columns (2..4) innermost, rows next: the interleaving path,
      // over more than one run of rows per image and a batch.
      {{2, 3, 70, 75}, {0, 2, 3, 1}},  // NCHW -> NHWC of an RGB image
      {{4, 2, 4500}, {0, 2, 1}},
      {{4, 9000}, {1, 0}},
      {{2, 2, 3, 7, 5}, {1, 0, 3, 4, 2}},  // batch dims of their own around it
  };
  int seed = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(ir::ShapeToString(c.s));
    auto x = F32(c.s, Rand(ir::NumElements(c.s), ++seed));
    Check("Transpose", A().Is("perm", c.perm), {x}, {RefTranspose(x, c.perm)});
  }
  auto xi = I64({3, 4, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  Check("Transpose", A(), {xi}, {RefTranspose(xi, {2, 1, 0})});  // default: reverse
  auto xb = U8({3, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Check("Transpose", A().Is("perm", {1, 0}), {xb}, {RefTranspose(xb, {1, 0})});
  Check("Transpose", A().Is("perm", {1, 0}), {RefTranspose(xb, {1, 0})}, {xb});  // 3 columns of bytes
  std::vector<int64_t> iota64(24);
  for (int i = 0; i < 24; ++i) iota64[i] = int64_t{1} << 40 | i;
  auto xl = I64({2, 3, 4}, iota64);
  Check("Transpose", A().Is("perm", {0, 2, 1}), {xl}, {RefTranspose(xl, {0, 2, 1})});  // 3 columns of int64
  auto x = F32({2, 3}, Iota(6));
  EXPECT_REFUSED(Fails("Transpose", A().Is("perm", {0, 0}), {x}), StatusCode::kInvalidArgument, "perm is not a permutation");
  EXPECT_REFUSED(Fails("Transpose", A().Is("perm", {0, 2}), {x}), StatusCode::kInvalidArgument, "perm entry out of range");
  EXPECT_REFUSED(Fails("Transpose", A().Is("perm", {0}), {x}), StatusCode::kInvalidArgument, "perm has 1 entries for rank 2");
}

TEST(Copy, ConcatSplit) {
  auto a = F32({2, 1, 3}, Iota(6));
  auto b = F32({2, 2, 3}, Rand(12, 1));
  auto want = ir::TensorData::Make(DType::kF32, {2, 3, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k)
        want->mutable_data<float>()[(i * 3 + j) * 3 + k] =
            j == 0 ? a->data<float>()[i * 3 + k] : b->data<float>()[(i * 2 + j - 1) * 3 + k];
  Check("Concat", A().I("axis", -2), {a, b}, {want});
  Check("Concat", A().I("axis", 0), {I64({1}, {1}), I64({0}, {}), I64({2}, {2, 3})}, {I64({3}, {1, 2, 3})});
  // Split back, with a split input, with the attribute, equal, and num_outputs (opset 18).
  Check("Split", A().I("axis", 1), {want, I64({2}, {1, 2})}, {a, b});
  Check("Split", A().I("axis", 1).Is("split", {1, 2}), {want}, {a, b});
  Check("Split", A(), {I64({4}, {1, 2, 3, 4})}, {I64({2}, {1, 2}), I64({2}, {3, 4})});
  Check("Split", A().I("num_outputs", 3), {I64({5}, {1, 2, 3, 4, 5})},
        {I64({2}, {1, 2}), I64({2}, {3, 4}), I64({1}, {5})});
  EXPECT_REFUSED(Fails("Concat", A().I("axis", 1), {a, F32({3, 1, 3}, Iota(9))}), StatusCode::kInvalidArgument, "input 1 shape 3x1x3 does not match 2x1x3");
  EXPECT_REFUSED(Fails("Concat", A().I("axis", 3), {a, a}), StatusCode::kInvalidArgument, "axis 3 is out of range for rank 3");
  EXPECT_REFUSED(Fails("Concat", A(), {a, a}), StatusCode::kInvalidArgument, "attribute 'axis' is required");
  EXPECT_REFUSED(Fails("Concat", A().I("axis", 0), {a, I64({1}, {1})}), StatusCode::kInvalidArgument, "inputs have different dtypes");
  EXPECT_REFUSED(Fails("Split", A(), {I64({5}, {1, 2, 3, 4, 5})}, 2), StatusCode::kInvalidArgument, "dim 5 does not split evenly into 2");
  EXPECT_REFUSED(Fails("Split", A(), {I64({4}, {1, 2, 3, 4}), I64({2}, {1, 2})}, 2), StatusCode::kInvalidArgument, "split sizes do not add up to 4");
}

TEST(Copy, Gather) {
  auto x = F32({3, 4}, Iota(12));
  Check("Gather", A(), {x, I64({2}, {2, -3})}, {F32({2, 4}, {8, 9, 10, 11, 0, 1, 2, 3})});
  Check("Gather", A().I("axis", -1), {x, I32({2, 2}, {3, 0, -1, 1})},
        {F32({3, 2, 2}, {3, 0, 3, 1, 7, 4, 7, 5, 11, 8, 11, 9})});
  Check("Gather", A(), {I64({3}, {5, 6, 7}), I64({}, {1})}, {I64({}, {6})});
  // Indices are data: out of range fails at run time with an error, not a crash.
  EXPECT_REFUSED(Fails("Gather", A(), {x, I64({2}, {0, 3})}), StatusCode::kInvalidArgument, "index 3 is out of range for a dim of 3");
  EXPECT_REFUSED(Fails("Gather", A(), {x, I64({1}, {-4})}), StatusCode::kInvalidArgument, "index -4 is out of range for a dim of 3");
  EXPECT_REFUSED(Fails("Gather", A().I("axis", 2), {x, I64({1}, {0})}), StatusCode::kInvalidArgument, "axis 2 is out of range for rank 2");
  EXPECT_REFUSED(Fails("Gather", A(), {x, F32({1}, {0})}), StatusCode::kInvalidArgument, "indices must be int64 or int32");
}

// Reference slice of a 1-D range by ONNX rules, written independently with a loop.
std::vector<float> RefSlice1D(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  std::vector<float> out;
  if (step > 0) {
    start = std::max<int64_t>(0, std::min(start, dim));
    end = std::max<int64_t>(0, std::min(end, dim));
    for (int64_t i = start; i < end; i += step) out.push_back(static_cast<float>(i));
  } else {
    start = std::max<int64_t>(-1, std::min(start, dim - 1));
    end = std::max<int64_t>(-1, std::min(end, dim - 1));
    for (int64_t i = start; i > end; i += step) out.push_back(static_cast<float>(i));
  }
  return out;
}

TEST(Copy, Slice) {
  const int64_t kBig = std::numeric_limits<int64_t>::max(), kSmall = std::numeric_limits<int64_t>::min();
  const int64_t cases[][3] = {{0, 5, 1},  {1, -1, 1},  {-3, kBig, 1}, {0, 10, 3}, {8, 0, -1},
                              {-1, kSmall, -1}, {kBig, kSmall, -2}, {5, 2, 1}, {-100, 100, 4},
                              {3, 3, 1},  {9, -100, -3}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c[0]) + ":" + std::to_string(c[1]) + ":" + std::to_string(c[2]));
    const auto want = RefSlice1D(10, c[0], c[1], c[2]);
    Check("Slice", A(), {F32({10}, Iota(10)), I64({1}, {c[0]}), I64({1}, {c[1]}), nullptr, I64({1}, {c[2]})},
          {F32({static_cast<int64_t>(want.size())}, want)});
  }
  // 3-D with axes (negative), steps and the attribute form.
  auto x = F32({2, 3, 4}, Iota(24));
  Check("Slice", A(), {x, I64({2}, {-1, 1}), I64({2}, {0, 3}), I64({2}, {-1, 1}), I64({2}, {-2, 1})},
        {F32({2, 2, 2}, {7, 5, 11, 9, 19, 17, 23, 21})});
  const std::vector<float> all = Iota(24);
  Check("Slice", A().Is("starts", {1}).Is("ends", {2}).Is("axes", {0}), {x},
        {F32({1, 3, 4}, std::vector<float>(all.begin() + 12, all.end()))});
  Check("Slice", A(), {I64({3, 2}, {1, 2, 3, 4, 5, 6}), I32({1}, {2}), I32({1}, {0}), I32({1}, {0}), I32({1}, {-1})},
        {I64({2, 2}, {5, 6, 3, 4})});
  EXPECT_REFUSED(Fails("Slice", A(), {x, I64({1}, {0}), I64({1}, {1}), I64({1}, {0}), I64({1}, {0})}), StatusCode::kInvalidArgument, "Slice: step is zero");
  EXPECT_REFUSED(Fails("Slice", A(), {x, I64({1}, {0}), I64({1}, {1}), I64({1}, {3})}), StatusCode::kInvalidArgument, "axis 3 is out of range for rank 3");
  EXPECT_REFUSED(Fails("Slice", A(), {x, I64({2}, {0, 0}), I64({2}, {1, 1}), I64({2}, {1, -2})}), StatusCode::kInvalidArgument, "axes contain a duplicate");
  EXPECT_REFUSED(Fails("Slice", A(), {x, I64({1}, {0}), I64({2}, {1, 1})}), StatusCode::kInvalidArgument, "starts and ends differ in length");
  EXPECT_EQ(Fails("Slice", A(), {x, I64({1}, {0}), I64({1}, {1})}, 1, {true, false, true}).code(),
            StatusCode::kUnsupported);
}

TEST(Copy, ExpandTileTrilu) {
  Check("Expand", A(), {F32({3, 1}, {1, 2, 3}), I64({3}, {2, 1, 2})},
        {F32({2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3})});
  Check("Expand", A(), {I64({}, {4}), I64({1}, {3})}, {I64({3}, {4, 4, 4})});
  Check("Expand", A(), {F32({2}, {1, 2}), I64({2}, {1, 1})}, {F32({1, 2}, {1, 2})});  // shape may be smaller
  EXPECT_REFUSED(Fails("Expand", A(), {F32({3}, {1, 2, 3}), I64({1}, {2})}), StatusCode::kInvalidArgument, "shapes 3 and 2 cannot be broadcast");
  Check("Tile", A(), {F32({2, 2}, {1, 2, 3, 4}), I64({2}, {2, 3})},
        {F32({4, 6}, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4})});
  Check("Tile", A(), {I64({3}, {1, 2, 3}), I64({1}, {0})}, {I64({0}, {})});
  EXPECT_REFUSED(Fails("Tile", A(), {F32({2}, {1, 2}), I64({2}, {1, 1})}), StatusCode::kInvalidArgument, "repeats must have one entry per dim");
  EXPECT_REFUSED(Fails("Tile", A(), {F32({2}, {1, 2}), I64({1}, {-1})}), StatusCode::kInvalidArgument, "repeats has a negative entry");
  auto m = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Check("Trilu", A(), {m}, {F32({2, 3}, {1, 2, 3, 0, 5, 6})});
  Check("Trilu", A().I("upper", 0), {m}, {F32({2, 3}, {1, 0, 0, 4, 5, 0})});
  Check("Trilu", A(), {m, I64({}, {1})}, {F32({2, 3}, {0, 2, 3, 0, 0, 6})});
  Check("Trilu", A().I("upper", 0), {m, I64({}, {-1})}, {F32({2, 3}, {0, 0, 0, 4, 0, 0})});
}

TEST(Copy, Pad) {
  auto x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Check("Pad", A(), {x, I64({4}, {0, 1, 1, 0}), F32({}, {9})},
        {F32({3, 4}, {9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9})});
  Check("Pad", A().S("mode", "edge"), {x, I64({4}, {1, 2, 0, 1})},
        {F32({3, 6}, {1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6})});
  Check("Pad", A().S("mode", "reflect"), {x, I64({4}, {0, 2, 0, 2})},
        {F32({2, 7}, {3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4})});
  Check("Pad", A().S("mode", "wrap"), {x, I64({4}, {1, 1, 0, 0})},
        {F32({3, 4}, {6, 4, 5, 6, 3, 1, 2, 3, 6, 4, 5, 6})});
  // Negative pads crop; opset-18 axes; the attribute form (opset < 11).
  Check("Pad", A(), {x, I64({4}, {0, -1, 0, 1})}, {F32({2, 3}, {2, 3, 0, 5, 6, 0})});
  Check("Pad", A(), {x, I64({2}, {1, 0}), nullptr, I64({1}, {-2})}, {F32({3, 3}, {0, 0, 0, 1, 2, 3, 4, 5, 6})});
  Check("Pad", A().Is("pads", {0, 0, 0, 2}).F("value", 1.5f), {x},
        {F32({2, 5}, {1, 2, 3, 1.5f, 1.5f, 4, 5, 6, 1.5f, 1.5f})});
  Check("Pad", A(), {I64({2}, {7, 8}), I64({2}, {1, 1}), I64({}, {-1})}, {I64({4}, {-1, 7, 8, -1})});
  EXPECT_REFUSED(Fails("Pad", A(), {x, I64({2}, {1, 1})}), StatusCode::kInvalidArgument, "pads must have 2 entries per padded axis, got 2");
  EXPECT_REFUSED(Fails("Pad", A(), {x, I64({4}, {0, -4, 0, 0})}), StatusCode::kInvalidArgument, "pads remove more than the whole dim 1");
  EXPECT_REFUSED(Fails("Pad", A().S("mode", "mirror"), {x, I64({4}, {0, 0, 0, 0})}), StatusCode::kInvalidArgument, "unknown mode 'mirror'");
  EXPECT_REFUSED(Fails("Pad", A().S("mode", "edge"), {F32({0}, {}), I64({2}, {1, 1})}), StatusCode::kInvalidArgument, "cannot edge-pad an empty dim");
}

TEST(Generators, ConstantOfShapeRange) {
  // Tensor attributes arrive as value (+ value.dtype), as ops::AttrsFromNode makes them.
  Check("ConstantOfShape", A(), {I64({2}, {2, 3})}, {F32({2, 3}, {0, 0, 0, 0, 0, 0})});
  Check("ConstantOfShape", A().I("value", 7).I("value.dtype", 7), {I64({1}, {3})}, {I64({3}, {7, 7, 7})});
  Check("ConstantOfShape", A().F("value", 2.5f).I("value.dtype", 1), {I64({0}, {})}, {F32({}, {2.5f})});
  Check("ConstantOfShape", A().I("value", 1).I("value.dtype", 9), {I64({1}, {2})}, {Bool({2}, {1, 1})});
  Check("ConstantOfShape", A().I("value", -3).I("value.dtype", 6), {I64({1}, {2})}, {I32({2}, {-3, -3})});
  EXPECT_REFUSED(Fails("ConstantOfShape", A(), {I64({1}, {-1})}), StatusCode::kInvalidArgument, "output 0 has a negative dim (-1)");
  EXPECT_REFUSED(Fails("ConstantOfShape", A(), {I64({2}, {int64_t{1} << 40, 1 << 20})}), StatusCode::kInvalidArgument, "output 0 has too many elements");
  Check("Range", A(), {I64({}, {1}), I64({}, {10}), I64({}, {3})}, {I64({3}, {1, 4, 7})});
  Check("Range", A(), {I32({}, {10}), I32({}, {1}), I32({}, {-4})}, {I32({3}, {10, 6, 2})});
  Check("Range", A(), {F32({}, {0.5f}), F32({}, {2.f}), F32({}, {0.5f})}, {F32({3}, {0.5f, 1.f, 1.5f})});
  Check("Range", A(), {I64({}, {5}), I64({}, {1}), I64({}, {1})}, {I64({0}, {})});
  EXPECT_REFUSED(Fails("Range", A(), {I64({}, {1}), I64({}, {5}), I64({}, {0})}), StatusCode::kInvalidArgument, "Range: delta is zero");
  EXPECT_REFUSED(Fails("Range", A(), {I64({}, {std::numeric_limits<int64_t>::min()}),
                                    I64({}, {std::numeric_limits<int64_t>::max()}), I64({}, {1})}), StatusCode::kInvalidArgument, "Range: output too large");
}

}  // namespace
}  // namespace fcb::ops::testing
