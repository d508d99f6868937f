// The matrix engine's (FPU's) tile product at a math fidelity (reference/hardware-facts.md §1.2, §1.5).
//
// MVMUL computes Dst += SrcB @ SrcA on an 8x16 by 16x16 block (MVMUL.md): a matmul's left operand (in0, A here)
// sits in SrcB and its right operand (in1, B here) in SrcA. The multipliers take 5 bits of SrcA and 7 bits of
// SrcB, so a fidelity phase multiplies only some mantissa bits (ELWMUL.md SrcAFidelityBits / SrcBFidelityBits):
//   SrcA: phase bit 0 clear -> sign, exponent, hidden 1 and the top 4 mantissa bits (mask 0xfff80000);
//         set -> the next 5 mantissa bits (x - (x & 0xfff83fff)). The last TF32 bit is never used.
//   SrcB: phase bit 1 clear -> hidden 1 and the top 6 mantissa bits (mask 0xfffe0000);
//         set -> the next 4 (x - (x & 0xfffe1fff)).
// LoFi runs phase 0, HiFi2 phases 0-1, HiFi3 0-2, HiFi4 0-3 (§1.2 "Fidelity phases walk the mantissa bits";
// 16/32/48/64 cycles per tile, §1.5). Each phase is its own MVMUL: its 16-term dot products are summed in fp32
// and added to Dst, which is rounded to bf16 after every MVMUL when Dst is 16-bit (§1.2).
//
// Fast path (DESIGN §11): operands are converted once per tile to fp32 holding exactly the bits each phase
// reads. Every partial product is exact in fp32 (at most 11 x 10 significant bits), so with an fp32 Dst the phases
// merge into one product per element (HiFi2 = A_hi6 * B_9bits, HiFi4 = A_10 * B_9, HiFi3 = A_hi6*B_9 + A_lo4*B_hi4)
// and differ from phase-by-phase accumulation only in the fp32 summation order, which the ISA leaves open ("the
// functional model should be taken as a rough guide ... operations might be performed in a different order").
// A 16-bit Dst keeps every phase separate because it rounds after each one.
#ifndef SIM_NUMERICS_MATRIX_ENGINE_H_
#define SIM_NUMERICS_MATRIX_ENGINE_H_

#include <cstdint>

#include "proto/target.pb.h"
#include "spatial/precision.h"

namespace spatial::numerics {

// The number of fidelity phases: LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4; unspecified is HiFi4 (all the bits).
int FidelityPhases(proto::Fidelity f);

// The bits of an fp32-held Src value one phase multiplies (ELWMUL.md).
float SrcAFidelityBits(float x, int phase);
float SrcBFidelityBits(float x, int phase);

// A value as the unpacker writes it into SrcA/SrcB for a matrix operand precision: bf16 (and bfp8_b, which
// unpacks losslessly to bf16) as bf16; fp32 as tf32 (SrcASrcB.md: Src holds at most 19 bits); fp16 as fp16. The
// narrowing uses the target's unpack rounding; denormals read as 0 (§1.2).
float ToSrcRegister(double v, Precision src, proto::Rounding unpack, bool flush = true);

struct MatmulConfig {
  proto::Fidelity fidelity = proto::HIFI4;
  Precision src = Precision::kBf16;  // the matrix engine's operand precision
  Precision acc = Precision::kFp32;  // the Dst format: kFp32, kBf16, kFp16 or an integer
  proto::Rounding unpack = proto::TRUNCATE;
  // Rounding of a 16-bit Dst after each MVMUL. §1.2 says the accumulation "is rounded to BF16 after every
  // MVMUL" without naming the mode (MVMUL.md's RoundToBF16 is undefined); RNE, the FPU's arithmetic rounding, is
  // assumed.
  proto::Rounding dst_round = proto::RNE;
  bool flush = true;
};

// c[tr x tc] += a[tr x kk] * b[kk x tc] for one tile pair (row-major, with row strides; b read as b[j][k] when
// transpose_b): the ValueModel::MatmulTile contract. c holds the accumulator on entry and exit. Integer
// accumulators sum exactly and saturate at +-(2^31 - 1) after each 16-deep block (MVMUL.md SaturateAddInt32).
void MatmulTileAtFidelity(const MatmulConfig& cfg, const double* a, int64_t lda, const double* b, int64_t ldb,
                          bool transpose_b, double* c, int64_t ldc, int64_t tr, int64_t tc, int64_t kk);

// A block of t x t tiles as ValueModel::MatmulBlock lays it out (sim/vm/value_model.h): for each of the m x n
// output tiles, its k products in k order. Bit-identical to MatmulTileAtFidelity over the same tiles in that order
// (each operand tile is converted to its Src bits once for the block, not once per product).
void MatmulBlockAtFidelity(const MatmulConfig& cfg, const double* a, int64_t lda, const double* b, int64_t ldb,
                           bool transpose_b, double* c, int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t t);

}  // namespace spatial::numerics

#endif  // SIM_NUMERICS_MATRIX_ENGINE_H_
