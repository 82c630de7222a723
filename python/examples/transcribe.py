#!/usr/bin/env python3
"""Speech to text with Whisper from one .fcb, on the fcb Python package.

The same loop as fcb-transcribe (tools/transcribe/transcribe_main.cc):

  transcribe.py compile MODEL_DIR OUT.fcb [--target T]... [--frontend FRONTEND.onnx]
  transcribe.py FILE.fcb AUDIO.wav [--threads N] [--target T] [--language en]

compile: MODEL_DIR is a transformers.js-style Whisper folder (config.json,
generation_config.json, vocab.json, onnx/encoder_model[_quantized].onnx,
onnx/decoder_model_merged[_quantized].onnx) and FRONTEND.onnx the log-mel
front end scripts/make_whisper_frontend.py writes (default
MODEL_DIR/whisper_frontend.onnx). The file gets the four methods
fcb-transcribe compile makes -- features (30 s of 16 kHz audio -> 80 x 3000
log-mel features), encoder, first (the merged decoder without a cache, on the
forced prefix of 1..8 tokens) and next (one token; its self-attention cache
of up to 224 rows kept in an fcb.State) -- sharing one weight pool, with vocab.json, generation_config.json
and config.json attached; a file either tool compiles runs with either.

transcribe: reads a 16 kHz mono 16-bit PCM WAV of at most 30 s (Python's
wave module; anything else is refused with the reason: fcb-transcribe also
converts other formats and rates), runs features and encoder, then decodes
greedily from <|startoftranscript|> <|LANG|> <|transcribe|> <|notimestamps|>
until <|endoftext|> or 224 tokens, and prints the transcript and a line
"tokens: ID ID ..." (the ids after the prefix, end-of-text excluded).

Run it with the package importable, e.g.
  PYTHONPATH=build/python /usr/bin/python3 python/examples/transcribe.py whisper.fcb speech.wav
"""

import argparse
import json
import os
import sys
import wave

import numpy as np

import fcb

SAMPLES = 480000  # 30 s at 16 kHz: Whisper hears one window, zero-padded
MAX_TOKENS = 224  # the decoder's positions: prefix and generated tokens together
MAX_PREFIX = 8


def whisper_config(config, generation, where):
    """What the loop needs of config.json and generation_config.json (dicts)."""
    if config.get("model_type") != "whisper":
        raise ValueError(f'{where}: config.json\'s model_type is not "whisper"; this is not a Whisper model')

    def num(d, key):
        v = d.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{where}: '{key}' is missing or not a positive integer")
        return v

    c = {
        "layers": num(config, "decoder_layers"),
        "heads": num(config, "decoder_attention_heads"),
        "d_model": num(config, "d_model"),
        "mels": num(config, "num_mel_bins"),
        "frames": num(config, "max_source_positions"),
        "start": num(generation, "decoder_start_token_id"),
        "eos": num(generation, "eos_token_id"),
        "no_timestamps": num(generation, "no_timestamps_token_id"),
    }
    if c["d_model"] % c["heads"]:
        raise ValueError(f"{where}: d_model is not a multiple of the heads")
    c["head_dim"] = c["d_model"] // c["heads"]
    try:
        c["transcribe"] = int(generation["task_to_id"]["transcribe"])
    except (KeyError, TypeError):
        raise ValueError(f"{where}: generation_config.json has no task_to_id.transcribe") from None
    # "<|en|>" -> "en"
    c["languages"] = {k[2:-2]: v for k, v in generation.get("lang_to_id", {}).items() if len(k) > 4}
    return c


# ------------------------------------------------------------------ compile

