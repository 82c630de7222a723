"""fcb: compile ONNX models ahead of time into one .fcb file and run them.

One .fcb file holds a compiled context per CPU target (and per method), with
the weights stored once; loading it picks the best target this host runs.

Quick start::

    import fcb, numpy as np
    fcb.compile("model.onnx", "model.fcb", input_shapes={"input": [1, 3, 224, 224]})
    program = fcb.load("model.fcb")
    outputs = program.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

Functions: compile, load, inspect, targets, ops. Classes: Program (from load),
Session (Program.session(): a reusable execution), State (a KV cache kept
between runs, shared by the sessions made with it), MethodInfo, TensorInfo,
CompileReport. Errors: ValueError for invalid arguments and specs (the message
names the fix), fcb.UnsupportedError, fcb.CorruptFileError,
fcb.TargetUnavailableError, fcb.NotFoundError (all subclasses of fcb.Error);
their messages are those of the C++ library. The GIL is released while
compiling, loading and running.
"""

import json as _json
import operator as _operator
import os as _os
import warnings as _warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _fcb
from ._fcb import (
    CorruptFileError,
    Error,
    MethodInfo,
    NotFoundError,
    Program,
    Session,
    State,
    TargetUnavailableError,
    TensorInfo,
    UnsupportedError,
    __version__,
)

__all__ = [
    "compile", "load", "inspect", "targets", "ops",
    "Program", "Session", "State", "MethodInfo", "TensorInfo", "CompileReport", "CompileWarning",
    "Error", "UnsupportedError", "CorruptFileError", "TargetUnavailableError", "NotFoundError",
    "__version__",
]

PathLike = Union[str, _os.PathLike]


class CompileWarning(UserWarning):
    """A compile warning (e.g. "weight sharing defeated: ..."), also kept in CompileReport.warnings."""


class CompileReport:
    """What fcb.compile() produced.

    Attributes:
        file_size: the size of the written .fcb file in bytes.
        warnings: the compile's warnings, already formatted (each also issued
            as a CompileWarning through the warnings module).
        int8_accuracy: one dict per (method, int8 options) when a target has
            precision "int8": method, target, on_int8_target, int8_targets,
            inputs, float_outputs, rel_l2 (||y_int8 - y_fp32|| / ||y_fp32||;
            NaN when not measured) and error (empty when measured).
    """

    __slots__ = ("file_size", "warnings", "int8_accuracy")

    def __init__(self, file_size: int, warnings: List[str], int8_accuracy: List[Dict[str, Any]]):
        self.file_size = file_size
        self.warnings = warnings
        self.int8_accuracy = int8_accuracy

    def __repr__(self) -> str:
        return f"CompileReport(file_size={self.file_size}, warnings={self.warnings!r})"


def _jsonable(value: Any) -> Any:
    # Integers of other types (numpy.int64, ...) and arrays (numpy dims) in specs.
    if hasattr(value, "__index__"):
        return _operator.index(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} cannot be used in a compile spec: use str, int, bool, list or dict")


def _listed(value: Any) -> Any:
    # Tuples are lists in a spec; everything else is passed on as given, so
    # the library checks it and its error names the fix.
    return list(value) if isinstance(value, tuple) else value


