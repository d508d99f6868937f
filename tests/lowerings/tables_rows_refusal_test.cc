// Every refusal of the tables-and-heads and rows families, with its message: the seed's catalogue (quoted from
// seed 002), the preconditions the seed left unchecked and this port states, and the target resources each form
// needs (grayskull_e150 has no fp32 accumulator and no integer datapath).
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/reference.h"
#include "lowerings/rows/row_norms_blocked.h"
#include "lowerings/rows/softmax.h"
#include "tests/lowerings/table_specs.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

// test_tiny with one of its fields changed.
Target Tiny(const std::function<void(proto::Target&)>& edit) {
  proto::Target p = Shipped("test_tiny").proto();
  p.set_name("test_edited");
  edit(p);
  return Target(p);
}

proto::OpSpec L2(int64_t rows, int64_t cols, double eps = 1e-6) {
  proto::OpSpec s = Spec({"x"});
  s.mutable_l2norm()->set_rows(rows);
  s.mutable_l2norm()->set_cols(cols);
  s.mutable_l2norm()->set_eps(eps);
  return s;
}

proto::OpSpec Row(int64_t rows, int64_t cols, proto::FusedRowSpec::Reduce reduce, bool weight, bool residual,
                  bool bias, bool per_head = false) {
  proto::OpSpec s = Spec({"x"});
  if (weight) s.add_operands()->set_name("w");
  if (residual) s.add_operands()->set_name("r");
  if (bias) s.add_operands()->set_name("bias");
  auto* fr = s.mutable_fused_row();
  fr->set_rows(rows);
  fr->set_cols(cols);
  fr->set_reduce(reduce);
  fr->set_weight(weight);
  fr->set_residual(residual);
  fr->set_bias(bias);
  fr->set_per_head(per_head);
  fr->set_eps(1e-6);
  return s;
}

proto::OpSpec Softmax(int64_t rows, int64_t cols, bool sinks = false) {
  proto::OpSpec s = sinks ? Spec({"x", "sinks"}) : Spec({"x"});
  s.mutable_softmax()->set_rows(rows);
  s.mutable_softmax()->set_cols(cols);
  s.mutable_softmax()->set_sinks(sinks);
  return s;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// ── Tables and heads: the seed's messages ──

TEST(TablesRowsRefusalTest, TablesOfNothing) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(Transpose(0, 4), t), "NotLowered: a transpose of an empty tensor");
  EXPECT_EQ(RefusalOf(Transpose(3, 0), t), "NotLowered: a transpose of an empty tensor");
  const std::string slice = "NotLowered: a head slice of nothing, or a part past its group";
  EXPECT_EQ(RefusalOf(HeadSlice(0, 0, 1, 8), t), slice);   // every 0: no groups
  EXPECT_EQ(RefusalOf(HeadSlice(8, 0, 0, 16), t), slice);  // width 0
  EXPECT_EQ(RefusalOf(HeadSlice(8, 0, 4, 7), t), slice);   // n shorter than a group
  EXPECT_EQ(RefusalOf(HeadSlice(8, 5, 4, 16), t), slice);  // the part runs past its group
  EXPECT_EQ(RefusalOf(Join(1, 0, 4, 4), t), "NotLowered: a join whose widths do not divide among its heads");
  EXPECT_EQ(RefusalOf(Join(1, 3, 4, 6), t), "NotLowered: a join whose widths do not divide among its heads");
  EXPECT_EQ(RefusalOf(Join(1, 2, 4, 5), t), "NotLowered: a join whose widths do not divide among its heads");
  EXPECT_EQ(RefusalOf(Join(0, 2, 4, 4), t), "NotLowered: a join of nothing");
  EXPECT_EQ(RefusalOf(Join(2, 2, 0, 0), t), "NotLowered: a join of nothing");
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 2, 0, 4), t), "NotLowered: a per-head matmul of nothing");
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(0, 2, 4, 4), t), "NotLowered: a per-head matmul of nothing");
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 2, 4, 0), t), "NotLowered: a per-head matmul of nothing");
}

