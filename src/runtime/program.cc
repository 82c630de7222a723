#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "core/fault.h"
#include "ops/names.h"
#include "ops/plan_check.h"
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
    return Unavailable("target '" + wanted + "' cannot run on this host (" + WhyHostCannotRun(DetectHost(), *id) +
                       "): the file holds [" + JoinNames(in_file) +
                       "], this host supports [" + HostTargetsList() + "]");
  return *id;
}

// The mapped file's weight pool as the plan checker sees it. `checked`
// (null: checksums off) marks the blobs whose XXH3-128 has been verified:
// every blob that can steer control flow or addressing is, here, before it is
// read (integer and boolean tensors, and the small constants handed to shape
// inference and kernel creation). The bulk float weights are left to the
// background pool check (runtime/pool_check.h).
class FileWeights final : public ops::PlanWeights {
 public:
  FileWeights(const format::LoadedFile& f, std::vector<bool>* checked) : f_(f), checked_(checked) {}
  size_t count() const override { return f_.desc().blobs.size(); }
  uint64_t size(int32_t blob) const override { return f_.desc().blobs[blob].size; }
  const void* data(int32_t blob) const override { return f_.blob_data(blob); }
  Status Verify(int32_t blob, const std::string& tensor) override {
    if (!checked_ || (*checked_)[blob]) return Status::Ok();
    FCB_RETURN_IF_ERROR(f_.VerifyBlob(blob, "tensor '" + tensor + "'"));
    (*checked_)[blob] = true;
    return Status::Ok();
  }

 private:
  const format::LoadedFile& f_;
  std::vector<bool>* checked_;
};

// The plan checks (ops/plan_check.h, the same the compiler ran), then a
// prepared kernel per step.
Status PrepareMethod(const format::LoadedFile& file, const format::ContextDesc& c, PreparedMethod* m,
                     std::vector<bool>* checked) {
  m->context = &c;
  m->info.name = c.method;
  FileWeights weights(file, checked);
  auto plan = ops::CheckPlan(c, weights);
  if (!plan.ok()) {
    if (plan.status().code() == StatusCode::kInvalidArgument) return CorruptFile(plan.status().message());
    return plan.TakeStatus();  // a checksum mismatch is CorruptFile already
  }
  const ops::CheckedPlan& p = plan.value();
  if (c.scratch_bytes < p.scratch_bytes || c.scratch_bytes % 64 != 0 || c.scratch_bytes > (uint64_t{1} << 30))
    return CorruptFile("method '" + c.method + "' declares " + std::to_string(c.scratch_bytes) +
                       " bytes of scratch per thread; its steps need " + std::to_string(p.scratch_bytes));
  m->weights = p.weights;
  m->bytes = p.bytes;
  m->shape_values.Fill(c, p, p);
  size_t k = 0;
  for (int32_t t : c.inputs) {
    TensorSpec spec{c.tensors[t].name, c.tensors[t].dtype, c.tensors[t].shape, {}, {}};
    std::vector<int32_t> syms(spec.shape.size(), -1);
    if (c.dynamic()) {  // metadata checks: input_symbols covers every input dim, indices in range
      bool any = false;
      for (size_t d = 0; d < syms.size(); ++d) syms[d] = c.input_symbols[k++], any = any || syms[d] >= 0;
      if (any) {
        spec.min_shape = spec.shape;
        spec.symbols.assign(spec.shape.size(), "");
        for (size_t d = 0; d < syms.size(); ++d)
          if (syms[d] >= 0) spec.min_shape[d] = c.symbols[syms[d]].lo, spec.symbols[d] = c.symbols[syms[d]].name;
      }
    }
    m->info.inputs.push_back(std::move(spec));
    m->input_symbols.push_back(std::move(syms));
  }
  for (int32_t t : c.outputs)
    m->info.outputs.push_back({c.tensors[t].name, c.tensors[t].dtype, c.tensors[t].shape, {}, {}});
  m->input_tensors = c.inputs;
  m->output_tensors = c.outputs;
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const ops::CheckedStep& cs = p.steps[si];
    PreparedStep ps;
    ps.where = cs.where;
    if (fault::Hit(fault::Kind::kAlloc, c.method))
      return ResourceExhausted(ps.where + ": cannot allocate the prepared kernel (injected fault)");
    auto kernel = cs.def->create(cs.create_context());
    if (!kernel.ok()) return kernel.TakeStatus().Annotate(ps.where);
    ps.kernel = std::move(kernel).value();
    if (cs.def->flops) ps.flops = cs.def->flops(cs.create_context());
    ps.inputs = c.steps[si].inputs;
    ps.outputs = c.steps[si].outputs;
    m->steps.push_back(std::move(ps));
  }
  if (c.dynamic()) {
    // The relations every run must meet, and the values computed from the
    // shapes compiled into one program that each new size evaluates.
    ops::SymbolicPlan sym = ops::InferSymbolicPlan(c, p);
    ops::CompileComputedValues(c, sym, &plan.value());
    m->requirements = std::move(sym.requires_equal);
    m->bound_plan = std::make_unique<const ops::CheckedPlan>(std::move(plan).value());
    for (const PreparedStep& ps : m->steps) m->bound_kernels.push_back(ps.kernel.get());
    const ops::CheckedPlan& b = *m->bound_plan;
    m->adapt_shapes_at.assign(m->steps.size(), -1);
    for (size_t k = 0; k < b.reach_steps.size(); ++k) {
      const size_t si = static_cast<size_t>(b.reach_steps[k]);
      if (b.reach_flags[k] & ops::CheckedPlan::kReachComputed) continue;
      if (!m->steps[si].kernel || !m->steps[si].kernel->adapts()) {
        m->remade_reach.push_back(static_cast<int32_t>(k));
        continue;
      }
      m->adapt_shapes_at[si] = static_cast<int32_t>(m->adapt_operands.size());
      for (int32_t j = b.reach_offsets[k]; j < b.reach_offsets[k + 1]; ++j)
        m->adapt_operands.push_back(b.reach_inputs[j]);
      for (int32_t j = b.reach_out_offsets[k]; j < b.reach_out_offsets[k + 1]; ++j)
        m->adapt_operands.push_back(b.reach_outputs[j]);
    }
  }
  return Status::Ok();
}

