// The row family (l2norm, the fused RMS row op, softmax) against its op references on the VM, validated and
// certified on every shipped target that lowers it, in every form the seed's dispatch picks: flat, the head as the
// item, and the streamed sections; toy shapes on test_tiny, Qwen3-0.6B and Qwen3-8B widths on wormhole_n150.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/rows/softmax.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

struct Case {
  const char* target;
  proto::OpSpec spec;
  std::vector<std::string> sections;  // the section names, in order
  size_t items;                       // work items of the last section
};

void RunCases(const std::vector<Case>& cases, const Draw& draw, double tol) {
  EXPECT_GE(cases.size(), 20u);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.spec.ShortDebugString() + " on " + k.target);
    Composition c = ThreeWay(k.spec, Shipped(k.target), draw, tol, /*seed=*/k.items * 13 + k.sections.size());
    std::vector<std::string> names;
    for (const Section& s : c.sections) names.push_back(s.name);
    EXPECT_EQ(names, k.sections);
    if (!c.sections.empty()) {
      EXPECT_EQ(c.sections.back().items.size(), k.items);
    }
  }
}

proto::OpSpec L2(int64_t rows, int64_t cols, double eps = 1e-6) {
  proto::OpSpec s = Spec({"x"});
  s.mutable_l2norm()->set_rows(rows);
  s.mutable_l2norm()->set_cols(cols);
  s.mutable_l2norm()->set_eps(eps);
  return s;
}

TEST(RowsTest, L2NormMatchesReference) {
  std::vector<Case> cases;
  auto add = [&](const char* target, int64_t rows, int64_t cols, size_t items) {
    cases.push_back({target, L2(rows, cols), {absl::StrCat("l2norm_", rows, "x", cols)}, items});
  };
  // test_tiny flat (the row fits 4 tiles of 8, its rows one tile of 8): one row, not tile multiples, a full tile.
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 7}, {2, 5}, {4, 8}, {8, 4}, {3, 10}, {1, 32}, {5, 6}, {8, 1}}) {
    add("test_tiny", r, c, 1);
  }
  // The head as the item: the row needs blocking and a head does not; or its rows exceed a tile's.
  add("test_tiny", 4, 16, 4);
  add("test_tiny", 10, 8, 10);
  add("test_tiny", 3, 32, 3);
  add("test_tiny", 12, 24, 12);
  // wormhole_n150 flat.
  add("wormhole_n150", 2, 100, 1);
  add("wormhole_n150", 8, 32, 1);
  add("wormhole_n150", 1, 256, 1);
  // Gated DeltaNet's q/k l2norm at real head widths: 16 heads of 128 (Qwen3-Next), 32 heads of 128, one head of 256
  // (the accumulator exactly), and 48 heads of 128.
  add("wormhole_n150", 16, 128, 16);
  add("wormhole_n150", 32, 128, 32);
  add("wormhole_n150", 4, 256, 4);
  add("wormhole_n150", 48, 128, 48);
  RunCases(cases, Reals(-3, 3), 1e-12);
}

