// fcb._fcb: the Python extension module behind the `fcb` package (python/fcb/).
// A user of the public C++ API like the CLI: it converts arguments, releases
// the GIL around every call that compiles, loads or runs, and turns a failed
// fcb::Status into a Python exception chosen by its code, with the Status's
// message unchanged.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/inspect.h"

namespace py = pybind11;

namespace {

// The exception classes (created in PYBIND11_MODULE, alive as long as the module).
PyObject* g_error = nullptr;
PyObject* g_unsupported = nullptr;
PyObject* g_corrupt = nullptr;
PyObject* g_unavailable = nullptr;
PyObject* g_not_found = nullptr;

PyObject* ExceptionFor(fcb::StatusCode code) {
  switch (code) {
    case fcb::StatusCode::kInvalidArgument: return PyExc_ValueError;
    case fcb::StatusCode::kNotFound: return g_not_found;
    case fcb::StatusCode::kUnsupported: return g_unsupported;
    case fcb::StatusCode::kCorruptFile: return g_corrupt;
    case fcb::StatusCode::kUnavailable: return g_unavailable;
    case fcb::StatusCode::kResourceExhausted: return PyExc_MemoryError;
    default: return g_error;  // IoError, Internal
  }
}

// Raises the Python exception for a failed status. Needs the GIL.
[[noreturn]] void Raise(const fcb::Status& s) {
  PyErr_SetString(ExceptionFor(s.code()), s.message().c_str());
  throw py::error_already_set();
}

[[noreturn]] void RaiseValue(const std::string& message) {
  PyErr_SetString(PyExc_ValueError, message.c_str());
  throw py::error_already_set();
}

// NumPy dtypes by fcb::DType code; bfloat16, which NumPy lacks, is its raw
// 16-bit patterns (uint16). Filled once at import; never released (they
// outlive the interpreter's last use of the module).
std::map<fcb::DType, py::dtype*>& DTypes() {
  static auto* m = new std::map<fcb::DType, py::dtype*>();
  return *m;
}

const py::dtype& NumpyDType(fcb::DType t) {
  auto it = DTypes().find(t);
  if (it == DTypes().end())
    throw py::type_error(std::string("fcb element type ") + fcb::DTypeName(t) + " has no NumPy dtype");
  return *it->second;
}

// str(obj) as a std::string.
std::string Str(py::handle h) {
  PyObject* s = PyObject_Str(h.ptr());
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s).cast<std::string>();
}

std::string Repr(py::handle h) {
  PyObject* s = PyObject_Repr(h.ptr());
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s).cast<std::string>();
}

