// Arithmetic and checks shared by the two quantization families:
// quantize_linear.cc (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear)
// and integer_quant.cc (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv).
// ONNX opsets 10 to 18 (and the attribute forms of 19 and 21 that keep to
// uint8/int8). Plain scalar kernels shared by every target, exact first:
//
// - Integer products accumulate in 32 bits with wrap-around (uint32_t
//   arithmetic), which is the exact result whenever it fits in int32 and what
//   ONNX allows otherwise ("accumulation may overflow if and only if in 32
//   bits"). Zero points are folded out of the inner loops: a row of A is
//   shifted by its zero point once per element (a scalar), the column zero
//   points of B are applied once per output through the row sum of the shifted
//   A, so the inner loop is a plain multiply-add over B's row. Convolutions
//   hoist the shifted weight and its product with x's zero point per tap.
// - Rounding is half to even, computed explicitly (RoundHalfEven, core/rounding.h), independent
//   of the floating-point environment; saturation clamps to the output type.
// - The float steps follow ONNX Runtime's CPU kernels (MLAS), so results match
//   it bit for bit: QuantizeLinear divides x by the scale in float32 (not a
//   multiply by the reciprocal); the QLinear ops requantize with the float32
//   multiplier (x_scale * w_scale) / y_scale applied to float(acc + bias),
//   round half to even, then add the output zero point; DequantizeLinear is
//   float(x - zero_point) * scale; DynamicQuantizeLinear's scale is
//   (max(0, max x) - min(0, min x)) / 255, or 1 when that range is empty (all
//   zeros), as ONNX Runtime does (the ONNX reference would divide by zero).
// - NaN inputs quantize to the zero point (the spec leaves them undefined).
//
// Scales and zero points are read at run time, so they may be graph inputs;
// where a constant one is invalid (a nonzero zero point for int32
// DequantizeLinear) compiling fails, and a runtime-fed one is checked per run.
// Refused with Unsupported (naming the node through the importer): block
// quantization (block_size, or a scale of rank > 1), output types other than
// uint8/int8 (int4, uint4, int16, uint16, float8 of opset 21), inputs other
// than the spec's types. Opsets 19+ (float8 types, `saturate`) are refused by
// the importer as a whole; `saturate` only affects float8 outputs and is
// accepted (and ignored) on integer ones, as the spec says.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/rounding.h"
#include "ops/op_util.h"

namespace fcb::ops::quant {

using ir::DType;

// ------------------------------------------------------------- rounding, saturation

template <typename Q>
constexpr bool kIsQuantType = std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>;

// saturate(round_half_even(scaled) + zero_point) into Q; NaN gives the zero point.
template <typename Q, typename F>
inline Q Quantize(F scaled, int32_t zero_point) {
  static_assert(kIsQuantType<Q>);
  if (std::isnan(scaled)) return static_cast<Q>(zero_point);
  const F v = RoundHalfEven(scaled) + static_cast<F>(zero_point);
  constexpr F lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  return v <= lo ? static_cast<Q>(lo) : v >= hi ? static_cast<Q>(hi) : static_cast<Q>(v);
}

// An int32 accumulator requantized with a float32 multiplier (ONNX Runtime's
// order: the accumulator converted to float, multiplied, rounded, shifted).
template <typename Q>
inline Q Requantize(int32_t acc, float multiplier, int32_t zero_point) {
  return Quantize<Q>(static_cast<float>(acc) * multiplier, zero_point);
}

// ------------------------------------------------------------- dtypes

using ir::IsInt8Type;

// Calls f(Q{}) for uint8 / int8.
template <typename F>
void DispatchQuant(DType t, F&& f) {
  if (t == DType::kU8) f(uint8_t{});
  else f(int8_t{});
}

// A zero point of the quantized tensor's type.
inline Status ExpectZeroPointType(const InferContext& c, const TensorInfo& zp, DType want, const char* name) {
  if (zp.present() && zp.dtype != want)
    return OpError(c.op, std::string(name) + " has element type " + ir::DTypeName(zp.dtype) +
                             ", its tensor has " + ir::DTypeName(want));
  return Status::Ok();
}

}  // namespace fcb::ops::quant
