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

// Inputs whose every mantissa bit matters (the ramp's values are short dyadic fractions, exact in every format),
// in [0.5, 1.5] so the dot products do not cancel.
TensorMap WigglyInputsOf(const Composition& c) {
  TensorMap in;
  for (const Tensor& t : CompositionInputs(c)) {
    TensorData d = sim_test::Ramp(t.rows, t.cols);
    for (size_t i = 0; i < d.values.size(); ++i) {
      d.values[i] = 1.0 + 0.5 * std::sin(0.37 * static_cast<double>(i) + 0.1);
    }
    in[t.name] = std::move(d);
  }
  return in;
}

class Lowered : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Target> t = LoadTarget("wormhole_n150");
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = std::make_unique<Target>(*t);
  }
  // A simulation under the target's numerics, compared with the exact VM.
  absl::StatusOr<SimResult> AgainstVm(const Composition& c, const TensorMap& in) const {
    std::unique_ptr<ValueModel> model = MakeTargetModel(*target_);
    SimOptions o;
    o.model = model.get();
    o.compare_vm = true;
    return Simulate(c, *target_, in, o);
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

// The multicast matmul on the 8x8 grid reads A and B from DRAM once each (1024^3: 8 x 8 items of 4 x 4 tiles, one
// round); the same program with every Load reading its own block reads each block once per receiver, 8 times as
// much, and takes longer.
TEST_F(Lowered, MulticastReadsEachBlockOnce) {
  proto::OpSpec spec = Spec({"a", "b"});
  spec.mutable_matmul()->set_m(1024);
  spec.mutable_matmul()->set_k(1024);
  spec.mutable_matmul()->set_n(1024);
  absl::StatusOr<Composition> c = Lower(spec, *target_);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->sections[0].items.size(), 64u);
  const proto::SimReport shared = sim_test::TimeOnly(*c, *target_);
  const int64_t operand_bytes = 2 * int64_t{1024} * 1024 * 2;
  EXPECT_EQ(shared.dram_read_bytes(), operand_bytes);
  Composition unicast = *c;
  for (Stage& st : unicast.sections[0].stages) {
    if (auto* l = std::get_if<Load>(&st.op)) l->multicast = LoopVar::kUnspecified;
  }
  const proto::SimReport own = sim_test::TimeOnly(unicast, *target_);
  EXPECT_EQ(own.dram_read_bytes(), 8 * operand_bytes);
  EXPECT_GT(own.total_cycles(), shared.total_cycles());
}

// MatmulSpec.math_fidelity reaches both the timing (LoFi : HiFi2 : HiFi4 tile products at 16 : 32 : 64 cycles) and
// the values (fewer mantissa bits multiplied: a larger error against the exact VM).
TEST_F(Lowered, MathFidelityChangesCyclesAndValues) {
  double cycles[3], err[3];
  const proto::Fidelity fids[3] = {proto::LOFI, proto::HIFI2, proto::HIFI4};
  for (int i = 0; i < 3; ++i) {
    proto::OpSpec spec = Spec({"a", "b"});
    spec.mutable_matmul()->set_m(4096);
    spec.mutable_matmul()->set_k(4096);
    spec.mutable_matmul()->set_n(4096);
    spec.mutable_matmul()->set_math_fidelity(fids[i]);
    // bfp8_b operands (the published LoFi rows' format): bf16 at LoFi is bound by the unpackers' shared port.
    spec.mutable_matmul()->set_in0_format(proto::BFP8_B);
    spec.mutable_matmul()->set_in1_format(proto::BFP8_B);
    absl::StatusOr<Composition> big = Lower(spec, *target_);
    ASSERT_TRUE(big.ok()) << big.status();
    cycles[i] = static_cast<double>(sim_test::TimeOnly(*big, *target_).total_cycles());
    spec.mutable_matmul()->clear_in0_format();
    spec.mutable_matmul()->clear_in1_format();
    spec.mutable_matmul()->set_m(64);
    spec.mutable_matmul()->set_k(256);
    spec.mutable_matmul()->set_n(64);
    absl::StatusOr<Composition> small = Lower(spec, *target_);
    ASSERT_TRUE(small.ok()) << small.status();
    absl::StatusOr<SimResult> r = AgainstVm(*small, WigglyInputsOf(*small));
    ASSERT_TRUE(r.ok()) << r.status();
    err[i] = r->report.errors(0).rel_l2();
  }
  // LoFi is partly bound by the accumulator's reload at this shape; HiFi4 is purely matrix-bound.
  EXPECT_LT(cycles[0], 0.8 * cycles[1]);
  EXPECT_LT(cycles[1], 0.6 * cycles[2]);
  EXPECT_GT(err[0], err[1]);
  EXPECT_GE(err[1], err[2]);
}

