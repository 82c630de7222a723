// .npy reading and writing and the error exit shared by the generation
// oracles (ort_generate.js, ort_generate_static.js).
'use strict';

const fs = require('fs');

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

module.exports = { fail, readInt64Npy, writeNpy, argmaxRow };
