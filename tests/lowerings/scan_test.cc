// The scan (lowerings/carried/scan.h): SUM and MAX, discounted, inclusive and exclusive, and the online softmax's
// denominator written with it, three ways (VM against the step-by-step f64 reference, every output; certified on the
// shipped targets); the structure (a fold over blocks of steps, a carried page, a step a stage); the refusals.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/carried/scan.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

proto::OpSpec ScanOf(int64_t steps, int64_t lanes, proto::ScanSpec::Op op, bool discounted, bool exclusive,
                     bool denominator = false) {
  proto::OpSpec s;
  s.set_out("y");
  s.add_operands()->set_name("x");
  if (discounted) s.add_operands()->set_name("d");
  proto::ScanSpec* sc = s.mutable_scan();
  sc->set_steps(steps);
  sc->set_lanes(lanes);
  sc->set_op(op);
  sc->set_discounted(discounted);
  sc->set_exclusive(exclusive);
  sc->set_softmax_denominator(denominator);
  return s;
}

// Every output of the VM's run against the reference's, to 1e-12 (relative, floor 1).
void CheckAllOutputs(const proto::OpSpec& spec, const Target& t, uint64_t seed) {
  SCOPED_TRACE(spec.ShortDebugString() + " on " + t.name());
  absl::StatusOr<Composition> c = Lower(spec, t);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(ValidateComposition(*c, t.tile_rows(), t.tile_cols()).ok());
  // A discount in (0, 1], as a decay is; x in [-3, 3).
  const TensorMap in = MakeInputs(*c, [](const std::string& name, Rng& r) {
    return name == "d" ? r.Real(0.5, 1.0) : r.Real(-3, 3);
  }, seed);
  absl::StatusOr<TensorMap> vm = RunComposition(*c, t.tile_rows(), t.tile_cols(), in);
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, in);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (const auto& [name, want] : *ref) {
    auto got = vm->find(name);
    ASSERT_NE(got, vm->end()) << "the VM produced no " << name;
    ASSERT_EQ(got->second.values.size(), want.values.size()) << name;
    int bad = 0;
    for (size_t i = 0; i < want.values.size() && bad < 5; ++i) {
      if (!Near(got->second.values[i], want.values[i], 1e-12)) {
        ++bad;
        ADD_FAILURE() << name << " element " << i << ": VM " << got->second.values[i] << ", reference "
                      << want.values[i];
      }
    }
  }
  Outcomes o = CertifyWhereLowered(spec);
  EXPECT_NE(std::find(o.certified.begin(), o.certified.end(), t.name()), o.certified.end());
}

TEST(ScanTest, MatchesTheStepByStepReference) {
  uint64_t seed = 41;
  for (const char* target : {"test_tiny", "wormhole_n150"}) {
    const Target& t = Shipped(target);
    for (auto [steps, lanes] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {8, 8}, {37, 20}, {70, 33}}) {
      CheckAllOutputs(ScanOf(steps, lanes, proto::ScanSpec::SUM, false, false), t, seed++);
      CheckAllOutputs(ScanOf(steps, lanes, proto::ScanSpec::SUM, true, true), t, seed++);
      CheckAllOutputs(ScanOf(steps, lanes, proto::ScanSpec::MAX, false, true), t, seed++);
      CheckAllOutputs(ScanOf(steps, lanes, proto::ScanSpec::SUM, false, false, true), t, seed++);
    }
  }
}

// A fold over blocks of tile_rows steps, one lane tile an item, the step a stage: tile_rows chained steps a block.
TEST(ScanTest, IsAFoldWithACarriedPage) {
  const Target& t = Shipped("test_tiny");
  absl::StatusOr<Composition> c = Lower(ScanOf(40, 20, proto::ScanSpec::SUM, true, true), t);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->sections.size(), 1u);
  const Section& s = c->sections[0];
  EXPECT_EQ(s.num_blocks, 5);  // 40 steps in blocks of 8
  EXPECT_EQ(s.items.size(), 3u);  // 20 lanes in tiles of 8
  int steps = 0;
  for (const Stage& st : s.stages) {
    if (st.name.rfind("sum_step", 0) == 0) {
      ++steps;
      EXPECT_EQ(st.phase, Phase::kBody);
      EXPECT_EQ(st.outs[0], st.ins[0]) << "a step rewrites the carried page";
    }
  }
  EXPECT_EQ(steps, t.tile_rows());
}

TEST(ScanTest, RefusalsNameWhatIsWrong) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(ScanOf(0, 4, proto::ScanSpec::SUM, false, false), t), "NotLowered: a scan of an empty tensor");
  EXPECT_EQ(RefusalOf(ScanOf(8, 4, proto::ScanSpec::MAX, true, false), t),
            "NotLowered: a discounted MAX scan: a discount scales a sum's earlier terms");
  EXPECT_EQ(RefusalOf(ScanOf(8, 4, proto::ScanSpec::SUM, false, true, true), t),
            "NotLowered: a softmax denominator that is discounted, exclusive or MAX: the denominator is its own SUM "
            "scan, discounted by the maximum's rescale");
  const absl::StatusOr<Composition> neg = Lower(ScanOf(-3, 4, proto::ScanSpec::SUM, false, false), t);
  ASSERT_FALSE(neg.ok());
  const absl::Status st = neg.status();
  EXPECT_EQ(st.message(), "scan.steps is negative (-3)");
}

}  // namespace
}  // namespace spatial::testing
