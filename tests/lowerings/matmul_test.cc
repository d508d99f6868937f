// Matmul through MatmulTiles against the triple-loop reference: sizes off the tile, one K tile (no fold) and many
// (a fold over K with a carried accumulator), n blocks that divide n's tiles.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "spatial/maps.h"
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
      EXPECT_EQ(s.num_blocks, k_t);
      // The block is the largest divisor of n's tiles within the accumulator budget.
      int64_t blk = std::min(n_t, t.effective_acc_tiles(Precision::kFp32));
      while (n_t % blk != 0) --blk;
      EXPECT_EQ(s.items.size(), static_cast<size_t>(m_t * (n_t / blk)));
      EXPECT_EQ(s.items.back().out, (TileRect{m_t - 1, n_t - blk, 1, blk}));
      EXPECT_EQ(s.acc_precision, Precision::kFp32);
      EXPECT_EQ(s.claim.reason, "matmul in bf16");
      int matmuls = 0;
      for (const Stage& st : s.stages) {
        if (const auto* mm = std::get_if<MatmulTiles>(&st.op)) {
          ++matmuls;
          EXPECT_EQ(mm->n_tiles, blk);
          EXPECT_EQ(mm->accumulate, k_t > 1);
          EXPECT_EQ(st.phase, k_t > 1 ? Phase::kBody : Phase::kPrologue);
        }
      }
      EXPECT_EQ(matmuls, 1);
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// The fold's carried accumulator is zeroed in the prologue and read out in the epilogue.
TEST(MatmulTest, FoldPhases) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(8);
  spec.mutable_matmul()->set_k(24);
  spec.mutable_matmul()->set_n(8);
  absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  ASSERT_TRUE(s.has_fold());
  EXPECT_EQ(s.stages[s.FindStage("zero_acc")].phase, Phase::kPrologue);
  EXPECT_EQ(s.stages[s.FindStage("load_a")].phase, Phase::kBody);
  EXPECT_EQ(std::get<Load>(s.stages[s.FindStage("load_b")].op).num_blocks, 3);
  EXPECT_EQ(s.stages[s.FindStage("pack")].phase, Phase::kEpilogue);
  EXPECT_EQ(s.stages[s.FindStage("store_y")].phase, Phase::kEpilogue);
  const Buffer& acc = s.buffers[s.FindBuffer("acc")];
  EXPECT_EQ(acc.depth, 2);
  EXPECT_EQ(acc.precision, Precision::kFp32);
}

}  // namespace
}  // namespace spatial::testing
