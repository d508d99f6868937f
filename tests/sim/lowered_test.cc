// Lowered programs on a shipped target: the simulator's values under the target's numerics stay within the claim's
// tolerance of the exact VM, and its timing lands inside the roofline.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "sim/numerics/target_model.h"
#include "sim/report/summary.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "targets/loader.h"
#include "tests/sim/sim_test_util.h"

namespace spatial {
namespace {

proto::OpSpec Spec(const std::vector<std::string>& operands) {
  proto::OpSpec s;
  s.set_out("out");
  for (const std::string& n : operands) s.add_operands()->set_name(n);
  return s;
}

TensorMap InputsOf(const Composition& c) {
  TensorMap in;
  for (const Tensor& t : CompositionInputs(c)) in[t.name] = sim_test::Ramp(t.rows, t.cols, 29, 16.0);
  return in;
}

class Lowered : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Target> t = LoadTarget("wormhole_n150");
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = std::make_unique<Target>(*t);
  }
  std::unique_ptr<Target> target_;
};

TEST_F(Lowered, MatmulWithinToleranceAndRoofline) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(96);
  spec.mutable_matmul()->set_k(160);
  spec.mutable_matmul()->set_n(128);
  absl::StatusOr<Composition> c = Lower(spec, *target_);
  ASSERT_TRUE(c.ok()) << c.status();
  const TensorMap in = InputsOf(*c);
  std::unique_ptr<ValueModel> model = MakeTargetModel(*target_);
  SimOptions o;
  o.model = model.get();
  o.compare_vm = true;
  absl::StatusOr<SimResult> r = Simulate(*c, *target_, in, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->report.errors_size(), 1);
  const proto::OutputError& e = r->report.errors(0);
  EXPECT_EQ(e.tensor(), "out");
  EXPECT_GT(e.max_abs(), 0.0);  // bf16 rounding shows
  EXPECT_TRUE(e.within()) << e.DebugString();
  const proto::SimReport& rep = r->report;
  // 3 x 5 x 4 output-tile x K products of 2 * 32^3 FLOPs.
  EXPECT_DOUBLE_EQ(rep.flops(), 3 * 4 * 5 * 2.0 * 32 * 32 * 32);
  EXPECT_GT(rep.roofline().fraction(), 0.0);
  EXPECT_LE(rep.roofline().fraction(), 1.0);
  EXPECT_GE(static_cast<double>(rep.total_cycles()), rep.roofline().bound_cycles());
  EXPECT_EQ(rep.numerics(), "target");
  const std::string text = FormatReport(rep);
  EXPECT_NE(text.find("roofline"), std::string::npos);
  EXPECT_NE(text.find("ok   out: max abs"), std::string::npos) << text;
  if (std::getenv("SIM_TEST_VERBOSE") != nullptr) std::printf("%s", text.c_str());
}

TEST_F(Lowered, SiluUnderTheExactModelEqualsTheVm) {
  proto::OpSpec spec = Spec({"x"});
  spec.mutable_silu()->set_n(5000);
  absl::StatusOr<Composition> c = Lower(spec, *target_);
  ASSERT_TRUE(c.ok()) << c.status();
  const TensorMap in = InputsOf(*c);
  absl::StatusOr<TensorMap> vm = RunComposition(*c, 32, 32, in);
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<SimResult> r = Simulate(*c, *target_, in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs.at("out").values, vm->at("out").values);
  // SFPU-bound: silu is the accurate 1705-cycle kernel on Wormhole (approx_mode off).
  EXPECT_GT(r->report.engines(3).busy_cycles(), 0.0);
  EXPECT_EQ(r->report.engines(3).engine(), "sfpu");
}

}  // namespace
}  // namespace spatial
