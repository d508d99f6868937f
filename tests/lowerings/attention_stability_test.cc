// The flash fold's numerical stability and its run-time guards, as the seeds state them: masked probabilities are
// exactly zero and a masked position is never read (garbage, even NaN, past the limit changes nothing), fully masked
// blocks are the identity, the running maximum ignores NaN so a NaN score poisons only its own head, denominators stay
// at least one when every other exponential underflows; a position outside the cache faults the VM, naming where and
// the value; and the certifier proves what the program promises.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash_fold.h"
#include "spatial/maps.h"
#include "tests/lowerings/attention_check.h"

namespace spatial::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Writes `value` into every cache position j of K and V for which `garbage(j)` holds (all K/V heads).
void Spoil(TensorMap& inputs, const AttnCase& c, const std::function<bool(int64_t)>& garbage, double value) {
  for (const auto& [name, width] : {std::pair<const char*, int64_t>{"k", c.kv * c.hd}, {"v", c.kv * c.vd}}) {
    std::vector<double>& x = inputs.at(name).values;
    for (int64_t j = 0; j < c.l; ++j) {
      if (!garbage(j)) continue;
      for (int64_t e = 0; e < width; ++e) x[j * width + e] = value;
    }
  }
}

Composition Lowered(const AttnCase& c, const Target& t, Form form) {
  absl::StatusOr<Composition> comp = LowerAttention(AttnSpec(c), t, form);
  EXPECT_TRUE(comp.ok()) << comp.status();
  return comp.ok() ? *comp : Composition{};
}

// Positions past each row's limit hold NaN (and, in a second run, infinities): the answer is the reference's, which
// never reads them. A probability computed as e^(S - m') there, or a value contraction over them, would be NaN.
TEST(AttentionStabilityTest, MaskedPositionsAreNeverRead) {
  const Target& tiny = Shipped("test_tiny");
  struct Case {
    AttnCase c;
    Form form;
  };
  const std::vector<Case> cases = {
      {{.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 21}, Form::kFlash},
      {{.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 40, .pos = Pos::kNamed, .p = 13}, Form::kGrouped},
      {{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 30, .rows = 5, .pos = Pos::kNamed, .p = 11}, Form::kFlash},
      {{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 30, .pos = Pos::kNamed, .p = 27, .sliding = 6, .sinks = true},
       Form::kFlash},
      // Blocks of several tile rows read their values whole, zeroing the positions no row sees first: grouped, a
      // decode row's own window and sinks, one block and two.
      {{.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 32, .pos = Pos::kNamed, .p = 13, .kv_chunk = 16}, Form::kGrouped},
      {{.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 32, .pos = Pos::kNamed, .p = 13, .kv_chunk = 32}, Form::kGrouped},
      {{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 32, .pos = Pos::kNamed, .p = 27, .sliding = 6, .sinks = true,
        .kv_chunk = 16},
       Form::kFlash},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(CaseText(k.c));
    const proto::OpSpec spec = AttnSpec(k.c);
    const Composition comp = Lowered(k.c, tiny, k.form);
    const int64_t last = k.c.p + k.c.rows - 1;                    // the last row's limit
    const int64_t floor = k.c.sliding ? k.c.p - k.c.sliding : 0;  // row 0's window floor (decode)
    for (double garbage : {kNaN, std::numeric_limits<double>::infinity()}) {
      TensorMap inputs = AttnInputs(comp, k.c.p, 5);
      Spoil(
          inputs, k.c, [&](int64_t j) { return j >= last || j < floor; }, garbage);
      ExpectMatchesReference(spec, comp, tiny, inputs);
    }
  }
}

// A sliding window far into the cache masks its first blocks whole: block_max is MASKED, m' stays MASKED, a = 1 and
// every probability is exactly 0, so the block is the identity — and its positions (NaN here) are never read. A
// causal block's first query tile sees trailing blocks masked whole too.
TEST(AttentionStabilityTest, FullyMaskedBlocksAreTheIdentity) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase window{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 40, .pos = Pos::kNamed, .p = 38, .sliding = 3};
  const Composition w = Lowered(window, tiny, Form::kFlash);
  ASSERT_EQ(w.sections.size(), 1u);
  EXPECT_EQ(w.sections[0].num_blocks, 5);  // blocks 0..3 lie wholly below the floor 35
  TensorMap inputs = AttnInputs(w, window.p, 3);
  Spoil(
      inputs, window, [](int64_t j) { return j < 32; }, kNaN);
  ExpectMatchesReference(AttnSpec(window), w, tiny, inputs);

  // Blocks of two tile rows: the first two lie wholly below the floor 43.
  const AttnCase wide{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 48, .pos = Pos::kNamed, .p = 46, .sliding = 3,
                      .kv_chunk = 16};
  const Composition wb = Lowered(wide, tiny, Form::kFlash);
  ASSERT_EQ(wb.sections.size(), 1u);
  EXPECT_EQ(wb.sections[0].num_blocks, 3);
  inputs = AttnInputs(wb, wide.p, 3);
  Spoil(
      inputs, wide, [](int64_t j) { return j < 43 || j >= 46; }, kNaN);
  ExpectMatchesReference(AttnSpec(wide), wb, tiny, inputs);

  const AttnCase causal{.h = 1, .kv = 1, .hd = 8, .vd = 8, .l = 32, .rows = 20, .pos = Pos::kNamed, .p = 1};
  const Composition c = Lowered(causal, tiny, Form::kFlash);
  // Query tile 0 (rows 0..7, limits 1..8) folds blocks 1 and 2 masked whole.
  ExpectMatchesReference(AttnSpec(causal), c, tiny, AttnInputs(c, causal.p, 4));
}

