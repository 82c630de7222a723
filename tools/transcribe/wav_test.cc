// The WAV reader (wav.h): hand-built RIFF/WAVE buffers for every accepted
// format and every refusal (checked on a phrase of its message), the
// resampler against analytic sines, and (WavFiles.*) files written by Python's
// wave module (scripts/make_wav_fixtures.py, from scripts/prepare_testdata.sh).
#include "wav.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>

namespace fcb::transcribe {
namespace {

using Bytes = std::vector<uint8_t>;

void Put16(Bytes* b, uint32_t v) {
  b->push_back(v & 0xFF);
  b->push_back(v >> 8 & 0xFF);
}
void Put32(Bytes* b, uint32_t v) {
  Put16(b, v & 0xFFFF);
  Put16(b, v >> 16);
}
Bytes Chunk(const char* id, const Bytes& body, bool pad = true) {
  Bytes b(id, id + 4);
  Put32(&b, static_cast<uint32_t>(body.size()));
  b.insert(b.end(), body.begin(), body.end());
  if (pad && body.size() % 2) b.push_back(0);
  return b;
}
Bytes Fmt(int format, int channels, int rate, int bits, int block_align = -1) {
  Bytes b;
  Put16(&b, format);
  Put16(&b, channels);
  Put32(&b, rate);
  const int align = block_align >= 0 ? block_align : channels * bits / 8;
  Put32(&b, rate * align);
  Put16(&b, align);
  Put16(&b, bits);
  return b;
}
Bytes Riff(std::initializer_list<Bytes> chunks, const char* form = "WAVE") {
  Bytes body(form, form + 4);
  for (const Bytes& c : chunks) body.insert(body.end(), c.begin(), c.end());
  return Chunk("RIFF", body);
}
Bytes Pcm16(std::initializer_list<int> samples) {
  Bytes b;
  for (int s : samples) Put16(&b, static_cast<uint16_t>(static_cast<int16_t>(s)));
  return b;
}
Bytes Floats32(std::initializer_list<float> samples) {
  Bytes b;
  for (float f : samples) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    Put32(&b, u);
  }
  return b;
}

Result<WavAudio> Decode(const Bytes& b, const WavOptions& o = {}) { return DecodeWav(b.data(), b.size(), o); }

// The decoded samples, or a failure with the error message.
std::vector<float> Ok(const Bytes& b) {
  auto r = Decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value().samples : std::vector<float>{};
}

// `b` is refused with `code` and a message containing `phrase`.
::testing::AssertionResult Refused(const Bytes& b, StatusCode code, const std::string& phrase,
                                   const WavOptions& o = {}) {
  auto r = Decode(b, o);
  if (r.ok()) return ::testing::AssertionFailure() << "accepted; want a refusal with \"" << phrase << "\"";
  if (r.status().code() != code || r.status().message().find(phrase) == std::string::npos)
    return ::testing::AssertionFailure() << "refused with " << StatusCodeName(r.status().code()) << " \""
                                         << r.status().message() << "\"; want " << StatusCodeName(code) << " with \""
                                         << phrase << "\"";
  return ::testing::AssertionSuccess() << r.status().message();
}

TEST(Wav, Pcm16Mono16k) {
  auto r = Decode(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 16)), Chunk("data", Pcm16({0, 16384, -32768, 32767}))}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().samples, (std::vector<float>{0.f, 0.5f, -1.f, 32767.f / 32768.f}));
  EXPECT_EQ(r.value().info.format, 1);
  EXPECT_EQ(r.value().info.channels, 1);
  EXPECT_EQ(r.value().info.sample_rate, 16000);
  EXPECT_EQ(r.value().info.bits_per_sample, 16);
  EXPECT_EQ(r.value().info.frames, 4);
}

TEST(Wav, SkipsOtherChunksWithTheirPadByte) {
  const Bytes list = Chunk("LIST", Bytes{'I', 'N', 'F', 'O', 'x'});  // 5 bytes + a pad byte
  EXPECT_EQ(Ok(Riff({list, Chunk("fmt ", Fmt(1, 1, 16000, 16)), Chunk("fact", Bytes(4, 0)), list,
                     Chunk("data", Pcm16({8192})), list})),
            (std::vector<float>{0.25f}));
  // An odd-sized 8-bit data chunk, its pad byte missing at the very end.
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 8)), Chunk("data", Bytes{128, 192, 0}, false)})),
            (std::vector<float>{0.f, 0.5f, -1.f}));
}

