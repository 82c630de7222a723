#!/usr/bin/env python3
"""Exports a tiny decoder-only transformer as two ONNX methods of one module.

    /usr/bin/python3 export_tiny_decoder.py --out DIR

writes DIR/tiny_decoder.prefill.onnx, DIR/tiny_decoder.decode.onnx,
DIR/tiny_decoder.merged.onnx (both in one graph behind an If, see
merge_decoders) and DIR/tiny_decoder.prompt.npy (int64 [1, PROMPT]).

The model: token + position embedding, LAYERS blocks of (LayerNorm, causal
self-attention, LayerNorm, GELU MLP), a final LayerNorm and an LM head. The KV
cache has a fixed size [LAYERS, HEADS, MAX_CTX, HEAD_DIM] per K and V and is
passed in and out as tensors, so both graphs have static shapes:

  prefill(tokens[1,PROMPT] int64) -> logits[1,PROMPT,VOCAB], k_cache, v_cache
  decode(token[1,1] int64, pos[1] int64, k_cache, v_cache)
        -> logits[1,1,VOCAB], k_cache_out, v_cache_out

Decode writes the new key/value at `pos` with Equal + Where (a fixed-shape
scatter) and masks cache slots after `pos`. Weights are random but seeded;
the export is deterministic.
"""
import argparse
import math
import os

import numpy as np
import onnx
import torch
import torch.nn as nn