// The dense forms (a T x n matrix) move whole tiles: a row that is not whole groups, or a part that is not whole tiles
// (test_tiny's tile is 8 wide), is refused by name, never moved through the flat form's bands.
TEST(TablesRowsRefusalTest, DenseFormsNeedWholeTileGroups) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(HeadSlice(16, 8, 8, 3 * 40, 3), t),
            "NotLowered: a dense head slice (rows 3) needs rows of whole groups (n 120, every 16) and whole-tile "
            "every, from and width");
  EXPECT_EQ(RefusalOf(HeadSlice(12, 0, 8, 2 * 24, 2), t),
            "NotLowered: a dense head slice (rows 2) needs rows of whole groups (n 48, every 12) and whole-tile "
            "every, from and width");
  EXPECT_EQ(RefusalOf(Join(4, 2, 2 * 8, 2 * 4, true), t),
            "NotLowered: a dense join needs both per-head parts whole tiles (8 + 4)");
  EXPECT_EQ(RefusalOf(Join(4, 2, 2 * 8, 0, true), t),
            "NotLowered: a dense join needs both per-head parts whole tiles (8 + 0)");
  const absl::Status negative = Lower(HeadSlice(16, 8, 8, 64, -2), t).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(negative), "head_slice has a negative field (every 16, from 8, width 8, n 64, rows -2)");
}

// The seed picks the tiled per-head matmul before it checks the tile: a non-square tile refuses, never falls back.
TEST(TablesRowsRefusalTest, TiledHeadMatmulNeedsASquareTile) {
  Target wide = Tiny([](proto::Target& p) { p.mutable_tile()->set_rows(4); });
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 2, 8, 8), wide),
            "NotLowered: a per-head matmul in tiles on a tile that is not square — a weight tile's rows are the "
            "input's elements");
  EXPECT_TRUE(Lower(HeadMatmulSpec(2, 2, 8, 8), wide).ok());  // two rows: the flat form, which does not care
}

// A head's inputs and its weight column (a/8 tiles each, double-buffered) outgrow test_tiny's 88 KiB.
TEST(TablesRowsRefusalTest, TiledHeadMatmulThatDoesNotFitASite) {
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 1, 2048, 8), Shipped("test_tiny")),
            "NotLowered: a per-head matmul whose head's inputs and weight column do not fit a site");
  EXPECT_TRUE(Lower(HeadMatmulSpec(1, 1, 1024, 8), Shipped("test_tiny")).ok());
}

// ── Tables and heads: limits the seed leaves to downstream checks, stated ──

TEST(TablesRowsRefusalTest, FlatFormsWiderThanTheAccumulator) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(Transpose(3, 11), t),
            "AccTilesExceeded: stage 'transpose' of transpose_3x11 computes a page of 5 tiles; the accumulator holds "
            "4 fp32 tiles (target test_tiny)");
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(2, 3, 5, 7), t),
            "AccTilesExceeded: stage 'head_matmul' of head_matmul_2x3x5x7 computes a page of 6 tiles; the "
            "accumulator holds 4 fp32 tiles (target test_tiny)");
}

// Flat and column-blocked forms load every operand whole: one that outgrows a site is refused, not emitted.
TEST(TablesRowsRefusalTest, FlatFormsWhoseOperandsDoNotFitASite) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(HeadSlice(3, 1, 1, 3000), t),
            "NotLowered: a flat head slice whose operands, loaded whole, need 128256 bytes of a site's 90112");
  EXPECT_EQ(RefusalOf(Join(1, 400, 1200, 2000), t),
            "NotLowered: a flat join whose operands, loaded whole, need 129024 bytes of a site's 90112");
}