// The running maximum is the NaN-ignoring pool: a NaN query makes its own head's scores NaN, and only that head's
// output is NaN — in the program as in the reference — while every other head is exact.
TEST(AttentionStabilityTest, NaNScorePoisonsOnlyItsHead) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase c{.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 17};
  const Composition comp = Lowered(c, tiny, Form::kFlash);
  TensorMap inputs = AttnInputs(comp, c.p, 9);
  inputs.at("q").values[1 * c.hd + 3] = kNaN;  // head 1
  ExpectMatchesReference(AttnSpec(c), comp, tiny, inputs, /*nan_ok=*/true);
  absl::StatusOr<TensorMap> vm = RunComposition(comp, 8, 8, inputs);
  ASSERT_TRUE(vm.ok()) << vm.status();
  const std::vector<double>& y = vm->at("y").values;
  for (int64_t i = 0; i < c.h; ++i) {
    for (int64_t e = 0; e < c.vd; ++e) EXPECT_EQ(std::isnan(y[i * c.vd + e]), i == 1) << "head " << i;
  }
}

// A huge scale spreads the scores so far that every exponential but the maximum's underflows: the denominator is
// then exactly the maximum's e^0 = 1 (never 0), and a row with one live position returns that position's value.
TEST(AttentionStabilityTest, DenominatorsStayPositive) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase spread{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 24, .pos = Pos::kNamed, .p = 19, .scale = 1e4};
  CheckAttention(spread, tiny, Form::kFlash);
  const AttnCase one{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 24, .pos = Pos::kNamed, .p = 1, .scale = 1e6};
  const Composition comp = Lowered(one, tiny, Form::kFlash);
  const TensorMap inputs = AttnInputs(comp, 1, 2);
  absl::StatusOr<TensorMap> vm = RunComposition(comp, 8, 8, inputs);
  ASSERT_TRUE(vm.ok()) << vm.status();
  for (int64_t i = 0; i < one.h; ++i) {
    for (int64_t e = 0; e < one.vd; ++e) {
      EXPECT_EQ(vm->at("y").values[i * one.vd + e], inputs.at("v").values[i * one.vd + e]) << i << "," << e;
    }
  }
}

// The comparison bites: a program whose scale is off by one part in a million is caught.
TEST(AttentionStabilityTest, ComparisonCatchesAWrongProgram) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase c{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 20};
  const proto::OpSpec spec = AttnSpec(c);
  absl::StatusOr<AttentionShape> shape = AttentionShapeOf(spec);
  ASSERT_TRUE(shape.ok());
  FlashGeometry g = FlashGeometryOf(*shape);
  g.scale *= 1 + 1e-6;
  absl::StatusOr<Composition> comp = FlashAttention(*AttentionNamesOf(spec), g, "attn", tiny);
  ASSERT_TRUE(comp.ok()) << comp.status();
  const TensorMap inputs = AttnInputs(*comp, c.p, 1);
  absl::StatusOr<TensorMap> vm = RunComposition(*comp, 8, 8, inputs);
  absl::StatusOr<TensorMap> ref = ReferenceAttention(spec, inputs);
  ASSERT_TRUE(vm.ok() && ref.ok());
  int off = 0;
  for (size_t i = 0; i < ref->at("y").values.size(); ++i) {
    off += !Near(vm->at("y").values[i], ref->at("y").values[i], 1e-12);
  }
  EXPECT_GT(off, 0);
}

