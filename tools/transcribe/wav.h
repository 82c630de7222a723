// WAV input for fcb-transcribe: RIFF/WAVE bytes -> 16 kHz mono float samples,
// the audio Whisper's front end takes.
//
// Accepted: a RIFF/WAVE file with a "fmt " chunk before its "data" chunk
// (other chunks such as LIST, fact or cue are skipped, with their pad byte);
// format 1 (PCM) at 8 (unsigned), 16, 24 or 32 bits, format 3 (IEEE float)
// at 32 or 64 bits, and WAVE_FORMAT_EXTENSIBLE (0xFFFE) whose sub-format is
// one of those; any number of channels (1 to 16), averaged to mono; any
// sample rate from 1000 to 384000 Hz, resampled to 16 kHz when it differs
// (a Kaiser-windowed sinc, polyphase: see Resample). Samples are scaled to
// [-1, 1): 16-bit PCM by 1/32768, as Whisper's reference loaders do.
//
// Refused, each with a message naming what is wrong (and the byte offset
// where one applies): not RIFF, not WAVE, a chunk running past the end, a
// missing or short fmt chunk, no data chunk, other formats (A-law, mu-law,
// ADPCM, ...) or bit depths, a block alignment that does not match the
// format, a data size that is not whole frames, no samples, and audio longer
// than the limit (30 s by default: Whisper sees one 30 s window; longer audio
// is refused, not chunked, and the message gives its length).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fcb/status.h"

namespace fcb::transcribe {

constexpr int kWhisperSampleRate = 16000;

struct WavInfo {
  int format = 0;           // 1 PCM or 3 IEEE float (the sub-format of an extensible file)
  int channels = 0;
  int sample_rate = 0;      // of the file
  int bits_per_sample = 0;
  int64_t frames = 0;       // samples per channel in the file
};

struct WavOptions {
  double max_seconds = 30.0;  // longer audio is refused
};

// The decoded audio: mono, at kWhisperSampleRate, in [-1, 1].
struct WavAudio {
  std::vector<float> samples;
  WavInfo info;  // what the file held
};

// Decodes a whole WAV file held in memory.
Result<WavAudio> DecodeWav(const uint8_t* data, size_t size, const WavOptions& options = {});
// Reads and decodes the file at `path`; errors name the path.
Result<WavAudio> ReadWav(const std::string& path, const WavOptions& options = {});

// Resamples `in` from in_rate to out_rate Hz (both 1000 to 384000) with a
// Kaiser-windowed sinc (beta 8.6, about 86 dB stop-band rejection, 32 zero
// crossings each side, cut-off 0.95 of the lower Nyquist frequency), one
// precomputed filter per output phase (out_rate / gcd phases), each row
// normalised to unit DC gain. Output length: ceil(in.size() * out_rate / in_rate).
std::vector<float> Resample(const std::vector<float>& in, int in_rate, int out_rate);

}  // namespace fcb::transcribe
