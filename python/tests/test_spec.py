"""fcb.compile's spec arguments follow the JSON spec's rules and raise
ValueError with the library's message, which names the fix."""

import json
import warnings

import pytest

import fcb
from conftest import run_cli

SHAPES = {"input": [1, 3, 64, 64]}

# (keyword arguments, the JSON spec with the same content, words of the fix)
INVALID = [
    ({"targets": []}, {"targets": []}, "give at least one"),
    ({"targets": ["generic", "x86-64-v2"], "target_options": [{}]},
     {"targets": ["generic", "x86-64-v2"], "target_options": [{}]}, "give one options object per target"),
    ({"targets": ["generic", "generic"]}, {"targets": ["generic", "generic"]}, "list each target once"),
    ({"targets": ["generik"]}, {"targets": ["generik"]}, "did you mean 'generic'?"),
    ({"targets": "generic", "target_options": {"optimisation_level": 1}},
     {"targets": "generic", "target_options": {"optimisation_level": 1}}, "did you mean 'optimization_level'?"),
    ({"targets": "generic", "target_options": {"optimization_level": 7}},
     {"targets": "generic", "target_options": {"optimization_level": 7}}, "use an integer from 0 to 3"),
    ({"targets": ["all", "generic"]}, {"targets": ["all", "generic"]}, "use 'all' alone"),
    ({"targets": "generic", "weight_sharing": "yes"}, {"targets": "generic", "weight_sharing": "yes"},
     "must be true or false"),
    ({"targets": "generic", "kv_capacity": 256}, {"targets": "generic", "kv_capacity": 256},
     'add "state": "auto"'),
    ({"targets": "generic", "state": "auto", "kv_capacity": 0.5},
     {"targets": "generic", "state": "auto", "kv_capacity": 0.5}, "must be an integer"),
    ({"targets": "generic", "state": "auto", "kv_capacity": 2 ** 21},
     {"targets": "generic", "state": "auto", "kv_capacity": 2 ** 21}, "out of range: give 1 to 1048576"),
    ({"targets": "generic", "state": "everything"}, {"targets": "generic", "state": "everything"},
     '"state" must be "auto"'),
    ({"targets": "generic", "outputs": []}, {"targets": "generic", "outputs": []},
     "leave it out to keep every output"),
    ({"targets": "generic", "outputs": ["output", "output"]}, {"targets": "generic", "outputs": ["output", "output"]},
     "list each output once"),
    ({"targets": "generic", "outputs": ["main:"]}, {"targets": "generic", "outputs": ["main:"]},
     "with an empty name"),
    ({"targets": "generic", "target_options": {"precision": "int4", "optimization_level": 0}},
     {"targets": "generic", "target_options": {"precision": "int4", "optimization_level": 0}},
     "set optimization_level to 1 or higher"),
    ({"targets": "generic", "target_options": {"int4_head": True}},
     {"targets": "generic", "target_options": {"int4_head": True}}, 'remove it or set "precision": "int4"'),
]


@pytest.mark.parametrize("kwargs,spec,fix", INVALID, ids=[f[2] for f in INVALID])
def test_invalid_specs_raise_value_error_with_the_clis_message(kwargs, spec, fix, demo_model, cli, tmp_path):
    out = tmp_path / "never.fcb"
    with pytest.raises(ValueError) as e:
        fcb.compile(demo_model, out, input_shapes=SHAPES, **kwargs)
    message = str(e.value)
    assert fix in message, message
    assert not out.exists()
    # The same spec as a JSON file: the CLI prints the same message (after naming the file).
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(dict(spec, input_shapes=SHAPES)))
    r = run_cli(cli, "compile", demo_model, "-o", out, "--spec", spec_path, check=False)
    assert r.returncode != 0
    assert r.stderr.strip() == f"error: spec '{spec_path}': {message}"


