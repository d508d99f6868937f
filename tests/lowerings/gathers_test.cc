// Row and rows gathers against their op references on the VM (exactly: a gather moves values), validated and certified
// on every shipped target that lowers them, in every form the seed picks (flat, whole-tile rows, dense), with literal
// and named indices at both edges of the table; and every refusal and run-time fault of the family.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/toolkit/index.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

// A table's values and its indices: every tensor named "i" holds `index`, "idx" holds indices that visit both
// edges of the table (1 and rows first), everything else is table data (reals, or integers for an integer table).
Draw GatherDraw(int64_t rows, int64_t index, bool is_float) {
  auto next = std::make_shared<int64_t>(0);
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "i") return static_cast<double>(index);
    if (name == "idx") {
      const int64_t k = (*next)++;
      return static_cast<double>(k == 0 ? 1 : k == 1 ? rows : r.Int(1, rows));
    }
    return is_float ? r.Real(-8, 8) : static_cast<double>(r.Int(-100000, 100000));
  };
}

// Row `index` (0: named, read from operand "i") of a rows x cols table "t".
proto::OpSpec RowGather(int64_t rows, int64_t cols, int64_t literal, bool is_float, bool dense) {
  proto::OpSpec s = literal > 0 ? Spec({"t"}) : Spec({"t", "i"});
  auto* g = s.mutable_row_gather();
  g->set_rows(rows);
  g->set_cols(cols);
  if (literal > 0) {
    g->mutable_index()->set_literal(literal);
  } else {
    g->mutable_index()->set_named("i");
  }
  g->set_float_(is_float);
  g->set_dense(dense);
  return s;
}

proto::OpSpec RowsGather(int64_t rows, int64_t cols, int64_t count, bool is_float) {
  proto::OpSpec s = Spec({"t", "idx"});
  auto* g = s.mutable_rows_gather();
  g->set_rows(rows);
  g->set_cols(cols);
  g->set_count(count);
  g->set_float_(is_float);
  return s;
}

struct GatherCase {
  const char* target;
  int64_t rows, cols;
  bool dense;
  std::string section;
  size_t items;
};

// Each shape four ways: a literal and a named index, each at the table's first and last row; float and integer.
void CheckRowGathers(const std::vector<GatherCase>& cases) {
  for (const GatherCase& k : cases) {
    for (bool is_float : {true, false}) {
      for (int64_t at : {int64_t{1}, k.rows}) {
        for (bool named : {false, true}) {
          proto::OpSpec spec = RowGather(k.rows, k.cols, named ? 0 : at, is_float, k.dense);
          SCOPED_TRACE(spec.ShortDebugString() + " on " + k.target);
          Composition c = ThreeWay(spec, Shipped(k.target), GatherDraw(k.rows, at, is_float), 0.0, at + k.cols);
          ASSERT_EQ(c.sections.size(), 1u);
          EXPECT_EQ(c.sections[0].name, k.section);
          EXPECT_EQ(c.sections[0].items.size(), k.items);
          EXPECT_EQ(c.sections[0].claim.exact, !is_float);
        }
      }
    }
  }
}

TEST(GathersTest, RowGatherFlat) {
  // Rows narrower than a tile (8 on test_tiny): the table held whole, one Generic.
  CheckRowGathers({{"test_tiny", 1, 1, false, "row_gather_1x1", 1},
                   {"test_tiny", 5, 3, false, "row_gather_5x3", 1},
                   {"test_tiny", 7, 5, false, "row_gather_7x5", 1},
                   {"test_tiny", 3, 10, false, "row_gather_3x10", 1},
                   {"test_tiny", 9, 31, false, "row_gather_9x31", 1},
                   {"test_tiny", 2, 9, false, "row_gather_2x9", 1},
                   {"wormhole_n150", 6, 100, false, "row_gather_6x100", 1}});
}

TEST(GathersTest, RowGatherWholeTileRows) {
  // Exactly the row's tiles move, RowBlock(row_t) tiles an item: 5 tiles of 8 -> 5 items of 1, 8 -> 2 of 4.
  CheckRowGathers({{"test_tiny", 1, 8, false, "row_gather_1x8", 1},
                   {"test_tiny", 4, 16, false, "row_gather_4x16", 1},
                   {"test_tiny", 6, 40, false, "row_gather_6x40", 5},
                   {"test_tiny", 3, 64, false, "row_gather_3x64", 2},
                   // Qwen3-0.6B's embedding row (hidden 1024: 32 tiles, 4 items of 8) and Qwen3-8B's (4096).
                   {"wormhole_n150", 40, 1024, false, "row_gather_40x1024", 4},
                   {"wormhole_n150", 3, 4096, false, "row_gather_3x4096", 16}});
}