std::string Dims(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Dims(const py::array& a) {
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  return Dims(dims);
}

std::string Names(const std::vector<fcb::TensorSpec>& v) {
  std::string s;
  for (const auto& t : v) s += (s.empty() ? "" : ", ") + t.name;
  return s.empty() ? "(none)" : s;
}

// One input or output, as Python sees it. For an input: min_shape (the
// smallest sizes a run may give; equal to shape where a dim is fixed) and
// symbols (per dim the symbol's name, None where fixed). For an output both
// are None: its shape in a run is the shape of the array run() returns.
struct TensorInfo {
  std::string name;
  py::dtype dtype;
  py::tuple shape;
  py::object min_shape, symbols;
};

struct MethodInfoPy {
  std::string name;
  std::vector<TensorInfo> inputs, outputs;
};

py::tuple Tuple(const std::vector<int64_t>& dims) {
  py::tuple t(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) t[i] = py::int_(dims[i]);
  return t;
}

TensorInfo ToPy(const fcb::TensorSpec& t, bool input) {
  TensorInfo info{t.name, NumpyDType(t.dtype), Tuple(t.shape), py::none(), py::none()};
  if (!input) return info;
  info.min_shape = Tuple(t.dynamic() ? t.min_shape : t.shape);
  py::tuple symbols(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i)
    symbols[i] = t.dynamic() && !t.symbols[i].empty() ? py::object(py::str(t.symbols[i])) : py::object(py::none());
  info.symbols = std::move(symbols);
  return info;
}

MethodInfoPy ToPy(const fcb::MethodInfo& m) {
  MethodInfoPy out{m.name, {}, {}};
  for (const auto& t : m.inputs) out.inputs.push_back(ToPy(t, true));
  for (const auto& t : m.outputs) out.outputs.push_back(ToPy(t, false));
  return out;
}

// An input array checked against its spec, kept alive while its bytes are
// copied in; `shaped` for an input with dims chosen at each run (its shape
// goes with the data, and SetInput checks it against the ranges).
struct BoundInput {
  const std::string* name;
  py::array array;
  bool shaped = false;
  std::vector<int64_t> shape;
};

// Checks `inputs` (a dict of arrays) against the method: every input given,
// no other names, dtypes exact, shapes exact where the method fixes them (an
// input with ranges takes any shape; SetInput refuses one outside them,
// naming the input, the dim, its symbol and its range). Needs the GIL.
// `optional`: inputs that may be left out (a State's inputs: not given, the
// run reads the State's buffer).
std::vector<BoundInput> CheckInputs(const fcb::MethodInfo& info, const py::handle& inputs,
                                    const std::vector<std::string>& optional = {}) {
  if (!PyDict_Check(inputs.ptr()))
    throw py::type_error("inputs must be a dict mapping input names to numpy arrays, got " +
                         std::string(Py_TYPE(inputs.ptr())->tp_name));
  const py::dict given = py::reinterpret_borrow<py::dict>(inputs);
  std::vector<BoundInput> bound;
  bound.reserve(info.inputs.size());
  for (const auto& spec : info.inputs) {
    PyObject* value = PyDict_GetItemString(given.ptr(), spec.name.c_str());  // borrowed
    if (!value && std::find(optional.begin(), optional.end(), spec.name) != optional.end()) continue;
    if (!value)
      RaiseValue("method '" + info.name + "': input '" + spec.name + "' is not given; its inputs are: " +
                 Names(info.inputs) + (optional.empty() ? "" : " (those kept in the State may be left out)"));
    py::array a = py::reinterpret_borrow<py::object>(value).cast<py::array>();  // ndarray, or converted
    const py::dtype& want = NumpyDType(spec.dtype);
    const bool shape_ok = a.ndim() == static_cast<py::ssize_t>(spec.shape.size()) &&
                          std::equal(spec.shape.begin(), spec.shape.end(), a.shape());
    if (!a.dtype().is(want) && !a.dtype().equal(want))
      RaiseValue("method '" + info.name + "': input '" + spec.name + "' must be " + Str(want) +
                 " " + Dims(spec.shape) + ", but the given array is " + Str(a.dtype()) + " " +
                 Dims(a));
    if (!shape_ok && !spec.dynamic())
      RaiseValue("method '" + info.name + "': input '" + spec.name + "' must have shape " + Dims(spec.shape) +
                 " (" + Str(want) + "), but the given array has shape " + Dims(a));
    if (!(a.flags() & py::array::c_style)) a = py::array::ensure(a, py::array::c_style);
    if (!a) throw py::error_already_set();
    BoundInput b{&spec.name, std::move(a), false, {}};
    if (spec.dynamic()) {
      b.shaped = true;
      b.shape.assign(b.array.shape(), b.array.shape() + b.array.ndim());
    }
    bound.push_back(std::move(b));
  }
  if (static_cast<size_t>(PyDict_Size(given.ptr())) != bound.size()) {
    for (const auto& item : given) {
      const std::string key = Str(item.first);
      bool known = false;
      for (const auto& spec : info.inputs) known = known || spec.name == key;
      if (!known)
        RaiseValue("method '" + info.name + "' has no input '" + key + "'; its inputs are: " + Names(info.inputs));
    }
  }
  return bound;
}

// Copies the execution's outputs, at the shapes of its last run, into new
// arrays. Needs the GIL.
// `skip`: the outputs carried in a State the caller holds (its buffers:
// StateBuffers), which are not copied out.
py::dict Outputs(const fcb::Execution& ex, const std::vector<const void*>& skip = {}) {
  py::dict out;
  const auto& outs = ex.info().outputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (std::find(skip.begin(), skip.end(), ex.output_data(i)) != skip.end()) continue;
    py::array a(NumpyDType(outs[i].dtype), ex.output_shape(i));
    std::memcpy(a.mutable_data(), ex.output_data(i), ex.output_bytes(i));
    out[py::str(outs[i].name)] = std::move(a);
  }
  return out;
}

