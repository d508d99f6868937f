#include "spatial/validate.h"

#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/spatial/io_test_program.h"

namespace spatial {
namespace {

using ::spatial::testing::RichComposition;
using ::spatial::testing::RichIds;
using ::testing::HasSubstr;

// Plants one fault in the (valid) rich composition and expects validation to name it.
class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override { c_ = RichComposition(&ids_); }
  Section& fold() { return c_.sections[0]; }
  Stage& stage(StageId i) { return c_.sections[0].stages[i]; }
  Generic& generic(StageId i) { return std::get<Generic>(stage(i).op); }
  Load& load(StageId i) { return std::get<Load>(stage(i).op); }
  Store& store(StageId i) { return std::get<Store>(stage(i).op); }

  // Every expected fragment must appear in the one error returned.
  void ExpectError(std::initializer_list<std::string> fragments) {
    absl::Status s = ValidateComposition(c_, 32, 32);
    ASSERT_FALSE(s.ok()) << "expected an error mentioning " << *fragments.begin();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& f : fragments) EXPECT_THAT(s.message(), HasSubstr(f));
  }

  Composition c_;
  RichIds ids_;
};

TEST_F(ValidateTest, RichProgramPasses) {
  EXPECT_TRUE(ValidateComposition(c_, 32, 32).ok()) << ValidateComposition(c_, 32, 32);
  EXPECT_TRUE(ValidateComposition(c_).ok());
  EXPECT_TRUE(ValidateSection(fold(), 32, 32).ok());
}

// Every precision the model names validates, in a tensor and a buffer; one past the last does not (bfp4_b, the
// newest, was once refused as unknown, so `lower` of a bfp4_b matmul failed).
TEST_F(ValidateTest, EveryNamedPrecisionIsKnown) {
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32, Precision::kBfp8B, Precision::kInt8,
                      Precision::kInt16, Precision::kInt32, Precision::kInt64, Precision::kBfp4B}) {
    fold().tensors[0].precision = p;
    fold().buffers[0].precision = p;
    EXPECT_TRUE(ValidateSection(fold(), 32, 32).ok()) << PrecisionName(p) << ": " << ValidateSection(fold(), 32, 32);
  }
  fold().tensors[0].precision = static_cast<Precision>(10);
  ExpectError({"unknown precision 10"});
}

// ── Ids in range ──

TEST_F(ValidateTest, StageInBufferOutOfRange) {
  stage(ids_.mix).ins[1] = 42;
  ExpectError({"section 'rich_fold' stage 'mix' (#7) ins[1]: buffer 42 out of range (expected 0..8"});
}

TEST_F(ValidateTest, StageOutBufferOutOfRange) {
  stage(ids_.mm).outs[0] = -1;
  ExpectError({"stage 'mm' (#8) outs[0]: buffer -1 out of range"});
}

TEST_F(ValidateTest, LoadTensorOutOfRange) {
  load(ids_.load_x).tensor = 7;
  ExpectError({"stage 'load_x' (#5) load.tensor: tensor 7 out of range (expected 0..6"});
}

TEST_F(ValidateTest, StoreTensorOutOfRange) {
  store(ids_.store_out).tensor = 100;
  ExpectError({"stage 'store_out' (#10) store.tensor: tensor 100 out of range"});
}

TEST_F(ValidateTest, EdgeEndpointsInRange) {
  fold().edges[2].to = 99;
  ExpectError({"section 'rich_fold' edges[2] to: stage 99 out of range"});
}

TEST_F(ValidateTest, EdgeBufferInRange) {
  fold().edges[0].buffer = 9;
  ExpectError({"edges[0] buffer: buffer 9 out of range"});
}

TEST_F(ValidateTest, EdgeSourceMustWriteTheBuffer) {
  fold().edges[0].from = ids_.load_idx2;
  ExpectError({"edges[0] from: stage 'load_idx2' (#1) does not write buffer 'idx_buf'"});
}

TEST_F(ValidateTest, EdgeSinkMustReadTheBuffer) {
  fold().edges[0].to = ids_.mix;
  ExpectError({"edges[0] to: stage 'mix' (#7) does not read buffer 'idx_buf'"});
}

TEST_F(ValidateTest, TripTensorInRange) {
  fold().trip->tensor = 11;
  ExpectError({"section 'rich_fold' trip tensor: tensor 11 out of range"});
}

TEST_F(ValidateTest, IndirectIndexBufferMustBeTheLoadInput) {
  load(ids_.gather).pattern.origin.indirect->index = ids_.sc;
  ExpectError({"stage 'gather' (#3) ins: expected [2]", "got [0]"});
}

