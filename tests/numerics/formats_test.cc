// Storage formats and rounding (sim/numerics/formats.h) against values derived by hand from the bit patterns.
#include "sim/numerics/formats.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "sim/numerics/float_bits.h"

namespace spatial::numerics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint32_t Bf16Bits(float f) { return Bits(f) >> 16; }

// 0x3F808000 = 1 + 2^-8: exactly halfway between bf16 0x3F80 (1.0) and 0x3F81 (1 + 2^-7). RNE picks the even
// 0x3F80, ties-away the larger magnitude 0x3F81, truncation drops the half.
TEST(Bf16, TieAtOnePlusHalfUlp) {
  const float x = FromBits(0x3F808000u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::RNE)), 0x3F80u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::TIES_AWAY)), 0x3F81u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::TRUNCATE)), 0x3F80u);
}

// 0x3F818000: halfway between 0x3F81 (odd) and 0x3F82 (even): RNE and ties-away both go up, truncation stays.
TEST(Bf16, TieAboveOddMantissa) {
  const float x = FromBits(0x3F818000u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::RNE)), 0x3F82u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::TIES_AWAY)), 0x3F82u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::TRUNCATE)), 0x3F81u);
}

// Negative tie -(1 + 2^-8): ties-away grows the magnitude (-> -(1 + 2^-7)), truncation goes toward zero (-> -1).
TEST(Bf16, NegativeTieIsOnTheMagnitude) {
  const float x = FromBits(0xBF808000u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::RNE)), 0xBF80u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::TIES_AWAY)), 0xBF81u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(x, proto::TRUNCATE)), 0xBF80u);
}

// One unit past the tie rounds up in both nearest modes; one unit short rounds down in both.
TEST(Bf16, NonTiesRoundToNearest) {
  EXPECT_EQ(Bf16Bits(RoundToBf16(FromBits(0x3F808001u), proto::RNE)), 0x3F81u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(FromBits(0x3F808001u), proto::TIES_AWAY)), 0x3F81u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(FromBits(0x3F807FFFu), proto::RNE)), 0x3F80u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(FromBits(0x3F807FFFu), proto::TIES_AWAY)), 0x3F80u);
  EXPECT_EQ(Bf16Bits(RoundToBf16(FromBits(0x3F80FFFFu), proto::TRUNCATE)), 0x3F80u);
}

// A carry out of the mantissa bumps the exponent: 0x3FFF8000 = 2 - 2^-8 rounds (RNE, odd 0x3FFF) to 2.0.
TEST(Bf16, CarryIntoExponent) {
  EXPECT_EQ(RoundToBf16(FromBits(0x3FFF8000u), proto::RNE), 2.0f);
  EXPECT_EQ(RoundToBf16(FromBits(0x3FFF8000u), proto::TRUNCATE), FromBits(0x3FFF0000u));
}

// The largest finite fp32 rounds past bf16's largest finite (0x7F7F) to Inf in the nearest modes; truncation stays
// finite at 0x7F7F0000.
TEST(Bf16, OverflowToInfinity) {
  const float big = FromBits(0x7F7FFFFFu);
  EXPECT_TRUE(std::isinf(RoundToBf16(big, proto::RNE)));
  EXPECT_TRUE(std::isinf(RoundToBf16(big, proto::TIES_AWAY)));
  EXPECT_EQ(Bits(RoundToBf16(big, proto::TRUNCATE)), 0x7F7F0000u);
}

// Denormals are flushed (§1.2): a rounding conversion gives +0, a truncating one keeps the sign (SFPSTORE).
TEST(Denormals, FlushedToZero) {
  const float pos = FromBits(0x00400000u);  // 2^-127
  const float neg = FromBits(0x80400000u);
  EXPECT_EQ(Bits(RoundToBf16(pos, proto::RNE)), 0u);
  EXPECT_EQ(Bits(RoundToBf16(neg, proto::TIES_AWAY)), 0u);          // +0, not -0
  EXPECT_EQ(Bits(RoundToBf16(neg, proto::TRUNCATE)), 0x80000000u);  // signed zero
  EXPECT_EQ(ToFp32(std::ldexp(1.0, -127)), 0.0f);
  EXPECT_FALSE(std::signbit(ToFp32(-std::ldexp(1.0, -130))));
  EXPECT_FALSE(std::signbit(ToFp32(-0.0)));  // the datapath never holds -0
  // Without flush the same values survive: 2^-127 is an fp32 denormal.
  EXPECT_EQ(ToFp32(std::ldexp(1.0, -127), false), std::ldexp(1.0f, -127));
  EXPECT_EQ(RoundToBf16(pos, proto::RNE, false), pos);
}

