// Matrix-engine fidelity (sim/numerics/matrix_engine.h): the bits each phase multiplies, the products each
// fidelity forms, bf16 Dst rounding after every MVMUL, and the fast kernel against a phase-by-phase reference.
#include "sim/numerics/matrix_engine.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "sim/numerics/float_bits.h"
#include "sim/numerics/formats.h"

namespace spatial::numerics {
namespace {

// 1 + 127/128: bf16 with all seven mantissa bits set (0x3FFF).
constexpr double kAllBits = 1.9921875;

// SrcA phase 0 keeps hidden + 4 mantissa bits: 1.1111111b -> 1.1111b = 1.9375; phase 1 the next bits (here the
// remaining three, 0.0000111b = 7/128). SrcB phase 0 keeps hidden + 6: 1.111111b = 1.984375; phase 2 the next
// (here the last one, 1/128).
TEST(FidelityBits, SplitTheMantissa) {
  const float x = static_cast<float>(kAllBits);
  EXPECT_EQ(SrcAFidelityBits(x, 0), 1.9375f);
  EXPECT_EQ(SrcAFidelityBits(x, 1), 7.0f / 128.0f);
  EXPECT_EQ(SrcBFidelityBits(x, 0), 1.984375f);
  EXPECT_EQ(SrcBFidelityBits(x, 2), 1.0f / 128.0f);
  // A tf32 value (10 mantissa bits, all set): SrcA sees 4 + 5 = 9 of them (the last is never used); SrcB 6 + 4.
  const float t = FromBits(0x3FFFE000u);  // 1 + 1023/1024
  EXPECT_EQ(SrcAFidelityBits(t, 0) + SrcAFidelityBits(t, 1), 1.0f + 511.0f / 512.0f);
  EXPECT_EQ(SrcBFidelityBits(t, 0) + SrcBFidelityBits(t, 2), t);
  // Negative values split on the magnitude: both parts carry the sign.
  EXPECT_EQ(SrcAFidelityBits(-x, 1), -7.0f / 128.0f);
}

TEST(FidelityBits, PhaseCounts) {
  EXPECT_EQ(FidelityPhases(proto::LOFI), 1);
  EXPECT_EQ(FidelityPhases(proto::HIFI2), 2);
  EXPECT_EQ(FidelityPhases(proto::HIFI3), 3);
  EXPECT_EQ(FidelityPhases(proto::HIFI4), 4);
}

double Product1x1(proto::Fidelity f, Precision acc, double a, double b) {
  MatmulConfig cfg;
  cfg.fidelity = f;
  cfg.acc = acc;
  double c = 0.0;
  MatmulTileAtFidelity(cfg, &a, 1, &b, 1, false, &c, 1, 1, 1, 1);
  return c;
}

// a = b = 1 + 127/128, fp32 Dst. a (in0) is SrcB, b (in1) is SrcA:
//   LoFi  = 1.984375 * 1.9375                                = 3.8447265625   (a loses 1 bit, b loses 3)
//   HiFi2 = 1.984375 * 1.9921875 (b complete)                = 3.953247070312
//   HiFi3 = HiFi2 + (1/128) * 1.9375 (a's last bit x b_hi)   = 3.968383789062
//   HiFi4 = the exact product 1.9921875^2                    = 3.96881103515625
TEST(MatmulFp32Dst, EachFidelityOnAllOnesMantissas) {
  EXPECT_EQ(Product1x1(proto::LOFI, Precision::kFp32, kAllBits, kAllBits), 3.8447265625);
  EXPECT_EQ(Product1x1(proto::HIFI2, Precision::kFp32, kAllBits, kAllBits), 1.984375 * 1.9921875);
  EXPECT_EQ(Product1x1(proto::HIFI3, Precision::kFp32, kAllBits, kAllBits), 1.984375 * 1.9921875 + 1.9375 / 128);
  EXPECT_EQ(Product1x1(proto::HIFI4, Precision::kFp32, kAllBits, kAllBits), 3.96881103515625);
}

// LoFi drops exactly the low bits: operands whose mantissas fit in (6, 4) bits multiply exactly even at LoFi.
TEST(MatmulFp32Dst, LoFiIsExactOnShortMantissas) {
  EXPECT_EQ(Product1x1(proto::LOFI, Precision::kFp32, 1.984375, 1.9375), 1.984375 * 1.9375);
  EXPECT_EQ(Product1x1(proto::LOFI, Precision::kFp32, -3.0, 0.375), -1.125);
  // One more bit on b (in1, SrcA) is lost: 1 + 1/32 -> 1.
  EXPECT_EQ(Product1x1(proto::LOFI, Precision::kFp32, 1.0, 1.03125), 1.0);
  EXPECT_EQ(Product1x1(proto::HIFI2, Precision::kFp32, 1.0, 1.03125), 1.03125);
}

// bf16 Dst rounds (RNE) after every MVMUL, phase by phase. HiFi2 on the all-ones operands:
//   phase 0: 0 + 1.984375 * 1.9375 = 3.8447265625 -> bf16 (ulp 2^-6 in [2, 4)): 246.06 -> 246 * 2^-6 = 3.84375
//   phase 1: 3.84375 + 1.984375 * 7/128 = 3.95227050781 -> 252.95 -> 253 * 2^-6 = 3.953125
// (an fp32 Dst gives 3.953247...).
TEST(MatmulBf16Dst, RoundsAfterEveryPhase) {
  EXPECT_EQ(Product1x1(proto::LOFI, Precision::kBf16, kAllBits, kAllBits), 3.84375);
  EXPECT_EQ(Product1x1(proto::HIFI2, Precision::kBf16, kAllBits, kAllBits), 3.953125);
}

// ... and after every 16-deep block of K: 32 products 1 * (1 + 2^-8) sum to 32.125 in an fp32 Dst. With a bf16
// Dst, phase 0 (1 * 1) builds 32 exactly; phase 1 (1 * 2^-8) adds 16 * 2^-8 = 0.0625 per MVMUL, below half a bf16
// ulp at 32 (0.125), so both additions are rounded away: 32.
TEST(MatmulBf16Dst, RoundsAfterEachMvmul) {
  MatmulConfig cfg;
  cfg.fidelity = proto::HIFI4;
  cfg.src = Precision::kFp32;  // tf32 operands keep 1 + 2^-8
  std::vector<double> a(32, 1.0), b(32, 1.0 + std::ldexp(1.0, -8));
  double c = 0.0;
  cfg.acc = Precision::kBf16;
  MatmulTileAtFidelity(cfg, a.data(), 32, b.data(), 1, false, &c, 1, 1, 1, 32);
  EXPECT_EQ(c, 32.0);
  c = 0.0;
  cfg.acc = Precision::kFp32;
  MatmulTileAtFidelity(cfg, a.data(), 32, b.data(), 1, false, &c, 1, 1, 1, 32);
  EXPECT_EQ(c, 32.125);
}

// Operands reach Src through the unpacker: an fp32 value is cut to bf16 with the unpack rounding (TRUNCATE by
// default: 1 + 2^-8 + 2^-9 -> 1), or kept to tf32 when the matrix operand precision is fp32.
TEST(MatmulOperands, UnpackConversion) {
  const double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -9);
  EXPECT_EQ(ToSrcRegister(v, Precision::kBf16, proto::TRUNCATE), 1.0f);
  EXPECT_EQ(ToSrcRegister(v, Precision::kBf16, proto::TIES_AWAY), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(ToSrcRegister(v, Precision::kFp32, proto::TRUNCATE), static_cast<float>(v));
  EXPECT_EQ(ToSrcRegister(std::ldexp(1.0, -130), Precision::kBf16, proto::TRUNCATE), 0.0f);
}

// Integer Dst: exact products, saturating at +-(2^31 - 1).
TEST(MatmulIntDst, SaturatesAtInt32) {
  MatmulConfig cfg;
  cfg.acc = Precision::kInt32;
  const double a[2] = {3.0, -4.0}, b[2] = {5.0, 6.0};
  double c = 1.0;
  MatmulTileAtFidelity(cfg, a, 2, b, 1, false, &c, 1, 1, 1, 2);
  EXPECT_EQ(c, 1.0 + 15.0 - 24.0);
  double big = 2147483000.0;
  const double x[1] = {1000.0}, y[1] = {1000.0};
  MatmulTileAtFidelity(cfg, x, 1, y, 1, false, &big, 1, 1, 1, 1);
  EXPECT_EQ(big, 2147483647.0);
}

// The straightforward functional model (MVMUL.md): for each phase, for each 16-deep block, each 16-term dot
// product of the phase's bits summed in fp32 (in k order) and added to Dst, which a 16-bit Dst rounds (RNE).
void ReferenceMatmul(const MatmulConfig& cfg, const std::vector<double>& a, const std::vector<double>& b,
                     bool transpose_b, std::vector<double>& c, int n) {
  const bool dst16 = cfg.acc == Precision::kBf16;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      float acc = static_cast<float>(c[i * n + j]);
      if (dst16) acc = RoundToBf16(acc, proto::RNE);
      for (int p = 0; p < FidelityPhases(cfg.fidelity); ++p) {
        for (int k0 = 0; k0 < n; k0 += 16) {
          float s = 0.0f;
          for (int k = k0; k < std::min(n, k0 + 16); ++k) {
            const float av = ToSrcRegister(a[i * n + k], cfg.src, cfg.unpack);
            const float bv = ToSrcRegister(transpose_b ? b[j * n + k] : b[k * n + j], cfg.src, cfg.unpack);
            s += SrcBFidelityBits(av, p) * SrcAFidelityBits(bv, p);
          }
          acc += s;
          if (dst16) acc = RoundToBf16(acc, proto::RNE);
        }
      }
      c[i * n + j] = acc;
    }
  }
}

