#!/usr/bin/python3
"""Exports the models with run-time dimensions (issue 34: dimensions bounded at
compile time, chosen at each run) and the inputs their references are run on.

    /usr/bin/python3 scripts/export_dynamic_models.py --out DIR
    /usr/bin/python3 scripts/export_dynamic_models.py --list-cases

Weights are random but seeded, inputs are seeded per case (zlib.crc32 of the
case name); the export is deterministic. ONNX Runtime gives every reference
(scripts/prepare_testdata.sh, tools/oracle): nothing here runs ONNX Runtime.

Models (DIR/NAME.onnx) and their dynamic dims (the ONNX dim_param strings):

  bert_dyn        a BERT-like encoder, opset 17: token embedding (vocab 1000)
                  + learned positional embedding (512 positions), LayerNorm,
                  torch.nn.TransformerEncoder (2 layers, d_model 128, 4 heads,
                  ff 256, GELU, batch_first) with src_key_padding_mask taken
                  from the attention mask (exported as Equal/Where and a -inf
                  fill), final LayerNorm.
                    in  input_ids          int64   [1, seq]
                    in  attention_mask     int64   [1, seq]   1 = token, 0 = padding
                    out last_hidden_state  float32 [1, seq, 128]
                  seq must stay within 1..512 (the positional table).

  resnet18_dyn    torchvision resnet18, opset 13, the same seeded weights and
                  BatchNorm statistics as resnet18.onnx (export_models.py).
                    in  input   float32 [1, 3, H, W]
                    out output  float32 [1, 1000]
                  H and W of at least 32 (five stride-2 stages, then a global pool).

  decoder_merged  a GPT-like decoder (2 layers, hidden 64, 4 heads of 16,
                  vocab 256, 1024 positions, pre-LayerNorm blocks with a GELU
                  MLP, causal attention masked by attention_mask) in the form
                  Hugging Face optimum writes a merged decoder, opset 17:
                    in  input_ids                   int64   [batch_size, sequence_length]
                    in  attention_mask              int64   [batch_size, total_sequence_length]
                    in  past_key_values.{0,1}.key   float32 [batch_size, 4, past_sequence_length, 16]
                    in  past_key_values.{0,1}.value float32 [batch_size, 4, past_sequence_length, 16]
                    in  use_cache_branch            bool    [1]
                    out logits                      float32 [batch_size, sequence_length, 256]
                    out present.{0,1}.key           float32 [batch_size, 4, total_sequence_length, 16]
                    out present.{0,1}.value         float32 [batch_size, 4, total_sequence_length, 16]
                  One If on use_cache_branch is the whole top-level graph; all
                  weights are top-level initializers shared by both branches.
                  Both branch subgraphs name their outputs exactly like the
                  If's outputs (logits, present.*), as optimum's merge does.
                  then (use_cache_branch true, "decode"): the with-past export;
                    present = Concat(past, new) along axis 2, positions
                    past_sequence_length .. past_sequence_length+sequence_length-1,
                    attention_mask must be past+sequence long.
                  else (false, "prefill"): the no-past export; it reads no
                    past_key_values input at all, so the caller feeds a dummy
                    past (we use zeros of length 1; ONNX Runtime also takes a
                    zero-length past here and gives the same result), positions
                    0 .. sequence_length-1, attention_mask sequence long,
                    present = the prompt's keys/values (sequence long).
                  So total_sequence_length is the present length in both
                  branches: sequence_length (prefill) or past+sequence (decode).
                  fcb compiles from this one file a prefill method
                  (use_cache_branch false, sequence_length 1..64,
                  total_sequence_length = sequence_length, past fixed at 1)
                  and a decode method (true, sequence_length 1,
                  past_sequence_length 1..1023, total 2..1024).
                  Also written: decoder_merged.no_past.onnx and
                  decoder_merged.with_past.onnx, the two torch exports the
                  merge is made of (inputs/outputs as above, without
                  use_cache_branch; no_past has no past_key_values inputs).

Reference files (a "case" = one run of one model on seeded inputs):

  DIR/CASE.feeds/INPUT.npy   an input of the case, named after the model input
  DIR/CASE.ref/OUTPUT.npy    ONNX Runtime's output for those feeds (ort_run.js)

  bert_dyn.L{1,7,64,333,512}          bert_dyn at that sequence length; the
                                      last max(1, L//8) tokens are padding
                                      (attention_mask 0) for L > 1
  resnet18_dyn.{64x64,224x224,97x131,512x512}   resnet18_dyn at HxW
  decoder_merged.prefill.T{1,64}      use_cache_branch false, a prompt of T
                                      tokens, dummy past of length 1
  decoder_merged.decode.P{1,1023}     use_cache_branch true, one token after a
                                      seeded random past of length P
                                      (attention_mask all ones, P+1 long)

  DIR/decoder_merged.prompt.npy       int64 [1, 8], the generation prompt
  DIR/decoder_merged.gen.ref/         ONNX Runtime's greedy generation of 48
                                      tokens (ort_generate.js --past-key-values):
                                      prefill (use_cache_branch false, prompt,
                                      dummy past of length 1), then 47 decode
                                      steps (true, the previous token, present
                                      fed back as past, mask of ones P+1 long):
      tokens.npy          int64   [48]       the generated tokens
      logits.npy          float32 [48, 256]  the logits row each token was
                                             chosen from (step 0: the prompt's
                                             last row; step i: decode step i)
      prefill_logits.npy  float32 [1, 8, 256] all logits of the prefill run

Options:
  --out DIR       write the models and every case's feeds into DIR
  --list-cases    print CASE:MODEL per reference case, one per line
"""
import argparse
import math
import os
import sys
import warnings
import zlib

