"""fcb.State: a KV cache kept between runs, shared by a prefill and a decode
session (C++ fcb::State, Execution::Create(program, method, threads, state),
ResetState).

The model is the tiny language model in ONNX Runtime GenAI's CPU int4 form
(scripts/export_llm_models.py --shape tiny --form a, as tests/generate_test.cc
uses it), compiled with state "auto" and kv_capacity 128 as a prefill method
(1..64 tokens) and a decode method (one token). ONNX Runtime's greedy
generation of 64 tokens from a 32-token prompt (tools/oracle/ort_generate.js
on the growing-past form) is the oracle: on every target this host runs, the
same tokens and logits within relative L2 1e-3, feeding only input_ids and
attention_mask; reset reproduces them; two States are independent.
"""

import numpy as np
import pytest

import fcb

CAPACITY = 128
VOCAB = 256


@pytest.fixture(scope="module")
def llm(testdata, tmp_path_factory):
    model = testdata / "llm_tiny_a.onnx"
    for f in (model, testdata / "llm_tiny_a.prompt.npy", testdata / "llm_tiny_a.ref" / "tokens.npy",
              testdata / "llm_tiny_a.ref" / "logits.npy"):
        assert f.exists(), f"{f} is missing: run scripts/prepare_testdata.sh"
    out = tmp_path_factory.mktemp("state") / "llm_tiny_a.fcb"
    fcb.compile({"prefill": model, "decode": model}, out, targets="all",
                input_shapes={"input_ids": [1, (1, 64)], "attention_mask": [1, (1, CAPACITY)],
                              "decode:input_ids": [1, 1], "decode:attention_mask": [1, (2, CAPACITY)]},
                state="auto", kv_capacity=CAPACITY)
    return {
        "file": out,
        "prompt": np.load(testdata / "llm_tiny_a.prompt.npy").reshape(-1).astype(np.int64),
        "tokens": np.load(testdata / "llm_tiny_a.ref" / "tokens.npy").reshape(-1).astype(np.int64),
        "logits": np.load(testdata / "llm_tiny_a.ref" / "logits.npy").reshape(-1, VOCAB),
    }


class Generator:
    """Greedy generation: each run gets the new token ids and a mask of the valid length."""

    def __init__(self, prefill, decode):
        self.prefill, self.decode = prefill, decode
        self.length = 0
        self.tokens, self.logits = [], []

    def feed(self, session, ids):
        total = self.length + len(ids)
        out = session.run({"input_ids": np.asarray(ids, np.int64).reshape(1, -1),
                           "attention_mask": np.ones((1, total), np.int64)})
        self.length = total
        row = out["logits"][0, -1]
        self.logits.append(row)
        self.tokens.append(int(np.argmax(row)))
        return out

    def generate(self, prompt, n):
        self.feed(self.prefill, prompt)
        while len(self.tokens) < n:
            self.feed(self.decode, [self.tokens[-1]])
        return self.tokens


def rel_l2(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), 1e-30))


def test_generates_onnx_runtimes_tokens_on_every_target(llm, host_targets):
    want = llm["tokens"]
    for target in host_targets:
        program = fcb.load(llm["file"], target=target)
        assert program.target == target
        state = fcb.State(program)
        names = [v.name for v in state.variables]
        assert sorted(names) == sorted(f"past_key_values.{l}.{kv}" for l in range(2) for kv in ("key", "value"))
        for v in state.variables:
            assert v.shape == (1, 2, CAPACITY, 16) and v.dtype == np.float32, v
        for threads in (1, 2):
            state.reset()
            prefill = program.session("prefill", threads=threads, state=state)
            decode = program.session("decode", threads=threads, state=state)
            assert prefill.state is state and decode.state is state
            g = Generator(prefill, decode)
            out = g.feed(prefill, llm["prompt"])
            # The cache stays in the State: only the logits come back.
            assert list(out) == ["logits"], list(out)
            while len(g.tokens) < len(want):
                g.feed(decode, [g.tokens[-1]])
            assert g.tokens == list(want), f"{target}, {threads} threads: {g.tokens} != {list(want)}"
            for i, row in enumerate(g.logits):
                assert rel_l2(row, llm["logits"][i]) < 1e-3, f"{target}, {threads} threads, token {i}"
            # The State holds what the prompt and the steps wrote: rows up to
            # the valid length, zeros after.
            cache = state.data(names[0])
            assert np.abs(cache[:, :, :g.length - 1]).max() > 0
            assert not cache[:, :, g.length:].any()


def test_reset_state_reproduces_the_tokens(llm):
    program = fcb.load(llm["file"])
    state = fcb.State(program)
    prefill = program.session("prefill", state=state)
    decode = program.session("decode", state=state)
    first = Generator(prefill, decode).generate(llm["prompt"], 24)
    assert first == list(llm["tokens"][:24])
    # Continuing without a reset sees the old cache: the prompt again after it
    # is another sequence (so a reset is what makes the next one start over).
    decode.reset_state()
    assert not any(state.data(v.name).any() for v in state.variables)
    again = Generator(prefill, decode).generate(llm["prompt"], 24)
    assert again == first
    state.reset()
    assert Generator(prefill, decode).generate(llm["prompt"], 24) == first