TEST(Wav, OtherDepthsAndFloat) {
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 8)), Chunk("data", Bytes{128, 255, 0, 64})})),
            (std::vector<float>{0.f, 127.f / 128.f, -1.f, -0.5f}));
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 24)),
                     Chunk("data", Bytes{0x00, 0x00, 0x40, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF})})),
            (std::vector<float>{0.5f, -1.f, -1.f / 8388608.f}));
  Bytes p32;
  Put32(&p32, 0x40000000u);
  Put32(&p32, 0x80000000u);
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 32)), Chunk("data", p32)})), (std::vector<float>{0.5f, -1.f}));
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(3, 1, 16000, 32)), Chunk("data", Floats32({0.25f, -0.75f}))})),
            (std::vector<float>{0.25f, -0.75f}));
  Bytes f64;
  for (double d : {0.125, -1.0}) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    Put32(&f64, static_cast<uint32_t>(u));
    Put32(&f64, static_cast<uint32_t>(u >> 32));
  }
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(3, 1, 16000, 64)), Chunk("data", f64)})), (std::vector<float>{0.125f, -1.f}));
}

// WAVE_FORMAT_EXTENSIBLE: a 40-byte fmt chunk whose sub-format GUID names PCM or float.
Bytes Extensible(int sub_format, int bits, bool standard_guid = true) {
  Bytes f = Fmt(0xFFFE, 1, 16000, bits);
  Put16(&f, 22);    // cbSize
  Put16(&f, bits);  // valid bits
  Put32(&f, 4);     // channel mask: front centre
  Put16(&f, sub_format);
  const Bytes tail = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
  f.insert(f.end(), tail.begin(), tail.end());
  if (!standard_guid) f.back() ^= 1;
  return f;
}

TEST(Wav, Extensible) {
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Extensible(1, 16)), Chunk("data", Pcm16({-16384}))})),
            (std::vector<float>{-0.5f}));
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Extensible(3, 32)), Chunk("data", Floats32({0.5f}))})),
            (std::vector<float>{0.5f}));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Extensible(1, 16, false)), Chunk("data", Pcm16({0}))}),
                      StatusCode::kUnsupported, "sub-format GUID"));
  Bytes short_ext = Fmt(0xFFFE, 1, 16000, 16);
  Put16(&short_ext, 0);
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", short_ext), Chunk("data", Pcm16({0}))}), StatusCode::kInvalidArgument,
                      "WAVE_FORMAT_EXTENSIBLE needs a 40-byte fmt chunk"));
}

TEST(Wav, StereoIsAveraged) {
  EXPECT_EQ(Ok(Riff({Chunk("fmt ", Fmt(1, 2, 16000, 16)), Chunk("data", Pcm16({16384, -8192, -32768, -32768}))})),
            (std::vector<float>{0.125f, -1.f}));
}

