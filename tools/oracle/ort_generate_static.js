#!/usr/bin/env node
// Greedy decoding with ONNX Runtime over a decoder with a static KV buffer
// (scripts/export_state_models.py, gqa_decoder_static): the oracle for the
// state tests (tests/state_test.cc).
//
//   node ort_generate_static.js MODEL.onnx PROMPT.npy N OUTDIR
//
// PROMPT.npy is int64 [1, T]. The model's inputs are input_ids [1, S],
// seqlens_k int32 [1] (valid cache length after the call, minus one) and the
// pasts past_key_N/past_value_N [1, kv_heads, capacity, head]; its outputs
// logits [1, S, V] and present_key_N/present_value_N of the pasts' shapes.
// The loop is the one an application runs without in-place state: the first
// call runs the prompt on zero pasts, every next call one token (the argmax
// of the last logits row), each call feeding the presents back as the pasts.
// Writes OUTDIR/tokens.npy (int64 [N]) and OUTDIR/logits.npy (float32 [N, V],
// the row each token was chosen from). Exit status 0 on success, else 1 with
// "error: ..." on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const { fail, readInt64Npy, writeNpy, argmaxRow } = require('./npy');

async function main() {
  const [model, promptFile, nText, outDir] = process.argv.slice(2);
  if (!outDir) fail('usage: ort_generate_static.js MODEL.onnx PROMPT.npy N OUTDIR');
  const n = Number(nText);
  if (!(n >= 1)) fail(`N must be a positive count, got '${nText}'`);
  const prompt = readInt64Npy(promptFile);
  const session = await ort.InferenceSession.create(model, { executionProviders: ['cpu'], intraOpNumThreads: 1 });
  const pasts = session.inputNames.filter((name) => name.startsWith('past_'));
  if (pasts.length === 0) fail(`${model} has no past_* inputs`);
  // The pasts' shape from the model's metadata (static: every dim fixed).
  const meta = session.inputMetadata || [];
  const shapeOf = (name) => {
    const m = Array.isArray(meta) ? meta.find((x) => x.name === name) : meta[name];
    if (!m || !m.shape || m.shape.some((d) => typeof d !== 'number')) fail(`cannot read the static shape of '${name}'`);
    return m.shape;
  };
  let feeds = {};
  for (const p of pasts) {
    const dims = shapeOf(p);
    feeds[p] = new ort.Tensor('float32', new Float32Array(dims.reduce((a, b) => a * b, 1)), dims);
  }
  let ids = prompt.data, length = 0;
  const tokens = new BigInt64Array(n);
  let vocab = 0, logitRows = [];
  for (let i = 0; i < n; ++i) {
    const s = ids.length;
    length += s;
    feeds.input_ids = new ort.Tensor('int64', ids, [1, s]);
    feeds.seqlens_k = new ort.Tensor('int32', Int32Array.from([length - 1]), [1]);
    const out = await session.run(feeds);
    const logits = out.logits;
    vocab = logits.dims[2];
    const row = logits.data.subarray((s - 1) * vocab, s * vocab);
    const best = argmaxRow(logits.data, s - 1, vocab);
    tokens[i] = BigInt(best);
    logitRows.push(Float32Array.from(row));
    const next = {};
    for (const p of pasts) next[p] = out[p.replace(/^past/, 'present')];
    feeds = next;
    ids = BigInt64Array.from([BigInt(best)]);
  }
  fs.mkdirSync(outDir, { recursive: true });
  writeNpy(path.join(outDir, 'tokens.npy'), '<i8', tokens, [n]);
  const all = new Float32Array(n * vocab);
  logitRows.forEach((r, i) => all.set(r, i * vocab));
  writeNpy(path.join(outDir, 'logits.npy'), '<f4', all, [n, vocab]);
}

main().catch((e) => fail(e.message || String(e)));