# Dimension ranges: [lo, hi] (or a tuple) for a bounded dim; each mistake
# names the dim and shows a correct form.
RANGE_INVALID = [
    ([[8, 1], 3, 64, 64], "input_shapes['input'] dim 0 is the range [8, 1], whose low end is above its high end; "
                          "write it [1, 8]"),
    ([(0, 8), 3, 64, 64], "input_shapes['input'] dim 0 is the range [0, 8], which starts below 1: dimensions start at 1"),
    ([[1], 3, 64, 64], "input_shapes['input'] dim 0 is [1]: a range is a list of two integers [lo, hi], e.g. [1, [1, 512]]"),
    ([[1, 2, 3], 3, 64, 64], "dim 0 is [1,2,3]: a range is a list of two integers [lo, hi]"),
    (["1..8", 3, 64, 64], "a dim is a size (an integer) or a range [lo, hi], e.g. [1, [1, 512]]"),
    ([0, 3, 64, 64], "dimensions start at 1"),
]


@pytest.mark.parametrize("dims,fix", RANGE_INVALID, ids=[str(d[0]) for d, _ in RANGE_INVALID])
def test_invalid_ranges_raise_value_error_with_the_clis_message(dims, fix, demo_model, cli, tmp_path):
    out = tmp_path / "never.fcb"
    with pytest.raises(ValueError) as e:
        fcb.compile(demo_model, out, targets="generic", input_shapes={"input": dims})
    message = str(e.value)
    assert fix in message, message
    assert not out.exists()
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({"targets": "generic", "input_shapes": {"input": dims}}))
    r = run_cli(cli, "compile", demo_model, "-o", out, "--spec", spec_path, check=False)
    assert r.returncode != 0
    assert r.stderr.strip() == f"error: spec '{spec_path}': {message}"


def test_ranges_are_validated_against_the_model(demo_model, tmp_path):
    # A degenerate range is the fixed size: the same file byte for byte.
    fixed, same = tmp_path / "fixed.fcb", tmp_path / "same.fcb"
    fcb.compile(demo_model, fixed, targets="generic", input_shapes={"input": [2, 3, 64, 64]})
    fcb.compile(demo_model, same, targets="generic", input_shapes={"input": [(2, 2), 3, [64, 64], 64]})
    assert fixed.read_bytes() == same.read_bytes()
    # A range on a dim the model fixes names the model's size.
    with pytest.raises(ValueError, match=r"gives dim 2 of input 'input' the range 32\.\.64, but the model fixes "
                                         r"that dim to 64; give it that size, e.g. input_shapes\['input'\] = "
                                         r"\[1, 3, 64, 64\]"):
        fcb.compile(demo_model, tmp_path / "x.fcb", targets="generic", input_shapes={"input": [1, 3, (32, 64), 64]})
    assert not (tmp_path / "x.fcb").exists()
    # A valid range compiles: the input takes any batch of 1..8 at each run.
    fcb.compile(demo_model, tmp_path / "range.fcb", targets="generic", input_shapes={"input": [(1, 8), 3, 64, 64]})
    (t,) = fcb.load(tmp_path / "range.fcb").method("main").inputs
    assert (t.shape, t.min_shape, t.symbols) == ((8, 3, 64, 64), (1, 3, 64, 64), ("batch", None, None, None))


def test_scalar_and_one_element_list_give_identical_files(demo_model, tmp_path):
    a, b = tmp_path / "scalar.fcb", tmp_path / "list.fcb"
    fcb.compile(demo_model, a, targets="x86-64-v2", target_options={"optimization_level": 1}, input_shapes=SHAPES)
    fcb.compile(demo_model, b, targets=["x86-64-v2"], target_options=[{"optimization_level": 1}],
                input_shapes={"input": (1, 3, 64, 64)})
    assert a.read_bytes() == b.read_bytes()
    assert fcb.inspect(a)["contexts"][0]["options"]["optimization_level"] == 1


def test_precision_int4_keywords(demo_model, tmp_path):
    out = tmp_path / "int4.fcb"
    fcb.compile(demo_model, out, targets="generic", target_options={"precision": "int4", "int4_head": True},
                input_shapes=SHAPES)
    options = fcb.inspect(out)["contexts"][0]["options"]
    assert (options["precision"], options["int4_head"]) == ("int4", True)


