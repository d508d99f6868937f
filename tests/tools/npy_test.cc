#include "tools/npy.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace spatial {
namespace {

using ::testing::HasSubstr;

// A .npy file with the given header dict and raw data, in format version `major`.
std::string MakeNpy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict + "\n";
  std::string out = std::string("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string Dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return absl::StrCat("{'descr': '", descr, "', 'fortran_order': ", fortran, ", 'shape': ", shape, ", }");
}

// Little-endian (or big-endian) bytes of an integer of `size` bytes.
std::string Bytes(uint64_t v, int size, bool big = false) {
  std::string s;
  for (int i = 0; i < size; ++i) {
    int shift = big ? 8 * (size - 1 - i) : 8 * i;
    s.push_back(static_cast<char>((v >> shift) & 0xff));
  }
  return s;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

Tensor T(const std::string& name, int64_t rows, int64_t cols, Precision p) {
  Tensor t;
  t.name = name;
  t.rows = rows;
  t.cols = cols;
  t.precision = p;
  return t;
}

TEST(Npy, RoundTripFloat64) {
  TensorData d{2, 3, Precision::kBf16, {1.5, -2.25, 0.0, 1e-300, -7.0, 3.141592653589793}};
  std::string bytes = EncodeNpy(d);
  EXPECT_EQ((bytes.size() - 6 * 8) % 64, 0u);  // header padded to 64 bytes as NumPy does
  auto a = ParseNpy(bytes, "f.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->descr, "<f8");
  EXPECT_FALSE(a->integer);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->values, d.values);
}

TEST(Npy, RoundTripInt64) {
  TensorData d{1, 4, Precision::kInt32, {-2147483648.0, 2147483647.0, 0.0, -1.0}};
  auto a = ParseNpy(EncodeNpy(d), "i.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->descr, "<i8");
  EXPECT_TRUE(a->integer);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(a->values, d.values);
}

TEST(Npy, RoundTripThroughAFile) {
  std::string path = testing::TempDir() + "/npy_roundtrip.npy";
  TensorData d{3, 1, Precision::kFp32, {0.5, -0.5, 42.0}};
  ASSERT_TRUE(WriteNpy(path, d).ok());
  auto a = ReadNpy(path);
  ASSERT_TRUE(a.ok()) << a.status();
  auto t = NpyToTensor(*a, T("w", 3, 1, Precision::kFp32), path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->values, d.values);
  EXPECT_EQ(t->precision, Precision::kFp32);
}

struct DtypeCase {
  std::string descr;
  std::string data;
  std::vector<double> want;
  bool integer;
};

TEST(Npy, EveryDtypeDecodes) {
  std::vector<DtypeCase> cases = {
      {"<f4", Bytes(std::bit_cast<uint32_t>(1.5f), 4) + Bytes(std::bit_cast<uint32_t>(-0.125f), 4), {1.5, -0.125}, false},
      {"<f8", Bytes(std::bit_cast<uint64_t>(-3.75), 8) + Bytes(std::bit_cast<uint64_t>(1e10), 8), {-3.75, 1e10}, false},
      {"<i1", Bytes(0x80, 1) + Bytes(0x7f, 1), {-128, 127}, true},
      {"|i1", Bytes(0xff, 1) + Bytes(0x05, 1), {-1, 5}, true},
      {"<u1", Bytes(0xff, 1) + Bytes(0x00, 1), {255, 0}, true},
      {"|u1", Bytes(0x80, 1) + Bytes(0x01, 1), {128, 1}, true},
      {"<i2", Bytes(0x8000, 2) + Bytes(0x1234, 2), {-32768, 0x1234}, true},
      {"<u2", Bytes(0xffff, 2) + Bytes(0x0001, 2), {65535, 1}, true},
      {"<i4", Bytes(0xfffffffe, 4) + Bytes(100000, 4), {-2, 100000}, true},
      {"<u4", Bytes(0xffffffff, 4) + Bytes(7, 4), {4294967295.0, 7}, true},
      {"<i8", Bytes(static_cast<uint64_t>(int64_t{-5000000000}), 8) + Bytes(9, 8), {-5000000000.0, 9}, true},
      {">f8", Bytes(std::bit_cast<uint64_t>(2.5), 8, true) + Bytes(std::bit_cast<uint64_t>(-1.0), 8, true),
       {2.5, -1.0}, false},
      {">f4", Bytes(std::bit_cast<uint32_t>(0.75f), 4, true) + Bytes(std::bit_cast<uint32_t>(8.0f), 4, true),
       {0.75, 8.0}, false},
      {">i4", Bytes(0xfffffffd, 4, true) + Bytes(258, 4, true), {-3, 258}, true},
      {">i2", Bytes(0xfffe, 2, true) + Bytes(513, 2, true), {-2, 513}, true},
  };
  for (const DtypeCase& c : cases) {
    auto a = ParseNpy(MakeNpy(Dict(c.descr, "(2,)"), c.data), "d.npy");
    ASSERT_TRUE(a.ok()) << c.descr << ": " << a.status();
    EXPECT_EQ(a->values, c.want) << c.descr;
    EXPECT_EQ(a->integer, c.integer) << c.descr;
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2})) << c.descr;
  }
}

