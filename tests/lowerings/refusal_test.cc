// Every refusal the elementwise family and matmul can give, with its message.
#include <cmath>
#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "spatial/proto_io.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

// The refusal's full message; fails the test when `spec` lowers.
std::string Refusal(const proto::OpSpec& spec, const Target& target) {
  absl::StatusOr<Composition> c = Lower(spec, target);
  EXPECT_FALSE(c.ok()) << "lowered " << spec.ShortDebugString();
  if (c.ok()) return "";
  EXPECT_TRUE(IsRefusal(c.status())) << c.status();
  return std::string(c.status().message());
}

// test_tiny with one of its datapaths or its tile changed.
Target Tiny(const std::function<void(proto::Target&)>& edit) {
  proto::Target p = Shipped("test_tiny").proto();
  p.set_name("test_edited");
  edit(p);
  return Target(p);
}

TEST(RefusalTest, EmptyTensors) {
  const Target& t = Shipped("test_tiny");
  proto::OpSpec silu = Spec({"x"});
  silu.mutable_silu()->set_n(0);
  EXPECT_EQ(Refusal(silu, t), "NotLowered: a silu of an empty tensor");
  proto::OpSpec requant = Spec({"x"});
  requant.mutable_int_requant()->set_n(0);
  EXPECT_EQ(Refusal(requant, t), "NotLowered: an int_requant of an empty tensor");
  proto::OpSpec decay = Spec({"ar", "dt", "al"});
  decay.mutable_decay();
  EXPECT_EQ(Refusal(decay, t), "NotLowered: a decay of an empty tensor");
  for (int zero = 0; zero < 3; ++zero) {
    proto::OpSpec mm = Spec({"a", "b"});
    mm.mutable_matmul()->set_m(zero == 0 ? 0 : 4);
    mm.mutable_matmul()->set_k(zero == 1 ? 0 : 4);
    mm.mutable_matmul()->set_n(zero == 2 ? 0 : 4);
    EXPECT_EQ(Refusal(mm, t), "NotLowered: a matmul of an empty tensor");
  }
}

TEST(RefusalTest, OperandCounts) {
  const Target& t = Shipped("test_tiny");
  proto::OpSpec silu = Spec({"x", "z"});
  silu.mutable_silu()->set_n(4);
  EXPECT_EQ(Refusal(silu, t), "NotLowered: silu takes 1 operand, got 2");
  proto::OpSpec decay = Spec({"ar"});
  decay.mutable_decay()->set_n(4);
  EXPECT_EQ(Refusal(decay, t), "NotLowered: decay takes 3 operands, got 1");
  proto::OpSpec mm = Spec({});
  mm.mutable_matmul()->set_m(1);
  EXPECT_EQ(Refusal(mm, t), "NotLowered: matmul takes 2 operands, got 0");
}

TEST(RefusalTest, BlockDecayWhoseRowsDoNotDivide) {
  proto::OpSpec decay = Spec({"ar", "dt", "al"});
  decay.mutable_decay()->set_n(10);
  decay.mutable_decay()->set_rows(3);
  EXPECT_EQ(Refusal(decay, Shipped("test_tiny")), "NotLowered: a block decay whose rows do not divide its elements");
  decay.mutable_decay()->set_n(2);  // heads == 0
  EXPECT_EQ(Refusal(decay, Shipped("test_tiny")), "NotLowered: a block decay whose rows do not divide its elements");
}

TEST(RefusalTest, MissingDatapaths) {
  Target no_float = Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_elementwise_float(); });
  Target no_int = Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_elementwise_int(); });
  Target no_matrix = Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_matrix_in(); });
  proto::OpSpec gelu = Spec({"x"});
  gelu.mutable_gelu()->set_n(4);
  EXPECT_EQ(Refusal(gelu, no_float), "MissingCompute: a float elementwise datapath (target test_edited)");
  proto::OpSpec gelu_matrix = gelu;  // every form asks for the datapath
  gelu_matrix.mutable_gelu()->set_n(400);
  gelu_matrix.set_shape_rows(20);
  gelu_matrix.set_shape_cols(20);
  EXPECT_EQ(Refusal(gelu_matrix, no_float), "MissingCompute: a float elementwise datapath (target test_edited)");
  proto::OpSpec decay = Spec({"ar", "dt", "al"});
  decay.mutable_decay()->set_n(6);
  decay.mutable_decay()->set_rows(2);
  EXPECT_EQ(Refusal(decay, no_float), "MissingCompute: a float elementwise datapath (target test_edited)");
  proto::OpSpec relu_int = Spec({"x"});
  relu_int.mutable_relu()->set_n(4);
  relu_int.mutable_relu()->set_int_(true);
  EXPECT_EQ(Refusal(relu_int, no_int), "MissingCompute: an integer elementwise datapath (target test_edited)");
  proto::OpSpec relu_float = relu_int;
  relu_float.mutable_relu()->set_int_(false);
  EXPECT_TRUE(Lower(relu_float, no_int).ok());  // a float ReLU never asks for the integer datapath
  proto::OpSpec mm = Spec({"a", "b"});
  mm.mutable_matmul()->set_m(4);
  mm.mutable_matmul()->set_k(4);
  mm.mutable_matmul()->set_n(4);
  EXPECT_EQ(Refusal(mm, no_matrix), "MissingCompute: a matrix datapath (target test_edited)");
}