TEST(GathersTest, RowGatherDense) {
  // A stacked batch: tile row ⌊r/8⌋, in-tile row r mod 8; rows and columns that are not tile multiples.
  CheckRowGathers({{"test_tiny", 1, 1, true, "row_gather_1x1_dense", 1},
                   {"test_tiny", 10, 5, true, "row_gather_10x5_dense", 1},
                   {"test_tiny", 17, 12, true, "row_gather_17x12_dense", 1},
                   {"test_tiny", 9, 8, true, "row_gather_9x8_dense", 1},
                   {"test_tiny", 8, 3, true, "row_gather_8x3_dense", 1},
                   {"test_tiny", 20, 40, true, "row_gather_20x40_dense", 5},
                   // A KV cache of Qwen3-0.6B (8 KV heads of 128) and of Qwen3-8B's query width, 33 positions.
                   {"wormhole_n150", 33, 1024, true, "row_gather_33x1024_dense", 4},
                   {"blackhole_p150", 70, 4096, true, "row_gather_70x4096_dense", 16}});
}

struct RowsCase {
  const char* target;
  int64_t rows, cols, count;
  size_t items;
};

TEST(GathersTest, RowsGather) {
  const std::vector<RowsCase> cases = {
      // Narrow rows: the table and the block held whole by one item.
      {"test_tiny", 1, 1, 1, 1},
      {"test_tiny", 5, 3, 4, 1},
      {"test_tiny", 4, 7, 2, 1},
      {"test_tiny", 8, 4, 8, 1},
      {"test_tiny", 3, 5, 6, 1},
      {"test_tiny", 10, 3, 10, 1},
      {"wormhole_n150", 12, 20, 6, 1},
      {"test_tiny", 2, 2, 3, 1},
      {"test_tiny", 6, 5, 1, 1},
      {"test_tiny", 1, 7, 4, 1},
      // Whole-tile rows: item (k, b) per row and block.
      {"test_tiny", 5, 8, 3, 3},
      {"test_tiny", 4, 16, 6, 6},
      {"test_tiny", 7, 40, 2, 10},
      {"test_tiny", 3, 64, 2, 4},
      {"test_tiny", 1, 8, 5, 5},
      {"test_tiny", 2, 24, 4, 4},
      {"test_tiny", 9, 8, 1, 1},
      {"test_tiny", 6, 32, 3, 3},
      // Qwen3-0.6B's embedding lookup of a 4-token prompt, and Qwen3-8B's of 2.
      {"wormhole_n150", 50, 1024, 4, 16},
      {"blackhole_p150", 6, 4096, 2, 32},
  };
  int checked = 0;
  for (const RowsCase& k : cases) {
    for (bool is_float : {true, false}) {
      proto::OpSpec spec = RowsGather(k.rows, k.cols, k.count, is_float);
      SCOPED_TRACE(spec.ShortDebugString() + " on " + k.target);
      Composition c = ThreeWay(spec, Shipped(k.target), GatherDraw(k.rows, 0, is_float), 0.0, k.rows * 3 + k.count);
      ASSERT_EQ(c.sections.size(), 1u);
      EXPECT_EQ(c.sections[0].name, absl::StrCat("rows_gather_", k.count, "x", k.rows, "x", k.cols));
      EXPECT_EQ(c.sections[0].items.size(), k.items);
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// ── Run-time faults: a named index outside the table faults where it is read, naming the stage and the value ──

// Lowers `spec` on `target` and runs it with every input drawn by `draw`; returns the VM's error.
absl::Status RunWith(const proto::OpSpec& spec, const Target& target, const Draw& draw) {
  absl::StatusOr<Composition> c = Lower(spec, target);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return c.status();
  absl::StatusOr<TensorMap> r = RunComposition(*c, target.tile_rows(), target.tile_cols(), MakeInputs(*c, draw, 3));
  return r.status();
}

void ExpectFault(const absl::Status& s, const std::string& stage, const std::string& value) {
  EXPECT_TRUE(absl::StartsWith(s.message(), "IndexOutOfRange: ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("stage '", stage, "'"))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("index value ", value))) << s;
}

TEST(GathersTest, NamedRowOutsideTheTableFaults) {
  const Target& tiny = Shipped("test_tiny");
  struct F {
    proto::OpSpec spec;
    int64_t rows;
  };
  for (const F& f : {F{RowGather(5, 3, 0, true, false), 5}, F{RowGather(6, 40, 0, true, false), 6},
                     F{RowGather(17, 12, 0, true, true), 17}}) {
    SCOPED_TRACE(f.spec.ShortDebugString());
    const std::string past = f.spec.row_gather().dense()           ? "row_gather"
                             : f.spec.row_gather().cols() % 8 == 0 ? "row_index"
                                                                   : "row_biased";
    // One past the last row: the guard that holds the index to the table before it is decremented.
    ExpectFault(RunWith(f.spec, tiny, GatherDraw(f.rows, f.rows + 1, true)), past, std::to_string(f.rows + 1));
    ExpectFault(RunWith(f.spec, tiny, GatherDraw(f.rows, -7, true)), past, "-7");
    // Row 0: its −1 is caught by the next check (the seed's second guard, or the movement's bound).
    const std::string zero = f.spec.row_gather().dense()           ? "gather_tile_row"
                             : f.spec.row_gather().cols() % 8 == 0 ? "gather_row"
                                                                   : "row_guarded";
    ExpectFault(RunWith(f.spec, tiny, GatherDraw(f.rows, 0, true)), zero, "-1");
  }
}

TEST(GathersTest, RowsIndexOutsideTheTableFaults) {
  const Target& tiny = Shipped("test_tiny");
  // Every index is data, checked where it is read: a bad one anywhere in I faults.
  for (int64_t cols : {3, 16}) {
    proto::OpSpec spec = RowsGather(4, cols, 3, true);
    SCOPED_TRACE(spec.ShortDebugString());
    const bool tiles = cols % 8 == 0;
    auto bad = [](int64_t v) {
      return [v](const std::string& name, Rng& r) -> double {
        if (name == "idx") return static_cast<double>(v);
        return r.Real(-1, 1);
      };
    };
    ExpectFault(RunWith(spec, tiny, bad(5)), tiles ? "index_biased" : "rows_biased", "5");
    ExpectFault(RunWith(spec, tiny, bad(0)), tiles ? "row_index" : "rows_guarded", "-1");
  }
}

// ── Refusals ──

TEST(GathersTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(RowGather(0, 4, 1, true, false), tiny), "NotLowered: a row gather from an empty table");
  EXPECT_EQ(RefusalOf(RowGather(4, 0, 1, true, true), tiny), "NotLowered: a row gather from an empty table");
  const std::string outside = absl::StrCat("NotLowered: ", std::string(kLiteralRowOutside));
  for (bool dense : {false, true}) {
    for (int64_t cols : {3, 16}) {
      for (int64_t literal : {-1, 0, 6}) {
        proto::OpSpec spec = RowGather(5, cols, 1, true, dense);
        spec.mutable_row_gather()->mutable_index()->set_literal(literal);
        EXPECT_EQ(RefusalOf(spec, tiny), outside);
      }
    }
  }
  EXPECT_EQ(RefusalOf(RowsGather(0, 3, 2, true), tiny),
            "NotLowered: a rows gather from an empty table, or of no indices");
  EXPECT_EQ(RefusalOf(RowsGather(3, 3, 0, true), tiny),
            "NotLowered: a rows gather from an empty table, or of no indices");
  proto::OpSpec dense = RowsGather(3, 8, 2, true);
  dense.mutable_rows_gather()->set_dense(true);
  EXPECT_EQ(RefusalOf(dense, tiny), "NotLowered: a rows gather from a table laid out as a matrix");
  const std::string wide =
      "NotLowered: a rows gather of rows narrower than a tile holds its table and its block whole, and this one is "
      "wider than a site's page";
  EXPECT_EQ(RefusalOf(RowsGather(11, 3, 2, true), tiny), wide);  // the table: 33 elements, 5 tiles of 8 > 4
  EXPECT_EQ(RefusalOf(RowsGather(2, 3, 11, true), tiny), wide);  // the block
  // A flat row wider than a page: the gathered row is one compute page.
  EXPECT_TRUE(absl::StartsWith(RefusalOf(RowGather(2, 33, 1, true, false), tiny), "AccTilesExceeded: "));
  proto::OpSpec two = RowGather(4, 4, 1, true, false);
  two.add_operands()->set_name("extra");
  EXPECT_EQ(RefusalOf(two, tiny), "NotLowered: row_gather takes 1 operand, got 2");
  proto::OpSpec one = RowsGather(4, 4, 2, true);
  one.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(one, tiny), "NotLowered: rows_gather takes 2 operands, got 1");
}

TEST(GathersTest, IndexSpaceBeyondTheTargetIsRefused) {
  const Target& tiny = Shipped("test_tiny");
  // A declared index past every integer the target has must still be HELD to be refused: it is refused instead.
  proto::OpSpec spec = RowGather(4, 3, 0, true, false);
  spec.mutable_operands(1)->mutable_fill()->set_const_i(int64_t{1} << 40);
  EXPECT_TRUE(absl::StartsWith(RefusalOf(spec, tiny), "MissingPrecision: an index integer holding "))
      << RefusalOf(spec, tiny);
  proto::OpSpec table = RowGather(4, 16, 1, false, false);  // an integer table whose values need 64 bits
  table.mutable_operands(0)->mutable_fill()->set_const_i(int64_t{1} << 40);
  EXPECT_TRUE(absl::StartsWith(RefusalOf(table, tiny), "MissingPrecision: ")) << RefusalOf(table, tiny);
}

TEST(GathersTest, GrayskullRefuses) {
  // No fp32 accumulator and no integer datapath: every form is refused, never lowered into a program it cannot run.
  const Target& gs = Shipped("grayskull_e150");
  EXPECT_EQ(RefusalOf(RowGather(4, 64, 2, true, false), gs),
            "MissingPrecision: an fp32 accumulator (Dst) for a row gather (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(RowGather(4, 64, 2, false, true), gs),
            "MissingCompute: an integer elementwise datapath for a row gather (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(RowsGather(4, 3, 2, true), gs),
            "MissingPrecision: an fp32 accumulator (Dst) for a rows gather (target grayskull_e150)");
}

TEST(GathersTest, MalformedSpecsAreErrors) {
  const Target& tiny = Shipped("test_tiny");
  proto::OpSpec unset = Spec({"t"});
  unset.mutable_row_gather()->set_rows(2);
  unset.mutable_row_gather()->set_cols(2);
  EXPECT_EQ(Lower(unset, tiny).status(), absl::InvalidArgumentError("row_gather.index is unset"));
  proto::OpSpec misnamed = RowGather(4, 3, 0, true, false);
  misnamed.mutable_row_gather()->mutable_index()->set_named("j");
  EXPECT_EQ(Lower(misnamed, tiny).status().code(), absl::StatusCode::kInvalidArgument);
  proto::OpSpec huge = RowGather(int64_t{1} << 40, int64_t{1} << 40, 1, true, false);
  EXPECT_EQ(Lower(huge, tiny).status().code(), absl::StatusCode::kInvalidArgument);
  proto::OpSpec negative = RowGather(-4, 3, 1, true, false);
  EXPECT_EQ(Lower(negative, tiny).status(), absl::InvalidArgumentError("row_gather.rows is negative (-4)"));
}

// The certificate records each guard a named row passes, with the range it admits: the index held to [0, rows] before
// it is decremented, the row checked in [0, rows), and the gather's offset in [0, rows·cols).
TEST(GathersTest, CertificateRecordsTheGuards) {
  const Target& tiny = Shipped("test_tiny");
  absl::StatusOr<Composition> c = Lower(RowGather(5, 3, 0, true, false), tiny);
  ASSERT_TRUE(c.ok()) << c.status();
  CertifyResult r = Certify(*c, tiny);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.certificate.sections_size(), 1);
  std::map<std::string, std::pair<int64_t, int64_t>> admitted;
  for (const proto::Guard& g : r.certificate.sections(0).guards()) {
    admitted[g.stage()] = {g.admitted().lo(), g.admitted().hi()};
  }
  EXPECT_EQ(admitted["row_biased"], std::make_pair(int64_t{0}, int64_t{5}));
  EXPECT_EQ(admitted["row_guarded"], std::make_pair(int64_t{0}, int64_t{4}));
  EXPECT_EQ(admitted["gather_row"], std::make_pair(int64_t{0}, int64_t{14}));
}

TEST(GathersTest, ReferenceChecksItsIndex) {
  proto::OpSpec spec = RowGather(3, 2, 0, true, false);
  TensorMap in;
  in["t"] = TensorData{1, 6, Precision::kBf16, {1, 2, 3, 4, 5, 6}};
  in["i"] = TensorData{1, 1, Precision::kInt32, {3}};
  absl::StatusOr<TensorMap> r = ReferenceOp(spec, in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at("y").values, (std::vector<double>{5, 6}));
  in["i"].values[0] = 4;
  EXPECT_EQ(ReferenceOp(spec, in).status().code(), absl::StatusCode::kOutOfRange);
  in["i"].values[0] = 1.5;
  EXPECT_EQ(ReferenceOp(spec, in).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spatial::testing