// The column table's offsets ride the target's index integer: none holding them is MissingPrecision.
TEST(TablesRowsRefusalTest, ColumnTableNeedsAnIndexInteger) {
  Target int8_index = Tiny([](proto::Target& p) {
    p.mutable_datapaths()->clear_index_precisions();
    p.mutable_datapaths()->add_index_precisions(proto::INT8);
  });
  // 50 results = 7 tiles, blocks of 1: span 56, and the bounds up to 50: offsets up to 112 fit int8...
  EXPECT_TRUE(Lower(HeadSlice(5, 0, 1, 250), int8_index).ok());
  // ... 90 results = 12 tiles: span 96, offsets up to 192 do not.
  EXPECT_EQ(RefusalOf(HeadSlice(5, 0, 1, 450), int8_index),
            "MissingPrecision: an index integer holding 192 (target test_edited)");
  // The tiled join's tables: blocks and block widths.
  EXPECT_TRUE(Lower(Join(1, 1, 8, 8), int8_index).ok());
}

// ── Rows: the seed's messages ──

// The seed's "a composed layernorm row op (or a softmax with a weight, residual or bias) — no flat twin yet" is no
// longer reached: the flat layer norm is this port's extension (rows_test.cc checks it).
TEST(TablesRowsRefusalTest, FlatTwinRefusals) {
  const Target& t = Shipped("test_tiny");
  EXPECT_TRUE(Lower(Row(2, 8, proto::FusedRowSpec::LAYER_NORM, true, false, false), t).ok());
  EXPECT_EQ(RefusalOf(Row(2, 8, proto::FusedRowSpec::RMS_NORM, true, false, true), t),
            "NotLowered: a composed rmsnorm with a bias term");
  EXPECT_EQ(RefusalOf(Row(2, 8, proto::FusedRowSpec::RMS_NORM, false, true, true), t),
            "NotLowered: a composed rmsnorm with a bias term");
}

TEST(TablesRowsRefusalTest, StreamedRmsNormRefusals) {
  const Target& t = Shipped("test_tiny");
  // A row wider than the accumulator takes the streamed form, which streams rmsnorm only.
  EXPECT_EQ(RefusalOf(Row(1, 40, proto::FusedRowSpec::LAYER_NORM, true, false, false), t),
            "NotLowered: a blocked softmax or layernorm row op — only rmsnorm streams today");
  EXPECT_EQ(RefusalOf(Row(1, 40, proto::FusedRowSpec::RMS_NORM, true, false, true), t),
            "NotLowered: a blocked rmsnorm with a bias term");
  absl::StatusOr<Composition> none = BlockedRmsNorm(Row(0, 40, proto::FusedRowSpec::RMS_NORM, true, false, false), t);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(Message(none.status()), "NotLowered: a blocked rmsnorm over no rows");
  // Its sum of squares is a matrix operand: the matrix engine must take the squares' precision.
  Target fp16_matrix = Tiny([](proto::Target& p) { p.mutable_datapaths()->set_matrix_in(proto::FP16); });
  EXPECT_EQ(RefusalOf(Row(1, 40, proto::FusedRowSpec::RMS_NORM, true, false, false), fp16_matrix),
            "MissingPrecision: a matrix engine taking bf16 for a streamed rmsnorm's sum of squares (target "
            "test_edited)");
}

// ── Rows: the seed's unchecked preconditions, stated ──