TEST_F(ValidateTest, IndirectTermOperandInRange) {
  generic(ids_.mix).ins[1].indirect->operand = 3;
  ExpectError({"stage 'mix' (#7) generic.ins[1].indirect.operand: input slot 3 out of range (expected 0..2"});
}

TEST_F(ValidateTest, IndirectTermModulusPositive) {
  generic(ids_.mix).ins[1].indirect->modulus = 0;
  ExpectError({"generic.ins[1].indirect.modulus: expected at least 1"});
}

TEST_F(ValidateTest, IndirectTermsMustNotFormACycle) {
  generic(ids_.mix).ins[1].indirect->operand = 1;
  ExpectError({"generic.ins[1].indirect.operand", "cycle"});
}

// ── Per-kind arity ──

TEST_F(ValidateTest, LoadWritesOneBuffer) {
  stage(ids_.load_x).outs.push_back(ids_.wa);
  ExpectError({"stage 'load_x' (#5) outs: a Load writes exactly 1 buffer, got 2"});
}

TEST_F(ValidateTest, DirectLoadHasNoIns) {
  stage(ids_.load_x).ins.push_back(ids_.sc);
  ExpectError({"stage 'load_x' (#5) ins: expected []", "got [2]"});
}

TEST_F(ValidateTest, IndirectLoadReadsItsIndex) {
  stage(ids_.gather).ins.clear();
  ExpectError({"stage 'gather' (#3) ins: expected [0]"});
}

TEST_F(ValidateTest, StoreWritesNoBuffer) {
  stage(ids_.store_out).outs.push_back(ids_.res);
  ExpectError({"stage 'store_out' (#10) outs: a Store writes no buffer, got 1"});
}

TEST_F(ValidateTest, StoreReadsItsSource) {
  stage(ids_.store_out).ins.clear();
  ExpectError({"stage 'store_out' (#10) ins: a Store reads its source buffer"});
}

TEST_F(ValidateTest, IndirectStoreReadsSourceThenIndex) {
  std::swap(stage(ids_.store_cache).ins[0], stage(ids_.store_cache).ins[1]);
  ExpectError({"stage 'store_cache' (#11) ins: expected [1, 1]", "got [1, 3]"});
}

TEST_F(ValidateTest, GenericOneMapPerInput) {
  generic(ids_.mix).ins.pop_back();
  ExpectError({"stage 'mix' (#7) generic.ins: 2 maps for 3 input buffers"});
}

TEST_F(ValidateTest, GenericWritesOneBuffer) {
  stage(ids_.finish).outs.clear();
  ExpectError({"stage 'finish' (#9) outs: a Generic writes 1 buffer, got 0"});
}

TEST_F(ValidateTest, GenericBodyReadsOnlyItsInputs) {
  generic(ids_.finish).body = Add(Op(0), Op(4));
  ExpectError({"stage 'finish' (#9) generic.body: reads 5 input slots (BodySlotCount) but the stage has 2 ins"});
}

TEST_F(ValidateTest, GenericSelectOperandInRange) {
  generic(ids_.finish).body = Select(Pred::LtOperand(LoopVar::kCol, 2), Op(0), Op(1));
  ExpectError({"stage 'finish' (#9) generic.body: select compares against input slot x2 but the stage has 2 ins"});
}

TEST_F(ValidateTest, GenericBodyMustBeDefined) {
  generic(ids_.finish).body = Body();
  ExpectError({"generic.body: undefined"});
}

TEST_F(ValidateTest, GenericBodyNodesNeedTheirChildren) {
  BodyNode n;
  n.op = BodyOp::kAdd;
  n.a = Op(0);
  generic(ids_.finish).body = Body(std::make_shared<BodyNode>(n));
  ExpectError({"generic.body: Add node has no operand 'b'"});
}

TEST_F(ValidateTest, GenericRsqrtNeedsPositiveOver) {
  generic(ids_.finish).body = Unary(SfpuKind::Rsqrt(0, 0), Op(0));
  ExpectError({"generic.body: rsqrt{eps_nano=0,over=0}"});
}

TEST_F(ValidateTest, GenericShiftInRange) {
  generic(ids_.finish).body = Shr(Op(0), 64);
  ExpectError({"generic.body: shr by 64 (expected 0..63)"});
}

TEST_F(ValidateTest, MatmulTwoInsOneOut) {
  stage(ids_.mm).ins.push_back(ids_.xin);
  ExpectError({"stage 'mm' (#8) ins: expected 2 (A, B), got 3"});
}

