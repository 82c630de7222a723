# Type stubs of fcb._fcb, the extension module behind the fcb package
# (python/src/fcb_module.cc). Use the package: `import fcb`.
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy

__version__: str

class Error(Exception):
    """Base class of the errors fcb raises (besides ValueError and MemoryError)."""

class UnsupportedError(Error):
    """The model or request is valid but fcb does not implement it."""

class CorruptFileError(Error):
    """A file failed a structural or checksum check; the message names where."""

class TargetUnavailableError(Error):
    """This host cannot run what was asked: a forced target, or no target in the file."""

class NotFoundError(Error, LookupError):
    """A named thing does not exist: a file, a method, an input or output name."""

class TensorInfo:
    """An input or output of a method: its name, NumPy dtype and shape (the largest
    where dims are chosen at each run), and for an input the range of each dim."""
    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> numpy.dtype[Any]: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def min_shape(self) -> Optional[Tuple[int, ...]]:
        """Inputs: the smallest shape a run may give (== shape where fixed); outputs: None."""
    @property
    def symbols(self) -> Optional[Tuple[Optional[str], ...]]:
        """Inputs: per dim, its symbol's name (None where fixed); outputs: None."""

class MethodInfo:
    """A method of a program: its name, inputs and outputs."""
    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> List[TensorInfo]: ...
    @property
    def outputs(self) -> List[TensorInfo]: ...

class Session:
    """A reusable execution of one method, made by Program.session()."""
    def run(self, inputs: Mapping[str, numpy.ndarray[Any, Any]]) -> Dict[str, numpy.ndarray[Any, Any]]: ...
    @property
    def method(self) -> str: ...
    @property
    def inputs(self) -> List[TensorInfo]: ...
    @property
    def outputs(self) -> List[TensorInfo]: ...
    @property
    def state(self) -> Optional[State]:
        """The State it is bound to (None for a method without state)."""
    def reset_state(self) -> None: ...

class State:
    """What a program's methods keep between runs (a KV cache): one buffer per state
    variable, shared by the sessions made with it. C++: fcb::State."""
    def __init__(self, program: Program) -> None: ...
    @property
    def variables(self) -> List[TensorInfo]: ...
    def data(self, name: str) -> numpy.ndarray[Any, Any]: ...
    def reset(self) -> None: ...

class Program:
    """A loaded .fcb file (made by fcb.load()): immutable, safe to share between threads."""
    @property
    def target(self) -> str: ...
    @property
    def targets_in_file(self) -> List[str]: ...
    @property
    def methods(self) -> List[str]: ...
    @property
    def attachments(self) -> List[str]: ...
    def attachment(self, name: str) -> bytes: ...
    def method(self, name: str) -> MethodInfo: ...
    def run(
        self,
        inputs: Mapping[str, numpy.ndarray[Any, Any]],
        method: Optional[str] = None,
        threads: int = 1,
        state: Optional[State] = None,
    ) -> Dict[str, numpy.ndarray[Any, Any]]: ...
    def session(self, method: Optional[str] = None, threads: int = 1, state: Optional[State] = None) -> Session: ...

def compile(
    methods: Mapping[str, str],
    spec_json: str,
    out_path: str,
    progress: Optional[Callable[[str, str, str], None]] = None,
    attachments: Mapping[str, bytes] = ...,
) -> str: ...
def load(path: str, target: str = "auto", verify_checksums: bool = True, max_memory_bytes: int = 0) -> Program: ...
def inspect_json(path: str) -> str: ...
def targets() -> List[Dict[str, Any]]: ...
def ops(internal: bool = False) -> List[str]: ...