// Sets the checked inputs and runs. Called without the GIL (the arrays are
// kept alive by `bound`, and their buffers are not resized while we hold them).
fcb::Status SetAndRun(fcb::Execution& ex, const std::vector<BoundInput>& bound) {
  for (const auto& b : bound) {
    const auto bytes = static_cast<size_t>(b.array.nbytes());
    fcb::Status s = b.shaped ? ex.SetInput(*b.name, b.array.data(), bytes, b.shape)
                             : ex.SetInput(*b.name, b.array.data(), bytes);
    if (!s.ok()) return s;
  }
  return ex.Run();
}

using ProgramPtr = std::shared_ptr<const fcb::Program>;

// What Python holds for a loaded program (fcb.Program).
struct ProgramHandle {
  ProgramPtr p;
};

std::string MethodOrDefault(const fcb::Program& p, const std::optional<std::string>& method) {
  if (method) return *method;
  auto only = p.default_method();
  if (!only.ok()) Raise(only.status());
  return only.value();
}

// What Python holds for a State (fcb.State): the buffers a program's methods
// keep between runs (fcb::State), and the lock that makes everything using
// them take turns (the sessions bound to it, data(), reset()): a State is
// used by one thread at a time.
struct StateHandle {
  ProgramPtr program;
  std::shared_ptr<fcb::State> s;
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
};
using StatePtr = std::shared_ptr<StateHandle>;

StatePtr CreateState(const ProgramHandle& h) {
  fcb::Result<std::shared_ptr<fcb::State>> s = fcb::Status();
  {
    py::gil_scoped_release release;
    s = fcb::State::Create(h.p);
  }
  if (!s.ok()) Raise(s.status());
  return std::make_shared<StateHandle>(StateHandle{h.p, std::move(s).value()});
}

// The names of the State's variables (the inputs it holds).
std::vector<std::string> StateInputs(const StatePtr& st) {
  std::vector<std::string> names;
  if (st)
    for (const auto& v : st->s->variables()) names.push_back(v.name);
  return names;
}

// The State's buffers: where an execution bound to it finds its state inputs
// and writes its state outputs (fcb::Execution::output_data points there).
std::vector<const void*> StateBuffers(const StatePtr& st) {
  std::vector<const void*> out;
  if (st)
    for (const auto& v : st->s->variables()) out.push_back(st->s->data(v.name).value());
  return out;
}

// The execution of `method`, bound to `state` when given (fcb::Execution::Create
// with a State; a method with state otherwise gets one of its own).
std::unique_ptr<fcb::Execution> CreateExecution(const ProgramPtr& p, const std::string& method, int threads,
                                                const StatePtr& state = nullptr) {
  if (threads < 1) RaiseValue("threads must be at least 1 (1 runs on the calling thread), got " + std::to_string(threads));
  if (state && state->program.get() != p.get())
    RaiseValue("the State given for method '" + method + "' was created from another program (another fcb.load); "
               "create it from this one: fcb.State(program)");
  fcb::Result<std::unique_ptr<fcb::Execution>> ex = fcb::Status();
  {
    py::gil_scoped_release release;
    ex = state ? fcb::Execution::Create(p, method, threads, state->s) : fcb::Execution::Create(p, method, threads);
  }
  if (!ex.ok()) Raise(ex.status());
  return std::move(ex).value();
}

// A reusable execution of one method: run() many times without re-creating
// it. For a method with state it is bound to a State (the one given, else
// one of its own): inputs the State holds may be left out of run(), and the
// outputs it carries are not copied out (State.data reads them).
class Session {
 public:
  Session(ProgramPtr program, std::unique_ptr<fcb::Execution> ex, StatePtr state)
      : program_(std::move(program)), ex_(std::move(ex)), state_(std::move(state)) {
    if (!state_ && ex_->state())  // the method's own State: reachable as session.state
      state_ = std::make_shared<StateHandle>(StateHandle{program_, ex_->state()});
    if (!ex_->state()) state_.reset();  // a method without state is bound to none
    optional_ = StateInputs(state_);
    state_buffers_ = StateBuffers(state_);
  }