VOCAB, D_MODEL, LAYERS, HEADS, MAX_CTX, PROMPT = 96, 48, 2, 3, 32, 8
HEAD_DIM = D_MODEL // HEADS
OPSET = 14


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc1 = nn.Linear(D_MODEL, 4 * D_MODEL)
        self.fc2 = nn.Linear(4 * D_MODEL, D_MODEL)

    def split_heads(self, x):  # [1, T, D] -> [1, H, T, Dh]
        return x.reshape(1, x.shape[1], HEADS, HEAD_DIM).transpose(1, 2)

    def attend(self, q, k, v, mask):
        # q [1,H,T,Dh], k/v [1,H,S,Dh], mask [T,S] bool (True = may attend)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
        y = torch.matmul(torch.softmax(scores, dim=-1), v)  # [1,H,T,Dh]
        return self.proj(y.transpose(1, 2).reshape(1, q.shape[2], D_MODEL))

    def mlp(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))

    def prefill(self, x, mask):
        q, k, v = self.qkv(self.ln1(x)).split(D_MODEL, dim=-1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        x = x + self.attend(q, k, v, mask)
        return x + self.mlp(x), k[0], v[0]  # k, v: [H, T, Dh]

    def decode(self, x, k_cache, v_cache, write, mask):
        # k_cache/v_cache [H, S, Dh]; write [S,1] bool selects slot `pos`.
        q, k, v = self.qkv(self.ln1(x)).split(D_MODEL, dim=-1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        k_all = torch.where(write, k[0].expand(HEADS, MAX_CTX, HEAD_DIM), k_cache)
        v_all = torch.where(write, v[0].expand(HEADS, MAX_CTX, HEAD_DIM), v_cache)
        x = x + self.attend(q, k_all.unsqueeze(0), v_all.unsqueeze(0), mask)
        return x + self.mlp(x), k_all, v_all


class TinyDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(MAX_CTX, D_MODEL)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

    def prefill(self, tokens):
        t = tokens.shape[1]
        positions = torch.arange(t)
        x = self.tok(tokens) + self.pos(positions).unsqueeze(0)
        causal = positions.unsqueeze(1) >= positions.unsqueeze(0)  # [T,T]
        ks, vs = [], []
        for b in self.blocks:
            x, k, v = b.prefill(x, causal)
            pad = torch.zeros(HEADS, MAX_CTX - t, HEAD_DIM)
            ks.append(torch.cat([k, pad], dim=1))
            vs.append(torch.cat([v, pad], dim=1))
        return self.head(self.ln_f(x)), torch.stack(ks), torch.stack(vs)

    def decode(self, token, pos, k_cache, v_cache):
        slots = torch.arange(MAX_CTX)
        x = self.tok(token) + self.pos(pos).unsqueeze(0)
        write = torch.eq(slots, pos).unsqueeze(1)           # [S,1]
        mask = (slots <= pos).unsqueeze(0)                  # [1,S]
        ks, vs = [], []
        for i, b in enumerate(self.blocks):
            x, k, v = b.decode(x, k_cache[i], v_cache[i], write, mask)
            ks.append(k)
            vs.append(v)
        return self.head(self.ln_f(x)), torch.stack(ks), torch.stack(vs)


class Method(nn.Module):
    def __init__(self, model, name):
        super().__init__()
        self.model, self.name = model, name

    def forward(self, *args):
        return getattr(self.model, self.name)(*args)


def build():
    torch.manual_seed(20240607)
    m = TinyDecoder().eval()
    with torch.no_grad():
        # Random LayerNorm affine parameters, so the graph exercises them, and
        # a larger head so greedy choices are well separated.
        for mod in m.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
        m.tok.weight.mul_(0.5)
        m.pos.weight.mul_(0.5)
        m.head.weight.mul_(4.0)
    return m


def main():
    global D_MODEL, HEAD_DIM, LAYERS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=D_MODEL,
                    help=f"model width, a multiple of {HEADS} (default {D_MODEL}; larger ones to measure with)")
    ap.add_argument("--layers", type=int, default=LAYERS, help=f"number of blocks (default {LAYERS})")
    args = ap.parse_args()
    if args.width < HEADS or args.width % HEADS or args.layers < 1:
        ap.error(f"--width must be a positive multiple of {HEADS} and --layers positive")
    D_MODEL, HEAD_DIM, LAYERS = args.width, args.width // HEADS, args.layers
    os.makedirs(args.out, exist_ok=True)
    m = build()
    prompt = torch.from_numpy(np.random.default_rng(7).integers(0, VOCAB, (1, PROMPT)).astype(np.int64))
    cache = torch.zeros(LAYERS, HEADS, MAX_CTX, HEAD_DIM)
    with torch.no_grad():
        torch.onnx.export(Method(m, "prefill"), (prompt,),
                          os.path.join(args.out, "tiny_decoder.prefill.onnx"), opset_version=OPSET,
                          input_names=["tokens"], output_names=["logits", "k_cache", "v_cache"])
        torch.onnx.export(Method(m, "decode"), (prompt[:, :1], torch.tensor([PROMPT]), cache, cache),
                          os.path.join(args.out, "tiny_decoder.decode.onnx"), opset_version=OPSET,
                          input_names=["token", "pos", "k_cache", "v_cache"],
                          output_names=["logits", "k_cache_out", "v_cache_out"])
    np.save(os.path.join(args.out, "tiny_decoder.prompt.npy"), prompt.numpy())
    merged = merge_decoders(os.path.join(args.out, "tiny_decoder.prefill.onnx"),
                            os.path.join(args.out, "tiny_decoder.decode.onnx"))
    onnx.save(merged, os.path.join(args.out, "tiny_decoder.merged.onnx"))


def merge_decoders(prefill_path, decode_path):
    """One graph with an If on `use_cache_branch`, as transformer exporters
    merge a decoder with and without a cache: the decode graph is the then
    branch, the prefill graph the else branch. Inputs input_ids [1, sequence],
    pos, k_cache, v_cache and use_cache_branch (bool [1]); outputs logits
    [1, sequence, VOCAB] (sequence 1 from decode, PROMPT from prefill),
    present_k and present_v. Initializers equal in both graphs are held once,
    in the outer graph."""
    from onnx import TensorProto, helper

    prefill, decode = onnx.load(prefill_path), onnx.load(decode_path)
    outer_inits, by_content = [], {}

    def branch(model, prefix, inputs, outputs):
        g = model.graph
        rename = dict(inputs)
        for t in g.initializer:
            key = (t.data_type, tuple(t.dims), t.raw_data or t.SerializeToString())
            if key not in by_content:
                name = t.name if all(i.name != t.name for i in outer_inits) else prefix + t.name
                c = onnx.TensorProto()
                c.CopyFrom(t)
                c.name = name
                outer_inits.append(c)
                by_content[key] = name
            rename[t.name] = by_content[key]
        nodes = []
        for n in g.node:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            for i, x in enumerate(c.input):
                if x:
                    c.input[i] = rename.get(x, prefix + x)
            for i, x in enumerate(c.output):
                rename[x] = prefix + x
                c.output[i] = prefix + x
            c.name = prefix + n.name
            nodes.append(c)
        for src, dst in outputs:
            nodes.append(helper.make_node("Identity", [rename[src]], [prefix + "out_" + dst], name=prefix + "out_" + dst))
        outs = [helper.make_tensor_value_info(prefix + "out_" + dst, TensorProto.FLOAT, None) for _, dst in outputs]
        return helper.make_graph(nodes, prefix.strip("_"), [], outs)

    cache = ["k_cache", "v_cache"]
    then_g = branch(decode, "decode_", {"token": "input_ids", "pos": "pos", **{c: c for c in cache}},
                    [("logits", "logits"), ("k_cache_out", "present_k"), ("v_cache_out", "present_v")])
    else_g = branch(prefill, "prefill_", {"tokens": "input_ids"},
                    [("logits", "logits"), ("k_cache", "present_k"), ("v_cache", "present_v")])
    cache_shape = [LAYERS, HEADS, MAX_CTX, HEAD_DIM]
    graph = helper.make_graph(
        [helper.make_node("If", ["use_cache_branch"], ["logits", "present_k", "present_v"], name="use_cache",
                          then_branch=then_g, else_branch=else_g)],
        "tiny_decoder_merged",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "sequence"]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("k_cache", TensorProto.FLOAT, cache_shape),
         helper.make_tensor_value_info("v_cache", TensorProto.FLOAT, cache_shape),
         helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", VOCAB]),
         helper.make_tensor_value_info("present_k", TensorProto.FLOAT, cache_shape),
         helper.make_tensor_value_info("present_v", TensorProto.FLOAT, cache_shape)],
        outer_inits)
    model = helper.make_model(graph, opset_imports=list(prefill.opset_import))
    model.ir_version = prefill.ir_version
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    main()