TEST(Npy, FormatVersions2And3HaveFourByteHeaderLengths) {
  std::string data = Bytes(std::bit_cast<uint64_t>(6.0), 8);
  for (int major : {2, 3}) {
    auto a = ParseNpy(MakeNpy(Dict("<f8", "(1, 1)"), data, major), "v.npy");
    ASSERT_TRUE(a.ok()) << major << ": " << a.status();
    EXPECT_EQ(a->values, (std::vector<double>{6.0}));
  }
  EXPECT_THAT(Message(ParseNpy(MakeNpy(Dict("<f8", "(1, 1)"), data, 4), "v.npy").status()),
              HasSubstr("v.npy: error: unsupported .npy format version 4.0"));
}

TEST(Npy, HeaderKeysInAnyOrderAndDoubleQuotes) {
  std::string dict = "{\"shape\": (1,), \"fortran_order\": False, \"descr\": \"<i4\"}";
  auto a = ParseNpy(MakeNpy(dict, Bytes(77, 4)), "q.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->values, (std::vector<double>{77}));
}

// Each malformed file -> its message.
TEST(Npy, MalformedFilesNameWhatIsWrong) {
  std::string f8x2 = Bytes(0, 8) + Bytes(0, 8);
  struct Bad {
    std::string bytes;
    std::string message;
  };
  std::string huge_v2 = std::string("\x93NUMPY\x02\x00", 8) + Bytes(0xfffffff0u, 4) + "{";
  std::vector<Bad> cases = {
      {"GIF89a...........", "x.npy: error: bad magic: not a .npy file"},
      {"", "x.npy: error: bad magic"},
      {std::string("PK\x03\x04", 4), "is a .npz archive"},
      {std::string("\x93NUMPY\x01", 7), "x.npy: error: truncated header"},
      {MakeNpy(Dict("<f8", "(2,)"), Bytes(0, 8)), "x.npy: error: truncated data: shape (2,) of <f8"},
      {MakeNpy(Dict("<f8", "(2,)"), f8x2 + "x"), "size mismatch: shape (2,) of <f8 needs 16 bytes of data but the file has 17"},
      {MakeNpy(Dict("<c8", "(2,)"), f8x2), "x.npy: error: unsupported dtype \"<c8\""},
      {MakeNpy(Dict("<f2", "(2,)"), Bytes(0, 4)), "unsupported dtype \"<f2\""},
      {MakeNpy(Dict("|f8", "(2,)"), f8x2), "byte order '|' needs a 1-byte type"},
      {MakeNpy(Dict("<f8", "(2,)", "True"), f8x2), "x.npy: error: fortran_order is True"},
      {MakeNpy(Dict("<f8", "(-2,)"), f8x2), "x.npy: error: 'shape' has a negative dimension -2"},
      {MakeNpy(Dict("<f8", "(4294967296, 4294967296, 4294967296)"), f8x2), "x.npy: error: truncated data"},
      {MakeNpy(Dict("<f8", "(99999999999999999999,)"), f8x2), "a dimension of 'shape' is too large"},
      {MakeNpy(Dict("<f8", "(2.5,)"), f8x2), "'shape' is not a tuple of integers (unexpected '.' at header offset"},
      {huge_v2, "x.npy: error: header length 4294967280 exceeds the limit"},
      {MakeNpy("{'descr': '<f8', 'shape': (2,)}", f8x2), "header has no 'fortran_order'"},
      {MakeNpy("{'descr': '<f8', 'fortran_order': False}", f8x2), "header has no 'shape'"},
      {MakeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", f8x2), "unexpected key 'x'"},
      {MakeNpy("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,)}", f8x2), "structured dtypes"},
      {MakeNpy("['not a dict']", f8x2), "header is not a Python dict literal"},
      {MakeNpy("{'descr': '<f8", f8x2), "unterminated string"},
      {MakeNpy(Dict("<i8", "(1,)"), Bytes(uint64_t{1} << 60, 8)), "beyond 2^53"},
  };
  // The declared header length runs past the end of the file.
  std::string short_header = std::string("\x93NUMPY\x01\x00", 8) + Bytes(200, 2) + "{'descr'";
  cases.push_back({short_header, "x.npy: error: truncated header: it declares 200 bytes"});
  for (const Bad& c : cases) {
    auto a = ParseNpy(c.bytes, "x.npy");
    ASSERT_FALSE(a.ok()) << "accepted a file that should fail with: " << c.message;
    EXPECT_THAT(Message(a.status()), HasSubstr(c.message));
  }
}

// A file cut short anywhere, preamble, header or data, is an error, never a crash or a partial array.
TEST(Npy, EveryTruncationIsRejected) {
  std::string full = EncodeNpy(TensorData{2, 2, Precision::kFp32, {1, 2, 3, 4}});
  ASSERT_TRUE(ParseNpy(full, "t.npy").ok());
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(ParseNpy(full.substr(0, n), "t.npy").ok()) << "accepted the first " << n << " bytes";
  }
}

TEST(Npy, ShapesThatFitARowTensor) {
  std::string data = Bytes(std::bit_cast<uint64_t>(1.0), 8) + Bytes(std::bit_cast<uint64_t>(2.0), 8) +
                     Bytes(std::bit_cast<uint64_t>(3.0), 8);
  Tensor row = T("x", 1, 3, Precision::kBf16);
  for (std::string shape : {"(3,)", "(1, 3)"}) {
    auto a = ParseNpy(MakeNpy(Dict("<f8", shape), data), "r.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    auto t = NpyToTensor(*a, row, "r.npy");
    ASSERT_TRUE(t.ok()) << shape << ": " << t.status();
    EXPECT_EQ(t->rows, 1);
    EXPECT_EQ(t->cols, 3);
    EXPECT_EQ(t->values, (std::vector<double>{1, 2, 3}));
  }
  // (3, 1) is a column, not a row.
  auto col = ParseNpy(MakeNpy(Dict("<f8", "(3, 1)"), data), "c.npy");
  ASSERT_TRUE(col.ok());
  EXPECT_EQ(Message(NpyToTensor(*col, row, "c.npy").status()),
            "c.npy: error: shape (3, 1) but the program's tensor 'x' is 1x3");
}

TEST(Npy, WrongShapeNamesTheTensor) {
  auto a = ParseNpy(MakeNpy(Dict("<f8", "(2, 3)"), std::string(48, '\0')), "in.npy");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(Message(NpyToTensor(*a, T("x", 1, 3072, Precision::kBf16), "in.npy").status()),
            "in.npy: error: shape (2, 3) but the program's tensor 'x' is 1x3072");
  auto cube = ParseNpy(MakeNpy(Dict("<f8", "(1, 2, 3)"), std::string(48, '\0')), "in.npy");
  ASSERT_TRUE(cube.ok());
  EXPECT_THAT(Message(NpyToTensor(*cube, T("x", 2, 3, Precision::kBf16), "in.npy").status()),
              HasSubstr("shape (1, 2, 3) but the program's tensor 'x' is 2x3"));
}

TEST(Npy, IntegerTensorsNeedIntegralValuesInRange) {
  Tensor idx = T("idx", 1, 2, Precision::kInt8);
  auto frac = ParseNpy(MakeNpy(Dict("<f8", "(2,)"),
                               Bytes(std::bit_cast<uint64_t>(3.0), 8) + Bytes(std::bit_cast<uint64_t>(0.5), 8)),
                       "f.npy");
  ASSERT_TRUE(frac.ok());
  EXPECT_EQ(Message(NpyToTensor(*frac, idx, "f.npy").status()),
            "f.npy: error: the program's tensor 'idx' is int8 but element 1 is 0.5, not an integer (dtype <f8)");
  // Integral floats are fine for an integer tensor.
  auto whole = ParseNpy(MakeNpy(Dict("<f4", "(2,)"), Bytes(std::bit_cast<uint32_t>(-4.0f), 4) +
                                                          Bytes(std::bit_cast<uint32_t>(9.0f), 4)),
                        "w.npy");
  ASSERT_TRUE(whole.ok());
  auto ok = NpyToTensor(*whole, idx, "w.npy");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->values, (std::vector<double>{-4, 9}));
  auto big = ParseNpy(MakeNpy(Dict("<i2", "(2,)"), Bytes(1, 2) + Bytes(300, 2)), "b.npy");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(Message(NpyToTensor(*big, idx, "b.npy").status()),
            "b.npy: error: element 1 = 300 does not fit the tensor 'idx' of precision int8");
  auto nan = ParseNpy(MakeNpy(Dict("<f8", "(2,)"), Bytes(std::bit_cast<uint64_t>(std::nan("")), 8) + Bytes(0, 8)), "n.npy");
  ASSERT_TRUE(nan.ok());
  EXPECT_THAT(Message(NpyToTensor(*nan, idx, "n.npy").status()), HasSubstr("element 0 is nan, not an integer"));
}

TEST(Npy, ScalarAndEmptyArrays) {
  auto scalar = ParseNpy(MakeNpy(Dict("<f8", "()"), Bytes(std::bit_cast<uint64_t>(5.0), 8)), "s.npy");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->values, (std::vector<double>{5.0}));
  EXPECT_TRUE(NpyToTensor(*scalar, T("s", 1, 1, Precision::kFp32), "s.npy").ok());
  // A zero dimension means no data, whatever the other dimensions claim.
  auto empty = ParseNpy(MakeNpy(Dict("<f8", "(0, 4294967296)"), ""), "e.npy");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->values.empty());
}

TEST(Npy, MissingFileIsNotFound) {
  auto a = ReadNpy(testing::TempDir() + "/does_not_exist.npy");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(a.status()), HasSubstr("does_not_exist.npy: error: cannot open file"));
}

TEST(Npy, ShapeStrings) {
  EXPECT_EQ(NpyShapeString({}), "()");
  EXPECT_EQ(NpyShapeString({3072}), "(3072,)");
  EXPECT_EQ(NpyShapeString({2, 3}), "(2, 3)");
}

}  // namespace
}  // namespace spatial