SEED = 20240801

BERT_VOCAB, BERT_D, BERT_HEADS, BERT_FF, BERT_LAYERS, BERT_MAX = 1000, 128, 4, 256, 2, 512
BERT_LENGTHS = [1, 7, 64, 333, 512]

RESNET_SIZES = [(64, 64), (224, 224), (97, 131), (512, 512)]

DEC_VOCAB, DEC_D, DEC_HEADS, DEC_LAYERS, DEC_MAX = 256, 64, 4, 2, 1024
DEC_HEAD_DIM = DEC_D // DEC_HEADS
DEC_PROMPT, DEC_GENERATE = 8, 48
DEC_PREFILL_T = [1, 64]
DEC_DECODE_P = [1, 1023]

OPSET = 17


def cases():
    """CASE -> MODEL for every reference run by ort_run.js."""
    out = {}
    for n in BERT_LENGTHS:
        out[f"bert_dyn.L{n}"] = "bert_dyn"
    for h, w in RESNET_SIZES:
        out[f"resnet18_dyn.{h}x{w}"] = "resnet18_dyn"
    for t in DEC_PREFILL_T:
        out[f"decoder_merged.prefill.T{t}"] = "decoder_merged"
    for p in DEC_DECODE_P:
        out[f"decoder_merged.decode.P{p}"] = "decoder_merged"
    return out


def rng_for(np, name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def save_atomic(onnx, model, path):
    onnx.save(model, path + ".tmp")
    os.replace(path + ".tmp", path)


def save_feeds(np, out_dir, case, feeds):
    d = os.path.join(out_dir, case + ".feeds")
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    for name, arr in feeds.items():
        np.save(os.path.join(d, name + ".npy"), arr)


def dims_of(value_info):
    return [d.dim_param if d.HasField("dim_param") else d.dim_value
            for d in value_info.type.tensor_type.shape.dim]


def describe(onnx, model, name):
    """Prints every graph input and output with its dims (dim_param strings
    stay strings), so the export log shows the symbolic dims really are there."""
    print(f"{name}:")
    for kind, vis in (("in ", model.graph.input), ("out", model.graph.output)):
        for vi in vis:
            t = onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type).lower()
            print(f"  {kind} {vi.name:30s} {t:7s} {dims_of(vi)}")


def expect_dims(model, name, want):
    """Fails unless the graph's inputs and outputs have exactly the dims of
    `want` (name -> list of ints and dim_param strings)."""
    got = {vi.name: dims_of(vi) for vi in list(model.graph.input) + list(model.graph.output)}
    for k, v in want.items():
        if got.get(k) != v:
            raise SystemExit(f"error: {name}: '{k}' has dims {got.get(k)}, expected {v}")
    extra = set(got) - set(want)
    if extra:
        raise SystemExit(f"error: {name}: unexpected inputs/outputs {sorted(extra)}")


