#!/usr/bin/env node
// The transcription loop fcb-transcribe runs, with ONNX Runtime (CPU) on the
// same ONNX files: the oracle its token ids are compared against.
//
//   node ort_transcribe.js MODEL_DIR FRONTEND.onnx AUDIO.wav [--threads N] [--language en] [--perturb EPS] [--noise SEED]
//
// --perturb EPS scales the samples by (1 + EPS): how much ONNX Runtime's own
// tokens move under a change far below the audio's resolution (the int8
// encoder is sensitive to rounding; a clip whose tokens move is no test).
// --noise SEED adds uniform noise in [-1e-6, 1e-6] (a seeded xorshift, so
// runs repeat) to every sample: the same question asked with a perturbation
// that is not a plain rescaling.
//
// MODEL_DIR: a transformers.js-style Whisper folder (config.json,
// generation_config.json, onnx/encoder_model[_quantized].onnx,
// onnx/decoder_model_merged[_quantized].onnx). AUDIO.wav: 16 kHz mono 16-bit
// PCM (what the test clips are written as; fcb-transcribe also resamples,
// this oracle does not). The loop: the front end on 30 s of audio
// (zero-padded), the encoder, the merged decoder with use_cache_branch false
// on the forced prefix <|startoftranscript|> <|LANG|> <|transcribe|>
// <|notimestamps|> (a dummy past of length 1, which that branch does not
// read), then with use_cache_branch true one token at a time, the presents
// fed back as the past; greedy (argmax) until <|endoftext|> or 224 tokens.
// Prints "tokens: ..." and the time of each stage.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

function readWav16k(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') fail(`${file}: not a RIFF/WAVE file`);
  let pos = 12, fmt = null, data = null;
  while (pos + 8 <= b.length) {
    const id = b.toString('latin1', pos, pos + 4), size = b.readUInt32LE(pos + 4);
    if (id === 'fmt ') fmt = { format: b.readUInt16LE(pos + 8), channels: b.readUInt16LE(pos + 10),
                               rate: b.readUInt32LE(pos + 12), bits: b.readUInt16LE(pos + 22) };
    if (id === 'data') data = b.subarray(pos + 8, Math.min(b.length, pos + 8 + size));
    pos += 8 + size + (size & 1);
  }
  if (!fmt || !data) fail(`${file}: no fmt or data chunk`);
  if (fmt.format !== 1 || fmt.channels !== 1 || fmt.rate !== 16000 || fmt.bits !== 16)
    fail(`${file}: the oracle reads 16 kHz mono 16-bit PCM only (got format ${fmt.format}, ${fmt.channels} channels, ${fmt.rate} Hz, ${fmt.bits} bits)`);
  const n = Math.floor(data.length / 2);
  if (n > 480000) fail(`${file}: longer than 30 s`);
  const out = new Float32Array(480000);
  for (let i = 0; i < n; i++) out[i] = data.readInt16LE(2 * i) / 32768;
  return out;
}

function argmaxRow(data, row, width) {
  let best = 0, bv = -Infinity;
  for (let j = 0; j < width; j++) {
    const v = data[row * width + j];
    if (v > bv) { bv = v; best = j; }
  }
  return best;
}

