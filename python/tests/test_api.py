"""The fcb package: load, describe and run, and the errors by kind."""

import ast
import inspect as pyinspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

import fcb
from conftest import rel_l2, run_cli


def test_targets_and_ops_are_the_clis(cli):
    targets = fcb.targets()
    listed = json.loads(run_cli(cli, "targets", "--json").stdout)
    assert [t["name"] for t in targets] == [t["name"] for t in listed["targets"]]
    assert [t["host_can_run"] for t in targets] == [t["host_can_run"] for t in listed["targets"]]
    assert [t["name"] for t in targets if t["auto"]] == [listed["auto"]]
    assert fcb.ops() == json.loads(run_cli(cli, "ops", "--json").stdout)["operators"]
    assert "Conv" in fcb.ops()
    assert set(fcb.ops()) < set(fcb.ops(internal=True))


def test_inspect_is_the_clis_json(demo_fcb, cli):
    assert fcb.inspect(demo_fcb) == json.loads(run_cli(cli, "inspect", demo_fcb, "--json").stdout)
    summary = fcb.inspect(str(demo_fcb))
    assert summary["targets"] == ["generic", "x86-64-v2"]
    assert summary["file_size"] == demo_fcb.stat().st_size


def test_program_describes_its_methods(demo_fcb, host_targets):
    program = fcb.load(demo_fcb)
    assert program.targets_in_file == ["generic", "x86-64-v2"]
    assert program.target == ("x86-64-v2" if "x86-64-v2" in host_targets else "generic")
    assert program.methods == ["main"]
    info = program.method("main")
    assert info.name == "main"
    assert [(t.name, t.dtype, t.shape) for t in info.inputs] == [("input", np.dtype(np.float32), (1, 3, 64, 64))]
    assert [(t.name, t.dtype, t.shape) for t in info.outputs] == [("output", np.dtype(np.float32), (1, 10))]
    assert "main" in repr(program) and "input" in repr(info)
    with pytest.raises(fcb.NotFoundError, match="decode"):
        program.method("decode")


@pytest.mark.parametrize("target", ["generic", "x86-64-v2"])
def test_run_and_session_match_onnx_runtime(demo_fcb, demo_io, host_targets, target):
    if target not in host_targets:
        pytest.fail(f"this host cannot run {target}; the suite assumes x86-64-v2 at least")
    x, want = demo_io
    program = fcb.load(demo_fcb, target=target)
    assert program.target == target
    for threads in (1, 2):
        out = program.run({"input": x}, threads=threads)
        assert list(out) == ["output"]
        assert out["output"].dtype == np.float32 and out["output"].shape == want.shape
        assert rel_l2(out["output"], want) < 1e-4
        assert np.max(np.abs(out["output"] - want)) < 1e-3
    session = program.session(method="main")
    assert session.method == "main" and [t.name for t in session.inputs] == ["input"]
    first = session.run({"input": x})["output"]
    second = session.run({"input": x})["output"]
    assert first is not second  # new arrays: the next run does not overwrite what was returned
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, out["output"])


def test_non_contiguous_input_is_accepted(demo_fcb, demo_io):
    x, want = demo_io
    program = fcb.load(demo_fcb)
    strided = np.asfortranarray(x)
    assert not strided.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(program.run({"input": strided})["output"], program.run({"input": x})["output"])


def test_dtype_and_shape_mismatches_are_refused(demo_fcb, demo_io):
    x, _ = demo_io
    session = fcb.load(demo_fcb).session()
    with pytest.raises(ValueError) as e:
        session.run({"input": x.astype(np.float64)})
    msg = str(e.value)
    assert "'input'" in msg and "float32 [1, 3, 64, 64]" in msg and "float64 [1, 3, 64, 64]" in msg, msg
    with pytest.raises(ValueError) as e:
        session.run({"input": x.reshape(1, 3, 32, 128)})
    msg = str(e.value)
    assert "'input'" in msg and "[1, 3, 64, 64]" in msg and "[1, 3, 32, 128]" in msg, msg
    with pytest.raises(ValueError, match="input 'input' is not given; its inputs are: input"):
        session.run({})
    with pytest.raises(ValueError, match="has no input 'image'; its inputs are: input"):
        session.run({"input": x, "image": x})
    with pytest.raises(TypeError, match="dict"):
        session.run([x])
    with pytest.raises(ValueError, match="threads must be at least 1"):
        fcb.load(demo_fcb).run({"input": x}, threads=0)