# ----------------------------------------------------------------------------
# bert_dyn

def bert_module(torch):
    nn = torch.nn

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(BERT_VOCAB, BERT_D)
            self.pos = nn.Embedding(BERT_MAX, BERT_D)
            self.ln_emb = nn.LayerNorm(BERT_D)
            layer = nn.TransformerEncoderLayer(BERT_D, BERT_HEADS, BERT_FF, dropout=0.0, activation="gelu",
                                               batch_first=True)
            # No nested tensors: they are an eager-mode fast path, not exportable.
            self.encoder = nn.TransformerEncoder(layer, BERT_LAYERS, enable_nested_tensor=False)
            self.ln_out = nn.LayerNorm(BERT_D)

        def forward(self, input_ids, attention_mask):
            positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.ln_emb(self.tok(input_ids) + self.pos(positions))
            x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
            return self.ln_out(x)

    torch.manual_seed(SEED)
    m = Bert()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
        m.tok.weight.mul_(0.5)
        m.pos.weight.mul_(0.5)
    return m.eval()


def export_bert(np, onnx, torch, out_dir):
    m = bert_module(torch)
    ids = torch.from_numpy(rng_for(np, "bert_dyn.export").integers(0, BERT_VOCAB, (1, 9)).astype(np.int64))
    mask = torch.ones(1, 9, dtype=torch.int64)
    mask[0, -2:] = 0
    path = os.path.join(out_dir, "bert_dyn.onnx")
    # Parameters keep requires_grad (no torch.no_grad()): with gradients on,
    # the TransformerEncoderLayer takes its plain path, not the fused
    # inference kernel, and exports as ordinary ONNX ops.
    torch.onnx.export(m, (ids, mask), path + ".tmp", opset_version=OPSET,
                      input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": {1: "seq"}, "attention_mask": {1: "seq"},
                                    "last_hidden_state": {1: "seq"}},
                      do_constant_folding=True)
    model = onnx.load(path + ".tmp")
    onnx.checker.check_model(model, full_check=True)
    expect_dims(model, "bert_dyn", {"input_ids": [1, "seq"], "attention_mask": [1, "seq"],
                                    "last_hidden_state": [1, "seq", BERT_D]})
    os.replace(path + ".tmp", path)
    describe(onnx, model, "bert_dyn.onnx")
    for n in BERT_LENGTHS:
        case = f"bert_dyn.L{n}"
        rng = rng_for(np, case)
        ids = rng.integers(0, BERT_VOCAB, (1, n)).astype(np.int64)
        mask = np.ones((1, n), np.int64)
        if n > 1:
            mask[0, n - max(1, n // 8):] = 0
        save_feeds(np, out_dir, case, {"input_ids": ids, "attention_mask": mask})
        with torch.no_grad():  # sanity: the export's source runs at this length
            m(torch.from_numpy(ids), torch.from_numpy(mask))


# ----------------------------------------------------------------------------
# resnet18_dyn

def export_resnet(np, onnx, torch, out_dir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import export_models as em
    # The seeding and randomization of export_models.export, so the weights
    # are those of resnet18.onnx.
    torch.manual_seed(em.SEED)
    gen = torch.Generator().manual_seed(em.SEED + 1)
    model = em.build("resnet18")
    em.randomize(model, torch, gen)
    x = torch.randn(1, 3, 224, 224, generator=gen)
    path = os.path.join(out_dir, "resnet18_dyn.onnx")
    with torch.no_grad():
        torch.onnx.export(model, x, path + ".tmp", opset_version=13, input_names=["input"],
                          output_names=["output"], dynamic_axes={"input": {2: "H", 3: "W"}},
                          do_constant_folding=True, training=torch.onnx.TrainingMode.PRESERVE)
    m = onnx.load(path + ".tmp")
    onnx.checker.check_model(m, full_check=True)
    expect_dims(m, "resnet18_dyn", {"input": [1, 3, "H", "W"], "output": [1, 1000]})
    os.replace(path + ".tmp", path)
    describe(onnx, m, "resnet18_dyn.onnx")
    for h, w in RESNET_SIZES:
        case = f"resnet18_dyn.{h}x{w}"
        x = rng_for(np, case).standard_normal((1, 3, h, w)).astype(np.float32)
        save_feeds(np, out_dir, case, {"input": x})


# ----------------------------------------------------------------------------
# decoder_merged

def decoder_module(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(DEC_D)
            self.qkv = nn.Linear(DEC_D, 3 * DEC_D)
            self.proj = nn.Linear(DEC_D, DEC_D)
            self.ln2 = nn.LayerNorm(DEC_D)
            self.fc1 = nn.Linear(DEC_D, 4 * DEC_D)
            self.fc2 = nn.Linear(4 * DEC_D, DEC_D)

        def forward(self, x, allowed, past_k, past_v):
            b, t = x.shape[0], x.shape[1]
            q, k, v = self.qkv(self.ln1(x)).split(DEC_D, dim=-1)
            q, k, v = (y.reshape(b, t, DEC_HEADS, DEC_HEAD_DIM).transpose(1, 2) for y in (q, k, v))
            if past_k is not None:
                k = torch.cat([past_k, k], dim=2)
                v = torch.cat([past_v, v], dim=2)
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(DEC_HEAD_DIM)
            scores = torch.where(allowed, scores, torch.tensor(-1e9))
            y = torch.matmul(torch.softmax(scores, dim=-1), v)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, DEC_D))
            x = x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
            return x, k, v

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(DEC_VOCAB, DEC_D)
            self.wpe = nn.Embedding(DEC_MAX, DEC_D)
            self.blocks = nn.ModuleList([Block() for _ in range(DEC_LAYERS)])
            self.ln_f = nn.LayerNorm(DEC_D)
            self.head = nn.Linear(DEC_D, DEC_VOCAB, bias=False)

        def forward(self, input_ids, attention_mask, past=None):
            """past: None or [(k, v)] * LAYERS, each [B, H, P, Dh].
            Returns logits and [(present_k, present_v)] * LAYERS."""
            t = input_ids.shape[1]
            p = past[0][0].shape[2] if past is not None else 0
            positions = torch.arange(t) + p                                     # [T]
            x = self.wte(input_ids) + self.wpe(positions).unsqueeze(0)
            keys = torch.arange(attention_mask.shape[1])                        # [P+T]
            causal = keys.unsqueeze(0) <= positions.unsqueeze(1)                # [T, P+T]
            allowed = causal.unsqueeze(0).unsqueeze(0) & (attention_mask != 0).unsqueeze(1).unsqueeze(2)
            presents = []
            for i, blk in enumerate(self.blocks):
                pk, pv = past[i] if past is not None else (None, None)
                x, k, v = blk(x, allowed, pk, pv)
                presents.append((k, v))
            return self.head(self.ln_f(x)), presents

    torch.manual_seed(SEED + 2)
    m = Decoder()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
        m.wte.weight.mul_(0.5)
        m.wpe.weight.mul_(0.5)
        # A larger head so greedy choices are well separated (see the margin check).
        m.head.weight.mul_(4.0)
    return m.eval()


def past_names():
    names = []
    for i in range(DEC_LAYERS):
        names += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    return names


def present_names():
    return [n.replace("past_key_values", "present") for n in past_names()]


def export_decoder_parts(np, onnx, torch, m, out_dir):
    """Exports the no-past and the with-past decoder from the same module."""
    nn = torch.nn

    class NoPast(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            logits, presents = self.m(input_ids, attention_mask)
            return (logits,) + tuple(t for kv in presents for t in kv)

    class WithPast(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *flat_past):
            past = [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(DEC_LAYERS)]
            logits, presents = self.m(input_ids, attention_mask, past)
            return (logits,) + tuple(t for kv in presents for t in kv)

    # Traced with batch 2 and lengths other than 1 so no dimension is
    # specialized as a broadcast of 1.
    rng = rng_for(np, "decoder_merged.export")
    b, t, p = 2, 3, 5
    ids = torch.from_numpy(rng.integers(0, DEC_VOCAB, (b, t)).astype(np.int64))
    past = [torch.from_numpy(rng.standard_normal((b, DEC_HEADS, p, DEC_HEAD_DIM)).astype(np.float32))
            for _ in past_names()]
    ids_axes = {0: "batch_size", 1: "sequence_length"}
    mask_axes = {0: "batch_size", 1: "total_sequence_length"}
    kv_axes = {0: "batch_size", 2: "total_sequence_length"}
    past_axes = {0: "batch_size", 2: "past_sequence_length"}
    outputs = ["logits"] + present_names()
    out_axes = {"logits": ids_axes, **{n: kv_axes for n in present_names()}}
    no_past = os.path.join(out_dir, "decoder_merged.no_past.onnx")
    with_past = os.path.join(out_dir, "decoder_merged.with_past.onnx")
    with torch.no_grad():
        torch.onnx.export(NoPast(), (ids, torch.ones(b, t, dtype=torch.int64)), no_past + ".tmp",
                          opset_version=OPSET, input_names=["input_ids", "attention_mask"], output_names=outputs,
                          dynamic_axes={"input_ids": ids_axes, "attention_mask": mask_axes, **out_axes},
                          do_constant_folding=True)
        torch.onnx.export(WithPast(), (ids, torch.ones(b, p + t, dtype=torch.int64), *past), with_past + ".tmp",
                          opset_version=OPSET, input_names=["input_ids", "attention_mask"] + past_names(),
                          output_names=outputs,
                          dynamic_axes={"input_ids": ids_axes, "attention_mask": mask_axes,
                                        **{n: past_axes for n in past_names()}, **out_axes},
                          do_constant_folding=True)
    parts = []
    for path in (no_past, with_past):
        model = onnx.load(path + ".tmp")
        onnx.checker.check_model(model, full_check=True)
        os.replace(path + ".tmp", path)
        parts.append(model)
    return parts


def merge_decoder(onnx, no_past, with_past):
    """One graph with an If on use_cache_branch: then = with_past, else =
    no_past. Branch outputs keep the export's output names, which are the If's
    output names; every other value inside a branch gets the branch's prefix.
    Initializers equal in content are held once, at the top level."""
    from onnx import TensorProto, helper

    outer_inits, by_content, used = [], {}, set()

    def branch(model, prefix, outer_inputs):
        g = model.graph
        keep = set(outer_inputs) | {o.name for o in g.output}
        rename = {}
        for t in g.initializer:
            key = (t.data_type, tuple(t.dims), t.raw_data or t.SerializeToString())
            if key not in by_content:
                name = t.name if t.name not in used else prefix + t.name
                c = TensorProto()
                c.CopyFrom(t)
                c.name = name
                outer_inits.append(c)
                used.add(name)
                by_content[key] = name
            rename[t.name] = by_content[key]

        def new_name(x):
            if not x or x in keep:
                return x
            return rename.setdefault(x, prefix + x)

        nodes = []
        for n in g.node:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            for i, x in enumerate(c.input):
                c.input[i] = new_name(x)
            for i, x in enumerate(c.output):
                c.output[i] = new_name(x)
            c.name = prefix + n.name
            nodes.append(c)
        outs = []
        for o in g.output:
            c = onnx.ValueInfoProto()
            c.CopyFrom(o)
            outs.append(c)
        return helper.make_graph(nodes, prefix.rstrip("_"), [], outs)

    ins = ["input_ids", "attention_mask"]
    then_g = branch(with_past, "with_past_", ins + past_names())
    else_g = branch(no_past, "no_past_", ins)

    def vi(name, elem, dims):
        return helper.make_tensor_value_info(name, elem, dims)

    past_dims = ["batch_size", DEC_HEADS, "past_sequence_length", DEC_HEAD_DIM]
    kv_dims = ["batch_size", DEC_HEADS, "total_sequence_length", DEC_HEAD_DIM]
    inputs = [vi("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              vi("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    inputs += [vi(n, TensorProto.FLOAT, past_dims) for n in past_names()]
    inputs.append(vi("use_cache_branch", TensorProto.BOOL, [1]))
    outputs = [vi("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", DEC_VOCAB])]
    outputs += [vi(n, TensorProto.FLOAT, kv_dims) for n in present_names()]
    node = helper.make_node("If", ["use_cache_branch"], [o.name for o in outputs], name="optimum::if",
                            then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "decoder_merged", inputs, outputs, outer_inits)
    model = helper.make_model(graph, opset_imports=list(with_past.opset_import),
                              producer_name="fcb export_dynamic_models.py")
    model.ir_version = with_past.ir_version
    onnx.checker.check_model(model, full_check=True)
    for g in (then_g, else_g):
        names = [o.name for o in g.output]
        if names != [o.name for o in outputs]:
            raise SystemExit(f"error: branch {g.name} outputs {names}, not the If's own names")
    return model


def greedy_margin(np, torch, m, prompt):
    """Greedy generation in torch (prefill, then decode steps with the cache),
    returning the tokens and the smallest gap between the best and the second
    best logit over all steps: a reference is only useful for comparing tokens
    when no step is close to a tie."""
    with torch.no_grad():
        ids = torch.from_numpy(prompt)
        logits, presents = m(ids, torch.ones_like(ids))
        tokens, gaps = [], []
        row = logits[0, -1]
        for step in range(DEC_GENERATE):
            top = torch.topk(row, 2).values
            gaps.append(float(top[0] - top[1]))
            tokens.append(int(torch.argmax(row)))
            if step + 1 == DEC_GENERATE:
                break
            total = presents[0][0].shape[2] + 1
            logits, presents = m(torch.tensor([[tokens[-1]]]), torch.ones(1, total, dtype=torch.int64), presents)
            row = logits[0, -1]
    return tokens, min(gaps)


def export_decoder(np, onnx, torch, out_dir):
    m = decoder_module(torch)
    no_past, with_past = export_decoder_parts(np, onnx, torch, m, out_dir)
    merged = merge_decoder(onnx, no_past, with_past)
    path = os.path.join(out_dir, "decoder_merged.onnx")
    save_atomic(onnx, merged, path)
    describe(onnx, merged, "decoder_merged.onnx")
    sizes = {p: os.path.getsize(os.path.join(out_dir, f"decoder_merged{p}.onnx"))
             for p in ("", ".no_past", ".with_past")}
    print(f"  bytes: merged {sizes['']}, no_past {sizes['.no_past']}, with_past {sizes['.with_past']}")
    if sizes[""] > 1.05 * max(sizes[".no_past"], sizes[".with_past"]):
        raise SystemExit("error: decoder_merged.onnx holds its weights twice")

    prompt = rng_for(np, "decoder_merged.prompt").integers(0, DEC_VOCAB, (1, DEC_PROMPT)).astype(np.int64)
    np.save(os.path.join(out_dir, "decoder_merged.prompt.npy"), prompt)
    tokens, gap = greedy_margin(np, torch, m, prompt)
    print(f"  torch greedy tokens: {' '.join(map(str, tokens))}")
    print(f"  smallest top-1/top-2 logit gap over {DEC_GENERATE} steps: {gap:.4f}")
    if gap < 1e-2:
        raise SystemExit(f"error: decoder_merged: greedy step with a near tie (gap {gap}); change the seed")

    def dummy_past(b, p):
        return {n: np.zeros((b, DEC_HEADS, p, DEC_HEAD_DIM), np.float32) for n in past_names()}

    for t in DEC_PREFILL_T:
        case = f"decoder_merged.prefill.T{t}"
        ids = rng_for(np, case).integers(0, DEC_VOCAB, (1, t)).astype(np.int64)
        save_feeds(np, out_dir, case, {"input_ids": ids, "attention_mask": np.ones((1, t), np.int64),
                                       **dummy_past(1, 1), "use_cache_branch": np.array([False])})
    for p in DEC_DECODE_P:
        case = f"decoder_merged.decode.P{p}"
        rng = rng_for(np, case)
        ids = rng.integers(0, DEC_VOCAB, (1, 1)).astype(np.int64)
        past = {n: rng.standard_normal((1, DEC_HEADS, p, DEC_HEAD_DIM)).astype(np.float32) for n in past_names()}
        save_feeds(np, out_dir, case, {"input_ids": ids, "attention_mask": np.ones((1, p + 1), np.int64),
                                       **past, "use_cache_branch": np.array([True])})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--list-cases", action="store_true")
    a = ap.parse_args()
    if a.list_cases:
        for case, model in cases().items():
            print(f"{case}:{model}")
        return 0
    if not a.out:
        ap.error("--out DIR is required")
    warnings.filterwarnings("ignore")
    import numpy as np
    import onnx
    import torch
    # One thread: BatchNorm calibration sums in a fixed order, the bytes do
    # not depend on the core count.
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    export_bert(np, onnx, torch, a.out)
    export_resnet(np, onnx, torch, a.out)
    export_decoder(np, onnx, torch, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
