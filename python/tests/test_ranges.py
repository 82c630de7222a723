"""Methods with dims chosen at each run: bert_dyn (scripts/export_dynamic_models.py:
input_ids and attention_mask int64 [1, seq], output last_hidden_state
[1, seq, 128]) compiled once for seq 1..512. Program.run and Session.run take
arrays of any length within the range and return outputs at that length,
matching ONNX Runtime; TensorInfo gives the bound, the smallest shape and the
symbols; a shape outside the range raises ValueError naming the input, the
dim, its symbol and its range, and the session runs on."""

import re

import numpy as np
import pytest

import fcb
from conftest import rel_l2

LENGTHS = (7, 333)


@pytest.fixture(scope="module")
def bert(testdata, tmp_path_factory):
    model = testdata / "bert_dyn.onnx"
    assert model.exists(), f"{model} is missing: run scripts/prepare_testdata.sh"
    out = tmp_path_factory.mktemp("bert_dyn") / "bert_dyn.fcb"
    fcb.compile(model, out, targets=["generic", "x86-64-v2"],
                input_shapes={"input_ids": [1, (1, 512)], "attention_mask": [1, [1, 512]]})
    return fcb.load(out)


def case(testdata, n):
    """bert_dyn.L<n>'s inputs and ONNX Runtime's output."""
    feeds = {name: np.load(testdata / f"bert_dyn.L{n}.feeds" / f"{name}.npy")
             for name in ("input_ids", "attention_mask")}
    want = np.load(testdata / f"bert_dyn.L{n}.ref" / "last_hidden_state.npy")
    assert want.shape == (1, n, 128)
    return feeds, want


def test_tensor_info_gives_the_bound_the_smallest_shape_and_the_symbols(bert):
    info = bert.method("main")
    assert [t.name for t in info.inputs] == ["input_ids", "attention_mask"]
    for t in info.inputs:
        assert t.dtype == np.int64
        assert t.shape == (1, 512)
        assert t.min_shape == (1, 1)
        assert t.symbols == (None, "seq")
        assert "min_shape=(1, 1)" in repr(t)
    (out,) = info.outputs
    assert out.name == "last_hidden_state"
    assert out.shape == (1, 512, 128)
    assert out.min_shape is None and out.symbols is None


def test_fixed_inputs_report_min_shape_equal_to_shape(demo_fcb):
    (t,) = fcb.load(demo_fcb).method("main").inputs
    assert t.min_shape == t.shape == (1, 3, 64, 64)
    assert t.symbols == (None, None, None, None)


@pytest.mark.parametrize("n", LENGTHS)
def test_program_run_matches_onnx_runtime_at_each_length(bert, testdata, n):
    feeds, want = case(testdata, n)
    got = bert.run(feeds)["last_hidden_state"]
    assert got.shape == want.shape
    assert rel_l2(got, want) <= 1e-4


def test_one_session_runs_every_length(bert, testdata):
    session = bert.session(threads=2)
    for n in LENGTHS + LENGTHS[:1]:  # and back to a length seen before
        feeds, want = case(testdata, n)
        got = session.run(feeds)["last_hidden_state"]
        assert got.shape == want.shape, n
        assert rel_l2(got, want) <= 1e-4, n


def test_out_of_range_names_the_input_the_dim_and_the_range_and_the_session_runs_on(bert, testdata):
    session = bert.session()
    feeds, want = case(testdata, 7)
    too_long = {name: np.ones((1, 600), np.int64) for name in feeds}
    with pytest.raises(ValueError, match=re.escape("input 'input_ids' of method 'main' is given the shape 1x600, "
                                                   "but its dim 1 is the symbol 'seq' with the range 1..512")):
        session.run(too_long)
    with pytest.raises(ValueError, match=re.escape("input 'input_ids' of method 'main' is given the shape 7 "
                                                   "(rank 1); it has rank 2")):
        session.run({"input_ids": feeds["input_ids"][0], "attention_mask": feeds["attention_mask"]})
    with pytest.raises(ValueError, match=r"input 'input_ids' must be int64 \[1, 512\], but the given array is int32"):
        session.run({"input_ids": feeds["input_ids"].astype(np.int32), "attention_mask": feeds["attention_mask"]})
    with pytest.raises(ValueError, match=re.escape("both are the symbol 'seq', one size per run")):
        session.run({"input_ids": feeds["input_ids"], "attention_mask": np.ones((1, 9), np.int64)})
    with pytest.raises(ValueError, match=re.escape("is given the shape 1x600")):
        bert.run(too_long)
    got = session.run(feeds)["last_hidden_state"]
    assert got.shape == want.shape
    assert rel_l2(got, want) <= 1e-4


def test_inspect_gives_each_output_shape_over_the_symbols(testdata, tmp_path):
    model = testdata / "bert_dyn.onnx"
    out = tmp_path / "bert_dyn.fcb"
    fcb.compile(model, out, targets=["generic"],
                input_shapes={"input_ids": [1, (1, 512)], "attention_mask": [1, (1, 512)]})
    (ctx,) = fcb.inspect(out)["contexts"]
    (o,) = ctx["outputs"]
    assert o["name"] == "last_hidden_state"
    assert o["shape"] == [1, 512, 128]
    assert o["symbolic_shape"] == "1xseqx128"
    assert "requirements" not in ctx  # one symbol: nothing relates it to another