// A named position outside the cache faults the VM: against the trip before any block runs when the fold has more
// than one block, at the guards of the position's stages otherwise — naming the stage (or the trip's tensor) and
// the value.
TEST(AttentionStabilityTest, PositionOutsideTheCacheFaults) {
  const Target& tiny = Shipped("test_tiny");
  auto fault = [&](const AttnCase& c, Form form, int64_t p) {
    const Composition comp = Lowered(c, tiny, form);
    absl::StatusOr<TensorMap> vm = RunComposition(comp, 8, 8, AttnInputs(comp, p, 1));
    EXPECT_FALSE(vm.ok()) << CaseText(c) << " P=" << p;
    return vm.ok() ? std::string() : std::string(vm.status().message());
  };
  const AttnCase decode{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 40, .pos = Pos::kNamed};
  std::string m = fault(decode, Form::kFlash, 41);
  EXPECT_TRUE(absl::StartsWith(m, "TripOutOfRange: ")) << m;
  EXPECT_TRUE(absl::StrContains(m, "trip value 41") && absl::StrContains(m, "not in [1, 40]") &&
              absl::StrContains(m, "tensor 'pos'"))
      << m;
  m = fault(decode, Form::kFlash, 0);
  EXPECT_TRUE(absl::StrContains(m, "trip value 0") && absl::StrContains(m, "not in [1, 40]") &&
              absl::StrContains(m, "tensor 'pos'"))
      << m;
  // Grouped: the fold section (after the regrouping) refuses it the same way.
  m = fault({.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 40, .pos = Pos::kNamed}, Form::kGrouped, 57);
  EXPECT_TRUE(absl::StrContains(m, "TripOutOfRange: section 'attn_flash_blocks_2x8_l40_b8'")) << m;
  // A prefill block of 4 rows admits P up to l - 3.
  m = fault({.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 40, .rows = 4, .pos = Pos::kNamed}, Form::kFlash, 38);
  EXPECT_TRUE(absl::StrContains(m, "trip value 38") && absl::StrContains(m, "not in [1, 37]") &&
              absl::StrContains(m, "tensor 'pos'"))
      << m;
  // One block, no trip: the guards fault in the prologue, naming the stage and the value.
  const AttnCase small{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 6, .pos = Pos::kNamed};
  m = fault(small, Form::kFlash, 7);
  EXPECT_TRUE(absl::StartsWith(m, "IndexOutOfRange: ")) << m;
  EXPECT_TRUE(absl::StrContains(m, "stage 'count_biased'")) << m;
  EXPECT_TRUE(absl::StrContains(m, "index value 7")) << m;
  m = fault(small, Form::kFlash, 0);
  EXPECT_TRUE(absl::StrContains(m, "stage 'row_limit'")) << m;
  EXPECT_TRUE(absl::StrContains(m, "index value -1")) << m;  // P - 1
  m = fault(small, Form::kFlash, -5);
  EXPECT_TRUE(absl::StrContains(m, "stage 'count_biased'")) << m;
  // Inside the cache, the same programs run.
  for (int64_t p : {1, 6}) {
    const Composition comp = Lowered(small, tiny, Form::kFlash);
    ExpectMatchesReference(AttnSpec(small), comp, tiny, AttnInputs(comp, p, 3));
  }
}

// What the certifier proves of a fold: the trip admits exactly the guard's P and never more blocks than the loads
// were proven for; the position's guards, the block start's guards and the carries are recorded.
TEST(AttentionStabilityTest, CertificateRecordsTheGuards) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase c{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 30, .rows = 3, .pos = Pos::kNamed, .p = 10, .chunked = 8};
  const Composition comp = Lowered(c, tiny, Form::kFlash);
  const CertifyResult r = Certify(comp, tiny);
  ASSERT_TRUE(r.ok()) << (r.diagnostics.empty() ? "" : FormatDiagnostic(r.diagnostics[0], comp.name));
  ASSERT_EQ(r.certificate.sections_size(), 1);
  const proto::SectionProof& p = r.certificate.sections(0);
  EXPECT_EQ(p.trip().value().lo(), 1);
  EXPECT_EQ(p.trip().value().hi(), 28);
  EXPECT_EQ(p.trip().blocks().hi(), 4);
  EXPECT_EQ(p.trip().num_blocks(), 4);
  std::vector<std::string> guarded;
  for (const proto::Guard& g : p.guards()) guarded.push_back(g.stage());
  for (const char* stage : {"count_biased", "row_limit", "block_limit", "block_floor", "next_start"}) {
    EXPECT_NE(std::find(guarded.begin(), guarded.end(), stage), guarded.end()) << stage;
  }
  std::vector<std::string> carried(p.carried_buffers().begin(), p.carried_buffers().end());
  for (const char* carry : {"run_max", "run_sum", "run_out", "block_start"}) {
    EXPECT_NE(std::find(carried.begin(), carried.end(), carry), carried.end()) << carry;
  }
  EXPECT_TRUE(p.items_disjoint());
  EXPECT_GT(p.footprint_margin_bytes(), 0);
}

}  // namespace
}  // namespace spatial::testing
