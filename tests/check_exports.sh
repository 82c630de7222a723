#!/usr/bin/env bash
# libfcb.so exports the public API (include/fcb/, marked FCB_API) and nothing
# else; the importer plugin exports its one entry point.
# usage: check_exports.sh LIBFCB.so LIBFCB_ONNX.so
set -euo pipefail
lib="$1"; plugin="$2"
fail=0

# Defined dynamic symbols, demangled, without address and type letter.
syms() { nm -D --defined-only --demangle "$1" | sed -E 's/^[0-9a-fA-F]+ [A-Za-z] //'; }
# The qualified names alone (parameter lists dropped: they name std:: types).
names() { sed -E 's/\(.*//'; }

# What include/fcb/ declares: these classes' members and these functions, and
# the C API (fcb/fcb_c.h), fcb_* with C linkage (unmangled).
public_classes='Status|Program|Execution|State|TensorSpec'
public_functions='StatusCodeName|EscapeForDisplay|FileSummaryJson|CompileReportJson|InvalidArgument|NotFound|Unsupported|IoError|CorruptFile|ResourceExhausted|Unavailable|Internal|Compile|CompileMethods|ParseSpecJson|ParseTargetOptionsJson|ValidateSpec|ReadAttachmentFile|DTypeName|DTypeSize|Version|ListTargets|ListOperators|InspectFile|NpyElementSize|ReadNpy|ParseNpy|SerializeNpy|WriteNpy'
abi='(\[abi:cxx11\])?'
allowed="^(fcb::(${public_classes})::(~?[A-Za-z_][A-Za-z0-9_]*|operator=)${abi}|fcb::(${public_functions})${abi}|fcb_[a-z0-9_]+|_init|_fini|_edata|_end|__bss_start)$"

all="$(syms "$lib")"
count="$(printf '%s\n' "$all" | grep -c . || true)"
bad="$(printf '%s\n' "$all" | names | grep -Ev "$allowed" || true)"
if [ -n "$bad" ]; then
  echo "libfcb.so exports symbols outside the public API:" >&2
  printf '%s\n' "$bad" | head -50 >&2
  fail=1
fi
# Belt and braces: no internal namespace or dependency, whatever the pattern above allows.
leaks="$(printf '%s\n' "$all" | names | grep -E 'fcb::(ops|kernels|format|ir|compile|passes|fault|import|cli|fb)::|ProgramImpl|ExecutionImpl|hwy::|flatbuffers::|nlohmann|XXH|onnx|google::protobuf|std::' || true)"
if [ -n "$leaks" ]; then
  echo "libfcb.so exports internals:" >&2
  printf '%s\n' "$leaks" | head -50 >&2
  fail=1
fi
# The API itself is there (a broken export macro would also "pass" the checks above).
# Here-strings, not pipes: under pipefail, grep -q quitting at its first match
# would make printf's write fail (SIGPIPE) and the check report a miss.
for want in 'fcb::Program::Load(' 'fcb::Execution::Run()' 'fcb::CompileMethods(' 'fcb::InspectFile(' \
            'fcb::ListTargets()' 'fcb::ListOperators()' 'fcb::ReadNpy(' 'fcb::Status::message'; do
  if ! grep -qF "$want" <<<"$all"; then
    echo "libfcb.so does not export $want" >&2
    fail=1
  fi
done
# Every function fcb_c.h declares, under its C name (a missing extern "C"
# would export it mangled, as fcb_...(...) after demangling).
header="$(dirname "$0")/../include/fcb/fcb_c.h"
for fn in $(grep -oE '^FCB_C_API [^(]*[ *](fcb_[a-z0-9_]+)\(' "$header" | sed -E 's/.*[ *](fcb_[a-z0-9_]+)\(/\1/'); do
  if ! grep -qx "$fn" <<<"$all"; then
    echo "libfcb.so does not export the C function $fn (with C linkage)" >&2
    fail=1
  fi
done

plugin_syms="$(syms "$plugin" | grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' || true)"
if [ "$plugin_syms" != "fcb_onnx_importer_v1" ]; then
  echo "libfcb_onnx.so must export only fcb_onnx_importer_v1, it exports:" >&2
  printf '%s\n' "$plugin_syms" | head -50 >&2
  fail=1
fi

[ "$fail" -eq 0 ] && echo "exports ok: libfcb.so has $count defined dynamic symbols, all public API"
exit "$fail"