  py::dict Run(const py::handle& inputs) {
    std::vector<BoundInput> bound = CheckInputs(ex_->info(), inputs, optional_);
    fcb::Status status;
    py::dict result;
    {
      py::gil_scoped_release release;
      // One run at a time on this session's execution, and on its State (which
      // other sessions may share); taken without the GIL, in this order.
      std::lock_guard<std::mutex> lock(mu_);
      std::unique_lock<std::mutex> state_lock;
      if (state_) state_lock = std::unique_lock<std::mutex>(*state_->mu);
      status = SetAndRun(*ex_, bound);
      // Copied out under the lock: the next run overwrites the outputs.
      py::gil_scoped_acquire acquire;
      if (status.ok()) result = Outputs(*ex_, state_buffers_);
      bound.clear();  // drops the array references while holding the GIL
    }
    if (!status.ok()) Raise(status);
    return result;
  }

  void ResetState() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_lock<std::mutex> state_lock;
    if (state_) state_lock = std::unique_lock<std::mutex>(*state_->mu);
    ex_->ResetState();
  }

  const fcb::MethodInfo& info() const { return ex_->info(); }
  const ProgramPtr& program() const { return program_; }
  const StatePtr& state() const { return state_; }

 private:
  ProgramPtr program_;
  std::unique_ptr<fcb::Execution> ex_;
  StatePtr state_;
  std::vector<std::string> optional_;
  std::vector<const void*> state_buffers_;
  std::mutex mu_;
};

// Compile progress: calls the Python callable with the GIL; the first
// exception it raises is kept and raised when compiling has finished.
struct Progress {
  py::object fn;
  std::optional<py::error_already_set> error;
};

void OnProgress(void* user, const std::string& stage, const std::string& method, const std::string& target) {
  auto* p = static_cast<Progress*>(user);
  py::gil_scoped_acquire acquire;
  if (p->error) return;
  try {
    p->fn(stage, method, target);
  } catch (py::error_already_set& e) {
    p->error.emplace(std::move(e));
  }
}

std::string Compile(const std::map<std::string, std::string>& methods, const std::string& spec_json,
                 const std::string& out_path, const py::object& progress,
                 const std::map<std::string, py::bytes>& attachments) {
  auto spec = fcb::ParseSpecJson(spec_json);
  if (!spec.ok()) Raise(spec.status());
  // Attachments given as bytes join those the spec names by path.
  for (const auto& [name, bytes] : attachments) {
    if (spec.value().attachments.count(name))
      Raise(fcb::InvalidArgument("attachment '" + fcb::EscapeForDisplay(name) +
                                 "' is given twice (as a path and as bytes); name each attachment once"));
    spec.value().attachments[name] = std::string(bytes);
  }
  Progress p;
  fcb::CompileHooks hooks;
  if (!progress.is_none()) {
    if (!PyCallable_Check(progress.ptr())) throw py::type_error("progress must be callable (stage, method, target)");
    p.fn = progress;
    hooks.progress = OnProgress;
    hooks.user = &p;
  }
  fcb::Result<fcb::CompileReport> report = fcb::Status();
  {
    py::gil_scoped_release release;
    report = fcb::CompileMethods(methods, spec.value(), out_path, hooks);
  }
  if (p.error) {
    p.error->restore();
    p.error.reset();
    throw py::error_already_set();
  }
  if (!report.ok()) Raise(report.status());
  return fcb::CompileReportJson(report.value());
}

ProgramHandle Load(const std::string& path, const std::string& target, bool verify_checksums,
                   uint64_t max_memory_bytes) {
  fcb::LoadOptions options;
  options.target = target;
  options.verify_checksums = verify_checksums;
  options.max_memory_bytes = max_memory_bytes;
  fcb::Result<ProgramPtr> p = fcb::Status();
  {
    py::gil_scoped_release release;
    p = fcb::Program::Load(path, options);
  }
  if (!p.ok()) Raise(p.status());
  return ProgramHandle{std::move(p).value()};
}

