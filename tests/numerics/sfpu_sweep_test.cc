// Every SFPU transform over all 65,536 bf16 inputs, in every variant a target can choose (destination bf16 or fp32,
// math_approx_mode on or off), against the f64 function: the error each variant may have where the facts document
// one (reference/hardware-facts.md §2; tt-llk's per-op ULP budgets are kept the same way, PR #57235), the special
// values, and that a 16-bit destination gets a bf16 value. A test fails when an algorithm drifts from the accuracy
// its kernel documents, on any input, not just on sampled points.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "proto/target.pb.h"
#include "sim/numerics/float_bits.h"
#include "sim/numerics/formats.h"
#include "sim/numerics/sfpu.h"
#include "tests/numerics/ulp.h"

namespace spatial::numerics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using testing::UlpBf16;

struct Sweep {
  int64_t inputs = 0;       // finite inputs inside the domain
  double worst = 0;         // largest error, in the unit asked for
  float worst_at = 0;
  int64_t exact = 0;        // results equal to the reference rounded to bf16
  int64_t not_bf16 = 0;     // results with any of the low 16 bits set
};

// Runs f over every bf16 bit pattern whose value lies in [lo, hi]; the error of each result against ref, in bf16 ulps
// of the reference (relative: |f - ref| / |ref|).
Sweep SweepAll(const std::function<float(float)>& f, const std::function<double(double)>& ref, double lo, double hi,
          bool relative) {
  Sweep s;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = FromBits(b << 16);
    if (!std::isfinite(x) || x < lo || x > hi) continue;
    const float y = f(x);
    const double r = ref(static_cast<double>(x));
    ++s.inputs;
    if ((Bits(y) & 0xffffu) != 0) ++s.not_bf16;
    if (static_cast<double>(RoundToBf16(static_cast<float>(r), proto::RNE)) == static_cast<double>(y)) ++s.exact;
    double err;
    if (std::fabs(r) < 0x1p-126 * (1.0 + 0x1p-7) && y == 0.0f) {
      // Below fp32's smallest normal (or within a bf16 ulp of it, where the fp32 steps may land under it) the
      // result is flushed to +0 (§1.2), as every SFPU store does.
      err = 0.0;
    } else if (!std::isfinite(r)) {
      err = (static_cast<double>(y) == r) ? 0.0 : kInf;
    } else if (relative) {
      err = r == 0.0 ? std::fabs(y) : std::fabs(y - r) / std::fabs(r);
    } else {
      err = r == 0.0 ? (y == 0.0f ? 0.0 : kInf) : std::fabs(y - r) / UlpBf16(r);
    }
    if (err > s.worst || std::isnan(err)) {
      s.worst = std::isnan(err) ? kInf : err;
      s.worst_at = x;
    }
  }
  return s;
}

SfpuConfig Config(Precision dest, bool approx, proto::Numerics n = {}) { return ResolveSfpuConfig(n, dest, approx); }

proto::Numerics Wormhole() {
  proto::Numerics n;
  n.set_exp(proto::EXP_21F);
  n.set_recip(proto::RECIP_NEWTON);
  n.set_recip_newton_iters(1);
  n.set_rsqrt(proto::RSQRT_MAGIC_POLY);
  return n;
}

float Eval(const SfpuConfig& c, SfpuKind k, float x) { return EvalSfpu(c, k, x); }

void Report(const char* what, const Sweep& s) {
  std::printf("%-44s %6lld inputs, worst %.4g at %g, %5.1f%% equal to the rounded reference\n", what,
              static_cast<long long>(s.inputs), s.worst, static_cast<double>(s.worst_at),
              100.0 * static_cast<double>(s.exact) / static_cast<double>(std::max<int64_t>(s.inputs, 1)));
}

// ── exp ──

// exp_21f (Moroz et al.), bf16 destination: <= 1 bf16 ulp on [-87, 88.5] (§2 "Accurate bf16").
TEST(SfpuSweep, Exp21fWithinOneBf16UlpOnItsRange) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  ASSERT_EQ(c.exp, proto::EXP_21F);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Exp(), x); }, [](double x) { return std::exp(x); },
                      -87.0, 88.5, false);
  Report("exp exp_21f, bf16 Dst", s);
  EXPECT_GT(s.inputs, 30000);
  EXPECT_LE(s.worst, 1.0) << "at " << s.worst_at;
  EXPECT_EQ(s.not_bf16, 0);
}

