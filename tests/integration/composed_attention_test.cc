// The online-softmax pass on an attention composed from its parts (issue #17): a matmul of the queries by the keys
// read transposed, a scale (of the scores, of the queries, or none), a row softmax and a matmul by the values, joined
// by LowerGraph (lowerings/graph.h) as `spatial lower --graph` joins them. The pass rebuilds the parts it reads off
// the program, requires them equal to the program's sections, and replaces them with the flash fold: the result
// certifies, computes the same values on the VM to 1e-12 relative, and simulates in fewer cycles. Each decline names
// its reason.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "certify/certify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lowerings/graph.h"
#include "passes/pass.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/validate.h"
#include "tests/lowerings/harness.h"

namespace spatial {
namespace {

using ::testing::HasSubstr;

proto::OpSpec Spec(const std::string& out, const std::vector<std::string>& operands) {
  proto::OpSpec s;
  s.set_out(out);
  for (const std::string& o : operands) s.add_operands()->set_name(o);
  return s;
}

proto::OpSpec Matmul(const std::string& out, const std::string& a, const std::string& b, int64_t m, int64_t k,
                     int64_t n, bool transpose_b) {
  proto::OpSpec s = Spec(out, {a, b});
  s.mutable_matmul()->set_m(m);
  s.mutable_matmul()->set_k(k);
  s.mutable_matmul()->set_n(n);
  s.mutable_matmul()->set_transpose_b(transpose_b);
  return s;
}

proto::OpSpec Scale(const std::string& out, const std::string& x, double factor, int64_t rows, int64_t cols,
                    bool dense) {
  proto::OpSpec s = Spec(out, {x});
  s.mutable_scale()->set_factor(factor);
  s.mutable_scale()->set_n(rows * cols);
  if (dense) {
    s.set_shape_rows(rows);
    s.set_shape_cols(cols);
  }
  return s;
}

proto::OpSpec Softmax(const std::string& out, const std::string& x, int64_t rows, int64_t cols) {
  proto::OpSpec s = Spec(out, {x});
  s.mutable_softmax()->set_rows(rows);
  s.mutable_softmax()->set_cols(cols);
  return s;
}

enum class Scaled { kNone, kScores, kScoresFlat, kQueries };

// softmax(scale * q kᵀ) v for `rows` query rows over `l` positions, keys hd wide and values vd wide.
std::vector<GraphOp> Composed(int64_t rows, int64_t l, int64_t hd, int64_t vd, Scaled where, double scale) {
  std::vector<GraphOp> ops;
  auto add = [&](proto::OpSpec s) { ops.push_back({s.out(), std::move(s)}); };
  std::string q = "q";
  if (where == Scaled::kQueries) {
    add(Scale("q_scaled", "q", scale, rows, hd, true));
    q = "q_scaled";
  }
  add(Matmul("scores", q, "k", rows, hd, l, true));
  std::string logits = "scores";
  if (where == Scaled::kScores || where == Scaled::kScoresFlat) {
    add(Scale("scaled", "scores", scale, rows, l, where == Scaled::kScores));
    logits = "scaled";
  }
  add(Softmax("probs", logits, rows, l));
  add(Matmul("ctx", "probs", "v", rows, l, vd, false));
  return ops;
}

Composition LowerOps(const std::vector<GraphOp>& ops, const Target& t) {
  absl::StatusOr<LoweredGraph> g = LowerGraph("composed", ops, nullptr, t);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? std::move(g->program) : Composition{};
}

bool HasSection(const Composition& c, const std::string& part) {
  return std::any_of(c.sections.begin(), c.sections.end(),
                     [&](const Section& s) { return s.name.find(part) != std::string::npos; });
}

int64_t Cycles(const Composition& c, const Target& t) {
  SimOptions o;
  o.timing_only = true;
  TensorMap ones;
  for (const Tensor& x : CompositionInputs(c)) {
    ones[x.name] = TensorData{x.rows, x.cols, x.precision, std::vector<double>(x.rows * x.cols, 1.0)};
  }
  absl::StatusOr<SimResult> r = Simulate(c, t, ones, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->report.total_cycles() : 0;
}

// The must-show: the parts become the fold (no softmax section left), which certifies, equals the parts on the VM to
// 1e-12 relative, and takes fewer cycles — on test_tiny and on Wormhole, scaled after the product (over the matrix
// or its flat rows), before it, or not at all, values as wide as the keys or not, one query row or a tile of them.
TEST(ComposedAttention, TheOnlineSoftmaxPassFoldsIt) {
  struct Case {
    const char* target;
    int64_t rows, l, hd, vd;
    Scaled where;
    const char* what;
  };
  const std::vector<Case> cases = {
      {"test_tiny", 1, 32, 8, 8, Scaled::kScores, "a decode row"},
      {"test_tiny", 4, 16, 8, 16, Scaled::kScoresFlat, "a tile of rows, the scale over flat rows, vd > hd"},
      {"test_tiny", 3, 24, 16, 8, Scaled::kQueries, "the queries scaled, not whole tile rows"},
      {"test_tiny", 2, 16, 8, 8, Scaled::kNone, "no scale"},
      {"test_tiny", 4, 64, 16, 16, Scaled::kScores, "the cache split across sites"},
      {"wormhole_n150", 8, 512, 64, 64, Scaled::kScores, "Wormhole: the README's example"},
      {"wormhole_n150", 32, 128, 64, 64, Scaled::kQueries, "Wormhole: a tile of rows, the queries scaled"},
      {"wormhole_n150", 4, 512, 128, 128, Scaled::kScoresFlat, "Wormhole: the scale over flat rows"},
      {"wormhole_n150", 1, 2048, 128, 128, Scaled::kScores, "Wormhole: a decode row over 2048 positions"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const Target& t = testing::Shipped(k.target);
    const double scale = 1.0 / std::sqrt(static_cast<double>(k.hd));
    const Composition parts = LowerOps(Composed(k.rows, k.l, k.hd, k.vd, k.where, scale), t);
    ASSERT_TRUE(HasSection(parts, "softmax_flat_"));
    Composition folded = parts;
    PipelineOptions verifying;
    verifying.verify_each = true;
    const absl::Status st = RunPasses(folded, t, {"online-softmax"}, verifying);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_FALSE(HasSection(folded, "softmax_flat_"));
    EXPECT_FALSE(HasSection(folded, "matmul_"));
    EXPECT_TRUE(HasSection(folded, "_flash_"));
    const CertifyResult cert = Certify(folded, t);
    EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics.front().message());

    testing::Rng rng(7);
    TensorMap in;
    for (const Tensor& x : CompositionInputs(parts)) {
      TensorData d{x.rows, x.cols, x.precision, std::vector<double>(x.rows * x.cols)};
      for (double& v : d.values) v = rng.Real(-2, 2);
      in[x.name] = std::move(d);
    }
    for (const Tensor& x : CompositionInputs(folded)) ASSERT_TRUE(in.count(x.name)) << x.name;
    absl::StatusOr<TensorMap> a = RunComposition(parts, t.tile_rows(), t.tile_cols(), in);
    absl::StatusOr<TensorMap> b = RunComposition(folded, t.tile_rows(), t.tile_cols(), in);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    const std::vector<double>& ya = a->at("ctx").values;
    const std::vector<double>& yb = b->at("ctx").values;
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(yb[i], ya[i], 1e-12 * std::max(1.0, std::fabs(ya[i]))) << i;
    const int64_t before = Cycles(parts, t), after = Cycles(folded, t);
    std::cout << k.what << ": " << before << " -> " << after << " cycles\n";
    EXPECT_LT(after, before);
  }
}

// Each decline prints its reason; a product by keys read transposed that no softmax follows is not an attention.
TEST(ComposedAttention, DeclinesWithTheReason) {
  const Target& t = testing::Shipped("test_tiny");
  auto decline = [&](const std::vector<GraphOp>& ops) {
    Composition c = LowerOps(ops, t);
    const absl::Status st = RunPasses(c, t, {"online-softmax"});
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    std::cout << st.message() << "\n";
    return std::string(st.message());
  };
  const std::vector<GraphOp> base = Composed(2, 16, 8, 8, Scaled::kScores, 0.35);
  auto with = [&](size_t at, proto::OpSpec extra) {
    std::vector<GraphOp> ops = base;
    ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at), GraphOp{extra.out(), extra});
    return ops;
  };
  // A product by keys read transposed and nothing more: no attention at all.
  EXPECT_THAT(decline({{"scores", Matmul("scores", "q", "k", 2, 8, 16, true)}}),
              HasSubstr("declined: no attention in the program"));
  // The scores read besides the softmax (seed 000: a reader other than the row softmax).
  {
    proto::OpSpec other = Spec("scores_copy", {"scores"});
    other.mutable_silu()->set_n(32);
    EXPECT_THAT(decline(with(1, other)),
                HasSubstr("the scores 'scores' are read by section 'silu_32' besides the row softmax"));
  }
  // The probabilities read by another op than the value pass.
  {
    proto::OpSpec other = Spec("probs_copy", {"probs"});
    other.mutable_silu()->set_n(32);
    EXPECT_THAT(decline(with(3, other)), HasSubstr("the probabilities 'probs' are read by section 'silu_32', not only "
                                                   "by the value pass"));
  }
  // Mixed precisions (seed 000's decline): the values stored as bfp8_b while the rest is bf16 (fp32 values, the
  // seed's case, are no operand the matrix engine takes: the lowering refuses them).
  {
    std::vector<GraphOp> ops = base;
    ops[3].spec.mutable_matmul()->set_in1_format(proto::BFP8_B);
    EXPECT_THAT(decline(ops), HasSubstr("declined: the sections differ from the composed attention they resemble"));
    EXPECT_THAT(decline(ops), HasSubstr("tensors[1].precision: BF16 -> BFP8_B"));
  }
  // An elementwise step between the scores and the softmax (not a scale): not an attention's logits.
  {
    std::vector<GraphOp> ops = base;
    proto::OpSpec act = Spec("scaled", {"scores"});
    act.mutable_silu()->set_n(32);
    act.set_shape_rows(2);
    act.set_shape_cols(16);
    ops[1] = {"scaled", act};
    EXPECT_THAT(decline(ops), HasSubstr("declined: the sections differ from the composed attention they resemble"));
  }
  // The scores scaled twice.
  {
    std::vector<GraphOp> ops = base;
    ops[2].spec.mutable_operands(0)->set_name("scaled2");
    ops.insert(ops.begin() + 2, GraphOp{"scaled2", Scale("scaled2", "scaled", 2.0, 2, 16, true)});
    EXPECT_THAT(decline(ops), HasSubstr("the scores are scaled twice"));
  }
  // A softmax with sinks: one logit per row is not the fold's sink per head.
  {
    std::vector<GraphOp> ops = base;
    ops[2].spec.mutable_softmax()->set_sinks(true);
    ops[2].spec.add_operands()->set_name("sinks");
    EXPECT_THAT(decline(ops), HasSubstr("a softmax with sinks over composed scores"));
  }
  // Another op between the softmax and the value pass: the fold would move the value pass before it.
  {
    proto::OpSpec other = Spec("unrelated", {"x"});
    other.mutable_silu()->set_n(32);
    EXPECT_THAT(decline(with(3, other)), HasSubstr("the composed attention's sections are not consecutive"));
  }
  // Keys that are not whole tiles: recognized, but the fold does not apply.
  EXPECT_THAT(decline(Composed(2, 16, 6, 8, Scaled::kScores, 0.35)),
              HasSubstr("declined: the fold does not apply: keys of 6 and values of 8 are not whole tiles"));
}

}  // namespace
}  // namespace spatial