PyObject* NewException(py::module_& m, const char* name, const char* doc, PyObject* bases) {
  const std::string qualified = std::string("fcb.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // the module keeps a reference
  return cls;
}

}  // namespace

PYBIND11_MODULE(_fcb, m) {
  m.doc() = "The compiled core of the fcb package; use the `fcb` package, not this module.";
  // The docstrings below start with their Python signatures (types as in _fcb.pyi).
  py::options options;
  options.disable_function_signatures();
  py::module_::import("numpy");  // fail at import, not at the first run, without NumPy

  for (auto [t, name] : std::vector<std::pair<fcb::DType, const char*>>{
           {fcb::DType::kF32, "float32"}, {fcb::DType::kU8, "uint8"},     {fcb::DType::kI8, "int8"},
           {fcb::DType::kU16, "uint16"},  {fcb::DType::kI16, "int16"},    {fcb::DType::kI32, "int32"},
           {fcb::DType::kI64, "int64"},   {fcb::DType::kBool, "bool"},    {fcb::DType::kF16, "float16"},
           {fcb::DType::kF64, "float64"}, {fcb::DType::kU32, "uint32"},   {fcb::DType::kU64, "uint64"},
           {fcb::DType::kBF16, "uint16"}})
    DTypes()[t] = new py::dtype(name);

  g_error = NewException(m, "Error", "Base class of the errors fcb raises (besides ValueError and MemoryError).",
                         PyExc_Exception);
  g_unsupported = NewException(
      m, "UnsupportedError", "The model or request is valid but fcb does not implement it (an operator, a dtype).",
      g_error);
  g_corrupt = NewException(m, "CorruptFileError",
                           "A file (.fcb, .onnx) failed a structural or checksum check; the message names where.",
                           g_error);
  g_unavailable = NewException(
      m, "TargetUnavailableError",
      "This host cannot run what was asked: a forced target it lacks, or no target in the file.", g_error);
  {
    py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_LookupError));
    g_not_found = NewException(m, "NotFoundError",
                               "A named thing does not exist: a file, a method, an input or output name.",
                               bases.ptr());
  }

  py::class_<TensorInfo>(m, "TensorInfo",
                         "An input or output of a method: its name, NumPy dtype and shape (the largest\n"
                         "where dims are chosen at each run), and for an input the range of each dim.")
      .def_readonly("name", &TensorInfo::name, "The tensor's name in the model.")
      .def_readonly("dtype", &TensorInfo::dtype,
                    "Its element type as a numpy.dtype (bfloat16 tensors are uint16 bit patterns).")
      .def_readonly("shape", &TensorInfo::shape,
                    "Its dimensions, a tuple of ints: the shape the method is planned for, the\n"
                    "largest a run may give or return where dims are chosen at each run.")
      .def_readonly("min_shape", &TensorInfo::min_shape,
                    "Inputs: the smallest shape a run may give, a tuple of ints (equal to `shape`\n"
                    "where dims are fixed; any shape from min_shape to shape dim by dim is accepted).\n"
                    "Outputs: None (run() returns each output at its shape in that run).")
      .def_readonly("symbols", &TensorInfo::symbols,
                    "Inputs: per dim, the name of the symbol the dim is (dims with one symbol take\n"
                    "one size in a run), or None where the dim is fixed. Outputs: None.")
      .def("__repr__", [](const TensorInfo& t) {
        std::string s = "TensorInfo(name=" + Repr(py::str(t.name)) + ", dtype=" + Str(t.dtype) + ", shape=" +
                        Repr(t.shape);
        if (!t.min_shape.is_none() && !t.min_shape.equal(t.shape)) s += ", min_shape=" + Repr(t.min_shape);
        return s + ")";
      });

  py::class_<MethodInfoPy>(m, "MethodInfo", "A method of a program: its name, inputs and outputs.")
      .def_readonly("name", &MethodInfoPy::name, "The method's name (\"main\" for a single-model compile).")
      .def_readonly("inputs", &MethodInfoPy::inputs, "list[TensorInfo], in the model's order.")
      .def_readonly("outputs", &MethodInfoPy::outputs, "list[TensorInfo], in the model's order.")
      .def("__repr__", [](const MethodInfoPy& mi) {
        std::string s = "MethodInfo(name=" + Repr(py::str(mi.name)) + ", inputs=[";
        for (size_t i = 0; i < mi.inputs.size(); ++i)
          s += (i ? ", " : "") + Repr(py::cast(mi.inputs[i]));
        s += "], outputs=[";
        for (size_t i = 0; i < mi.outputs.size(); ++i)
          s += (i ? ", " : "") + Repr(py::cast(mi.outputs[i]));
        return s + "])";
      });

  py::class_<Session>(m, "Session",
                      "A reusable execution of one method (its memory arena and threads), made by\n"
                      "Program.session(). run() may be called any number of times; calls from several\n"
                      "threads take turns. Keeps its program alive.")
      .def("run", &Session::Run, py::arg("inputs"),
           "run(inputs: dict[str, numpy.ndarray]) -> dict[str, numpy.ndarray]\n\n"
           "Runs the method once. `inputs` maps every input name to a NumPy array of exactly\n"
           "the method's dtype and shape, or of any shape from TensorInfo.min_shape to\n"
           "TensorInfo.shape where its dims are chosen at each run (ValueError names the\n"
           "input, the expected and the given dtype/shape, or the dim, its symbol and its\n"
           "range, otherwise). Returns new arrays, one per output, by name, each at its\n"
           "shape in this run. For a method with state (Session.state), the inputs the State\n"
           "holds may be left out (the run reads them from it; given, they are written into\n"
           "it) and the outputs it carries are not returned (State.data reads them). The GIL\n"
           "is released while the method runs.")
      .def_property_readonly("method", [](const Session& s) { return s.info().name; }, "The method it runs.")
      .def_property_readonly("inputs", [](const Session& s) { return ToPy(s.info()).inputs; },
                             "list[TensorInfo] of the method's inputs.")
      .def_property_readonly("outputs", [](const Session& s) { return ToPy(s.info()).outputs; },
                             "list[TensorInfo] of the method's outputs.")
      .def_property_readonly("state", [](const Session& s) { return s.state(); },
                             "The State this session is bound to (None for a method without state).")
      .def("reset_state", &Session::ResetState,
           "reset_state() -> None\n\n"
           "Zeroes the bound State (every variable, also those other methods use): an empty\n"
           "cache, to start a new sequence. C++: Execution::ResetState.")
      .def("__repr__", [](const Session& s) {
        return "<fcb.Session method '" + s.info().name + "' on target '" + s.program()->target() + "'>";
      });

  py::class_<StateHandle, StatePtr>(
      m, "State",
      "State(program: Program)\n\n"
      "What a program's methods keep between runs (a KV cache; the compile spec's \"state\"):\n"
      "one zeroed buffer per state variable. Sessions made with it (Program.session(method,\n"
      "state=...)) read and update those buffers in place, so that one method (prefill)\n"
      "fills a cache and another (decode) continues it with nothing copied between runs.\n"
      "Two States are independent. The sessions bound to one State take turns. C++:\n"
      "fcb::State::Create(program).")
      .def(py::init([](const ProgramHandle& h) { return CreateState(h); }), py::arg("program"))
      .def_property_readonly(
          "variables",
          [](const StateHandle& st) {
            std::vector<TensorInfo> out;
            for (const auto& v : st.s->variables()) out.push_back(ToPy(v, false));
            return out;
          },
          "list[TensorInfo]: the state variables, named by the inputs they feed (e.g.\n"
          "past_key_values.0.key), with their dtypes and shapes; [] for a program without state.")
      .def(
          "data",
          [](const StateHandle& st, const std::string& name) {
            auto p = st.s->data(name);
            if (!p.ok()) Raise(p.status());
            for (const auto& v : st.s->variables()) {
              if (v.name != name) continue;
              py::array a(NumpyDType(v.dtype), v.shape);
              {
                py::gil_scoped_release release;
                std::lock_guard<std::mutex> lock(*st.mu);
                std::memcpy(a.mutable_data(), p.value(), v.bytes());
              }
              return a;
            }
            Raise(fcb::NotFound("no state variable '" + name + "'"));
          },
          py::arg("name"),
          "data(name: str) -> numpy.ndarray\n\n"
          "A copy of state variable `name` (its whole buffer, e.g. a KV cache at its capacity);\n"
          "fcb.NotFoundError lists the names when there is no such variable.")
      .def(
          "reset",
          [](const StateHandle& st) {
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(*st.mu);
            st.s->Reset();
          },
          "reset() -> None\n\nZeroes every variable (an empty cache). C++: fcb::State::Reset.")
      .def("__repr__", [](const StateHandle& st) {
        std::string names;
        for (const auto& v : st.s->variables()) names += (names.empty() ? "'" : ", '") + v.name + "'";
        return "<fcb.State of a program on target '" + st.program->target() + "', variables [" + names + "]>";
      });

  py::class_<ProgramHandle>(
      m, "Program",
      "A loaded .fcb file (made by fcb.load()): immutable, safe to share between threads.\n"
      "It holds one compiled context per (method, target) in the file and runs the target\n"
      "selected at load.")
      .def_property_readonly("target", [](const ProgramHandle& h) { return h.p->target(); },
                             "The target selected at load (e.g. \"x86-64-v3\").")
      .def_property_readonly("targets_in_file", [](const ProgramHandle& h) { return h.p->targets_in_file(); },
                             "Every target the file holds, in file order.")
      .def_property_readonly("methods", [](const ProgramHandle& h) { return h.p->methods(); },
                             "The methods' names, in file order.")
      .def_property_readonly("attachments", [](const ProgramHandle& h) { return h.p->attachments(); },
                             "The attachments' names (named byte strings stored at compile), in file order.")
      .def(
          "attachment",
          [](const ProgramHandle& h, const std::string& name) {
            auto bytes = h.p->attachment(name);
            if (!bytes.ok()) Raise(bytes.status());
            return py::bytes(bytes.value().data(), bytes.value().size());
          },
          py::arg("name"),
          "attachment(name: str) -> bytes\n\nA copy of attachment `name`'s bytes, checked against the file's checksum\n"
          "(fcb.CorruptFileError when they do not match); fcb.NotFoundError lists the names when\n"
          "there is no such attachment.")
      .def(
          "method",
          [](const ProgramHandle& h, const std::string& name) {
            auto info = h.p->method(name);
            if (!info.ok()) Raise(info.status());
            return ToPy(info.value());
          },
          py::arg("name"),
          "method(name: str) -> MethodInfo\n\nThe inputs and outputs (names, dtypes, shapes) of method `name`;\n"
          "fcb.NotFoundError lists the methods when there is no such method.")
      .def(
          "run",
          [](const ProgramHandle& h, const py::handle& inputs, const std::optional<std::string>& method,
             int threads, const StatePtr& state) {
            const ProgramPtr& p = h.p;
            const std::string name = MethodOrDefault(*p, method);
            auto info = p->method(name);
            if (!info.ok()) Raise(info.status());
            if (!state) {
              // No State: every input is given (those of a state too: they
              // fill the run's own, fresh State) and every output returned.
              std::vector<BoundInput> bound = CheckInputs(info.value(), inputs);
              std::unique_ptr<fcb::Execution> ex = CreateExecution(p, name, threads);
              fcb::Status status;
              {
                py::gil_scoped_release release;
                status = SetAndRun(*ex, bound);
              }
              if (!status.ok()) Raise(status);
              py::dict out = Outputs(*ex);
              {
                py::gil_scoped_release release;
                ex.reset();  // frees the arena and joins its threads
              }
              return out;
            }
            // With a State: as a one-run Session bound to it.
            auto session = std::make_unique<Session>(p, CreateExecution(p, name, threads, state), state);
            py::dict out = session->Run(inputs);
            {
              py::gil_scoped_release release;
              session.reset();  // frees the arena and joins its threads
            }
            return out;
          },
          py::arg("inputs"), py::arg("method") = py::none(), py::arg("threads") = 1, py::arg("state") = nullptr,
          "run(inputs: dict[str, numpy.ndarray], method: str | None = None, threads: int = 1,\n"
          "    state: State | None = None) -> dict[str, numpy.ndarray]\n\n"
          "Runs `method` (None: the file's only method) once on a fresh execution with\n"
          "`threads` threads and returns its outputs by name, at their shapes in this run.\n"
          "`inputs` maps every input name to a NumPy array of exactly the method's dtype and\n"
          "shape (any shape within the ranges where dims are chosen at each run; see\n"
          "Session.run). With `state` (an fcb.State of this program) the run is bound to it,\n"
          "as a Session made with that State: the inputs it holds may be left out and the\n"
          "outputs it carries are not returned. Safe to call from many\n"
          "threads at once; the GIL is released while it runs. For repeated calls,\n"
          "session() avoids re-creating the execution each time.")
      .def(
          "session",
          [](const ProgramHandle& h, const std::optional<std::string>& method, int threads, const StatePtr& state) {
            const std::string name = MethodOrDefault(*h.p, method);
            return std::make_unique<Session>(h.p, CreateExecution(h.p, name, threads, state), state);
          },
          py::arg("method") = py::none(), py::arg("threads") = 1, py::arg("state") = nullptr,
          "session(method: str | None = None, threads: int = 1, state: State | None = None) -> Session\n\n"
          "A reusable execution of `method` (None: the file's only method) with `threads`\n"
          "threads; Session.run(inputs) runs it without re-creating it. A method with state\n"
          "(a KV cache compiled with the spec's \"state\") is bound to `state`, an fcb.State of\n"
          "this program that other sessions (prefill and decode) may share, or, when None, to\n"
          "a State of its own (Session.state). C++: Execution::Create(program, method,\n"
          "threads, state).")
      .def("__repr__", [](const ProgramHandle& h) {
        std::string methods;
        for (const auto& name : h.p->methods()) methods += (methods.empty() ? "'" : ", '") + name + "'";
        return "<fcb.Program target '" + h.p->target() + "', methods [" + methods + "]>";
      });

  m.def("compile", &Compile, py::arg("methods"), py::arg("spec_json"), py::arg("out_path"),
        py::arg("progress") = py::none(), py::arg("attachments") = std::map<std::string, py::bytes>(),
        "compile(methods: dict[str, str], spec_json: str, out_path: str, progress=None, attachments={}) -> str\n\n"
        "Compiles {method: onnx_path} with a JSON spec; returns the report as JSON text "
        "(fcb::CompileReportJson); see fcb.compile.");
  m.def("load", &Load, py::arg("path"), py::arg("target") = "auto", py::arg("verify_checksums") = true,
        py::arg("max_memory_bytes") = 0,
        "load(path: str, target: str = 'auto', verify_checksums: bool = True, max_memory_bytes: int = 0) -> Program\n\n"
        "Loads a .fcb file; see fcb.load.");
  m.def(
      "inspect_json",
      [](const std::string& path) {
        fcb::Result<fcb::FileSummary> s = fcb::Status();
        {
          py::gil_scoped_release release;
          s = fcb::InspectFile(path);
        }
        if (!s.ok()) Raise(s.status());
        return fcb::FileSummaryJson(s.value(), -1);
      },
      py::arg("path"), "inspect_json(path: str) -> str\n\nThe JSON text of `fcb inspect --json`; see fcb.inspect.");
  m.def(
      "targets",
      []() {
        py::list out;
        for (const auto& t : fcb::ListTargets()) {
          py::dict d;
          d["name"] = t.name;
          d["arch"] = t.arch;
          d["description"] = t.description;
          d["score"] = t.score;
          d["host_can_run"] = t.host_can_run;
          d["auto"] = t.auto_choice;
          d["why_not"] = t.why_not;
          out.append(d);
        }
        return out;
      },
      "targets() -> list[dict]\n\nEvery known target as a dict; see fcb.targets.");
  m.def(
      "ops",
      [](bool internal) {
        std::vector<std::string> names;
        for (const auto& op : fcb::ListOperators())
          if (internal || !op.internal) names.push_back(op.name);
        return names;
      },
      py::arg("internal") = false, "ops(internal: bool = False) -> list[str]\n\nOperator names; see fcb.ops.");
  m.attr("__version__") = fcb::Version();
  // The classes are the package's (help(fcb.Program) names fcb.Program).
  for (const char* name : {"Program", "Session", "State", "MethodInfo", "TensorInfo"})
    m.attr(name).attr("__module__") = "fcb";
}
