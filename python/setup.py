"""Builds the Python package fcb with the project's CMake build.

    pip install --no-build-isolation ./python            # into the interpreter's site directory
    pip install --no-build-isolation --target DIR ./python

The extension module fcb._fcb, libfcb.so.0 and the ONNX importer plugin
libfcb_onnx.so are built by CMake (target fcb_python) and bundled in the
package folder (the module finds the library through its RUNPATH $ORIGIN, and
the library finds the plugin beside itself). The CMake build folder is
$FCB_BUILD_DIR if set, else the repository's build/ when it is configured,
else python/build/cmake (configured here, Release, without the tests). Jobs:
$FCB_JOBS (default: every CPU). Nothing is downloaded.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def version():
    # project(fcb VERSION x.y.z ...) in the top-level CMakeLists.txt.
    for line in (REPO / "CMakeLists.txt").read_text().splitlines():
        if line.startswith("project(fcb VERSION"):
            return line.split()[2]
    raise RuntimeError("no project(fcb VERSION ...) line in CMakeLists.txt")


def cmake_build_dir():
    if os.environ.get("FCB_BUILD_DIR"):
        return Path(os.environ["FCB_BUILD_DIR"]).resolve()
    if (REPO / "build" / "CMakeCache.txt").exists():
        return REPO / "build"
    return HERE / "build" / "cmake"


def _egg_base():
    path = cmake_build_dir() / "python" / "setuptools"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run(cmd):
    print("setup.py: " + " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True)


class CMakeBuild(build_ext):
    """Builds fcb_python with CMake and copies what the package needs."""

    def build_extension(self, ext):
        build = cmake_build_dir()
        if not (build / "CMakeCache.txt").exists():
            run(["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DFCB_BUILD_TESTS=OFF",
                 "-DFCB_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}"])
        jobs = os.environ.get("FCB_JOBS") or str(os.cpu_count() or 1)
        run(["cmake", "--build", build, "--target", "fcb_python", "-j", jobs])
        package_dir = Path(self.get_ext_fullpath(ext.name)).parent
        package_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as staging:
            # The component holds the module (its RUNPATH set for installing),
            # libfcb.so.0 and libfcb_onnx.so, under fcb/.
            run(["cmake", "--install", build, "--component", "python_wheel", "--prefix", staging])
            staged = Path(staging) / "fcb"
            modules = list(staged.glob("_fcb*.so"))
            if len(modules) != 1:
                raise RuntimeError(f"expected one extension module in {staged}, found {modules}")
            shutil.copyfile(modules[0], self.get_ext_fullpath(ext.name))
            for lib in ("libfcb.so.0", "libfcb_onnx.so"):
                if not (staged / lib).exists():
                    raise RuntimeError(f"{lib} is missing from {staged}")
                shutil.copyfile(staged / lib, package_dir / lib)  # follows the soname link


setup(
    name="fcb",
    version=version(),
    description="Ahead-of-time compiler and runtime for neural networks: ONNX to one multi-target .fcb file",
    packages=["fcb"],
    package_data={"fcb": ["py.typed", "_fcb.pyi"]},
    ext_modules=[Extension("fcb._fcb", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    # NumPy is needed at run time (Debian python3-numpy); it is not declared,
    # so that pip never tries to fetch it (`--target DIR` would).
    zip_safe=False,
    # setuptools' own build folders go beside the CMake build, not into the source tree.
    options={"build": {"build_base": str(cmake_build_dir() / "python" / "setuptools")},
             "egg_info": {"egg_base": str(_egg_base())}},
)
