#!/usr/bin/env bash
# ctest conformance_replay_subset: a subset of the ONNX node tests, exported
# with `fcb-conformance --export` and replayed with fcb-conformance-replay,
# must give what fcb-conformance's own run of that subset gives (the whole
# --json report but the timings: per-target pass counts, outcomes, reasons);
# and the replay must fail once an expected output is changed. Two made-up
# tests with two data sets each (one .fcb per data set: different input shapes;
# inputs baked in) go the same way.
#   replay_test.sh FCB_CONFORMANCE FCB_CONFORMANCE_REPLAY DATA_DIR [all]
# "all": the whole suite instead of the subset (.ci/run). Exit 77 (ctest:
# skipped) when DATA_DIR has not been generated (conformance/generate.sh).
set -euo pipefail
conformance="$1"
replay="$2"
data="$3"
scope="${4:-subset}"
if [[ ! -d "$data" ]]; then
  echo "skipped: no conformance data in $data (run conformance/generate.sh)"
  exit 77
fi
py=/usr/bin/python3
tmp="$(mktemp -d "${TMPDIR:-/tmp}/fcb-replay-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# Casts: float16, bfloat16 (stored as uint16 in .npy), strings (refused at
# compile time), CastLike's contradicted input shapes; Reshape and Expand:
# shape inputs baked in as constants (const-in); Adagrad: unsupported.
filters=(--filter test_cast --filter test_reshape --filter test_expand --filter test_adagrad)
[[ "$scope" == all ]] && filters=()

# The same report from both ways, timings aside: same_report DATA_DIR NAME [flags].
same_report() {
  local dir="$1" name="$2"
  shift 2
  "$conformance" "$dir" "$@" --jobs 2 --min-pass-rate 0 --json "$tmp/$name.native.json" > "$tmp/$name.native.txt"
  "$conformance" "$dir" "$@" --jobs 2 --export "$tmp/$name"
  "$replay" "$tmp/$name" --jobs 2 --min-pass-rate 0 --json "$tmp/$name.replay.json" --failures \
    > "$tmp/$name.replay.txt"
  "$py" - "$tmp/$name.native.json" "$tmp/$name.replay.json" <<'PY'
import json, sys
def load(p):
    j = json.load(open(p))
    j.pop("seconds")
    for r in j["results"]:
        r.pop("seconds")
    return j
native, replay = load(sys.argv[1]), load(sys.argv[2])
print("per target, native run:", native["targets"])
print("per target, replay:    ", replay["targets"])
if native != replay:
    for key in sorted(set(native) | set(replay)):
        if native.get(key) != replay.get(key) and key != "results":
            print(f"differs: {key}: native {native.get(key)} replay {replay.get(key)}")
    for a, b in zip(native["results"], replay["results"]):
        if a != b:
            print(f"differs: {a} / {b}")
    sys.exit("FAIL: the replay does not report what fcb-conformance's run does")
PY
}

same_report "$data" export "${filters[@]}"
tail -n 8 "$tmp/export.replay.txt"
"$py" - "$tmp/export.replay.json" <<'PY'
import json, sys
replay = json.load(open(sys.argv[1]))
kinds = {r["outcome"] for r in replay["results"]}
# The subset must exercise passes, failures and unsupported tests, and const-in.
for want in ("pass", "fail", "unsupported"):
    if want not in kinds:
        sys.exit(f"FAIL: the subset has no '{want}' test: pick other filters")
if replay["const_inputs_passes"] == 0:
    sys.exit("FAIL: the subset has no const-in pass: pick other filters")
PY

# A changed expected value must fail the replay (the exit status below the pass
# rate, and the test as a wrong result).
# Made-up tests with two data sets: a Relu whose input has a symbolic dim, fed
# 2x3 then 5x3 (compiled once per shape), and a Reshape with its shape fed as
# an input (baked in, so compiled once per data set).
mkdir -p "$tmp/made-tests"
"$py" - "$tmp/made-tests" "$data" <<'PY'
import os, shutil, sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
out, data = sys.argv[1], sys.argv[2]
def write(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array).SerializeToString())
d = os.path.join(out, "test_made_relu_two_shapes")
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
os.makedirs(d)
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
for k, n in enumerate((2, 5)):
    s = os.path.join(d, f"test_data_set_{k}")
    os.makedirs(s)
    x = np.linspace(-1, 1, n * 3, dtype=np.float32).reshape(n, 3)
    write(os.path.join(s, "input_0.pb"), x)
    write(os.path.join(s, "output_0.pb"), np.maximum(x, 0))
d = os.path.join(out, "test_made_reshape_two_sets")
shutil.copytree(os.path.join(data, "test_reshape_reordered_all_dims"), d)
shutil.copytree(os.path.join(d, "test_data_set_0"), os.path.join(d, "test_data_set_1"))
PY
same_report "$tmp/made-tests" made
"$py" - "$tmp/made/manifest.json" <<'PY'
import json, sys
tests = {t["name"]: t for t in json.load(open(sys.argv[1]))["tests"]}
for name, const_inputs in (("test_made_relu_two_shapes", 0), ("test_made_reshape_two_sets", 1)):
    t = tests[name]
    files = [s["fcb"] for s in t["data_sets"]]
    if t["outcome"] != "exported" or t["const_inputs"] != const_inputs or len(set(files)) != 2:
        sys.exit(f"FAIL: {name} is not exported with one .fcb per data set: {t}")
print("made-up tests: one .fcb per data set, replayed as run")
PY

victim=test_cast_FLOAT_to_DOUBLE
"$py" - "$tmp/export/$victim/test_data_set_0/output_0.npy" <<'PY'
import sys
import numpy as np
a = np.load(sys.argv[1])
flat = a.reshape(-1)
flat[0] = flat[0] + 1.0 + abs(flat[0])
np.save(sys.argv[1], a)
PY
if "$replay" "$tmp/export" --filter "$victim" --min-pass-rate 1 --json "$tmp/altered.json" > "$tmp/altered.txt" 2>&1; then
  cat "$tmp/altered.txt"
  echo "FAIL: the replay passed with an altered expected output"
  exit 1
fi
"$py" - "$tmp/altered.json" "$victim" <<'PY'
import json, sys
r = [r for r in json.load(open(sys.argv[1]))["results"] if r["name"] == sys.argv[2]]
if len(r) != 1 or r[0]["outcome"] != "fail" or r[0].get("failure_kind") != "wrong result":
    sys.exit(f"FAIL: the altered test is not reported as a wrong result: {r}")
print(f"altered expected output: {r[0]['name']}: {r[0]['reason']}")
PY
echo "ok"