TEST_F(ValidateTest, MatmulTileCountsPositive) {
  std::get<MatmulTiles>(stage(ids_.mm).op).k_tiles = 0;
  ExpectError({"stage 'mm' (#8) matmul.k_tiles: expected 1..65536, got 0"});
}

TEST_F(ValidateTest, MatmulPagesHoldTheirTiles) {
  std::get<MatmulTiles>(stage(ids_.mm).op).k_tiles = 2;
  ExpectError({"matmul A (ins[0]) page_tiles: buffer 'wa' has 1 tiles per page, expected at least 2 (m_tiles*k_tiles)"});
  auto& mm = std::get<MatmulTiles>(stage(ids_.mm).op);
  mm.k_tiles = 1;
  mm.n_tiles = 3;
  fold().buffers[ids_.acc].page_tiles = 3;
  ExpectError({"matmul B (ins[1]) page_tiles: buffer 'xin' has 1 tiles per page, expected at least 3 (k_tiles*n_tiles)"});
  fold().buffers[ids_.xin].page_tiles = 3;
  fold().buffers[ids_.acc].page_tiles = 2;
  ExpectError({"matmul C (outs[0]) page_tiles: buffer 'acc' has 2 tiles per page, expected at least 3"});
}

// ── Sizes ──

TEST_F(ValidateTest, TensorShapePositive) {
  fold().tensors[ids_.w].rows = 0;
  ExpectError({"section 'rich_fold' tensors[3] 'w' rows: expected 1..4294967296, got 0"});
}

TEST_F(ValidateTest, TensorElementsBounded) {
  fold().tensors[ids_.w].rows = int64_t{1} << 20;
  fold().tensors[ids_.w].cols = int64_t{1} << 13;
  ExpectError({"tensors[3] 'w' rows*cols: 1048576 x 8192 exceeds the limit of 4294967296 elements"});
}

TEST_F(ValidateTest, InitValuesFitTheTensor) {
  fold().tensors[ids_.idx].init.values.assign(5, 1);
  ExpectError({"tensors[1] 'idx' init.values: 5 values for 4 elements"});
}

TEST_F(ValidateTest, PageTilesBounded) {
  fold().buffers[ids_.res].page_tiles = (int64_t{1} << 16) + 1;
  ExpectError({"buffers[8] 'res' page_tiles: expected 1..65536, got 65537"});
}

TEST_F(ValidateTest, DepthBounded) {
  fold().buffers[ids_.carry].depth = 65;
  ExpectError({"buffers[4] 'carry' depth: expected 1..64, got 65"});
  fold().buffers[ids_.carry].depth = 0;
  ExpectError({"buffers[4] 'carry' depth: expected 1..64, got 0"});
}

TEST_F(ValidateTest, GenericPointsBounded) {
  auto& it = generic(ids_.finish).iters;
  it[0].extent = int64_t{1} << 20;
  it[1].extent = int64_t{1} << 15;
  ExpectError({"stage 'finish' (#9) generic.iters: the product of the extents exceeds the limit of 17179869184"});
}

TEST_F(ValidateTest, ExtentPositive) {
  generic(ids_.finish).iters[0].extent = 0;
  ExpectError({"generic.iters[0].extent: expected 1..17179869184, got 0"});
}

TEST_F(ValidateTest, ItemsPresentAndRectsPositive) {
  fold().items[0].out.w_t = 0;
  ExpectError({"section 'rich_fold' items[0] out.w_t: expected 1..4294967296, got 0"});
  fold().items.clear();
  ExpectError({"section 'rich_fold' items: empty"});
}

// An item folds at most the section's blocks (the loads are proven for those only); -1 is all of them.
TEST_F(ValidateTest, ItemBlocksWithinTheSectionsFold) {
  fold().items[0].blocks = 5;
  ExpectError({"section 'rich_fold' items[0] blocks: expected 0..4 (at most the section's num_blocks; -1 or unset: "
               "all of them), got 5"});
  fold().items[0].blocks = -2;
  ExpectError({"section 'rich_fold' items[0] blocks: expected 0..4 (at most the section's num_blocks; -1 or unset: "
               "all of them), got -2"});
  for (const int64_t ok : {0, 4, -1}) {
    fold().items[0].blocks = ok;
    EXPECT_TRUE(ValidateComposition(c_, 32, 32).ok()) << ok;
  }
}

