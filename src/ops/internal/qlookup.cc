// QLookup: an 8-bit tensor mapped through a 256-entry table.
//
//   QLookup(X: uint8 | int8, table: [256] uint8 | int8 constant) -> Y
//   Y[i] = table[X[i]] (an int8 X indexes X + 128); Y has X's shape and the
//   table's type.
//
// FuseQuantized makes it from DequantizeLinear -> elementwise float ops with
// constant scalar operands (Relu, Clip, Sigmoid, HardSwish, Mul by a
// constant, ...) -> QuantizeLinear, all per tensor with constant scales: a
// function of one 8-bit value, tabulated at compile time by evaluating those
// very nodes on all 256 inputs, so the result is bit for bit theirs. One
// byte lookup replaces three passes over float data.
#include <cstring>

#include "kernels/int8.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

constexpr std::string_view kOp = opname::QLookup;

constexpr auto IsQ = ir::IsInt8Type;

Status Check(const std::vector<TensorInfo>& in) {
  if (in.size() != 2) return InvalidArgument(std::string(kOp) + ": needs an input and a table");
  if (!IsQ(in[0].dtype) || !IsQ(in[1].dtype))
    return InvalidArgument(std::string(kOp) + ": input and table must be uint8 or int8");
  if (in[1].shape != ir::Shape{256}) return InvalidArgument(std::string(kOp) + ": the table must have 256 entries");
  return CheckedNumel(in[0].shape).status();
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_RETURN_IF_ERROR(Check(c.inputs));
  out->push_back({c.inputs[1].dtype, c.inputs[0].shape});
  return Status::Ok();
}

class LookupKernel : public Kernel {
 public:
  LookupKernel(int64_t n, bool signed_in) : n_(n), flip_(signed_in ? 0x80 : 0) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const auto* x = static_cast<const uint8_t*>(in[0]);
    const auto* t = static_cast<const uint8_t*>(in[1]);
    auto* y = static_cast<uint8_t*>(out[0]);
    const uint8_t flip = flip_;
    const auto lookup = ctx.k->i8.lookup;
    ctx.pool->ParallelFor(n_, 65536, [&](int64_t b, int64_t e) { lookup(x + b, t, y + b, e - b, flip); });
    return Status::Ok();
  }

 private:
  int64_t n_;
  uint8_t flip_;
};

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_RETURN_IF_ERROR(Check(c.inputs));
  return std::unique_ptr<Kernel>(new LookupKernel(c.inputs[0].numel(), c.inputs[0].dtype == ir::DType::kI8));
}

Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  if (!c.Const(n, 1)) return Unsupported(std::string(kOp) + ": the table must be a constant");
  c.Emit(kOp, n.name, {c.Value(n.inputs[0]), c.Value(n.inputs[1])}, {c.Value(n.outputs[0])}, {});
  return true;
}

}  // namespace

ir::Node MakeQLookupNode(const std::string& name, int x, int table, int output) {
  ir::Node r;
  r.name = name;
  r.op_type = std::string(kOp);
  r.domain = "fcb";
  r.inputs = {x, table};
  r.outputs = {output};
  return r;
}

OpDef DefineQLookup() {
  OpDef d = internal::LoweredOp(kOp, 2, 2, Infer, Create);
  d.traits = kTraitElementwise;
  d.lowerings = {{kOp, 10, Lower}};
  return d;
}

}  // namespace fcb::ops