// eps matters: a row of zeros normalizes to zeros, and a tiny row is scaled by 1/sqrt(eps).
TEST(RowsTest, L2NormEpsilon) {
  proto::OpSpec spec = L2(2, 3, 1e-3);
  TensorMap in;
  in["x"] = TensorData{1, 6, Precision::kBf16, {0, 0, 0, 3, 4, 0}};
  absl::StatusOr<Composition> c = Lower(spec, Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<TensorMap> vm = RunComposition(*c, 8, 8, in);
  ASSERT_TRUE(vm.ok()) << vm.status();
  const std::vector<double>& y = vm->at("y").values;
  EXPECT_EQ(y[0], 0.0);
  EXPECT_NEAR(y[3], 3.0 / std::sqrt(25.001), 1e-15);
  EXPECT_NEAR(y[4], 4.0 / std::sqrt(25.001), 1e-15);
}

// A weight, a residual and a bias, in the seed's operand order [x, weight?, residual?, bias?]. The weight is an Input
// of the flat twin and a Param of the blocked forms: its fill gives the Param its values, and the reference reads
// whichever the lowering used.
proto::OpSpec Rms(int64_t rows, int64_t cols, bool weight, bool residual, bool per_head = false, double eps = 1e-6) {
  proto::OpSpec s;
  s.set_out("y");
  s.add_operands()->set_name("x");
  if (weight) {
    proto::Operand* w = s.add_operands();
    w->set_name("w");
    auto* rp = w->mutable_fill()->mutable_real_pattern();
    rp->set_modulus(97);
    rp->set_scale(0.02);
    rp->set_offset(0.1);
  }
  if (residual) s.add_operands()->set_name("r");
  auto* fr = s.mutable_fused_row();
  fr->set_rows(rows);
  fr->set_cols(cols);
  fr->set_reduce(proto::FusedRowSpec::RMS_NORM);
  fr->set_weight(weight);
  fr->set_residual(residual);
  fr->set_per_head(per_head);
  fr->set_eps(eps);
  return s;
}

// The names of the streamed form's sections for a rows x cols stack.
std::vector<std::string> Streamed(int64_t rows, int64_t cols, bool residual) {
  std::vector<std::string> out;
  const std::string shape = rows > 1 ? absl::StrCat(rows, "x", cols) : absl::StrCat(cols);
  if (residual) out.push_back(absl::StrCat("xr_", shape));
  out.push_back(absl::StrCat("xsq_", shape));
  out.push_back(absl::StrCat("matmul_", rows, "x", cols, "x1"));
  out.push_back(rows > 1 ? absl::StrCat("rms_scale_", rows, "x1") : "rms_scale_1");
  out.push_back(absl::StrCat("rmsnorm_rescale_", shape));
  return out;
}

TEST(RowsTest, FusedRowRmsMatchesReference) {
  std::vector<Case> cases;
  auto flat = [&](const char* target, int64_t rows, int64_t cols, bool w, bool r) {
    cases.push_back({target, Rms(rows, cols, w, r), {absl::StrCat("rmsnorm_flat_", rows, "x", cols)}, 1});
  };
  auto heads = [&](const char* target, int64_t rows, int64_t cols, bool w) {
    cases.push_back({target, Rms(rows, cols, w, false, true), {absl::StrCat("rmsnorm_heads_", rows, "x", cols)},
                     static_cast<size_t>(rows)});
  };
  auto streamed = [&](const char* target, int64_t rows, int64_t cols, bool w, bool r, size_t items) {
    cases.push_back({target, Rms(rows, cols, w, r), Streamed(rows, cols, r), items});
  };
  // test_tiny flat: every combination of weight and residual, one row, not tile multiples.
  flat("test_tiny", 1, 5, false, false);
  flat("test_tiny", 1, 5, true, false);
  flat("test_tiny", 2, 7, true, true);
  flat("test_tiny", 4, 8, false, true);
  flat("test_tiny", 8, 4, true, false);
  flat("test_tiny", 1, 32, true, true);
  // test_tiny, the head as the item.
  heads("test_tiny", 8, 16, true);
  heads("test_tiny", 16, 8, false);
  heads("test_tiny", 3, 24, true);
  // test_tiny streamed: a row wider than the accumulator (one item per tile of the rescale), with and without a
  // residual; and a stack of token rows whose flat row is too wide (per_head false).
  streamed("test_tiny", 1, 40, true, false, 5);
  streamed("test_tiny", 1, 100, true, true, 13);
  streamed("test_tiny", 1, 33, false, false, 5);
  streamed("test_tiny", 3, 40, true, true, 5);
  streamed("test_tiny", 16, 8, false, true, 2);
  // wormhole_n150 -- Qwen3-0.6B: the hidden RMSNorm (1024, streamed), with the fused residual add; the q_norm and
  // k_norm over 16 and 8 heads of 128 (the head as the item); a 32-token prefill block with its residual (streamed
  // over the 32 x 1024 matrix).
  streamed("wormhole_n150", 1, 1024, true, false, 32);
  streamed("wormhole_n150", 1, 1024, true, true, 32);
  heads("wormhole_n150", 16, 128, true);
  heads("wormhole_n150", 8, 128, true);
  streamed("wormhole_n150", 32, 1024, true, true, 32);
  // Qwen3-8B: hidden 4096, q_norm over 32 heads of 128, k_norm over 8.
  streamed("wormhole_n150", 1, 4096, true, false, 128);
  heads("wormhole_n150", 32, 128, true);
  // A flat row on wormhole.
  flat("wormhole_n150", 2, 100, true, true);
  RunCases(cases, Reals(-3, 3), 1e-12);
}

// The per-head norm over dense token rows (FusedRowSpec.dense_heads): T x H*cols as a projection writes it, an item a
// tile row of tokens and a head; the same values as the flat form's, with a tail of tokens that is not a tile row.
TEST(RowsTest, DensePerHeadRmsMatchesReference) {
  auto dense = [](int64_t tokens, int64_t heads, int64_t cols, bool weight) {
    proto::OpSpec s = Rms(tokens * heads, cols, weight, false, true);
    s.mutable_fused_row()->set_dense_heads(heads);
    return s;
  };
  std::vector<Case> cases;
  auto add = [&](const char* target, int64_t tokens, int64_t heads, int64_t cols, bool weight, int64_t tile) {
    cases.push_back({target, dense(tokens, heads, cols, weight),
                     {absl::StrCat("rmsnorm_dense_heads_", tokens, "x", heads, "x", cols)},
                     static_cast<size_t>((tokens + tile - 1) / tile * heads)});
  };
  for (int64_t tokens : {1, 5, 8, 11, 24}) {
    add("test_tiny", tokens, 3, 16, true, 8);
    add("test_tiny", tokens, 2, 8, false, 8);
  }
  for (int64_t tokens : {2, 37, 128}) add("test_tiny", tokens, 1, 24, true, 8);
  for (int64_t tokens : {3, 9, 16, 17}) add("test_tiny", tokens, 4, 8, true, 8);
  // Qwen3-8B's q_norm and k_norm at a prefill of 128, and a ragged 40 tokens of Qwen3-0.6B's 16 heads.
  add("wormhole_n150", 128, 32, 128, true, 32);
  add("wormhole_n150", 128, 8, 128, true, 32);
  add("wormhole_n150", 40, 16, 128, true, 32);
  RunCases(cases, Reals(-3, 3), 1e-12);
  // The operand and the result keep the projection's layout: T x H*cols.
  absl::StatusOr<Composition> c = Lower(dense(40, 16, 128, true), Shipped("wormhole_n150"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& sec = c->sections[0];
  for (const char* name : {"x", "y"}) {
    const Tensor& t = sec.tensors[sec.FindTensor(name)];
    EXPECT_EQ(t.rows, 40) << name;
    EXPECT_EQ(t.cols, 16 * 128) << name;
  }
  // Every head reads the same scaler and weight: multicast to the heads (ITEM_X); each reads its own x.
  for (const auto& [name, axis] : std::vector<std::pair<const char*, LoopVar>>{
           {"load_scaler", LoopVar::kItemX}, {"load_w", LoopVar::kItemX}, {"load_head", LoopVar::kUnspecified}}) {
    const int i = sec.FindStage(name);
    ASSERT_GE(i, 0) << name;
    EXPECT_EQ(std::get<Load>(sec.stages[i].op).multicast, axis) << name;
  }
}

// The streamed form's sum is a matmul against a Param of ones, and its base keeps x's own fill (★ AND WITH ITS REAL
// FILL): with a residual, the base is the section-made {y}__xr.
TEST(RowsTest, StreamedRmsSections) {
  proto::OpSpec spec = Rms(1, 1024, true, false);
  spec.mutable_operands(0)->mutable_fill()->set_const_f(0.5);
  absl::StatusOr<Composition> c = Lower(spec, Shipped("wormhole_n150"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->sections.size(), 4u);
  const Section& sum = c->sections[1];
  const Tensor& ones = sum.tensors[sum.FindTensor("y__ones")];
  EXPECT_EQ(ones.role, TensorRole::kParam);
  EXPECT_EQ(ones.rows, 1024);
  EXPECT_EQ(ones.cols, 1);
  EXPECT_EQ(sum.stages[sum.FindStage("matmul")].is_matmul(), true);
  for (int s : {0, 3}) {
    const Section& sec = c->sections[s];
    EXPECT_EQ(sec.tensors[sec.FindTensor("x")].init, TensorInit::ConstF(0.5)) << sec.name;
  }
  const Section& scale = c->sections[2];
  const Generic& g = std::get<Generic>(scale.stages[scale.FindStage("rsqrt")].op);
  EXPECT_EQ(g.body->sfpu, SfpuKind::Rsqrt(1000, 1024));
  absl::StatusOr<Composition> with_residual = Lower(Rms(1, 1024, true, true), Shipped("wormhole_n150"));
  ASSERT_TRUE(with_residual.ok());
  const Section& rescale = with_residual->sections.back();
  EXPECT_GE(rescale.FindTensor("y__xr"), 0);
  EXPECT_LT(rescale.FindTensor("x"), 0);
}

// The per-head forms divide once, inside the transform: Rsqrt{eps, over cols}, never a scale in the reduction.
TEST(RowsTest, PerHeadRmsDividesInsideTheTransform) {
  absl::StatusOr<Composition> c = Lower(Rms(16, 128, true, false, true), Shipped("wormhole_n150"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  const Generic& g = std::get<Generic>(s.stages[s.FindStage("head_rsqrt")].op);
  EXPECT_EQ(g.body->sfpu, SfpuKind::Rsqrt(1000, 128));
  EXPECT_EQ(s.tensors[s.FindTensor("w")].role, TensorRole::kParam);
  EXPECT_EQ(s.claim.reason, "per-head rmsnorm in bf16");
  absl::StatusOr<Composition> flat = Lower(Rms(2, 7, true, true), Shipped("test_tiny"));
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->sections[0].claim.reason, "row reduction in bf16");
}

// EXTENSION: the flat layer norm the seed refuses, y = (v - mean) * rsqrt(var + eps) * w + b, in every combination
// of weight, residual and bias, with "layernorm_flat_{rows}x{cols}" sections.
TEST(RowsTest, FlatLayerNormMatchesReference) {
  std::vector<Case> cases;
  auto add = [&](const char* target, int64_t rows, int64_t cols, bool w, bool r, bool bias) {
    proto::OpSpec s = Rms(rows, cols, w, r);
    s.mutable_fused_row()->set_reduce(proto::FusedRowSpec::LAYER_NORM);
    if (bias) {
      s.add_operands()->set_name("bias");
      s.mutable_fused_row()->set_bias(true);
    }
    cases.push_back({target, s, {absl::StrCat("layernorm_flat_", rows, "x", cols)}, 1});
  };
  add("test_tiny", 1, 1, false, false, false);
  add("test_tiny", 1, 5, true, false, true);
  add("test_tiny", 2, 7, true, true, true);
  add("test_tiny", 4, 8, false, true, false);
  add("test_tiny", 8, 4, true, false, true);
  add("test_tiny", 1, 32, true, true, true);
  add("test_tiny", 3, 10, false, false, true);
  add("wormhole_n150", 1, 256, true, false, true);
  add("wormhole_n150", 2, 100, true, true, true);
  add("wormhole_n150", 32, 8, true, false, false);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.spec.ShortDebugString() + " on " + k.target);
    Composition c = ThreeWay(k.spec, Shipped(k.target), Reals(-3, 3), 1e-12);
    ASSERT_EQ(c.sections.size(), 1u);
    EXPECT_EQ(c.sections[0].name, k.sections[0]);
  }
  // Wider than the accumulator, a layer norm has no streamed form: the seed's refusal.
  proto::OpSpec wide = Rms(1, 1024, true, false);
  wide.mutable_fused_row()->set_reduce(proto::FusedRowSpec::LAYER_NORM);
  EXPECT_EQ(RefusalOf(wide, Shipped("wormhole_n150")),
            "NotLowered: a blocked softmax or layernorm row op — only rmsnorm streams today");
}

proto::OpSpec Softmax(int64_t rows, int64_t cols, bool sinks = false, bool at_acc = false) {
  proto::OpSpec s = sinks ? Spec({"x", "sinks"}) : Spec({"x"});
  auto* m = s.mutable_softmax();
  m->set_rows(rows);
  m->set_cols(cols);
  m->set_sinks(sinks);
  m->set_at_acc(at_acc);
  return s;
}

TEST(RowsTest, SoftmaxMatchesReference) {
  std::vector<Case> cases;
  auto add = [&](const char* target, int64_t rows, int64_t cols, bool sinks, bool at_acc) {
    cases.push_back({target, Softmax(rows, cols, sinks, at_acc), {absl::StrCat("softmax_flat_", rows, "x", cols)}, 1});
  };
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {2, 5}, {3, 10}, {8, 4}, {1, 32}, {4, 8}}) {
    add("test_tiny", r, c, false, false);
  }
  add("test_tiny", 5, 6, false, false);
  add("test_tiny", 2, 5, true, false);
  add("test_tiny", 4, 8, true, false);
  add("test_tiny", 8, 1, true, false);  // one column: the sink still takes its share
  add("test_tiny", 1, 16, false, true);
  add("test_tiny", 3, 9, true, true);
  // wormhole_n150: a router over Qwen3-30B-A3B's 128 experts at the accumulator's width (the scores decide the
  // experts); Qwen3-0.6B's 16 query heads over 16 cached positions; gpt-oss-style 8 heads with sinks over 32
  // positions; one row of 256.
  add("wormhole_n150", 1, 128, false, true);
  add("wormhole_n150", 16, 16, false, false);
  add("wormhole_n150", 8, 32, true, false);
  add("wormhole_n150", 1, 256, false, false);
  add("wormhole_n150", 32, 8, true, true);
  add("wormhole_n150", 5, 40, false, false);
  add("wormhole_n150", 1, 60, true, false);
  RunCases(cases, Reals(-20, 20), 1e-12);
}

// A router's softmax runs at fp32 end to end and names its scaler by what it holds.
TEST(RowsTest, SoftmaxAtTheAccumulatorsWidth) {
  absl::StatusOr<Composition> acc = Lower(Softmax(1, 128, false, true), Shipped("wormhole_n150"));
  absl::StatusOr<Composition> elem = Lower(Softmax(1, 128), Shipped("wormhole_n150"));
  ASSERT_TRUE(acc.ok() && elem.ok());
  const Section& a = acc->sections[0];
  EXPECT_EQ(a.tensors[a.FindTensor("x")].precision, Precision::kFp32);
  EXPECT_EQ(a.tensors[a.FindTensor("y")].precision, Precision::kFp32);
  EXPECT_GE(a.FindTensor("sm_scaler_fp32"), 0);
  EXPECT_EQ(a.claim.reason, "row softmax in fp32");
  const Section& e = elem->sections[0];
  EXPECT_EQ(e.tensors[e.FindTensor("x")].precision, Precision::kBf16);
  EXPECT_GE(e.FindTensor("sm_scaler"), 0);
  EXPECT_EQ(e.claim.reason, "row softmax in bf16");
}

// Sinks join the maximum and the denominator and take no value: with a sink far above the row, the row's
// probabilities vanish; with a sink of -inf-like size they are the plain softmax.
TEST(RowsTest, SoftmaxSinksTakeNoValue) {
  absl::StatusOr<Composition> c = Lower(Softmax(2, 3, true), Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  TensorMap in;
  in["x"] = TensorData{1, 6, Precision::kBf16, {1, 2, 3, 1, 2, 3}};
  in["sinks"] = TensorData{1, 2, Precision::kBf16, {-1000, 3}};
  absl::StatusOr<TensorMap> vm = RunComposition(*c, 8, 8, in);
  ASSERT_TRUE(vm.ok()) << vm.status();
  const std::vector<double>& y = vm->at("y").values;
  const double z = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_NEAR(y[2], 1.0 / z, 1e-15);
  EXPECT_NEAR(y[5], 1.0 / (z + 1.0), 1e-15);
  EXPECT_NEAR(y[3] + y[4] + y[5], z / (z + 1.0), 1e-15);
}

// The attention helper's entry point: a section at a label of its choosing, with the same chain.
TEST(RowsTest, FlatSoftmaxRowsIsTheSoftmaxKindsSection) {
  const Target& t = Shipped("wormhole_n150");
  absl::StatusOr<Composition> c = FlatSoftmaxRows(OperandRef{"scores", {}}, "probs", 16, 16, "attn_probs", t);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->sections.size(), 1u);
  const Section& s = c->sections[0];
  EXPECT_EQ(s.name, "attn_probs");
  std::vector<std::string> stages;
  for (const Stage& st : s.stages) {
    if (st.is_generic()) stages.push_back(st.name);
  }
  EXPECT_EQ(stages, (std::vector<std::string>{"row_max", "exp_centred", "row_sum", "recip", "scale"}));
  ExpectCertifies(*c, t);
}

}  // namespace
}  // namespace spatial::testing