// NaN: ties-away (SFPSTOCHRND, packer) makes it Inf; RNE keeps a NaN; truncation keeps a quiet NaN but turns a NaN
// whose payload lies only in the dropped 16 bits into Inf (§1.2).
TEST(Bf16, NanRules) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Bits(RoundToBf16(qnan, proto::TIES_AWAY)), 0x7F800000u);
  EXPECT_EQ(Bits(RoundToBf16(-qnan, proto::TIES_AWAY)), 0xFF800000u);
  EXPECT_TRUE(std::isnan(RoundToBf16(qnan, proto::RNE)));
  EXPECT_TRUE(std::isnan(RoundToBf16(qnan, proto::TRUNCATE)));
  EXPECT_EQ(Bits(RoundToBf16(FromBits(0x7F800001u), proto::TRUNCATE)), 0x7F800000u);
  EXPECT_EQ(RoundToBf16(std::numeric_limits<float>::infinity(), proto::RNE), std::numeric_limits<float>::infinity());
}

// tf32 keeps 10 mantissa bits: 1 + 2^-11 is the tie between 1 and 1 + 2^-10.
TEST(Tf32, Ties) {
  const float x = FromBits(0x3F801000u);
  EXPECT_EQ(RoundToTf32(x, proto::RNE), 1.0f);
  EXPECT_EQ(RoundToTf32(x, proto::TIES_AWAY), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(RoundToTf32(x, proto::TRUNCATE), 1.0f);
}

// fp16: 1 + 2^-11 ties like tf32 (10 bits); 65519 < 65520 (the tie between 65504 and 2^16) stays 65504; 65520
// rounds (RNE, 65504 is odd in the last bit) to 2^16, which overflows to Inf; truncation saturates only at 2^16.
TEST(Fp16, TiesAndOverflow) {
  EXPECT_EQ(RoundToFp16(FromBits(0x3F801000u), proto::RNE), 1.0f);
  EXPECT_EQ(RoundToFp16(FromBits(0x3F801000u), proto::TIES_AWAY), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(RoundToFp16(65519.0f, proto::RNE), 65504.0f);
  EXPECT_TRUE(std::isinf(RoundToFp16(65520.0f, proto::RNE)));
  EXPECT_EQ(RoundToFp16(65535.0f, proto::TRUNCATE), 65504.0f);
  EXPECT_TRUE(std::isinf(RoundToFp16(70000.0f, proto::TRUNCATE)));
  EXPECT_EQ(RoundToFp16(-70000.0f, proto::TRUNCATE), -std::numeric_limits<float>::infinity());
  // No NaN on Tensix fp16: NaN becomes Inf.
  EXPECT_TRUE(std::isinf(RoundToFp16(std::numeric_limits<float>::quiet_NaN(), proto::RNE)));
}

// Below fp16's smallest normal (2^-14): flushed; without flush, rounded onto the 2^-24 grid (0.75 ulp -> 1 ulp).
TEST(Fp16, Underflow) {
  EXPECT_EQ(RoundToFp16(std::ldexp(1.0f, -15), proto::RNE), 0.0f);
  EXPECT_EQ(RoundToFp16(std::ldexp(1.0f, -15), proto::RNE, false), std::ldexp(1.0f, -15));
  EXPECT_EQ(RoundToFp16(3.0f * std::ldexp(1.0f, -26), proto::RNE, false), std::ldexp(1.0f, -24));
  EXPECT_EQ(RoundToFp16(std::ldexp(1.0f, -14), proto::RNE), std::ldexp(1.0f, -14));
}

// Integers: rounded by the mode, then saturated symmetrically (sign-magnitude on Tensix).
TEST(Integers, RoundingAndSaturation) {
  EXPECT_EQ(RoundToInt(2.5, Precision::kInt8, proto::RNE), 2.0);
  EXPECT_EQ(RoundToInt(2.5, Precision::kInt8, proto::TIES_AWAY), 3.0);
  EXPECT_EQ(RoundToInt(2.5, Precision::kInt8, proto::TRUNCATE), 2.0);
  EXPECT_EQ(RoundToInt(-2.5, Precision::kInt8, proto::RNE), -2.0);
  EXPECT_EQ(RoundToInt(-2.5, Precision::kInt8, proto::TIES_AWAY), -3.0);
  EXPECT_EQ(RoundToInt(-2.7, Precision::kInt8, proto::TRUNCATE), -2.0);
  EXPECT_EQ(RoundToInt(200, Precision::kInt8, proto::RNE), 127.0);
  EXPECT_EQ(RoundToInt(-200, Precision::kInt8, proto::RNE), -127.0);  // not -128: sign-magnitude
  EXPECT_EQ(RoundToInt(40000, Precision::kInt16, proto::RNE), 32767.0);
  EXPECT_EQ(RoundToInt(3e9, Precision::kInt32, proto::RNE), 2147483647.0);
  EXPECT_EQ(RoundToInt(-3e9, Precision::kInt32, proto::RNE), -2147483647.0);
  EXPECT_EQ(RoundToInt(1e19, Precision::kInt64, proto::RNE), 9223372036854774784.0);
  EXPECT_EQ(RoundToInt(std::nan(""), Precision::kInt32, proto::RNE), 0.0);
  EXPECT_EQ(RoundToInt(-kInf, Precision::kInt32, proto::RNE), -2147483647.0);
  EXPECT_FALSE(std::signbit(RoundToInt(-0.4, Precision::kInt32, proto::RNE)));
}

// A hand-made bfp8_b block. The largest bf16 exponent is 127 (values in [1, 2)), so the shared exponent is 127
// and a value of exponent e keeps its 8-bit significand shifted right by 128 - e; value = Mag * 2^-6.
TEST(Bfp8B, SharedExponentBlock) {
  // index: value                    bf16 (sig, exp)       shift  Mag (TA / RNE / TRUNC)   result
  //  0    1.5                       192, 127              1      96                       1.5
  //  1    1 + 2^-7                  129, 127              1      64.5 -> 65 / 64 / 64      1.015625 / 1 / 1
  //  2    0.5                       128, 126              2      32                       0.5
  //  3    0.75                      192, 126              2      48                       0.75
  //  4    0.1 -> bf16 0x3DCD/0x3DCC  205|204, 123          5      6.41|6.375 -> 6          0.09375
  //  5   -1.25                      160, 127              1      80                      -1.25
  //  6    0                                                     0                        +0
  //  7    3e-5                      exp 112               16     0                        +0
  //  8   -3e-5                                                  0                        +0 (never -0)
  //  9    0.0390625 = 1.25*2^-5     160, 122              6      2.5 -> 3 / 2 / 2          0.046875 / 0.03125
  // 10    1 + 63/128                191, 127              1      95.5 -> 96 / 96 / 95      1.5 / 1.5 / 1.484375
  // 11   -0.3 -> bf16 0xBE9A/0xBE99  154|153, 125          3      19.25|19.125 -> 19       -0.296875
  // 12-15 1.0                       128, 127              1      64                       1.0
  const std::vector<double> in = {1.5,   1.0078125, 0.5,       0.75, 0.1, -1.25, 0.0, 3e-5,
                                  -3e-5, 0.0390625, 1.4921875, -0.3, 1.0, 1.0,   1.0, 1.0};
  struct Case {
    proto::Rounding mode;
    double v1, v9, v10;
  };
  for (const Case& c : {Case{proto::TIES_AWAY, 1.015625, 0.046875, 1.5}, Case{proto::RNE, 1.0, 0.03125, 1.5},
                        Case{proto::TRUNCATE, 1.0, 0.03125, 1.484375}}) {
    SCOPED_TRACE(c.mode);
    std::vector<double> v = in;
    RoundBfp8BBlock(v.data(), 16, c.mode);
    const std::vector<double> want = {1.5, c.v1, 0.5,   0.75,      0.09375, -1.25, 0.0, 0.0,
                                      0.0, c.v9, c.v10, -0.296875, 1.0,     1.0,   1.0, 1.0};
    for (int i = 0; i < 16; ++i) EXPECT_EQ(v[i], want[i]) << "element " << i;
    EXPECT_FALSE(std::signbit(v[8]));
  }
}

// The largest element 1 + 127/128 (significand 255) shifted by one is 127.5: ties-away carries it to 128, which a
// 7-bit magnitude cannot hold, so the shared exponent grows to 128 and every element shifts one more bit:
// 255/4 = 63.75 -> 64 -> 64 * 2^(128-133) = 2.0, and 0.5 -> 128/8 = 16 -> 16 * 2^-5 = 0.5. Truncation never
// carries: 127 -> 127/64.
TEST(Bfp8B, CarryGrowsTheSharedExponent) {
  double ta[2] = {1.9921875, 0.5};
  RoundBfp8BBlock(ta, 2, proto::TIES_AWAY);
  EXPECT_EQ(ta[0], 2.0);
  EXPECT_EQ(ta[1], 0.5);
  double tr[2] = {1.9921875, 0.5};
  RoundBfp8BBlock(tr, 2, proto::TRUNCATE);
  EXPECT_EQ(tr[0], 1.984375);
  EXPECT_EQ(tr[1], 0.5);
}

// An infinite element owns the block: it stays Inf and its finite neighbours flush to 0.
TEST(Bfp8B, InfinityDominatesTheBlock) {
  double v[3] = {kInf, 1.0, -2.0};
  RoundBfp8BBlock(v, 3, proto::TIES_AWAY);
  EXPECT_EQ(v[0], kInf);
  EXPECT_EQ(v[1], 0.0);
  EXPECT_EQ(v[2], 0.0);
}

// RoundToPrecision groups bfp8_b values in blocks of 16 from v[0]: a large value in the first block crushes its
// small neighbours, but not the small value that opens the second block.
TEST(Bfp8B, BlocksOfSixteen) {
  std::vector<double> v(17, 0.01);
  v[0] = 100.0;
  RoundToPrecision(Precision::kBfp8B, proto::TIES_AWAY, true, v.data(), 17);
  EXPECT_EQ(v[0], 100.0);  // bf16 0x42C8: significand 200 -> Mag 100 at 2^(133-127-6)
  EXPECT_EQ(v[1], 0.0);    // 0.01 is 2^-13.3 below: shifted out
  // Alone in its block, 0.01 -> bf16 0x3C24 (0.010009765625) -> Mag round(164/2) = 82 -> 82 * 2^(120-133).
  EXPECT_EQ(v[16], 82.0 * std::ldexp(1.0, -13));
}

// bfp4_b is bfp8_b truncated to 3-bit magnitudes (§1.2). 1.0 sets the shared exponent 127: bfp8 magnitudes
// 64 (1.0), 19 (0.3 -> bf16 0.30078125 = 154 >> 3 = 19.25 -> 19) and 58 (0.9 -> bf16 0.8984375 = 230 >> 2 = 57.5,
// ties to even 58); truncated to 3 bits: 4 (1.0), 1 (0.25), 3 (0.75 -- truncation, not 1.0).
TEST(Bfp4B, TruncatedFromBfp8) {
  double v[3] = {1.0, 0.3, -0.9};
  RoundBfp4BBlock(v, 3, proto::RNE);
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], 0.25);
  EXPECT_EQ(v[2], -0.75);
  double w[3] = {1.0, 0.3, -0.9};
  RoundBfp8BBlock(w, 3, proto::RNE);
  EXPECT_EQ(w[1], 19.0 / 64);
  EXPECT_EQ(w[2], -58.0 / 64);
  // A value below the block's smallest step flushes to zero; the tile is 512 bytes of nibbles + 64 of exponents.
  double x[2] = {8.0, 0.5};
  RoundBfp4BBlock(x, 2, proto::RNE);
  EXPECT_EQ(x[0], 8.0);
  EXPECT_EQ(x[1], 0.0);
  EXPECT_EQ(TileBytes(Precision::kBfp4B, 1024), 576);
}

