// The shared helpers: the accumulator budget and blocking, the fills as tensor inits, the claims.
#include "gtest/gtest.h"
#include "spatial/proto_file.h"
#include "lowerings/toolkit/common.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

TEST(CommonTest, RowBlockIsTheLargestDivisorInTheBudget) {
  const Target& wh = Shipped("wormhole_n150");  // 8 fp32 tiles
  const Target& tiny = Shipped("test_tiny");    // 4
  EXPECT_EQ(RowBlockTiles(wh), 8);
  EXPECT_EQ(RowBlock(160, wh), 8);  // Qwen3.8's d = 5120: twenty items of eight
  EXPECT_EQ(RowBlock(9, wh), 3);
  EXPECT_EQ(RowBlock(7, wh), 7);
  EXPECT_EQ(RowBlock(11, wh), 1);
  EXPECT_EQ(RowBlock(6, tiny), 3);
  EXPECT_EQ(RowBlock(5, tiny), 1);
  EXPECT_EQ(RowBlock(1, tiny), 1);
  EXPECT_FALSE(RowNeedsBlocking(256, wh));
  EXPECT_TRUE(RowNeedsBlocking(257, wh));
  EXPECT_EQ(TilesOf(0, tiny), 1);
  EXPECT_EQ(TilesOf(17, tiny), 3);
}

TEST(CommonTest, FillsBecomeInits) {
  proto::Fill unknown;
  EXPECT_EQ(*InitOf(unknown, 3), TensorInit::External());
  proto::Fill ci;
  ci.set_const_i(7);
  EXPECT_EQ(*InitOf(ci, 3), TensorInit::Values({7, 7, 7}));
  proto::Fill pat;
  pat.mutable_pattern()->set_modulus(3);
  pat.mutable_pattern()->set_shift(1);
  EXPECT_EQ(*InitOf(pat, 5), TensorInit::Values({1, 2, 3, 1, 2}));
  proto::Fill ov;
  *ov.mutable_overrides()->mutable_base() = ci;
  auto* set = ov.mutable_overrides()->add_sets();
  set->set_at(1);
  set->set_value(-4);
  EXPECT_EQ(*InitOf(ov, 3), TensorInit::Values({7, -4, 7}));
  set->set_at(3);
  EXPECT_EQ(InitOf(ov, 3).status().code(), absl::StatusCode::kInvalidArgument);
  proto::Fill cf;
  cf.set_const_f(0.5);
  EXPECT_EQ(*InitOf(cf, 3), TensorInit::ConstF(0.5));
  proto::Fill rp;
  rp.mutable_real_pattern()->set_modulus(2);
  rp.mutable_real_pattern()->set_scale(0.5);
  rp.mutable_real_pattern()->set_offset(1.0);
  EXPECT_EQ(*InitOf(rp, 3), TensorInit::FloatValues({1.0, 1.5, 1.0}));
}

// A known fill reaches the operand's tensor in every form.
TEST(CommonTest, OperandFillIsTheTensorInit) {
  proto::OpSpec spec = Spec({"x"});
  spec.mutable_relu()->set_n(12);
  spec.mutable_operands(0)->mutable_fill()->set_const_f(2.0);
  for (int64_t rows : {1, 3}) {
    spec.set_shape_rows(rows);
    spec.set_shape_cols(12 / rows);
    absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
    ASSERT_TRUE(c.ok()) << c.status();
    const Section& s = c->sections[0];
    EXPECT_EQ(s.tensors[s.FindTensor("x")].init, TensorInit::ConstF(2.0));
    EXPECT_EQ(s.tensors[s.FindTensor("y")].role, TensorRole::kOutput);
  }
}

// An operand may not take a name of the lowering's own intermediates ("{out}__..."): the lowering fuzzer's case, a
// gated delta operand named "{out}__sel_b", which met the gather table of that name and another shape.
TEST(CommonTest, OperandNamesOfTheLoweringsOwnAreRefused) {
  const std::string text = R"(out: "attn_out"
operands { name: "query" } operands { name: "key" } operands { name: "value" } operands { name: "z" }
operands { name: "beta" } operands { name: "alpha" } operands { name: "attn_out__sel_b" }
operands { name: "norm_weight" }
gated_delta { hv: 32 hk: 16 d: 32 rows: 1 eps: 1e-06 gate: SILU })";
  proto::OpSpec spec;
  ASSERT_TRUE(ParseTextProto(text, "gdn.textproto", &spec).ok());
  EXPECT_EQ(Lower(spec, Shipped("test_tiny")).status(),
            absl::InvalidArgumentError("gated_delta operand 6 is named 'attn_out__sel_b': names beginning "
                                       "'attn_out__' are the lowering's own (its intermediate tensors)"));
  // "attn_out_" alone (one underscore) is the user's.
  spec.mutable_operands(6)->set_name("attn_out_state");
  EXPECT_TRUE(Lower(spec, Shipped("test_tiny")).ok());
}

TEST(CommonTest, Claims) {
  EXPECT_EQ(ApproxIn("silu", Precision::kBf16).reason, "silu in bf16");
  EXPECT_TRUE(ClaimOf("clamp", Min(Op(0), Const(3)), Precision::kInt32).exact);
  EXPECT_FALSE(ClaimOf("clamp", Min(Op(0), Const(0.5)), Precision::kInt32).exact);
  EXPECT_FALSE(ClaimOf("relu", Max(Op(0), Const(0)), Precision::kBf16).exact);
  EXPECT_EQ(AccFor(Precision::kBf16), Precision::kFp32);
  EXPECT_EQ(AccFor(Precision::kInt32), Precision::kInt32);
}

}  // namespace
}  // namespace spatial::testing
