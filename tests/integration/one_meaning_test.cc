// One meaning, one place (DESIGN §3.6, issue #10): the VM, the machine model and the certifier read every tile
// address through spatial/semantics/affine.h's TileForm, every fold count through spatial/semantics/trip.h and every
// footprint through spatial/semantics/footprint.h. A planted change to TileForm (the test seam shifts every address)
// must change all three consumers together: a program each of them accepts is refused by each of them.
#include <string>

#include "certify/certify.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/proto_file.h"
#include "spatial/semantics/affine.h"
#include "spatial/semantics/footprint.h"
#include "spatial/semantics/trip.h"
#include "spatial/tensor_data.h"
#include "targets/loader.h"

namespace spatial {
namespace {

struct Verdicts {
  bool certified = false;
  std::string certify_codes;
  absl::Status vm;
  absl::Status sim;
};

TensorMap Halves(const Composition& c) {
  TensorMap m;
  for (const Tensor& t : CompositionInputs(c)) {
    m[t.name] = TensorData{t.rows, t.cols, t.precision,
                           std::vector<double>(static_cast<size_t>(t.rows * t.cols), 0.5)};
  }
  return m;
}

Verdicts Judge(const Composition& c, const Target& t) {
  Verdicts v;
  const CertifyResult cert = Certify(c, t);
  v.certified = cert.ok();
  for (const proto::Diagnostic& d : cert.diagnostics) v.certify_codes += d.code() + " ";
  const TensorMap in = Halves(c);
  v.vm = RunComposition(c, t.tile_rows(), t.tile_cols(), in).status();
  SimOptions o;
  o.timing_only = true;
  v.sim = Simulate(c, t, in, o).status();
  return v;
}

class PlantedShift : public testing::Test {
 protected:
  void TearDown() override { SetTileFormShiftForTesting(0); }
};

TEST_F(PlantedShift, ChangesTheVmTheSimulatorAndTheCertifierTogether) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok()) << t.status();
  proto::OpSpec spec;
  ASSERT_TRUE(ParseTextProto("out: \"y\" operands { name: \"x\" } silu { n: 256 }", "spec", &spec).ok());
  absl::StatusOr<Composition> c = Lower(spec, *t);
  ASSERT_TRUE(c.ok()) << c.status();

  const Verdicts as_written = Judge(*c, *t);
  EXPECT_TRUE(as_written.certified) << as_written.certify_codes;
  EXPECT_TRUE(as_written.vm.ok()) << as_written.vm;
  EXPECT_TRUE(as_written.sim.ok()) << as_written.sim;

  for (int64_t shift : {int64_t{1000}, int64_t{-1}}) {
    SCOPED_TRACE(shift);
    SetTileFormShiftForTesting(shift);
    const Verdicts planted = Judge(*c, *t);
    EXPECT_FALSE(planted.certified);
    EXPECT_NE(planted.certify_codes.find("INDEX_OUT_OF_RANGE"), std::string::npos) << planted.certify_codes;
    EXPECT_EQ(std::string(planted.vm.message()).rfind("TileOutOfRange", 0), 0u) << planted.vm;
    EXPECT_EQ(std::string(planted.sim.message()).rfind("TileOutOfRange", 0), 0u) << planted.sim;
  }
}

// The evaluator itself: exact over points, the exact hull over intervals, no overflow for hostile coefficients.
TEST(TileForm, EvaluatesExactlyInBothDomains) {
  AccessPattern p;
  p.origin.base = 3;
  p.origin.steps = {{LoopVar::kItemY, 10}, {LoopVar::kItemY, -4}, {LoopVar::kKBlock, 2}};
  p.block_h = 2;
  p.block_w = 3;
  p.stride_h = 100;
  p.stride_w = 1;
  const AffineForm f = TileForm(p);
  EXPECT_EQ(f[AddrVar::kItemY], 6);  // repeated terms of one variable are summed
  AddrEnv<Wide> at = ZeroEnv<Wide>();
  at[static_cast<int>(AddrVar::kItemY)] = 2;
  at[static_cast<int>(AddrVar::kKBlock)] = 5;
  at[static_cast<int>(AddrVar::kBlockI)] = 1;
  at[static_cast<int>(AddrVar::kBlockJ)] = 2;
  EXPECT_EQ(Evaluate(f, at), Wide{3 + 12 + 10 + 100 + 2});
  AddrEnv<Interval> box = ZeroEnv<Interval>();
  box[static_cast<int>(AddrVar::kItemY)] = Interval::Of(0, 2);
  box[static_cast<int>(AddrVar::kBlockI)] = Interval::Of(0, 1);
  box[static_cast<int>(AddrVar::kBlockJ)] = Interval::Of(0, 2);
  EXPECT_EQ(Evaluate(f, box), Interval::Of(3, 3 + 12 + 100 + 2));
  p.origin.steps = {{LoopVar::kItemX, INT64_MAX}, {LoopVar::kItemX, INT64_MAX}};
  at[static_cast<int>(AddrVar::kItemX)] = INT64_MAX;
  EXPECT_GT(Evaluate(TileForm(p), at), Wide{INT64_MAX});  // beyond int64, exactly or saturated, never wrapped
}

TEST(Trip, OneRuleForTheBlockCount) {
  Trip tr;
  tr.lo = 1;
  tr.hi = 64;
  tr.bias = 3;
  tr.per = 4;
  EXPECT_EQ(TripBlocks(tr, 1), 1);
  EXPECT_EQ(TripBlocks(tr, 5), 2);
  EXPECT_EQ(TripBlocks(tr, -10), 0);
  EXPECT_EQ(TripBlockRange(tr), Interval::Of(1, 17));
  EXPECT_EQ(*RunTripBlocks(tr, 17, 64.0), 17);
  EXPECT_EQ(RunTripBlocks(tr, 16, 64.0).status().message(), "trip value 64 gives 17 blocks, more than the fold's 16");
  EXPECT_EQ(RunTripBlocks(tr, 17, 2.5).status().message(), "trip value 2.5 is not an integer");
  EXPECT_EQ(RunTripBlocks(tr, 17, 65.0).status().message(), "trip value 65 not in [1, 64]");
}

TEST(Footprint, SaturatesInsteadOfOverflowing) {
  Section s;
  s.buffers.push_back(Buffer{"a", 2, 3, Precision::kBf16});
  s.buffers.push_back(Buffer{"b", 1, 1, Precision::kFp32});
  EXPECT_EQ(SectionFootprint(s, 32, 32), 2 * 3 * 2048 + 4096);
  s.buffers.push_back(Buffer{"huge", INT64_MAX, INT64_MAX, Precision::kFp32});
  EXPECT_EQ(SectionFootprint(s, 32, 32), INT64_MAX);
}

}  // namespace
}  // namespace spatial
