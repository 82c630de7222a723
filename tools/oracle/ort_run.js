#!/usr/bin/env node
// Runs one ONNX model with ONNX Runtime (CPU) and writes every output as .npy:
// the numerical oracle fcb's outputs are compared against.
//
//   node ort_run.js MODEL.onnx OUTDIR NAME=IN.npy ... [--threads N] [--no-graph-optimization]
//
// --no-graph-optimization: the model's own nodes, without ONNX Runtime's
// fusions (some of which change results, e.g. one that quantizes a MatMul's
// float input to 8 bits when its weight is a dequantized int8 constant).
//
// Output names are sanitized like `fcb run` does: characters outside
// [A-Za-z0-9._-] become '_'. Exit status 0 on success, else 1 with
// "error: ..." on stderr.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// .npy descr <-> ORT tensor type and typed array.
const DTYPES = [
  { descr: ['<f4'], ort: 'float32', array: Float32Array },
  { descr: ['<f8'], ort: 'float64', array: Float64Array },
  { descr: ['<f2'], ort: 'float16', array: Uint16Array },  // IEEE half bits
  { descr: ['<i8'], ort: 'int64', array: BigInt64Array },
  { descr: ['<i4'], ort: 'int32', array: Int32Array },
  { descr: ['|u1', '<u1'], ort: 'uint8', array: Uint8Array },
  { descr: ['|i1', '<i1'], ort: 'int8', array: Int8Array },
  { descr: ['|b1', '<b1'], ort: 'bool', array: Uint8Array },
];

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

// Reads a C-order .npy file (format 1.0, 2.0 or 3.0) into an ort.Tensor.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') {
    fail(`${file}: not a .npy file (bad magic)`);
  }
  const major = buf[6];
  let headerLen, headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) fail(`${file}: truncated header`);
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    fail(`${file}: unsupported .npy version ${major}`);
  }
  if (headerStart + headerLen > buf.length) fail(`${file}: header runs past end of file`);
  const header = buf.toString('latin1', headerStart, headerStart + headerLen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeM = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeM) fail(`${file}: malformed header ${header.trim()}`);
  if (fortran[1] === 'True') fail(`${file}: fortran_order arrays are not supported`);
  const dt = DTYPES.find((d) => d.descr.includes(descr[1]));
  if (!dt) fail(`${file}: unsupported dtype '${descr[1]}'`);
  const dims = shapeM[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map(Number);
  if (dims.some((d) => !Number.isInteger(d) || d < 0)) fail(`${file}: bad shape (${shapeM[1]})`);
  const count = dims.reduce((a, b) => a * b, 1);
  const dataStart = headerStart + headerLen;
  const nbytes = count * dt.array.BYTES_PER_ELEMENT;
  if (buf.length - dataStart !== nbytes) {
    fail(`${file}: data is ${buf.length - dataStart} bytes, shape [${dims}] needs ${nbytes}`);
  }
  // Copy into a fresh, aligned buffer (the file's data offset may be unaligned).
  const bytes = new Uint8Array(nbytes);
  bytes.set(buf.subarray(dataStart, dataStart + nbytes));
  let data = new dt.array(bytes.buffer, 0, count);
  if (dt.ort === 'bool') data = Uint8Array.from(data, (v) => (v ? 1 : 0));
  return new ort.Tensor(dt.ort, data, dims);
}

function writeNpy(file, tensor) {
  const dt = DTYPES.find((d) => d.ort === tensor.type);
  if (!dt) fail(`output of type ${tensor.type} cannot be written as .npy`);
  const dims = tensor.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${dt.descr[0]}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Pad so magic + length + header + '\n' is a multiple of 64, like numpy.
  const pad = (64 - ((10 + header.length + 1) % 64)) % 64;
  header += ' '.repeat(pad) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const src = tensor.data;
  let body;
  if (tensor.type === 'bool') {
    body = Buffer.from(Uint8Array.from(src, (v) => (v ? 1 : 0)));
  } else {
    body = Buffer.from(src.buffer, src.byteOffset, src.byteLength);
  }
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function sanitize(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

async function main() {
  const args = process.argv.slice(2);
  let threads = 1;
  let optimization = 'all';
  const positional = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--threads') {
      threads = Number(args[++i]);
      if (!Number.isInteger(threads) || threads < 1) fail('--threads needs a positive integer');
    } else if (args[i] === '--no-graph-optimization') {
      optimization = 'disabled';
    } else {
      positional.push(args[i]);
    }
  }
  if (positional.length < 2) {
    fail('usage: node ort_run.js MODEL.onnx OUTDIR NAME=IN.npy ... [--threads N] [--no-graph-optimization]');
  }
  const [model, outDir, ...inputArgs] = positional;
  const feeds = {};
  for (const a of inputArgs) {
    const eq = a.indexOf('=');
    if (eq <= 0) fail(`input '${a}' is not NAME=FILE.npy`);
    feeds[a.slice(0, eq)] = readNpy(a.slice(eq + 1));
  }
  let session;
  try {
    session = await ort.InferenceSession.create(model, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: optimization,
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
    });
  } catch (e) {
    fail(`${model}: ONNX Runtime could not load the model: ${e.message}`);
  }
  for (const name of session.inputNames) {
    if (!(name in feeds)) fail(`${model}: no value given for input '${name}'`);
  }
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    fail(`${model}: ONNX Runtime run failed: ${e.message}`);
  }
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) {
    writeNpy(path.join(outDir, `${sanitize(name)}.npy`), results[name]);
  }
}

main().catch((e) => fail(e.stack || String(e)));
