#!/usr/bin/env bash
# Generates the ONNX backend node tests of Debian's python3-onnx (1.12) into
# build/conformance-data (or $1). Idempotent: does nothing when the data for
# this onnx version is already there.
#
# Debian's numpy 1.24 removed the np.float/np.int/... aliases that the 1.12
# generator still uses, so they are put back before it runs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/build/conformance-data}"
py=/usr/bin/python3
version="$($py -c 'import onnx; print(onnx.__version__)')"
stamp="$out/.generated-onnx-$version"
[[ -f "$stamp" ]] && exit 0
# Generate next to the destination, then swap it in: an interrupted run never
# leaves a half-written folder that looks complete.
tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
$py - "$tmp" <<'PY'
import sys
import warnings
warnings.simplefilter("ignore")
import numpy as np
for name, alias in (("float", float), ("int", int), ("bool", bool),
                    ("object", object), ("complex", complex), ("str", str)):
    if not hasattr(np, name):
        setattr(np, name, alias)
from onnx.backend.test.cmd_tools import main
sys.argv = ["backend-test-tools", "generate-data", "-o", sys.argv[1]]
main()
PY
touch "$tmp/.generated-onnx-$version"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "conformance data: $(ls "$out/node" | wc -l) node tests in $out/node"