def test_methods_dict_weight_sharing_and_progress(demo_model, tmp_path):
    stages = []
    out = tmp_path / "two.fcb"
    report = fcb.compile({"small": demo_model, "big": demo_model}, out, targets="generic",
                         input_shapes={"small:input": [1, 3, 64, 64], "big:input": [2, 3, 64, 64]},
                         progress=lambda stage, method, target: stages.append((stage, method, target)))
    assert report.file_size == out.stat().st_size and report.warnings == []
    assert stages and {m for _, m, _ in stages} >= {"small", "big"}
    program = fcb.load(out)
    assert sorted(program.methods) == ["big", "small"]
    assert program.method("big").inputs[0].shape == (2, 3, 64, 64)
    with pytest.raises(ValueError, match="several methods|choose|big"):
        program.run({})
    unshared = tmp_path / "unshared.fcb"
    fcb.compile({"small": demo_model, "big": demo_model}, unshared, targets="generic", weight_sharing=False,
                input_shapes={"small:input": [1, 3, 64, 64], "big:input": [2, 3, 64, 64]})
    assert unshared.stat().st_size > out.stat().st_size


def test_progress_exception_is_raised_after_compiling(demo_model, tmp_path):
    def fail(stage, method, target):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        fcb.compile(demo_model, tmp_path / "p.fcb", targets="generic", input_shapes=SHAPES, progress=fail)


def test_warnings_are_issued_and_reported(demo_model, tmp_path):
    # Different options per target defeat weight sharing: a warning with its cost.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = fcb.compile(demo_model, tmp_path / "w.fcb", targets=["generic", "x86-64-v2"],
                             target_options=[{"optimization_level": 0}, {"optimization_level": 2}],
                             input_shapes=SHAPES)
    assert report.warnings, "expected a weight-sharing warning"
    assert [str(w.message) for w in caught if issubclass(w.category, fcb.CompileWarning)] == report.warnings
    assert all(w.filename == __file__ for w in caught)


def test_non_json_values_are_type_errors(demo_model, tmp_path):
    with pytest.raises(TypeError, match="compile spec"):
        fcb.compile(demo_model, tmp_path / "x.fcb", targets="generic", input_shapes={"input": object()})
    with pytest.raises(ValueError, match="empty dict"):
        fcb.compile({}, tmp_path / "x.fcb")


def test_input_values_fix_an_input_to_a_constant(demo_model, tmp_path):
    import numpy as np
    x = np.random.default_rng(3).standard_normal((1, 3, 64, 64)).astype(np.float32)
    fixed, free = tmp_path / "fixed.fcb", tmp_path / "free.fcb"
    fcb.compile(demo_model, fixed, targets="generic", input_values={"input": x})
    fcb.compile(demo_model, free, targets="generic", input_shapes=SHAPES)
    program = fcb.load(fixed)
    assert program.method("main").inputs == []
    got = program.run({})
    want = fcb.load(free).run({"input": x})
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError) as e:
        fcb.compile(demo_model, tmp_path / "bad.fcb", targets="generic", input_values={"input": [[1.0, 2.0]]})
    assert "input_values['input']" in str(e.value) and "rank" in str(e.value)


def test_outputs_keep_only_the_named_ones(testdata, tmp_path):
    """fusion_mix has eight independent int8 branches, one output each: kept
    outputs come back in the model's order with ONNX Runtime's values, the
    others are gone, and an unknown name is refused naming the outputs."""
    import numpy as np
    model = testdata / "fusion_mix.onnx"
    x = np.load(testdata / "fusion_mix.input.npy")
    out = tmp_path / "kept.fcb"
    fcb.compile(model, out, targets="generic", input_shapes={"input": list(x.shape)},
                outputs=["qdq_lookup", "main:conv_integer"])
    program = fcb.load(out)
    assert [o.name for o in program.method("main").outputs] == ["conv_integer", "qdq_lookup"]
    got = program.run({"input": x})
    assert sorted(got) == ["conv_integer", "qdq_lookup"]
    for name in got:
        np.testing.assert_array_equal(got[name], np.load(testdata / "fusion_mix.ref" / f"{name}.npy"))
    with pytest.raises(ValueError) as e:
        fcb.compile(model, tmp_path / "bad.fcb", targets="generic", input_shapes={"input": list(x.shape)},
                    outputs=["qdq_lookp"])
    assert "no output 'qdq_lookp'" in str(e.value) and "its outputs are: conv_integer" in str(e.value), str(e.value)
    assert not (tmp_path / "bad.fcb").exists()
    with pytest.raises(ValueError, match="not a string"):
        fcb.compile(model, tmp_path / "bad.fcb", targets="generic", outputs="qdq_lookup")
