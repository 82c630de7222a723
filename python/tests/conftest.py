"""Shared fixtures of the fcb Python tests (run by ctest: python/CMakeLists.txt).

The environment names what the tests need; a missing piece fails the tests
(it is never a skip): FCB_TESTDATA_DIR (scripts/prepare_testdata.sh's exported
models, inputs and ONNX Runtime reference outputs), FCB_SOURCE_DIR (the
repository, for models/demo_cnn.onnx) and FCB_CLI (the fcb command line tool,
for comparing with its output).
"""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import fcb


def _env_path(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the Python tests through ctest (python/CMakeLists.txt)")
    return Path(value)


@pytest.fixture(scope="session")
def testdata():
    path = _env_path("FCB_TESTDATA_DIR")
    if not (path / "demo_cnn.ref" / "output.npy").exists():
        pytest.fail(f"{path} lacks the test data: run scripts/prepare_testdata.sh")
    return path


@pytest.fixture(scope="session")
def demo_model():
    return _env_path("FCB_SOURCE_DIR") / "models" / "demo_cnn.onnx"


@pytest.fixture(scope="session")
def cli():
    path = _env_path("FCB_CLI")
    assert path.exists(), f"{path} does not exist"
    return path


def run_cli(cli, *args, check=True):
    r = subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="session")
def host_targets():
    """The targets this host runs, in fcb.targets() order (generic first)."""
    names = [t["name"] for t in fcb.targets() if t["host_can_run"]]
    assert names and names[0] == "generic"
    return names


@pytest.fixture(scope="session")
def demo_fcb(tmp_path_factory, demo_model):
    """The demo model compiled for generic and x86-64-v2 (batch 1)."""
    out = tmp_path_factory.mktemp("demo") / "demo.fcb"
    report = fcb.compile(demo_model, out, targets=["generic", "x86-64-v2"], input_shapes={"input": [1, 3, 64, 64]})
    assert report.file_size == out.stat().st_size
    return out


@pytest.fixture(scope="session")
def demo_io(testdata):
    """The demo model's test input and ONNX Runtime's output for it."""
    return np.load(testdata / "demo_cnn.input.npy"), np.load(testdata / "demo_cnn.ref" / "output.npy")


def rel_l2(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
