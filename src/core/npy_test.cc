#include "fcb/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace fcb {
namespace {

using fcb::testing::RunCommand;
using fcb::testing::TempDir;

template <typename T>
NpyArray MakeArray(int32_t dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

void ExpectSame(const NpyArray& got, const NpyArray& want) {
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.data, want.data);
}

// Builds a .npy image by hand (independent of the writer) from a header text.
std::vector<uint8_t> HandMade(const std::string& header, const std::vector<uint8_t>& data,
                              int major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  const size_t len = header.size();
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<uint8_t>(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status ParseStatus(const std::vector<uint8_t>& bytes) {
  return ParseNpy(bytes.data(), bytes.size(), "bad.npy").status();
}

TEST(NpyTest, RoundTripsEveryDType) {
  TempDir dir;
  const std::vector<NpyArray> arrays = {
      MakeArray<float>(kNpyF32, {2, 3}, {1.5f, -2.f, 0.f, 3.25f, 1e-30f, -7.f}),
      MakeArray<double>(kNpyF64, {3}, {1.0 / 3, -1e300, 2.5}),
      MakeArray<int64_t>(kNpyI64, {2, 1, 2}, {-1, int64_t{1} << 40, 7, 0}),
      MakeArray<int32_t>(kNpyI32, {4}, {-5, 0, 2147483647, 12}),
      MakeArray<uint8_t>(kNpyU8, {2, 2}, {0, 255, 17, 128}),
      MakeArray<int8_t>(kNpyI8, {3}, {-128, 0, 127}),
      MakeArray<uint8_t>(kNpyBool, {5}, {1, 0, 0, 1, 1}),
      MakeArray<uint16_t>(kNpyF16, {3}, {0x3c00, 0x7c00, 0x8001}),  // 1, Inf, -smallest subnormal
      MakeArray<int16_t>(kNpyI16, {3}, {-32768, 0, 32767}),
      MakeArray<uint16_t>(kNpyU16, {2}, {0, 65535}),
      MakeArray<uint32_t>(kNpyU32, {2}, {0, 4294967295u}),
      MakeArray<uint64_t>(kNpyU64, {2}, {0, ~uint64_t{0}}),
      MakeArray<float>(kNpyF32, {}, {42.f}),          // scalar
      MakeArray<int64_t>(kNpyI64, {0}, {}),           // empty
      MakeArray<float>(kNpyF32, {3, 0, 2}, {}),       // empty, zero in the middle
  };
  for (size_t i = 0; i < arrays.size(); ++i) {
    SCOPED_TRACE("array " + std::to_string(i));
    const std::string path = dir.File("a" + std::to_string(i) + ".npy");
    ASSERT_TRUE(WriteNpy(path, arrays[i]).ok());
    auto read = ReadNpy(path);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ExpectSame(*read, arrays[i]);
    // Header padded so the data starts 64-byte aligned, as NumPy does.
    const std::vector<uint8_t> bytes = fcb::testing::ReadBytes(path);
    EXPECT_EQ((bytes.size() - arrays[i].data.size()) % 64, 0u);
    EXPECT_FALSE(fcb::testing::FileExists(path + ".tmp"));
  }
}

TEST(NpyTest, ParsesHandWrittenHeaders) {
  const std::vector<uint8_t> four = {1, 0, 0, 0, 2, 0, 0, 0};
  // Version 2.0, double quotes, no trailing comma, odd spacing.
  const auto v2 =
      HandMade("{\"descr\":\"<i4\",\"fortran_order\":False,\"shape\":( 2 , )}\n", four, 2);
  auto a = ParseNpy(v2.data(), v2.size(), "x");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->dtype, kNpyI32);
  EXPECT_EQ(a->shape, std::vector<int64_t>{2});
  // Version 3.0 with keys in another order, shape with Python 2 long suffix.
  const auto v3 = HandMade("{'shape': (1L, 2L), 'fortran_order': False, 'descr': '<f4', }\n",
                           four, 3);
  auto b = ParseNpy(v3.data(), v3.size(), "x");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->dtype, kNpyF32);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{1, 2}));
  // Bool bytes other than 0/1 are normalized.
  const auto bools = HandMade("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n",
                              {0, 2, 255});
  auto c = ParseNpy(bools.data(), bools.size(), "x");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->data, (std::vector<uint8_t>{0, 1, 1}));
}

