// Matmul through MatmulTiles against the triple-loop reference: sizes off the tile, one K block (no fold) and many
// (a fold over K with a carried accumulator), the blocks of the multicast decomposition (matmul_blocking.h).
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gtest/gtest.h"
#include "spatial/maps.h"
#include "spatial/proto_io.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

struct Mkn {
  int64_t m, k, n;
};

TEST(MatmulTest, MatchesReference) {
  int checked = 0;
  for (const auto& [target_name, cases] : std::vector<std::pair<const char*, std::vector<Mkn>>>{
           {"test_tiny",
            {{1, 1, 1}, {1, 8, 8}, {8, 8, 8}, {3, 5, 7}, {9, 9, 9}, {8, 16, 40}, {5, 17, 33}, {16, 24, 32},
             {7, 3, 24}, {2, 50, 48}, {17, 1, 9}, {1, 64, 1}, {10, 10, 100}, {24, 40, 16}, {1, 9, 65}}},
           {"wormhole_n150",
            {{1, 1, 1}, {32, 32, 32}, {33, 65, 97}, {64, 128, 256}, {5, 300, 320}, {2, 40, 600}, {1, 1024, 64},
             {40, 33, 31}}}}) {
    const Target& t = Shipped(target_name);
    for (const Mkn& c : cases) {
      proto::OpSpec spec = Spec({"a", "b"});
      spec.mutable_matmul()->set_m(c.m);
      spec.mutable_matmul()->set_k(c.k);
      spec.mutable_matmul()->set_n(c.n);
      Composition comp = CheckLowering(spec, t, Reals(-1, 1), 1e-12, c.m * 7919 + c.k * 31 + c.n);
      ASSERT_EQ(comp.sections.size(), 1u);
      const Section& s = comp.sections[0];
      const int64_t m_t = CeilDiv(c.m, t.tile_rows());
      const int64_t k_t = CeilDiv(c.k, t.tile_cols());
      const int64_t n_t = CeilDiv(c.n, t.tile_cols());
      EXPECT_EQ(s.name, absl::StrCat("matmul_", c.m, "x", c.k, "x", c.n));
      // The items tile C exactly with blocks of the MatmulTiles' shape; K is the peeled first block plus the fold.
      int64_t area = 0;
      for (const WorkItem& w : s.items) area += w.out.h_t * w.out.w_t;
      EXPECT_EQ(area, m_t * n_t);
      EXPECT_EQ(s.acc_precision, Precision::kFp32);
      EXPECT_EQ(s.claim.reason, "matmul in bf16");
      int matmuls = 0;
      int64_t k_covered = 0;
      for (const Stage& st : s.stages) {
        if (const auto* mm = std::get_if<MatmulTiles>(&st.op)) {
          ++matmuls;
          EXPECT_EQ(mm->m_tiles, s.items[0].out.h_t);
          EXPECT_EQ(mm->n_tiles, s.items[0].out.w_t);
          EXPECT_EQ(mm->accumulate, st.name == "matmul_k");
          k_covered += mm->k_tiles * (st.phase == Phase::kBody ? s.num_blocks : 1);
        } else if (const auto* l = std::get_if<Load>(&st.op)) {
          // A's block is the same along a row of items, B's along a column: both multicast.
          EXPECT_EQ(l->multicast, l->tensor == 0 ? LoopVar::kItemX : LoopVar::kItemY) << st.name;
        }
      }
      EXPECT_EQ(k_covered, k_t);
      EXPECT_LE(matmuls, 2);
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// The first K block is peeled into the prologue (a plain product writes the accumulator, nothing zeroes it), the
// fold accumulates in place into one fp32 page, the epilogue packs and stores it.
TEST(MatmulTest, FoldPhases) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(8);
  spec.mutable_matmul()->set_k(160);
  spec.mutable_matmul()->set_n(8);
  absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  ASSERT_TRUE(s.has_fold());
  EXPECT_EQ(s.FindStage("zero_acc"), -1);
  EXPECT_EQ(s.stages[s.FindStage("load_a")].phase, Phase::kPrologue);
  EXPECT_EQ(s.stages[s.FindStage("matmul")].phase, Phase::kPrologue);
  EXPECT_EQ(s.stages[s.FindStage("load_a_k")].phase, Phase::kBody);
  EXPECT_EQ(std::get<Load>(s.stages[s.FindStage("load_b_k")].op).num_blocks, s.num_blocks);
  EXPECT_TRUE(std::get<MatmulTiles>(s.stages[s.FindStage("matmul_k")].op).accumulate);
  EXPECT_EQ(s.stages[s.FindStage("pack_0")].phase, Phase::kEpilogue);
  EXPECT_EQ(s.stages[s.FindStage("store_y_0")].phase, Phase::kEpilogue);
  const Buffer& acc = s.buffers[s.FindBuffer("acc")];
  EXPECT_EQ(acc.depth, 1);
  EXPECT_EQ(acc.precision, Precision::kFp32);
}

// The demo's shape (one row of A tiles against 96 columns of B tiles) spreads over most of the grid as the 1-D
// layout, A multicast to every item.
TEST(MatmulTest, SkinnyShapeUsesMostOfTheGrid) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(32);
  spec.mutable_matmul()->set_k(1024);
  spec.mutable_matmul()->set_n(3072);
  const Target& t = Shipped("wormhole_n150");
  absl::StatusOr<Composition> c = Lower(spec, t);
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  EXPECT_GE(static_cast<int64_t>(s.items.size()), t.sites() / 2);
  EXPECT_LE(static_cast<int64_t>(s.items.size()), t.sites());
}

// MatmulSpec's formats and fidelity: refused by name when they are not floats, not stored by the target, or not a
// value of their enum.
TEST(MatmulTest, FormatAndFidelityRefusals) {
  auto lower = [](const std::string& target, auto&& edit) {
    proto::OpSpec spec = Spec({"a", "b"});
    spec.mutable_matmul()->set_m(32);
    spec.mutable_matmul()->set_k(32);
    spec.mutable_matmul()->set_n(32);
    edit(spec.mutable_matmul());
    return Lower(spec, Shipped(target)).status();
  };
  EXPECT_EQ(lower("wormhole_n150", [](proto::MatmulSpec* m) { m->set_in0_format(proto::INT8); }),
            absl::InvalidArgumentError(
                "matmul.in0_format = int8 is not a float format (bf16, fp16, fp32, bfp8_b, bfp4_b)"));
  EXPECT_EQ(lower("grayskull_e150", [](proto::MatmulSpec* m) { m->set_in1_format(proto::BFP4_B); }),
            absl::FailedPreconditionError("MissingPrecision: matmul.in1_format bfp4_b (target grayskull_e150)"));
  EXPECT_EQ(lower("wormhole_n150", [](proto::MatmulSpec* m) { m->set_out_format(static_cast<proto::Precision>(99)); }),
            absl::InvalidArgumentError("matmul.out_format is not a precision (99)"));
  EXPECT_EQ(lower("wormhole_n150", [](proto::MatmulSpec* m) { m->set_math_fidelity(static_cast<proto::Fidelity>(7)); }),
            absl::InvalidArgumentError("matmul.math_fidelity is not a fidelity (7)"));
  // A valid choice lowers, and reaches every MatmulTiles and tensor.
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(64);
  spec.mutable_matmul()->set_k(320);
  spec.mutable_matmul()->set_n(64);
  spec.mutable_matmul()->set_math_fidelity(proto::LOFI);
  spec.mutable_matmul()->set_in0_format(proto::BFP8_B);
  spec.mutable_matmul()->set_out_format(proto::FP32);
  absl::StatusOr<Composition> c = Lower(spec, Shipped("wormhole_n150"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  EXPECT_EQ(s.tensors[0].precision, Precision::kBfp8B);
  EXPECT_EQ(s.tensors[1].precision, Precision::kBf16);
  EXPECT_EQ(s.tensors[2].precision, Precision::kFp32);
  // A block-float operand feeds the bf16 engine through the unpacker: the program certifies (`lower` refused it
  // before, its certifier taking only bf16 operands).
  const CertifyResult cert = Certify(*c, Shipped("wormhole_n150"));
  EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
  for (const Stage& st : s.stages) {
    if (const auto* mm = std::get_if<MatmulTiles>(&st.op)) {
      EXPECT_EQ(mm->fidelity, MathFidelity::kLoFi);
    }
  }
}

// tt-metal's compute-kernel switches: fp32_dest_acc = false accumulates in a 16-bit Dst (the section's accumulator
// and the partials are bf16, and a Dst holds twice the tiles, so a pack chunk may be 16 tiles); packer_l1_acc sets
// the plan's pack_accumulate. A Dst precision the target lacks is refused by name.
TEST(MatmulTest, AccumulatorSwitches) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(256);
  spec.mutable_matmul()->set_k(1024);
  spec.mutable_matmul()->set_n(512);
  spec.mutable_matmul()->set_fp32_dest_acc(false);
  spec.mutable_matmul()->set_packer_l1_acc(true);
  const Target& t = Shipped("wormhole_n150");
  Composition comp = CheckLowering(spec, t, Reals(-1, 1), 1e-12, 5);
  const Section& s = comp.sections[0];
  EXPECT_EQ(s.acc_precision, Precision::kBf16);
  EXPECT_EQ(s.buffers[s.FindBuffer("acc")].precision, Precision::kBf16);
  ASSERT_TRUE(s.plan.has_value());
  EXPECT_TRUE(s.plan->pack_accumulate);
  // A block 12 tiles wide packs in one 12-tile chunk: more than an fp32 Dst's 8, within a bf16 Dst's 16.
  spec.mutable_matmul()->set_m(2048);
  spec.mutable_matmul()->set_k(2048);
  spec.mutable_matmul()->set_n(3072);
  absl::StatusOr<Composition> wide = Lower(spec, t);
  ASSERT_TRUE(wide.ok()) << wide.status();
  const Section& ws = wide->sections[0];
  EXPECT_GT(ws.buffers[ws.FindBuffer("out")].page_tiles, t.effective_acc_tiles(Precision::kFp32, true));
  EXPECT_TRUE(Certify(*wide, t).ok());
  // Unset: the target's accumulator, fp32, and no L1 accumulation.
  spec.mutable_matmul()->clear_fp32_dest_acc();
  spec.mutable_matmul()->set_packer_l1_acc(false);
  absl::StatusOr<Composition> dflt = Lower(spec, t);
  ASSERT_TRUE(dflt.ok()) << dflt.status();
  EXPECT_EQ(dflt->sections[0].acc_precision, Precision::kFp32);
  EXPECT_FALSE(dflt->sections[0].plan->pack_accumulate);
  // Grayskull's Dst has no fp32 mode.
  spec.mutable_matmul()->set_fp32_dest_acc(true);
  EXPECT_EQ(Lower(spec, Shipped("grayskull_e150")).status(),
            absl::FailedPreconditionError(
                "MissingPrecision: matmul.fp32_dest_acc = true: a Dst that accumulates in fp32 (target grayskull_e150)"));
}

// bfp4_b operands and output lower to a program that validates (the CLI's `lower` once refused it: the validator
// did not know bfp4_b) and matches the reference.
TEST(MatmulTest, Bfp4FormatsLowerAndValidate) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(64);
  spec.mutable_matmul()->set_k(256);
  spec.mutable_matmul()->set_n(96);
  spec.mutable_matmul()->set_math_fidelity(proto::LOFI);
  spec.mutable_matmul()->set_in0_format(proto::BFP4_B);
  spec.mutable_matmul()->set_in1_format(proto::BFP4_B);
  spec.mutable_matmul()->set_out_format(proto::BFP4_B);
  Composition comp = CheckLowering(spec, Shipped("wormhole_n150"), Reals(-1, 1), 1e-12, 17);
  EXPECT_EQ(comp.sections[0].tensors[0].precision, Precision::kBfp4B);
  // A bfp4_b result is claimed at eight times the default error (random products reach rel L2 0.18-0.20); a bfp8_b
  // or bf16 one at the default.
  EXPECT_EQ(comp.sections[0].claim.error_growth, 8.0);
  spec.mutable_matmul()->set_out_format(proto::BFP8_B);
  absl::StatusOr<Composition> bfp8 = Lower(spec, Shipped("wormhole_n150"));
  ASSERT_TRUE(bfp8.ok()) << bfp8.status();
  EXPECT_EQ(bfp8->sections[0].claim.error_growth, 0.0);
}

// An operand format the target stores but its matrix engine does not take is a refusal that says so; it was a
// program the certifier refused, reported as an internal error.
TEST(MatmulTest, OperandFormatsTheEngineDoesNotTakeAreRefused) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(32);
  spec.mutable_matmul()->set_k(64);
  spec.mutable_matmul()->set_n(32);
  spec.mutable_matmul()->set_in0_format(proto::FP16);
  EXPECT_EQ(Lower(spec, Shipped("wormhole_n150")).status(),
            absl::FailedPreconditionError("MissingPrecision: matmul.in0_format fp16: the matrix engine takes bf16 "
                                          "(or bfp8_b, bfp4_b) operands (target wormhole_n150)"));
  spec.mutable_matmul()->clear_in0_format();
  spec.mutable_matmul()->set_in1_format(proto::FP32);
  EXPECT_EQ(Lower(spec, Shipped("test_tiny")).status(),
            absl::FailedPreconditionError("MissingPrecision: matmul.in1_format fp32: the matrix engine takes bf16 "
                                          "(or bfp8_b, bfp4_b) operands (target test_tiny)"));
}