def compile_fcb(model_dir, out, targets, frontend):
    def read(name):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            raise ValueError(f"'{model_dir}' is not a Whisper model folder: it has no {name}")
        with open(path, "rb") as f:
            return f.read()

    texts = {n: read(n) for n in ("config.json", "generation_config.json", "vocab.json")}
    c = whisper_config(json.loads(texts["config.json"]), json.loads(texts["generation_config.json"]), model_dir)

    def pick(stem):
        for suffix in ("_quantized.onnx", ".onnx"):
            p = os.path.join(model_dir, "onnx", stem + suffix)
            if os.path.isfile(p):
                return p
        raise ValueError(f"'{model_dir}' is not a Whisper model folder: it has no onnx/{stem}[_quantized].onnx")

    encoder, decoder = pick("encoder_model"), pick("decoder_model_merged")
    frontend = frontend or os.path.join(model_dir, "whisper_frontend.onnx")
    if not os.path.isfile(frontend):
        raise ValueError(f"no front end graph at '{frontend}': write it with scripts/make_whisper_frontend.py")
    h, hd, frames = c["heads"], c["head_dim"], c["frames"]
    shapes = {
        "encoder:input_features": [1, c["mels"], 2 * frames],
        "first:input_ids": [1, (1, MAX_PREFIX)],
        "next:input_ids": [1, 1],
        "first:encoder_hidden_states": [1, frames, c["d_model"]],
        "next:encoder_hidden_states": [1, frames, c["d_model"]],
    }
    # Only what the loop reads stays an output (the exports also return attention maps).
    outputs = ["encoder:last_hidden_state", "first:logits", "next:logits"]
    for layer in range(c["layers"]):
        for kv in ("key", "value"):
            p = f"past_key_values.{layer}"
            # The first call reads no past (its branch computes the cache): a dummy of length 1.
            shapes[f"first:{p}.decoder.{kv}"] = [1, h, 1, hd]
            shapes[f"first:{p}.encoder.{kv}"] = [1, h, 1, hd]
            shapes[f"next:{p}.decoder.{kv}"] = [1, h, (1, MAX_TOKENS - 1), hd]
            shapes[f"next:{p}.encoder.{kv}"] = [1, h, frames, hd]
            outputs += [f"first:present.{layer}.decoder.{kv}", f"first:present.{layer}.encoder.{kv}",
                        f"next:present.{layer}.decoder.{kv}"]
    report = fcb.compile(
        {"features": frontend, "encoder": encoder, "first": decoder, "next": decoder},
        out,
        targets=targets or "all",
        input_shapes=shapes,
        input_values={"first:use_cache_branch": np.array([False]), "next:use_cache_branch": np.array([True])},
        attachments=texts,
        outputs=outputs,
        # next's self-attention cache stays in an fcb.State of MAX_TOKENS rows,
        # appended in place (docs/design.md section 14, form b).
        state={f"next:past_key_values.{layer}.decoder.{kv}": f"present.{layer}.decoder.{kv}"
               for layer in range(c["layers"]) for kv in ("key", "value")},
        kv_capacity=MAX_TOKENS,
    )
    print(f"compiled {out}: features, encoder, first, next, {report.file_size} bytes")


# --------------------------------------------------------------- transcribe