def compile(
    model: Union[PathLike, Mapping[str, PathLike]],
    out_path: PathLike,
    targets: Union[str, Sequence[str]] = "all",
    target_options: Union[None, Mapping[str, Any], Sequence[Mapping[str, Any]]] = None,
    weight_sharing: bool = True,
    input_shapes: Optional[Mapping[str, Sequence[Union[int, Sequence[int]]]]] = None,
    input_values: Optional[Mapping[str, Any]] = None,
    progress: Optional[Callable[[str, str, str], None]] = None,
    attachments: Optional[Mapping[str, Union[PathLike, bytes]]] = None,
    state: Union[None, str, Mapping[str, str]] = None,
    kv_capacity: Optional[int] = None,
    outputs: Optional[Sequence[str]] = None,
) -> CompileReport:
    """Compile ONNX model(s) into one .fcb file at out_path.

    Args:
        model: the path of an ONNX file (the method is named "main"), or a dict
            {method_name: onnx_path} to put several methods in one file, with
            one weight pool.
        out_path: where to write the .fcb file (written atomically).
        targets: a target name or a list of them ("generic", "x86-64-v2",
            "x86-64-v3", "x86-64-v4", ...; see fcb.targets()), or "all" (alone)
            for every known target.
        target_options: None (defaults for every target); one dict such as
            {"optimization_level": 1, "precision": "bf16"} when `targets` is a
            single target or "all"; or a list with one dict per target, in
            the same order. Keys: optimization_level (0-3, default 2),
            precision ("fp32", "bf16", "int8", "int4"; default "fp32"),
            int4_head (with "int4": the LM head and embeddings 4-bit too;
            default False, 8-bit), int4_activations (with "int4": "int8",
            the default, int8 activations and integer dot products, or
            "float").
        weight_sharing: False stores a separate copy of the weights for every
            context (for comparison).
        input_shapes: fixes symbolic input dimensions: {"NAME": [1, 3, 224, 224]}
            for every method, {"METHOD:NAME": [...]} for one. A dim may be a
            range (lo, hi) or [lo, hi] bounded at compile time, e.g.
            {"input_ids": [1, (1, 512)]}; a symbolic dim shared by several
            inputs is one size, so what one input gives it applies to all.
            The method then takes any size within the range at each run
            (Program.run / Session.run with arrays of that shape; outputs
            come back at their shapes in that run; TensorInfo.min_shape and
            .shape give the range).
        input_values: fixes inputs to constants: {"NAME": value} for every
            method, {"METHOD:NAME": value} for one; a value is a NumPy array,
            a nested list or a scalar, converted to the input's type when
            every element fits. The input is no longer an input of that
            method (e.g. a merged decoder's use-cache flag).
        progress: None, or a callable (stage, method, target) called as the
            compile goes on (from the compiling thread, with the GIL). An
            exception it raises is re-raised when compiling has finished.
        attachments: named byte strings to store in the file for the
            application (a tokenizer's vocabulary, settings): {"NAME": path}
            stores the file's bytes, {"NAME": b"..."} the bytes given. Read
            back with Program.attachments and Program.attachment(name).
            Names: 1 to 255 printable ASCII bytes, no space, no '='.
        state: a KV cache kept between runs (README "Language models"):
            "auto" pairs past_key_values.N.* / past* inputs with the
            present.N.* / present* outputs, or a dict {"PAST_INPUT":
            "PRESENT_OUTPUT"} ("METHOD:PAST_INPUT" for one method).
        kv_capacity: with state, compiles each GroupQueryAttention whose past
            grows (ONNX Runtime GenAI's CPU form) as a static cache of this
            many positions updated in place (1 to 2**20).
        outputs: the outputs to keep, e.g. ["encoder:last_hidden_state",
            "logits"]: "NAME" for every method, "METHOD:NAME" for one. A
            method an entry applies to keeps only the outputs named for it,
            in the model's order; what only the others needed is not
            compiled. None keeps every output (an empty list is refused).

    The arguments follow the rules of the JSON compile spec (README "Compile
    specs"): a one-element list behaves exactly as the scalar (the files are
    byte-identical). Everything is validated before any work.

    Returns:
        A CompileReport (file_size, warnings, int8_accuracy).

    Raises:
        ValueError: an invalid spec (empty or unequal lists, a duplicate or
            unknown target, an unknown option key, an invalid value); the
            message names the fix.
        fcb.UnsupportedError: the model uses something fcb does not implement.
        fcb.NotFoundError: a model file does not exist.
        fcb.CorruptFileError: a model file is not a valid ONNX model.
        fcb.Error: any other failure (I/O, ...).
    """
    if isinstance(model, Mapping):
        methods = {str(name): _os.fspath(path) for name, path in model.items()}
        if not methods:
            raise ValueError("model is an empty dict; give an ONNX path, or {method_name: onnx_path} with at least one method")
    else:
        methods = {"main": _os.fspath(model)}
    spec: Dict[str, Any] = {"targets": _listed(targets), "weight_sharing": weight_sharing}
    if target_options is not None:
        spec["target_options"] = _listed(target_options)
    if input_shapes is not None:
        if not isinstance(input_shapes, Mapping):
            raise ValueError("input_shapes must be a dict mapping input name to dims, e.g. {\"input\": [1, 3, 224, 224]}")
        spec["input_shapes"] = {str(name): _listed(dims) for name, dims in input_shapes.items()}
    if input_values is not None:
        if not isinstance(input_values, Mapping):
            raise ValueError("input_values must be a dict mapping input name to a value, e.g. {\"flag\": [True]}")
        spec["input_values"] = {str(name): v.tolist() if hasattr(v, "tolist") else v
                                for name, v in input_values.items()}
    attachment_bytes: Dict[str, bytes] = {}
    if attachments is not None:
        if not isinstance(attachments, Mapping):
            raise ValueError("attachments must be a dict mapping a name to a file path or bytes, "
                             "e.g. {\"vocab.json\": \"model/vocab.json\"}")
        paths: Dict[str, str] = {}
        for name, value in attachments.items():
            if isinstance(value, (bytes, bytearray, memoryview)):
                attachment_bytes[str(name)] = bytes(value)
            else:
                paths[str(name)] = _os.fspath(value)
        spec["attachments"] = paths
    if state is not None:
        spec["state"] = state if isinstance(state, str) else {str(k): str(v) for k, v in state.items()}
    if kv_capacity is not None:
        spec["kv_capacity"] = kv_capacity
    if outputs is not None:
        if isinstance(outputs, str):
            raise ValueError(f"outputs must be a list of output names, e.g. [{outputs!r}], not a string")
        spec["outputs"] = list(outputs)
    text = _json.dumps(spec, default=_jsonable)
    raw = _json.loads(_fcb.compile(methods, text, _os.fspath(out_path), progress, attachment_bytes))
    for accuracy in raw["int8_accuracy"]:
        if accuracy["rel_l2"] is None:  # not measured: null in JSON, NaN here
            accuracy["rel_l2"] = float("nan")
    report = CompileReport(raw["file_size"], raw["warnings"], raw["int8_accuracy"])
    for message in report.warnings:
        _warnings.warn(message, CompileWarning, stacklevel=2)
    return report


