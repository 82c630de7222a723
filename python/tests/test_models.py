"""resnet18 compiled for every target (one `targets="all"` compile, in a
module-scoped fixture); on each target this host runs, run through
Program.run and Session.run and compared with ONNX Runtime's reference output
(tests/models_test.cc's data and tolerances); each other target is in the
file and refused at load with TargetUnavailableError. The GIL is released
while compiling and running."""

import re
import threading
import time

import numpy as np
import pytest

import fcb
from conftest import rel_l2


@pytest.fixture(scope="module")
def resnet18(testdata, host_targets, tmp_path_factory):
    x = np.load(testdata / "resnet18.input.npy")
    want = np.load(testdata / "resnet18.ref" / "output.npy")
    out = tmp_path_factory.mktemp("resnet18") / "resnet18.fcb"
    report = fcb.compile(testdata / "resnet18.onnx", out, targets="all", input_shapes={"input": list(x.shape)})
    assert report.file_size == out.stat().st_size
    return out, x, want


@pytest.mark.parametrize("target", [t["name"] for t in fcb.targets()])
def test_resnet18_matches_onnx_runtime(resnet18, host_targets, target):
    path, x, want = resnet18
    assert target in fcb.inspect(path)["targets"]
    if target not in host_targets:
        # Another architecture's (or an ISA this CPU lacks): compiled into the
        # file, refused by kind here; scripts/check-arm.sh runs the ARM ones.
        with pytest.raises(fcb.TargetUnavailableError, match=re.escape(target)):
            fcb.load(path, target=target)
        return
    program = fcb.load(path, target=target)
    assert program.target == target
    assert program.targets_in_file == [t["name"] for t in fcb.targets()]
    got = program.run({"input": x})["output"]
    assert got.shape == want.shape
    assert rel_l2(got, want) < 1e-4, target
    assert np.max(np.abs(got - want)) < 1e-3, target
    session = program.session(threads=2)
    np.testing.assert_allclose(session.run({"input": x})["output"], got, rtol=1e-5, atol=1e-5)


def _ticks_inside(call):
    """Runs call() while a second Python thread ticks every 0.5 ms; returns the
    ticks that happened strictly inside the call. With the GIL held for the
    whole call, the ticker cannot run (at most a tick or two slip in at the
    call's Python edges); with it released, it ticks throughout."""
    ticks, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            time.sleep(0.0005)
            ticks.append(time.perf_counter())

    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.01)
    start = time.perf_counter()
    call()
    end = time.perf_counter()
    stop.set()
    t.join()
    return sum(start < tick < end for tick in ticks)


def test_gil_is_released_while_running_and_compiling(resnet18, testdata, tmp_path):
    path, x, _ = resnet18
    session = fcb.load(path).session()
    session.run({"input": x})
    # One resnet18 run and one resnet18 compile: each a single extension call
    # of tens to hundreds of milliseconds.
    assert _ticks_inside(lambda: session.run({"input": x})) >= 5
    spec = '{"targets": "generic", "input_shapes": {"input": [1, 3, 224, 224]}}'
    assert _ticks_inside(lambda: fcb._fcb.compile({"main": str(testdata / "resnet18.onnx")}, spec,
                                                  str(tmp_path / "g.fcb"), None)) >= 5
