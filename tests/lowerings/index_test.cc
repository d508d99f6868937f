// The index types and index arithmetic the gathers, row writes, argmax and rope share (lowerings/index.h): how an
// index is sized, what a literal row refuses, and the checks a named row or count passes — run on the VM.
#include "lowerings/toolkit/index.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "lowerings/toolkit/flat_build.h"
#include "spatial/maps.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

proto::Fill ConstI(int64_t v) {
  proto::Fill f;
  f.set_const_i(v);
  return f;
}

TEST(IndexTest, FillBounds) {
  EXPECT_EQ(FillAbsBound(proto::Fill()), std::nullopt);
  EXPECT_EQ(FillAbsBound(ConstI(-7)), 7);
  proto::Fill pattern;
  pattern.mutable_pattern()->set_modulus(10);
  pattern.mutable_pattern()->set_shift(-3);
  EXPECT_EQ(FillAbsBound(pattern), 6);  // values -3 .. 6
  proto::Fill over;
  *over.mutable_overrides()->mutable_base() = ConstI(2);
  auto* set = over.mutable_overrides()->add_sets();
  set->set_at(1);
  set->set_value(-90);
  EXPECT_EQ(FillAbsBound(over), 90);
  proto::Fill real;
  real.set_const_f(3.5);
  EXPECT_EQ(FillAbsBound(real), std::nullopt);
  EXPECT_EQ(FillAbsBound(ConstI(std::numeric_limits<int64_t>::min())), std::numeric_limits<int64_t>::max());
}

TEST(IndexTest, IndexSpaceHoldsADeclaredIndexPastTheTable) {
  EXPECT_EQ(IndexSpace(100, 10, proto::Fill()), 100);
  EXPECT_EQ(IndexSpace(100, 10, ConstI(3)), 100);
  EXPECT_EQ(IndexSpace(100, 10, ConstI(30)), 310);  // (30 + 1) * 10: row 30 of a 10-row table must still be held
  EXPECT_EQ(IndexSpace(5, 0, ConstI(9)), 10);       // per_unit at least 1
  EXPECT_EQ(IndexSpace(5, 1 << 30, ConstI(int64_t{1} << 40)), std::numeric_limits<int64_t>::max());  // saturates
}

TEST(IndexTest, Precisions) {
  const Target& tiny = Shipped("test_tiny");
  absl::StatusOr<Precision> p = IndexType(tiny, 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, Precision::kInt32);
  absl::StatusOr<Precision> wide = IndexType(tiny, int64_t{1} << 40);
  EXPECT_EQ(wide.status().message(), "MissingPrecision: an index integer holding 1099511627776 (target test_tiny)");
  EXPECT_TRUE(IsRefusal(wide.status()));
  EXPECT_EQ(*TablePrecision(true, Precision::kBf16, ConstI(1 << 20), tiny), Precision::kBf16);
  EXPECT_EQ(*TablePrecision(false, Precision::kBf16, proto::Fill(), tiny), Precision::kInt32);
  EXPECT_FALSE(RowWritePrecision(false, Precision::kBf16, ConstI(1), ConstI(int64_t{1} << 33), tiny).ok());
  EXPECT_EQ(*RowWritePrecision(false, Precision::kBf16, ConstI(1), ConstI(5), tiny), Precision::kInt32);
}

TEST(IndexTest, LiteralRows) {
  EXPECT_EQ(*LiteralRowOffset(1, 4, 7), 0);
  EXPECT_EQ(*LiteralRowOffset(4, 4, 7), 21);
  for (int64_t bad : {0, -1, 5}) {
    EXPECT_EQ(LiteralRowOffset(bad, 4, 7).status().message(),
              "NotLowered: a literal row index outside its table — the program fails at run time on every tier, so "
              "there is no section to lower");
  }
}

// A one-section program around CheckedCount: P in, P out, checked to be in [1, rows].
Composition CountProgram(int64_t rows, const Target& target) {
  FlatBuild b = FlatBuild::At(Precision::kInt32, target);
  absl::StatusOr<BufferId> count = b.InputPaged("count", 1, proto::Fill(), Precision::kInt32, 2);
  EXPECT_TRUE(count.ok());
  IndexChain checked = CheckedCount(b, *count, rows, Precision::kInt32);
  absl::StatusOr<Composition> c =
      b.Finish("p", 1, checked.stages, checked.out, "checked_count", NumericsClaim::Exact());
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(IndexTest, CheckedCountPassesACountInItsRangeAndFaultsOutside) {
  const Target& tiny = Shipped("test_tiny");
  const Composition c = CountProgram(6, tiny);
  ASSERT_TRUE(ValidateComposition(c, 8, 8).ok());
  ExpectCertifies(c, tiny);
  auto run = [&](double p) {
    TensorMap in;
    in["count"] = TensorData{1, 1, Precision::kInt32, {p}};
    return RunComposition(c, 8, 8, in);
  };
  for (double p : {1.0, 3.0, 6.0}) {
    absl::StatusOr<TensorMap> r = run(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->at("p").values[0], p);
  }
  const absl::Status past = run(7).status();
  EXPECT_TRUE(absl::StartsWith(past.message(), "IndexOutOfRange: ")) << past;
  EXPECT_TRUE(absl::StrContains(past.message(), "stage 'count_biased'")) << past;
  EXPECT_TRUE(absl::StrContains(past.message(), "index value 7")) << past;
  const absl::Status zero = run(0).status();
  EXPECT_TRUE(absl::StrContains(zero.message(), "stage 'count_checked'")) << zero;
  EXPECT_TRUE(absl::StrContains(zero.message(), "index value -1")) << zero;
  EXPECT_TRUE(absl::StrContains(run(-2147483648.0).status().message(), "stage 'count_biased'"));
}

}  // namespace
}  // namespace spatial::testing
