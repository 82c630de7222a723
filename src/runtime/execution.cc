#include <chrono>
#include <cstring>
#include <system_error>

#include "core/arena_memory.h"
#include "core/fault.h"
#include "core/thread_pool.h"
#include "runtime/program_impl.h"

namespace fcb {

// The mutable state of one method's run: the arena, the thread pool and, per
// step, its operand pointers, resolved once so Run allocates nothing.
class ExecutionImpl {
 public:
  std::shared_ptr<const Program> program;
  const PreparedMethod* method = nullptr;
  ArenaMemory arena;
  // Each thread's kernel scratch (the plan's scratch_bytes per thread), a
  // block of its own: placed right after the activations in one mapping it
  // cost mobilenet_v2 ~6 % at 1 thread (measured A/B, min of 10 x 40 runs),
  // the packed-A blocks of the 1x1 convolutions then sharing cache sets with
  // the activations they are copied from.
  ArenaMemory scratch_memory;
  std::unique_ptr<ThreadPool> pool;
  std::vector<void*> tensor_ptr;
  uint8_t* scratch = nullptr;  // num_threads slices of the plan's scratch_bytes (scratch_memory)
  size_t scratch_stride = 0;
  std::vector<std::vector<const void*>> step_in;
  std::vector<std::vector<void*>> step_out;
};

Execution::Execution(std::unique_ptr<ExecutionImpl> impl) : impl_(std::move(impl)) {}
Execution::~Execution() = default;

Result<std::unique_ptr<Execution>> Execution::Create(std::shared_ptr<const Program> program,
                                                     const std::string& method, int num_threads) {
  if (!program) return InvalidArgument("Execution::Create needs a loaded program");
  if (num_threads < 1 || num_threads > 1024)
    return InvalidArgument("thread count " + std::to_string(num_threads) + " must be between 1 and 1024");
  const PreparedMethod* m = ProgramAccess::Of(*program).Find(method);
  if (!m) return program->method(method).TakeStatus();
  auto impl = std::make_unique<ExecutionImpl>();
  impl->method = m;
  // The activations, and each thread's scratch (both planned at compile time).
  const uint64_t arena_bytes = std::max<uint64_t>(m->context->arena_bytes, 64);
  const uint64_t scratch = m->context->scratch_bytes * static_cast<uint64_t>(num_threads);
  const ProgramImpl& p = ProgramAccess::Of(*program);
  if (ExecutionBytes(m->context->arena_bytes, m->context->scratch_bytes, num_threads) > p.memory_limit)
    return ResourceExhausted(MemoryLimitError(method, m->context->arena_bytes, m->context->scratch_bytes,
                                              num_threads, p.memory_limit, p.memory_limit_from_options));
  if (fault::Hit(fault::Kind::kArena, method) || !impl->arena.Allocate(arena_bytes) ||
      (scratch && !impl->scratch_memory.Allocate(scratch)))
    return ResourceExhausted("cannot allocate the " + std::to_string(arena_bytes) + "-byte arena and " +
                             std::to_string(scratch) + " bytes of scratch of method '" + method + "'");
  if (scratch) {
    impl->scratch = impl->scratch_memory.data();
    impl->scratch_stride = m->context->scratch_bytes;
  }
  const auto& tensors = m->context->tensors;
  impl->tensor_ptr.resize(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t)
    impl->tensor_ptr[t] = m->weights[t] ? const_cast<void*>(m->weights[t]) : impl->arena.data() + tensors[t].offset;
  for (const auto& s : m->steps) {
    std::vector<const void*> in;
    for (int32_t t : s.inputs) in.push_back(t < 0 ? nullptr : impl->tensor_ptr[t]);
    std::vector<void*> out;
    for (int32_t t : s.outputs) out.push_back(impl->tensor_ptr[t]);
    impl->step_in.push_back(std::move(in));
    impl->step_out.push_back(std::move(out));
  }
  if (fault::Hit(fault::Kind::kThreads, method))
    return ResourceExhausted("cannot start " + std::to_string(num_threads) + " threads for method '" + method +
                             "' (injected fault)");
  try {
    impl->pool = std::make_unique<ThreadPool>(num_threads);
  } catch (const std::system_error& e) {
    return ResourceExhausted("cannot start " + std::to_string(num_threads) + " threads: " + e.what());
  }
  impl->program = std::move(program);
  return std::unique_ptr<Execution>(new Execution(std::move(impl)));
}

const MethodInfo& Execution::info() const { return impl_->method->info; }

Status Execution::SetInput(const std::string& name, const void* data, size_t bytes) {
  const auto& m = *impl_->method;
  for (size_t i = 0; i < m.info.inputs.size(); ++i) {
    if (m.info.inputs[i].name != name) continue;
    const uint64_t want = m.info.inputs[i].bytes();
    if (bytes != want)
      return InvalidArgument("input '" + name + "' needs " + std::to_string(want) + " bytes (" +
                             DTypeName(m.info.inputs[i].dtype) + " " + ir::ShapeToString(m.info.inputs[i].shape) +
                             "), got " + std::to_string(bytes));
    if (bytes) std::memcpy(impl_->tensor_ptr[m.input_tensors[i]], data, bytes);  // empty: data may be null
    return Status::Ok();
  }
  std::string names;
  for (const auto& in : m.info.inputs) names += (names.empty() ? "" : ", ") + in.name;
  return NotFound("method '" + m.info.name + "' has no input '" + name + "'; its inputs are: " + names);
}

Status Execution::Run() {
  const auto& m = *impl_->method;
  ops::RunContext ctx{ProgramAccess::Of(*impl_->program).kernels, impl_->pool.get(), impl_->scratch,
                      impl_->scratch_stride};
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Status s = m.steps[i].kernel->Run(ctx, impl_->step_in[i].data(), impl_->step_out[i].data());
    if (!s.ok()) return s.Annotate("method '" + m.info.name + "', " + m.steps[i].where);
  }
  // The weight pool's checksum runs in the background from Program::Load on
  // (runtime/pool_check.h); no run succeeds before it has passed.
  return ProgramAccess::Of(*impl_->program).pool_check.Wait();
}