struct BadCase {
  const char* name;
  std::vector<uint8_t> bytes;
  StatusCode code;
  const char* message_part;
};

TEST(NpyTest, RejectsMalformedFiles) {
  const std::vector<uint8_t> f32x2(8, 0);
  const std::string ok_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  std::vector<uint8_t> good = HandMade(ok_header, f32x2);
  ASSERT_TRUE(ParseStatus(good).ok());

  std::vector<uint8_t> bad_magic = good;
  bad_magic[1] = 'X';
  std::vector<uint8_t> long_header = good;
  long_header[8] = 0xFF;
  long_header[9] = 0xFF;
  std::vector<uint8_t> v2_short = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 5, 0};
  std::vector<uint8_t> v2_huge = HandMade(ok_header, f32x2, 2);
  v2_huge[11] = 0xFF;  // header length ~4 GiB
  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  std::vector<uint8_t> trailing = good;
  trailing.push_back(0);
  std::vector<uint8_t> bad_version = good;
  bad_version[6] = 4;
  auto with_header = [&](const std::string& h) { return HandMade(h, f32x2); };

  const std::vector<BadCase> cases = {
      {"empty", {}, StatusCode::kCorruptFile, "only 0 bytes"},
      {"bad magic", bad_magic, StatusCode::kCorruptFile, "bad magic"},
      {"short", {0x93, 'N', 'U', 'M'}, StatusCode::kCorruptFile, "only 4 bytes"},
      {"v2 without length", v2_short, StatusCode::kCorruptFile, "truncated"},
      {"header past end", long_header, StatusCode::kCorruptFile, "runs past the end"},
      {"v2 header past end", v2_huge, StatusCode::kCorruptFile, "runs past the end"},
      {"version 4", bad_version, StatusCode::kUnsupported, "version 4.0"},
      {"truncated data", truncated, StatusCode::kCorruptFile, "truncated file"},
      {"trailing data", trailing, StatusCode::kCorruptFile, "trailing bytes"},
      {"fortran", with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n"),
       StatusCode::kUnsupported, "Fortran"},
      {"negative dim", with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),
       StatusCode::kCorruptFile, "negative dimension"},
      {"dim overflow",
       with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
       StatusCode::kCorruptFile, "overflows"},
      {"size overflow",
       with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
       StatusCode::kCorruptFile, "too large"},
      {"shape/data mismatch",
       with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
       StatusCode::kCorruptFile, "needs 12"},
      {"big endian", with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"),
       StatusCode::kUnsupported, "big-endian"},
      {"complex64", with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (4,), }"),
       StatusCode::kUnsupported, "'<c8' is not supported"},
      {"float128", with_header("{'descr': '<f16', 'fortran_order': False, 'shape': (4,), }"),
       StatusCode::kUnsupported, "'<f16' is not supported"},
      {"structured", with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"),
       StatusCode::kCorruptFile, "structured"},
      {"missing shape", with_header("{'descr': '<f4', 'fortran_order': False, }"),
       StatusCode::kCorruptFile, "missing key"},
      {"duplicate key",
       with_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"),
       StatusCode::kCorruptFile, "duplicate key"},
      {"unknown key",
       with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
       StatusCode::kCorruptFile, "unexpected key 'x'"},
      {"not a dict", with_header("['descr', '<f4']"), StatusCode::kCorruptFile, "expected '{'"},
      {"unclosed dict", with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)"),
       StatusCode::kCorruptFile, "expected ',' or '}'"},
      {"unclosed tuple", with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2"),
       StatusCode::kCorruptFile, "shape"},
      {"unclosed string", with_header("{'descr': '<f4"), StatusCode::kCorruptFile, "'descr'"},
      {"junk after dict",
       with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x"),
       StatusCode::kCorruptFile, "after '}'"},
      {"bad bool", with_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }"),
       StatusCode::kCorruptFile, "True or False"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Status s = ParseStatus(c.bytes);
    ASSERT_REFUSED(s, c.code, c.message_part);
    EXPECT_NE(s.message().find("bad.npy"), std::string::npos) << s.message();
  }
}

