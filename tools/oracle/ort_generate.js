#!/usr/bin/env node
// Greedy decoding with ONNX Runtime over a prefill and a decode model: the
// oracle for the tiny-decoder example (examples/transformer).
//
//   node ort_generate.js PREFILL.onnx DECODE.onnx PROMPT.npy N OUTDIR
//   node ort_generate.js --merged MERGED.onnx PROMPT.npy N OUTDIR
//   node ort_generate.js --past-key-values MERGED.onnx PROMPT.npy N OUTDIR [--dummy-past P]
//
// PROMPT.npy is int64 [1, T]. Prefill gives logits [1, T, V] and the KV cache;
// token 0 is argmax of the last row. Token i > 0 comes from decode(token i-1,
// pos T+i-1, cache). Writes OUTDIR/tokens.npy (int64 [N]) and
// OUTDIR/logits.npy (float32 [N, V], the row each token was chosen from).
//
// --past-key-values takes a decoder merged the way Hugging Face optimum merges
// one (scripts/export_dynamic_models.py, decoder_merged): inputs input_ids,
// attention_mask, past_key_values.{i}.key/.value [B, H, past, Dh] and
// use_cache_branch; outputs logits and present.{i}.key/.value. Prefill runs
// the prompt with use_cache_branch false, a mask of ones [1, T] and a dummy
// past of zeros P long (default 1; that branch reads no past; 0 for a decoder
// without use_cache_branch, which reads its past on every call); each decode
// step runs the previous token with use_cache_branch true, the presents as
// past and a mask of ones [1, past+1]. It also writes
// OUTDIR/prefill_logits.npy (float32 [1, T, V], all of the prefill's logits).
// Options of --past-key-values: --threads N (ONNX Runtime's intra-op threads,
// default 1), --no-spin (its worker threads sleep instead of spinning between
// operators: session.intra_op.allow_spinning 0, faster where other processes
// share the cores) and --repeat R (default 1: generate R times in one session). It
// prints, after the tokens, the time of each phase in fcb generate's format:
//   prefill: T tokens in X ms (Y tok/s)      the prompt's run and its argmax
//   decode: N-1 tokens in X ms (Y tok/s)     the N-1 decode steps with theirs
// (the best of the R generations for each; only the session's runs and the
// argmax are timed, not loading the model or writing files).
// Exit status 0 on success, else 1 with "error: ..." on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const { fail, readInt64Npy, writeNpy, argmaxRow } = require('./npy');

async function main() {
  const args = process.argv.slice(2);
  if (args[0] === '--past-key-values') return generatePastKeyValues(args.slice(1));
  const merged = args[0] === '--merged';
  if (merged) args.shift();
  const [prefillPath, decodePath, promptPath, nArg, outDir] = merged ? [args[0], args[0], ...args.slice(1)] : args;
  if (!outDir) {
    fail('usage: node ort_generate.js PREFILL.onnx DECODE.onnx PROMPT.npy N OUTDIR\n' +
         '       node ort_generate.js --merged MERGED.onnx PROMPT.npy N OUTDIR');
  }
  const n = Number(nArg);
  if (!Number.isInteger(n) || n < 1) fail(`N must be a positive integer, got '${nArg}'`);
  const opts = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all' };
  const prefill = await ort.InferenceSession.create(prefillPath, opts);
  const decode = merged ? prefill : await ort.InferenceSession.create(decodePath, opts);
  const prompt = readInt64Npy(promptPath);
  const t = prompt.dims[1];

  // The merged graph (export_tiny_decoder.py merge_decoders) takes every
  // input in both modes: prefill gets an empty cache, use_cache_branch false.
  const flag = (b) => new ort.Tensor('bool', Uint8Array.of(b ? 1 : 0), [1]);
  let out;
  if (merged) {
    const cache = prefill.inputMetadata.find((m) => m.name === 'k_cache');
    if (!cache || !cache.shape.every(Number.isInteger)) fail(`${prefillPath}: no k_cache input of a fixed shape`);
    const zeros = new ort.Tensor('float32', new Float32Array(cache.shape.reduce((a, b) => a * b, 1)), cache.shape);
    out = await prefill.run({ input_ids: new ort.Tensor('int64', prompt.data, prompt.dims),
                              pos: new ort.Tensor('int64', BigInt64Array.of(0n), [1]),
                              k_cache: zeros, v_cache: zeros, use_cache_branch: flag(false) });
  } else {
    out = await prefill.run({ tokens: new ort.Tensor('int64', prompt.data, prompt.dims) });
  }
  const kName = merged ? 'present_k' : 'k_cache', vName = merged ? 'present_v' : 'v_cache';
  const vocab = Number(out.logits.dims[2]);
  const tokens = new BigInt64Array(n);
  const logits = new Float32Array(n * vocab);
  logits.set(out.logits.data.subarray((t - 1) * vocab, t * vocab), 0);
  tokens[0] = BigInt(argmaxRow(out.logits.data, t - 1, vocab));
  let k = out[kName], v = out[vName];
  for (let i = 1; i < n; i++) {
    const token = new ort.Tensor('int64', BigInt64Array.of(tokens[i - 1]), [1, 1]);
    const pos = new ort.Tensor('int64', BigInt64Array.of(BigInt(t + i - 1)), [1]);
    out = await decode.run(merged ? { input_ids: token, pos, k_cache: k, v_cache: v, use_cache_branch: flag(true) }
                                  : { token, pos, k_cache: k, v_cache: v });
    logits.set(out.logits.data.subarray(0, vocab), i * vocab);
    tokens[i] = BigInt(argmaxRow(out.logits.data, 0, vocab));
    k = merged ? out.present_k : out.k_cache_out;
    v = merged ? out.present_v : out.v_cache_out;
  }
  fs.mkdirSync(outDir, { recursive: true });
  writeNpy(path.join(outDir, 'tokens.npy'), '<i8', tokens, [n]);
  writeNpy(path.join(outDir, 'logits.npy'), '<f4', logits, [n, vocab]);
  process.stdout.write(`tokens: ${Array.from(tokens).join(' ')}\n`);
}