def test_errors_by_kind(demo_fcb, demo_model, tmp_path):
    # Subclasses of fcb.Error (NotFoundError also of LookupError).
    for cls in (fcb.UnsupportedError, fcb.CorruptFileError, fcb.TargetUnavailableError, fcb.NotFoundError):
        assert issubclass(cls, fcb.Error) and cls.__module__ == "fcb"
    assert issubclass(fcb.NotFoundError, LookupError)

    with pytest.raises(fcb.NotFoundError, match="missing.fcb"):
        fcb.load(tmp_path / "missing.fcb")

    good = demo_fcb.read_bytes()
    truncated = tmp_path / "truncated.fcb"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(fcb.CorruptFileError) as e:
        fcb.load(truncated)
    assert str(e.value)  # the C++ message: what failed and where
    with pytest.raises(fcb.CorruptFileError):
        fcb.inspect(truncated)

    # A flipped weight byte: refused at load or, after the background check, at the first run.
    flipped = tmp_path / "flipped.fcb"
    data = bytearray(good)
    data[-1] ^= 0x5A
    flipped.write_bytes(bytes(data))
    with pytest.raises(fcb.CorruptFileError):
        fcb.load(flipped).run({"input": np.zeros((1, 3, 64, 64), np.float32)})

    # A target in the file that this host cannot run (another architecture's).
    foreign = [t["name"] for t in fcb.targets() if not t["host_can_run"]]
    assert foreign, "every known target runs here: no target to test TargetUnavailableError with"
    path = tmp_path / "foreign.fcb"
    fcb.compile(demo_model, path, targets=["generic", foreign[0]], input_shapes={"input": [1, 3, 64, 64]})
    with pytest.raises(fcb.TargetUnavailableError, match=re.escape(foreign[0])):
        fcb.load(path, target=foreign[0])


def test_unsupported_model_raises_unsupported_error(tmp_path):
    # BitShift: an ONNX operator fcb does not implement (tests/unsupported_ops_test.cc).
    assert "BitShift" not in fcb.ops(internal=True)
    import onnx  # Debian python3-onnx (scripts/setup.sh): required, never skipped
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("BitShift", ["x", "x"], ["y"], name="my_shift", direction="LEFT")], "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT32, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.UINT32, [2, 3])])
    model = tmp_path / "shift.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    with pytest.raises(fcb.UnsupportedError) as e:
        fcb.compile(model, tmp_path / "shift.fcb", targets="generic")
    assert "BitShift" in str(e.value) and "my_shift" in str(e.value), str(e.value)
    assert not (tmp_path / "shift.fcb").exists()


def test_docstrings_and_stubs():
    assert "ValueError" in fcb.compile.__doc__ and "one-element list" in fcb.compile.__doc__
    params = list(pyinspect.signature(fcb.compile).parameters)
    assert params == ["model", "out_path", "targets", "target_options", "weight_sharing", "input_shapes", "input_values",
                      "progress", "attachments", "state", "kv_capacity", "outputs"]
    for obj in (fcb.load, fcb.inspect, fcb.targets, fcb.ops, fcb.Program, fcb.Program.run, fcb.Program.session,
                fcb.Session.run, fcb.Program.method, fcb.Program.attachment, fcb.State, fcb.State.data,
                fcb.State.reset, fcb.Session.reset_state):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj
    # Every public name of the extension module has a stub in _fcb.pyi.
    stub = Path(fcb.__file__).with_name("_fcb.pyi")
    tree = ast.parse(stub.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    public = {n for n in dir(fcb._fcb) if not n.startswith("_")} | {"__version__"}
    assert public == stubbed
    assert Path(fcb.__file__).with_name("py.typed").exists()
    assert fcb.__version__.count(".") == 2


def test_max_memory_bytes_bounds_what_a_file_may_ask_for(demo_fcb, demo_io):
    x, want = demo_io
    with pytest.raises(MemoryError, match="memory limit of 1000 bytes"):
        fcb.load(demo_fcb, max_memory_bytes=1000)
    with pytest.raises(ValueError, match="max_memory_bytes"):
        fcb.load(demo_fcb, max_memory_bytes=-1)
    # A limit that is enough: it runs as usual.
    program = fcb.load(demo_fcb, max_memory_bytes=1 << 34)
    assert rel_l2(program.run({"input": x})["output"], want) < 1e-4