def load(path: PathLike, target: str = "auto", verify_checksums: bool = True,
         max_memory_bytes: int = 0) -> Program:
    """Load a .fcb file for running.

    Args:
        path: the .fcb file; it is memory-mapped and verified.
        target: "auto" for the best target this host runs among those the
            file holds, or a target name to force one.
        verify_checksums: verify the weights' checksums (on a background
            thread; the first run waits for it).
        max_memory_bytes: the most memory one run may allocate (arena plus
            every thread's scratch, as the file declares them); 0 = the
            memory this host has available. A file asking for more is
            refused here, a session whose threads would pass it when made.

    Returns:
        A Program: .target, .targets_in_file, .methods, .attachments, .attachment(name), .method(name),
        .run(inputs), .session().

    Raises:
        fcb.NotFoundError: no such file.
        fcb.CorruptFileError: the file failed a structural or checksum check
            (the message gives the byte offset).
        fcb.TargetUnavailableError: the forced target cannot run here, or
            the file holds no target this host runs (the message lists both).
        MemoryError: the file asks for more memory than max_memory_bytes
            (the message names the limit and the bytes asked for).
    """
    if max_memory_bytes < 0:
        raise ValueError(f"max_memory_bytes must be >= 0 (0 = the host's available memory), got {max_memory_bytes}")
    return _fcb.load(_os.fspath(path), target, bool(verify_checksums), int(max_memory_bytes))


def inspect(path: PathLike) -> Dict[str, Any]:
    """Describe a .fcb file: the dict of `fcb inspect --json`, the same numbers.

    Keys: file, producer, format_version, plan_version, targets, methods,
    contexts (one per (method, target): options, steps, arena and scratch
    bytes, weight accounting, inputs, outputs), per_target, per_method,
    weight_pool, attachments (name, size, offset, checksum of each, sorted
    by name), layout, file_size. Any target may be described, whether this
    host runs it or not.

    Raises:
        fcb.NotFoundError, fcb.CorruptFileError, fcb.Error (I/O).
    """
    return _json.loads(_fcb.inspect_json(_os.fspath(path)))


def targets() -> List[Dict[str, Any]]:
    """Every target fcb knows, in a fixed order (generic first), as dicts.

    Keys: name, arch ("any", "x86-64", "aarch64"), description (the
    instruction set), score, host_can_run, auto (True for the one "auto"
    picks from a file that holds every target), why_not (why this host cannot
    run it, when it cannot). The same list as `fcb targets`.
    """
    return _fcb.targets()


def ops(internal: bool = False) -> List[str]:
    """The operators fcb implements, sorted: the ONNX op_types (`fcb ops`), and
    with internal=True also the compiler's own internal operators."""
    return _fcb.ops(internal)
