#include <algorithm>

#include "core/fault.h"
#include "ops/conv_geom.h"
#include "runtime/program_impl.h"

namespace fcb {
namespace {

std::string HostTargetsList() {
  std::string s;
  for (TargetId t : RunnableTargets()) s += (s.empty() ? "" : ", ") + std::string(TargetName(t));
  return s;
}

std::string JoinNames(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

Result<TargetId> SelectTarget(const std::vector<std::string>& in_file, const std::string& wanted,
                              const std::string& path) {
  if (wanted.empty() || wanted == "auto") {
    std::optional<TargetId> best;
    int best_score = -1;
    for (const auto& name : in_file) {
      auto id = TargetFromName(name);
      if (!id || !HostCanRun(*id)) continue;
      for (const auto& info : KnownTargets())
        if (info.id == *id && info.score > best_score) best = id, best_score = info.score;
    }
    if (!best)
      return Unavailable("'" + path + "' has no target this host can run: the file holds [" + JoinNames(in_file) +
                         "], this host supports [" + HostTargetsList() + "]");
    return *best;
  }
  auto id = TargetFromName(wanted);
  if (!id)
    return InvalidArgument("unknown target '" + wanted + "'; known targets: " + KnownTargetNames() + ", or auto");
  if (std::find(in_file.begin(), in_file.end(), wanted) == in_file.end())
    return Unavailable("target '" + wanted + "' is not in '" + path + "': the file holds [" + JoinNames(in_file) +
                       "], this host supports [" + HostTargetsList() + "]");
  if (!HostCanRun(*id))
    return Unavailable("target '" + wanted + "' cannot run on this host: the file holds [" + JoinNames(in_file) +
                       "], this host supports [" + HostTargetsList() + "]");
  return *id;
}

// `checked` (null: checksums off) marks the blobs whose XXH3-128 has been
// verified: every blob that can steer control flow or addressing is, here,
// before it is read (integer and boolean tensors, and the small constants
// handed to shape inference and kernel creation). The bulk float weights are
// left to the background pool check (runtime/pool_check.h).
Status PrepareMethod(const format::LoadedFile& file, const format::ContextDesc& c, PreparedMethod* m,
                     std::vector<bool>* checked) {
  m->context = &c;
  m->info.name = c.method;
  const size_t nt = c.tensors.size();
  m->weights.assign(nt, nullptr);
  m->bytes.assign(nt, 0);
  std::vector<ops::TensorInfo> infos(nt);
  std::vector<std::shared_ptr<ir::TensorData>> small_consts(nt);
  for (size_t i = 0; i < nt; ++i) {
    const auto& t = c.tensors[i];
    const std::string where = "tensor " + std::to_string(i) + " ('" + t.name + "')";
    const auto dtype = static_cast<ir::DType>(t.dtype);
    const size_t es = ir::DTypeSize(dtype);
    if (es == 0) return CorruptFile(where + " has unknown dtype code " + std::to_string(t.dtype));
    auto numel = ops::CheckedNumel(t.shape);
    if (!numel.ok()) return CorruptFile(where + ": " + numel.status().message());
    const uint64_t bytes = static_cast<uint64_t>(numel.value()) * es;
    m->bytes[i] = bytes;
    infos[i] = {dtype, t.shape};
    if (t.storage == format::Storage::kArena) {
      if (t.offset > c.arena_bytes || bytes > c.arena_bytes - t.offset)
        return CorruptFile(where + " [offset " + std::to_string(t.offset) + ", " + std::to_string(bytes) +
                           " bytes] lies outside the arena of " + std::to_string(c.arena_bytes) + " bytes");
      if (t.offset % 64 != 0) return CorruptFile(where + " is not 64-byte aligned in the arena");
    } else if (t.storage == format::Storage::kWeight) {
      if (t.blob < 0 || static_cast<size_t>(t.blob) >= file.desc().blobs.size())
        return CorruptFile(where + " refers to weight blob " + std::to_string(t.blob) + " which does not exist");
      if (bytes > file.desc().blobs[t.blob].size)
        return CorruptFile(where + " needs " + std::to_string(bytes) + " bytes but blob " + std::to_string(t.blob) +
                           " holds " + std::to_string(file.desc().blobs[t.blob].size));
      m->weights[i] = file.blob_data(t.blob);
      const bool floating = dtype == ir::DType::kF32 || dtype == ir::DType::kF16 ||
                            dtype == ir::DType::kBF16 || dtype == ir::DType::kF64;
      if (checked && !(*checked)[t.blob] && (!floating || bytes <= ops::kMaxInferConstantBytes)) {
        FCB_RETURN_IF_ERROR(file.VerifyBlob(t.blob, "tensor '" + t.name + "'"));
        (*checked)[t.blob] = true;
      }
      if (bytes <= ops::kMaxInferConstantBytes) {
        auto td = std::make_shared<ir::TensorData>();
        td->dtype = dtype;
        td->shape = t.shape;
        const auto* p = static_cast<const uint8_t*>(m->weights[i]);
        td->bytes.assign(p, p + bytes);
        small_consts[i] = td;
      }
    } else {
      return CorruptFile(where + " has unknown storage kind");
    }
  }
  auto check_io = [&](int32_t t, const char* what) -> Status {
    if (t < 0 || static_cast<size_t>(t) >= nt || c.tensors[t].storage != format::Storage::kArena)
      return CorruptFile(std::string("method '") + c.method + "' " + what + " refers to an invalid tensor");
    return Status::Ok();
  };
  for (int32_t t : c.inputs) {
    FCB_RETURN_IF_ERROR(check_io(t, "input"));
    m->info.inputs.push_back({c.tensors[t].name, static_cast<DType>(c.tensors[t].dtype), c.tensors[t].shape});
  }
  for (int32_t t : c.outputs) {
    FCB_RETURN_IF_ERROR(check_io(t, "output"));
    m->info.outputs.push_back({c.tensors[t].name, static_cast<DType>(c.tensors[t].dtype), c.tensors[t].shape});
  }
  m->input_tensors = c.inputs;
  m->output_tensors = c.outputs;
  for (size_t si = 0; si < c.steps.size(); ++si) {
    const auto& s = c.steps[si];
    PreparedStep ps;
    ps.where = "step " + std::to_string(si) + " (" + s.op + ", node '" + s.node + "')";
    const ops::OpDef* def = ops::FindOp(s.op);
    if (!def) return CorruptFile(ps.where + ": operator '" + s.op + "' is unknown to this runtime");
    std::vector<ops::TensorInfo> in, out_declared;
    std::vector<const ir::TensorData*> consts;
    for (int32_t t : s.inputs) {
      if (t == -1) {
        in.push_back({});
        consts.push_back(nullptr);
        continue;
      }
      if (t < 0 || static_cast<size_t>(t) >= nt) return CorruptFile(ps.where + ": input tensor index out of range");
      in.push_back(infos[t]);
      consts.push_back(small_consts[t].get());
    }
    for (int32_t t : s.outputs) {
      if (t < 0 || static_cast<size_t>(t) >= nt || c.tensors[t].storage != format::Storage::kArena)
        return CorruptFile(ps.where + ": output must be an arena tensor");
      out_declared.push_back(infos[t]);
    }
    ops::Attrs attrs(s.attrs);
    std::vector<ops::TensorInfo> out;
    ops::InferContext ictx{s.op, attrs, in, consts, static_cast<int>(s.outputs.size())};
    Status st = ops::InferOutputs(*def, ictx, &out);
    if (!st.ok()) return CorruptFile(ps.where + ": " + st.message());
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].dtype != out_declared[i].dtype || out[i].shape != out_declared[i].shape)
        return CorruptFile(ps.where + ": output " + std::to_string(i) + " is declared " +
                           ir::ShapeToString(out_declared[i].shape) + " but its inputs give " +
                           ir::ShapeToString(out[i].shape));
    if (fault::Hit(fault::Kind::kAlloc, c.method))
      return ResourceExhausted(ps.where + ": cannot allocate the prepared kernel (injected fault)");
    std::vector<const void*> data;
    for (int32_t t : s.inputs) data.push_back(t >= 0 ? m->weights[t] : nullptr);
    ops::CreateContext cctx{s.op, attrs, in, out, consts, &data};
    auto kernel = def->create(cctx);
    if (!kernel.ok()) return kernel.TakeStatus().Annotate(ps.where);
    ps.kernel = std::move(kernel).value();
    ps.inputs = s.inputs;
    ps.outputs = s.outputs;
    m->steps.push_back(std::move(ps));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ProgramImpl>> LoadProgram(const std::string& path, const LoadOptions& options) {
  auto impl = std::make_unique<ProgramImpl>();
  // The pool's checksum is deferred (runtime/pool_check.h); the structural
  // checks, the header and metadata checksums run now.
  FCB_ASSIGN_OR_RETURN(impl->file, format::LoadFcbFile(path, /*verify_checksums=*/false));
  const auto& desc = impl->file->desc();
  for (const auto& c : desc.contexts)
    if (std::find(impl->targets_in_file.begin(), impl->targets_in_file.end(), c.target) == impl->targets_in_file.end())
      impl->targets_in_file.push_back(c.target);
  if (impl->targets_in_file.empty()) return CorruptFile("'" + path + "' holds no compiled contexts");
  FCB_ASSIGN_OR_RETURN(impl->target, SelectTarget(impl->targets_in_file, options.target, path));
  impl->target_name = TargetName(impl->target);
  impl->kernels = &kernels::GetKernelTable(impl->target);
  // Blobs that can steer control flow are verified as they are read
  // (PrepareMethod); the whole pool in the background, see below.
  std::vector<bool> checked(desc.blobs.size(), false);
  for (const auto& c : desc.contexts) {
    if (c.target != impl->target_name) continue;
    if (impl->Find(c.method)) return CorruptFile("'" + path + "' holds method '" + c.method + "' twice for target " + c.target);
    PreparedMethod m;
    Status s = PrepareMethod(*impl->file, c, &m, options.verify_checksums ? &checked : nullptr);
    if (!s.ok()) return s.Annotate("'" + path + "', target " + c.target + ", method '" + c.method + "'");
    impl->methods.push_back(std::move(m));
  }
  // The whole pool, behind the caller's back; runs wait for it.
  if (options.verify_checksums) impl->pool_check.Start(impl->file.get());
  return impl;
}

Program::Program(std::unique_ptr<ProgramImpl> impl) : impl_(std::move(impl)) {}
Program::~Program() = default;

Result<std::shared_ptr<const Program>> Program::Load(const std::string& path, const LoadOptions& options) {
  try {
    FCB_ASSIGN_OR_RETURN(auto impl, LoadProgram(path, options));
    return std::shared_ptr<const Program>(new Program(std::move(impl)));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while loading '" + path + "'");
  }
}

const std::string& Program::target() const { return impl_->target_name; }
std::vector<std::string> Program::targets_in_file() const { return impl_->targets_in_file; }

std::vector<std::string> Program::methods() const {
  std::vector<std::string> v;
  for (const auto& m : impl_->methods) v.push_back(m.info.name);
  return v;
}

Result<MethodInfo> Program::method(const std::string& name) const {
  const PreparedMethod* m = impl_->Find(name);
  if (!m) return NotFound("no method '" + name + "'; the program has: " + JoinNames(methods()));
  return m->info;
}

Result<std::string> Program::default_method() const {
  if (impl_->methods.size() == 1) return impl_->methods[0].info.name;
  return InvalidArgument("the program has several methods; name the one to run: " + JoinNames(methods()));
}

const char* DTypeName(DType t) { return ir::DTypeName(static_cast<ir::DType>(t)); }
size_t DTypeSize(DType t) { return ir::DTypeSize(static_cast<ir::DType>(t)); }
uint64_t TensorSpec::bytes() const {
  return static_cast<uint64_t>(ir::NumElements(shape)) * DTypeSize(dtype);
}

}  // namespace fcb
