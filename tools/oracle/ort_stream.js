#!/usr/bin/env node
// Runs a stateful model as a stream with ONNX Runtime (CPU): the oracle for
// models whose state tensors are inputs and outputs (recurrent layers used
// chunk by chunk).
//
//   node ort_stream.js MODEL.onnx OUTDIR CALLS NAME=CHUNKS.npy ... \
//        [--state IN=FILE.npy] ... [--feed OUT=IN] ...
//
// CHUNKS.npy holds CALLS inputs stacked on a new leading axis: call i gets
// chunk i. --state gives an input's value for the first call; --feed makes
// output OUT of call i the input IN of call i + 1. Writes every output of the
// last call as OUTDIR/<name>.npy, and OUTDIR/<name>.calls.npy with each
// call's value of every output stacked on a new leading axis. Exit status 0 on
// success, else 1 with "error: ..." on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', headerStart, headerStart + headerLen);
  if (!/'descr'\s*:\s*'<f4'/.test(header)) fail(`${file}: only float32 .npy files are supported here`);
  if (/'fortran_order'\s*:\s*True/.test(header)) fail(`${file}: fortran_order arrays are not supported`);
  const shapeM = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!shapeM) fail(`${file}: malformed header`);
  const dims = shapeM[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const start = headerStart + headerLen;
  if (buf.length - start !== count * 4) fail(`${file}: data size does not match shape [${dims}]`);
  const bytes = new Uint8Array(count * 4);
  bytes.set(buf.subarray(start, start + count * 4));
  return { dims, data: new Float32Array(bytes.buffer) };
}

function writeNpyF32(file, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 16 - ((10 + header.length + 1) % 16);
  header += ' '.repeat(pad % 16) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length < 3) fail('usage: ort_stream.js MODEL OUTDIR CALLS NAME=CHUNKS.npy ... [--state IN=F.npy] [--feed OUT=IN]');
  const [model, outDir, callsText] = argv;
  const calls = Number(callsText);
  if (!Number.isInteger(calls) || calls < 1) fail(`CALLS must be a positive integer, got ${callsText}`);
  const chunks = {};
  const state = {};
  const feed = [];
  for (let i = 3; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--state' || a === '--feed') {
      const kv = argv[++i] || '';
      const eq = kv.indexOf('=');
      if (eq <= 0) fail(`${a} needs NAME=VALUE, got '${kv}'`);
      if (a === '--state') {
        const t = readNpyF32(kv.slice(eq + 1));
        state[kv.slice(0, eq)] = new ort.Tensor('float32', t.data, t.dims);
      } else {
        feed.push([kv.slice(0, eq), kv.slice(eq + 1)]);
      }
    } else {
      const eq = a.indexOf('=');
      if (eq <= 0) fail(`expected NAME=CHUNKS.npy, got '${a}'`);
      const t = readNpyF32(a.slice(eq + 1));
      if (t.dims[0] !== calls) fail(`${a}: leading dim ${t.dims[0]} is not CALLS = ${calls}`);
      chunks[a.slice(0, eq)] = t;
    }
  }
  const opts = { graphOptimizationLevel: 'all', intraOpNumThreads: 1, interOpNumThreads: 1,
    executionMode: 'sequential' };
  const session = await ort.InferenceSession.create(model, opts);
  const history = {};
  let last = null;
  for (let c = 0; c < calls; ++c) {
    const feeds = Object.assign({}, state);
    for (const [name, t] of Object.entries(chunks)) {
      const per = t.data.length / calls;
      feeds[name] = new ort.Tensor('float32', t.data.slice(c * per, (c + 1) * per), t.dims.slice(1));
    }
    last = await session.run(feeds);
    for (const [name, t] of Object.entries(last)) {
      if (t.type !== 'float32') fail(`output ${name} is ${t.type}; only float32 outputs are supported here`);
      (history[name] = history[name] || []).push(t);
    }
    for (const [out, inp] of feed) {
      if (!last[out]) fail(`--feed names output '${out}', which the model does not have`);
      state[inp] = last[out];
    }
  }
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, t] of Object.entries(last)) {
    const safe = name.replace(/[^A-Za-z0-9._-]/g, '_');
    writeNpyF32(path.join(outDir, `${safe}.npy`), t.dims.map(Number), t.data);
    const all = new Float32Array(t.data.length * calls);
    history[name].forEach((h, i) => all.set(h.data, i * t.data.length));
    writeNpyF32(path.join(outDir, `${safe}.calls.npy`), [calls, ...t.dims.map(Number)], all);
  }
}

main().catch((e) => fail(e.message || String(e)));