// A stage run on each item's last blocks only (Stage.last_blocks) is a body compute stage that rewrites in place
// what it reads (on the blocks it skips, its buffers keep their pages): the carried mix may, nothing else may.
TEST_F(ValidateTest, LastBlocksOnlyOnAnInPlaceBodyComputeStage) {
  for (const int64_t ok : {1, 4, 9}) {
    stage(ids_.mix).last_blocks = ok;
    EXPECT_TRUE(ValidateComposition(c_, 32, 32).ok()) << ok << ": " << ValidateComposition(c_, 32, 32);
  }
  stage(ids_.mix).last_blocks = -1;
  ExpectError({"stage 'mix' (#7) last_blocks: expected 0..16777216, got -1"});
  stage(ids_.mix).last_blocks = 0;
  stage(ids_.init_carry).last_blocks = 1;
  ExpectError({"stage 'init_carry'", "last_blocks: set on a prologue stage (only a body stage runs on some fold "
               "blocks and not others)"});
  stage(ids_.init_carry).last_blocks = 0;
  stage(ids_.load_x).last_blocks = 1;
  ExpectError({"stage 'load_x' (#5) last_blocks: set on a Load or Store (only a compute stage that rewrites its "
               "buffers in place may skip blocks; a transfer runs on every block)"});
  stage(ids_.load_x).last_blocks = 0;
  stage(ids_.mm).last_blocks = 2;
  ExpectError({"stage 'mm' (#8) last_blocks: the stage writes buffer 'acc' without reading it: a stage run on the "
               "last blocks only must rewrite in place what it reads"});
}

TEST_F(ValidateTest, NumBlocksBounded) {
  fold().num_blocks = (int64_t{1} << 24) + 1;
  ExpectError({"section 'rich_fold' num_blocks: expected 1..16777216, got 16777217"});
}

TEST_F(ValidateTest, BodyLoadRunsTheSectionsBlocks) {
  load(ids_.load_x).num_blocks = 3;
  ExpectError({"stage 'load_x' (#5) load.num_blocks: expected 4", "got 3"});
  load(ids_.load_x).num_blocks = 4;
  load(ids_.load_idx).num_blocks = 4;
  ExpectError({"stage 'load_idx' (#0) load.num_blocks: expected 1"});
}

TEST_F(ValidateTest, MulticastAlongAnItemAxisOnly) {
  load(ids_.load_x).multicast = LoopVar::kItemY;
  EXPECT_TRUE(ValidateComposition(c_, 32, 32).ok());
  load(ids_.load_x).multicast = LoopVar::kKBlock;
  ExpectError({"stage 'load_x' (#5) load.multicast.axis: ITEM_X or ITEM_Y", "got KBLOCK"});
}

TEST_F(ValidateTest, BlockFitsThePage) {
  load(ids_.load_x).pattern.block_w = 2;
  ExpectError({"stage 'load_x' (#5) load.pattern.block_h*block_w: 1 x 2 = 2 tiles do not fit a page of 'xin' "
               "(page_tiles 1)"});
}

TEST_F(ValidateTest, StoreBlockFitsTheSourcePage) {
  store(ids_.store_out).pattern.block_h = 2;
  ExpectError({"stage 'store_out' (#10) store.pattern.block_h*block_w: 2 x 4 = 8 tiles do not fit a page of 'res'"});
}

TEST_F(ValidateTest, IndirectTileRangeNonEmpty) {
  load(ids_.gather).pattern.origin.indirect->lo = 4;
  ExpectError({"stage 'gather' (#3) load.pattern.origin.indirect.lo: admitted range [4, 3] is empty"});
}

// ── Loop variables ──

TEST_F(ValidateTest, GenericItersOnlyGenericAxes) {
  generic(ids_.finish).iters[0].var = LoopVar::kItemX;
  ExpectError({"stage 'finish' (#9) generic.iters[0].var: ITEM_X (expected ROW, COL or K)"});
}

TEST_F(ValidateTest, GenericAxisAtMostOnce) {
  generic(ids_.finish).iters[0].var = LoopVar::kCol;
  ExpectError({"generic.iters[1].var: COL appears twice"});
}

TEST_F(ValidateTest, MapsOnlyGenericAxes) {
  generic(ids_.mix).ins[0].terms[0].first = LoopVar::kItemY;
  ExpectError({"stage 'mix' (#7) generic.ins[0].terms[0].var: ITEM_Y in an element map"});
}

TEST_F(ValidateTest, MapsOnlyAxesOfTheSpace) {
  generic(ids_.mix).ins[0].terms[0].first = LoopVar::kK;
  ExpectError({"generic.ins[0].terms[0].var: K is not an axis of the iteration space"});
}

TEST_F(ValidateTest, OutMapNeverMentionsAReduceAxis) {
  generic(ids_.finish).out.terms.push_back({LoopVar::kCol, 1});
  ExpectError({"stage 'finish' (#9) generic.out.terms[1].var: COL is a Reduce axis"});
}

