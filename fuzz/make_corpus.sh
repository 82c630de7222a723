#!/usr/bin/env bash
# Seed corpora for the fuzz targets (fuzz/CMakeLists.txt), made from the test
# data: usage fuzz/make_corpus.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  a normal build with its test data (scripts/test.sh makes both):
#              its fcb CLI compiles the .fcb seeds
#   OUT_DIR    gets load/ onnx/ npy/ spec/, one seed per file
# Seeds are small (under 64 KiB each: libFuzzer's inputs grow from them, and
# small inputs run fast).
set -euo pipefail
build="$(cd "$1" && pwd)"
out="$2"
fcb="$build/fcb"
node="$build/conformance-data/node"
data="$build/testdata"
for d in "$fcb" "$node" "$data"; do
  [[ -e "$d" ]] || { echo "error: $d is missing; build and prepare the test data first (scripts/test.sh)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out"/{load,onnx,npy,spec}
small() { [[ $(stat -c %s "$1") -le 65536 ]]; }

# onnx: every ONNX backend node test model, and the small test models.
for m in "$node"/*/model.onnx; do
  small "$m" && cp "$m" "$out/onnx/$(basename "$(dirname "$m")").onnx"
done
for m in "$data"/*.onnx; do small "$m" && cp "$m" "$out/onnx/"; done

# load: .fcb files of every kind the compiler writes: one and two targets,
# fp32 / bf16 / int8 contexts, several methods sharing weights, and one
# operator each from a spread of node tests.
compile() {  # NAME ARGS...
  local name=$1; shift
  if "$fcb" compile "$@" -o "$out/load/$name.fcb" >/dev/null 2>&1 && small "$out/load/$name.fcb"; then :; else
    rm -f "$out/load/$name.fcb"; fi
}
for m in fusion_mix kws_cnn lstm_features gru_features rnn_features lstm_input_forget; do
  compile "$m" "$data/$m.onnx" --target generic --target x86-64-v4
done
compile fusion_mix_int8 "$data/fusion_mix.onnx" --target x86-64-v4 --target-options '{"precision": "int8"}'
compile fusion_mix_bf16 "$data/fusion_mix.onnx" --target x86-64-v4 --target-options '{"precision": "bf16"}'
# precision int4: MatMulNBitsPacked and GatherRowsNBits steps (the int4 test
# data: an MLP with odd K, a tied embedding and head).
compile mlp_int4 "$data/int4/mlp_odd_k.onnx" --target generic --target x86-64-v4 --precision int4
compile tied_int4 "$data/int4/tied_head.onnx" --target x86-64-v4 --precision int4 --int4-head
compile fusion_mix_o0 "$data/fusion_mix.onnx" --target generic --target-options '{"optimization_level": 0}'
compile two_methods --method a="$data/fusion_mix.onnx" --method b="$data/lstm_features.onnx" --target generic
# Attachments (the File's attachments table): several, one empty.
printf 'a\nb\n' >"$out/attach_vocab.txt"
: >"$out/attach_empty"
compile attachments "$data/fusion_mix.onnx" --target generic --attach vocab.txt="$out/attach_vocab.txt" \
  --attach empty="$out/attach_empty" --attach cfg="$out/attach_vocab.txt"
rm -f "$out/attach_vocab.txt" "$out/attach_empty"
n=0
for t in "$node"/test_{conv_with_strides_padding,convtranspose,gemm_default_matrix_bias,matmul_3d,maxpool_2d_pads,averagepool_2d_pads,softmax_axis_1,layer_normalization_4d_axis1,resize_upsample_scales_linear,gather_0,transpose_all_permutations_0,concat_3d_axis_1,split_equal_parts_1d,slice,reduce_mean_keepdims_example,lstm_defaults,gru_defaults,rnn_seq_length,where_example,cast_FLOAT_to_FLOAT16,qlinearconv,qlinearmatmul_2D,dequantizelinear,quantizelinear,einsum_batch_matmul,topk,cumsum_2d_axis_0,depthtospace_crd_mode_example,pad,tile,expand_dim_changed,batchnorm_epsilon,instancenorm_example,lrn,hardmax_axis_1,onehot_with_axis,scatter_elements_with_axis,argmax_keepdims_example}; do
  [[ -f "$t/model.onnx" ]] || continue
  compile "$(basename "$t")" "$t/model.onnx" --target generic --target x86-64-v4
  n=$((n + 1))
done

# A method with a range (plan fields symbols / input_symbols, shape steps
# and view steps): a tiny model whose Reshape target comes from Shape.
if /usr/bin/python3 -c "import onnx" 2>/dev/null; then
  /usr/bin/python3 - "$out/onnx/ranged_reshape.onnx" <<'PY'
import sys
from onnx import TensorProto, helper
n = [helper.make_node("Shape", ["x"], ["s"]),
     helper.make_node("Gather", ["s", "one"], ["len"], axis=0),
     helper.make_node("Unsqueeze", ["len", "zero"], ["len1"]),
     helper.make_node("Concat", ["len1", "eight"], ["target"], axis=0),
     helper.make_node("Reshape", ["x", "target"], ["r"]),
     helper.make_node("Relu", ["r"], ["y"])]
init = [helper.make_tensor("one", TensorProto.INT64, [], [1]), helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("eight", TensorProto.INT64, [1], [8])]
g = helper.make_graph(n, "ranged", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 8])], init)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
open(sys.argv[1], "wb").write(m.SerializeToString())
PY
  compile ranged_reshape "$out/onnx/ranged_reshape.onnx" --target generic --target x86-64-v4 --input-shape x=1x1..64x8
fi

# A growing KV cache kept in place (kv_capacity: KvAppend, AttentionFused and
# a state whose past's rows are chosen at each run): a one-head attention
# over present = Concat(past, x), no weights.
if /usr/bin/python3 -c "import onnx" 2>/dev/null; then
  /usr/bin/python3 - "$out/onnx/growing_cache.onnx" <<'PY'
import sys
from onnx import TensorProto, helper
n = [helper.make_node("Concat", ["past_key_values.0.key", "x"], ["present.0.key"], axis=2),
     helper.make_node("Concat", ["past_key_values.0.value", "x"], ["present.0.value"], axis=2),
     helper.make_node("Transpose", ["present.0.key"], ["kt"], perm=[0, 1, 3, 2]),
     helper.make_node("MatMul", ["x", "kt"], ["qk"]),
     helper.make_node("Mul", ["qk", "half"], ["scores"]),
     helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
     helper.make_node("MatMul", ["probs", "present.0.value"], ["y"])]
init = [helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])]
io = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)  # noqa: E731
g = helper.make_graph(n, "growing", [io("x", [1, 1, "seq", 4]), io("past_key_values.0.key", [1, 1, "past", 4]),
                                     io("past_key_values.0.value", [1, 1, "past", 4])],
                      [io("y", [1, 1, "seq", 4]), io("present.0.key", [1, 1, "total", 4]),
                       io("present.0.value", [1, 1, "total", 4])], init)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
open(sys.argv[1], "wb").write(m.SerializeToString())
PY
  compile growing_cache "$out/onnx/growing_cache.onnx" --target generic --target x86-64-v4 --input-shape x=1x1x1..4x4 \
    --state auto --kv-capacity 8
fi

# npy: the test inputs that are small, and one file of each dtype and header
# version the reader takes.
for f in "$data"/*.npy; do small "$f" && cp "$f" "$out/npy/"; done
py=/usr/bin/python3
if "$py" -c "import numpy" 2>/dev/null; then
  "$py" - "$out/npy" <<'PY'
import sys, numpy as np
out = sys.argv[1]
for dt in ["f4", "f2", "f8", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "?"]:
    np.save(f"{out}/{dt.replace('?', 'bool')}.npy", (np.arange(12).reshape(3, 4) % 3).astype(dt))
np.save(f"{out}/scalar.npy", np.float32(1.5))
np.save(f"{out}/empty.npy", np.zeros((0, 3), np.float32))
with open(f"{out}/v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.ones((2, 2), np.float32), version=(2, 0))
PY
fi

# spec: the README's forms.
cat > "$out/spec/single.json" <<'J'
{"targets": "x86-64-v3"}
J
cat > "$out/spec/list.json" <<'J'
{"targets": ["generic", "x86-64-v3", "x86-64-v4"], "target_options": [{}, {"optimization_level": 2}, {"precision": "int8"}], "weight_sharing": true}
J
cat > "$out/spec/shapes.json" <<'J'
{"targets": ["all"], "input_shapes": {"input": [1, 3, 224, 224], "decode:ids": [1, 1]}, "weight_sharing": false}
J
cat > "$out/spec/ranges.json" <<'J'
{"targets": "generic", "input_shapes": {"input_ids": [1, [1, 512]], "dec:pixels": [1, 3, [64, 1024], [64, 1024]], "same": [[5, 5], 2]}}
J
cat > "$out/spec/bad_ranges.json" <<'J'
{"targets": "generic", "input_shapes": {"a": [1, [512, 1]], "b": [1, [5]], "c": [1, [1, 2, 3]], "d": ["1..5"], "e": [[0, 4]]}}
J
cat > "$out/spec/options.json" <<'J'
{"targets": ["x86-64-v4"], "target_options": {"precision": "bf16", "optimization_level": 3}}
J
cat > "$out/spec/state.json" <<'J'
{"targets": "generic", "state": {"past_key_values.0.key": "present.0.key", "decode:past_key_0": "present_key_0"}}
J
cat > "$out/spec/state_auto.json" <<'J'
{"targets": "all", "state": "auto", "input_shapes": {"prefill:input_ids": [1, [1, 16]], "decode:input_ids": [1, 1]}}
J
cat > "$out/spec/state_bad.json" <<'J'
{"targets": "generic", "state": {"past": "present", "past2": "present", "": ""}}
J
cat > "$out/spec/kv_capacity.json" <<'J'
{"targets": "all", "state": "auto", "kv_capacity": 1024, "input_shapes": {"input_ids": [1, [1, 512]], "attention_mask": [1, [1, 1024]], "decode:input_ids": [1, 1]}}
J
cat > "$out/spec/kv_capacity_bad.json" <<'J'
{"targets": "generic", "kv_capacity": 1048577, "state": {}}
J
cat > "$out/spec/outputs.json" <<'J'
{"targets": "all", "outputs": ["encoder:last_hidden_state", "logits", "next:present.0.decoder.key"]}
J
cat > "$out/spec/outputs_bad.json" <<'J'
{"targets": "generic", "outputs": ["logits", "logits", "", "m:", ":x", 3, []]}
J
for t in load onnx npy spec; do echo "$t: $(ls "$out/$t" | wc -l) seeds"; done