std::vector<double> Random(int count, std::mt19937& rng, bool bf16_in_1_2) {
  std::uniform_int_distribution<int> man(0, 127);
  std::uniform_real_distribution<double> any(-4.0, 4.0);
  std::vector<double> v(count);
  for (double& x : v) {
    if (!bf16_in_1_2) {
      x = any(rng);
      continue;
    }
    x = 1.0 + man(rng) / 128.0;
    if (man(rng) & 1) x = -x;
  }
  return v;
}

// bf16 operands in [1, 2) with K <= 32: every partial product has at most 18 significant bits at or above 2^-16
// and every sum stays below 2^8, so all fp32 sums are exact and any summation order must agree bit for bit. The
// fast kernel (merged phases, vectorized rows for widths 8, 16 and 32, scalar otherwise) must then equal the
// phase-by-phase reference exactly, for both orientations of B and with a nonzero accumulator.
TEST(MatmulFp32Dst, FastKernelMatchesTheFunctionalModel) {
  std::mt19937 rng(7);
  for (int n : {32, 16, 8, 5}) {
    const std::vector<double> a = Random(n * n, rng, true), b = Random(n * n, rng, true);
    std::vector<double> c0(n * n);
    for (double& v : c0) v = std::floor(Random(1, rng, false)[0] * 16);
    for (proto::Fidelity f : {proto::LOFI, proto::HIFI2, proto::HIFI3, proto::HIFI4}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << "n " << n << " fidelity " << f << " transpose_b " << tb);
        MatmulConfig cfg;
        cfg.fidelity = f;
        std::vector<double> want = c0, got = c0;
        ReferenceMatmul(cfg, a, b, tb, want, n);
        MatmulTileAtFidelity(cfg, a.data(), n, b.data(), n, tb, got.data(), n, n, n, n);
        for (int e = 0; e < n * n; ++e) ASSERT_EQ(got[e], want[e]) << "element " << e;
      }
    }
  }
}

