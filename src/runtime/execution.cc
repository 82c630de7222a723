#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>

#include "core/arena_memory.h"
#include "core/fault.h"
#include "core/thread_pool.h"
#include "runtime/program_impl.h"

namespace fcb {

// A State's buffers: one zeroed block per program state variable
// (ProgramImpl::state_vars), each 64-byte aligned like the arena.
class StateImpl {
 public:
  std::shared_ptr<const Program> program;
  std::vector<std::unique_ptr<ArenaMemory>> buffers;  // per variable
  // Per variable: the valid rows of a growing cache (KvAppend; 0 after
  // Create and Reset), which its past input's dim 2 is at each run.
  std::vector<int64_t> length;
};

State::State(std::unique_ptr<StateImpl> impl) : impl_(std::move(impl)) {}
State::~State() = default;

Result<std::shared_ptr<State>> State::Create(std::shared_ptr<const Program> program) {
  if (!program) return InvalidArgument("State::Create needs a loaded program");
  auto impl = std::make_unique<StateImpl>();
  for (const StateVar& v : ProgramAccess::Of(*program).state_vars) {
    auto mem = std::make_unique<ArenaMemory>();
    if (!mem->Allocate(std::max<uint64_t>(v.bytes, 64)))
      return ResourceExhausted("cannot allocate the " + std::to_string(v.bytes) + " bytes of state '" + v.name + "'");
    impl->buffers.push_back(std::move(mem));
    impl->length.push_back(0);
  }
  impl->program = std::move(program);
  return std::shared_ptr<State>(new State(std::move(impl)));
}

std::vector<TensorSpec> State::variables() const {
  std::vector<TensorSpec> v;
  for (const StateVar& s : ProgramAccess::Of(*impl_->program).state_vars) v.push_back({s.name, s.dtype, s.shape, {}, {}});
  return v;
}

Result<void*> State::data(const std::string& name) {
  const auto& vars = ProgramAccess::Of(*impl_->program).state_vars;
  std::string names;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].name == name) return static_cast<void*>(impl_->buffers[i]->data());
    names += (names.empty() ? "" : ", ") + vars[i].name;
  }
  return NotFound("the program has no state '" + name + "'; its state variables are: " +
                  (names.empty() ? std::string("none") : names));
}

void State::Reset() {
  const auto& vars = ProgramAccess::Of(*impl_->program).state_vars;
  for (size_t i = 0; i < vars.size(); ++i) std::memset(impl_->buffers[i]->data(), 0, vars[i].bytes);
  std::fill(impl_->length.begin(), impl_->length.end(), 0);
}