TEST(TablesRowsRefusalTest, PerHeadFormsNeedWholeTileHeads) {
  const Target& t = Shipped("test_tiny");
  // 8 heads of 12: a row of 96 needs blocking, a head does not, but head h would start mid-tile.
  EXPECT_EQ(RefusalOf(L2(8, 12), t),
            "NotLowered: a l2norm whose heads of 12 are not whole tiles of 8, at a width that needs blocking");
  EXPECT_EQ(RefusalOf(Row(8, 12, proto::FusedRowSpec::RMS_NORM, true, false, false, true), t),
            "NotLowered: a per-head rmsnorm whose heads of 12 are not whole tiles of 8, at a width that needs "
            "blocking");
  // Token rows (per_head false) stream instead.
  EXPECT_TRUE(Lower(Row(8, 12, proto::FusedRowSpec::RMS_NORM, true, false, false, false), t).ok());
  // The per-head forms called directly check their own preconditions.
  absl::StatusOr<Composition> l2 = BlockedL2Norm(L2(8, 12), t);
  ASSERT_FALSE(l2.ok());
  EXPECT_EQ(Message(l2.status()), "NotLowered: a l2norm per head whose heads of 12 are not whole tiles of 8");
  absl::StatusOr<Composition> wide = BlockedL2Norm(L2(2, 40), t);
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(Message(wide.status()), "NotLowered: a l2norm per head whose heads of 40 are wider than the accumulator "
                                    "holds");
  absl::StatusOr<Composition> rms =
      BlockedHeadRms(Row(8, 16, proto::FusedRowSpec::RMS_NORM, true, true, false), t);
  ASSERT_FALSE(rms.ok());
  EXPECT_EQ(Message(rms.status()), "NotLowered: a per-head rmsnorm with a residual, a bias or another reduction");
  absl::StatusOr<Composition> ragged = BlockedHeadRms(Row(8, 12, proto::FusedRowSpec::RMS_NORM, true, false, false), t);
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(Message(ragged.status()), "NotLowered: a rmsnorm per head whose heads of 12 are not whole tiles of 8");
}

// The dense per-head form: heads that divide the rows (InvalidArgument, from the lowering and the reference alike),
// whole-tile heads no wider than the accumulator, and only the plain per-head rmsnorm.
TEST(TablesRowsRefusalTest, DensePerHeadRmsRefusals) {
  const Target& t = Shipped("test_tiny");
  auto dense = [](proto::OpSpec s, int64_t heads) {
    s.mutable_fused_row()->set_dense_heads(heads);
    return s;
  };
  const proto::OpSpec plain = Row(8, 16, proto::FusedRowSpec::RMS_NORM, true, false, false, true);
  for (int64_t heads : {3, -2}) {
    const absl::Status bad = absl::InvalidArgumentError(absl::StrCat(
        "fused_row.dense_heads (", heads, ") does not divide rows (8): the heads of every token row"));
    EXPECT_EQ(Lower(dense(plain, heads), t).status(), bad);
    EXPECT_EQ(ReferenceOp(dense(plain, heads), {}).status(), bad);
  }
  EXPECT_EQ(RefusalOf(dense(Row(8, 12, proto::FusedRowSpec::RMS_NORM, true, false, false, true), 2), t),
            "NotLowered: a rmsnorm per head whose heads of 12 are not whole tiles of 8");
  EXPECT_EQ(RefusalOf(dense(Row(8, 40, proto::FusedRowSpec::RMS_NORM, true, false, false, true), 2), t),
            "NotLowered: a rmsnorm per head whose heads of 40 are wider than the accumulator holds");
  for (const proto::OpSpec& s : {Row(8, 16, proto::FusedRowSpec::RMS_NORM, true, true, false, true),
                                 Row(8, 16, proto::FusedRowSpec::LAYER_NORM, true, false, true, true)}) {
    EXPECT_EQ(RefusalOf(dense(s, 2), t), "NotLowered: a per-head rmsnorm with a residual, a bias or another reduction");
  }
  EXPECT_EQ(RefusalOf(dense(Row(8, 16, proto::FusedRowSpec::RMS_NORM, true, false, false, false), 2), t),
            "NotLowered: a dense-heads norm that is not per-head (per_head false)");
}

// The flat chains' planes are rows x cols in one tile-high page: more rows than a tile has is refused.
TEST(TablesRowsRefusalTest, FlatRowsBeyondATile) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(L2(16, 2), t), "NotLowered: a flat l2norm over 16 rows, more than a tile's 8");
  EXPECT_EQ(RefusalOf(Softmax(9, 3), t), "NotLowered: a flat row softmax over 9 rows, more than a tile's 8");
  EXPECT_EQ(RefusalOf(Row(16, 2, proto::FusedRowSpec::RMS_NORM, true, false, false, true), t),
            "NotLowered: a flat per-head rmsnorm over 16 rows, more than a tile's 8");
}