// The fp32-accurate exp (Cody-Waite + degree-7 Taylor), fp32 destination: <= 1 fp32 ulp is 2^-16 bf16 ulp; checked
// at a 2^-15 bf16 ulp budget, far below what any bf16 variant reaches.
TEST(SfpuSweep, ExpAccurateFp32IsFp32Accurate) {
  const SfpuConfig c = Config(Precision::kFp32, false, Wormhole());
  ASSERT_EQ(c.exp, proto::EXP_ACCURATE_FP32);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Exp(), x); }, [](double x) { return std::exp(x); },
                      -87.0, 88.5, false);
  Report("exp accurate fp32, fp32 Dst", s);
  EXPECT_LE(s.worst, std::ldexp(1.0, -15)) << "at " << s.worst_at;
}

// Schraudolph (approx mode, the exp a target leaves to the mode): "~3-4.5% error on [-88.5, 88]" before the
// destination's truncation, which adds at most one bf16 ulp (0.8%).
TEST(SfpuSweep, SchraudolphWithinItsDocumentedError) {
  const SfpuConfig c = Config(Precision::kBf16, true);
  ASSERT_EQ(c.exp, proto::EXP_SCHRAUDOLPH_FAST);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Exp(), x); }, [](double x) { return std::exp(x); },
                      -87.0, 88.0, true);
  Report("exp Schraudolph, bf16 Dst (relative)", s);
  EXPECT_LE(s.worst, 0.045 + 0.0079) << "at " << s.worst_at;
  EXPECT_GE(s.worst, 0.02);  // it is an approximation: a sweep that found no error would be testing something else
}

// The rescale's exp stays accurate in approx mode (ExpAccurate): e^0 is exactly 1 in both destinations.
TEST(SfpuSweep, ExpAccurateIgnoresApproxMode) {
  for (Precision dest : {Precision::kBf16, Precision::kFp32}) {
    const SfpuConfig c = Config(dest, true, Wormhole());
    EXPECT_EQ(Eval(c, SfpuKind::ExpAccurate(), 0.0f), 1.0f);
    const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::ExpAccurate(), x); },
                        [](double x) { return std::exp(x); }, -87.0, 0.0, false);
    EXPECT_LE(s.worst, 1.0) << PrecisionName(dest) << " at " << s.worst_at;
  }
}

// ── reciprocal ──

// WH reciprocal, bf16 destination: one Newton step, "<= 0.5 ulp" before the explicit rounding, so <= 1 bf16 ulp
// after it, over every normal input whose reciprocal is normal.
TEST(SfpuSweep, RecipNewtonOneStepWithinOneBf16Ulp) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  ASSERT_EQ(c.recip_iters, 1);
  for (double sign : {1.0, -1.0}) {
    const double lo = sign > 0 ? 1e-37 : -1e37, hi = sign > 0 ? 1e37 : -1e-37;
    const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Recip(), x); }, [](double x) { return 1.0 / x; },
                        lo, hi, false);
    Report(sign > 0 ? "recip Newton x1, bf16 Dst (x > 0)" : "recip Newton x1, bf16 Dst (x < 0)", s);
    EXPECT_LE(s.worst, 1.0) << "at " << s.worst_at;
    EXPECT_EQ(s.not_bf16, 0);
  }
}

// fp32 destination: two steps, <= 1 fp32 ulp (2^-16 bf16 ulp; checked at 2^-15).
TEST(SfpuSweep, RecipNewtonTwoStepsIsFp32Accurate) {
  const SfpuConfig c = Config(Precision::kFp32, false, Wormhole());
  ASSERT_EQ(c.recip_iters, 2);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Recip(), x); }, [](double x) { return 1.0 / x; },
                      1e-37, 1e37, false);
  Report("recip Newton x2, fp32 Dst", s);
  EXPECT_LE(s.worst, std::ldexp(1.0, -15)) << "at " << s.worst_at;
}

// Approx mode runs tt-llk's _sfpu_reciprocal_<0>, which is one Newton step whatever the destination, and writes it
// unrounded: into an fp32 Dst it is the one-step value, not the two-step one.
TEST(SfpuSweep, RecipApproxIsOneStepUnrounded) {
  const SfpuConfig fp32 = Config(Precision::kFp32, true, Wormhole());
  EXPECT_EQ(fp32.recip_iters, 1);
  for (uint32_t b = 0x3f800000u; b < 0x40000000u; b += 0x1000u) {  // [1, 2) in steps of 2^-11
    const float x = FromBits(b);
    ASSERT_EQ(Eval(fp32, SfpuKind::Recip(), x), RecipNewton(x, 1)) << x;
  }
  // Into a bf16 Dst the one-step value is truncated by SFPSTORE, not rounded: never above the fp32 value.
  const SfpuConfig bf16 = Config(Precision::kBf16, true, Wormhole());
  for (uint32_t b = 0x3f800000u; b < 0x40000000u; b += 0x1000u) {
    const float x = FromBits(b);
    ASSERT_EQ(Eval(bf16, SfpuKind::Recip(), x), RoundToBf16(RecipNewton(x, 1), proto::TRUNCATE)) << x;
  }
}

