// SFPU algorithms (sim/numerics/sfpu.h) at hand-derived points and against the accuracy the facts document
// (reference/hardware-facts.md §1.6, §2).
#include "sim/numerics/sfpu.h"

#include <cmath>
#include <functional>
#include <limits>

#include "gtest/gtest.h"
#include "sim/numerics/float_bits.h"
#include "sim/numerics/formats.h"
#include "tests/numerics/ulp.h"

namespace spatial::numerics {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

using testing::UlpBf16;
using testing::UlpFp32;

// The largest |f(x) - ref(x)| / unit(ref(x)) over x = lo, lo + step, ... <= hi.
double MaxError(double lo, double hi, double step, const std::function<double(float)>& f,
                const std::function<double(double)>& ref, const std::function<double(double)>& unit) {
  double worst = 0;
  for (double x = lo; x <= hi; x += step) {
    const float xf = static_cast<float>(x);
    const double r = ref(xf);
    worst = std::max(worst, std::fabs(f(xf) - r) / unit(r));
  }
  return worst;
}

double Rel(double r) { return std::fabs(r); }

// ── SFPMAD: one rounding ──

// (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly (representable). Rounded once (fused), that is the answer; rounding
// the product first gives 1 + 2^-11 (the 2^-24 is a tie at 1, to even), then 2^-11.
TEST(SfpMad, RoundsOnce) {
  const float a = 1.0f + std::ldexp(1.0f, -12);
  EXPECT_EQ(SfpMad(a, a, -1.0f), std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
  EXPECT_EQ(SfpAdd(SfpMul(a, a), -1.0f), std::ldexp(1.0f, -11));
}

// a = 1 + 2^-23, b = (1 - 2^-23) * 2^-24, c = 1 + 2^-23: a*b + c = 1 + 2^-23 + 2^-24 - 2^-70, just below the tie
// between 1 + 2^-23 and 1 + 2^-22, so RNE gives 1 + 2^-23. A naive double sum first rounds onto the tie (2^-70 is
// below half a double ulp) and then to the even 1 + 2^-22: the round-to-odd step must prevent that.
TEST(SfpMad, NoDoubleRoundingAtATie) {
  const float a = FromBits(0x3F800001u);
  const float b = std::ldexp(FromBits(0x3F7FFFFEu), -24);
  const float c = FromBits(0x3F800001u);
  EXPECT_EQ(Bits(SfpMad(a, b, c)), 0x3F800001u);
}

// Denormal inputs read as 0 and denormal or -0 results become +0 (§1.2).
TEST(SfpMad, FlushesDenormalsAndNegativeZero) {
  const float tiny = std::ldexp(1.0f, -127);
  EXPECT_EQ(SfpMad(tiny, 1.0f, 0.0f), 0.0f);
  EXPECT_EQ(SfpMad(std::ldexp(1.0f, -70), std::ldexp(1.0f, -70), 0.0f), 0.0f);  // 2^-140: underflows
  EXPECT_FALSE(std::signbit(SfpMad(-1.0f, 0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(SfpMul(-1.0f, 0.0f)));
}

// ── exp ──

// Schraudolph at 0: i = 32500.818 rounds (ties away) to 32501 = 0x7EF5; 0x7EF5 << 15 = 0x3F7A8000
// = 1.95703125 * 2^-1 = 0.978515625 (the scheme's built-in -2.1% at 0).
TEST(ExpSchraudolph, AtZero) { EXPECT_EQ(ExpSchraudolph(0.0f), 0.978515625f); }

// i is rounded to *unsigned* int16 (tt-llk's clamping variant): exp(10) is i = 36194 = 141 << 8 | 98, so
// 2^14 * (1 + 98/256) = 22656 (exp(10) = 22026: +2.9%); exp(20) is i = 39887 = 155 << 8 | 207, 463 * 2^20 (not the
// 1.996 an int16 rounding would saturate at). Past 65535 (x >= ~89.4) the bits 0x7FFF8000 are a NaN; below the
// -88.5 clamp i saturates at 0.
TEST(ExpSchraudolph, UnsignedInt16Range) {
  EXPECT_EQ(ExpSchraudolph(10.0f), 22656.0f);
  EXPECT_EQ(ExpSchraudolph(20.0f), std::ldexp(463.0f, 20));
  EXPECT_TRUE(std::isnan(ExpSchraudolph(90.0f)));
  EXPECT_EQ(ExpSchraudolph(-100.0f), 0.0f);
}

// The fast-approx exp is "a ~5% relative-error function" (§1.6: ~4.5% measured against torch). A linear-in-mantissa
// approximation of 2^f cannot do better than ~3.07% and the shipped constant gives ~3.12%, so the fp32 error on the
// safe range (x <= 0, after max-subtraction) lies between 3% and 4.5%.
TEST(ExpSchraudolph, ErrorNearTheDocumentedFewPercent) {
  const double err = MaxError(
      -87.0, 0.0, 1e-3, ExpSchraudolph, [](double x) { return std::exp(x); }, Rel);
  EXPECT_GT(err, 0.030);
  EXPECT_LT(err, 0.045);
}

// exp_21f at 0: z = 127 exactly, the fraction is 0 and the polynomial is its constant 1.0017248; bf16 rounding
// (ulp 2^-7 = 0.0078) gives exactly 1.
TEST(Exp21f, AtZero) {
  EXPECT_EQ(Exp21f(0.0f), 1.0017248f);
  EXPECT_EQ(RoundToBf16(Exp21f(0.0f), proto::TIES_AWAY), 1.0f);
}

// "<= 1 bf16 ULP on [-87, 88.5]" (§2) once rounded to bf16 as the kernel does.
TEST(Exp21f, WithinOneBf16Ulp) {
  const double err = MaxError(
      -87.0, 88.5, 1e-3, [](float x) { return RoundToBf16(Exp21f(x), proto::TIES_AWAY); },
      [](double x) { return std::exp(x); }, UlpBf16);
  EXPECT_LE(err, 1.0);
  EXPECT_TRUE(std::isinf(Exp21f(89.0f)));
  EXPECT_EQ(Exp21f(-100.0f), 0.0f);
}

// Cody-Waite at 0: k = 0, r = 0, the Horner polynomial ends in ... * 0 + 1: exactly 1.
TEST(ExpAccurateFp32, ExactAtZeroAndWithinOneUlp) {
  EXPECT_EQ(ExpAccurateFp32(0.0f), 1.0f);
  EXPECT_LE(std::fabs(ExpAccurateFp32(1.0f) - std::exp(1.0)), UlpFp32(std::exp(1.0)));
  // "<= 1 fp32 ULP" (§2), over the range where the result is a normal fp32.
  const double err = MaxError(
      -87.0, 88.5, 1e-3, ExpAccurateFp32, [](double x) { return std::exp(x); }, UlpFp32);
  EXPECT_LE(err, 1.0);
  EXPECT_TRUE(std::isinf(ExpAccurateFp32(89.0f)));  // x/ln2 >= 128
  EXPECT_EQ(ExpAccurateFp32(-89.0f), 0.0f);         // x/ln2 <= -127
}

// Legacy exp at 1: |x| = 1 has exponent 0, so v = 0.5 and one squaring:
// (1 + 0.5*(0.863281 + 0.8373*0.5))^2 = 1.6409655^2 = 2.692768 (0.94% under e). At 0 the quadratic is exactly 1.
TEST(ExpLegacySquaring, HandValues) {
  const double p = 1.0 + 0.5 * (static_cast<double>(0.863281f) + static_cast<double>(0.8373f) * 0.5);
  EXPECT_NEAR(ExpLegacySquaring(1.0f), p * p, 1e-6);
  EXPECT_EQ(ExpLegacySquaring(0.0f), 1.0f);
  // Negative x: the legacy reciprocal (2 steps from seed 1.442695: error (1 - 0.5*1.442695*m')^4 <= 0.6%).
  EXPECT_NEAR(ExpLegacySquaring(-1.0f), 1.0 / (p * p), 0.006 / (p * p));
}

// ── reciprocal ──

// At x = 1 (m = 1): seed y0 = k2 - k1 + k0 = 2.1212125 - 1.4545460 + 0.3232325 = 0.989899; with e = 1 - y0 each
// Newton step squares the error: y1 = 1 - e^2 = 1 - 1.0203e-4, y2 = 1 - e^4 = 1 - 1.04e-8, which is within half an
// fp32 ulp below 1 (2.98e-8): exactly 1.
TEST(RecipNewton, NewtonStepsSquareTheError) {
  const double y0 = 2.1212125 - 1.4545460 + 0.3232325;
  EXPECT_NEAR(RecipNewton(1.0f, 0), y0, 2e-7);
  const double e = 1.0 - y0;
  EXPECT_NEAR(RecipNewton(1.0f, 1), 1.0 - e * e, 2e-7);
  EXPECT_EQ(RecipNewton(1.0f, 2), 1.0f);
  EXPECT_EQ(RecipNewton(-4.0f, 2), -0.25f);  // m = 1 again; the exponent and sign come back exactly
}

// 0 -> inf, inf -> 0, and 1/x below the smallest normal flushes (the rescale "handles 0 -> inf and inf -> 0").
TEST(RecipNewton, SpecialValues) {
  EXPECT_EQ(RecipNewton(0.0f, 2), kInf);
  EXPECT_EQ(RecipNewton(kInf, 2), 0.0f);
  EXPECT_EQ(RecipNewton(std::ldexp(1.0f, 127), 2), 0.0f);  // 2^-127 is a denormal
  EXPECT_EQ(RecipNewton(std::ldexp(1.0f, -126), 2), std::ldexp(1.0f, 126));
}

// "One iteration for bf16 (<=0.5 ulp), two for fp32 (<=1 ulp)" (§2). The seed's minimax error is ~0.0101 (its
// value at m = 1 above), one step squares it to ~1.03e-4 relative = 0.0264 bf16 ulp at most (a bf16 ulp is at least
// 2^-8 relative): far inside half an ulp before rounding, and within 0.5 + 0.0264 ulp after the ties-away rounding.
TEST(RecipNewton, DocumentedAccuracy) {
  auto rel_ref = [](double x) { return 1.0 / x; };
  EXPECT_LE(MaxError(
                0.01, 100.0, 1e-3, [](float x) { return RecipNewton(x, 1); }, rel_ref, UlpBf16),
            0.0264);
  EXPECT_LE(MaxError(
                0.01, 100.0, 1e-3, [](float x) { return RoundToBf16(RecipNewton(x, 1), proto::TIES_AWAY); }, rel_ref,
                UlpBf16),
            0.5 + 0.0264);
  EXPECT_LE(MaxError(
                0.01, 100.0, 1e-3, [](float x) { return RecipNewton(x, 2); }, rel_ref, UlpFp32),
            1.0);
}

// Blackhole SFPARECIP: a ~7-bit seed (§2: the raw seed is 0.56% off), Newton to <= 1 fp32 ulp, +-inf for 0, 0 for
// |x| >= 2^126, and the fp32 bug: for |x| >= 2^119 the refinement is lost and the raw seed comes back.
TEST(RecipHwApprox, SeedNewtonAndTheFp32Bug) {
  auto ref = [](double x) { return 1.0 / x; };
  EXPECT_LT(MaxError(
                0.01, 100.0, 1e-3, [](float x) { return RecipHwApprox(x, 0, true); }, ref, Rel),
            0.006);
  EXPECT_LE(MaxError(
                0.01, 100.0, 1e-3, [](float x) { return RecipHwApprox(x, 2, true); }, ref, UlpFp32),
            1.0);
  EXPECT_EQ(RecipHwApprox(0.0f, 2, true), kInf);
  EXPECT_EQ(RecipHwApprox(std::ldexp(1.0f, 126), 2, true), 0.0f);
  const float big = 1.3f * std::ldexp(1.0f, 120);
  EXPECT_EQ(RecipHwApprox(big, 2, true), RecipHwApprox(big, 0, true));
  EXPECT_NE(RecipHwApprox(big, 2, false), RecipHwApprox(big, 0, false));
}

// Legacy reciprocal at 1: v = -0.5, y <- y*(2 - y/2) from 1.442695; with e = 1 - y/2, e0 = 0.2786525 and each step
// squares it: e3 = e0^8 = 3.635e-5, y3 = 2*(1 - e3) (exponent field 127); the fix-up 127 - 127 + 126 halves it:
// 1 - e3. No special case for 0: 1/0 comes out near 2^127.
TEST(RecipLegacy, HandValues) {
  const double e0 = 1.0 - 0.5 * 1.442695;
  EXPECT_NEAR(RecipLegacy(1.0f, 3), 1.0 - std::pow(e0, 8), 1e-6);
  EXPECT_NEAR(RecipLegacy(4.0f, 3), 0.25 * (1.0 - std::pow(e0, 8)), 1e-6);
  EXPECT_NEAR(RecipLegacy(-4.0f, 3), -0.25 * (1.0 - std::pow(e0, 8)), 1e-6);
  EXPECT_GT(RecipLegacy(0.0f, 3), 1e38f);
  EXPECT_TRUE(std::isfinite(RecipLegacy(0.0f, 3)));
}

// ── rsqrt ──

TEST(RsqrtMagicPoly, AccurateWithinOneUlp) {
  auto ref = [](double x) { return 1.0 / std::sqrt(x); };
  EXPECT_LE(MaxError(
                1e-3, 1e4, 0.37, [](float x) { return RsqrtMagicPoly(x, false, 1); }, ref, UlpFp32),
            1.0);
  EXPECT_LE(std::fabs(RsqrtMagicPoly(4.0f, false, 1) - 0.5), UlpFp32(0.5));
  EXPECT_EQ(RsqrtMagicPoly(0.0f, false, 1), kInf);
  EXPECT_EQ(RsqrtMagicPoly(kInf, false, 1), 0.0f);
  EXPECT_TRUE(std::isnan(RsqrtMagicPoly(-1.0f, false, 1)));
}

// SQRT_10 is good to ~10 bits: relative error below 2^-10.
TEST(RsqrtMagicPoly, ApproxTenBits) {
  auto ref = [](double x) { return 1.0 / std::sqrt(x); };
  const double err = MaxError(
      1e-3, 1e4, 0.37, [](float x) { return RsqrtMagicPoly(x, true, 0); }, ref, Rel);
  EXPECT_LT(err, std::ldexp(1.0, -10));
  EXPECT_GT(err, std::ldexp(1.0, -12));  // and it is an approximation: not the accurate path
}

// Legacy compat: 2 Newton steps from 0x5f37<<16, times x, then the legacy reciprocal (3 steps, 3.6e-5): ~0.2%.
TEST(RsqrtCompat, NearTheTrueValue) {
  EXPECT_NEAR(RsqrtCompat(4.0f, 2, 3), 0.5, 0.5 * 2e-3);
  EXPECT_NEAR(RsqrtCompat(0.25f, 2, 3), 2.0, 2.0 * 2e-3);
}

// ── ln (documented fp32 implementation) ──

TEST(LnFp32, ValuesAndSpecials) {
  EXPECT_EQ(LnFp32(1.0f), 0.0f);
  EXPECT_LE(std::fabs(LnFp32(2.0f) - std::log(2.0)), UlpFp32(std::log(2.0)));
  EXPECT_EQ(LnFp32(0.0f), -kInf);
  EXPECT_TRUE(std::isnan(LnFp32(-1.0f)));
  EXPECT_EQ(LnFp32(kInf), kInf);
  double worst = 0;
  for (double x = 1e-30; x < 1e30; x *= 1.01) {
    const float xf = static_cast<float>(x);
    const double r = std::log(static_cast<double>(xf));
    if (r != 0) worst = std::max(worst, std::fabs(LnFp32(xf) - r) / UlpFp32(r));
  }
  EXPECT_LE(worst, 1.0);
}

// ── LUT functions ──

// tt-metal's approx sigmoid (a 3-segment SFPLUT): 0.2265625 * 0.5 + 0.5; 0.265625 * 1.5 - 0.046875 + 0.5, mirrored
// for -1.5; saturated to exactly 1 and 0 from |x| = 2; 0.5 at 0.
TEST(SigmoidApprox, HandValues) {
  EXPECT_EQ(SigmoidApprox(0.5f), 0.61328125f);
  EXPECT_EQ(SigmoidApprox(1.5f), 0.8515625f);
  EXPECT_EQ(SigmoidApprox(-1.5f), 0.1484375f);
  EXPECT_EQ(SigmoidApprox(2.0f), 1.0f);
  EXPECT_EQ(SigmoidApprox(-7.0f), 0.0f);
  EXPECT_EQ(SigmoidApprox(0.0f), 0.5f);
}

// The approx gelu's table: gelu(0) is the first intercept, -1.0443e-4 (tt-metal issue #52407 reports exactly
// that); at 1 the segment [1, 1.5): 0.5 + 0.61865234375 - 0.279541015625; x from 3 up, 0 from -3 down.
TEST(GeluApprox, HandValues) {
  EXPECT_EQ(GeluApprox(0.0f), -0.00010442733764648438f);
  EXPECT_EQ(GeluApprox(1.0f), 0.839111328125f);
  EXPECT_EQ(GeluApprox(3.0f), 3.0f);
  EXPECT_EQ(GeluApprox(-3.0f), 0.0f);
}

// The accurate gelus: 0 at and below -5.5426, Phi(1) = 0.8413447460685429 (the bf16 kernel's polynomial is fitted
// for bf16: within 2e-5, a two-hundredth of a bf16 ulp there; the fp32 one to fp32 accuracy), and the far lower
// tail (x Phi(x) at -4 is -1.2668e-4) from the exp branch; the bf16 kernel returns x from 2.78125 up.
TEST(GeluAccurate, HandValues) {
  for (auto* gelu : {&GeluPiecewise, &GeluErf}) {
    EXPECT_EQ(gelu(-6.0f), 0.0f);
    EXPECT_EQ(gelu(0.0f), 0.0f);
    EXPECT_NEAR(gelu(-4.0f), -4.0 * 0.5 * std::erfc(4.0 / std::sqrt(2.0)), 1e-6);
  }
  EXPECT_NEAR(GeluPiecewise(1.0f), 0.8413447460685429, 2e-5);
  EXPECT_NEAR(GeluErf(1.0f), 0.8413447460685429, 1e-6);
  EXPECT_EQ(GeluPiecewise(3.0f), 3.0f);
}

TEST(TanhLut, HandValues) {
  EXPECT_EQ(TanhLut(0.5f), 0.453125f);                  // 0.90625 * 0.5
  EXPECT_EQ(TanhLut(1.5f), 0.09375f * 1.5f + 0.8125f);  // 0.953125
  EXPECT_EQ(TanhLut(-1.5f), -0.953125f);
  EXPECT_EQ(TanhLut(3.0f), 1.0f);
}

// Polynomial silu: 0.5 * (0.229*0.5 + 0.5) = 0.5 * 0.6145; mirrored: -0.5 * (1 - 0.6145); 1 beyond 5.
TEST(SiluPoly, HandValues) {
  const float s = SfpMad(0.229f, 0.5f, 0.5f);
  EXPECT_EQ(SiluPoly(0.5f), 0.5f * s);
  EXPECT_EQ(SiluPoly(-0.5f), -0.5f * (1.0f - s));
  EXPECT_EQ(SiluPoly(10.0f), 10.0f);
  EXPECT_EQ(SiluPoly(-10.0f), 0.0f);
  EXPECT_NEAR(SiluPoly(2.0f), 2.0 / (1.0 + std::exp(-2.0)), 0.01);
}

TEST(Fp32StandIns, Tanh) { EXPECT_EQ(TanhFp32(0.5f), static_cast<float>(std::tanh(0.5))); }

// ── EvalSfpu: algorithm choice and the destination rounding ──

SfpuConfig Config(Precision dest, proto::ExpAlgorithm exp) {
  proto::Numerics n;
  n.set_exp(exp);
  n.set_sfpu_store(proto::TRUNCATE);
  return ResolveSfpuConfig(n, dest, false);
}

// The Schraudolph result 0x3F7A8000 goes to a bf16 Dst through SFPSTORE, which truncates: 0x3F7A = 0.9765625
// (a ties-away rounding would have given 0x3F7B).
TEST(EvalSfpu, UnroundedKernelsAreTruncatedIntoBf16) {
  EXPECT_EQ(EvalSfpu(Config(Precision::kBf16, proto::EXP_SCHRAUDOLPH_FAST), SfpuKind::Exp(), 0.0f), 0.9765625f);
  EXPECT_EQ(EvalSfpu(Config(Precision::kFp32, proto::EXP_SCHRAUDOLPH_FAST), SfpuKind::Exp(), 0.0f), 0.978515625f);
}

// exp_21f rounds explicitly: exp(1) = 2.71828 -> bf16 ties-away 2.71875 (174 * 2^-6); in an fp32 Dst the target's
// EXP_21F is the fp32-accurate exp instead.
TEST(EvalSfpu, Exp21fRoundsToBf16) {
  EXPECT_EQ(EvalSfpu(Config(Precision::kBf16, proto::EXP_21F), SfpuKind::Exp(), 1.0f), 2.71875f);
  EXPECT_EQ(EvalSfpu(Config(Precision::kBf16, proto::EXP_21F), SfpuKind::Exp(), 0.0f), 1.0f);
  const SfpuConfig fp32 = Config(Precision::kFp32, proto::EXP_21F);
  EXPECT_EQ(fp32.exp, proto::EXP_ACCURATE_FP32);
  EXPECT_EQ(EvalSfpu(fp32, SfpuKind::Exp(), 0.0f), 1.0f);
}

// ExpFast is the fast exp whatever the target names or its mode (SDPA's probabilities, AttentionSpec.probs_exp):
// Schraudolph's e^0 = 0.978515625 under an accurate EXP_21F configuration, truncated into a bf16 Dst; the target's
// own Exp under that configuration stays exp_21f.
TEST(EvalSfpu, ExpFastIsSchraudolphInAnyMode) {
  for (proto::ExpAlgorithm a : {proto::EXP_21F, proto::EXP_ACCURATE_FP32, proto::EXP_SCHRAUDOLPH_FAST}) {
    EXPECT_EQ(EvalSfpu(Config(Precision::kFp32, a), SfpuKind::ExpFast(), 0.0f), 0.978515625f);
    EXPECT_EQ(EvalSfpu(Config(Precision::kBf16, a), SfpuKind::ExpFast(), 0.0f), 0.9765625f);
    EXPECT_EQ(EvalSfpu(Config(Precision::kFp32, a), SfpuKind::ExpFast(), -3.0f), ExpSchraudolph(-3.0f));
  }
  EXPECT_EQ(EvalSfpu(Config(Precision::kBf16, proto::EXP_21F), SfpuKind::Exp(), 0.0f), 1.0f);
}

// Rsqrt{eps, over}: 256/128 + 0 = 2 -> 1/sqrt(2); 0/128 + 1 (eps 1e9 nano) = 1 -> 1.
TEST(EvalSfpu, RsqrtScaleAndEpsilon) {
  const SfpuConfig c = Config(Precision::kFp32, proto::EXP_ACCURATE_FP32);
  EXPECT_LE(std::fabs(EvalSfpu(c, SfpuKind::Rsqrt(0, 128), 256.0f) - std::sqrt(0.5)), UlpFp32(std::sqrt(0.5)));
  EXPECT_EQ(EvalSfpu(c, SfpuKind::Rsqrt(1000000000, 128), 0.0f), 1.0f);
}

// Sigmoid-based silu (fp32 Dst): silu(0) = 0 * recip(1 + 1) = 0; silu(1) = 1/(1 + e^-1) to a few ulp.
TEST(EvalSfpu, SiluBySigmoid) {
  const SfpuConfig c = Config(Precision::kFp32, proto::EXP_ACCURATE_FP32);
  EXPECT_EQ(SigmoidAccurate(c, 0.0f), 0.5f);
  EXPECT_EQ(EvalSfpu(c, SfpuKind::Silu(), 0.0f), 0.0f);
  const double want = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_LE(std::fabs(EvalSfpu(c, SfpuKind::Silu(), 1.0f) - want), 3 * UlpFp32(want));
}

}  // namespace
}  // namespace spatial::numerics
