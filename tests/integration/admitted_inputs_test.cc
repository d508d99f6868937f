// The admitted ranges of run inputs (certify/admitted_inputs.h) against the VM, which is the meaning: at both ends
// of the admitted range the program runs fault-free, one past either end it faults. The range is neither too
// narrow (random inputs would miss real positions) nor too wide (random runs would fault). And ExactLineage
// (sim/simulate.h): an exact section copying an approximate result is approximate.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/admitted_inputs.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "sim/report/error_stats.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/proto_file.h"
#include "spatial/tensor_data.h"
#include "targets/loader.h"
#include "tests/integration/lower_text.h"

namespace spatial {
namespace {

struct Case {
  std::string name;
  std::string spec;   // an OpSpec text proto
  std::string input;  // the integer run input whose range is admitted
  int64_t lo = 0;     // the expected admitted range
  int64_t hi = 0;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

// Every run input filled (floats 0.5, integers 1), `input` set to `v`.
TensorMap Inputs(const Composition& c, const std::string& input, int64_t v) {
  TensorMap m;
  for (const Tensor& t : CompositionInputs(c)) {
    TensorData d{t.rows, t.cols, t.precision, std::vector<double>(static_cast<size_t>(t.rows * t.cols),
                                                                  IsInteger(t.precision) ? 1.0 : 0.5)};
    if (t.name == input) d.values.assign(d.values.size(), static_cast<double>(v));
    m[t.name] = std::move(d);
  }
  return m;
}

class AdmittedInputs : public testing::TestWithParam<Case> {};

TEST_P(AdmittedInputs, TheRangeIsExactlyWhereTheVmRunsFaultFree) {
  const Case& k = GetParam();
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok());
  Composition c = LowerText(k.spec, *t);
  std::vector<proto::AdmittedInput> admitted = AdmitInputs(c, *t);
  const proto::AdmittedInput* a = nullptr;
  for (const proto::AdmittedInput& x : admitted) {
    if (x.tensor() == k.input) a = &x;
  }
  ASSERT_NE(a, nullptr) << "no admitted range for " << k.input;
  EXPECT_EQ(a->admitted().lo(), k.lo);
  EXPECT_EQ(a->admitted().hi(), k.hi);
  EXPECT_GE(a->guards_size(), 1);
  for (int64_t v : {k.lo, k.hi, (k.lo + k.hi) / 2}) {
    absl::StatusOr<TensorMap> ok = RunComposition(c, c.tile_rows, c.tile_cols, Inputs(c, k.input, v));
    EXPECT_TRUE(ok.ok()) << k.input << " = " << v << ": " << ok.status();
  }
  for (int64_t v : {k.lo - 1, k.hi + 1}) {
    absl::StatusOr<TensorMap> bad = RunComposition(c, c.tile_rows, c.tile_cols, Inputs(c, k.input, v));
    EXPECT_FALSE(bad.ok()) << k.input << " = " << v << " ran although outside the admitted range";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, AdmittedInputs,
    testing::Values(
        Case{"rows_gather", "out: 'x' operands { name: 'table' } operands { name: 'tokens' } "
                            "rows_gather { rows: 100 cols: 64 count: 3 float: true }",
             "tokens", 1, 100},
        Case{"row_gather", "out: 'x' operands { name: 'table' } operands { name: 'token' } "
                           "row_gather { rows: 77 cols: 32 index { named: 'token' } float: true }",
             "token", 1, 77},
        Case{"set_row_dense", "out: 'cache' operands { name: 'cache' } operands { name: 'k' } "
                              "operands { name: 'pos' } set_row { rows: 64 cols: 32 count: 1 "
                              "index { named: 'pos' } float: true dense: true }",
             "pos", 1, 64},
        // A block of rows, as a prefill writes its cache: the first row's block offset r - tile * floor(r / tile)
        // spans two tiles over a range of positions unless held in the tile, and the write had no range at all.
        Case{"set_rows_dense", "out: 'cache' operands { name: 'cache' } operands { name: 'k' } "
                               "operands { name: 'pos' } set_row { rows: 64 cols: 32 count: 8 "
                               "index { named: 'pos' } float: true dense: true }",
             "pos", 1, 57},
        Case{"set_rows_flat", "out: 'cache' operands { name: 'cache' } operands { name: 'k' } "
                              "operands { name: 'pos' } set_row { rows: 30 cols: 5 count: 3 "
                              "index { named: 'pos' } float: true }",
             "pos", 1, 28},
        Case{"rope_rows", "out: 'q_rot' operands { name: 'q' } operands { name: 'rope_cos' } "
                          "operands { name: 'rope_sin' } operands { name: 'pos' } rope { h: 16 hd: 16 half: 8 "
                          "rows: 8 from { named: 'pos' } cache: 40 theta: 1e6 }",
             "pos", 1, 33},
        Case{"rope", "out: 'q_rot' operands { name: 'q' } operands { name: 'rope_cos' } "
                     "operands { name: 'rope_sin' } operands { name: 'pos' } rope { h: 2 hd: 16 half: 8 rows: 1 "
                     "from { named: 'pos' } cache: 40 theta: 1e6 }",
             "pos", 1, 40},
        Case{"attention_decode", "out: 'ctx' operands { name: 'q' } operands { name: 'k_cache' } "
                                 "operands { name: 'v_cache' } operands { name: 'pos' } attention { h: 4 kv: 2 "
                                 "hd: 16 vd: 16 l: 48 rows: 1 pos { named: 'pos' } }",
             "pos", 1, 48}),
    [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(AdmittedInputs, NothingToAdmitWithoutIntegerRunInputs) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok());
  Composition c = LowerText("out: 'y' operands { name: 'x' } silu { n: 100 }", *t);
  EXPECT_TRUE(AdmitInputs(c, *t).empty());
}

// A decode step of 4 heads over 2 K/V heads: a grouped copy of q, the split fold and its combine, the final relayout.
// A grouped decode on test_tiny: over 12 positions (two blocks, not split) its sections are the regroup, the fold
// and the relayout of the result (an exact copy); over 48 the fold is split and its combine writes the result.
Composition DecodeAttention(const Target& t, int64_t positions = 12) {
  return LowerText(absl::StrCat("out: 'ctx' operands { name: 'q' } operands { name: 'k_cache' } operands { name: "
                                "'v_cache' } operands { name: 'pos' } attention { h: 4 kv: 2 hd: 16 vd: 16 l: ",
                                positions, " rows: 1 pos { named: 'pos' } }"),
                   t);
}

TEST(ExactLineage, AnExactCopyOfAnApproximateResultIsApproximate) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok());
  Composition c = DecodeAttention(*t);
  ASSERT_GE(c.sections.size(), 2u);
  ASSERT_TRUE(c.sections.back().claim.exact) << "the final relayout is pure data movement";
  EXPECT_FALSE(ExactLineage(c, "ctx"));
  // The grouped copy of q before the fold reads only inputs: exact.
  bool some_exact = false;
  for (const Tensor& r : CompositionResults(c)) some_exact |= ExactLineage(c, r.name);
  EXPECT_TRUE(some_exact);
  // A pure data-movement op from inputs is exact end to end.
  Composition tr = LowerText("out: 'y' operands { name: 'x' } transpose { rows: 4 cols: 8 float: true }", *t);
  EXPECT_TRUE(ExactLineage(tr, "y"));
}

// An Approx claim's error growth is the tolerance of what its section stores, passed on through exact copies (the
// final relayout) and not through arithmetic: a later approximate section claims its own.
TEST(LineageTolerances, AClaimedGrowthPassesThroughCopiesNotThroughArithmetic) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok());
  Composition c = DecodeAttention(*t);
  std::vector<size_t> approx;
  for (size_t i = 0; i < c.sections.size(); ++i) {
    if (!c.sections[i].claim.exact) approx.push_back(i);
  }
  ASSERT_FALSE(approx.empty());
  ASSERT_TRUE(c.sections.back().claim.exact);
  const double plain = DefaultTolerance(false);
  EXPECT_EQ(LineageTolerances(c).at("ctx"), plain);
  // The last approximate section (what the final relayout copies) claims 4x: ctx has 4x.
  c.sections[approx.back()].claim.error_growth = 4;
  EXPECT_EQ(LineageTolerances(c).at("ctx"), 4 * plain);
  EXPECT_FALSE(ExactLineage(c, "ctx"));
  // Exact tensors have no tolerance to give.
  for (const auto& [name, tol] : LineageTolerances(c)) EXPECT_EQ(tol == 0, ExactLineage(c, name)) << name;

  // Split, the fold's partials are combined by arithmetic: a growth the fold claims stops there, the combine's own
  // reaches the result.
  Composition s = DecodeAttention(*t, 48);
  approx.clear();
  for (size_t i = 0; i < s.sections.size(); ++i) {
    if (!s.sections[i].claim.exact) approx.push_back(i);
  }
  ASSERT_EQ(approx.size(), 2u);
  ASSERT_EQ(approx.back(), s.sections.size() - 1) << "the combine writes the result";
  s.sections[approx.front()].claim.error_growth = 4;
  EXPECT_EQ(LineageTolerances(s).at("ctx"), plain);
  s.sections[approx.back()].claim.error_growth = 4;
  EXPECT_EQ(LineageTolerances(s).at("ctx"), 4 * plain);
}

}  // namespace
}  // namespace spatial