Result<int64_t> State::valid_length(const std::string& name) const {
  const auto& vars = ProgramAccess::Of(*impl_->program).state_vars;
  std::string names;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].name == name) return impl_->length[i];
    names += (names.empty() ? "" : ", ") + vars[i].name;
  }
  return NotFound("the program has no state '" + name + "'; its state variables are: " +
                  (names.empty() ? std::string("none") : names));
}

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
  std::shared_ptr<State> state;  // bound State (methods with state), else null
  std::vector<void*> tensor_ptr;
  uint8_t* scratch = nullptr;  // num_threads slices of the plan's scratch_bytes (scratch_memory)
  size_t scratch_stride = 0;
  std::vector<std::vector<const void*>> step_in;
  std::vector<std::vector<void*>> step_out;

  // Methods with ranges: each input's current shape, and the kernels for
  // the current sizes (null: the bound, the method's own kernels), kept per
  // combination of sizes in a small cache (least recently used goes first).
  std::vector<std::vector<int64_t>> input_shapes;
  bool sizes_changed = false;
  const ResolvedMethod* resolved = nullptr;
  struct CacheEntry {
    std::unique_ptr<ResolvedMethod> method;
    uint64_t last_used = 0;
    bool specialized = false;  // SpecializeMethod done (on the second run at these sizes)
  };
  std::vector<CacheEntry> cache;
  // The storage of the entries the cache has yet to fill, reserved when the
  // execution was made (ReserveResolution): a first run at new sizes then
  // allocates next to nothing.
  std::vector<std::unique_ptr<ResolvedMethod>> spare;
  // Per cache entry, the symbols' values it was resolved at (entry j's at
  // [j * symbols, (j + 1) * symbols)): the inputs' shapes follow from them
  // (SetInput holds every other dim to the method's), and a lookup reads
  // this one compact array rather than each entry's shapes.
  std::vector<int64_t> cache_keys;
  int current = -1;  // the entry `resolved` is, or -1 (the bound)
  std::vector<int64_t> symbol_value;  // Resolve's, per symbol
  std::vector<std::pair<size_t, size_t>> symbol_first;
  uint64_t clock = 0;
  // A second run at the current sizes: kernels made for exactly them replace
  // the adapting ones (SpecializeMethod), whose per-run walks repeated runs
  // need not pay; a first run at new sizes does not wait for them.
  Status SpecializeCurrent() {
    if (current < 0 || cache[current].specialized) return Status::Ok();
    cache[current].specialized = true;
    // The kernels retired by first runs at new sizes are freed here, with
    // the kernels made (ResolvedMethod::retired).
    for (CacheEntry& e : cache) e.method->retired.clear();
    return SpecializeMethod(*method, cache[current].method.get());
  }
  static constexpr size_t kCacheEntries = 16;

  const ops::Kernel& kernel(size_t step) const {
    return resolved ? *resolved->kernels[step] : *method->steps[step].kernel;
  }
  const ShapeValues& shape_values() const { return resolved ? resolved->shape_values : method->shape_values; }
  // Step i of a run: its kernel, or the outputs' values computed from the
  // shapes copied in, or nothing (ShapeValues).
  Status RunStep(const ops::RunContext& ctx, size_t i) const {
    const ShapeValues& sv = shape_values();
    if (!sv.actions.empty() && sv.actions[i] != ShapeValues::Action::kRun) {
      if (sv.actions[i] == ShapeValues::Action::kCopy) {
        const auto& outs = method->steps[i].outputs;
        for (size_t k = 0; k < outs.size(); ++k)
          if (const ir::TensorData* v = sv.values[outs[k]]) std::memcpy(step_out[i][k], v->bytes.data(), v->bytes.size());
      }
      return Status::Ok();
    }
    if (resolved && resolved->shapes_at[i] >= 0) {  // the bound's kernel, at these sizes
      ops::RunContext at = ctx;
      at.shapes = resolved->shapes.data() + resolved->shapes_at[i];
      return kernel(i).Run(at, step_in[i].data(), step_out[i].data());
    }
    return kernel(i).Run(ctx, step_in[i].data(), step_out[i].data());
  }
  Status Resolve();
  Status CheckStateCapacity() const;
  // Growing caches: each past input's rows are its State variable's valid length.
  void SyncStateLengths() {
    for (const PreparedState& ps : method->state) {
      if (!ps.grows) continue;
      auto& shape = input_shapes[ps.input];
      const int64_t len = state->impl_->length[ps.var];
      if (shape.size() == 4 && shape[2] != len) shape[2] = len, sizes_changed = true;
    }
  }
  // Rows of a growing cache's present at the current sizes.
  int64_t PresentRows(const PreparedState& ps) const {
    const auto& shape = resolved ? resolved->output_shapes[ps.output] : method->info.outputs[ps.output].shape;
    return shape.size() == 4 ? shape[2] : 0;
  }
  // After a run: each growing cache holds its present's rows.
  void AdvanceStateLengths() {
    for (const PreparedState& ps : method->state)
      if (ps.grows) state->impl_->length[ps.var] = PresentRows(ps);
  }
};

