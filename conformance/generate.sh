#!/usr/bin/env bash
# Generates the ONNX backend node tests (python3-onnx 1.12) into
# build/conformance-data (or $1). Idempotent: does nothing when the data is
# already there for this onnx version.
#
# Debian's numpy 1.24 removed the np.float/np.int/... aliases that the 1.12
# generator still uses, so they are put back before it runs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/build/conformance-data}"
py=/usr/bin/python3
version="$($py -c 'import onnx; print(onnx.__version__)')"
stamp="$out/.generated-onnx-$version"
if [[ -f "$stamp" ]]; then
  exit 0
fi
rm -rf "$out"
mkdir -p "$out"
$py - "$out" <<'PY'
import sys
import numpy as np
for name, alias in (("float", float), ("int", int), ("bool", bool),
                    ("object", object), ("complex", complex), ("str", str)):
    if not hasattr(np, name):
        setattr(np, name, alias)
from onnx.backend.test.cmd_tools import main
sys.argv = ["backend-test-tools", "generate-data", "-o", sys.argv[1]]
main()
PY
touch "$stamp"
echo "conformance data: $(ls "$out/node" | wc -l) node tests in $out/node"