// Block-float inputs: bfp8_b and bfp4_b operands round the inputs before the product, so the error against the
// f64 VM grows from bf16 to bfp8_b to bfp4_b; the tiles are 1088 and 576 bytes, so the DRAM reads shrink.
TEST_F(Lowered, BlockFloatFormatsRoundTheOperands) {
  double err[3];
  int64_t read[3];
  const proto::Precision fmts[3] = {proto::BF16, proto::BFP8_B, proto::BFP4_B};
  for (int i = 0; i < 3; ++i) {
    proto::OpSpec spec = Spec({"a", "b"});
    spec.mutable_matmul()->set_m(64);
    spec.mutable_matmul()->set_k(256);
    spec.mutable_matmul()->set_n(64);
    spec.mutable_matmul()->set_in0_format(fmts[i]);
    spec.mutable_matmul()->set_in1_format(fmts[i]);
    absl::StatusOr<Composition> c = Lower(spec, *target_);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<SimResult> r = AgainstVm(*c, WigglyInputsOf(*c));
    ASSERT_TRUE(r.ok()) << r.status();
    err[i] = r->report.errors(0).rel_l2();
    read[i] = r->report.dram_read_bytes();
  }
  EXPECT_LT(err[0], err[1]);
  EXPECT_LT(err[1], err[2]);
  EXPECT_EQ(read[1] * 2048, read[0] * 1088);
  EXPECT_EQ(read[2] * 2048, read[0] * 576);
}

// The accumulator switches as tt-metal's benchmarks run them: packer L1 accumulation takes the partials' reload
// out of every K block, so the unpackers read a quarter less at 4096^3 bfp8_b LoFi with an fp32 Dst (the fp32
// partials: 4 KB a tile against 8 operand tiles of 1088 B per K block of a 2 x 2 sub-block) and a bf16 Dst (twice
// the sub-block) less again; with the math's wait for Wormhole's held pairs (Costs.matmul_held_pairs) the math, not
// the unpackers, bounds these runs, so the time moves less than the unpackers' work. A bf16 Dst rounds the sums
// after every product, so its error against the VM is larger.
TEST_F(Lowered, AccumulatorSwitchesChangeCyclesAndValues) {
  struct Switches {
    bool fp32_dest, l1_acc;
  };
  const Switches runs[3] = {{true, false}, {true, true}, {false, true}};
  double cycles[3], unpack[3], err[3];
  for (int i = 0; i < 3; ++i) {
    proto::OpSpec spec = Spec({"a", "b"});
    proto::MatmulSpec* mm = spec.mutable_matmul();
    mm->set_m(4096);
    mm->set_k(4096);
    mm->set_n(4096);
    mm->set_math_fidelity(proto::LOFI);
    mm->set_in0_format(proto::BFP8_B);
    mm->set_in1_format(proto::BFP8_B);
    mm->set_fp32_dest_acc(runs[i].fp32_dest);
    mm->set_packer_l1_acc(runs[i].l1_acc);
    absl::StatusOr<Composition> big = Lower(spec, *target_);
    ASSERT_TRUE(big.ok()) << big.status();
    const proto::SimReport timed = sim_test::TimeOnly(*big, *target_);
    cycles[i] = static_cast<double>(timed.total_cycles());
    unpack[i] = 0;
    for (const proto::EngineStats& e : timed.engines()) {
      if (e.engine() == "unpack") unpack[i] = e.busy_cycles();
    }
    mm->set_m(64);
    mm->set_k(512);
    mm->set_n(64);
    mm->clear_math_fidelity();
    mm->clear_in0_format();
    mm->clear_in1_format();
    absl::StatusOr<Composition> small = Lower(spec, *target_);
    ASSERT_TRUE(small.ok()) << small.status();
    absl::StatusOr<SimResult> r = AgainstVm(*small, WigglyInputsOf(*small));
    ASSERT_TRUE(r.ok()) << r.status();
    err[i] = r->report.errors(0).rel_l2();
  }
  EXPECT_LT(unpack[1], 0.8 * unpack[0]);
  EXPECT_LT(unpack[2], 0.8 * unpack[1]);
  EXPECT_LT(cycles[2], 0.95 * cycles[0]);
  // The two runs' estimates differ, so the lowering may block them differently: within 2% of each other.
  EXPECT_LT(cycles[1], 1.02 * cycles[0]);
  EXPECT_EQ(err[0], err[1]);  // where the partials are added changes no bit
  EXPECT_GT(err[2], 2 * err[1]);
}

}  // namespace
}  // namespace spatial