TEST(NpyTest, EveryTruncationOfAValidFileIsRejected) {
  // Cut a valid file at every length: each prefix must fail cleanly.
  auto bytes = SerializeNpy(MakeArray<int32_t>(kNpyI32, {2, 2}, {1, 2, 3, 4}));
  ASSERT_TRUE(bytes.ok());
  const size_t data_at = bytes->size() - 4 * sizeof(int32_t);  // after the 10-byte preamble and the header
  for (size_t n = 0; n < bytes->size(); ++n) {
    const Status s = ParseNpy(bytes->data(), n, "cut.npy").status();
    const char* why = n < 10 ? "not a NumPy .npy file" : n < data_at ? "runs past the end of the file" : "(truncated file)";
    ASSERT_REFUSED(s, StatusCode::kCorruptFile, why) << "prefix of " << n << " bytes";
  }
}

TEST(NpyTest, CorruptedBytesNeverCrash) {
  // Overwrite every byte of a valid file with a few hostile values; each result
  // is either a consistent array or an error naming the source. Meaningful
  // mostly under the sanitizers (FCB_SANITIZE=ON), which catch over-reads.
  auto bytes = SerializeNpy(MakeArray<int64_t>(kNpyI64, {2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(bytes.ok());
  for (size_t i = 0; i < bytes->size(); ++i) {
    for (uint8_t value : {0x00, 0x20, 0x27, 0x28, 0x2C, 0x2D, 0x39, 0x7B, 0x7D, 0xFF}) {
      std::vector<uint8_t> b = *bytes;
      b[i] = value;
      auto r = ParseNpy(b.data(), b.size(), "mut.npy");
      if (r.ok()) {
        EXPECT_EQ(r->data.size(), 6 * NpyElementSize(r->dtype)) << "byte " << i;
      } else {
        EXPECT_NE(r.status().message().find("mut.npy"), std::string::npos);
      }
    }
  }
}

TEST(NpyTest, ReadErrorsNameTheFile) {
  TempDir dir;
  auto missing = ReadNpy(dir.File("missing.npy"));
  ASSERT_REFUSED(missing, StatusCode::kNotFound, "cannot open .npy file");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.npy"), std::string::npos);

  fcb::testing::WriteBytes(dir.File("text.npy"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r',
                                                   'l', 'd', '!'});
  auto text = ReadNpy(dir.File("text.npy"));
  EXPECT_REFUSED(text, StatusCode::kCorruptFile, "not a NumPy .npy file (bad magic)");
  EXPECT_EQ(text.status().code(), StatusCode::kCorruptFile);
  EXPECT_NE(text.status().message().find("text.npy"), std::string::npos);
}

TEST(NpyTest, WriterRejectsInconsistentArrays) {
  TempDir dir;
  NpyArray wrong_size = MakeArray<float>(kNpyF32, {3}, {1.f, 2.f});
  const Status s1 = WriteNpy(dir.File("a.npy"), wrong_size);
  EXPECT_EQ(s1.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s1.message().find("a.npy"), std::string::npos) << s1.message();
  NpyArray negative = MakeArray<float>(kNpyF32, {-1}, {});
  EXPECT_EQ(WriteNpy(dir.File("b.npy"), negative).code(), StatusCode::kInvalidArgument);
  NpyArray bf16 = MakeArray<uint16_t>(16, {1}, {0});  // bfloat16: NumPy has no such dtype
  EXPECT_EQ(WriteNpy(dir.File("c.npy"), bf16).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fcb::testing::FileExists(dir.File("a.npy")));
  EXPECT_EQ(WriteNpy(dir.File("no/such/dir/d.npy"), MakeArray<float>(kNpyF32, {}, {1.f})).code(),
            StatusCode::kIoError);
}

// NumPy is the reference for the format: it writes files we read, and reads
// files we write, with the values checked on both sides.
TEST(NpyTest, InteroperatesWithNumPy) {
  TempDir dir;
  const std::string script = dir.File("np.py");
  fcb::testing::WriteBytes(script, [] {
    const std::string s =
        "import sys, numpy as np\n"
        "d = sys.argv[1]\n"
        "np.save(d + '/f32.npy', np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8 - 1)\n"
        "np.save(d + '/i64.npy', np.array([[-3, 1 << 50]], dtype=np.int64))\n"
        "np.save(d + '/b.npy', np.array([True, False, True]))\n"
        "np.save(d + '/u8.npy', np.array([[7, 250]], dtype=np.uint8))\n"
        "np.save(d + '/scalar.npy', np.float64(2.5))\n"
        "np.save(d + '/f16.npy', np.array([1.0, -2.5, 65504], dtype=np.float16))\n"
        "np.save(d + '/u64.npy', np.array([2**64 - 1, 3], dtype=np.uint64))\n"
        "np.save(d + '/i16.npy', np.array([-300, 7], dtype=np.int16))\n"
        "np.save(d + '/fortran.npy', np.asfortranarray(np.ones((2, 3), np.float32)))\n"
        "np.lib.format.write_array(open(d + '/v2.npy', 'wb'), np.int32([5, 6]), version=(2, 0))\n"
        "if len(sys.argv) > 2:\n"
        "    a = np.load(d + '/ours.npy')\n"
        "    assert a.dtype == np.int32 and a.shape == (2, 2), (a.dtype, a.shape)\n"
        "    assert a.tolist() == [[1, -2], [3, 2147483647]], a.tolist()\n"
        "    s = np.load(d + '/ours_scalar.npy')\n"
        "    assert s.shape == () and s.dtype == np.float32 and s == 0.5\n"
        "    e = np.load(d + '/ours_bool.npy')\n"
        "    assert e.dtype == np.bool_ and e.tolist() == [[False], [True]]\n"
        "    print('numpy-ok')\n";
    return std::vector<uint8_t>(s.begin(), s.end());
  }());
  auto gen = RunCommand("/usr/bin/python3 '" + script + "' '" + dir.path() + "'");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;

  auto f32 = ReadNpy(dir.File("f32.npy"));
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  EXPECT_EQ(f32->dtype, kNpyF32);
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(f32->data.size(), 24 * sizeof(float));
  const float* v = reinterpret_cast<const float*>(f32->data.data());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i / 8.0f - 1) << i;

  auto i64 = ReadNpy(dir.File("i64.npy"));
  ASSERT_TRUE(i64.ok()) << i64.status().ToString();
  ExpectSame(*i64, MakeArray<int64_t>(kNpyI64, {1, 2}, {-3, int64_t{1} << 50}));
  auto b = ReadNpy(dir.File("b.npy"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSame(*b, MakeArray<uint8_t>(kNpyBool, {3}, {1, 0, 1}));
  auto u8 = ReadNpy(dir.File("u8.npy"));
  ASSERT_TRUE(u8.ok()) << u8.status().ToString();
  ExpectSame(*u8, MakeArray<uint8_t>(kNpyU8, {1, 2}, {7, 250}));
  auto scalar = ReadNpy(dir.File("scalar.npy"));
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  ExpectSame(*scalar, MakeArray<double>(kNpyF64, {}, {2.5}));
  auto f16 = ReadNpy(dir.File("f16.npy"));
  ASSERT_TRUE(f16.ok()) << f16.status().ToString();
  ExpectSame(*f16, MakeArray<uint16_t>(kNpyF16, {3}, {0x3c00, 0xc100, 0x7bff}));
  auto u64 = ReadNpy(dir.File("u64.npy"));
  ASSERT_TRUE(u64.ok()) << u64.status().ToString();
  ExpectSame(*u64, MakeArray<uint64_t>(kNpyU64, {2}, {~uint64_t{0}, 3}));
  auto i16 = ReadNpy(dir.File("i16.npy"));
  ASSERT_TRUE(i16.ok()) << i16.status().ToString();
  ExpectSame(*i16, MakeArray<int16_t>(kNpyI16, {2}, {-300, 7}));
  auto v2 = ReadNpy(dir.File("v2.npy"));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  ExpectSame(*v2, MakeArray<int32_t>(kNpyI32, {2}, {5, 6}));
  auto fortran = ReadNpy(dir.File("fortran.npy"));
  EXPECT_REFUSED(fortran, StatusCode::kUnsupported, "Fortran-order arrays are not supported; save a C-order array");
  EXPECT_EQ(fortran.status().code(), StatusCode::kUnsupported);

  ASSERT_TRUE(WriteNpy(dir.File("ours.npy"),
                       MakeArray<int32_t>(kNpyI32, {2, 2}, {1, -2, 3, 2147483647})).ok());
  ASSERT_TRUE(WriteNpy(dir.File("ours_scalar.npy"), MakeArray<float>(kNpyF32, {}, {0.5f})).ok());
  ASSERT_TRUE(WriteNpy(dir.File("ours_bool.npy"), MakeArray<uint8_t>(kNpyBool, {2, 1}, {0, 1})).ok());
  auto check = RunCommand("/usr/bin/python3 '" + script + "' '" + dir.path() + "' check");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("numpy-ok"), std::string::npos) << check.out << check.err;
}

}  // namespace
}  // namespace fcb
