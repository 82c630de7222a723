#!/usr/bin/env bash
# Runs the C example (examples/c/run_model.c) and checks its output against
# the CLI's: the JSON it prints through fcb_inspect_json must equal
# `fcb inspect --json` byte for byte, and the output values it prints must
# equal those `fcb run` writes (same file, same target, the same deterministic
# inputs), every float exactly.
# usage: c_example_vs_cli.sh EXAMPLE FCB_CLI MODEL.onnx [PYTHON]
set -euo pipefail
example="$1"; cli="$2"; model="$3"; py="${4:-/usr/bin/python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
spec='{"targets": ["generic", "x86-64-v2"], "input_shapes": {"input": [1, 3, 64, 64]}}'
"$example" "$model" "$tmp/m.fcb" "$spec" >"$tmp/c.out" 2>"$tmp/c.err" || { cat "$tmp/c.err" >&2; exit 1; }
# The JSON document is everything up to its closing brace in column 0.
sed -n '1,/^}$/p' "$tmp/c.out" >"$tmp/c.json"
"$cli" inspect "$tmp/m.fcb" --json >"$tmp/cli.json"
if ! cmp -s "$tmp/c.json" "$tmp/cli.json"; then
  echo "fcb_inspect_json differs from fcb inspect --json:" >&2
  diff "$tmp/c.json" "$tmp/cli.json" | head -20 >&2
  exit 1
fi
"$cli" run "$tmp/m.fcb" --output-dir "$tmp/out" >"$tmp/run.out" 2>/dev/null
# The C example's target line names the same target as `fcb run`.
want_target="$(sed -n 's/^target: \([^ ]*\) .*/\1/p' "$tmp/run.out")"
got_target="$(sed -n 's/^target: \([^;]*\);.*/\1/p' "$tmp/c.out")"
[ -n "$want_target" ] && [ "$want_target" = "$got_target" ] || {
  echo "the C example ran target '$got_target', fcb run '$want_target'" >&2; exit 1; }
# The values after "output: NAME ..." against OUT/NAME.npy.
"$py" - "$tmp/c.out" "$tmp/out" <<'PY'
import sys, numpy as np
lines = open(sys.argv[1]).read().splitlines()
outputs, name = {}, None
for line in lines:
    if line.startswith("output: "):
        name = line.split()[1]
        outputs[name] = []
    elif name is not None:
        outputs[name].append(line)
assert outputs, "the C example printed no outputs"
for name, values in outputs.items():
    want = np.load(f"{sys.argv[2]}/{name}.npy").astype(np.float32).ravel()
    got = np.array([np.float32(v) for v in values], dtype=np.float32)
    assert got.shape == want.shape, f"{name}: {got.shape} values, fcb run wrote {want.shape}"
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"{name}: values differ from fcb run's"
    print(f"{name}: {got.size} values equal to fcb run's")
PY
echo "C example matches the CLI"
