// The target's ValueModel (sim/numerics/target_model.h) built from the shipped target descriptions.
#include "sim/numerics/target_model.h"

#include <cmath>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "targets/loader.h"

namespace spatial::numerics {
namespace {

Target Load(const std::string& name) {
  absl::StatusOr<Target> t = LoadTarget(name);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

// Wormhole n150 resolves to the documented choices: ties-away packer, truncating SFPSTORE and unpack, flushed
// denormals, HiFi2 (§1.2, §1.5); for a bf16 Dst exp_21f and the Wormhole reciprocal with one Newton step, for an
// fp32 Dst the Cody-Waite exp and two steps (§2: "One iteration for bf16, two for fp32"); SQRT_23 with its one
// correction; sigmoid-based silu.
TEST(TargetModel, WormholeN150PicksTheDocumentedAlgorithms) {
  const TargetNumerics n = ResolveTargetNumerics(Load("wormhole_n150"));
  EXPECT_EQ(n.pack, proto::TIES_AWAY);
  EXPECT_EQ(n.sfpu_store, proto::TRUNCATE);
  EXPECT_EQ(n.unpack, proto::TRUNCATE);
  EXPECT_TRUE(n.flush_denormals);
  EXPECT_FALSE(n.approx_mode);
  EXPECT_EQ(n.fidelity, proto::HIFI2);
  EXPECT_EQ(n.matrix_in, Precision::kBf16);
  EXPECT_EQ(n.sfpu_bf16.exp, proto::EXP_21F);
  EXPECT_EQ(n.sfpu_bf16.recip, proto::RECIP_NEWTON);
  EXPECT_EQ(n.sfpu_bf16.recip_iters, 1);
  EXPECT_EQ(n.sfpu_fp32.exp, proto::EXP_ACCURATE_FP32);
  EXPECT_EQ(n.sfpu_fp32.recip_iters, 2);
  EXPECT_EQ(n.sfpu_bf16.rsqrt, proto::RSQRT_MAGIC_POLY);
  EXPECT_EQ(n.sfpu_bf16.rsqrt_steps, 1);
  EXPECT_EQ(n.sfpu_bf16.silu, proto::SILU_SIGMOID);
}

TEST(TargetModel, BlackholeAndGrayskullPickTheirs) {
  const TargetNumerics bh = ResolveTargetNumerics(Load("blackhole_p150"));
  EXPECT_EQ(bh.sfpu_bf16.recip, proto::RECIP_HW_APPROX);
  EXPECT_EQ(bh.sfpu_bf16.recip_iters, 1);
  EXPECT_EQ(bh.sfpu_fp32.recip_iters, 2);
  const TargetNumerics gs = ResolveTargetNumerics(Load("grayskull_e150"));
  EXPECT_EQ(gs.sfpu_bf16.exp, proto::EXP_LEGACY_SQUARING);
  EXPECT_EQ(gs.sfpu_bf16.recip, proto::RECIP_LEGACY_NEWTON);
  EXPECT_EQ(gs.sfpu_bf16.recip_iters, 3);
  EXPECT_EQ(gs.sfpu_bf16.rsqrt, proto::RSQRT_COMPAT_NEWTON);
  EXPECT_EQ(gs.sfpu_bf16.rsqrt_steps, 2);
  EXPECT_EQ(gs.sfpu_bf16.silu, proto::SILU_POLY);
}

// What the VM sees through the seam, on Wormhole.
TEST(TargetModel, WormholeBehaviour) {
  const std::unique_ptr<ValueModel> m = MakeTargetModel(Load("wormhole_n150"));
  EXPECT_FALSE(m->exact());

  // Stores: bf16 ties go away from zero (the packer), ints saturate sign-magnitude, fp32 flushes denormals.
  double v[5] = {1.00390625, -1.00390625, 1e-40, 200.0, -200.0};
  m->StoreRound(Precision::kBf16, v, 2);
  EXPECT_EQ(v[0], 1.0078125);
  EXPECT_EQ(v[1], -1.0078125);
  m->StoreRound(Precision::kFp32, v + 2, 1);
  EXPECT_EQ(v[2], 0.0);
  m->StoreRound(Precision::kInt8, v + 3, 2);
  EXPECT_EQ(v[3], 127.0);
  EXPECT_EQ(v[4], -127.0);

  // Arith on the fp32 datapath: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds (tie, to even) to 1 + 2^-11; 1 + 2^-30
  // is 1; an integer accumulator stays exact.
  const double a = 1.0 + std::ldexp(1.0, -12);
  EXPECT_EQ(m->Arith(BodyOp::kMul, a, a, Precision::kFp32), 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(m->Arith(BodyOp::kAdd, 1.0, std::ldexp(1.0, -30), Precision::kFp32), 1.0);
  EXPECT_EQ(m->Arith(BodyOp::kAdd, std::ldexp(1.0, 40), 1.0, Precision::kInt32), std::ldexp(1.0, 40) + 1.0);
  EXPECT_EQ(m->Arith(BodyOp::kFloorDiv, 7.0, 2.0, Precision::kFp32), 3.0);
  EXPECT_EQ(m->Arith(BodyOp::kMax, std::nan(""), -1e30, Precision::kFp32), static_cast<double>(-1e30f));

  // Transforms into a bf16 Dst: exp_21f then ties-away to bf16: exp(0) = 1, exp(1) = 2.71875 (174 * 2^-6); the
  // reciprocal of 3 is 1/3 = 0x3EAAAAAB rounded ties-away to 0x3EAB = 0.333984375.
  EXPECT_EQ(m->Sfpu(SfpuKind::Exp(), 0.0, Precision::kBf16), 1.0);
  EXPECT_EQ(m->Sfpu(SfpuKind::Exp(), 1.0, Precision::kBf16), 2.71875);
  EXPECT_EQ(m->Sfpu(SfpuKind::Recip(), 3.0, Precision::kBf16), 0.333984375);
  EXPECT_EQ(m->Sfpu(SfpuKind::Exp(), 0.0, Precision::kFp32), 1.0);

  // Matmul at the target's HiFi2 (see matrix_engine_test for the derivation).
  const double x = 1.9921875;
  double c = 0.0;
  m->MatmulTile(&x, 1, &x, 1, false, &c, 1, 1, 1, 1, Precision::kFp32, MathFidelity::kDefault);
  EXPECT_EQ(c, 1.984375 * 1.9921875);
  c = 0.0;
  m->MatmulTile(&x, 1, &x, 1, false, &c, 1, 1, 1, 1, Precision::kBf16, MathFidelity::kDefault);
  EXPECT_EQ(c, 3.953125);
}

// ModelOptions override the target: approx mode switches rsqrt to SQRT_10 (no correction step) and the
// unspecified-by-name choices; a fidelity override changes the matmul (LoFi: 3.8447265625).
TEST(TargetModel, OptionsOverrideTheTarget) {
  const Target wh = Load("wormhole_n150");
  ModelOptions o;
  o.approx_mode = true;
  o.fidelity = proto::LOFI;
  const TargetNumerics n = ResolveTargetNumerics(wh, o);
  EXPECT_TRUE(n.approx_mode);
  EXPECT_EQ(n.sfpu_bf16.rsqrt_steps, 0);
  EXPECT_EQ(n.sfpu_bf16.exp, proto::EXP_21F);  // named by the target: approx does not override it
  const std::unique_ptr<ValueModel> m = MakeTargetModel(wh, o);
  const double x = 1.9921875;
  double c = 0.0;
  m->MatmulTile(&x, 1, &x, 1, false, &c, 1, 1, 1, 1, Precision::kFp32, MathFidelity::kDefault);
  EXPECT_EQ(c, 3.8447265625);
}

// Every shipped target builds a model whose bf16 exp(0) is 1 and whose fp32 reciprocal of 4 is 0.25 to within
// the target's reciprocal (the legacy one is only good to ~4e-5).
TEST(TargetModel, EveryShippedTarget) {
  for (const std::string& name : ShippedTargetNames()) {
    SCOPED_TRACE(name);
    const std::unique_ptr<ValueModel> m = MakeTargetModel(Load(name));
    EXPECT_EQ(m->Sfpu(SfpuKind::Exp(), 0.0, Precision::kBf16), 1.0);
    EXPECT_NEAR(m->Sfpu(SfpuKind::Recip(), 4.0, Precision::kFp32), 0.25, 0.25 * 1e-4);
    double tile[64];
    for (int i = 0; i < 64; ++i) tile[i] = i;
    double c[64] = {};
    m->MatmulTile(tile, 8, tile, 8, true, c, 8, 8, 8, 8, Precision::kFp32, MathFidelity::kDefault);
    // Row 0 times itself: sum of k^2 for k < 8 = 140. Integers below 8 have at most 3 significant bits, so even
    // LoFi (4 and 6 bits) multiplies them exactly.
    EXPECT_EQ(c[0], 140.0);
  }
}

}  // namespace
}  // namespace spatial::numerics