async function main() {
  const args = process.argv.slice(2);
  let threads = 1, language = 'en', perturb = 0, noise = 0;
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--threads') threads = Number(args[++i]);
    else if (args[i] === '--language') language = args[++i];
    else if (args[i] === '--perturb') perturb = Number(args[++i]);
    else if (args[i] === '--noise') noise = Number(args[++i]);
    else pos.push(args[i]);
  }
  if (pos.length !== 3) fail('usage: node ort_transcribe.js MODEL_DIR FRONTEND.onnx AUDIO.wav [--threads N] [--language en]');
  const [dir, frontendPath, wavPath] = pos;
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const gen = JSON.parse(fs.readFileSync(path.join(dir, 'generation_config.json'), 'utf8'));
  const pick = (stem) => {
    for (const s of ['_quantized.onnx', '.onnx']) {
      const p = path.join(dir, 'onnx', stem + s);
      if (fs.existsSync(p)) return p;
    }
    fail(`${dir}: no onnx/${stem}[_quantized].onnx`);
  };
  const opts = { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential' };
  const t0 = Date.now();
  const frontend = await ort.InferenceSession.create(frontendPath, opts);
  const encoder = await ort.InferenceSession.create(pick('encoder_model'), opts);
  const decoder = await ort.InferenceSession.create(pick('decoder_model_merged'), opts);
  const tLoad = Date.now();
  const audio = readWav16k(wavPath);
  if (perturb) for (let i = 0; i < audio.length; i++) audio[i] *= 1 + perturb;
  if (noise) {
    let x = (noise * 2654435761) >>> 0 || 1;
    for (let i = 0; i < audio.length; i++) {
      x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
      audio[i] += (x / 4294967296 * 2 - 1) * 1e-6;
    }
  }
  const tStart = Date.now();
  const fe = await frontend.run({ [frontend.inputNames[0]]: new ort.Tensor('float32', audio, [480000]) });
  const features = fe[frontend.outputNames[0]];
  const tFeatures = Date.now();
  const enc = await encoder.run({ [encoder.inputNames[0]]: features }, ['last_hidden_state']);
  const hidden = enc.last_hidden_state;
  const tEncoder = Date.now();

  const heads = config.decoder_attention_heads, headDim = config.d_model / heads, layers = config.decoder_layers;
  const lang = gen.lang_to_id[`<|${language}|>`];
  if (lang === undefined) fail(`language '${language}' is not in generation_config.json`);
  const prefix = [gen.decoder_start_token_id, lang, gen.task_to_id.transcribe, gen.no_timestamps_token_id];
  const flag = (b) => new ort.Tensor('bool', Uint8Array.of(b ? 1 : 0), [1]);
  const ids = (a) => new ort.Tensor('int64', BigInt64Array.from(a.map(BigInt)), [1, a.length]);
  const zeros = () => new ort.Tensor('float32', new Float32Array(heads * headDim), [1, heads, 1, headDim]);
  const feeds = { input_ids: ids(prefix), encoder_hidden_states: hidden, use_cache_branch: flag(false) };
  for (let l = 0; l < layers; l++)
    for (const part of ['decoder', 'encoder'])
      for (const kv of ['key', 'value']) feeds[`past_key_values.${l}.${part}.${kv}`] = zeros();
  let out = await decoder.run(feeds);
  const tFirst = Date.now();
  const encoderCache = {};
  for (let l = 0; l < layers; l++)
    for (const kv of ['key', 'value']) encoderCache[`past_key_values.${l}.encoder.${kv}`] = out[`present.${l}.encoder.${kv}`];
  const tokens = [];
  const vocab = Number(out.logits.dims[2]);
  while (prefix.length + tokens.length < 224) {
    const rows = Number(out.logits.dims[1]);
    const token = argmaxRow(out.logits.data, rows - 1, vocab);
    if (token === gen.eos_token_id) break;
    tokens.push(token);
    const step = { input_ids: ids([token]), encoder_hidden_states: hidden, use_cache_branch: flag(true), ...encoderCache };
    for (let l = 0; l < layers; l++)
      for (const kv of ['key', 'value']) step[`past_key_values.${l}.decoder.${kv}`] = out[`present.${l}.decoder.${kv}`];
    out = await decoder.run(step);
  }
  const tDone = Date.now();
  process.stdout.write(`tokens: ${tokens.join(' ')}\n`);
  process.stderr.write(`onnxruntime, ${threads} thread(s): load ${tLoad - t0} ms, features ${tFeatures - tStart} ms, ` +
                       `encoder ${tEncoder - tFeatures} ms, first ${tFirst - tEncoder} ms, ` +
                       `${Math.max(tokens.length - 1, 0)} next steps ${tDone - tFirst} ms, total ${tDone - tStart} ms\n`);
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