// Special values, every destination and mode: 1/0 = inf, 1/inf = 0, the sign kept.
TEST(SfpuSweep, RecipSpecialValues) {
  for (Precision dest : {Precision::kBf16, Precision::kFp32}) {
    for (bool approx : {false, true}) {
      const SfpuConfig c = Config(dest, approx, Wormhole());
      EXPECT_EQ(Eval(c, SfpuKind::Recip(), 0.0f), std::numeric_limits<float>::infinity());
      EXPECT_EQ(Eval(c, SfpuKind::Recip(), std::numeric_limits<float>::infinity()), 0.0f);
      EXPECT_LT(Eval(c, SfpuKind::Recip(), -2.0f), 0.0f);
    }
  }
}

// ── rsqrt ──

// SQRT_23 with one correction, bf16 destination, explicitly rounded: <= 1 bf16 ulp for every positive normal.
TEST(SfpuSweep, RsqrtWithinOneBf16Ulp) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Rsqrt(0, 1), x); },
                      [](double x) { return 1.0 / std::sqrt(x); }, 1e-37, 1e37, false);
  Report("rsqrt SQRT_23, bf16 Dst", s);
  EXPECT_LE(s.worst, 1.0) << "at " << s.worst_at;
  EXPECT_EQ(s.not_bf16, 0);
}

// SQRT_10 (approx mode) is a 10-bit method: within 2^-9 relative, before the destination's truncation.
TEST(SfpuSweep, RsqrtApproxIsTenBits) {
  const SfpuConfig c = Config(Precision::kFp32, true, Wormhole());
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Rsqrt(0, 1), x); },
                      [](double x) { return 1.0 / std::sqrt(x); }, 1e-37, 1e37, true);
  Report("rsqrt SQRT_10, fp32 Dst (relative)", s);
  EXPECT_LE(s.worst, std::ldexp(1.0, -9)) << "at " << s.worst_at;
}

TEST(SfpuSweep, RsqrtSpecialValues) {
  const SfpuConfig c = Config(Precision::kFp32, false, Wormhole());
  EXPECT_EQ(Eval(c, SfpuKind::Rsqrt(0, 1), 0.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Eval(c, SfpuKind::Rsqrt(0, 1), std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(Eval(c, SfpuKind::Rsqrt(0, 1), -1.0f)));
}

// ── ln ──

// fdlibm's logf in fp32 (the stand-in for a kernel the facts do not describe), bf16 destination rounded: <= 1 bf16
// ulp for every positive normal but 1 (where ln is 0 and any error is infinite ulps: ln(1) must be exactly 0).
TEST(SfpuSweep, LnWithinOneBf16Ulp) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  EXPECT_EQ(Eval(c, SfpuKind::Ln(), 1.0f), 0.0f);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Ln(), x); }, [](double x) { return std::log(x); },
                      1e-37, 1e37, false);
  Report("ln, bf16 Dst", s);
  EXPECT_LE(s.worst, 1.0) << "at " << s.worst_at;
  EXPECT_EQ(Eval(c, SfpuKind::Ln(), 0.0f), -std::numeric_limits<float>::infinity());
  // ln of a negative is a NaN in fp32; a 16-bit Dst has no NaN and holds the saturated pattern, +inf (§2 rsqrt).
  EXPECT_TRUE(std::isnan(Eval(Config(Precision::kFp32, false, Wormhole()), SfpuKind::Ln(), -1.0f)));
  EXPECT_EQ(Eval(c, SfpuKind::Ln(), -1.0f), std::numeric_limits<float>::infinity());
}

// ── silu ──

