#!/usr/bin/env node
// Times one ONNX model under ONNX Runtime (CPU), the counterpart of `fcb bench`.
//
//   node ort_bench.js MODEL.onnx [--threads N] [--iterations N] [--first-only]
//
// Feeds seeded uniform random float32 inputs (symbolic dims become 1) and
// prints one JSON line: session_ms (session creation), first_run_ms,
// min_ms, median_ms, max_ms over the timed runs, and peak_rss_kb of this
// process. --first-only stops after the first run, for cold-start timing of
// the whole process. All graph optimizations on, sequential execution mode,
// intra-op threads = N, inter-op threads = 1 (what fcb's --threads N means).
'use strict';

const fs = require('fs');
const ort = require('onnxruntime-node');

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { model: null, threads: 1, iterations: 20, firstOnly: false };
  for (let i = 0; i < argv.length; ++i) {
    const s = argv[i];
    if (s === '--threads') a.threads = Number(argv[++i]);
    else if (s === '--iterations') a.iterations = Number(argv[++i]);
    else if (s === '--first-only') a.firstOnly = true;
    else if (s.startsWith('--')) fail(`unknown option ${s}`);
    else a.model = s;
  }
  if (!a.model) fail('usage: ort_bench.js MODEL.onnx [--threads N] [--iterations N] [--first-only]');
  if (!(a.threads >= 1) || !(a.iterations >= 1)) fail('--threads and --iterations must be >= 1');
  return a;
}

// A small deterministic generator (xorshift32), so both runtimes could be fed
// the same data; values in [-1, 1).
function fillRandom(n, seed) {
  const out = new Float32Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; ++i) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out[i] = (x / 4294967296) * 2 - 1;
  }
  return out;
}

function peakRssKb() {
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) : -1;
  } catch (e) {
    return -1;
  }
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const opts = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
  };
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, opts);
  const t1 = process.hrtime.bigint();
  const feeds = {};
  let seed = 1;
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find?.((m) => m.name === name) : null;
    let dims = meta && meta.shape ? meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1)) : null;
    if (!dims) dims = [1, 3, 224, 224];
    const n = dims.reduce((x, y) => x * y, 1);
    feeds[name] = new ort.Tensor('float32', fillRandom(n, seed++), dims);
  }
  const ms = (b, e) => Number(e - b) / 1e6;
  const t2 = process.hrtime.bigint();
  await session.run(feeds);
  const t3 = process.hrtime.bigint();
  const result = { session_ms: ms(t0, t1), first_run_ms: ms(t2, t3) };
  if (!a.firstOnly) {
    const times = [];
    for (let i = 0; i < a.iterations; ++i) {
      const b = process.hrtime.bigint();
      await session.run(feeds);
      times.push(ms(b, process.hrtime.bigint()));
    }
    times.sort((x, y) => x - y);
    result.min_ms = times[0];
    result.median_ms = times[Math.floor(times.length / 2)];
    result.max_ms = times[times.length - 1];
  }
  result.peak_rss_kb = peakRssKb();
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
