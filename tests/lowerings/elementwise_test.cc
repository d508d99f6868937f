// The elementwise family against its op references on the VM, in all three forms (whole row, one item per tile,
// matrix), on test_tiny (8x8 tiles, a 4-tile accumulator) and wormhole_n150 (32x32, 8 tiles).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/elementwise/elementwise.h"
#include "spatial/maps.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

// rows == 1: a flat 1 x n row (shape unset). rows > 1: a rows x n matrix given as the spec's shape.
struct Shape {
  int64_t rows;
  int64_t n;
};

struct TargetShapes {
  const char* target;
  std::vector<Shape> shapes;
};

// test_tiny: rows up to 32 elements are one item, wider rows one item per tile; matrices not multiples of 8.
// wormhole_n150: the same boundaries at 32-wide tiles and 256-element rows, and Qwen3-0.6B's MLP width 3072.
const std::vector<TargetShapes>& Sweep() {
  static const std::vector<TargetShapes> sweep = {
      {"test_tiny",
       {{1, 1}, {1, 2}, {1, 7}, {1, 8}, {1, 9}, {1, 15}, {1, 16}, {1, 17}, {1, 31}, {1, 32}, {1, 33}, {1, 40},
        {1, 63}, {1, 64}, {1, 65}, {1, 100}, {1, 257}, {2, 3}, {8, 8}, {9, 17}, {3, 40}, {17, 5}, {16, 16}}},
      {"wormhole_n150",
       {{1, 1}, {1, 31}, {1, 33}, {1, 256}, {1, 257}, {1, 1000}, {1, 3072}, {2, 33}, {33, 65}, {64, 64}}},
  };
  return sweep;
}

