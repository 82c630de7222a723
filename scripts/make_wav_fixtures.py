#!/usr/bin/env python3
"""WAV files for the WAV reader's tests (tools/transcribe/wav_test.cc), written
by Python's own wave module (an independent writer):

  make_wav_fixtures.py --out DIR
DIR/mono16k.wav, DIR/mono16k.samples.npy   1.5 s of seeded random 16-bit samples, 16 kHz mono, and those samples
DIR/stereo22k.wav                         2 s at 22050 Hz, 16-bit stereo: left 0.6 sin(440 Hz), right 0.2 sin(440 Hz)
"""
import argparse
import os
import wave

import numpy as np


def write(path, rate, channels, frames_int16):
    with wave.open(path + ".tmp", "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames_int16.astype("<i2").tobytes())
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(16000)
    mono = rng.integers(-32768, 32768, size=24000, dtype=np.int64).astype(np.int16)
    write(os.path.join(out, "mono16k.wav"), 16000, 1, mono)
    np.save(os.path.join(out, "mono16k.samples.npy"), mono)
    t = np.arange(44100) / 22050.0
    tone = np.sin(2 * np.pi * 440 * t)
    stereo = np.stack([np.round(0.6 * 32768 * tone), np.round(0.2 * 32768 * tone)], axis=1)
    write(os.path.join(out, "stereo22k.wav"), 22050, 2, stereo.astype(np.int16))


if __name__ == "__main__":
    main()
