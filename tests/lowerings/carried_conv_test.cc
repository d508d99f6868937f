// The causal conv (lowerings/carried/causal_conv.h) three ways — the VM against the f64 op reference to 1e-12 for the
// output AND the ring it leaves, the program valid, certified on every shipped target that lowers it — over the flat
// ring, the matrix ring and a block of rows; the ring's declared state order, a StaleStateRead when the sections run
// out of that order, and a prefill block followed by decode steps on the one ring.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "tests/lowerings/carried_cases.h"
#include "tests/lowerings/three_way.h"

namespace spatial {
// Readable state orders in failure messages (internal linkage: other tests may print them too).
[[maybe_unused]] static void PrintTo(const StateStep& s, std::ostream* os) {
  *os << s.tensor << "@" << s.section << (s.access == StateAccess::kRead ? ":R" : ":W");
}
}  // namespace spatial

namespace spatial::testing {
namespace {

constexpr double kTol = 1e-12;

proto::OpSpec Conv(int64_t rows, int64_t taps, int64_t chan, const std::string& ring = "cs") {
  return ConvSpec(rows, taps, chan, ring);
}

// Every value of `got` equals `want`'s, in row-major order, to kTol; the shapes may be two views of one tensor.
void ExpectSameValues(const TensorData& got, const TensorData& want, const std::string& what) {
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.values.size() && bad < 5; ++i) {
    if (!Near(got.values[i], want.values[i], kTol)) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": VM " << got.values[i] << ", reference " << want.values[i];
    }
  }
}

// The three-way check of the output (ThreeWay), and the ring the VM leaves against the reference's.
Composition CheckConv(const proto::OpSpec& spec, const Target& target, uint64_t seed = 7) {
  SCOPED_TRACE(spec.ShortDebugString() + " on " + target.name());
  Composition c = ThreeWay(spec, target, Reals(-2, 2), kTol, seed);
  if (c.sections.empty()) return c;
  TensorMap inputs = MakeInputs(c, Reals(-2, 2), seed);
  absl::StatusOr<TensorMap> vm = RunComposition(c, target.tile_rows(), target.tile_cols(), inputs);
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  EXPECT_TRUE(vm.ok() && ref.ok());
  if (!vm.ok() || !ref.ok()) return c;
  const std::string ring = spec.operands(2).name();
  EXPECT_TRUE(vm->count(ring) && ref->count(ring));
  if (vm->count(ring) && ref->count(ring)) ExpectSameValues(vm->at(ring), ref->at(ring), "ring " + ring);
  return c;
}

struct Shape {
  int64_t rows, taps, chan;
};

TEST(CarriedConvTest, FlatRingOneStep) {
  const Target& t = Shipped("test_tiny");
  // A flat ring holds at most one accumulator page: 4 tiles of 8 on test_tiny.
  for (const Shape& s : std::vector<Shape>{{1, 1, 1}, {1, 2, 3}, {1, 3, 5}, {1, 4, 8}, {1, 4, 7}, {1, 1, 20},
                                           {1, 5, 6}, {0, 16, 2}}) {
    Composition c = CheckConv(Conv(s.rows, s.taps, s.chan), t);
    ASSERT_EQ(c.sections.size(), 2u);
    EXPECT_EQ(c.sections[0].name, absl::StrCat("conv_ring_", s.taps, "x", s.chan));
    EXPECT_EQ(c.sections[1].name, absl::StrCat("conv_taps_", s.taps, "x", s.chan));
    EXPECT_TRUE(c.sections[0].claim.exact);
    EXPECT_FALSE(c.sections[1].claim.exact);
    // The ring is written in one section and read in the next.
    const std::vector<StateStep> order{{"cs", 0, StateAccess::kRead}, {"cs", 0, StateAccess::kWrite},
                                       {"cs", 1, StateAccess::kRead}};
    EXPECT_EQ(c.state_order, order);
    const Section& shift = c.sections[0];
    EXPECT_EQ(shift.tensors[shift.FindTensor("cs")].role, TensorRole::kState);
    EXPECT_EQ(shift.tensors[shift.FindTensor("cs")].cols, s.taps * s.chan);
  }
}

TEST(CarriedConvTest, MatrixRingOneStep) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{1, 4, 16}, {1, 4, 64}, {1, 2, 40}, {1, 8, 24}, {1, 3, 128}}) {
    Composition c = CheckConv(Conv(s.rows, s.taps, s.chan), t);
    ASSERT_EQ(c.sections.size(), 2u);
    // One channel tile per item; the ring is the taps x chan matrix.
    EXPECT_EQ(c.sections[0].items.size(), static_cast<size_t>(s.chan / 8));
    EXPECT_EQ(c.sections[1].items.size(), static_cast<size_t>(s.chan / 8));
    const Section& red = c.sections[1];
    EXPECT_EQ(red.tensors[red.FindTensor("cs")].rows, s.taps);
    EXPECT_EQ(red.tensors[red.FindTensor("w")].role, TensorRole::kParam);
  }
  // Qwen3-Next's conv: 4 taps over 2·2048 + 4096 channels, one 32-channel tile per item.
  Composition real = CheckConv(Conv(1, 4, 8192), Shipped("wormhole_n150"));
  ASSERT_EQ(real.sections.size(), 2u);
  EXPECT_EQ(real.sections[0].name, "conv_ring_4x8192");
  EXPECT_EQ(real.sections[0].items.size(), 256u);
}