// Lowers `kind` at every shape of the sweep on both targets, checks the form the seed picks (section name and item
// count) and the values against the reference. `make` fills the kind's message with n.
void SweepKind(const std::string& kind, const std::function<void(proto::OpSpec&, int64_t n)>& make, const Draw& draw,
               double tol) {
  int checked = 0;
  for (const TargetShapes& ts : Sweep()) {
    const Target& target = Shipped(ts.target);
    for (const Shape& sh : ts.shapes) {
      proto::OpSpec spec = Spec({"x"});
      const int64_t n = sh.rows * sh.n;
      make(spec, n);
      if (sh.rows > 1) {
        spec.set_shape_rows(sh.rows);
        spec.set_shape_cols(sh.n);
      }
      Composition c = CheckLowering(spec, target, draw, tol, /*seed=*/n * 31 + sh.rows);
      ASSERT_EQ(c.sections.size(), 1u);
      const Section& s = c.sections[0];
      const int64_t tiles = CeilDiv(sh.n, target.tile_cols());
      if (sh.rows > 1) {
        EXPECT_EQ(s.name, absl::StrCat(kind, "_", sh.rows, "x", sh.n));
        EXPECT_EQ(s.items.size(), static_cast<size_t>(CeilDiv(sh.rows, target.tile_rows()) * tiles));
      } else {
        EXPECT_EQ(s.name, absl::StrCat(kind, "_", n));
        const bool blocked = tiles > target.effective_acc_tiles(Precision::kFp32);
        EXPECT_EQ(s.items.size(), blocked ? static_cast<size_t>(tiles) : 1u) << s.name;
      }
      EXPECT_EQ(c.target, target.name());
      EXPECT_EQ(c.tile_rows, target.tile_rows());
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(ElementwiseTest, SiluMatchesReference) {
  SweepKind("silu", [](proto::OpSpec& s, int64_t n) { s.mutable_silu()->set_n(n); }, Reals(-8, 8), 1e-12);
}

TEST(ElementwiseTest, ReluFloatMatchesReference) {
  SweepKind("relu", [](proto::OpSpec& s, int64_t n) { s.mutable_relu()->set_n(n); }, Reals(-4, 4), 1e-12);
}

TEST(ElementwiseTest, ReluIntMatchesReferenceExactly) {
  SweepKind(
      "relu",
      [](proto::OpSpec& s, int64_t n) {
        s.mutable_relu()->set_n(n);
        s.mutable_relu()->set_int_(true);
      },
      Ints(INT32_MIN, INT32_MAX), 0.0);
}

TEST(ElementwiseTest, SigmoidMatchesReference) {
  SweepKind("sigmoid", [](proto::OpSpec& s, int64_t n) { s.mutable_sigmoid()->set_n(n); }, Reals(-10, 10), 1e-12);
}

TEST(ElementwiseTest, GeluMatchesReference) {
  SweepKind("gelu", [](proto::OpSpec& s, int64_t n) { s.mutable_gelu()->set_n(n); }, Reals(-6, 6), 1e-12);
}

TEST(ElementwiseTest, ErfGeluMatchesReference) {
  SweepKind(
      "gelu",
      [](proto::OpSpec& s, int64_t n) {
        s.mutable_gelu()->set_n(n);
        s.mutable_gelu()->set_erf(true);
      },
      Reals(-8, 8), 1e-12);
}

// The sigmoid op and the erf GELU are one SFPU transform each (tt-metal's sigmoid_tile and gelu_tile, rounded
// once), not an Exp and a Recip composed; the tanh GELU stays composed.
TEST(ElementwiseTest, SigmoidAndErfGeluAreOneTransform) {
  const Target& t = Shipped("wormhole_n150");
  auto body_of = [&](proto::OpSpec spec) {
    absl::StatusOr<Composition> c = Lower(spec, t);
    EXPECT_TRUE(c.ok()) << c.status();
    for (const Stage& st : c->sections[0].stages) {
      if (const auto* g = std::get_if<Generic>(&st.op)) return BodyToString(g->body);
    }
    return std::string();
  };
  proto::OpSpec sigmoid = Spec({"x"});
  sigmoid.mutable_sigmoid()->set_n(64);
  EXPECT_EQ(body_of(sigmoid), BodyToString(Unary(SfpuKind::Sigmoid(), Op(0))));
  proto::OpSpec gelu = Spec({"x"});
  gelu.mutable_gelu()->set_n(64);
  gelu.mutable_gelu()->set_erf(true);
  EXPECT_EQ(body_of(gelu), BodyToString(Unary(SfpuKind::Gelu(), Op(0))));
  gelu.mutable_gelu()->set_erf(false);
  EXPECT_EQ(body_of(gelu), BodyToString(GeluExpr(Op(0))));
}

TEST(ElementwiseTest, ScaleMatchesReference) {
  SweepKind(
      "scale",
      [](proto::OpSpec& s, int64_t n) {
        s.mutable_scale()->set_n(n);
        s.mutable_scale()->set_factor(n % 2 ? -3.7 : 0.08838834764831845);  // 1/sqrt(128): an attention scale
      },
      Reals(-100, 100), 1e-12);
}

TEST(ElementwiseTest, SoftcapMatchesReference) {
  SweepKind(
      "softcap",
      [](proto::OpSpec& s, int64_t n) {
        s.mutable_softcap()->set_n(n);
        s.mutable_softcap()->set_cap(n % 2 ? 30.0 : 50.0);  // Gemma 2's final and attention caps
      },
      Reals(-120, 120), 1e-12);
}

TEST(ElementwiseTest, IntRequantMatchesReferenceExactly) {
  SweepKind(
      "int_requant",
      [](proto::OpSpec& s, int64_t n) {
        auto* r = s.mutable_int_requant();
        r->set_n(n);
        r->set_m(n % 2 ? 1234 : -77);
        r->set_s(n % 3 == 0 ? 0 : 10);
      },
      Ints(INT8_MIN, INT8_MAX), 0.0);
}

TEST(ElementwiseTest, IntClampMatchesReferenceExactly) {
  SweepKind(
      "int_clamp",
      [](proto::OpSpec& s, int64_t n) {
        auto* c = s.mutable_int_clamp();
        c->set_n(n);
        c->set_lo(-128);
        c->set_hi(127);
      },
      Ints(INT32_MIN, INT32_MAX), 0.0);
}

// Requant is floor((x * M) / 2^S): negative products round toward minus infinity, like an arithmetic shift.
TEST(ElementwiseTest, IntRequantFloorsNegativeProducts) {
  proto::OpSpec spec = Spec({"x"});
  spec.mutable_int_requant()->set_n(4);
  spec.mutable_int_requant()->set_m(3);
  spec.mutable_int_requant()->set_s(2);
  TensorMap in;
  in["x"] = TensorData{1, 4, Precision::kInt32, {-1, 1, -5, 7}};
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, in);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->at("y").values, (std::vector<double>{-1, 0, -4, 5}));
  absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<TensorMap> vm = RunComposition(*c, 8, 8, in);
  ASSERT_TRUE(vm.ok()) << vm.status();
  EXPECT_EQ(vm->at("y").values, (std::vector<double>{-1, 0, -4, 5}));
}

TEST(ElementwiseTest, ClaimsAreExactOnlyForIntegerOps) {
  const Target& t = Shipped("test_tiny");
  proto::OpSpec relu_int = Spec({"x"});
  relu_int.mutable_relu()->set_n(5);
  relu_int.mutable_relu()->set_int_(true);
  proto::OpSpec relu_float = Spec({"x"});
  relu_float.mutable_relu()->set_n(5);
  proto::OpSpec gelu = Spec({"x"});
  gelu.mutable_gelu()->set_n(5);
  absl::StatusOr<Composition> a = Lower(relu_int, t), b = Lower(relu_float, t), g = Lower(gelu, t);
  ASSERT_TRUE(a.ok() && b.ok() && g.ok());
  EXPECT_TRUE(a->sections[0].claim.exact);
  EXPECT_EQ(a->sections[0].tensors[0].precision, Precision::kInt32);
  EXPECT_FALSE(b->sections[0].claim.exact);
  EXPECT_EQ(b->sections[0].claim.reason, "relu in bf16");
  EXPECT_EQ(g->sections[0].claim.reason, "gelu in bf16");
}

// The GELU body is the parser's one-exponential arrangement, node for node.
TEST(ElementwiseTest, GeluBodyIsTheSeedsTree) {
  const Body b = GeluExpr(Op(0));
  EXPECT_EQ(BodyToString(b).find("tanh"), std::string::npos);
  const Body x = Op(0);
  const Body want =
      Mul(x, Unary(SfpuKind::Recip(),
                   Add(Const(1.0), Unary(SfpuKind::Exp(),
                                         Sub(Const(0.0), Mul(Const(2.0), Mul(Const(0.7978845608028654),
                                                                             Add(x, Mul(Const(0.044715),
                                                                                        Mul(x, Mul(x, x)))))))))));
  EXPECT_TRUE(BodyEqual(b, want)) << BodyToString(b);
}

// A shape that does not account for n is a contradiction in the spec, never silently replaced by a 1 x n row (issue
// "Reliability"): InvalidArgument naming both, from the lowering and the reference alike. More in
// hostile_sizes_test.cc.
TEST(ElementwiseTest, ShapeNotMatchingNIsAnError) {
  proto::OpSpec spec = Spec({"x"});
  spec.mutable_silu()->set_n(16);
  spec.set_shape_rows(3);
  spec.set_shape_cols(5);
  const absl::Status want = absl::InvalidArgumentError(
      "silu spec's shape_rows x shape_cols = 3 x 5 = 15 elements disagrees with silu.n = 16");
  EXPECT_EQ(Lower(spec, Shipped("test_tiny")).status(), want);
  EXPECT_EQ(ReferenceOp(spec, TensorMap{}).status(), want);
}

// ── Decay ──

// The projection, the bias and the rate, whose log is a negative real.
Draw DecayDraw() {
  return [](const std::string& name, Rng& r) {
    if (name == "ar") return r.Real(-3, 3);
    if (name == "dt") return r.Real(-1, 1);
    return r.Real(-2, 0);
  };
}

TEST(DecayTest, FlatMatchesReference) {
  int checked = 0;
  for (const auto& [target, ns] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
           {"test_tiny", {1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32}},
           {"wormhole_n150", {1, 16, 31, 32, 33, 100, 255, 256}}}) {
    for (int64_t n : ns) {
      proto::OpSpec spec = Spec({"ar", "dt", "alog"});
      spec.mutable_decay()->set_n(n);
      spec.mutable_decay()->set_rows(n % 2);  // rows 0 and 1 are both the flat row
      Composition c = CheckLowering(spec, Shipped(target), DecayDraw(), 1e-12, n);
      ASSERT_EQ(c.sections.size(), 1u);
      EXPECT_EQ(c.sections[0].name, absl::StrCat("decay_", n));
      EXPECT_EQ(c.sections[0].items.size(), 1u);
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// A flat decay (rows 0 or 1) wider than the accumulator's page takes the tiled form as one row; it was refused.
TEST(DecayTest, AWideFlatRowTakesTheTiledForm) {
  const std::vector<std::pair<const char*, int64_t>> cases = {{"test_tiny", 100}, {"wormhole_n150", 4096}};
  for (const auto& [target, n] : cases) {
    for (int64_t rows : {0, 1}) {
      proto::OpSpec spec = Spec({"ar", "dt", "alog"});
      spec.mutable_decay()->set_n(n);
      spec.mutable_decay()->set_rows(rows);
      const Target& t = Shipped(target);
      Composition c = CheckLowering(spec, t, DecayDraw(), 1e-12, n + rows);
      ASSERT_EQ(c.sections.size(), 1u);
      EXPECT_EQ(c.sections[0].name, absl::StrCat("decay_1x", n));
      EXPECT_EQ(c.sections[0].items.size(), static_cast<size_t>(CeilDiv(n, t.tile_cols())));
    }
  }
}

TEST(DecayTest, DenseMatchesReference) {
  int checked = 0;
  for (const auto& [target, shapes] : std::vector<std::pair<const char*, std::vector<std::pair<int64_t, int64_t>>>>{
           {"test_tiny",
            {{2, 1}, {2, 3}, {3, 8}, {8, 8}, {9, 9}, {17, 40}, {4, 100}, {16, 2}, {5, 17}, {2, 64}, {30, 7}, {8, 33}}},
           {"wormhole_n150", {{2, 32}, {33, 48}, {64, 16}, {3, 100}, {4, 32}, {40, 3}, {2, 257}, {7, 24}}}}) {
    for (const auto& [rows, heads] : shapes) {
      proto::OpSpec spec = Spec({"ar", "dt", "alog"});
      spec.mutable_decay()->set_n(rows * heads);
      spec.mutable_decay()->set_rows(rows);
      const Target& t = Shipped(target);
      Composition c = CheckLowering(spec, t, DecayDraw(), 1e-12, rows * 1000 + heads);
      ASSERT_EQ(c.sections.size(), 1u);
      const Section& s = c.sections[0];
      EXPECT_EQ(s.name, absl::StrCat("decay_", rows, "x", heads));
      EXPECT_EQ(s.items.size(),
                static_cast<size_t>(CeilDiv(rows, t.tile_rows()) * CeilDiv(heads, t.tile_cols())));
      ASSERT_TRUE(s.plan.has_value());
      EXPECT_EQ(s.plan->grid_y, CeilDiv(rows, t.tile_rows()));
      // The bias and rate are 1 x heads: broadcast down the rows, not repeated.
      EXPECT_EQ(s.tensors[s.FindTensor("dt")].rows, 1);
      EXPECT_EQ(s.tensors[s.FindTensor("alog")].cols, heads);
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// The Dst a map computes in is the one tt-metal's unary op of the same name uses (ttnn eltwise/unary/unary.cpp:
// fp32_dest_acc_en only for fp32 or 32-bit integer data): a bf16 silu, sigmoid, gelu, relu or scale runs in a
// 16-bit Dst, so the simulator takes the SFPU's bf16 variants for it; in every form (whole row, a tile per item,
// matrix). The softcap, whose body cancels, and the integer maps keep their AccFor accumulator.
TEST(ElementwiseTest, MapsComputeInTheDstTtnnChooses) {
  const Target& t = Shipped("wormhole_n150");
  for (const Shape& shape : {Shape{1, 256}, Shape{1, 3072}, Shape{64, 96}}) {
    for (const char* kind : {"silu", "sigmoid", "gelu", "relu", "scale", "softcap", "int_clamp"}) {
      proto::OpSpec spec = Spec({"x"});
      if (shape.rows > 1) {
        spec.set_shape_rows(shape.rows);
        spec.set_shape_cols(shape.n);
      }
      const int64_t n = shape.rows * shape.n;
      const std::string k = kind;
      if (k == "silu") spec.mutable_silu()->set_n(n);
      if (k == "sigmoid") spec.mutable_sigmoid()->set_n(n);
      if (k == "gelu") spec.mutable_gelu()->set_n(n);
      if (k == "relu") spec.mutable_relu()->set_n(n);
      if (k == "scale") {
        spec.mutable_scale()->set_n(n);
        spec.mutable_scale()->set_factor(0.5);
      }
      if (k == "softcap") {
        spec.mutable_softcap()->set_n(n);
        spec.mutable_softcap()->set_cap(30);
      }
      if (k == "int_clamp") {
        spec.mutable_int_clamp()->set_n(n);
        spec.mutable_int_clamp()->set_lo(-5);
        spec.mutable_int_clamp()->set_hi(5);
      }
      absl::StatusOr<Composition> c = Lower(spec, t);
      ASSERT_TRUE(c.ok()) << kind << ": " << c.status();
      const Precision want = k == "softcap" ? Precision::kFp32 : k == "int_clamp" ? Precision::kInt32 : Precision::kBf16;
      EXPECT_EQ(c->sections[0].acc_precision, want) << kind << " " << shape.rows << "x" << shape.n;
    }
  }
}

}  // namespace
}  // namespace spatial::testing
