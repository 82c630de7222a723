#!/usr/bin/env bash
# The Python package installed both ways, each used from a folder outside the
# repository with nothing but the installed copy on the path:
# 1. `cmake --install BUILD --prefix P`: P/PYDIR/fcb, beside P/lib/libfcb.so;
# 2. `pip install --no-build-isolation --target T ./python` (offline): a
#    self-contained T/fcb holding libfcb.so.0 and the importer plugin.
# Each: fcb.targets(), then compile, load and run the demo model.
# 3. `pip install --no-build-isolation ./python` into a virtual environment.
# usage: run_install_test.sh BUILD_DIR SOURCE_DIR PYTHON PYDIR
set -euo pipefail
build="$1"; src="$2"; py="$3"; pydir="$4"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/elsewhere"
cd "$tmp/elsewhere"

check() {  # check WHERE: import from WHERE only, and use it
  local where="$1"
  env -i PATH=/usr/bin:/bin PYTHONPATH="$where" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
    "$py" -c "import fcb; print(fcb.targets())" >"$tmp/targets.out"
  grep -q "'name': 'generic'" "$tmp/targets.out"
  env -i PATH=/usr/bin:/bin PYTHONPATH="$where" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
    "$py" - "$where" "$src/models/demo_cnn.onnx" "$tmp/demo.fcb" <<'PY'
import os, sys
import numpy as np
import fcb
where = os.path.realpath(sys.argv[1])
assert os.path.realpath(fcb.__file__).startswith(where + os.sep), (fcb.__file__, where)
assert os.path.realpath(fcb._fcb.__file__).startswith(where + os.sep), fcb._fcb.__file__
report = fcb.compile(sys.argv[2], sys.argv[3], targets=["generic", "x86-64-v2"], input_shapes={"input": [1, 3, 64, 64]})
out = fcb.load(sys.argv[3]).run({"input": np.full((1, 3, 64, 64), 0.5, np.float32)})["output"]
assert out.shape == (1, 10) and abs(float(out.sum()) - 1.0) < 1e-3, out  # softmax
print("ok", fcb.__file__)
PY
}

# 1. cmake --install
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/$pydir/fcb/__init__.py"
test -f "$tmp/prefix/$pydir/fcb/_fcb.pyi"
check "$tmp/prefix/$pydir"
# The module finds the prefix's libfcb through its RUNPATH, not the build tree's.
runpath="$(readelf -d "$tmp/prefix/$pydir"/fcb/_fcb*.so | grep -E 'RUNPATH|RPATH')"
case "$runpath" in *"$build"*) echo "installed module's RUNPATH names the build tree: $runpath" >&2; exit 1 ;; esac
echo "cmake --install: ok"

# 2. pip install --target, and 3. plain pip install into an interpreter's own
# site directory (a virtual environment's, with Debian's pip and NumPy from
# the system site: Debian marks /usr/bin/python3 itself externally managed).
# Offline: no index, no build isolation.
before="$(cd "$src/python" && find . -path ./tests -prune -o -print | sort)"
FCB_BUILD_DIR="$build" FCB_JOBS=2 "$py" -m pip install --no-build-isolation --no-index --no-deps \
  --disable-pip-version-check --quiet --target "$tmp/pip" "$src/python" >"$tmp/pip.log" 2>&1 \
  || { cat "$tmp/pip.log" >&2; exit 1; }
test -f "$tmp/pip/fcb/libfcb.so.0"
test -f "$tmp/pip/fcb/libfcb_onnx.so"
check "$tmp/pip"
runpath="$(readelf -d "$tmp/pip"/fcb/_fcb*.so | grep -E 'RUNPATH|RPATH')"
case "$runpath" in *"$build"*|*"$tmp/prefix"*) echo "pip-installed module's RUNPATH: $runpath" >&2; exit 1 ;; esac
# The source tree is left as it was (setuptools builds beside the CMake build).
after="$(cd "$src/python" && find . -path ./tests -prune -o -print | sort)"
if [ "$before" != "$after" ]; then
  echo "pip left files in $src/python:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
echo "pip install --target: ok"

"$py" -m venv --without-pip --system-site-packages "$tmp/venv"
FCB_BUILD_DIR="$build" FCB_JOBS=2 "$tmp/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
  --disable-pip-version-check --quiet "$src/python" >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log" >&2; exit 1; }
site="$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')"
test -f "$site/fcb/libfcb.so.0"
py="$tmp/venv/bin/python" check "$site"
echo "pip install (site directory): ok"