TEST(Wav, RefusesMalformedFiles) {
  const Bytes fmt = Chunk("fmt ", Fmt(1, 1, 16000, 16));
  const Bytes data = Chunk("data", Pcm16({1, 2}));
  EXPECT_TRUE(Refused(Bytes{'R', 'I', 'F', 'F', 0, 0}, StatusCode::kInvalidArgument, "6 bytes, a RIFF/WAVE header needs 12"));
  EXPECT_TRUE(Refused(Bytes{}, StatusCode::kInvalidArgument, "the file is empty (0 bytes), not a WAV"));
  Bytes rifx = Riff({fmt, data});
  rifx[3] = 'X';
  EXPECT_TRUE(Refused(rifx, StatusCode::kInvalidArgument, "not a RIFF file: bytes 0-3 are 'RIFX'"));
  EXPECT_TRUE(Refused(Riff({fmt, data}, "AVI "), StatusCode::kInvalidArgument,
                      "not a WAVE file: the RIFF form type at byte offset 8 is 'AVI '"));
  // The data chunk (header at byte offset 36) cut short.
  Bytes cut = Riff({fmt, data});
  cut.resize(cut.size() - 1);
  EXPECT_TRUE(Refused(cut, StatusCode::kInvalidArgument, "chunk 'data' at byte offset 36 declares 4 bytes, only 3 remain"));
  // Three stray bytes after the last chunk: not a chunk header.
  Bytes stray = Riff({fmt, data});
  stray.insert(stray.end(), {1, 2, 3});
  EXPECT_TRUE(Refused(stray, StatusCode::kInvalidArgument, "chunk header at byte offset 48 needs 8 bytes, 3 remain"));
  // A header that ends in the middle of the fmt chunk.
  Bytes half = Riff({fmt, data});
  half.resize(20);
  EXPECT_TRUE(Refused(half, StatusCode::kInvalidArgument, "chunk 'fmt ' at byte offset 12 declares 16 bytes"));
  EXPECT_TRUE(Refused(Riff({fmt}), StatusCode::kInvalidArgument, "no data chunk"));
  EXPECT_TRUE(Refused(Riff({Chunk("LIST", Bytes(4, 'x'))}), StatusCode::kInvalidArgument, "no fmt chunk"));
  EXPECT_TRUE(Refused(Riff({data, fmt}), StatusCode::kInvalidArgument,
                      "data chunk at byte offset 12 comes before any fmt chunk"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Bytes(14, 1)), data}), StatusCode::kInvalidArgument,
                      "fmt chunk at byte offset 12 is 14 bytes, needs at least 16"));
  EXPECT_TRUE(Refused(Riff({fmt, fmt, data}), StatusCode::kInvalidArgument, "a second fmt chunk at byte offset 36"));
  EXPECT_TRUE(Refused(Riff({fmt, data, data}), StatusCode::kInvalidArgument, "a second data chunk at byte offset 48"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 16, 4)), data}), StatusCode::kInvalidArgument,
                      "block align is 4 bytes, but 1 channels of 16 bits need 2"));
  // 3 bytes of 16-bit samples: not whole frames.
  EXPECT_TRUE(Refused(Riff({fmt, Chunk("data", Bytes{1, 2, 3})}), StatusCode::kInvalidArgument,
                      "data chunk at byte offset 36 holds 3 bytes, not a whole number of 2-byte frames"));
  EXPECT_TRUE(Refused(Riff({fmt, Chunk("data", Bytes{})}), StatusCode::kInvalidArgument,
                      "no samples: the data chunk at byte offset 36 is empty"));
}

TEST(Wav, RefusesWhatItDoesNotDecode) {
  const Bytes data = Chunk("data", Pcm16({1, 2}));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(6, 1, 8000, 8)), data}), StatusCode::kUnsupported,
                      "not PCM or IEEE float but A-law"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(7, 1, 8000, 8)), data}), StatusCode::kUnsupported, "mu-law"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(0x11, 1, 8000, 4, 2)), data}), StatusCode::kUnsupported, "IMA ADPCM"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(0x1234, 1, 8000, 16)), data}), StatusCode::kUnsupported,
                      "format tag 0x1234"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(1, 1, 16000, 12, 2)), data}), StatusCode::kUnsupported,
                      "12-bit PCM is not supported"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(3, 1, 16000, 16)), data}), StatusCode::kUnsupported,
                      "16-bit IEEE float is not supported"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(1, 0, 16000, 16, 0)), data}), StatusCode::kUnsupported, "0 channels"));
  EXPECT_TRUE(Refused(Riff({Chunk("fmt ", Fmt(1, 1, 500, 16)), data}), StatusCode::kUnsupported,
                      "sample rate 500 Hz"));
}

Bytes Silence16(int rate, int64_t frames) {
  return Riff({Chunk("fmt ", Fmt(1, 1, rate, 16)), Chunk("data", Bytes(static_cast<size_t>(frames) * 2, 0))});
}

TEST(Wav, AtMostThirtySeconds) {
  auto r = Decode(Silence16(16000, 480000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().samples.size(), 480000u);
  EXPECT_TRUE(Refused(Silence16(16000, 488000), StatusCode::kInvalidArgument, "the audio is 30.5 s long; at most 30 s"));
  // At 44.1 kHz, 30 s exactly resamples to 480000 samples.
  r = Decode(Silence16(44100, 44100 * 30));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().samples.size(), 480000u);
  EXPECT_TRUE(Refused(Silence16(44100, 44100 * 31), StatusCode::kInvalidArgument, "31 s long"));
  WavOptions two;
  two.max_seconds = 2;
  EXPECT_TRUE(Refused(Silence16(16000, 40000), StatusCode::kInvalidArgument, "2.5 s long; at most 2 s", two));
}

