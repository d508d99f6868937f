// Row writes (set_row: the KV-cache append) against their op reference on the VM, exactly, validated and certified on
// every shipped target that lowers them: flat tables, whole-tile rows, dense tables one row at a time and a block of
// rows at a data position, literal and named, at the first and the last row a block may start at. The table is a
// State tensor read and written in place; every row not written must keep its value.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/toolkit/index.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

// Set rows [at, at + count) of table "t" to "s"; at 0: named, read from operand "i".
proto::OpSpec SetRow(int64_t rows, int64_t cols, int64_t count, int64_t literal, bool is_float, bool dense) {
  proto::OpSpec s = literal > 0 ? Spec({"t", "s"}) : Spec({"t", "s", "i"});
  s.set_out("t");  // the write is in place: the result IS the table
  auto* w = s.mutable_set_row();
  w->set_rows(rows);
  w->set_cols(cols);
  w->set_count(count);
  if (literal > 0) {
    w->mutable_index()->set_literal(literal);
  } else {
    w->mutable_index()->set_named("i");
  }
  w->set_float_(is_float);
  w->set_dense(dense);
  return s;
}

// The table and the source from disjoint ranges (a row left unwritten, or written from the wrong place, shows), the
// index "i" = `at`.
Draw WriteDraw(int64_t at, bool is_float) {
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "i") return static_cast<double>(at);
    const bool source = name == "s";
    if (is_float) return source ? r.Real(10, 20) : r.Real(-20, -10);
    return static_cast<double>(source ? r.Int(1000, 900000) : r.Int(-900000, -1000));
  };
}

struct WriteCase {
  const char* target;
  int64_t rows, cols, count;
  bool dense;
  std::string section;
  size_t items;
};

void CheckWrites(const std::vector<WriteCase>& cases) {
  for (const WriteCase& k : cases) {
    for (bool is_float : {true, false}) {
      for (int64_t at : {int64_t{1}, k.rows - k.count + 1}) {
        for (bool named : {false, true}) {
          proto::OpSpec spec = SetRow(k.rows, k.cols, k.count, named ? 0 : at, is_float, k.dense);
          SCOPED_TRACE(spec.ShortDebugString() + " on " + k.target);
          Composition c = ThreeWay(spec, Shipped(k.target), WriteDraw(at, is_float), 0.0, k.rows + at * 5);
          ASSERT_EQ(c.sections.size(), 1u);
          EXPECT_EQ(c.sections[0].name, k.section);
          EXPECT_EQ(c.sections[0].items.size(), k.items);
          EXPECT_EQ(c.sections[0].claim.exact, !is_float);
          // The table is State: read then written in place (the whole-tile scatter only writes).
          const int t = c.sections[0].FindTensor("t");
          ASSERT_GE(t, 0);
          EXPECT_EQ(c.sections[0].tensors[t].role, TensorRole::kState);
          const bool reads = !(k.cols % Shipped(k.target).tile_cols() == 0 && !k.dense);
          std::vector<StateStep> order;
          if (reads) order.push_back({"t", 0, StateAccess::kRead});
          order.push_back({"t", 0, StateAccess::kWrite});
          EXPECT_EQ(c.state_order, order);
        }
      }
    }
  }
}

TEST(RowWritesTest, FlatTable) {
  // Rows narrower than a tile: the block is one contiguous run, only its tiles (at most ⌈span/8⌉ + 1) rewritten.
  CheckWrites({{"test_tiny", 1, 1, 1, false, "set_row_1x1", 1},
               {"test_tiny", 5, 3, 1, false, "set_row_5x3", 2},
               {"test_tiny", 5, 3, 2, false, "set_row_5x3_block2", 2},
               {"test_tiny", 7, 5, 3, false, "set_row_7x5_block3", 3},
               {"test_tiny", 4, 10, 4, false, "set_row_4x10_block4", 5},
               {"test_tiny", 20, 3, 5, false, "set_row_20x3_block5", 3},
               {"test_tiny", 9, 7, 9, false, "set_row_9x7_block9", 8},
               {"wormhole_n150", 30, 100, 1, false, "set_row_30x100", 5}});
}