TEST(RefusalTest, MatmulOnANonSquareTile) {
  Target wide = Tiny([](proto::Target& p) { p.mutable_tile()->set_cols(16); });
  proto::OpSpec mm = Spec({"a", "b"});
  mm.mutable_matmul()->set_m(4);
  mm.mutable_matmul()->set_k(4);
  mm.mutable_matmul()->set_n(4);
  EXPECT_EQ(Refusal(mm, wide), "NotLowered: a matmul in tiles on a tile that is not square");
}

TEST(RefusalTest, SpecValues) {
  const Target& t = Shipped("test_tiny");
  proto::OpSpec cap = Spec({"x"});
  cap.mutable_softcap()->set_n(4);
  // Specs outside the op's domain are invalid input (exit 2), as a negative size is, not refusals.
  EXPECT_EQ(Lower(cap, t).status(),
            absl::InvalidArgumentError("softcap.cap is zero: c * tanh(x / c) needs a non-zero cap"));
  proto::OpSpec requant = Spec({"x"});
  requant.mutable_int_requant()->set_n(4);
  requant.mutable_int_requant()->set_s(63);
  EXPECT_EQ(Lower(requant, t).status(),
            absl::InvalidArgumentError("int_requant.s is outside [0, 62] (63): (x * m) >> s shifts an int64 product"));
  requant.mutable_int_requant()->set_s(-1);
  EXPECT_EQ(Lower(requant, t).status(),
            absl::InvalidArgumentError("int_requant.s is outside [0, 62] (-1): (x * m) >> s shifts an int64 product"));
}

// Every kind of OpSpec has a lowering (the last, moe, arrived in session 7), so "not lowered yet" is never said.
TEST(RefusalTest, EveryKindIsLowered) {
  const auto* kind = proto::OpSpec::descriptor()->FindOneofByName("kind");
  ASSERT_NE(kind, nullptr);
  EXPECT_EQ(LoweredKinds().size(), static_cast<size_t>(kind->field_count()));
}

// Malformed specs are errors, not refusals.
TEST(RefusalTest, MalformedSpecsAreNotRefusals) {
  const Target& t = Shipped("test_tiny");
  absl::StatusOr<Composition> none = Lower(Spec({"x"}), t);
  EXPECT_EQ(none.status(), absl::InvalidArgumentError("op spec has no kind"));
  proto::OpSpec neg = Spec({"x"});
  neg.mutable_silu()->set_n(-3);
  EXPECT_EQ(Lower(neg, t).status(), absl::InvalidArgumentError("silu.n is negative (-3)"));
  proto::OpSpec dup = Spec({"a", "a"});
  dup.mutable_matmul()->set_m(1);
  dup.mutable_matmul()->set_k(1);
  dup.mutable_matmul()->set_n(1);
  absl::StatusOr<Composition> d = Lower(dup, t);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsRefusal(d.status()));
  proto::OpSpec self = Spec({"y"});  // the operand is named like the result
  self.mutable_silu()->set_n(4);
  EXPECT_EQ(Lower(self, t).status().code(), absl::StatusCode::kInvalidArgument);
  proto::OpSpec no_out = Spec({"x"});
  no_out.clear_out();
  no_out.mutable_silu()->set_n(4);
  EXPECT_EQ(Lower(no_out, t).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RefusalTest, IsRefusalRecognizesEveryKind) {
  EXPECT_TRUE(IsRefusal(NotLowered("x")));
  EXPECT_TRUE(IsRefusal(MissingCompute("x", Shipped("test_tiny"))));
  EXPECT_TRUE(IsRefusal(MissingPrecision("x", Shipped("test_tiny"))));
  EXPECT_TRUE(IsRefusal(AccTilesExceeded("x")));
  EXPECT_FALSE(IsRefusal(absl::OkStatus()));
  EXPECT_FALSE(IsRefusal(absl::InvalidArgumentError("NotLowered x")));
  EXPECT_EQ(MissingPrecision("an int64 index", Shipped("test_tiny")).message(),
            "MissingPrecision: an int64 index (target test_tiny)");
}

