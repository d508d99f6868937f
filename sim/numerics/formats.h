// Tile-accurate storage formats: conversions from the fp32 datapath into bf16, tf32, fp16, bfp8_b and the
// sign-magnitude integers, with the three rounding modes the Tensix conversion points use
// (reference/hardware-facts.md §1.2, "these define tile-accurate").
//
// Values travel as double (the VM's type) but every float format is reached through fp32, because on the
// hardware every value a packer, SFPSTORE or SFPSTOCHRND converts already sits in an fp32 register (Dst or an
// LReg). A result is the double holding the exact value of the narrowed number.
#ifndef SIM_NUMERICS_FORMATS_H_
#define SIM_NUMERICS_FORMATS_H_

#include <cstdint>

#include "proto/target.pb.h"
#include "sim/numerics/float_bits.h"
#include "spatial/precision.h"

namespace spatial::numerics {

// Rounding modes, as the target proto names them:
//   RNE        round to nearest, ties to even (inside SFPMAD; IEEE default).
//   TIES_AWAY  round to nearest, ties away from zero on the magnitude (SFPSTOCHRND deterministic mode, the
//              packer's early conversion: §1.2 "round-half-away-from-zero on the magnitude").
//   TRUNCATE   toward zero (SFPSTORE to BF16/FP16, the packer's late conversion: §1.2).
// ROUNDING_UNSPECIFIED behaves as RNE.
using Rounding = proto::Rounding;

// A double onto the fp32 datapath: IEEE RNE, then (flush) denormals and -0 become +0 (§1.2: "Denormals are
// flushed everywhere", "The SFPU never outputs -0"). Inline: every tile conversion loop calls it.
inline float ToFp32(double x, bool flush = true) {
  const float f = static_cast<float>(x);  // IEEE RNE (the default floating-point environment)
  return flush ? Ftz(f) : f;
}

// fp32 -> bf16 (8-bit exponent, 7-bit mantissa), returned as the fp32 holding it.
//  - Denormal inputs: +0 when flush and the mode rounds (rounding "flushes denormals, turns -0 into +0"); a
//    TRUNCATE keeps the sign of the zero (SFPSTORE "flush denormals to signed zero", SFPSTORE.md ToBF16).
//  - NaN: TIES_AWAY makes it +-Inf (§1.2: SFPSTOCHRND and the packer turn "NaN into Inf"); TRUNCATE keeps the
//    top mantissa bits, so a quiet NaN stays NaN (and a NaN whose payload sits only in the low 16 bits becomes
//    Inf: §1.2 packer "NaN can become infinity, if that is the outcome of truncating"); RNE keeps NaN (IEEE).
//  - Overflow: rounding up past the largest finite value gives +-Inf (the carry reaches exponent 255).
float RoundToBf16(float x, Rounding mode, bool flush = true);

// fp32 -> tf32 (10-bit mantissa): what the unpackers hand the matrix engine for an fp32 operand (SrcASrcB.md:
// "FP32 can be converted to TF32 ... throwing away the low 13 bits"). Same rules as RoundToBf16.
float RoundToTf32(float x, Rounding mode, bool flush = true);

// fp32 -> fp16 (5-bit exponent, 10-bit mantissa).
//  - NaN and Inf become +-Inf: "types with a 5-bit exponent are treated as not having NaN" (§1.2 via
//    Packers/FormatConversion.md).
//  - Magnitudes that round to 2^16 or more become +-Inf: the packer saturates on exponent narrowing and SFPSTORE
//    converts "large magnitudes ... to infinity" (SFPSTORE.md); the Tensix pattern is the exponent-31 one that
//    "behaves similarly to infinity", which the VM's f64 world can only call Inf.
//  - |x| < 2^-14 (below fp16's smallest normal) is flushed to zero when flush (SFPSTORE ToFP16: "Flush underflow
//    and denormals"); otherwise rounded onto fp16's denormal grid (2^-24) by the mode.
float RoundToFp16(float x, Rounding mode, bool flush = true);

// A value into an integer precision: rounded to an integer by the mode, then saturated. int8/int16/int32 are
// sign-magnitude on Tensix, so the range is symmetric: +-(2^(bits-1) - 1) (§1.2 "sign-magnitude Int32";
// FormatConversion.md "saturate (-127 to +127)"; ELWMUL.md "Saturate clamps at +-(2^31-1)"). int64 (the host's
// index type, no hardware format) saturates at its two's complement range. NaN becomes 0 (no integer holds it);
// -0 becomes +0.
double RoundToInt(double x, Precision p, Rounding mode);

// One bfp8_b block of n <= 16 values, in place (§1.2: "BFP8 = BF16, then rounded to one shared 8-bit exponent per
// 16 datums"; FloatBitPatterns.md BFP8: sign + 7-bit magnitude Mag, value Mag/2^6 * 2^(Exp-127)):
//   1. each value -> fp32 -> bf16 with `mode`;
//   2. the shared exponent E is the largest bf16 exponent of the block;
//   3. each 8-bit significand (hidden 1 + 7 bits) is shifted right by E - e_i + 1 into the 7-bit magnitude,
//      the shifted-out bits rounded by `mode` (so even the largest element loses its last mantissa bit);
//   4. if rounding carries the largest magnitude to 128, E grows by one and the block is shifted again (the
//      result is the nearest value the block format holds; the facts do not say what the packer does here).
// Zero magnitudes are +0 (a sign bit with Mag 0 encodes -2^128, never a zero). Inf/NaN elements stay Inf/NaN
// (their exponent 255 becomes the shared one, so every finite neighbour flushes to 0).
void RoundBfp8BBlock(double* v, int n, Rounding mode, bool flush = true);
// One bfp4_b block (tt-metal's Bfp4_b: sign + 3-bit magnitude, value Mag/2^2 * 2^(Exp-127), one 8-bit exponent
// per 16 datums; a 32x32 tile is 512 + 64 = 576 bytes): the bfp8_b block above, then each magnitude truncated
// to its top 3 bits (§1.2: "BFP4/BFP2 are then truncated from BFP8").
void RoundBfp4BBlock(double* v, int n, Rounding mode, bool flush = true);
// Both: a bfp8_b block, then its magnitudes truncated to `mag_bits` bits (7: none).
void RoundBlockFloat(double* v, int n, int mag_bits, Rounding mode, bool flush = true);

// Rounds n values written at precision p, in place: what a packer (Dst -> L1) or a store does. bfp8_b groups the
// values in consecutive blocks of 16 starting at v[0] (a face row when v is a tile row or a page row of a
// 32-wide tile). Float formats go through fp32 first (see the file comment). kUnspecified leaves v alone.
void RoundToPrecision(Precision p, Rounding mode, bool flush, double* v, int64_t n);

// One value at precision p (bfp8_b as a block of one: its own exponent).
double RoundOne(Precision p, Rounding mode, bool flush, double x);

// Drops the low `drop` (1..23) bits of a finite fp32 pattern with `mode`, on the magnitude; a carry propagates into
// the exponent. The primitive under every float narrowing above.
uint32_t RoundDropBits(uint32_t u, int drop, Rounding mode);

}  // namespace spatial::numerics

#endif  // SIM_NUMERICS_FORMATS_H_
