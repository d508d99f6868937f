// Binary row maps (lowerings/elementwise/binary.h): A op B over rows, flat, blocked and tile-grid, B the same shape
// or one row broadcast, float and int, checked against the op reference on the VM, validated and certified; the
// simulator's side is the tolerance table's (tests/integration/tolerances.cc) and the example flow's.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gtest/gtest.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

proto::OpSpec BinarySpecOf(int64_t rows, int64_t cols, proto::BinarySpec::Op op, bool broadcast, bool integer) {
  proto::OpSpec s = Spec({"a", "b"});
  if (rows > 1) {
    s.set_shape_rows(rows);
    s.set_shape_cols(cols);
  }
  s.mutable_binary()->set_op(op);
  s.mutable_binary()->set_n(rows * cols);
  s.mutable_binary()->set_broadcast(broadcast);
  s.mutable_binary()->set_int_(integer);
  return s;
}

TEST(BinaryTest, MatchesReference) {
  using Op = proto::BinarySpec;
  struct Case {
    const char* target;
    int64_t rows, cols;
    Op::Op op;
    bool broadcast, integer;
  };
  const std::vector<Case> cases = {
      // one row, one item
      {"test_tiny", 1, 1, Op::ADD, false, false},
      {"test_tiny", 1, 27, Op::SUB, false, false},
      {"test_tiny", 1, 64, Op::MUL, false, false},
      {"wormhole_n150", 1, 256, Op::ADD, false, false},
      // one row wider than a site's block: one item per tile
      {"wormhole_n150", 1, 1024, Op::ADD, false, false},
      {"wormhole_n150", 1, 3072, Op::MUL, false, false},  // Qwen3-0.6B's SwiGLU product, one token
      {"test_tiny", 1, 200, Op::ADD, false, false},
      {"wormhole_n150", 1, 9216, Op::MUL, false, false},
      {"wormhole_n150", 1, 12289, Op::SUB, false, false},
      // a matrix, one item per tile
      {"test_tiny", 9, 20, Op::ADD, false, false},
      {"test_tiny", 17, 33, Op::MUL, false, false},
      {"wormhole_n150", 32, 1024, Op::ADD, false, false},  // the example's residual add
      {"wormhole_n150", 40, 200, Op::SUB, false, false},
      {"wormhole_n150", 64, 96, Op::MUL, false, false},
      // a matrix and one row broadcast down it
      {"test_tiny", 9, 20, Op::MUL, true, false},
      {"test_tiny", 16, 8, Op::ADD, true, false},
      {"wormhole_n150", 33, 65, Op::SUB, true, false},
      {"wormhole_n150", 128, 1024, Op::MUL, true, false},  // a per-channel gate over 128 tokens
      {"wormhole_n150", 1, 100, Op::ADD, true, false},    // one row: the broadcast is the identity
      // integers, exact
      {"test_tiny", 1, 30, Op::ADD, false, true},
      {"test_tiny", 9, 20, Op::MUL, false, true},
      {"wormhole_n150", 1, 2048, Op::SUB, false, true},
      {"wormhole_n150", 40, 70, Op::MUL, true, true},
  };
  int checked = 0;
  for (const Case& c : cases) {
    const proto::OpSpec spec = BinarySpecOf(c.rows, c.cols, c.op, c.broadcast, c.integer);
    const Target& t = Shipped(c.target);
    Composition comp = CheckLowering(spec, t, c.integer ? Ints(-100, 100) : Reals(-4, 4), c.integer ? 0.0 : 1e-12,
                                     static_cast<uint64_t>(c.rows * 1000 + c.cols));
    ASSERT_FALSE(comp.sections.empty()) << spec.ShortDebugString();
    const CertifyResult cert = Certify(comp, t);
    EXPECT_TRUE(cert.ok()) << spec.ShortDebugString() << ": "
                           << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

// The forms and their names: one whole-row item; one item per tile past a site's block; the tile grid, a
// broadcast B one row whose map has no row term.
TEST(BinaryTest, FormsAndNames) {
  const Target& t = Shipped("wormhole_n150");
  auto lower = [&](const proto::OpSpec& s) {
    absl::StatusOr<Composition> c = Lower(s, t);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : Composition{};
  };
  Composition flat = lower(BinarySpecOf(1, 256, proto::BinarySpec::MUL, false, false));
  EXPECT_EQ(flat.sections[0].name, "binary_mul_256");
  EXPECT_EQ(flat.sections[0].items.size(), 1u);
  EXPECT_EQ(flat.sections[0].claim.reason, "binary_mul in bf16");
  EXPECT_EQ(flat.sections[0].acc_precision, Precision::kBf16);  // tt-metal's eltwise binary: a 16-bit Dst
  Composition wide = lower(BinarySpecOf(1, 9216, proto::BinarySpec::ADD, false, false));
  EXPECT_EQ(wide.sections[0].items.size(), 288u);
  Composition grid = lower(BinarySpecOf(40, 200, proto::BinarySpec::SUB, true, false));
  const Section& g = grid.sections[0];
  EXPECT_EQ(g.name, "binary_sub_row_40x200");
  EXPECT_EQ(g.items.size(), 2u * 7u);
  EXPECT_EQ(g.tensors[g.FindTensor("b")].rows, 1);
  Composition ints = lower(BinarySpecOf(1, 64, proto::BinarySpec::MUL, false, true));
  EXPECT_TRUE(ints.sections[0].claim.exact);
  // Wormhole stores no int16: int8 inputs, whose products all fit the int32 datapath.
  EXPECT_EQ(ints.sections[0].tensors[0].precision, Precision::kInt8);
}

TEST(BinaryTest, Refusals) {
  const Target& t = Shipped("wormhole_n150");
  proto::OpSpec unset = BinarySpecOf(1, 8, proto::BinarySpec::OP_UNSPECIFIED, false, false);
  EXPECT_EQ(Lower(unset, t).status(), absl::InvalidArgumentError("binary.op is unset (0): ADD, SUB or MUL"));
  proto::OpSpec unknown = BinarySpecOf(1, 8, static_cast<proto::BinarySpec::Op>(9), false, false);
  EXPECT_EQ(Lower(unknown, t).status(), absl::InvalidArgumentError("binary.op is not an op (9): ADD, SUB or MUL"));
  proto::OpSpec one = BinarySpecOf(1, 8, proto::BinarySpec::ADD, false, false);
  one.mutable_operands()->RemoveLast();
  EXPECT_EQ(Lower(one, t).status().message(), "NotLowered: binary takes 2 operands, got 1");
  proto::OpSpec shape = BinarySpecOf(4, 8, proto::BinarySpec::ADD, false, false);
  shape.mutable_binary()->set_n(31);
  EXPECT_EQ(Lower(shape, t).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Lower(shape, t).status(), ReferenceOp(shape, {}).status());
}

}  // namespace
}  // namespace spatial::testing