int64_t RowCapacity(const format::StepDesc& s) {
  for (const auto& a : s.attrs)
    if (a.name == ops::attr::kRowCapacity && a.ints.size() == 1) return a.ints[0];
  return -1;
}

// The method's state bindings (their indices and shapes checked with the
// metadata): each written in place by its producing step
// (ops::CheckStateBinding), and bound to the program's variable of its
// input's name, which every method binding that name must give one dtype
// and shape.
Status PrepareState(const format::ContextDesc& c, PreparedMethod* m, std::vector<StateVar>* vars) {
  for (const auto& b : c.state) {
    int32_t step = -1;
    const std::string err = ops::CheckStateBinding(c, b, &step);
    if (!err.empty()) return CorruptFile(err);
    const format::TensorDesc& t = c.tensors[c.inputs[b.input]];
    if (t.shape.size() != 4)
      return CorruptFile("state '" + t.name + "' has the shape " + ir::ShapeToString(t.shape) +
                         "; a cache is [batch, heads, capacity, head]");
    PreparedState ps;
    ps.input = static_cast<size_t>(b.input);
    ps.output = static_cast<size_t>(b.output);
    ps.capacity = t.shape[2];
    const auto& producer = c.steps[step];
    std::vector<int64_t> var_shape = t.shape;
    if (producer.op == ops::opname::KvAppend) {
      ps.grows = true;
      ps.capacity = RowCapacity(producer);
      if (ps.capacity < 1) return CorruptFile("state '" + t.name + "': its KvAppend step has no row_capacity");
      var_shape[2] = ps.capacity;
    }
    if (producer.inputs.size() > 5)
      for (size_t i = 0; i < c.inputs.size(); ++i)
        if (c.inputs[i] == producer.inputs[5]) ps.seqlens_input = static_cast<int32_t>(i);
    for (size_t v = 0; v < vars->size(); ++v)
      if ((*vars)[v].name == t.name) ps.var = static_cast<int32_t>(v);
    if (ps.var < 0) {
      ps.var = static_cast<int32_t>(vars->size());
      vars->push_back({t.name, t.dtype, var_shape,
                       static_cast<uint64_t>(ir::NumElements(var_shape)) * DTypeSize(t.dtype)});
    } else if ((*vars)[ps.var].dtype != t.dtype || (*vars)[ps.var].shape != var_shape) {
      return CorruptFile("state '" + t.name + "' is " + DTypeName(t.dtype) + " " + ir::ShapeToString(var_shape) +
                         " here but " + DTypeName((*vars)[ps.var].dtype) + " " +
                         ir::ShapeToString((*vars)[ps.var].shape) + " in an earlier method; methods sharing a "
                         "state give it one dtype and shape");
    }
    m->state.push_back(ps);
  }
  // A KvAppend writes rows at a stride of its capacity and an AttentionFused
  // with a row_capacity reads them so: both only over a State buffer of that
  // capacity (the runtime's, sized from the KvAppend; an arena tensor is not).
  for (size_t si = 0; si < c.steps.size(); ++si) {
    const auto& s = c.steps[si];
    const std::string where = "step " + std::to_string(si) + " (" + s.op + ", node '" + s.node + "')";
    if (s.op == ops::opname::KvAppend) {
      bool bound = false;
      for (const auto& ps : m->state)
        if (ps.grows && s.outputs.size() == 1 && m->output_tensors[ps.output] == s.outputs[0]) bound = true;
      if (!bound) return CorruptFile(where + " writes a cache that no state binding holds");
    } else if (s.op == ops::opname::AttentionFused && RowCapacity(s) > 0) {
      for (size_t k : {size_t{1}, size_t{2}}) {
        const format::StepDesc* producer = nullptr;
        for (const auto& p : c.steps)
          for (int32_t o : p.outputs)
            if (k < s.inputs.size() && o == s.inputs[k]) producer = &p;
        if (!producer || producer->op != ops::opname::KvAppend || RowCapacity(*producer) != RowCapacity(s))
          return CorruptFile(where + " reads input " + std::to_string(k) + " with a row capacity of " +
                             std::to_string(RowCapacity(s)) + ", but no KvAppend of that capacity writes it");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<ResolvedMethod> ReserveResolution(const PreparedMethod& m) {
  auto r = std::make_unique<ResolvedMethod>();
  const format::ContextDesc& c = *m.context;
  if (!m.bound_plan) return r;
  ops::ReserveResolvedPlan(c, *m.bound_plan, &r->plan);
  r->kernels.assign(m.bound_kernels.begin(), m.bound_kernels.end());
  r->shapes_at.assign(m.adapt_shapes_at.begin(), m.adapt_shapes_at.end());
  r->kernels_set.reserve(c.steps.size());
  r->made.reserve(m.remade_reach.size());
  // A kernel that adapts runs at every size given its operands' shapes: spans
  // into the plan's flat dims, which hold every shape at the sizes resolved
  // into this storage (ops::ResolvePlan never reallocates them), so they are
  // made once, here.
  for (int32_t t : m.adapt_operands) r->shapes.push_back(t >= 0 ? r->plan.dims_of(t) : std::span<const int64_t>());
  r->output_shapes.resize(c.outputs.size());
  for (size_t k = 0; k < c.outputs.size(); ++k) r->output_shapes[k].reserve(c.tensors[c.outputs[k]].shape.size());
  r->shape_values.FillResolved(m.shape_values, *m.bound_plan, r->plan);
  r->shape_values.set_steps.reserve(c.steps.size());
  r->shape_values.set_tensors.reserve(c.tensors.size());
  return r;
}

Result<std::unique_ptr<ResolvedMethod>> ResolveMethod(const ProgramImpl&, const PreparedMethod& m,
                                                      const std::vector<ir::Shape>& shapes,
                                                      std::unique_ptr<ResolvedMethod> reuse) {
  const format::ContextDesc& c = *m.context;
  if (!m.bound_plan) return InvalidArgument("method '" + c.method + "': input shapes given for a plan without symbols");
  auto r = reuse ? std::move(reuse) : ReserveResolution(m);
  // The kernels made for the sizes it held: retired (freed later, off this
  // run's path), the generation retired before them freed now.
  r->retired.clear();
  r->retired.swap(r->made);
  const ops::ResolvedPlan& p = r->plan;
  Status st = ops::ResolvePlan(c, *m.bound_plan, shapes, &r->plan);
  if (!st.ok()) return st.Annotate("method '" + c.method + "'");
  if (p.scratch_bytes > c.scratch_bytes)
    return InvalidArgument("method '" + c.method + "' needs " + std::to_string(p.scratch_bytes) +
                           " bytes of scratch per thread at these sizes, more than the " +
                           std::to_string(c.scratch_bytes) + " planned");
  const ops::CheckedPlan& bound = *m.bound_plan;
  std::vector<ops::TensorInfo> inputs, outputs;  // one step's operands, reused (create keeps nothing of them)
  std::vector<const ir::TensorData*> constants;
  // The bound's kernels and shapes_at (ReserveResolution set them, and the
  // adapting kernels' spans, which stay valid), put back where an earlier
  // resolution into this storage (or its specialization) set others.
  for (int32_t si : r->kernels_set) {
    r->kernels[static_cast<size_t>(si)] = m.bound_kernels[static_cast<size_t>(si)];
    r->shapes_at[static_cast<size_t>(si)] = m.adapt_shapes_at[static_cast<size_t>(si)];
  }
  r->kernels_set.clear();
  // The kernels that do not adapt, remade where the step is reached at these
  // sizes: the bound's where none of its operands' shapes or values from the
  // shapes changed (kernels are immutable) or where it is guarded off.
  for (int32_t k : m.remade_reach) {
    const size_t si = static_cast<size_t>(bound.reach_steps[static_cast<size_t>(k)]);
    if (!p.changed(si) || p.guarded_off[si]) continue;
    const ops::OpDef& def = *bound.steps[si].def;
    auto kernel = def.create(p.create_context(c.steps[si], si, &inputs, &outputs, &constants));
    if (!kernel.ok()) return kernel.TakeStatus().Annotate("method '" + c.method + "', " + m.steps[si].where);
    r->made.push_back(std::move(kernel).value());
    r->kernels[si] = r->made.back().get();
    r->kernels_set.push_back(static_cast<int32_t>(si));
  }
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const std::span<const int64_t> shape = p.dims_of(c.outputs[k]);
    r->output_shapes[k].assign(shape.begin(), shape.end());
  }
  r->shape_values.FillResolved(m.shape_values, *m.bound_plan, p);
  return r;
}

Result<ops::SymbolicPlan> SymbolicPlanOf(const format::LoadedFile& file, const format::ContextDesc& c) {
  if (!c.dynamic()) return InvalidArgument("method '" + c.method + "' has no dims chosen at each run");
  FileWeights weights(file, nullptr);
  auto plan = ops::CheckPlan(c, weights);
  if (!plan.ok()) return plan.TakeStatus().Annotate("method '" + c.method + "' (target " + c.target + ")");
  return ops::InferSymbolicPlan(c, plan.value());
}

Status SpecializeMethod(const PreparedMethod& m, ResolvedMethod* r) {
  const format::ContextDesc& c = *m.context;
  std::vector<ops::TensorInfo> inputs, outputs;
  std::vector<const ir::TensorData*> constants;
  for (size_t si = 0; si < r->shapes_at.size(); ++si) {
    if (r->shapes_at[si] < 0 || !r->kernels[si]->worth_specializing()) continue;
    r->kernels_set.push_back(static_cast<int32_t>(si));
    // Unchanged at these sizes or guarded off: the bound's kernel as it is.
    if (!r->plan.changed(si) || r->plan.guarded_off[si]) {
      r->shapes_at[si] = -1;
      continue;
    }
    const ops::OpDef& def = *m.bound_plan->steps[si].def;
    auto kernel = def.create(r->plan.create_context(c.steps[si], si, &inputs, &outputs, &constants));
    if (!kernel.ok()) return kernel.TakeStatus().Annotate("method '" + c.method + "', " + m.steps[si].where);
    r->made.push_back(std::move(kernel).value());
    r->kernels[si] = r->made.back().get();
    r->shapes_at[si] = -1;
  }
  return Status::Ok();
}

uint64_t ResolvedStepFlops(const PreparedMethod& m, const ResolvedMethod& r, size_t step) {
  const ops::ResolvedPlan& p = r.plan;
  if (p.bound->computed_steps[step] || p.guarded_off[step]) return 0;
  if (!p.changed(step)) return m.steps[step].flops;
  const ops::OpDef& def = *m.bound_plan->steps[step].def;
  if (!def.flops) return 0;
  std::vector<ops::TensorInfo> inputs, outputs;
  std::vector<const ir::TensorData*> constants;
  return def.flops(p.create_context(m.context->steps[step], step, &inputs, &outputs, &constants));
}

namespace {

// MemAvailable from /proc/meminfo, else the physical memory, else no limit.
uint64_t HostAvailableMemory() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    std::fclose(f);
    if (found && kb > 0 && kb < (UINT64_MAX >> 10)) return static_cast<uint64_t>(kb) << 10;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return UINT64_MAX;
}

}  // namespace

// Where the memory limit came from, as errors name it.
static std::string MemoryLimitSource(bool from_options) {
  return from_options ? "LoadOptions::max_memory_bytes"
                      : "this host's available memory; LoadOptions::max_memory_bytes sets another";
}

std::string MemoryLimitError(const std::string& method, uint64_t arena, uint64_t scratch, int threads,
                             uint64_t limit, bool from_options) {
  return "method '" + method + "' needs a " + std::to_string(arena) + "-byte arena and " +
         std::to_string(scratch) + " bytes of scratch per thread (" + std::to_string(threads) + " thread" +
         (threads > 1 ? "s" : "") + "), more than the memory limit of " + std::to_string(limit) + " bytes (" +
         MemoryLimitSource(from_options) +
         ")";
}

uint64_t ExecutionBytes(uint64_t arena, uint64_t scratch, int threads) {
  // scratch <= 2^30 (checked at load) and threads <= 1024: no overflow there.
  const uint64_t s = scratch * static_cast<uint64_t>(threads);
  return arena > UINT64_MAX - s ? UINT64_MAX : arena + s;
}

Result<std::unique_ptr<ProgramImpl>> LoadProgram(const std::string& path, const LoadOptions& options) {
  auto impl = std::make_unique<ProgramImpl>();
  // The pool's checksum is deferred (runtime/pool_check.h); the structural
  // checks, the header and metadata checksums run now.
  // One limit for what the load allocates (the decoded metadata, weights
  // converted at load) and for what each execution allocates (arena, scratch).
  impl->memory_limit = options.max_memory_bytes ? options.max_memory_bytes : HostAvailableMemory();
  impl->memory_limit_from_options = options.max_memory_bytes != 0;
  const std::string limit_name = MemoryLimitSource(impl->memory_limit_from_options);
  auto loaded = format::LoadFcbFile(path, /*verify_checksums=*/false, impl->memory_limit);
  if (!loaded.ok() && loaded.status().code() == StatusCode::kResourceExhausted)
    return loaded.TakeStatus().Annotate("(" + limit_name + ")");
  FCB_ASSIGN_OR_RETURN(impl->file, std::move(loaded));
  const auto& desc = impl->file->desc();
  if (desc.plan_version != ops::kPlanVersion && desc.plan_version != ops::kPlanVersionSymbols &&
      desc.plan_version != ops::kPlanVersionFixedShapes)
    return Unsupported("'" + path + "' holds plans of encoding version " + std::to_string(desc.plan_version) +
                       (desc.plan_version > ops::kPlanVersion ? ", newer than" : ", older than") +
                       " this runtime's version " + std::to_string(ops::kPlanVersion) + " (fcb " + Version() +
                       "); recompile the model with this fcb, or run it with the fcb that compiled it (" +
                       desc.producer + ")");
  for (const auto& c : desc.contexts)
    if (!c.state.empty() && desc.plan_version < ops::kPlanVersion)
      return CorruptFile("'" + path + "' method '" + c.method + "' (target " + c.target +
                         ") has state bindings, which plans of encoding version " +
                         std::to_string(desc.plan_version) + " cannot hold (version " +
                         std::to_string(ops::kPlanVersion) + " or later)");
  for (const auto& c : desc.contexts)
    if (std::find(impl->targets_in_file.begin(), impl->targets_in_file.end(), c.target) == impl->targets_in_file.end())
      impl->targets_in_file.push_back(c.target);
  if (impl->targets_in_file.empty()) return CorruptFile("'" + path + "' holds no compiled contexts");
  FCB_ASSIGN_OR_RETURN(impl->target, SelectTarget(impl->targets_in_file, options.target, path));
  impl->target_name = TargetName(impl->target);
  impl->kernels = &kernels::GetKernelBundle(impl->target);
  // Blobs that can steer control flow are verified as they are read
  // (PrepareMethod); the whole pool in the background, see below.
  std::vector<bool> checked(desc.blobs.size(), false);
  // What this load allocates beyond the mapping: the decoded metadata, and
  // bfloat16 weights widened to float32 when their kernels are made (the
  // most any kernel converts at load). Checked before any kernel is made.
  uint64_t load_bytes = impl->file->decoded_bytes();
  for (const auto& c : desc.contexts) {
    if (c.target != impl->target_name) continue;
    for (const auto& t : c.tensors) {
      if (t.storage != format::Storage::kWeight || t.dtype != DType::kBF16) continue;
      if (t.blob >= 0 && static_cast<size_t>(t.blob) < desc.blobs.size())
        load_bytes += std::min<uint64_t>(desc.blobs[t.blob].size, UINT64_MAX / 4) * 2;
      if (load_bytes > impl->memory_limit) break;
    }
  }
  if (load_bytes > impl->memory_limit)
    return ResourceExhausted("'" + path + "', target " + impl->target_name + ": loading it takes " +
                             std::to_string(load_bytes) +
                             " bytes (decoded metadata and weights converted at load), more than the memory limit of " +
                             std::to_string(impl->memory_limit) + " bytes (" + limit_name + ")");
  for (const auto& c : desc.contexts) {
    if (c.target != impl->target_name) continue;
    if (impl->Find(c.method)) return CorruptFile("'" + path + "' holds method '" + c.method + "' twice for target " + c.target);
    // Sizes from the file, checked before anything is allocated for them.
    const uint64_t scratch = std::min<uint64_t>(c.scratch_bytes, uint64_t{1} << 30);  // more is refused below
    if (ExecutionBytes(c.arena_bytes, scratch, 1) > impl->memory_limit)
      return ResourceExhausted("'" + path + "', target " + c.target + ": " +
                               MemoryLimitError(c.method, c.arena_bytes, c.scratch_bytes, 1, impl->memory_limit,
                                                options.max_memory_bytes != 0));
    PreparedMethod m;
    Status s = PrepareMethod(*impl->file, c, &m, options.verify_checksums ? &checked : nullptr);
    if (!s.ok()) return s.Annotate("'" + path + "', target " + c.target + ", method '" + c.method + "'");
    s = PrepareState(c, &m, &impl->state_vars);
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

std::vector<std::string> Program::attachments() const {
  std::vector<std::string> v;
  for (const auto& a : impl_->file->desc().attachments) v.push_back(a.name);
  return v;
}

Result<std::string_view> Program::attachment(const std::string& name) const {
  const auto& list = impl_->file->desc().attachments;
  // Sorted by name (the loader checked), so a binary search finds it.
  auto it = std::lower_bound(list.begin(), list.end(), name,
                             [](const format::AttachmentDesc& a, const std::string& n) { return a.name < n; });
  if (it == list.end() || it->name != name)
    return NotFound("fcb file '" + impl_->file->path() + "' has no attachment '" + EscapeForDisplay(name) + "'; " +
                    (list.empty() ? std::string("it has none")
                                  : "its attachments: " + EscapeForDisplay(JoinNames(attachments()))));
  FCB_RETURN_IF_ERROR(impl_->file->VerifyBlob(it->blob, "attachment '" + EscapeForDisplay(name) + "'"));
  const uint8_t* p = impl_->file->blob_data(it->blob);
  return std::string_view(reinterpret_cast<const char*>(p), impl_->file->desc().blobs[it->blob].size);
}

uint64_t TensorSpec::bytes() const {
  return static_cast<uint64_t>(ir::NumElements(shape)) * DTypeSize(dtype);
}

}  // namespace fcb
