// The vector engine's (SFPU's) transcendental functions as the hardware computes them: fp32 LRegs, one RNE rounding
// per SFPMAD, denormals flushed (reference/hardware-facts.md §1.2 and §2). Each algorithm below names the facts
// line it follows; where §2 does not describe a function, the fp32 implementation used instead says so.
//
// Every algorithm takes and returns fp32 with no final narrowing; EvalSfpu adds the step the kernel ends with
// when the destination register (Dst) is 16-bit: the explicit SFPSTOCHRND rounding (ties away) for kernels that
// round, or SFPSTORE's truncation for those that do not (§2: "bf16 result means explicit rounding
// (SFPSTOCHRND, ties-away) before SFPSTORE, because SFPSTORE itself truncates").
#ifndef SIM_NUMERICS_SFPU_H_
#define SIM_NUMERICS_SFPU_H_

#include "proto/target.pb.h"
#include "spatial/body.h"
#include "spatial/precision.h"

namespace spatial::numerics {

// ── SFPU primitives ──
// SFPMAD: VA*VB + VC with "one rounding, RNE" (§1.2, SFPMAD.md), denormal inputs read as 0 and denormal / -0
// outputs flushed to +0. The hardware keeps the product "wider than FP32 but not infinitely wide"; this models
// it as exactly fused (ttsim's fma_model_* refine the last bit, see §1.2).
float SfpMad(float a, float b, float c);
// SFPMUL and SFPADD are SFPMAD with VC = 0 and VB = 1: one RNE rounding each.
float SfpMul(float a, float b);
float SfpAdd(float a, float b);

// ── exp (§2 "exp") ──
// Fast-approximate (Schraudolph 1999), the clamping variant of tt-llk's FAST_APPROX path: x is first clamped to
// >= -88.5; i = A*x + (B-C) in one SFPMAD, A = 256/ln2, B-C = 32500.818; rounded to unsigned int16 (SFP_STOCH_RND,
// ties away, saturating at 0 and 65535); shifted left 15 into the exponent/mantissa field. ~3-4.5% error on
// [-88.5, 88]; exp(20) is 4.85e8 (an int16 rounding would saturate it near 2); from x ~ 89.4 the bits are a NaN.
float ExpSchraudolph(float x);
// Accurate bf16 (exp_21f, Moroz et al. 2022): z = x/ln2 + 127 clamped to [0, 255], scaled by 2^23 to an integer
// whose exponent field is 2^floor and whose mantissa bits are the fraction f; 2^f refined by
// 1.0017248 + f*(7.8396e-8 + f*4.7918e-15) on the integer scale; setexp. Inputs that clamp at 255 (x >= ~88.7)
// give +Inf. The kernel's final bf16 rounding is EvalSfpu's. <= 1 bf16 ulp on [-87, 88.5] after rounding.
float Exp21f(float x);
// Accurate fp32: k = round(x/ln2) by the 1.5*2^23 magic add (RNE); Cody-Waite r = x - k*ln2_hi - k*ln2_lo
// (ln2_hi = 0.693115234375, ln2_lo = 3.19461833e-5); degree-7 Taylor in Horner form; k added to the exponent.
// x/ln2 >= 128 gives +Inf, <= -127 gives 0. <= 1 fp32 ulp.
float ExpAccurateFp32(float x);
// Oldest non-approx path: |x| with exponent >= 0 is forced to exponent 126 (value in [0.5, 1)); Horner
// 1 + v*(0.863281 + 0.8373*v); squared once per remaining exponent bit (at most 8 times); a negative x takes the
// legacy reciprocal with 2 Newton steps.
float ExpLegacySquaring(float x);

// ── reciprocal (§2 "reciprocal") ──
// Wormhole: x -> -m with m in [1, 2); seed y = k2 - k1*m + k0*m^2 (k0 = 0.3232325, k1 = 1.4545460,
// k2 = 2.1212125); `iters` Newton steps t = 1 - m*y, y += y*t; rescaled by a factor of exponent 255 - e, then *0.5
// (0 -> inf, inf -> 0, |x| >= 2^126 -> 0 through the flush); sign copied.
float RecipNewton(float x, int iters);
// Blackhole SFPARECIP: a ~7-bit seed (+-0 for |x| >= 2^126, +-inf for 0), then `iters` additive Newton steps
// e = 1 - x*y, y += y*e. The seed's table is not public: it is modelled as 1/m at the midpoint of the input's
// 7-bit mantissa bucket, rounded to 7 bits (<= ~0.6% error, the facts' raw-seed error is 0.56%). With
// fp32_dest, |x| >= 2^119 returns the raw seed (the documented fp32 bug: the refinement underflows).
float RecipHwApprox(float x, int iters, bool fp32_dest);
// Legacy recip_tile(): exponent forced to 126 and the value negated (v in [-1, -0.5)); seed 1.442695; `iters`
// steps y = y*(v*y + 2); exponent fix-up new_exp = exp(y) - exp(x) + 126 (0 when negative); sign restored.
// No special cases: 1/0 is 2^127.
float RecipLegacy(float x, int iters);

// ── rsqrt (§2 "sqrt / rsqrt") ──
// Kokosinski et al. 2024: seed y = M - (bits(x) >> 1).
//   accurate (SQRT_23, M = 0x5f1110a0): c = -x*y*y; y = y*(2.2825186 + c*(2.2533049 + c)); then `steps`
//   corrections y += (1 - x*y*y) * y/2 (the hardware does one).
//   approx (SQRT_10, M = 0x5f0b3892): y = y*(1.89099014875 - y*(x*y)), then `steps` corrections as above.
// Special cases as the facts give them: 0 -> +inf, +inf -> 0, x < 0 -> NaN.
float RsqrtMagicPoly(float x, bool approx, int steps);
// Legacy compat: seed 0x5f37<<16 - (bits(x) >> 1); `steps` Newton steps r = r*(1.5 - 0.5*x*r^2); times x (sqrt);
// then the legacy reciprocal with `recip_iters` steps.
float RsqrtCompat(float x, int steps, int recip_iters);

// ── ln: NOT described in §2. A documented fp32 implementation (fdlibm's logf): x = 2^k * (1 + f) with
// 1 + f in [sqrt(2)/2, sqrt(2)); s = f/(2 + f) (an IEEE fp32 division standing for the SFPU's reciprocal and
// multiply); ln(1 + f) = f - hfsq + s*(hfsq + R(s^2)) with fdlibm's degree-4 R; plus k*ln2 in two parts. Every
// operation rounds to fp32 (RNE), results are flushed. ln(0) = -inf, ln(x < 0) = NaN, ln(inf) = inf. ~1 ulp.
float LnFp32(float x);

// ── sigmoid / silu / tanh / gelu ──
// Approximate sigmoid as tt-metal's sigmoid_tile runs it (ckernel_sfpu_sigmoid_appx.h; tt-metal issue #53258: a
// "3-segment piecewise-linear SFPU lut()", constants 0x3DFF / 0x21D8 / 0xFF10): SFPLUT on |x| with 8-bit
// coefficients, 0.2265625|x| below 1, 0.265625|x| - 0.046875 below 2, 0.5 from 2; the sign of x retained; plus
// 0.5. So exactly 1 from x = 2 up and 0 from -2 down. (hardware-facts §2 gives tt-llk's 6-entry
// _init_sigmoid_ table, which sigmoid_tile does not call.)
float SigmoidApprox(float x);
// Approximate tanh (§2): 3-segment LUT on |x|: 0.90625|x| below 1, 0.09375|x| + 0.8125 below 2, 1 beyond; the
// sign of x retained.
float TanhLut(float x);
// Older LLK silu (§2): s = 0.229|x| + 0.5 for |x| <= 1, a degree-4 polynomial for 1 < |x| < 5 (tt-llk
// ckernel_sfpu_silu.h: 0.00144462, -0.01055479, -0.01203685, 0.24300185, 0.50437757, highest degree first), 1
// beyond; 1 - s for x < 0; times x.
float SiluPoly(float x);
// tanh without the approximation: no accurate tanh is described; a documented fp32 stand-in, the exact function
// (libm, double) rounded once to fp32.
float TanhFp32(float x);
// The erf GELU x Phi(x) as tt-metal's gelu_tile computes it (ckernel_sfpu_gelu.h; ttnn.gelu's default is the
// accurate path, fast_and_approximate_mode = false):
//  - GeluApprox, the fast path (tt-llk _init_gelu_ / _calculate_gelu_appx_): x/2 + (A|x| + B) from a 6-entry fp16
//    SFPLUTFP32 table on |x| (cuts 0.5, 1, 1.5, 2, 3), no sign copy. Its first intercept is -1.0443e-4, so
//    gelu(0) = -1.0443e-4 (tt-metal issue #52407). Stored as it is (a 16-bit Dst truncates).
//  - GeluPiecewise, accurate into a 16-bit Dst (calculate_gelu_piecewise, tt-metal PRs #39101 and #45920): 0 for
//    x <= -5.5426; x for x >= 2.78125; from -3.125, x (1/2 + x P(x^2)) with P of degree 6 in x^2 (Phi's odd
//    series); below, x snap(e^(-x^2/2) C(x)), e^(-x^2/2) by exp_21f's refinement and C a cubic, snapped to a
//    multiple of 2^-25. Rounded to bf16 ties away.
//  - GeluErf, accurate into an fp32 Dst: x (1/2 + erf(s)/2), s = min(x/sqrt 2, 10), erf a degree-15 / degree-16
//    rational in s with the 2-step reciprocal, clamped to [-1, 1]; 0 for x <= -5.5426 and x 2^-25 where erf is -1.
float GeluApprox(float x);
float GeluPiecewise(float x);
float GeluErf(float x);

// ── Algorithm choice per destination, from the target's Numerics ──
struct SfpuConfig {
  Precision dest = Precision::kFp32;  // Dst format the result is written to: kFp32, kBf16 or kFp16
  bool approx = false;                // math_approx_mode
  proto::ExpAlgorithm exp = proto::EXP_ACCURATE_FP32;
  proto::RecipAlgorithm recip = proto::RECIP_NEWTON;
  int recip_iters = 2;
  bool recip_rounds = true;  // the kernel rounds its bf16 result explicitly (approx mode writes it as it is)
  proto::RsqrtAlgorithm rsqrt = proto::RSQRT_MAGIC_POLY;
  int rsqrt_steps = 1;         // MAGIC_POLY: corrections after the polynomial step; COMPAT: Newton steps
  int legacy_recip_iters = 3;  // the legacy reciprocal inside RSQRT_COMPAT_NEWTON
  proto::SiluAlgorithm silu = proto::SILU_SIGMOID;
  proto::Rounding store = proto::TRUNCATE;  // SFPSTORE into a 16-bit Dst (§1.2)
};

// Resolves the target's choices for one destination (§2: "Treat each (function, approx flag, fp32_dest_acc flag,
// arch, version) as its own semantic variant"):
//  - exp: the target's algorithm; EXP_21F ("accurate bf16") becomes EXP_ACCURATE_FP32 for an fp32 destination,
//    as tt-metal's non-approx exp does under fp32_dest_acc (§1.6 rows "accurate bf16 (exp_21f)" and "accurate
//    fp32 (Cody-Waite)"). Unspecified: fast when approx, else accurate for the destination.
//  - recip: recip_newton_iters (default 1) counts the steps for a 16-bit destination; an fp32 destination runs one
//    more ("One iteration for bf16 (<=0.5 ulp), two for fp32"). In approx mode RECIP_NEWTON is tt-llk's
//    _sfpu_reciprocal_<0>: one step for any destination, stored without the explicit bf16 rounding.
//    RECIP_HW_APPROX in approx mode is the raw seed (SFPARECIP alone: 32 cycles/tile, §1.6).
//    RECIP_LEGACY_NEWTON: the count, default 3 (2 approx).
//  - rsqrt: MAGIC_POLY takes SQRT_10 with no correction in approx mode, else SQRT_23 with rsqrt_newton_iters
//    corrections (default 1); COMPAT_NEWTON takes rsqrt_newton_iters Newton steps (default 2).
//  - silu: the target's; unspecified: SILU_POLY when approx, else SILU_SIGMOID.
//  - store: sfpu_store, default TRUNCATE.
SfpuConfig ResolveSfpuConfig(const proto::Numerics& n, Precision dest, bool approx);

// sigmoid(x) = 1/(1 + exp(-x)) with the accurate exp for the destination (exp_21f for 16-bit, the fp32-accurate
// one for fp32) and the configured reciprocal (§2 "sigmoid, Accurate").
float SigmoidAccurate(const SfpuConfig& c, float x);

// One transform of the closed algebra on an fp32 input, including the destination rounding (see file comment):
//  - Exp, Recip, Silu by the configured algorithm;
//  - ExpAccurate by the accurate exp for the destination (exp_21f for 16-bit, the fp32-accurate one for fp32),
//    whatever the approx mode and the configured exp;
//  - Rsqrt{eps, over} = rsqrt(x * fp32(1/over) + fp32(eps)) with the scale and epsilon in one SFPMAD;
//  - Ln by LnFp32;
//  - Sigmoid: SigmoidApprox in approx mode, else SigmoidAccurate;
//  - Gelu: GeluApprox in approx mode, else GeluErf into an fp32 Dst and GeluPiecewise into a 16-bit one.
// Kernels that round explicitly to bf16 (SFPSTOCHRND, ties away): exp_21f and the fp32-accurate exp, the Wormhole
// and Blackhole reciprocals ("<= 0.5 ulp", "0 ulp"), SQRT_23/SQRT_10 ("bf16 output is rounded"), sigmoid-based
// silu ("rounded to bf16"), ln, accurate sigmoid and gelu. Those that do not (SFPSTORE truncates): Schraudolph
// exp, the legacy exp, reciprocal and rsqrt, polynomial silu, the LUT sigmoid and gelu.
float EvalSfpu(const SfpuConfig& c, const SfpuKind& k, float x);

}  // namespace spatial::numerics

#endif  // SIM_NUMERICS_SFPU_H_