Status Execution::RunProfiled(std::vector<StepTiming>* steps) {
  if (!steps) return InvalidArgument("RunProfiled: steps is null");
  const auto& m = *impl_->method;
  const auto& c = *m.context;
  steps->assign(m.steps.size(), StepTiming{});
  ops::RunContext ctx{ProgramAccess::Of(*impl_->program).kernels, impl_->pool.get(), impl_->scratch,
                      impl_->scratch_stride};
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto prev = t0;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Status s = m.steps[i].kernel->Run(ctx, impl_->step_in[i].data(), impl_->step_out[i].data());
    const auto now = Clock::now();
    StepTiming& t = (*steps)[i];
    t.start_ms = std::chrono::duration<double, std::milli>(prev - t0).count();
    t.ms = std::chrono::duration<double, std::milli>(now - prev).count();
    prev = now;
    const auto& sd = c.steps[i];
    t.op = sd.op;
    t.node = sd.node;
    if (!sd.outputs.empty()) {
      t.output_dtype = c.tensors[sd.outputs[0]].dtype;
      t.output_shape = c.tensors[sd.outputs[0]].shape;
    }
    t.flops = m.steps[i].flops;
    if (!s.ok()) return s.Annotate("method '" + m.info.name + "', " + m.steps[i].where);
  }
  return ProgramAccess::Of(*impl_->program).pool_check.Wait();
}

const void* Execution::output_data(size_t i) const {
  const auto& m = *impl_->method;
  return i < m.output_tensors.size() ? impl_->tensor_ptr[m.output_tensors[i]] : nullptr;
}

}  // namespace fcb
