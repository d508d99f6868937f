#include "spatial/print.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spatial/maps.h"
#include "tests/spatial/io_test_program.h"

namespace spatial {
namespace {

using ::spatial::testing::RichComposition;
using ::spatial::testing::RichIds;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(Print, Maps) {
  EXPECT_EQ(MapToString(WithIndirect(Map2(12, 32, 1), 1, 4, 16)), "12 + 32*ROW + COL [+ 4*x1 %<16]");
  EXPECT_EQ(MapToString(ConstMap()), "0");
  EXPECT_EQ(MapToString(PerRowMap(64)), "64*ROW");
  EXPECT_EQ(MapToString(Map2(-3, -1, 2)), "-3 - ROW + 2*COL");
  EXPECT_EQ(MapToString(ElemAccess{0, {{LoopVar::kCol, -5}}, std::nullopt}), "-5*COL");
}

TEST(Print, TileAddresses) {
  EXPECT_EQ(TileAddrToString(TileAddr{3, {{LoopVar::kItemX, 4}}, IndirectTile{7, 2, 0, 9}}),
            "3 + 4*ITEM_X [+ 2*@7 in [0, 9]]");
  EXPECT_EQ(TileAddrToString(TileAddr{0, {{LoopVar::kKBlock, 1}}, std::nullopt}), "KBLOCK");
}

TEST(Print, RichCompositionKeyLines) {
  const std::string text = PrintComposition(RichComposition());
  const char* lines[] = {
      "composition 'rich' target 'wormhole_n150' tile 32x32, 2 sections\n",
      "state_order\n  cache: read in #0 'rich_fold'\n  cache: write in #0 'rich_fold'\n  cache: read in #1 'consume_cache'\n",
      "section 'rich_fold' {\n  claim approx \"bf16 storage, fp32 accumulation\"\n  acc fp32\n",
      "  fold trip ceil((pos[0] + 31) / 32) admit [1, 128], at most 4 blocks\n",
      "  plan per_site 1x4 grid 1x1 blocks 4 block_k_tiles 1 osh 1 osw 4 ibw 1 pack_accumulate pack_row_sums "
      "stream_rows\n",
      "    %0 x: Input 1x128 bf16 init external\n",
      "    %1 idx: Param 1x4 int32 init values[4]{0, 1, 2, 3}\n",
      "    %2 scaler: Param 32x32 bf16 init const(1)\n",
      "    %3 w: Param 32x128 fp32 init float_values[3]{0.5, -1.25, 3}\n",
      "    %4 cache: State 4x128 bf16 init zero\n",
      "    #4 carry: 2 x 1 tiles fp32 scratch\n",
      "    #8 res: 2 x 4 tiles bf16 buffer\n",
      "    [3] prologue Load 'gather' cache[tile 0 [+ 1*@idx_buf in [0, 3]], block 1x1] index (idx_buf) -> "
      "(gathered)\n",
      "    [7] body Generic 'mix' (xin, gathered, carry) -> (carry)\n"
      "          iters [ROW 1, COL 32]\n"
      "          ins[0] xin[32*ROW + COL]\n"
      "          ins[1] gathered[12 + COL [+ 4*x2 %<16]]\n"
      "          ins[2] carry[32*ROW + COL]\n"
      "          out    carry[32*ROW + COL]\n"
      "          body (COL < 8 ? rsqrt{eps_nano=1000,over=128}((x0 + x1)) : ",
      "    [8] body MatmulTiles 'mm' (wa, xin) -> (acc) m=1 n=1 k=1 accumulate transpose_b\n",
      "          iters [ROW 32, COL 32 sum]\n",
      "          out    res[32*ROW]\n"
      "          body (x0 * exp(x1))\n",
      "    [10] epilogue Store 'store_out' (res) -> out[tile 0, block 1x4 stride_w 1]\n",
      "    [11] epilogue Store 'store_cache' (gathered, idx_buf2) -> cache[tile 0 [+ 1*@idx_buf2 in [0, 3]], block 1x1]\n",
      "  items 1: #0 (0,0) -> [0,0 1x4] blocks 3\n",
      "    #0 load_idx -[idx_buf]-> #3 gather\n",
      "    #9 finish -[res]-> #10 store_out\n",
      "section 'consume_cache' {\n  claim exact\n  acc fp32\n  fold none\n",
      "    [0] prologue Load 'load_cache' cache[tile ITEM_X, block 1x1] -> (cb)\n",
  };
  for (const char* line : lines) EXPECT_THAT(text, HasSubstr(line));
  EXPECT_THAT(text, HasSubstr("    [5] body Load 'load_x' x[tile KBLOCK, block 1x1] x4 blocks -> (xin)\n"));
  EXPECT_THAT(text, HasSubstr("    [6] body Load 'load_w' w[tile KBLOCK, block 1x1] x4 blocks -> (wa)\n"));
}

// A stage run on each item's last blocks only says so (Stage.last_blocks).
TEST(Print, AStageOnTheLastBlocksSaysSo) {
  RichIds ids;
  Composition c = RichComposition(&ids);
  c.sections[0].stages[ids.mix].last_blocks = 1;
  EXPECT_THAT(PrintComposition(c),
              HasSubstr("    [7] body Generic 'mix' (each item's last block only) (xin, gathered, carry) -> (carry)\n"));
  c.sections[0].stages[ids.mix].last_blocks = 3;
  EXPECT_THAT(PrintComposition(c),
              HasSubstr("    [7] body Generic 'mix' (each item's last 3 blocks only) (xin, gathered, carry) -> (carry)\n"));
}

TEST(Print, Deterministic) {
  EXPECT_EQ(PrintComposition(RichComposition()), PrintComposition(RichComposition()));
}

TEST(Print, ManyItemsAreSummarized) {
  Composition c = RichComposition();
  c.sections[1].items = ItemsPerTile(10);
  const std::string text = PrintComposition(c);
  EXPECT_THAT(text, HasSubstr("  items 10: #0 (0,0) -> [0,0 1x1]; #1 (0,1) -> [0,1 1x1]; #2 (0,2) -> [0,2 1x1]; "
                              "#3 (0,3) -> [0,3 1x1]; ... and 6 more\n"));
  EXPECT_THAT(text, Not(HasSubstr("#4 (0,4)")));
}

TEST(Print, MalformedProgramsPrintWithoutCrashing) {
  RichIds ids;
  Composition c = RichComposition(&ids);
  Section& s = c.sections[0];
  s.stages[ids.mix].ins[1] = 42;
  s.edges[0].from = -7;
  BodyNode broken;
  broken.op = BodyOp::kAdd;
  broken.a = Op(0);  // b missing: BodyToString would dereference null
  std::get<Generic>(s.stages[ids.finish].op).body = Body(std::make_shared<BodyNode>(broken));
  const std::string text = PrintComposition(c);
  EXPECT_THAT(text, HasSubstr("(xin, <bad buffer 42>, carry) -> (carry)"));
  EXPECT_THAT(text, HasSubstr("<bad stage -7> -[idx_buf]-> #3 gather"));
  EXPECT_THAT(text, HasSubstr("body (2 nodes, root last)\n            %0 = x0\n            %1 = ADD %0, %-1\n"));
}

TEST(Print, LargeSharedBodiesPrintFlattened) {
  Body b = Op(0);
  for (int i = 0; i < 20; ++i) b = Add(b, b);  // 2^20 nodes inline, 21 flattened
  RichIds ids;
  Composition c = RichComposition(&ids);
  std::get<Generic>(c.sections[0].stages[ids.finish].op).body = b;
  const std::string text = PrintComposition(c);
  EXPECT_THAT(text, HasSubstr("body (21 nodes, root last)\n"));
  EXPECT_THAT(text, HasSubstr("%20 = ADD %19, %19\n"));
}

}  // namespace
}  // namespace spatial