TEST(Wav, ReadWavNamesThePath) {
  auto r = ReadWav("/nonexistent/x.wav");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/x.wav"), std::string::npos) << r.status().message();
}

std::vector<float> Sine(int rate, int64_t n, double hz, double amplitude) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(amplitude * std::sin(2 * M_PI * hz * i / rate));
  return v;
}

// Largest |got - want| away from the ends (where the filter sees zeros).
double InteriorError(const std::vector<float>& got, const std::vector<float>& want, size_t margin) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0;
  for (size_t i = margin; i + margin < std::min(got.size(), want.size()); ++i)
    e = std::max(e, std::abs(static_cast<double>(got[i]) - want[i]));
  return e;
}

TEST(Resample, KeepsThePassBandAndRemovesWhatAliases) {
  // Up: 8 kHz -> 16 kHz, and the common rates down to 16 kHz, a 1 kHz tone.
  for (int rate : {8000, 11025, 22050, 44100, 48000}) {
    SCOPED_TRACE(rate);
    const int64_t n = rate / 2;
    auto out = Resample(Sine(rate, n, 1000, 0.5), rate, 16000);
    EXPECT_EQ(out.size(), static_cast<size_t>((n * 16000 + rate - 1) / rate));
    EXPECT_LT(InteriorError(out, Sine(16000, static_cast<int64_t>(out.size()), 1000, 0.5), 200), 1e-3);
  }
  // 48 kHz with a 12 kHz tone (above the 8 kHz Nyquist frequency of the
  // output): it must be filtered out, not folded to 4 kHz.
  std::vector<float> mix = Sine(48000, 24000, 1000, 0.5);
  const std::vector<float> high = Sine(48000, 24000, 12000, 0.5);
  for (size_t i = 0; i < mix.size(); ++i) mix[i] += high[i];
  auto out = Resample(mix, 48000, 16000);
  EXPECT_LT(InteriorError(out, Sine(16000, static_cast<int64_t>(out.size()), 1000, 0.5), 200), 1e-3);
  // Same rate: unchanged.
  const std::vector<float> x = {0.1f, -0.2f, 0.3f};
  EXPECT_EQ(Resample(x, 16000, 16000), x);
}

std::string Fixture(const std::string& name) { return std::string(FCB_TESTDATA_DIR) + "/wav/" + name; }

// The int16 samples of an .npy that make_wav_fixtures.py wrote (format 1.0, '<i2').
std::vector<int16_t> ReadInt16Npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path << " is missing: run scripts/prepare_testdata.sh";
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (b.size() < 10) return {};
  const size_t header = static_cast<uint8_t>(b[8]) | static_cast<uint8_t>(b[9]) << 8;
  EXPECT_NE(std::string(b.begin() + 10, b.begin() + 10 + header).find("'<i2'"), std::string::npos);
  std::vector<int16_t> v((b.size() - 10 - header) / 2);
  std::memcpy(v.data(), b.data() + 10 + header, v.size() * 2);
  return v;
}

TEST(WavFiles, PythonWaveMono16kRoundTrips) {
  auto r = ReadWav(Fixture("mono16k.wav"));
  ASSERT_TRUE(r.ok()) << r.status().message() << " (run scripts/prepare_testdata.sh)";
  const std::vector<int16_t> want = ReadInt16Npy(Fixture("mono16k.samples.npy"));
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(r.value().samples.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(r.value().samples[i], want[i] / 32768.f) << "sample " << i;
}

TEST(WavFiles, PythonWaveStereo22kIsMixedAndResampled) {
  // make_wav_fixtures.py: 2 s at 22050 Hz, left 0.6 sin(440 Hz), right 0.2 sin(440 Hz).
  auto r = ReadWav(Fixture("stereo22k.wav"));
  ASSERT_TRUE(r.ok()) << r.status().message() << " (run scripts/prepare_testdata.sh)";
  EXPECT_EQ(r.value().info.sample_rate, 22050);
  EXPECT_EQ(r.value().info.channels, 2);
  EXPECT_EQ(r.value().info.frames, 44100);
  EXPECT_EQ(r.value().samples.size(), 32000u);
  EXPECT_LT(InteriorError(r.value().samples, Sine(16000, 32000, 440, 0.4), 200), 2e-3);
}

}  // namespace
}  // namespace fcb::transcribe