// Each state's valid length after this run, where a method input gives it
// (GroupQueryAttention's seqlens_k: length - 1 per batch), against the
// buffer's capacity: checked before any step runs, so a refused run leaves
// every state as it was.
Status ExecutionImpl::CheckStateCapacity() const {
  const PreparedMethod& m = *method;
  for (const PreparedState& ps : m.state) {
    if (ps.grows) {
      const int64_t rows = PresentRows(ps), past = input_shapes[ps.input][2];
      if (rows > ps.capacity)
        return InvalidArgument("method '" + m.info.name + "': state '" + m.info.inputs[ps.input].name + "' holds " +
                               std::to_string(past) + " valid rows and this run appends " +
                               std::to_string(rows - past) + " (the inputs' sequence length), " +
                               std::to_string(rows) + " in all, past its capacity of " +
                               std::to_string(ps.capacity) + " rows (kv_capacity); nothing was run and the state "
                               "is unchanged (ResetState to start over, or compile with a larger kv_capacity)");
      continue;
    }
    if (ps.seqlens_input < 0) continue;
    const auto& shape = input_shapes[ps.seqlens_input];
    const int64_t n = ir::NumElements(shape);
    const auto* seqlens = static_cast<const int32_t*>(tensor_ptr[m.input_tensors[ps.seqlens_input]]);
    for (int64_t b = 0; b < n; ++b)
      if (int64_t{seqlens[b]} + 1 > ps.capacity)
        return InvalidArgument("method '" + m.info.name + "': input '" + m.info.inputs[ps.seqlens_input].name +
                               "' gives batch " + std::to_string(b) + " " + std::to_string(int64_t{seqlens[b]} + 1) +
                               " valid rows after this run, past the capacity of " + std::to_string(ps.capacity) +
                               " rows of state '" + m.info.inputs[ps.input].name +
                               "'; nothing was run and the state is unchanged (ResetState to start over, or "
                               "export the model with a larger cache)");
  }
  return Status::Ok();
}