// The reference refuses what the lowering would: wrong shapes and missing inputs are errors.
TEST(RefusalTest, ReferenceChecksItsInputs) {
  proto::OpSpec silu = Spec({"x"});
  silu.mutable_silu()->set_n(4);
  EXPECT_EQ(ReferenceOp(silu, {}).status().code(), absl::StatusCode::kNotFound);
  TensorMap wrong;
  wrong["x"] = TensorData{2, 2, Precision::kFp32, {1, 2, 3, 4}};
  EXPECT_EQ(ReferenceOp(silu, wrong).status().code(), absl::StatusCode::kInvalidArgument);
  proto::OpSpec mm = Spec({"a", "b"});
  mm.mutable_matmul()->set_m(2);
  mm.mutable_matmul()->set_k(3);
  mm.mutable_matmul()->set_n(1);
  TensorMap ab;
  ab["a"] = TensorData{2, 3, Precision::kFp32, {1, 2, 3, 4, 5, 6}};
  ab["b"] = TensorData{1, 3, Precision::kFp32, {1, 1, 1}};  // must be 3 x 1
  EXPECT_FALSE(ReferenceOp(mm, ab).ok());
  ab["b"] = TensorData{3, 1, Precision::kFp32, {1, 0, -1}};
  absl::StatusOr<TensorMap> c = ReferenceOp(mm, ab);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->at("y").values, (std::vector<double>{-2, -2}));
  proto::OpSpec clamp = Spec({"x"});
  clamp.mutable_int_clamp()->set_n(2);
  TensorMap frac;
  frac["x"] = TensorData{1, 2, Precision::kInt32, {1.5, 2}};
  EXPECT_FALSE(ReferenceOp(clamp, frac).ok());
}

// Bad values in a spec are the caller's mistake (InvalidArgument, exit 2), named by field.
TEST(RefusalTest, IntClampBoundsAreValuesOfTheIntegerDatapath) {
  const Target& t = Shipped("test_tiny");
  auto clamp = [&](int64_t lo, int64_t hi) {
    proto::OpSpec spec = Spec({"x"});
    spec.mutable_int_clamp()->set_n(32);
    spec.mutable_int_clamp()->set_lo(lo);
    spec.mutable_int_clamp()->set_hi(hi);
    return Lower(spec, t).status();
  };
  EXPECT_EQ(clamp(100, -100),
            absl::InvalidArgumentError("int_clamp.lo (100) is above int_clamp.hi (-100): no value lies between them"));
  const absl::Status huge = clamp(INT64_MAX, INT64_MAX);
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("int_clamp.lo (9223372036854775807) is outside the int32 integer datapath"),
            std::string::npos)
      << huge;
  EXPECT_NE(clamp(0, int64_t{1} << 32).message().find("int_clamp.hi (4294967296) is outside"), std::string::npos);
  EXPECT_TRUE(clamp(INT32_MIN, INT32_MAX).ok());
}

proto::OpSpec DecodeAttention(const std::string& pos_name) {
  proto::OpSpec spec = Spec({"q", "k_cache", "v_cache", "pos"});
  auto* a = spec.mutable_attention();
  a->set_h(8);
  a->set_kv(2);
  a->set_hd(8);
  a->set_vd(8);
  a->set_l(64);
  a->set_rows(1);
  a->mutable_pos()->set_named(pos_name);
  return spec;
}

TEST(RefusalTest, AnAttentionPositionNamedByNothingIsRefused) {
  EXPECT_EQ(Lower(DecodeAttention(""), Shipped("test_tiny")).status(),
            absl::InvalidArgumentError("the attention's position is named by an empty string (pos { named: \"\" })"));
}

TEST(RefusalTest, AnAttentionScaleOrSoftCapThatIsNotFiniteIsNamed) {
  proto::OpSpec spec = DecodeAttention("pos");
  spec.mutable_attention()->set_scale(std::nan(""));
  EXPECT_EQ(Lower(spec, Shipped("test_tiny")).status(),
            absl::InvalidArgumentError("attention.scale is not finite (nan)"));
  spec.mutable_attention()->set_scale(0.5);
  spec.mutable_attention()->set_softcap(INFINITY);
  EXPECT_EQ(Lower(spec, Shipped("test_tiny")).status(),
            absl::InvalidArgumentError("attention.softcap is not finite (inf)"));
}

// A window at least the cache's length keeps every position: it lowers, and to the program of a window of exactly
// the cache's length (whose constants fit the integer datapath).
TEST(RefusalTest, AWindowPastTheCacheIsTheWholeCache) {
  const Target& t = Shipped("test_tiny");
  proto::OpSpec huge = DecodeAttention("pos");
  huge.mutable_attention()->mutable_window()->set_sliding(INT64_MAX);
  proto::OpSpec whole = DecodeAttention("pos");
  whole.mutable_attention()->mutable_window()->set_sliding(64);
  absl::StatusOr<Composition> a = Lower(huge, t);
  absl::StatusOr<Composition> b = Lower(whole, t);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  std::string sa, sb;
  ASSERT_TRUE(ToProto(*a).SerializeToString(&sa));
  ASSERT_TRUE(ToProto(*b).SerializeToString(&sb));
  EXPECT_EQ(sa, sb);
  huge.mutable_attention()->mutable_window()->set_chunked(INT64_MAX);
  EXPECT_TRUE(Lower(huge, t).ok());
}

}  // namespace
}  // namespace spatial::testing
