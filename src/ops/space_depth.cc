// DepthToSpace (DCR and CRD modes) and SpaceToDepth on NCHW tensors: pure
// index permutations, copied element by element (by element size, any dtype).
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

Status InferSpaceDepth(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsKnownDType(x.dtype)) return OpUnsupported(c.op, "dtype");
  if (x.shape.size() != 4) return OpError(c.op, "input must have rank 4 (NCHW)");
  const int64_t bs = c.attrs.GetInt("blocksize", 0);
  if (bs < 1 || bs > 4096) return OpError(c.op, "blocksize must be >= 1");
  const auto& s = x.shape;
  if (c.op == "DepthToSpace") {
    const std::string mode = c.attrs.GetString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return OpError(c.op, "mode must be DCR or CRD");
    if (s[1] % (bs * bs) != 0) return OpError(c.op, "channels must be divisible by blocksize^2");
    outs->push_back(TensorInfo{x.dtype, {s[0], s[1] / (bs * bs), s[2] * bs, s[3] * bs}});
  } else {
    if (s[2] % bs != 0 || s[3] % bs != 0) return OpError(c.op, "H and W must be divisible by blocksize");
    outs->push_back(TensorInfo{x.dtype, {s[0], s[1] * bs * bs, s[2] / bs, s[3] / bs}});
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateSpaceDepth(const CreateContext& c) {
  const bool d2s = c.op == "DepthToSpace";
  const bool crd = c.attrs.GetString("mode", "DCR") == "CRD";
  const int64_t bs = c.attrs.GetInt("blocksize", 1);
  // The "space" side's shape: for DepthToSpace the output, else the input.
  const ir::Shape sp = d2s ? c.outputs[0].shape : c.inputs[0].shape;
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const uint8_t* x = static_cast<const uint8_t*>(in[0]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    const int64_t n = sp[0], ch = sp[1], H = sp[2], W = sp[3];
    const int64_t h = H / bs, w = W / bs, dc = ch * bs * bs;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t cc = 0; cc < ch; ++cc)
        for (int64_t yy = 0; yy < H; ++yy)
          for (int64_t xx = 0; xx < W; ++xx) {
            const int64_t i = yy % bs, j = xx % bs;
            const int64_t depth_c = crd ? cc * bs * bs + i * bs + j : (i * bs + j) * ch + cc;
            const int64_t space_off = ((b * ch + cc) * H + yy) * W + xx;
            const int64_t depth_off = ((b * dc + depth_c) * h + yy / bs) * w + xx / bs;
            if (d2s) std::memcpy(y + space_off * es, x + depth_off * es, es);
            else std::memcpy(y + depth_off * es, x + space_off * es, es);
          }
    return Status::Ok();
  });
}

}  // namespace

void RegisterSpaceDepthOps(std::vector<OpDef>* ops) {
  for (const char* name : {"DepthToSpace", "SpaceToDepth"})
    ops->push_back(Def<InferSpaceDepth, CreateSpaceDepth>(name, 1, 1));
}

}  // namespace fcb::ops