// Sigmoid-based silu (tt-metal: x * sigmoid(x), rounded to bf16), bf16 destination: the exp_21f, the one-step
// reciprocal and the product each add an error below a bf16 ulp; checked at 2 bf16 ulps on [-80, 80] (past that the
// tail is x * e^x, below bf16's smallest normal, or x itself).
TEST(SfpuSweep, SiluSigmoidWithinTwoBf16Ulps) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  ASSERT_EQ(c.silu, proto::SILU_SIGMOID);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Silu(), x); },
                      [](double x) { return x / (1.0 + std::exp(-x)); }, -80.0, 80.0, false);
  Report("silu sigmoid-based, bf16 Dst", s);
  EXPECT_LE(s.worst, 2.0) << "at " << s.worst_at;
  EXPECT_EQ(s.not_bf16, 0);
  EXPECT_GT(static_cast<double>(s.exact) / static_cast<double>(s.inputs), 0.9);
}

// The variant follows the Dst: a bf16 silu (tt-metal's default for bf16 data) runs exp_21f and one Newton step and
// rounds once, which is not the fp32 path packed to bf16. On [-8, 8] the two differ on a few percent of the inputs.
TEST(SfpuSweep, SiluVariantFollowsTheDst) {
  const SfpuConfig bf16 = Config(Precision::kBf16, false, Wormhole());
  const SfpuConfig fp32 = Config(Precision::kFp32, false, Wormhole());
  int64_t inputs = 0, differ = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = FromBits(b << 16);
    if (!std::isfinite(x) || std::fabs(x) > 8.0f) continue;
    ++inputs;
    differ += Eval(bf16, SfpuKind::Silu(), x) != RoundToBf16(Eval(fp32, SfpuKind::Silu(), x), proto::TIES_AWAY);
  }
  std::printf("silu on [-8, 8]: %lld of %lld bf16 inputs differ between the bf16-Dst and fp32-Dst paths\n",
              static_cast<long long>(differ), static_cast<long long>(inputs));
  EXPECT_GT(differ, 0);
  EXPECT_LT(differ, inputs / 10);
}

// The older LLK polynomial silu (approx mode): a piecewise fit of sigmoid with ~1e-2 absolute error in the sigmoid,
// so within 2.5% relative of silu for |x| >= 0.25 and exactly x beyond 5 (sigmoid saturated at 1).
TEST(SfpuSweep, SiluPolyWithinItsFit) {
  const SfpuConfig c = Config(Precision::kFp32, true, Wormhole());
  ASSERT_EQ(c.silu, proto::SILU_POLY);
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Silu(), x); },
                      [](double x) { return x / (1.0 + std::exp(-x)); }, 0.25, 5.0, true);
  Report("silu polynomial, fp32 Dst (relative)", s);
  EXPECT_LE(s.worst, 0.025) << "at " << s.worst_at;
  EXPECT_EQ(Eval(c, SfpuKind::Silu(), 7.0f), 7.0f);
}

// ── sigmoid and gelu (tt-metal's sigmoid_tile and gelu_tile) ──

// The largest |f(x) - ref(x)| over every finite bf16 x in [lo, hi].
double WorstAbs(const std::function<float(float)>& f, const std::function<double(double)>& ref, double lo = -kInf,
                double hi = kInf) {
  double worst = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = FromBits(b << 16);
    if (!std::isfinite(x) || x < lo || x > hi) continue;
    worst = std::max(worst, std::fabs(f(x) - ref(x)));
  }
  return worst;
}

double SigmoidRef(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }
double GeluRef(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

// Accurate sigmoid into a bf16 Dst (exp_21f, one Newton step, rounded ties-away): within 2 bf16 ulps wherever the
// value is a normal number (x >= -87).
TEST(SfpuSweep, SigmoidAccurateWithinTwoBf16Ulps) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Sigmoid(), x); }, SigmoidRef, -87.0, 1e30, false);
  Report("sigmoid accurate, bf16 Dst", s);
  EXPECT_GT(s.inputs, 30000);
  EXPECT_LE(s.worst, 2.0) << "at " << s.worst_at;
  EXPECT_EQ(s.not_bf16, 0);
  EXPECT_GT(static_cast<double>(s.exact) / static_cast<double>(s.inputs), 0.9);
}

// The 3-segment LUT sigmoid: tt-metal issue #53258 measures its peak absolute error at about 0.12, near |x| = 2
// (sigmoid(2) = 0.881 against the table's 1). Checked as an absolute bound over every input.
TEST(SfpuSweep, SigmoidApproxWithinItsTable) {
  const SfpuConfig c = Config(Precision::kBf16, true, Wormhole());
  const double worst = WorstAbs([&](float x) { return Eval(c, SfpuKind::Sigmoid(), x); }, SigmoidRef);
  std::printf("sigmoid approx (LUT), bf16 Dst: worst absolute error %.4f\n", worst);
  EXPECT_LE(worst, 0.125);
  EXPECT_GT(worst, 0.1);  // the table's own error at 2, not a better function
}