// Greedy decoding over an optimum-style merged decoder (see the header).
async function generatePastKeyValues(args) {
  let dummyPast = 1, threads = 1, repeat = 1, spin = true;
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--dummy-past') dummyPast = Number(args[++i]);
    else if (args[i] === '--threads') threads = Number(args[++i]);
    else if (args[i] === '--repeat') repeat = Number(args[++i]);
    else if (args[i] === '--no-spin') spin = false;
    else pos.push(args[i]);
  }
  const [modelPath, promptPath, nArg, outDir] = pos;
  if (!outDir || pos.length !== 4) {
    fail('usage: node ort_generate.js --past-key-values MERGED.onnx PROMPT.npy N OUTDIR [--dummy-past P] ' +
         '[--threads N] [--repeat R] [--no-spin]');
  }
  const n = Number(nArg);
  if (!Number.isInteger(n) || n < 1) fail(`N must be a positive integer, got '${nArg}'`);
  if (!Number.isInteger(dummyPast) || dummyPast < 0) fail('--dummy-past needs a non-negative integer');
  if (!Number.isInteger(threads) || threads < 1) fail('--threads needs a positive integer');
  if (!Number.isInteger(repeat) || repeat < 1) fail('--repeat needs a positive integer');
  const opts = { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' };
  if (!spin) opts.extra = { session: { intra_op: { allow_spinning: '0' } } };
  const session = await ort.InferenceSession.create(modelPath, opts);
  const pastNames = session.inputNames.filter((x) => x.startsWith('past_key_values.'));
  const presentName = (x) => x.replace(/^past_key_values\./, 'present.');
  // use_cache_branch only where the decoder is merged with an If (optimum);
  // a decoder without it (ONNX Runtime GenAI's form) reads an empty past
  // (--dummy-past 0) on the first call.
  const merged = session.inputNames.includes('use_cache_branch');
  for (const want of ['input_ids', 'attention_mask']) {
    if (!session.inputNames.includes(want)) fail(`${modelPath}: no input '${want}'`);
  }
  if (pastNames.length === 0) fail(`${modelPath}: no past_key_values.* inputs`);
  for (const p of pastNames) {
    if (!session.outputNames.includes(presentName(p))) fail(`${modelPath}: no output '${presentName(p)}' for '${p}'`);
  }
  const prompt = readInt64Npy(promptPath);
  if (prompt.dims.length !== 2 || prompt.dims[0] !== 1) fail(`${promptPath}: expected shape [1, T], got [${prompt.dims}]`);
  const t = prompt.dims[1];
  const flag = (b) => new ort.Tensor('bool', Uint8Array.of(b ? 1 : 0), [1]);
  const ones = (len) => new ort.Tensor('int64', new BigInt64Array(len).fill(1n), [1, len]);

  // The dummy past's head count and head size: the model's declared past
  // shape [batch, heads, past, head_dim], which must give them as numbers.
  const zeros = (dims) => new ort.Tensor('float32', new Float32Array(dims.reduce((a, b) => a * b, 1)), dims);
  const feeds = { input_ids: new ort.Tensor('int64', prompt.data, prompt.dims), attention_mask: ones(t) };
  if (merged) feeds.use_cache_branch = flag(false);
  for (const p of pastNames) {
    const m = session.inputMetadata.find((x) => x.name === p);
    if (!m || m.shape.length !== 4 || !Number.isInteger(m.shape[1]) || !Number.isInteger(m.shape[3])) {
      fail(`${modelPath}: '${p}' needs a declared shape [batch, heads, past, head_dim] with numeric heads and head_dim`);
    }
    feeds[p] = zeros([1, m.shape[1], dummyPast, m.shape[3]]);
  }
  let best = null, tokens, logits, prefillLogits;
  for (let r = 0; r < repeat; r++) {
    const g = await generateOnce(session, feeds, pastNames, presentName, merged, t, n, flag, ones);
    if (!best) best = { prefillMs: g.prefillMs, decodeMs: g.decodeMs };
    best.prefillMs = Math.min(best.prefillMs, g.prefillMs);
    best.decodeMs = Math.min(best.decodeMs, g.decodeMs);
    ({ tokens, logits, prefillLogits } = g);
  }
  fs.mkdirSync(outDir, { recursive: true });
  writeNpy(path.join(outDir, 'prefill_logits.npy'), '<f4', prefillLogits.data, prefillLogits.dims.map(Number));
  writeNpy(path.join(outDir, 'tokens.npy'), '<i8', tokens, [n]);
  writeNpy(path.join(outDir, 'logits.npy'), '<f4', logits, [n, logits.length / n]);
  process.stdout.write(`tokens: ${Array.from(tokens).join(' ')}\n`);
  const rate = (count, ms) => (ms > 0 ? (count * 1000 / ms).toFixed(1) : 'inf');
  process.stdout.write(`prefill: ${t} tokens in ${best.prefillMs.toFixed(1)} ms (${rate(t, best.prefillMs)} tok/s)\n`);
  process.stdout.write(`decode: ${n - 1} tokens in ${best.decodeMs.toFixed(1)} ms (${rate(n - 1, best.decodeMs)} tok/s)\n`);
}