def bytes_to_unicode():
    """GPT-2's byte -> character table: printable Latin-1 bytes stand for themselves, the rest from U+0100."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def detokenizer(vocab_text, first_special):
    """ids -> text: byte-level BPE, ids at or above first_special (<|endoftext|> and later) skipped."""
    char_to_byte = {ch: b for b, ch in bytes_to_unicode().items()}
    spelling = {i: tok for tok, i in json.loads(vocab_text).items()}

    def decode(ids):
        out = bytearray()
        for i in ids:
            if i >= first_special:
                continue
            if i not in spelling:
                raise LookupError(f"token {i} is not in the vocabulary")
            out += bytes(char_to_byte[ch] for ch in spelling[i])
        return out.decode("utf-8", errors="replace")

    return decode


def read_wav(path):
    """16 kHz mono 16-bit PCM, at most 30 s -> float32 samples in [-1, 1); else a ValueError naming the file."""
    try:
        with wave.open(path, "rb") as w:
            rate, channels, width, n = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()
            data = w.readframes(n)
    except (wave.Error, EOFError) as e:
        raise ValueError(f"{path}: not a PCM WAV file ({e})") from None
    if (rate, channels, width) != (16000, 1, 2):
        raise ValueError(f"{path}: {rate} Hz, {channels} channel(s), {8 * width}-bit; this example reads 16 kHz mono "
                         "16-bit PCM (fcb-transcribe converts the others)")
    if len(data) != 2 * n or n == 0:
        raise ValueError(f"{path}: truncated or empty: the header says {n} samples, the file holds {len(data) // 2}")
    if n > SAMPLES:
        raise ValueError(f"{path}: the audio is {n / 16000:.3g} s long; at most 30 s is accepted")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def transcribe(file, audio, threads=1, target="auto", language="en"):
    """Returns (text, token ids) for the WAV file `audio` with the Whisper .fcb `file`."""
    program = fcb.load(file, target=target)
    try:
        att = {n: program.attachment(n) for n in ("vocab.json", "generation_config.json", "config.json")}
    except fcb.NotFoundError as e:
        raise ValueError(f"'{file}' was not made by fcb-transcribe compile: {e}") from None
    c = whisper_config(json.loads(att["config.json"]), json.loads(att["generation_config.json"]), file)
    if language not in c["languages"]:
        raise ValueError(f"language '{language}' is not one the model knows (e.g. en, de, fr)")
    decode = detokenizer(att["vocab.json"], c["eos"])

    samples = np.zeros(SAMPLES, np.float32)
    wav = read_wav(audio)
    samples[: wav.size] = wav
    features = program.session("features", threads).run({program.method("features").inputs[0].name: samples})
    features = next(iter(features.values()))
    hidden = program.session("encoder", threads).run({program.method("encoder").inputs[0].name: features})
    hidden = hidden["last_hidden_state"]

    # The forced prefix through `first` (which computes both caches), then one token at a time through `next`.
    prefix = [c["start"], c["languages"][language], c["transcribe"], c["no_timestamps"]]
    h, hd = c["heads"], c["head_dim"]
    dummy = np.zeros((1, h, 1, hd), np.float32)
    feeds = {"input_ids": np.array([prefix], np.int64), "encoder_hidden_states": hidden}
    for layer in range(c["layers"]):
        for part in ("decoder", "encoder"):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{layer}.{part}.{kv}"] = dummy
    out = program.session("first", threads).run(feeds)
    # The cross-attention cache is the same for every step: taken once from the first call.
    # next keeps the decoder's self-attention cache in `state`: the first step loads
    # the prefix's cache from `first` into it, later steps feed only the new token.
    state = fcb.State(program)
    held = [v.name for v in state.variables if ".decoder." in v.name]
    if len(held) != 2 * c["layers"]:
        raise ValueError(f"'{file}' keeps {len(held)} of next's {2 * c['layers']} self-attention caches in a "
                         "State: it was made by an earlier fcb-transcribe compile; compile it again")
    step = program.session("next", threads, state=state)
    cross = {f"past_key_values.{layer}.encoder.{kv}": out[f"present.{layer}.encoder.{kv}"]
             for layer in range(c["layers"]) for kv in ("key", "value")}
    load = {f"past_key_values.{layer}.decoder.{kv}": out[f"present.{layer}.decoder.{kv}"]
            for layer in range(c["layers"]) for kv in ("key", "value")}
    tokens = []
    while len(prefix) + len(tokens) < MAX_TOKENS:
        token = int(np.argmax(out["logits"][0, -1]))
        if token == c["eos"]:
            break
        tokens.append(token)
        feeds = {"input_ids": np.array([[token]], np.int64), "encoder_hidden_states": hidden, **cross, **load}
        load = {}
        out = step.run(feeds)
    return decode(tokens).lstrip(" "), tokens


def main(argv):
    if argv and argv[0] == "compile":
        ap = argparse.ArgumentParser(prog="transcribe.py compile")
        ap.add_argument("model_dir")
        ap.add_argument("out")
        ap.add_argument("--target", action="append")
        ap.add_argument("--frontend")
        a = ap.parse_args(argv[1:])
        compile_fcb(a.model_dir, a.out, a.target, a.frontend)
        return 0
    ap = argparse.ArgumentParser(prog="transcribe.py", description="speech to text with Whisper from one .fcb")
    ap.add_argument("file", help="a .fcb made by fcb-transcribe compile or transcribe.py compile")
    ap.add_argument("audio", help="16 kHz mono 16-bit PCM WAV, at most 30 s")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", default="auto")
    ap.add_argument("--language", default="en")
    a = ap.parse_args(argv)
    text, tokens = transcribe(a.file, a.audio, a.threads, a.target, a.language)
    print(text)
    print("tokens: " + " ".join(str(t) for t in tokens))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, fcb.Error, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