// Accurate gelu into a bf16 Dst (the piecewise kernel, rounded ties-away): within 2 bf16 ulps of x Phi(x) from -4
// up (tt-metal PR #39101 fits it for bf16 ulp accuracy). Below -4 the kernel snaps Phi's tail to a multiple of
// 2^-25 before the product, so there it is checked absolutely: |x| 2^-26 (at most 5.54 * 2^-26) from the snap plus
// half a bf16 ulp of values under 1.3e-4, under 2^-21 in all.
TEST(SfpuSweep, GeluPiecewiseWithinTwoBf16Ulps) {
  const SfpuConfig c = Config(Precision::kBf16, false, Wormhole());
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Gelu(), x); }, GeluRef, -4.0, 1e30, false);
  Report("gelu accurate (piecewise), bf16 Dst", s);
  EXPECT_GT(s.inputs, 30000);
  EXPECT_LE(s.worst, 2.0) << "at " << s.worst_at;
  EXPECT_EQ(s.not_bf16, 0);
  EXPECT_GT(static_cast<double>(s.exact) / static_cast<double>(s.inputs), 0.99);
  const double tail = WorstAbs([&](float x) { return Eval(c, SfpuKind::Gelu(), x); }, GeluRef, -kInf, -4.0);
  EXPECT_LE(tail, 0x1p-21);
}

// Accurate gelu into an fp32 Dst (the rational erf): within 2 bf16 ulps of x Phi(x) for bf16 inputs, and close to
// fp32 accuracy where the value is large (relative 1e-6 on [0.5, 8]).
TEST(SfpuSweep, GeluErfIsFp32Accurate) {
  const SfpuConfig c = Config(Precision::kFp32, false, Wormhole());
  const Sweep s = SweepAll([&](float x) { return Eval(c, SfpuKind::Gelu(), x); }, GeluRef, 0.5, 8.0, true);
  Report("gelu accurate (rational erf), fp32 Dst (relative)", s);
  EXPECT_LE(s.worst, 1e-6) << "at " << s.worst_at;
  const Sweep wide = SweepAll([&](float x) { return Eval(c, SfpuKind::Gelu(), x); }, GeluRef, -4.0, 1e30, false);
  EXPECT_LE(wide.worst, 2.0) << "at " << wide.worst_at;
}

// The LUT gelu: an absolute error within 0.025 of x Phi(x) everywhere (6 linear pieces of the even part; the
// worst, 0.0234, is inside a piece, not at 0, where the intercept is -1.0443e-4).
TEST(SfpuSweep, GeluApproxWithinItsTable) {
  const SfpuConfig c = Config(Precision::kFp32, true, Wormhole());
  const double worst = WorstAbs([&](float x) { return Eval(c, SfpuKind::Gelu(), x); }, GeluRef);
  std::printf("gelu approx (LUT), fp32 Dst: worst absolute error %.4f\n", worst);
  EXPECT_LE(worst, 0.025);
}

// ── every transform, every variant: no input crashes, and every result but a NaN that a 16-bit destination
// receives is a bf16 value (its low 16 bits clear).
TEST(SfpuSweep, EveryVariantGivesBf16ValuesIntoABf16Dst) {
  const SfpuKind kinds[] = {SfpuKind::Exp(), SfpuKind::ExpAccurate(), SfpuKind::Recip(), SfpuKind::Rsqrt(1000, 64),
                            SfpuKind::Ln(), SfpuKind::Silu(), SfpuKind::Sigmoid(), SfpuKind::Gelu()};
  int64_t evaluated = 0;
  for (bool approx : {false, true}) {
    const SfpuConfig c = Config(Precision::kBf16, approx, Wormhole());
    for (const SfpuKind& k : kinds) {
      for (uint32_t b = 0; b < 65536; ++b) {
        const float x = FromBits(b << 16);
        const float y = Eval(c, k, x);
        ++evaluated;
        if (std::isnan(y)) continue;
        ASSERT_EQ(Bits(y) & 0xffffu, 0u) << SfpuName(k) << (approx ? " approx" : "") << " of " << x;
      }
    }
  }
  EXPECT_EQ(evaluated, 2 * 8 * 65536);
}

}  // namespace
}  // namespace spatial::numerics