// A per-head rmsnorm that only the streamed form could take: its rows x cols matrix is not a per-head
// activation's flat layout.
TEST(TablesRowsRefusalTest, PerHeadRowsNeverStream) {
  EXPECT_EQ(RefusalOf(Row(16, 128, proto::FusedRowSpec::RMS_NORM, true, true, false, true), Shipped("wormhole_n150")),
            "NotLowered: a per-head rmsnorm of 16 heads of 128 that needs the streamed form, whose rows x cols "
            "matrix is not the flat layout of a per-head activation");
  EXPECT_TRUE(
      Lower(Row(16, 128, proto::FusedRowSpec::RMS_NORM, true, true, false, false), Shipped("wormhole_n150")).ok());
}

TEST(TablesRowsRefusalTest, RowsWiderThanTheAccumulator) {
  const Target& t = Shipped("test_tiny");
  // A head wider than the accumulator: l2norm has no streamed form (the seed's neither).
  EXPECT_EQ(RefusalOf(L2(1, 40), t),
            "AccTilesExceeded: stage 'square' of l2norm_1x40 computes a page of 5 tiles; the accumulator holds 4 "
            "fp32 tiles (target test_tiny)");
  // A softmax streams its elementwise pages through Dst (as tt-metal's softmax kernel takes a row wider than Dst, and
  // as the router's does): a row wider than the accumulator lowers; one whose pages outgrow the site does not.
  EXPECT_TRUE(Lower(Softmax(1, 33), t).ok());
  EXPECT_EQ(RefusalOf(Softmax(1, 1000), t),
            "NotLowered: a flat row softmax whose operands, loaded whole, need 97024 bytes of a site's 90112");
}

// The transform's eps is in nano units: an eps that is not a whole number of them would be silently rounded.
TEST(TablesRowsRefusalTest, EpsilonsTheTransformCannotHold) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(L2(2, 4, 1.5e-10), t), "NotLowered: an epsilon of 1.5e-10 that is not a whole number of nano "
                                              "units");
  proto::OpSpec row = Row(2, 4, proto::FusedRowSpec::RMS_NORM, false, false, false);
  row.mutable_fused_row()->set_eps(1e-12);
  EXPECT_EQ(RefusalOf(row, t), "NotLowered: an epsilon of 1e-12 that is not a whole number of nano units");
  absl::StatusOr<Composition> negative = Lower(L2(2, 4, -1e-6), t);
  ASSERT_FALSE(negative.ok());
  EXPECT_FALSE(IsRefusal(negative.status()));
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Lower(L2(2, 4, 1e-5), t).ok());
  EXPECT_TRUE(Lower(L2(2, 4, 0.0), t).ok());
}

// ── Target resources ──

// Grayskull's accumulator is bf16 only and it stores no fp32: every section of these families folds or copies at
// the seed's F32 policy, so each refuses there by name.
TEST(TablesRowsRefusalTest, NoFp32AccumulatorOnGrayskull) {
  const Target& g = Shipped("grayskull_e150");
  EXPECT_EQ(RefusalOf(Transpose(2, 3), g),
            "MissingPrecision: an fp32 accumulator (Dst) for a transpose (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(HeadSlice(5, 0, 3, 20), g),
            "MissingPrecision: an fp32 accumulator (Dst) for a head slice (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(Join(1, 1, 3, 5), g),
            "MissingPrecision: an fp32 accumulator (Dst) for a join (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 2, 32, 32), g),
            "MissingPrecision: an fp32 accumulator (Dst) for a per-head matmul (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(L2(2, 4), g),
            "MissingPrecision: an fp32 accumulator (Dst) for an l2 normalization (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(Row(1, 1024, proto::FusedRowSpec::RMS_NORM, true, false, false), g),
            "MissingPrecision: an fp32 accumulator (Dst) for a row reduction (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(Softmax(2, 4), g),
            "MissingPrecision: an fp32 accumulator (Dst) for a row softmax (target grayskull_e150)");
}

