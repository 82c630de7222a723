#!/usr/bin/env bash
# Fills DIR (default build/testdata) with what the model tests compare against:
#   DIR/<model>.onnx           exported torchvision models (scripts/export_models.py)
#   DIR/<model>.input.npy      a fixed float32 input (seeded normal values)
#   DIR/<model>.ref/<out>.npy  ONNX Runtime's outputs for that input
# plus the same input/ref pair for models/demo_cnn.onnx (as DIR/demo_cnn.*).
# Idempotent: models are re-exported only when export_models.py changed, and
# references are recomputed only when missing or older than their model/input.
# Extra arguments are passed to export_models.py (e.g. --with-resnet50).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/build/testdata}"
shift || true
py=/usr/bin/python3   # Debian's interpreter: the one with torch/onnx/numpy
oracle="$repo/tools/oracle"
export NODE_PATH="$oracle/node_modules"

if [ ! -d "$oracle/node_modules/onnxruntime-node" ]; then
  echo "error: ONNX Runtime oracle missing; run scripts/setup.sh first" >&2
  exit 1
fi
mkdir -p "$dir"

# Re-export when the exporter (or its arguments) changed; the stamp records both.
stamp="$dir/.export.stamp"
want="$(sha256sum "$repo/scripts/export_models.py" | cut -d' ' -f1) $*"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$py" "$repo/scripts/export_models.py" --out "$dir" "$@"
  printf '%s' "$want" >"$stamp"
fi

# name=onnx-path:input-shape for every model that gets an input and a reference.
entries=()
for name in $("$py" "$repo/scripts/export_models.py" --list "$@"); do
  entries+=("$name=$dir/$name.onnx:1,3,224,224")
done
entries+=("demo_cnn=$repo/models/demo_cnn.onnx:1,3,64,64")

for e in "${entries[@]}"; do
  name="${e%%=*}"
  rest="${e#*=}"
  model="${rest%:*}"
  shape="${rest##*:}"
  input="$dir/$name.input.npy"
  ref="$dir/$name.ref"
  if [ ! -f "$input" ]; then
    # Seed from the name so every model gets its own, reproducible input.
    "$py" - "$input" "$shape" "$name" <<'EOF'
import sys, zlib, numpy as np
path, shape, name = sys.argv[1], tuple(int(d) for d in sys.argv[2].split(",")), sys.argv[3]
rng = np.random.default_rng(zlib.crc32(name.encode()))
np.save(path + ".tmp.npy", rng.standard_normal(shape).astype(np.float32))
EOF
    mv "$input.tmp.npy" "$input"
  fi
  # The reference is stale when the model or the input is newer than it.
  if [ ! -f "$ref/.done" ] || [ "$model" -nt "$ref/.done" ] || [ "$input" -nt "$ref/.done" ]; then
    rm -rf "$ref"
    node "$oracle/ort_run.js" "$model" "$ref" "input=$input"
    touch "$ref/.done"
  fi
done