// A bf16 Dst keeps the phases apart and sums each block in k order, exactly as the reference does, so the two agree
// bit for bit on arbitrary fp32 operands (rounded to bf16 Src by the default truncating unpacker).
TEST(MatmulBf16Dst, FastKernelMatchesTheFunctionalModel) {
  std::mt19937 rng(11);
  for (int n : {32, 8, 5}) {
    const std::vector<double> a = Random(n * n, rng, false), b = Random(n * n, rng, false);
    const std::vector<double> c0 = Random(n * n, rng, false);
    for (proto::Fidelity f : {proto::LOFI, proto::HIFI2, proto::HIFI3, proto::HIFI4}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " fidelity " << f);
      MatmulConfig cfg;
      cfg.fidelity = f;
      cfg.acc = Precision::kBf16;
      std::vector<double> want = c0, got = c0;
      ReferenceMatmul(cfg, a, b, false, want, n);
      MatmulTileAtFidelity(cfg, a.data(), n, b.data(), n, false, got.data(), n, n, n, n);
      for (int e = 0; e < n * n; ++e) ASSERT_EQ(got[e], want[e]) << "element " << e;
    }
  }
}

// A MatmulTiles block (ValueModel::MatmulBlock's layout: tiles side by side in one tile row) through the block
// path, which converts every operand tile once, gives the same bits as the per-product calls it replaces, for
// every fidelity, Dst, orientation of B and denormal flushing, on arbitrary operands and a nonzero accumulator.
TEST(MatmulBlock, SameBitsAsOneProductAtATime) {
  std::mt19937 rng(13);
  for (auto [m, n, k, t] : std::vector<std::tuple<int, int, int, int>>{{1, 1, 1, 32}, {2, 3, 4, 32}, {3, 2, 1, 8},
                                                                       {1, 4, 3, 16}, {2, 2, 2, 5}}) {
    const std::vector<double> a = Random(m * k * t * t, rng, false), b = Random(k * n * t * t, rng, false);
    const std::vector<double> c0 = Random(m * n * t * t, rng, false);
    for (Precision acc : {Precision::kFp32, Precision::kBf16}) {
      for (proto::Fidelity f : {proto::LOFI, proto::HIFI2, proto::HIFI3, proto::HIFI4}) {
        for (bool tb : {false, true}) {
          for (bool flush : {true, false}) {
            SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k << " tiles of " << t << ", acc "
                                            << static_cast<int>(acc) << ", fidelity " << f << ", transpose_b " << tb
                                            << ", flush " << flush);
            MatmulConfig cfg;
            cfg.fidelity = f;
            cfg.acc = acc;
            cfg.flush = flush;
            const int64_t lda = static_cast<int64_t>(m) * k * t, ldb = static_cast<int64_t>(k) * n * t,
                          ldc = static_cast<int64_t>(m) * n * t;
            std::vector<double> want = c0, got = c0;
            for (int i = 0; i < m; ++i) {
              for (int j = 0; j < n; ++j) {
                for (int kt = 0; kt < k; ++kt) {
                  const int bt = tb ? j * k + kt : kt * n + j;
                  MatmulTileAtFidelity(cfg, a.data() + (i * k + kt) * t, lda, b.data() + bt * t, ldb, tb,
                                       want.data() + (i * n + j) * t, ldc, t, t, t);
                }
              }
            }
            MatmulBlockAtFidelity(cfg, a.data(), lda, b.data(), ldb, tb, got.data(), ldc, m, n, k, t);
            for (size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], want[e]) << "element " << e;
          }
        }
      }
    }
  }
}

