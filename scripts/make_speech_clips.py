#!/usr/bin/python3
"""Spoken English clips for the transcription tests (tests/transcribe_test.cc)
and the demo: espeak-ng (Debian) speaks each sentence with its voice and
speed; the 22050 Hz output is resampled to 16 kHz (band-limited, by FFT) and
written as 16 kHz mono 16-bit PCM, the form both fcb-transcribe and the ONNX
Runtime oracle (tools/oracle/ort_transcribe.js) read unchanged.

  make_speech_clips.py --out DIR     writes DIR/speech_N.wav and DIR/speech_N.txt (the sentence)
  make_speech_clips.py --list        prints the clip names
"""
import argparse
import io
import os
import subprocess
import wave

import numpy as np

# (sentence, espeak-ng voice, words per minute)
CLIPS = [
    ("The quick brown fox jumps over the lazy dog.", "en-us", 160),
    ("One file runs the model on every computer in the fleet.", "en-gb", 150),
    ("Please call Stella and ask her to bring these things with her from the store.", "en-us+f3", 170),
    ("It was a bright cold day in April, and the clocks were striking thirteen.", "en-gb-scotland", 140),
    ("Speech recognition turns spoken words into written text.", "en-us+m3", 185),
    ("We measured the speed on two threads and compared it with the reference.", "en-gb+f2", 155),
    ("The weather today is sunny with a light breeze from the west.", "en-us", 140),
    ("Good morning, my name is Anna and I live in a small town.", "en-gb", 135),
    ("The train to the city leaves at nine o'clock every morning.", "en-us+m3", 145),
    ("She opened the window and looked at the garden.", "en-us+f3", 140),
    ("Thank you very much for your help yesterday.", "en-gb+m3", 150),
    ("Computers can learn to recognise voices and faces.", "en-us", 150),
]


def speak(text, voice, speed):
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", text],
                         check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(wav)) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, "espeak-ng wrote an unexpected format"
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0
    return x, rate


def resample(x, rate, out_rate=16000):
    n_out = int(round(len(x) * out_rate / rate))
    spec = np.fft.rfft(x)
    keep = n_out // 2 + 1
    spec = spec[:keep] if len(spec) >= keep else np.pad(spec, (0, keep - len(spec)))
    return np.fft.irfft(spec, n_out) * (n_out / len(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for i in range(len(CLIPS)):
            print(f"speech_{i}")
        return
    os.makedirs(a.out, exist_ok=True)
    for i, (text, voice, speed) in enumerate(CLIPS):
        x, rate = speak(text, voice, speed)
        y = resample(x, rate)
        pcm = np.clip(np.round(y * 32768.0), -32768, 32767).astype("<i2")
        with wave.open(os.path.join(a.out, f"speech_{i}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(pcm.tobytes())
        with open(os.path.join(a.out, f"speech_{i}.txt"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
