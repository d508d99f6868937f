// One K tile of a matmul's Dst sub-block on the shipped targets: the unpackers' bytes and the math, with Wormhole's
// held pairs (tt-llk's matmul holds two tiles of the reused operand and waits for the next pair's second tile and
// the first streamed one).
#include "targets/matmul_step.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "targets/loader.h"

namespace spatial {
namespace {

constexpr double kBf16Tile = 2048, kBfp8Tile = 1088;

TEST(MatmulStep, WormholeWaitsForEachHeldPair) {
  absl::StatusOr<Target> wh = LoadTarget("wormhole_n150");
  ASSERT_TRUE(wh.ok()) << wh.status();
  ASSERT_TRUE(wh->proto().costs().matmul_held_pairs());
  // 4 x 2 at bf16 HiFi2: B is held (the sub-block is taller than wide), one pair; the math waits for one held and
  // one streamed tile at 64 B/cycle: 256 + 64 cycles. The unpackers read 6 tiles at 64 B/cycle together.
  MatmulStep s = MatmulSubBlockStep(*wh, 4, 2, kBf16Tile, kBf16Tile, 32);
  EXPECT_DOUBLE_EQ(s.math, 8 * 32 + (kBf16Tile + kBf16Tile) / 64);
  EXPECT_DOUBLE_EQ(s.unpack, 6 * kBf16Tile / 64);
  // 2 x 4: A held, the same.
  EXPECT_DOUBLE_EQ(MatmulSubBlockStep(*wh, 2, 4, kBf16Tile, kBf16Tile, 32).math, 320);
  // 4 x 4 (a 16-bit Dst's whole half on a bigger target): two pairs. Mixed formats: the held A bfp8_b, streamed B bf16.
  EXPECT_DOUBLE_EQ(MatmulSubBlockStep(*wh, 4, 4, kBfp8Tile, kBf16Tile, 16).math,
                   16 * 16 + 2 * (kBfp8Tile + kBf16Tile) / 64);
  // One held tile (1 x 8, 8 x 1, 1 x 1): no pair, no wait; 1 x 8 streams more bytes than the math takes.
  EXPECT_DOUBLE_EQ(MatmulSubBlockStep(*wh, 1, 8, kBf16Tile, kBf16Tile, 32).math, 256);
  EXPECT_DOUBLE_EQ(MatmulSubBlockStep(*wh, 8, 1, kBf16Tile, kBf16Tile, 32).math, 256);
  EXPECT_DOUBLE_EQ(MatmulSubBlockStep(*wh, 1, 8, kBf16Tile, kBf16Tile, 32).unpack, 9 * kBf16Tile / 64);
  // A 3-row sub-block: one pair and a single held tile.
  EXPECT_DOUBLE_EQ(MatmulSubBlockStep(*wh, 3, 3, kBf16Tile, kBf16Tile, 32).math, 9 * 32 + 64);
}

TEST(MatmulStep, BlackholeHoldsOneTileAtATime) {
  absl::StatusOr<Target> bh = LoadTarget("blackhole_p150");
  ASSERT_TRUE(bh.ok()) << bh.status();
  EXPECT_FALSE(bh->proto().costs().matmul_held_pairs());
  const MatmulStep s = MatmulSubBlockStep(*bh, 4, 2, kBf16Tile, kBf16Tile, 32);
  EXPECT_DOUBLE_EQ(s.math, 256);
  // Both unpackers at once within the L1 port's 80 B/cycle; neither alone past its 64.
  EXPECT_DOUBLE_EQ(s.unpack, std::max(4 * kBf16Tile / 64, 6 * kBf16Tile / 80));
}

}  // namespace
}  // namespace spatial