// A 16-bit Dst rounds the running sum to bf16 after every K tile: the claim grows as the square root of those
// roundings past 128 (measured rel L2 0.033 at K = 8192 on Wormhole's tiles, where the default is 0.031).
TEST(MatmulTest, A16BitDstClaimsItsRoundingsOverK) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(32);
  spec.mutable_matmul()->set_n(64);
  spec.mutable_matmul()->set_fp32_dest_acc(false);
  // A growth is none (0) or at least 1: the program reader refuses one in between (a K of 1024 claimed 0.5).
  for (const auto& [k, growth] : std::vector<std::pair<int64_t, double>>{{1024, 0.0}, {4096, 0.0}, {8192, 1.41421}}) {
    spec.mutable_matmul()->set_k(k);
    absl::StatusOr<Composition> c = Lower(spec, Shipped("wormhole_n150"));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NEAR(c->sections[0].claim.error_growth, growth, 1e-4) << "k = " << k;
    EXPECT_TRUE(FromProto(ToProto(*c)).ok()) << "k = " << k << ": " << FromProto(ToProto(*c)).status();
  }
  spec.mutable_matmul()->set_fp32_dest_acc(true);  // an fp32 Dst rounds once, at the pack
  absl::StatusOr<Composition> fp32 = Lower(spec, Shipped("wormhole_n150"));
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ(fp32->sections[0].claim.error_growth, 0.0);
  // Grayskull's only Dst is 16-bit: Llama's down projection (K = 14336) claims 448 roundings' worth.
  spec.clear_matmul();
  spec.mutable_matmul()->set_m(32);
  spec.mutable_matmul()->set_n(64);
  spec.mutable_matmul()->set_k(14336);
  absl::StatusOr<Composition> gs = Lower(spec, Shipped("grayskull_e150"));
  ASSERT_TRUE(gs.ok()) << gs.status();
  EXPECT_NEAR(gs->sections[0].claim.error_growth, std::sqrt(448.0 / 128.0), 1e-9);
}