TEST(CarriedConvTest, BlockOfRows) {
  const Target& t = Shipped("test_tiny");
  // Flat rings (taps·chan within a page), then matrix rings (whole channel tiles).
  for (const Shape& s : std::vector<Shape>{{2, 4, 8}, {5, 3, 5}, {17, 4, 7}, {8, 2, 16}, {3, 1, 3}, {2, 4, 16},
                                           {12, 4, 64}, {9, 8, 24}, {3, 5, 40}}) {
    Composition c = CheckConv(Conv(s.rows, s.taps, s.chan), t, 11 + s.rows);
    ASSERT_EQ(c.sections.size(), 2u);
    EXPECT_EQ(c.sections[0].name, absl::StrCat("conv_rows_", s.rows, "x", s.chan, "_taps", s.taps));
    EXPECT_EQ(c.sections[1].name, absl::StrCat("conv_ring_rows_", s.rows, "x", s.chan, "_taps", s.taps));
    // Read the old ring, then write the new one (reading the old ring again only for the taps a short block leaves).
    std::vector<StateStep> order{{"cs", 0, StateAccess::kRead}};
    if (s.rows < s.taps) order.push_back({"cs", 1, StateAccess::kRead});
    order.push_back({"cs", 1, StateAccess::kWrite});
    EXPECT_EQ(c.state_order, order);
    EXPECT_TRUE(c.sections[1].claim.exact);
  }
  // A prefill chunk of 20 tokens at Qwen3-Next's width.
  CheckConv(Conv(20, 4, 8192), Shipped("wormhole_n150"));
}

// Swapping the two sections and keeping each section's declared steps makes the order a lie: the reduction would read
// the ring before the shift wrote it. The VM faults, and the certifier rejects the order.
TEST(CarriedConvTest, SectionsOutOfOrderFaultStaleStateRead) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{1, 4, 8}, {1, 4, 16}, {5, 3, 5}}) {
    absl::StatusOr<Composition> c = Lower(Conv(s.rows, s.taps, s.chan), t);
    ASSERT_TRUE(c.ok()) << c.status();
    TensorMap inputs = MakeInputs(*c, Reals(-1, 1), 3);
    ASSERT_TRUE(RunComposition(*c, t.tile_rows(), t.tile_cols(), inputs).ok());
    Composition swapped = *c;
    std::swap(swapped.sections[0], swapped.sections[1]);
    for (StateStep& step : swapped.state_order) step.section = 1 - step.section;
    absl::StatusOr<TensorMap> run = RunComposition(swapped, t.tile_rows(), t.tile_cols(), inputs);
    ASSERT_FALSE(run.ok());
    EXPECT_TRUE(absl::StartsWith(run.status().message(), "StaleStateRead")) << run.status();
    EXPECT_TRUE(Certify(*c, t).ok());
    EXPECT_FALSE(Certify(swapped, t).ok());
  }
}

// ★ ONE DECISION FOR THE SINGLE STEP AND A BLOCK OF ROWS, SO A PREFILL CHUNK LEAVES THE RING IN THE LAYOUT A DECODE
// READS: a block of rows, then two decode steps, as one composition on the one ring, equals the block and the steps
// taken one after another by the reference.
TEST(CarriedConvTest, PrefillThenDecodeOnOneRing) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{6, 4, 8}, {10, 3, 40}}) {
    SCOPED_TRACE(absl::StrCat(s.rows, "x", s.chan, " taps ", s.taps));
    proto::OpSpec block = Conv(s.rows, s.taps, s.chan);
    block.set_out("y0");
    proto::OpSpec step1 = Conv(1, s.taps, s.chan);
    step1.set_out("y1");
    step1.mutable_operands(0)->set_name("x1");
    proto::OpSpec step2 = step1;
    step2.set_out("y2");
    step2.mutable_operands(0)->set_name("x2");
    std::vector<Composition> parts;
    for (const proto::OpSpec* spec : {&block, &step1, &step2}) {
      absl::StatusOr<Composition> c = Lower(*spec, t);
      ASSERT_TRUE(c.ok()) << c.status();
      parts.push_back(std::move(*c));
    }
    Composition all = ComposeSections("prefill_then_decode", std::move(parts), t);
    ASSERT_EQ(all.sections.size(), 6u);
    // The ring's reads and writes in the order the six sections take them.
    std::vector<StateStep> order{{"cs", 0, StateAccess::kRead},  {"cs", 1, StateAccess::kWrite},
                                 {"cs", 2, StateAccess::kRead},
                                 {"cs", 2, StateAccess::kWrite}, {"cs", 3, StateAccess::kRead},
                                 {"cs", 4, StateAccess::kRead},  {"cs", 4, StateAccess::kWrite},
                                 {"cs", 5, StateAccess::kRead}};
    EXPECT_EQ(all.state_order, order);
    ASSERT_TRUE(ValidateComposition(all, t.tile_rows(), t.tile_cols()).ok());
    ExpectCertifies(all, t);
    TensorMap inputs = MakeInputs(all, Reals(-2, 2), 5);
    absl::StatusOr<TensorMap> vm = RunComposition(all, t.tile_rows(), t.tile_cols(), inputs);
    ASSERT_TRUE(vm.ok()) << vm.status();
    // The reference, op after op, each reading the ring the one before left.
    TensorMap state = inputs;
    for (const proto::OpSpec* spec : {&block, &step1, &step2}) {
      absl::StatusOr<TensorMap> ref = ReferenceOp(*spec, state);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ExpectSameValues(vm->at(spec->out()), ref->at(spec->out()), spec->out());
      state["cs"] = ref->at("cs");
    }
    ExpectSameValues(vm->at("cs"), state.at("cs"), "the ring left behind");
  }
}

}  // namespace
}  // namespace spatial::testing