TEST(RoundToPrecision, EachFormat) {
  double v[4] = {1.00390625, -1.00390625, 2.5, 1e-40};
  RoundToPrecision(Precision::kBf16, proto::TIES_AWAY, true, v, 4);
  EXPECT_EQ(v[0], 1.0078125);
  EXPECT_EQ(v[1], -1.0078125);
  EXPECT_EQ(v[2], 2.5);
  EXPECT_EQ(v[3], 0.0);
  double w[2] = {1.0 + std::ldexp(1.0, -30), 3.7};
  RoundToPrecision(Precision::kFp32, proto::TIES_AWAY, true, w, 2);
  EXPECT_EQ(w[0], 1.0);  // below half an fp32 ulp
  EXPECT_EQ(w[1], static_cast<double>(3.7f));
  double i[3] = {2.5, 300.0, -300.0};
  RoundToPrecision(Precision::kInt8, proto::TIES_AWAY, true, i, 3);
  EXPECT_EQ(i[0], 3.0);
  EXPECT_EQ(i[1], 127.0);
  EXPECT_EQ(i[2], -127.0);
  EXPECT_EQ(RoundOne(Precision::kFp16, proto::TRUNCATE, true, 1.0 + std::ldexp(1.0, -10) * 1.9),
            1.0 + std::ldexp(1.0, -10));
}

}  // namespace
}  // namespace spatial::numerics
