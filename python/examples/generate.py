#!/usr/bin/env python3
"""Greedy generation with a KV cache kept in an fcb.State, on the fcb Python package.

  generate.py FILE.fcb --prompt 1,2,3 [--max-new N] [--threads N] [--target T]

FILE.fcb holds a language model as two methods sharing a KV cache as state:
"prefill" (the prompt) and "decode" (one token), e.g.

  fcb compile --method prefill=model.onnx --method decode=model.onnx -o lm.fcb \\
    --state auto --kv-capacity 128 --input-shape input_ids=1x1..64 \\
    --input-shape attention_mask=1x1..128 --input-shape decode:input_ids=1x1 \\
    --input-shape decode:attention_mask=1x2..128

Both sessions are bound to one fcb.State, which holds the cache: each run is
given only the new token ids and the inputs derived from the position
(attention_mask of ones, position_ids, seqlens_k, total_sequence_length,
whichever the model takes), and the cache is updated in place. Prints
"tokens: ID ID ..." (the generated ids), as `fcb generate` does.

Run it with the package importable, e.g.
  PYTHONPATH=build/python /usr/bin/python3 python/examples/generate.py lm.fcb --prompt 1,2,3
"""

import argparse
import sys

import numpy as np

import fcb


def feeds(session, ids, past):
    """The inputs of one run: `ids` at positions past .. past + len(ids) - 1."""
    total = past + len(ids)
    held = {v.name for v in session.state.variables}
    out = {}
    for t in session.inputs:
        if t.name in held:
            continue  # the State has it
        if t.name == "input_ids":
            v = np.asarray(ids).reshape(1, -1)
        elif t.name == "attention_mask":
            v = np.ones((1, total))
        elif t.name == "position_ids":
            v = np.arange(past, total).reshape(1, -1)
        elif t.name == "seqlens_k":
            v = np.array([total - 1])
        elif t.name == "total_sequence_length":
            v = np.full(t.shape, total)
        else:
            raise ValueError(f"method '{session.method}': input '{t.name}' is neither kept in the State nor one "
                             "this example feeds (input_ids, attention_mask, position_ids, seqlens_k, "
                             "total_sequence_length)")
        out[t.name] = v.astype(t.dtype)
    return out


def generate(program, prompt, max_new, threads=1, state=None):
    """Greedy ids after `prompt` (max_new of them) with prefill and decode bound to `state`."""
    state = state or fcb.State(program)
    if not state.variables:
        raise ValueError("the file's methods keep no state between runs: compile the cache inputs as state "
                         "(--state auto, and --kv-capacity N for a growing past)")
    prefill = program.session("prefill", threads=threads, state=state)
    decode = program.session("decode", threads=threads, state=state)
    tokens, past, ids, session = [], 0, list(prompt), prefill
    while len(tokens) < max_new:
        logits = session.run(feeds(session, ids, past))["logits"]
        past += len(ids)
        tokens.append(int(np.argmax(logits[0, -1])))
        ids, session = [tokens[-1]], decode
    return tokens


def main(argv):
    ap = argparse.ArgumentParser(prog="generate.py", description=__doc__.split("\n")[0])
    ap.add_argument("file", help="a .fcb with methods prefill and decode sharing a KV cache as state")
    ap.add_argument("--prompt", required=True, help="token ids separated by commas, e.g. 1,2,3")
    ap.add_argument("--max-new", type=int, default=16, help="tokens to generate (default 16)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", default="auto")
    a = ap.parse_args(argv)
    try:
        prompt = [int(t) for t in a.prompt.split(",")]
    except ValueError:
        print(f"error: --prompt '{a.prompt}' is not token ids separated by commas, e.g. 1,2,3", file=sys.stderr)
        return 1
    try:
        program = fcb.load(a.file, target=a.target)
        tokens = generate(program, prompt, a.max_new, a.threads)
    except (fcb.Error, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("tokens: " + " ".join(map(str, tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