// The sizes the inputs were given, checked to agree per symbol, then the
// kernels for them: the bound's, a cached resolution, or a new one.
Status ExecutionImpl::Resolve() {
  const PreparedMethod& m = *method;
  const auto& syms = m.context->symbols;
  std::vector<int64_t>& value = symbol_value;  // members: a change of sizes allocates nothing here
  std::vector<std::pair<size_t, size_t>>& first = symbol_first;  // (input, dim) that set each symbol
  value.assign(syms.size(), -1);
  first.assign(syms.size(), {0, 0});
  bool at_bound = true;
  for (size_t i = 0; i < input_shapes.size(); ++i)
    for (size_t d = 0; d < input_shapes[i].size(); ++d) {
      const int32_t s = m.input_symbols[i][d];
      if (s < 0) continue;
      const int64_t v = input_shapes[i][d];
      if (value[s] < 0) {
        value[s] = v;
        first[s] = {i, d};
        at_bound = at_bound && v == syms[s].hi;
      } else if (value[s] != v) {
        const auto [fi, fd] = first[s];
        return InvalidArgument("method '" + m.info.name + "': input '" + m.info.inputs[i].name + "' dim " +
                               std::to_string(d) + " is " + std::to_string(v) + " but input '" +
                               m.info.inputs[fi].name + "' dim " + std::to_string(fd) + " is " +
                               std::to_string(value[s]) + "; both are the symbol '" + syms[s].name +
                               "', one size per run: give them the same size");
      }
    }
  sizes_changed = false;
  ++clock;
  current = -1;
  if (at_bound) {
    resolved = nullptr;
    return Status::Ok();
  }
  const size_t n_sym = value.size();
  for (size_t j = 0; j < cache.size(); ++j)
    if (std::equal(value.begin(), value.end(), cache_keys.begin() + static_cast<std::ptrdiff_t>(j * n_sym))) {
      cache[j].last_used = clock;
      resolved = cache[j].method.get();
      current = static_cast<int>(j);
      return SpecializeCurrent();
    }
  resolved = nullptr;
  // Sizes the method's steps cannot take together (a mask one longer than
  // the past, say): refused naming the relation and the inputs that gave it.
  for (const auto& [a, b] : m.requirements) {
    if (std::find(value.begin(), value.end(), -1) != value.end()) break;  // a symbol no input gives
    auto x = a.Evaluate(value), y = b.Evaluate(value);
    if (x.ok() && y.ok() && x.value() == y.value()) continue;
    ir::SymbolTable table;
    for (const auto& sym : syms) (void)table.Add(sym.name, sym.lo, sym.hi);
    std::vector<int> ids = a.Symbols();
    for (int id : b.Symbols())
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    std::string given;
    for (int id : ids) {
      const auto [fi, fd] = first[static_cast<size_t>(id)];
      given += std::string(given.empty() ? "" : ", ") + "input '" + m.info.inputs[fi].name + "' dim " +
               std::to_string(fd) + " (" + syms[id].name + " = " + std::to_string(value[id]) + ")";
    }
    sizes_changed = true;  // the next run is refused again
    return InvalidArgument("method '" + m.info.name + "': its steps need " + a.ToString(&table) + " == " +
                           b.ToString(&table) + " at every run, but " + given + (ids.size() == 1 ? " gives " : " give ") +
                           (x.ok() ? std::to_string(x.value()) : "no value") + " and " +
                           (y.ok() ? std::to_string(y.value()) : "no value") +
                           "; give the inputs sizes that meet it");
  }
  // A full cache: the least recently used entry is resolved over (its
  // storage reused, ResolveMethod) rather than destroyed and made anew.
  CacheEntry* entry = nullptr;
  if (cache.size() >= kCacheEntries) {
    entry = &*std::min_element(cache.begin(), cache.end(),
                               [](const CacheEntry& a, const CacheEntry& b) { return a.last_used < b.last_used; });
  } else {
    cache.emplace_back();
    cache_keys.resize(cache.size() * n_sym);
    entry = &cache.back();
    if (!spare.empty()) {
      entry->method = std::move(spare.back());
      spare.pop_back();
    }
  }
  const size_t slot = static_cast<size_t>(entry - cache.data());
  auto r = ResolveMethod(ProgramAccess::Of(*program), m, input_shapes, std::move(entry->method));
  if (!r.ok()) {
    cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(slot));
    cache_keys.erase(cache_keys.begin() + static_cast<std::ptrdiff_t>(slot * n_sym),
                     cache_keys.begin() + static_cast<std::ptrdiff_t>((slot + 1) * n_sym));
    sizes_changed = true;  // the next run tries again (and is refused again), never runs the bound's kernels
    return r.TakeStatus();
  }
  std::copy(value.begin(), value.end(), cache_keys.begin() + static_cast<std::ptrdiff_t>(slot * n_sym));
  entry->method = std::move(r).value();
  entry->specialized = false;
  entry->last_used = clock;
  resolved = entry->method.get();
  current = static_cast<int>(entry - cache.data());
  return Status::Ok();
}

Execution::Execution(std::unique_ptr<ExecutionImpl> impl) : impl_(std::move(impl)) {}
Execution::~Execution() = default;

Result<std::unique_ptr<Execution>> Execution::Create(std::shared_ptr<const Program> program,
                                                     const std::string& method, int num_threads) {
  return Create(std::move(program), method, num_threads, nullptr);
}