TEST_F(ValidateTest, SelectOnlyOnGenericAxes) {
  generic(ids_.finish).body = Select(Pred::Lt(LoopVar::kKBlock, 3), Op(0), Op(1));
  ExpectError({"generic.body: select on KBLOCK (expected ROW, COL or K)"});
}

TEST_F(ValidateTest, TileAddressesOnlyItemAndBlockVars) {
  load(ids_.load_x).pattern.origin.steps[0].first = LoopVar::kRow;
  ExpectError({"stage 'load_x' (#5) load.pattern.origin.steps[0].var: ROW in a tile address"});
}

TEST_F(ValidateTest, KBlockOnlyInBodyStages) {
  store(ids_.store_out).pattern.origin.steps.push_back({LoopVar::kKBlock, 1});
  ExpectError({"stage 'store_out' (#10) store.pattern.origin.steps[0].var: KBLOCK in phase epilogue"});
}

// ── Phases and fold ──

TEST_F(ValidateTest, BodyStagesNeedAFold) {
  fold().trip.reset();
  fold().num_blocks = 1;
  for (Stage& s : fold().stages) {
    if (auto* l = std::get_if<Load>(&s.op)) l->num_blocks = 1;
  }
  ExpectError({"stage 'load_x' (#5) phase: body stage in a section without a fold"});
}

TEST_F(ValidateTest, PhasesNonDecreasing) {
  stage(ids_.store_out).phase = Phase::kPrologue;
  ExpectError({"stage 'store_out' (#10) phase: prologue after epilogue"});
}

TEST_F(ValidateTest, TripTensorIsInteger) {
  fold().trip->tensor = ids_.x;
  ExpectError({"section 'rich_fold' trip tensor: 'x' is bf16"});
}

TEST_F(ValidateTest, TripPerPositive) {
  fold().trip->per = 0;
  ExpectError({"trip per: expected at least 1, got 0"});
}

TEST_F(ValidateTest, TripRangeNonEmpty) {
  fold().trip->lo = 200;
  ExpectError({"trip lo: admitted range [200, 128] is empty"});
}

TEST_F(ValidateTest, TripElemInsideTheTensor) {
  fold().trip->elem = 1;
  ExpectError({"trip elem: expected 0..0, got 1"});
}

// ── Names and composition ──

TEST_F(ValidateTest, TensorNamesUniqueInASection) {
  fold().tensors[ids_.out].name = "x";
  ExpectError({"tensors[6] 'x' name: repeats tensors[0]"});
}

TEST_F(ValidateTest, TensorNameMeansOneShapeAcrossSections) {
  c_.sections[1].tensors[0].cols = 64;
  ExpectError({"section 'consume_cache' (#1) tensor 'cache' rows x cols x precision: 4 x 64 x bf16, but section "
               "'rich_fold' (#0) declares it 4 x 128 x bf16"});
}

TEST_F(ValidateTest, TensorNameMeansOnePrecisionAcrossSections) {
  c_.sections[1].tensors[0].precision = Precision::kFp32;
  ExpectError({"tensor 'cache' rows x cols x precision: 4 x 128 x fp32"});
}

TEST_F(ValidateTest, StateOrderNamesAStateTensorOfItsSection) {
  c_.state_order[0].tensor = "out";
  ExpectError({"state_order[0] tensor: 'out' is Output in section 'rich_fold' (expected State)"});
  c_.state_order[0].tensor = "nope";
  ExpectError({"state_order[0] tensor: 'nope' is not a tensor of section 'rich_fold'"});
  c_.state_order[0].tensor = "cache";
  c_.state_order[0].section = 2;
  ExpectError({"state_order[0] section: 2 out of range (expected 0..1)"});
}

TEST_F(ValidateTest, TileShapeBounded) {
  absl::Status s = ValidateComposition(c_, 0, 32);
  EXPECT_THAT(s.message(), HasSubstr("composition 'rich' tile_rows: expected 1..1024, got 0"));
}

TEST_F(ValidateTest, CompositionNeedsASection) {
  c_.sections.clear();
  c_.state_order.clear();
  ExpectError({"composition 'rich' sections: empty"});
}

TEST_F(ValidateTest, FirstErrorWins) {
  // Two faults: the earlier stage's is reported.
  stage(ids_.mm).outs[0] = 77;
  stage(ids_.load_idx).outs[0] = 66;
  ExpectError({"stage 'load_idx' (#0) outs[0]: buffer 66"});
}

}  // namespace
}  // namespace spatial