TEST(RowWritesTest, WholeTileRows) {
  CheckWrites({{"test_tiny", 4, 8, 1, false, "set_row_4x8", 1},
               {"test_tiny", 5, 16, 2, false, "set_row_5x16_block2", 1},
               {"test_tiny", 6, 40, 1, false, "set_row_6x40", 5},
               {"test_tiny", 3, 64, 3, false, "set_row_3x64_block3", 6},
               // A flat KV cache of Qwen3-0.6B's 8 KV heads of 128 and Qwen3-8B's 32 query heads of 128.
               {"wormhole_n150", 24, 1024, 1, false, "set_row_24x1024", 4},
               {"blackhole_p150", 6, 4096, 2, false, "set_row_6x4096_block2", 32}});
}

TEST(RowWritesTest, DenseTableOneRow) {
  CheckWrites({{"test_tiny", 1, 1, 1, true, "set_row_1x1_dense", 1},
               {"test_tiny", 10, 5, 1, true, "set_row_10x5_dense", 1},
               {"test_tiny", 17, 12, 1, true, "set_row_17x12_dense", 1},
               {"test_tiny", 9, 8, 1, true, "set_row_9x8_dense", 1},
               {"test_tiny", 20, 40, 1, true, "set_row_20x40_dense", 5},
               // The decode step's KV-cache append: Qwen3-0.6B's 8 x 128 per position, at both ends of the cache.
               {"wormhole_n150", 64, 1024, 1, true, "set_row_64x1024_dense", 4}});
}

TEST(RowWritesTest, DenseTableBlockOfRows) {
  // A prefill chunk appends `count` rows at a data position: items (i, b) over the m tile rows it may touch.
  CheckWrites({{"test_tiny", 20, 8, 3, true, "set_row_20x8_block3_dense", 2},
               {"test_tiny", 17, 16, 9, true, "set_row_17x16_block9_dense", 3},
               {"test_tiny", 8, 8, 8, true, "set_row_8x8_block8_dense", 1},
               {"test_tiny", 30, 40, 12, true, "set_row_30x40_block12_dense", 15},
               {"test_tiny", 9, 8, 2, true, "set_row_9x8_block2_dense", 2},
               {"wormhole_n150", 100, 1024, 37, true, "set_row_100x1024_block37_dense", 12},
               {"blackhole_p150", 70, 1024, 5, true, "set_row_70x1024_block5_dense", 8}});
}

TEST(RowWritesTest, EveryStartOfABlock) {
  // A block of rows at every position it may start at: the in-tile offset o takes every value, and the clamped
  // start K0' = min(K0, n_t − m) both moves and does not.
  for (bool dense : {true, false}) {
    const int64_t rows = 21, cols = dense ? 8 : 3, count = 5;
    for (int64_t at = 1; at <= rows - count + 1; ++at) {
      proto::OpSpec spec = SetRow(rows, cols, count, 0, true, dense);
      SCOPED_TRACE(absl::StrCat("at ", at, " ", spec.ShortDebugString()));
      CheckLowering(spec, Shipped("test_tiny"), WriteDraw(at, true), 0.0, at);
    }
  }
}

// ── Run-time faults and refusals ──

absl::Status RunAt(const proto::OpSpec& spec, int64_t at) {
  const Target& tiny = Shipped("test_tiny");
  absl::StatusOr<Composition> c = Lower(spec, tiny);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return c.status();
  return RunComposition(*c, tiny.tile_rows(), tiny.tile_cols(), MakeInputs(*c, WriteDraw(at, true), 5)).status();
}