// One greedy generation of n tokens on `session` from the prompt's `feeds`,
// timing the prefill (its run and argmax) and the n - 1 decode steps apart.
async function generateOnce(session, feeds, pastNames, presentName, merged, t, n, flag, ones) {
  const ms = (a) => Number(process.hrtime.bigint() - a) / 1e6;
  let t0 = process.hrtime.bigint();
  let out = await session.run(feeds);
  const vocab = Number(out.logits.dims[2]);
  const tokens = new BigInt64Array(n);
  const logits = new Float32Array(n * vocab);
  tokens[0] = BigInt(argmaxRow(out.logits.data, t - 1, vocab));
  const prefillMs = ms(t0);
  const prefillLogits = out.logits;
  logits.set(out.logits.data.subarray((t - 1) * vocab, t * vocab), 0);
  let decodeMs = 0;
  for (let i = 1; i < n; i++) {
    const step = { input_ids: new ort.Tensor('int64', BigInt64Array.of(tokens[i - 1]), [1, 1]),
                   attention_mask: ones(t + i) };
    if (merged) step.use_cache_branch = flag(true);
    for (const p of pastNames) step[p] = out[presentName(p)];
    const past = Number(step[pastNames[0]].dims[2]);
    if (past !== t + i - 1) fail(`step ${i}: present is ${past} long, expected ${t + i - 1}`);
    t0 = process.hrtime.bigint();
    out = await session.run(step);
    tokens[i] = BigInt(argmaxRow(out.logits.data, 0, vocab));
    decodeMs += ms(t0);
    logits.set(out.logits.data.subarray(0, vocab), i * vocab);
  }
  return { tokens, logits, prefillLogits, prefillMs, decodeMs };
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