Result<std::unique_ptr<Execution>> Execution::Create(std::shared_ptr<const Program> program,
                                                     const std::string& method, int num_threads,
                                                     std::shared_ptr<State> state) {
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
    impl->tensor_ptr[t] = m->weights[t]                                      ? const_cast<void*>(m->weights[t])
                          : tensors[t].storage == format::Storage::kState ? nullptr  // bound below
                                                                           : impl->arena.data() + tensors[t].offset;
  // A state's input and output are its buffer in the bound State (stored
  // kState: no arena bytes; in files written before kState their arena
  // slots go unused).
  if (!m->state.empty()) {
    if (!state) {
      FCB_ASSIGN_OR_RETURN(state, State::Create(program));
    } else if (state->impl_->program.get() != program.get()) {
      return InvalidArgument("the State given for method '" + method +
                             "' was created from another program; create it from this one (State::Create)");
    }
    for (const PreparedState& ps : m->state) {
      void* buf = state->impl_->buffers[ps.var]->data();
      impl->tensor_ptr[m->input_tensors[ps.input]] = buf;
      impl->tensor_ptr[m->output_tensors[ps.output]] = buf;
    }
    impl->state = std::move(state);
  }
  for (const auto& s : m->steps) {
    std::vector<const void*> in;
    for (int32_t t : s.inputs) in.push_back(t < 0 ? nullptr : impl->tensor_ptr[t]);
    std::vector<void*> out;
    for (int32_t t : s.outputs) out.push_back(impl->tensor_ptr[t]);
    impl->step_in.push_back(std::move(in));
    impl->step_out.push_back(std::move(out));
  }
  for (const auto& in : m->info.inputs) impl->input_shapes.push_back(in.shape);
  if (m->dynamic()) {
    impl->cache.reserve(ExecutionImpl::kCacheEntries);
    impl->cache_keys.reserve(ExecutionImpl::kCacheEntries * m->context->symbols.size());
    for (size_t k = 0; k < ExecutionImpl::kCacheEntries; ++k) impl->spare.push_back(ReserveResolution(*m));
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

const std::shared_ptr<State>& Execution::state() const { return impl_->state; }

void Execution::ResetState() {
  if (impl_->state) impl_->state->Reset();
}

static std::string RangeText(int64_t lo, int64_t hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

static Result<size_t> FindInput(const PreparedMethod& m, const std::string& name) {
  for (size_t i = 0; i < m.info.inputs.size(); ++i)
    if (m.info.inputs[i].name == name) return i;
  std::string names;
  for (const auto& in : m.info.inputs) names += (names.empty() ? "" : ", ") + in.name;
  return NotFound("method '" + m.info.name + "' has no input '" + name + "'; its inputs are: " + names);
}

Status Execution::SetInput(const std::string& name, const void* data, size_t bytes) {
  FCB_ASSIGN_OR_RETURN(size_t i, FindInput(*impl_->method, name));
  for (const PreparedState& ps : impl_->method->state)
    if (ps.grows && ps.input == i) {
      // A growing cache's past: its current valid rows.
      std::vector<int64_t> shape = impl_->input_shapes[i];
      shape[2] = impl_->state->impl_->length[ps.var];
      return SetInput(name, data, bytes, shape);
    }
  const TensorSpec& spec = impl_->method->info.inputs[i];
  const std::vector<int64_t> shape = impl_->input_shapes[i];
  const uint64_t want = static_cast<uint64_t>(ir::NumElements(shape)) * DTypeSize(spec.dtype);
  if (bytes != want)
    return InvalidArgument("input '" + name + "' needs " + std::to_string(want) + " bytes (" + DTypeName(spec.dtype) +
                           " " + ir::ShapeToString(shape) + "), got " + std::to_string(bytes) +
                           (spec.dynamic() ? "; to give it another shape, pass the shape with the data" : ""));
  if (bytes) std::memcpy(impl_->tensor_ptr[impl_->method->input_tensors[i]], data, bytes);  // empty: data may be null
  return Status::Ok();
}

Status Execution::SetInput(const std::string& name, const void* data, size_t bytes,
                           const std::vector<int64_t>& shape) {
  const PreparedMethod& m = *impl_->method;
  FCB_ASSIGN_OR_RETURN(size_t i, FindInput(m, name));
  const TensorSpec& spec = m.info.inputs[i];
  const std::string given = "input '" + name + "' of method '" + m.info.name + "' is given the shape " +
                            ir::ShapeToString(shape);
  if (shape.size() != spec.shape.size())
    return InvalidArgument(given + " (rank " + std::to_string(shape.size()) + "); it has rank " +
                           std::to_string(spec.shape.size()) + " (" + ir::ShapeToString(spec.shape) + ")");
  for (size_t d = 0; d < shape.size(); ++d) {
    const int32_t s = m.input_symbols[i][d];
    if (s < 0) {
      if (shape[d] != spec.shape[d])
        return InvalidArgument(given + ", but its dim " + std::to_string(d) + " is fixed to " +
                               std::to_string(spec.shape[d]));
      continue;
    }
    const auto& sym = m.context->symbols[s];
    if (shape[d] < sym.lo || shape[d] > sym.hi) {
      // A method keeping a KV cache whose capacity this size passes: say so
      // (the attention mask's length is the cache's valid length).
      std::string cache;
      for (const PreparedState& ps : m.state)
        if (shape[d] > sym.hi && shape[d] > ps.capacity && sym.hi <= ps.capacity) {
          cache = "; that is past the capacity of the KV cache ('" + m.info.inputs[ps.input].name + "' holds " +
                  std::to_string(ps.capacity) + " positions): nothing ran and the state is as it was";
          break;
        }
      return InvalidArgument(given + ", but its dim " + std::to_string(d) + " is the symbol '" + sym.name +
                             "' with the range " + RangeText(sym.lo, sym.hi) +
                             " it was compiled for; recompile with a wider range to run " + std::to_string(shape[d]) +
                             cache);
    }
  }
  const uint64_t want = static_cast<uint64_t>(ir::NumElements(shape)) * DTypeSize(spec.dtype);
  if (bytes != want)
    return InvalidArgument(given + ", which needs " + std::to_string(want) + " bytes (" + DTypeName(spec.dtype) +
                           "), got " + std::to_string(bytes));
  const PreparedState* growing = nullptr;
  for (const PreparedState& ps : m.state)
    if (ps.grows && ps.input == i) growing = &ps;
  if (growing) {
    // The valid rows of a growing cache: written into its State buffer, each
    // head's rows at the head's stride (capacity rows), and its valid length.
    const int64_t heads = shape[0] * shape[1], rows = shape[2], head = shape[3];
    const size_t row_bytes = static_cast<size_t>(head) * DTypeSize(spec.dtype);
    auto* buf = static_cast<uint8_t*>(impl_->tensor_ptr[m.input_tensors[i]]);
    for (int64_t h = 0; h < heads && rows > 0; ++h)
      std::memcpy(buf + static_cast<size_t>(h * growing->capacity) * row_bytes,
                  static_cast<const uint8_t*>(data) + static_cast<size_t>(h * rows) * row_bytes, rows * row_bytes);
    impl_->state->impl_->length[growing->var] = rows;
  } else if (bytes) {
    std::memcpy(impl_->tensor_ptr[m.input_tensors[i]], data, bytes);
  }
  if (impl_->input_shapes[i] != shape) {
    impl_->input_shapes[i] = shape;
    impl_->sizes_changed = true;
  }
  return Status::Ok();
}

const std::vector<int64_t>& Execution::input_shape(size_t i) const {
  static const std::vector<int64_t> kNone;
  return i < impl_->input_shapes.size() ? impl_->input_shapes[i] : kNone;
}

const std::vector<int64_t>& Execution::output_shape(size_t i) const {
  static const std::vector<int64_t> kNone;
  const auto& m = *impl_->method;
  if (i >= m.info.outputs.size()) return kNone;
  // A growing cache's present is its State buffer, [B, heads, capacity, head]
  // (its valid rows: State::valid_length).
  for (const PreparedState& ps : m.state)
    if (ps.grows && ps.output == i) return ProgramAccess::Of(*impl_->program).state_vars[ps.var].shape;
  return impl_->resolved ? impl_->resolved->output_shapes[i] : m.info.outputs[i].shape;
}

uint64_t Execution::output_bytes(size_t i) const {
  const auto& m = *impl_->method;
  if (i >= m.info.outputs.size()) return 0;
  return static_cast<uint64_t>(ir::NumElements(output_shape(i))) * DTypeSize(m.info.outputs[i].dtype);
}

Status Execution::Run() {
  const auto& m = *impl_->method;
  ops::RunContext ctx{ProgramAccess::Of(*impl_->program).kernels, impl_->pool.get(), impl_->scratch,
                      impl_->scratch_stride};
  if (!m.state.empty()) impl_->SyncStateLengths();
  FCB_RETURN_IF_ERROR(impl_->sizes_changed ? impl_->Resolve() : impl_->SpecializeCurrent());
  if (!m.state.empty()) FCB_RETURN_IF_ERROR(impl_->CheckStateCapacity());
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Status s = impl_->RunStep(ctx, i);
    if (!s.ok()) return s.Annotate("method '" + m.info.name + "', " + m.steps[i].where);
  }
  if (!m.state.empty()) impl_->AdvanceStateLengths();
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
  if (!m.state.empty()) impl_->SyncStateLengths();
  FCB_RETURN_IF_ERROR(impl_->sizes_changed ? impl_->Resolve() : impl_->SpecializeCurrent());
  if (!m.state.empty()) FCB_RETURN_IF_ERROR(impl_->CheckStateCapacity());
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto prev = t0;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Status s = impl_->RunStep(ctx, i);
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
      if (impl_->resolved) {
        const std::span<const int64_t> shape = impl_->resolved->plan.dims_of(sd.outputs[0]);
        t.output_shape.assign(shape.begin(), shape.end());
      } else {
        t.output_shape = c.tensors[sd.outputs[0]].shape;
      }
    }
    t.flops = impl_->resolved ? ResolvedStepFlops(m, *impl_->resolved, i) : m.steps[i].flops;
    for (size_t k = 0; k < sd.outputs.size(); ++k) {
      const auto& td = c.tensors[sd.outputs[k]];
      const uint64_t elem = DTypeSize(td.dtype);
      const PreparedState* st = nullptr;
      for (const PreparedState& ps : m.state)
        if (m.output_tensors[ps.output] == sd.outputs[k]) st = &ps;
      if (st && st->grows && t.output_shape.size() == 4) {
        // KvAppend: the rows appended past the valid length, per head.
        const int64_t appended = t.output_shape[2] - impl_->input_shapes[st->input][2];
        t.bytes_written += static_cast<uint64_t>(td.shape[0] * td.shape[1] * td.shape[3] * appended) * elem;
      } else if (st && td.shape.size() == 4 && t.output_shape.size() >= 2) {
        // [B, heads, capacity, head]: the step appends output 0's dim 1 (its new tokens) rows.
        t.bytes_written += static_cast<uint64_t>(td.shape[0] * td.shape[1] * td.shape[3] * t.output_shape[1]) * elem;
      } else {
        t.bytes_written += static_cast<uint64_t>(ir::NumElements(k == 0 ? t.output_shape : td.shape)) * elem;
      }
    }
    if (!s.ok()) return s.Annotate("method '" + m.info.name + "', " + m.steps[i].where);
  }
  if (!m.state.empty()) impl_->AdvanceStateLengths();
  return ProgramAccess::Of(*impl_->program).pool_check.Wait();
}

const void* Execution::output_data(size_t i) const {
  const auto& m = *impl_->method;
  return i < m.output_tensors.size() ? impl_->tensor_ptr[m.output_tensors[i]] : nullptr;
}

}  // namespace fcb
