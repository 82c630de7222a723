#!/usr/bin/env bash
# Installs what fcb needs on a fresh Debian 12 machine: the build toolchain,
# ccache (rebuilds of unchanged sources; scripts/ccache.sh) and libraries (apt), the AArch64 cross compiler and qemu-user (apt; the ARM
# targets' runtime is cross-built and tested under emulation), clang and libFuzzer (apt;
# the fuzzing and sanitizer build, scripts/fuzz.sh), the Python side used to export test models
# and to build, install and test the Python package fcb (apt: pybind11, pip, setuptools, pytest), and the
# ONNX Runtime oracle (npm). Idempotent: when everything is present it only
# checks and returns.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake pkg-config ccache
  libonnx-dev libprotobuf-dev protobuf-compiler
  libflatbuffers-dev flatbuffers-compiler
  libhwy-dev libxxhash-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-torch python3-torchvision python3-onnx python3-numpy
  pybind11-dev python3-dev python3-pip python3-setuptools python3-wheel python3-pytest
  g++-aarch64-linux-gnu qemu-user file
  espeak-ng
  clang-14 libclang-rt-14-dev
)
# Node.js may come from elsewhere (e.g. NodeSource's nodejs bundles npm and
# conflicts with Debian's npm package); any working node + npm will do.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

# dpkg -s fails when any package is unknown or not fully installed; only then
# touch apt (apt-get update alone takes tens of seconds).
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  echo "setup: installing Debian packages" >&2
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${packages[@]}"
fi

# ONNX Runtime for Node is the numerical oracle. --ignore-scripts: its install
# script downloads GPU add-ons, which fails offline; the CPU library for
# linux-x64 is already inside the package.
oracle="$repo/tools/oracle"
if [ ! -d "$oracle/node_modules/onnxruntime-node" ]; then
  echo "setup: installing onnxruntime-node into tools/oracle" >&2
  (cd "$oracle" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