def test_two_states_are_independent(llm):
    program = fcb.load(llm["file"])
    a, b = fcb.State(program), fcb.State(program)
    ga = Generator(program.session("prefill", state=a), program.session("decode", state=a))
    gb = Generator(program.session("prefill", state=b), program.session("decode", state=b))
    other = llm["prompt"][::-1][:20].copy()
    # Interleaved step by step: each sequence sees only its own cache.
    ga.feed(ga.prefill, llm["prompt"])
    gb.feed(gb.prefill, other)
    while len(ga.tokens) < 20:
        ga.feed(ga.decode, [ga.tokens[-1]])
        gb.feed(gb.decode, [gb.tokens[-1]])
    assert ga.tokens == list(llm["tokens"][:20])
    # b's tokens are those of its prompt run alone.
    b.reset()
    alone = Generator(program.session("prefill", state=b), program.session("decode", state=b)).generate(other, 20)
    assert gb.tokens == alone
    assert ga.tokens != gb.tokens


def test_sessions_without_a_state_and_refusals(llm):
    program = fcb.load(llm["file"])
    # A session made without a State gets one of its own.
    own = program.session("prefill")
    assert isinstance(own.state, fcb.State) and len(own.state.variables) == 4
    # Program.run with a State: bound to it like a session.
    state = fcb.State(program)
    out = program.run({"input_ids": llm["prompt"].reshape(1, -1),
                       "attention_mask": np.ones((1, len(llm["prompt"])), np.int64)}, method="prefill", state=state)
    assert list(out) == ["logits"]
    assert int(np.argmax(out["logits"][0, -1])) == llm["tokens"][0]
    assert state.data("past_key_values.0.key").any()
    # A State of another program (the same file loaded again) is refused.
    other = fcb.load(llm["file"])
    with pytest.raises(ValueError, match="created from another program"):
        other.session("decode", state=state)
    with pytest.raises(fcb.NotFoundError, match="its state variables are: past_key_values.0.key"):
        state.data("past_key_values.9.key")
    # A sequence longer than the capacity is refused (naming the input) and the state left as it was.
    session = program.session("decode", state=state)
    before = [state.data(v.name) for v in state.variables]
    with pytest.raises(ValueError, match="attention_mask"):
        session.run({"input_ids": np.zeros((1, 1), np.int64), "attention_mask": np.ones((1, CAPACITY + 1), np.int64)})
    for v, old in zip(state.variables, before):
        np.testing.assert_array_equal(state.data(v.name), old)
    assert "State" in repr(state) and fcb.State.__doc__


def test_state_of_a_stateless_program(demo_model, tmp_path):
    out = tmp_path / "demo.fcb"
    fcb.compile(demo_model, out, targets="generic", input_shapes={"input": [1, 3, 64, 64]})
    program = fcb.load(out)
    state = fcb.State(program)
    assert state.variables == []
    session = program.session(state=state)
    assert session.state is None
    x = np.zeros((1, 3, 64, 64), np.float32)
    np.testing.assert_array_equal(session.run({"input": x})["output"], program.run({"input": x})["output"])


def test_generate_example_prints_onnx_runtimes_tokens(llm, cli, host_targets):
    """python/examples/generate.py: the tokens ONNX Runtime generates, as `fcb generate` prints them."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    example = Path(os.environ["FCB_SOURCE_DIR"]) / "python" / "examples" / "generate.py"
    prompt = ",".join(map(str, llm["prompt"]))
    want = "tokens: " + " ".join(map(str, llm["tokens"][:32]))
    for target in (host_targets[0], host_targets[-1]):
        r = subprocess.run([sys.executable, str(example), str(llm["file"]), "--prompt", prompt, "--max-new", "32",
                            "--target", target, "--threads", "2"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want, (target, r.stdout)
        c = subprocess.run([str(cli), "generate", str(llm["file"]), "--prompt", prompt, "--max-new", "32",
                            "--target", target], capture_output=True, text=True)
        assert c.returncode == 0, c.stderr
        assert c.stdout.splitlines()[0] == want
    # A file that does not exist: one error line, exit status 1.
    r = subprocess.run([sys.executable, str(example), str(llm["file"]).replace("llm_tiny_a", "nope"), "--prompt",
                        "1,2"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("error: "), r.stderr


def test_states_on_two_threads_at_once(llm):
    """Two generations at once, each with its own State (the GIL is released while
    they run): both give ONNX Runtime's tokens."""
    import threading
    program = fcb.load(llm["file"])
    results, errors = [None, None], []

    def work(i):
        try:
            state = fcb.State(program)
            g = Generator(program.session("prefill", state=state), program.session("decode", state=state))
            for _ in range(3):
                state.reset()
                g = Generator(g.prefill, g.decode)
                results[i] = g.generate(llm["prompt"], 24)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results[0] == results[1] == list(llm["tokens"][:24])