// The register-blocked kernels of 32-column tiles against the 8-wide row kernels on arbitrary operands (inexact
// sums, so any change of order shows): lane j only ever combines column j, so a 32-column tile is four 8-column
// tiles, bit for bit, for every fidelity, orientation of B, row count, and Dst (fp32 flushing or not, bf16 in each
// rounding).
TEST(MatmulBlockedKernel, MatchesTheRowKernel) {
  std::mt19937 rng(17);
  for (int rows : {32, 6, 2}) {
    for (int kk : {32, 19, 1}) {
      const std::vector<double> a = Random(rows * kk, rng, false), b = Random(kk * 32, rng, false);
      const std::vector<double> c0 = Random(rows * 32, rng, false);
      for (proto::Fidelity f : {proto::LOFI, proto::HIFI2, proto::HIFI3, proto::HIFI4}) {
        for (bool tb : {false, true}) {
          for (int variant = 0; variant < 5; ++variant) {
            // fp32 Dst flushing or not; a bf16 Dst flushing, rounding RNE, ties-away or truncating.
            const bool flush = variant != 1;
            const Precision acc = variant < 2 ? Precision::kFp32 : Precision::kBf16;
            const proto::Rounding round = variant == 3 ? proto::TIES_AWAY : variant == 4 ? proto::TRUNCATE : proto::RNE;
            SCOPED_TRACE(testing::Message() << rows << " rows, k " << kk << ", fidelity " << f << ", transpose_b "
                                            << tb << ", variant " << variant);
            MatmulConfig cfg;
            cfg.fidelity = f;
            cfg.flush = flush;
            cfg.acc = acc;
            cfg.dst_round = round;
            const int64_t ldb = tb ? kk : 32;  // B is kk x 32, or 32 x kk transposed
            std::vector<double> want = c0, got = c0;
            MatmulTileAtFidelity(cfg, a.data(), kk, b.data(), ldb, tb, got.data(), 32, rows, 32, kk);
            for (int q = 0; q < 4; ++q) {
              const double* bq = tb ? b.data() + q * 8 * kk : b.data() + q * 8;
              MatmulTileAtFidelity(cfg, a.data(), kk, bq, ldb, tb, want.data() + q * 8, 32, rows, 8, kk);
            }
            for (size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], want[e]) << "element " << e;
          }
        }
      }
    }
  }
}

// Strides: a 2x3 * 3x2 product read out of larger row-major arrays, written into a wider c.
TEST(MatmulFp32Dst, HonoursStrides) {
  MatmulConfig cfg;
  const double a[2][4] = {{1, 2, 3, 99}, {4, 5, 6, 99}};
  const double b[3][3] = {{1, 0, 99}, {0, 1, 99}, {1, 1, 99}};
  double c[2][3] = {{0, 0, -7}, {0, 0, -7}};
  MatmulTileAtFidelity(cfg, &a[0][0], 4, &b[0][0], 3, false, &c[0][0], 3, 2, 2, 3);
  EXPECT_EQ(c[0][0], 4.0);
  EXPECT_EQ(c[0][1], 5.0);
  EXPECT_EQ(c[1][0], 10.0);
  EXPECT_EQ(c[1][1], 11.0);
  EXPECT_EQ(c[0][2], -7.0);  // untouched
}

}  // namespace
}  // namespace spatial::numerics