TEST(TablesRowsRefusalTest, MissingDatapaths) {
  Target no_int = Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_elementwise_int(); });
  EXPECT_EQ(RefusalOf(Transpose(2, 3, false), no_int),
            "MissingCompute: an integer elementwise datapath (target test_edited)");
  EXPECT_TRUE(Lower(Transpose(2, 3, true), no_int).ok());
  Target no_float = Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_elementwise_float(); });
  const std::string missing = "MissingCompute: a float elementwise datapath (target test_edited)";
  EXPECT_EQ(RefusalOf(Transpose(2, 3, true), no_float), missing);
  EXPECT_EQ(RefusalOf(HeadSlice(5, 0, 3, 20), no_float), missing);
  EXPECT_EQ(RefusalOf(HeadSlice(16, 0, 8, 32), no_float), missing);
  EXPECT_EQ(RefusalOf(Join(1, 1, 3, 5), no_float), missing);
  EXPECT_EQ(RefusalOf(Join(1, 1, 8, 8), no_float), missing);
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 2, 3, 4), no_float), missing);
  EXPECT_EQ(RefusalOf(HeadMatmulSpec(1, 2, 8, 8), no_float), missing);
  EXPECT_EQ(RefusalOf(L2(2, 4), no_float), missing);
  EXPECT_EQ(RefusalOf(Row(2, 4, proto::FusedRowSpec::RMS_NORM, false, false, false), no_float), missing);
  EXPECT_EQ(RefusalOf(Softmax(2, 4), no_float), missing);
  // A softmax at the accumulator's width still needs the float datapath its chain runs on.
  absl::StatusOr<Composition> at_int =
      FlatSoftmaxRowsAt(OperandRef{"x", {}}, "y", 2, 4, "s", Precision::kInt32, std::nullopt, Shipped("test_tiny"));
  ASSERT_FALSE(at_int.ok());
  EXPECT_EQ(Message(at_int.status()), "MissingPrecision: a row softmax at int32 (target test_tiny)");
}

// Operand counts follow the spec: [x, weight?, residual?, bias?], [x, sinks?], [A, B], [X, W].
TEST(TablesRowsRefusalTest, OperandCounts) {
  const Target& t = Shipped("test_tiny");
  proto::OpSpec row = Row(2, 4, proto::FusedRowSpec::RMS_NORM, true, true, false);
  row.mutable_fused_row()->set_weight(false);
  EXPECT_EQ(RefusalOf(row, t), "NotLowered: fused_row takes 2 operands, got 3");
  proto::OpSpec sm = Softmax(2, 4);
  sm.mutable_softmax()->set_sinks(true);
  EXPECT_EQ(RefusalOf(sm, t), "NotLowered: softmax takes 2 operands, got 1");
  proto::OpSpec join = Join(1, 1, 3, 5);
  join.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(join, t), "NotLowered: join takes 2 operands, got 1");
  proto::OpSpec unspecified = Row(2, 4, proto::FusedRowSpec::REDUCE_UNSPECIFIED, false, false, false);
  absl::StatusOr<Composition> c = Lower(unspecified, t);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RefusalOf(L2(0, 4), t), "NotLowered: a l2norm of an empty tensor");
  EXPECT_EQ(RefusalOf(Softmax(2, 0), t), "NotLowered: a softmax of an empty tensor");
  EXPECT_EQ(RefusalOf(Row(2, 0, proto::FusedRowSpec::RMS_NORM, false, false, false), t),
            "NotLowered: a fused_row of an empty tensor");
}

}  // namespace
}  // namespace spatial::testing