// program_config runs tt-metal's blocking instead of the chooser's: the items are its out-blocks, K folds
// in0_block_w tiles at a time, the plan's sub-block is its out_subblock; a config that does not divide, is over
// half of Dst or does not fit a site is refused by name.
TEST(MatmulTest, ProgramConfigNamesTheBlocking) {
  proto::OpSpec spec = Spec({"a", "b"});
  proto::MatmulSpec* mm = spec.mutable_matmul();
  mm->set_m(512);
  mm->set_k(1024);
  mm->set_n(768);
  mm->set_fp32_dest_acc(false);
  mm->set_packer_l1_acc(true);
  proto::MatmulProgramConfig* cfg = mm->mutable_program_config();
  cfg->set_out_block_h(4);
  cfg->set_out_block_w(6);
  cfg->set_in0_block_w(8);
  cfg->set_out_subblock_h(2);
  cfg->set_out_subblock_w(3);
  const Target& t = Shipped("wormhole_n150");
  Composition comp = CheckLowering(spec, t, Reals(-1, 1), 1e-12, 23);
  const Section& s = comp.sections[0];
  EXPECT_EQ(s.items.size(), 16u);  // 16 x 24 tiles of C in 4 x 6 blocks
  EXPECT_EQ(s.items[0].out.h_t, 4);
  EXPECT_EQ(s.items[0].out.w_t, 6);
  ASSERT_TRUE(s.plan.has_value());
  EXPECT_EQ(s.plan->block_k_tiles, 8);
  EXPECT_EQ(s.plan->num_blocks, 4);
  EXPECT_EQ(s.plan->osh, 2);
  EXPECT_EQ(s.plan->osw, 3);
  EXPECT_TRUE(Certify(comp, t).ok());

  const std::string what = " (matmul m x k x n = 512 x 1024 x 768)";
  auto refusal = [&](auto&& edit) {
    proto::OpSpec bad = spec;
    edit(bad.mutable_matmul()->mutable_program_config());
    return Lower(bad, t).status();
  };
  EXPECT_EQ(refusal([](proto::MatmulProgramConfig* c) { c->set_out_block_h(3); }),
            absl::InvalidArgumentError(
                "matmul.program_config.out_block_h = 3 must be at least 1 and divide m's 16 tiles" + what));
  EXPECT_EQ(refusal([](proto::MatmulProgramConfig* c) { c->set_out_block_w(0); }),
            absl::InvalidArgumentError(
                "matmul.program_config.out_block_w = 0 must be at least 1 and divide n's 24 tiles" + what));
  EXPECT_EQ(refusal([](proto::MatmulProgramConfig* c) { c->set_in0_block_w(5); }),
            absl::InvalidArgumentError(
                "matmul.program_config.in0_block_w = 5 must be at least 1 and divide k's 32 tiles" + what));
  EXPECT_EQ(refusal([](proto::MatmulProgramConfig* c) { c->set_out_subblock_w(4); }),
            absl::InvalidArgumentError(
                "matmul.program_config.out_subblock_w = 4 must be at least 1 and divide out_block_w = 6" + what));
  EXPECT_EQ(refusal([](proto::MatmulProgramConfig* c) { c->set_out_subblock_h(4); }),
            absl::UnimplementedError(
                "NotLowered: matmul.program_config: a 4 x 3 sub-block is over the 8 tiles that half of "
                "wormhole_n150's Dst holds in bf16" + what));
  EXPECT_EQ(refusal([](proto::MatmulProgramConfig* c) {
              c->set_out_block_h(16);
              c->set_out_block_w(24);
              c->set_in0_block_w(32);
            }),
            absl::UnimplementedError(
                "NotLowered: matmul.program_config: a 16 x 24 block folding K 32 tiles at a time needs 6078464 "
                "bytes a site, over wormhole_n150's 1397984" + what));
}

}  // namespace
}  // namespace spatial::testing
