#include "wav.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>

namespace fcb::transcribe {
namespace {

constexpr int kPcm = 1, kFloat = 3, kExtensible = 0xFFFE;
constexpr int kMinRate = 1000, kMaxRate = 384000, kMaxChannels = 16;
// The 14 bytes after the format tag in a KSDATAFORMAT_SUBTYPE_* GUID.
constexpr uint8_t kGuidTail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                   0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

uint32_t U32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | uint32_t{p[3]} << 24; }
uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// Four bytes of a chunk id, printable characters as they are and others as \xNN.
std::string FourCC(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F) {
      s += static_cast<char>(p[i]);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02X", p[i]);
      s += buf;
    }
  }
  return "'" + s + "'";
}

std::string FormatName(int tag) {
  switch (tag) {
    case 2: return "MS ADPCM";
    case 6: return "A-law";
    case 7: return "mu-law";
    case 0x11: return "IMA ADPCM";
    case 0x55: return "MPEG layer 3";
    default: break;
  }
  std::ostringstream s;
  s << "format tag 0x" << std::hex << tag;
  return s.str();
}

// One sample at p, scaled to [-1, 1].
double Sample(const uint8_t* p, int format, int bits) {
  if (format == kFloat) {
    if (bits == 32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  switch (bits) {
    case 8: return (static_cast<int>(p[0]) - 128) / 128.0;  // 8-bit PCM is unsigned
    case 16: return static_cast<int16_t>(U16(p)) / 32768.0;
    case 24: {
      int32_t v = static_cast<int32_t>(p[0] | p[1] << 8 | p[2] << 16);
      if (v & 0x800000) v -= 0x1000000;
      return v / 8388608.0;
    }
    default: return static_cast<int32_t>(U32(p)) / 2147483648.0;
  }
}

double BesselI0(double x) {
  // Power series; converges quickly for the arguments a Kaiser window uses (<= beta).
  double sum = 1, term = 1;
  const double q = x * x / 4;
  for (int k = 1; k < 64; ++k) {
    term *= q / (static_cast<double>(k) * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

}  // namespace

std::vector<float> Resample(const std::vector<float>& in, int in_rate, int out_rate) {
  if (in_rate == out_rate || in.empty()) return in;
  const int64_t g = std::gcd(in_rate, out_rate);
  const int64_t up = out_rate / g, down = in_rate / g;  // output n sits at input n * down / up
  const double ratio = static_cast<double>(out_rate) / in_rate;
  const double scale = std::min(1.0, ratio);  // the lower of the two Nyquist frequencies, per input sample
  const double cutoff = 0.5 * 0.95 * scale;   // cycles per input sample
  constexpr double kBeta = 8.6;
  constexpr int kZeroCrossings = 32;
  const int half = static_cast<int>(std::ceil(kZeroCrossings / scale));  // taps each side, in input samples
  const int taps = 2 * half;
  // filters[p][j]: weight of input base + j - half + 1 for an output at base + p / up.
  std::vector<float> filters(static_cast<size_t>(up) * taps);
  const double i0_beta = BesselI0(kBeta);
  for (int64_t p = 0; p < up; ++p) {
    const double frac = static_cast<double>(p) / up;
    double sum = 0;
    std::vector<double> row(taps);
    for (int j = 0; j < taps; ++j) {
      const double d = frac - (j - half + 1);  // distance from the output's position, in input samples
      const double x = 2 * cutoff * d;
      const double sinc = x == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x);
      const double r = d / half;
      const double w = std::abs(r) >= 1 ? 0.0 : BesselI0(kBeta * std::sqrt(1 - r * r)) / i0_beta;
      row[j] = sinc * w;
      sum += row[j];
    }
    for (int j = 0; j < taps; ++j) filters[p * taps + j] = static_cast<float>(row[j] / sum);
  }
  const int64_t n_in = static_cast<int64_t>(in.size());
  const int64_t n_out = (n_in * up + down - 1) / down;
  std::vector<float> out(static_cast<size_t>(n_out));
  for (int64_t n = 0; n < n_out; ++n) {
    const int64_t pos = n * down;
    const int64_t base = pos / up, p = pos % up;
    const float* f = &filters[p * taps];
    const int64_t first = base - half + 1;
    const int64_t j0 = std::max<int64_t>(0, -first), j1 = std::min<int64_t>(taps, n_in - first);
    double acc = 0;
    for (int64_t j = j0; j < j1; ++j) acc += static_cast<double>(f[j]) * in[first + j];
    out[n] = static_cast<float>(acc);
  }
  return out;
}

Result<WavAudio> DecodeWav(const uint8_t* data, size_t size, const WavOptions& options) {
  if (size == 0) return InvalidArgument("the file is empty (0 bytes), not a WAV");
  if (size < 12)
    return InvalidArgument("truncated WAV: " + std::to_string(size) + " bytes, a RIFF/WAVE header needs 12");
  if (std::memcmp(data, "RIFF", 4) != 0)
    return InvalidArgument("not a RIFF file: bytes 0-3 are " + FourCC(data) + ", want 'RIFF'");
  if (std::memcmp(data + 8, "WAVE", 4) != 0)
    return InvalidArgument("not a WAVE file: the RIFF form type at byte offset 8 is " + FourCC(data + 8) +
                           ", want 'WAVE'");
  // The RIFF size field is not trusted (streaming writers leave it 0 or
  // 0xFFFFFFFF): chunks are read up to the end of the bytes given.
  WavInfo info;
  bool have_fmt = false;
  int block_align = 0;
  size_t off = 12;
  const uint8_t* samples = nullptr;
  size_t data_size = 0, data_off = 0;
  while (off < size) {
    if (size - off < 8)
      return InvalidArgument("truncated WAV: a chunk header at byte offset " + std::to_string(off) + " needs 8 bytes, " +
                             std::to_string(size - off) + " remain");
    const uint8_t* h = data + off;
    const uint32_t len = U32(h + 4);
    const size_t body = off + 8;
    if (len > size - body)
      return InvalidArgument("truncated WAV: chunk " + FourCC(h) + " at byte offset " + std::to_string(off) +
                             " declares " + std::to_string(len) + " bytes, only " + std::to_string(size - body) +
                             " remain");
    if (std::memcmp(h, "fmt ", 4) == 0) {
      if (have_fmt) return InvalidArgument("a second fmt chunk at byte offset " + std::to_string(off));
      if (len < 16)
        return InvalidArgument("fmt chunk at byte offset " + std::to_string(off) + " is " + std::to_string(len) +
                               " bytes, needs at least 16");
      const uint8_t* f = data + body;
      int tag = U16(f);
      info.channels = U16(f + 2);
      info.sample_rate = static_cast<int>(std::min<uint32_t>(U32(f + 4), 0x7FFFFFFF));
      block_align = U16(f + 12);
      info.bits_per_sample = U16(f + 14);
      if (tag == kExtensible) {
        if (len < 40 || U16(f + 16) < 22)
          return InvalidArgument("fmt chunk at byte offset " + std::to_string(off) +
                                 ": WAVE_FORMAT_EXTENSIBLE needs a 40-byte fmt chunk, this one is " +
                                 std::to_string(len));
        const int sub = U16(f + 24);
        if (std::memcmp(f + 26, kGuidTail, sizeof kGuidTail) != 0)
          return Unsupported("WAVE_FORMAT_EXTENSIBLE with a sub-format GUID that is neither PCM nor IEEE float");
        tag = sub;
      }
      info.format = tag;
      have_fmt = true;
    } else if (std::memcmp(h, "data", 4) == 0) {
      if (!have_fmt) return InvalidArgument("the data chunk at byte offset " + std::to_string(off) + " comes before any fmt chunk");
      if (samples) return InvalidArgument("a second data chunk at byte offset " + std::to_string(off));
      samples = data + body;
      data_size = len;
      data_off = off;
    }
    // Chunks are padded to an even size; a missing pad byte at the very end is tolerated.
    off = body + len + (len & 1);
  }
  if (!have_fmt) return InvalidArgument("no fmt chunk in the WAV file");
  if (!samples) return InvalidArgument("no data chunk in the WAV file");

  const int bits = info.bits_per_sample;
  if (info.format == kPcm) {
    if (bits != 8 && bits != 16 && bits != 24 && bits != 32)
      return Unsupported(std::to_string(bits) + "-bit PCM is not supported (8, 16, 24 or 32 bits are)");
  } else if (info.format == kFloat) {
    if (bits != 32 && bits != 64)
      return Unsupported(std::to_string(bits) + "-bit IEEE float is not supported (32 or 64 bits are)");
  } else {
    return Unsupported("the WAV file is not PCM or IEEE float but " + FormatName(info.format) +
                       ": convert it to 16-bit PCM");
  }
  if (info.channels < 1 || info.channels > kMaxChannels)
    return Unsupported(std::to_string(info.channels) + " channels (1 to " + std::to_string(kMaxChannels) +
                       " are supported)");
  if (info.sample_rate < kMinRate || info.sample_rate > kMaxRate)
    return Unsupported("sample rate " + std::to_string(info.sample_rate) + " Hz (" + std::to_string(kMinRate) +
                       " to " + std::to_string(kMaxRate) + " Hz are resampled to 16 kHz)");
  const int frame_bytes = info.channels * bits / 8;
  if (block_align != frame_bytes)
    return InvalidArgument("fmt chunk: block align is " + std::to_string(block_align) + " bytes, but " +
                           std::to_string(info.channels) + " channels of " + std::to_string(bits) + " bits need " +
                           std::to_string(frame_bytes));
  if (data_size % frame_bytes != 0)
    return InvalidArgument("the data chunk at byte offset " + std::to_string(data_off) + " holds " +
                           std::to_string(data_size) + " bytes, not a whole number of " +
                           std::to_string(frame_bytes) + "-byte frames");
  info.frames = static_cast<int64_t>(data_size / frame_bytes);
  if (info.frames == 0)
    return InvalidArgument("no samples: the data chunk at byte offset " + std::to_string(data_off) + " is empty");
  const double seconds = static_cast<double>(info.frames) / info.sample_rate;
  if (seconds > options.max_seconds) {
    std::ostringstream s;
    s.precision(3);
    s << "the audio is " << seconds << " s long; at most " << options.max_seconds
      << " s is accepted (Whisper hears one 30 s window: split longer audio)";
    return InvalidArgument(s.str());
  }

  WavAudio out;
  out.info = info;
  std::vector<float> mono(static_cast<size_t>(info.frames));
  const int bytes = bits / 8;
  for (int64_t i = 0; i < info.frames; ++i) {
    const uint8_t* fr = samples + i * frame_bytes;
    double acc = 0;
    for (int c = 0; c < info.channels; ++c) acc += Sample(fr + c * bytes, info.format, bits);
    mono[i] = static_cast<float>(acc / info.channels);
  }
  out.samples = Resample(mono, info.sample_rate, kWhisperSampleRate);
  return out;
}

Result<WavAudio> ReadWav(const std::string& path, const WavOptions& options) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return IoError("cannot open " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return IoError("cannot read " + path);
  auto r = DecodeWav(bytes.data(), bytes.size(), options);
  if (!r.ok()) return Status(r.status()).Annotate(path);
  return r;
}

}  // namespace fcb::transcribe
