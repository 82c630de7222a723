#!/usr/bin/env node
// Greedy decoding with ONNX Runtime over a prefill and a decode model: the
// oracle for the tiny-decoder example (examples/transformer).
//
//   node ort_generate.js PREFILL.onnx DECODE.onnx PROMPT.npy N OUTDIR
//   node ort_generate.js --merged MERGED.onnx PROMPT.npy N OUTDIR
//
// PROMPT.npy is int64 [1, T]. Prefill gives logits [1, T, V] and the KV cache;
// token 0 is argmax of the last row. Token i > 0 comes from decode(token i-1,
// pos T+i-1, cache). Writes OUTDIR/tokens.npy (int64 [N]) and
// OUTDIR/logits.npy (float32 [N, V], the row each token was chosen from).
// Exit status 0 on success, else 1 with "error: ..." on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

// Reads a C-order int64 .npy (version 1.0) as {data, dims}.
function readInt64Npy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY' || buf[6] !== 1) fail(`${file}: not a version 1.0 .npy file`);
  const hlen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + hlen);
  if (!/'descr'\s*:\s*'<i8'/.test(header)) fail(`${file}: expected int64 ('<i8'), header ${header.trim()}`);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const bytes = new Uint8Array(count * 8);
  bytes.set(buf.subarray(10 + hlen, 10 + hlen + count * 8));
  return { data: new BigInt64Array(bytes.buffer), dims };
}

function writeNpy(file, descr, typed, dims) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

// Index of the largest value of row `row` (length v) of `data`; the first on ties.
function argmaxRow(data, row, v) {
  let best = 0;
  for (let j = 1; j < v; j++) if (data[row * v + j] > data[row * v + best]) best = j;
  return best;
}

async function main() {
  const args = process.argv.slice(2);
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

main().catch((e) => fail(e && e.message ? e.message : String(e)));
