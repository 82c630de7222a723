#!/usr/bin/env bash
# Quick-start demo: installs what it needs, builds fcb, compiles the bundled
# model for every target (x86-64 and AArch64) into ONE .fcb, inspects it, runs
# it with the automatically chosen target and with each x86-64 target forced,
# and shows that all outputs agree (and match ONNX Runtime). The AArch64
# contexts of the same file run under qemu-user: scripts/check-arm.sh.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
echo "== building fcb"
"$repo/scripts/build.sh" "$repo/build"
fcb="$repo/build/fcb"
work="$repo/build/demo"
rm -rf "$work" && mkdir -p "$work"
model="$repo/models/demo_cnn.onnx"
py=/usr/bin/python3

# A fixed input and ONNX Runtime's output for it, as the independent reference.
"$py" -c "import numpy as np; np.save('$work/input.npy', np.random.default_rng(7).standard_normal((1,3,64,64)).astype(np.float32))"
NODE_PATH="$repo/tools/oracle/node_modules" node "$repo/tools/oracle/ort_run.js" "$model" "$work/ort" "input=$work/input.npy"

echo
echo "== fcb compile $(basename "$model") --target all --input-shape input=1x3x64x64"
"$fcb" compile "$model" -o "$work/demo.fcb" --target all --input-shape input=1x3x64x64
echo
echo "== fcb inspect demo.fcb"
"$fcb" inspect "$work/demo.fcb"
echo
echo "== fcb targets"
"$fcb" targets
echo
echo "== fcb run (auto)"
"$fcb" run "$work/demo.fcb" --input "input=$work/input.npy" --output-dir "$work/out-auto"
for t in generic x86-64-v2 x86-64-v3 x86-64-v4; do
  echo "== fcb run --target $t"
  "$fcb" run "$work/demo.fcb" --target "$t" --input "input=$work/input.npy" --output-dir "$work/out-$t"
done
echo
echo "== do the outputs agree?"
"$py" - "$work" <<'PY'
import sys, glob, os, numpy as np
work = sys.argv[1]
ref = {os.path.basename(f): np.load(f) for f in glob.glob(f"{work}/ort/*.npy")}
ok = True
for run in ["auto", "generic", "x86-64-v2", "x86-64-v3", "x86-64-v4"]:
    for name, want in ref.items():
        got = np.load(f"{work}/out-{run}/{name}")
        auto = np.load(f"{work}/out-auto/{name}")
        err_ort = float(np.max(np.abs(got - want)))
        err_auto = float(np.max(np.abs(got - auto)))
        rel = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
        good = rel < 1e-4 and err_ort < 1e-3
        ok &= good
        print(f"  {run:10s} {name}: max|fcb-auto| = {err_auto:.2e}   vs ONNX Runtime: max abs {err_ort:.2e}, rel L2 {rel:.2e}  {'OK' if good else 'MISMATCH'}")
print("all targets agree with each other and with ONNX Runtime" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
PY