void ExpectFault(const absl::Status& s, const std::string& stage, const std::string& value) {
  EXPECT_TRUE(absl::StartsWith(s.message(), "IndexOutOfRange: ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("stage '", stage, "'"))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("index value ", value))) << s;
}

TEST(RowWritesTest, NamedRowOutsideTheTableFaults) {
  struct F {
    proto::OpSpec spec;
    std::string past, zero;  // the stages that refuse a row past the block's last start, and row 0
  };
  const std::vector<F> cases = {
      {SetRow(5, 3, 2, 0, true, false), "first_biased", "first_row"},
      {SetRow(5, 16, 2, 0, true, false), "row_index", "scatter_t"},
      {SetRow(17, 12, 1, 0, true, true), "row_gather", "gather_t"},
      {SetRow(17, 16, 9, 0, true, true), "first_biased", "first_row"},
  };
  for (const F& f : cases) {
    SCOPED_TRACE(f.spec.ShortDebugString());
    const int64_t last = f.spec.set_row().rows() - f.spec.set_row().count() + 1;
    ExpectFault(RunAt(f.spec, last + 1), f.past, std::to_string(last + 1));
    ExpectFault(RunAt(f.spec, 0), f.zero, "-1");
    EXPECT_TRUE(RunAt(f.spec, last).ok());
  }
}

TEST(RowWritesTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  const std::string empty = "NotLowered: a row write into an empty table, or a block of rows taller than its table";
  EXPECT_EQ(RefusalOf(SetRow(0, 3, 1, 1, true, false), tiny), empty);
  EXPECT_EQ(RefusalOf(SetRow(3, 0, 1, 1, true, true), tiny), empty);
  EXPECT_EQ(RefusalOf(SetRow(3, 3, 0, 1, true, false), tiny), empty);
  EXPECT_EQ(RefusalOf(SetRow(3, 3, 4, 1, true, true), tiny), empty);
  EXPECT_EQ(RefusalOf(SetRow(9, 12, 3, 1, true, true), tiny),
            "NotLowered: a block of rows into a dense table whose rows are not whole tiles");
  const std::string row = absl::StrCat("NotLowered: ", std::string(kLiteralRowOutside));
  const std::string block =
      "NotLowered: a literal block of rows outside its table — the program fails at run time on every tier, so there "
      "is no section to lower";
  struct L {
    int64_t cols, count;
    bool dense;
    std::string message;
  };
  for (const L& l : {L{3, 1, false, row}, L{3, 2, false, row}, L{16, 1, false, row}, L{16, 3, false, row},
                     L{5, 1, true, row}, L{8, 3, true, block}}) {
    for (int64_t literal : {int64_t{-2}, int64_t{0}, 10 - l.count + 2}) {
      proto::OpSpec spec = SetRow(10, l.cols, l.count, 1, true, l.dense);
      spec.mutable_set_row()->mutable_index()->set_literal(literal);
      SCOPED_TRACE(spec.ShortDebugString());
      EXPECT_EQ(RefusalOf(spec, tiny), l.message);
    }
  }
  const Target& gs = Shipped("grayskull_e150");
  EXPECT_EQ(RefusalOf(SetRow(8, 64, 1, 1, true, true), gs),
            "MissingPrecision: an fp32 accumulator (Dst) for a row write (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(SetRow(8, 64, 3, 1, true, true), gs),
            "MissingPrecision: an fp32 accumulator (Dst) for a row block write (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(SetRow(8, 64, 1, 1, false, false), gs),
            "MissingCompute: an integer elementwise datapath for a row write (target grayskull_e150)");
  proto::OpSpec three = SetRow(8, 8, 1, 1, true, false);
  three.add_operands()->set_name("i");
  EXPECT_EQ(RefusalOf(three, tiny), "NotLowered: set_row takes 2 operands, got 3");
}

TEST(RowWritesTest, TheResultIsTheTable) {
  proto::OpSpec spec = SetRow(8, 8, 1, 1, true, true);
  spec.set_out("y");
  absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "in place")) << c.status();
  EXPECT_FALSE(IsRefusal(c.status()));
}

}  // namespace
}  // namespace spatial::testing
