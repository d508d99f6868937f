// The forked entry point: values from the VM, errors carried back from the child, options honoured.
#include "sim/simulate.h"

#include <cmath>

#include "gtest/gtest.h"
#include "sim/report/error_stats.h"
#include "sim/vm/vm.h"
#include "tests/sim/sim_test_util.h"

namespace spatial {
namespace {

using sim_test::ExpMap;
using sim_test::MatmulFold;
using sim_test::Ramp;
using sim_test::WormholeLike;

TensorMap MatmulInputs(const Composition& c) {
  TensorMap in;
  for (const Tensor& t : CompositionInputs(c)) in[t.name] = Ramp(t.rows, t.cols);
  return in;
}

TEST(Simulate, OutputsEqualTheVmUnderTheExactModel) {
  const Composition c = MatmulFold(3, 2, 2, 2, 3);
  const TensorMap in = MatmulInputs(c);
  absl::StatusOr<TensorMap> vm = RunComposition(c, 32, 32, in);
  ASSERT_TRUE(vm.ok()) << vm.status();
  SimOptions o;
  o.compare_vm = true;
  absl::StatusOr<SimResult> r = Simulate(c, WormholeLike(2, 2), in, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  const TensorData& got = r->outputs.at("c");
  EXPECT_EQ(got.rows, 3 * 2 * 32);
  EXPECT_EQ(got.cols, 2 * 32);
  EXPECT_EQ(got.values, vm->at("c").values);
  // Not a trivially zero result.
  EXPECT_GT(std::fabs(got.values[5]) + std::fabs(got.values[100]), 0.0);
  ASSERT_EQ(r->report.errors_size(), 1);
  const proto::OutputError& e = r->report.errors(0);
  EXPECT_EQ(e.tensor(), "c");
  EXPECT_EQ(e.max_abs(), 0.0);
  EXPECT_EQ(e.rel_l2(), 0.0);
  EXPECT_FALSE(e.exact_claim());
  EXPECT_EQ(e.tolerance(), kApproxRelL2Tolerance);
  EXPECT_TRUE(e.within());
  EXPECT_EQ(r->report.numerics(), "exact");
  EXPECT_GT(r->report.total_cycles(), 0);
}

// Rounds every stored value to a multiple of 1/4: a stand-in for a target's numerics that the test can predict.
class QuarterModel : public ValueModel {
 public:
  bool exact() const override { return false; }
  void StoreRound(Precision, double* v, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) v[i] = std::round(v[i] * 4) / 4;
  }
  double Arith(BodyOp op, double a, double b, Precision) const override {
    switch (op) {
      case BodyOp::kAdd:
        return a + b;
      case BodyOp::kSub:
        return a - b;
      case BodyOp::kMul:
        return a * b;
      case BodyOp::kMin:
        return std::min(a, b);
      case BodyOp::kMax:
        return std::max(a, b);
      default:
        return std::floor(a / b);
    }
  }
  double Sfpu(const SfpuKind&, double x, Precision) const override { return std::exp(x); }
  void MatmulTile(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                  int64_t ldc, int64_t tr, int64_t tc, int64_t kk, Precision, MathFidelity) const override {
    for (int64_t i = 0; i < tr; ++i) {
      for (int64_t j = 0; j < tc; ++j) {
        double s = c[i * ldc + j];
        for (int64_t k = 0; k < kk; ++k) s += a[i * lda + k] * (transpose_b ? b[j * ldb + k] : b[k * ldb + j]);
        c[i * ldc + j] = s;
      }
    }
  }
};

TEST(Simulate, ComparesTheModelsOutputsWithTheExactVm) {
  const Composition c = ExpMap(4, 2);
  TensorMap in;
  // Quarters: the model's rounding of the loaded input changes nothing, so all the error is exp's output rounding.
  in["x"] = Ramp(32, 4 * 2 * 32, 17, 4.0);
  QuarterModel model;
  SimOptions o;
  o.model = &model;
  o.compare_vm = true;
  o.tolerance["y"] = 1e-9;
  absl::StatusOr<SimResult> r = Simulate(c, WormholeLike(1, 2), in, o);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<TensorMap> exact = RunComposition(c, 32, 32, in);
  ASSERT_TRUE(exact.ok()) << exact.status();
  const std::vector<double>& sim = r->outputs.at("y").values;
  const std::vector<double>& ref = exact->at("y").values;
  ASSERT_EQ(sim.size(), ref.size());
  double max_abs = 0, d2 = 0, r2 = 0;
  for (size_t i = 0; i < sim.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(sim[i] - ref[i]));
    d2 += (sim[i] - ref[i]) * (sim[i] - ref[i]);
    r2 += ref[i] * ref[i];
  }
  ASSERT_GT(max_abs, 0.0);
  EXPECT_LE(max_abs, 0.125 + 1e-12);  // one quarter-rounding of exp's output
  ASSERT_EQ(r->report.errors_size(), 1);
  const proto::OutputError& e = r->report.errors(0);
  EXPECT_DOUBLE_EQ(e.max_abs(), max_abs);
  EXPECT_DOUBLE_EQ(e.rel_l2(), std::sqrt(d2) / std::sqrt(r2));
  EXPECT_EQ(e.tolerance(), 1e-9);
  EXPECT_FALSE(e.within());
  EXPECT_EQ(r->report.numerics(), "target");
}

TEST(Simulate, TimingOnlyReturnsNoValues) {
  SimOptions o;
  o.timing_only = true;
  o.compare_vm = true;
  absl::StatusOr<SimResult> r = Simulate(ExpMap(4, 2), WormholeLike(1, 1), {}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->outputs.empty());
  EXPECT_EQ(r->report.errors_size(), 0);
  EXPECT_EQ(r->report.numerics(), "none");
  EXPECT_TRUE(r->report.timing_only());
}

// An indirect load whose index lies outside its admitted range: the VM faults in the child and the parent gets
// the fault back, code and message intact.
TEST(Simulate, AVmFaultBecomesAClearError) {
  Template t(32, 32);
  TensorId idx = t.AddTensor("idx", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  TensorId x = t.AddTensor("x", TensorRole::kInput, 32, 64, Precision::kBf16, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32, Precision::kBf16, TensorInit::Zero());
  BufferId ib = t.AddBuffer("idx_page", 1, Precision::kInt32);
  BufferId xb = t.AddBuffer("x_page", 1, Precision::kBf16);
  StageId li = t.AddLoad("load_idx", idx, {}, 1, ib);
  AccessPattern pat{TileAddr{0, {}, IndirectTile{ib, 1, 0, 1}}, 1, 1, 1, 1};
  StageId lx = t.AddLoadPattern("gather_x", x, pat, xb);
  StageId st = t.AddStore("store_y", y, {}, 1, xb);
  t.AddEdge(li, ib, lx);
  t.AddEdge(lx, xb, st);
  const Composition c = sim_test::One(t.Finish("gather", WholeRow(1), Precision::kFp32, NumericsClaim::Exact()));
  TensorMap in;
  in["idx"] = TensorData{1, 1, Precision::kInt32, {7}};
  in["x"] = Ramp(32, 64);
  absl::StatusOr<SimResult> r = Simulate(c, WormholeLike(1, 1), in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  EXPECT_EQ(r.status().message().substr(0, 15), "IndexOutOfRange") << r.status();
  EXPECT_NE(r.status().message().find("gather_x"), std::string::npos) << r.status();
  // In range, the same program runs and gathers tile 1.
  in["idx"].values[0] = 1;
  absl::StatusOr<SimResult> ok = Simulate(c, WormholeLike(1, 1), in);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->outputs.at("y").values[0], in["x"].values[32]);
}

TEST(Simulate, TripSetsTheFoldBlocksTimed) {
  Composition c = MatmulFold(1, 2, 2, 2, 8);
  Section& s = c.sections[0];
  s.tensors.push_back(Tensor{"pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External(), std::nullopt});
  // ceil(pos / 64) blocks of 2 K tiles, pos admitted in [1, 512].
  s.trip = Trip{static_cast<TensorId>(s.tensors.size() - 1), 0, 1, 512, 0, 64};
  SimOptions o;
  o.timing_only = true;
  TensorMap in;
  in["pos"] = TensorData{1, 1, Precision::kInt32, {130}};
  absl::StatusOr<SimResult> r = Simulate(c, WormholeLike(1, 1), in, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.sections(0).fold_blocks(), 3);
  EXPECT_EQ(r->report.engines(2).engine(), "matrix");
  // Three matmul blocks, plus the prologue's zero fill and the epilogue's pack (datacopies on the FPU).
  EXPECT_EQ(r->report.engines(2).invocations(), 3 + 2);
  in["pos"].values[0] = 513;
  absl::StatusOr<SimResult> bad = Simulate(c, WormholeLike(1, 1), in, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().substr(0, 14), "TripOutOfRange") << bad.status();
}

TEST(Simulate, RefusesMalformedProgramsWithoutCrashing) {
  Composition c = ExpMap(2, 1);
  c.sections[0].stages[1].ins[0] = 42;  // no such buffer
  SimOptions o;
  o.timing_only = true;
  absl::StatusOr<SimResult> r = Simulate(c, WormholeLike(1, 1), {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("buffer 42"), std::string::npos) << r.status();

  Composition depth0 = ExpMap(2, 1);
  depth0.sections[0].buffers[0].depth = 0;
  EXPECT_FALSE(Simulate(depth0, WormholeLike(1, 1), {}, o).ok());

  Composition tiny = ExpMap(2, 1);
  tiny.tile_rows = 8;
  EXPECT_EQ(Simulate(tiny, WormholeLike(1, 1), {}, o).status().code(), absl::StatusCode::kInvalidArgument);

  proto::Target no_dram = sim_test::WormholeLikeProto(1, 1);
  no_dram.mutable_dram()->set_bytes_per_second(0);
  EXPECT_EQ(Simulate(ExpMap(2, 1), Target(no_dram), {}, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Simulate, ATimeoutKillsTheChild) {
  SimOptions o;
  o.timing_only = true;
  o.timeout_seconds = 1;
  // 64 items of 50,000 fold blocks: about 1e7 stage invocations, several seconds of simulation.
  absl::StatusOr<SimResult> r = Simulate(MatmulFold(64, 1, 1, 1, 50'000), WormholeLike(8, 8), {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

}  // namespace
}  // namespace spatial

namespace spatial {
namespace {

TEST(Simulate, RefusesRunsLongerThanTheSimulatorsClock) {
  Composition c = sim_test::Copy(2, 1);
  // A hostile block of 2^40 x 2^20 tiles per load.
  auto& load = std::get<Load>(c.sections[0].stages[0].op);
  load.pattern.block_h = int64_t{1} << 40;
  load.pattern.block_w = int64_t{1} << 20;
  SimOptions o;
  o.timing_only = true;
  absl::StatusOr<SimResult> r = Simulate(c, WormholeLike(1, 1), {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(r.status().message().substr(0, 8), "TooLarge") << r.status();

  proto::Target huge = sim_test::WormholeLikeProto(1000, 1000);
  EXPECT_EQ(Simulate(sim_test::Copy(2, 1), Target(huge), {}, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spatial
