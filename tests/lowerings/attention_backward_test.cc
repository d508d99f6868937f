// Attention's backward pass (lowerings/attention/backward.h): the three-way check over GQA 1/4/8, causal and not,
// head widths of 2 and 4 tiles, lengths that are not whole tiles; the reference itself against central differences
// of the forward; the structure (causal ranges fold only the blocks they need, the shared blocks are multicast);
// and the refusals by message.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/backward.h"
#include "lowerings/attention/reference_backward.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

struct BwdCase {
  std::string target;
  int64_t h = 1, kv = 1, hd = 8, vd = 0, l = 0, rows = 8;
  bool causal = false;
  double scale = 0.0;
};

std::string CaseText(const BwdCase& c) {
  return absl::StrCat(c.target, " h", c.h, " kv", c.kv, " hd", c.hd, " vd", c.vd, " l", c.l, " rows", c.rows,
                      c.causal ? " causal" : "", " scale", c.scale);
}

proto::OpSpec BwdSpec(const BwdCase& c) {
  proto::OpSpec s;
  s.set_out("dq");
  for (const char* o : {"q", "k", "v", "o", "d_o", "lse"}) s.add_operands()->set_name(o);
  proto::AttentionBackwardSpec* a = s.mutable_attention_backward();
  a->set_h(c.h);
  a->set_kv(c.kv);
  a->set_hd(c.hd);
  a->set_vd(c.vd);
  a->set_l(c.l);
  a->set_rows(c.rows);
  a->set_causal(c.causal);
  a->set_scale(c.scale);
  return s;
}

std::vector<double> Draw(Rng& rng, size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (double& x : v) x = rng.Real(lo, hi);
  return v;
}

// A training step's inputs: Q, K, V and dO drawn, O and L the forward's (so P is a distribution, as in training).
TensorMap Inputs(const Composition& c, const BackwardShape& s, uint64_t seed) {
  Rng rng(seed);
  const std::vector<double> q = Draw(rng, static_cast<size_t>(s.rows * s.h * s.hd), -1, 1);
  const std::vector<double> k = Draw(rng, static_cast<size_t>(s.l * s.kv * s.hd), -1, 1);
  const std::vector<double> v = Draw(rng, static_cast<size_t>(s.l * s.kv * s.vd), -1, 1);
  const std::vector<double> d_o = Draw(rng, static_cast<size_t>(s.rows * s.h * s.vd), -1, 1);
  const ForwardRows f = BackwardForward(s, q, k, v);
  const std::map<std::string, const std::vector<double>*> by_name = {
      {"q", &q}, {"k", &k}, {"v", &v}, {"o", &f.o}, {"d_o", &d_o}, {"lse", &f.lse}};
  TensorMap inputs;
  for (const Tensor& t : CompositionInputs(c)) {
    auto it = by_name.find(t.name);
    EXPECT_NE(it, by_name.end()) << "an input the test does not know: " << t.name;
    if (it == by_name.end()) continue;
    EXPECT_EQ(static_cast<size_t>(t.rows * t.cols), it->second->size()) << t.name;
    inputs[t.name] = TensorData{t.rows, t.cols, t.precision, *it->second};
  }
  return inputs;
}

// Lowers, validates, runs the VM and compares all three gradients with the reference; certifies on every shipped
// target that lowers the spec (which must include the case's).
Composition Check(const BwdCase& c, uint64_t seed) {
  SCOPED_TRACE(CaseText(c));
  const proto::OpSpec spec = BwdSpec(c);
  const Target& t = Shipped(c.target);
  absl::StatusOr<Composition> comp = Lower(spec, t);
  EXPECT_TRUE(comp.ok()) << comp.status();
  if (!comp.ok()) return {};
  absl::Status valid = ValidateComposition(*comp, t.tile_rows(), t.tile_cols());
  EXPECT_TRUE(valid.ok()) << valid;
  absl::StatusOr<BackwardShape> s = BackwardShapeOf(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return *comp;
  const TensorMap inputs = Inputs(*comp, *s, seed);
  absl::StatusOr<TensorMap> vm = RunComposition(*comp, t.tile_rows(), t.tile_cols(), inputs);
  EXPECT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!vm.ok() || !ref.ok()) return *comp;
  for (const std::string name : {"dq", "dq_dk", "dq_dv"}) {
    auto got = vm->find(name);
    auto want = ref->find(name);
    EXPECT_NE(got, vm->end()) << "the VM produced no " << name;
    EXPECT_NE(want, ref->end()) << "the reference produced no " << name;
    if (got == vm->end() || want == ref->end()) continue;
    EXPECT_EQ(got->second.rows, want->second.rows) << name;
    EXPECT_EQ(got->second.cols, want->second.cols) << name;
    EXPECT_EQ(got->second.values.size(), want->second.values.size()) << name;
    if (got->second.values.size() != want->second.values.size()) continue;
    double norm = 0.0;
    int bad = 0;
    for (size_t i = 0; i < got->second.values.size(); ++i) {
      norm += want->second.values[i] * want->second.values[i];
      if (bad < 5 && !Near(got->second.values[i], want->second.values[i], 1e-9)) {
        ++bad;
        ADD_FAILURE() << name << " element " << i << ": VM " << got->second.values[i] << ", reference "
                      << want->second.values[i];
      }
    }
    EXPECT_GT(norm, 0.0) << name << " is all zeros: the case checks nothing";
  }
  Outcomes o = CertifyWhereLowered(spec);
  EXPECT_NE(std::find(o.certified.begin(), o.certified.end(), c.target), o.certified.end());
  return *comp;
}

// 24 shapes: GQA group 1, 4 and 8; causal and not; head widths of 2 and 4 tiles (hd 16/32 on test_tiny's 8 x 8
// tiles, 64/128 on Wormhole's 32 x 32); rows and positions that are not whole tiles; values narrower than keys; a
// causal block of rows shorter than its positions (the last rows of a sequence); an explicit scale.
std::vector<BwdCase> Cases() {
  std::vector<BwdCase> v;
  for (bool causal : {false, true}) {
    v.push_back({"test_tiny", 2, 2, 16, 0, 0, 24, causal});         // group 1, whole tiles
    v.push_back({"test_tiny", 4, 1, 16, 0, 0, 21, causal});         // group 4, a tail
    v.push_back({"test_tiny", 8, 1, 16, 0, 0, 13, causal});         // group 8
    v.push_back({"test_tiny", 4, 1, 32, 0, 0, 30, causal});         // 4 tiles a head
    v.push_back({"test_tiny", 8, 2, 16, 8, 0, 19, causal});         // group 4, vd < hd
    v.push_back({"test_tiny", 2, 1, 16, 0, 37, 29, causal});        // fewer rows than positions
    v.push_back({"test_tiny", 4, 4, 8, 0, 0, 70, causal, 0.3});     // many blocks, a scale
    v.push_back({"test_tiny", 8, 8, 8, 16, 45, 45, causal});        // group 1, vd > hd
    v.push_back({"wormhole_n150", 4, 1, 64, 0, 0, 70, causal});     // group 4, a tail
    v.push_back({"wormhole_n150", 8, 1, 64, 0, 0, 40, causal});     // group 8
    v.push_back({"wormhole_n150", 2, 2, 128, 0, 0, 96, causal});    // group 1, 4 tiles a head
    v.push_back({"wormhole_n150", 4, 1, 128, 0, 100, 65, causal});  // fewer rows than positions
  }
  return v;
}

TEST(AttentionBackwardTest, MatchesDirectFormulasOverTwentyFourShapes) {
  uint64_t seed = 1701;
  for (const BwdCase& c : Cases()) Check(c, seed++);
}

// The reference against central differences of the forward: the gradients of f(Q, K, V) = sum(dO * O(Q, K, V)).
TEST(AttentionBackwardTest, ReferenceMatchesFiniteDifferences) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    BackwardShape s{.h = 4, .kv = 2, .hd = 3, .vd = 2, .l = 7, .rows = 5, .causal = causal, .scale = 0.8};
    Rng rng(causal ? 7 : 8);
    std::vector<double> q = Draw(rng, static_cast<size_t>(s.rows * s.h * s.hd), -1, 1);
    std::vector<double> k = Draw(rng, static_cast<size_t>(s.l * s.kv * s.hd), -1, 1);
    std::vector<double> v = Draw(rng, static_cast<size_t>(s.l * s.kv * s.vd), -1, 1);
    const std::vector<double> d_o = Draw(rng, static_cast<size_t>(s.rows * s.h * s.vd), -1, 1);
    auto f = [&]() {
      const ForwardRows fw = BackwardForward(s, q, k, v);
      double sum = 0.0;
      for (size_t i = 0; i < d_o.size(); ++i) sum += d_o[i] * fw.o[i];
      return sum;
    };
    const ForwardRows fw = BackwardForward(s, q, k, v);
    const Gradients g = BackwardDirect(s, q, k, v, fw.o, d_o, fw.lse);
    const double eps = 1e-5;
    double worst = 0.0;
    for (auto [x, grad, name] : {std::tuple{&q, &g.dq, "dq"}, std::tuple{&k, &g.dk, "dk"},
                                 std::tuple{&v, &g.dv, "dv"}}) {
      double scale = 0.0;
      for (double d : *grad) scale = std::max(scale, std::fabs(d));
      ASSERT_GT(scale, 0.0) << name;
      for (size_t i = 0; i < x->size(); ++i) {
        const double keep = (*x)[i];
        (*x)[i] = keep + eps;
        const double up = f();
        (*x)[i] = keep - eps;
        const double down = f();
        (*x)[i] = keep;
        const double fd = (up - down) / (2 * eps);
        const double err = std::fabs(fd - (*grad)[i]) / scale;
        worst = std::max(worst, err);
        EXPECT_LE(err, 1e-6) << name << "[" << i << "]: difference " << fd << ", formula " << (*grad)[i];
      }
    }
    RecordProperty(causal ? "fd_worst_causal" : "fd_worst", std::to_string(worst));
  }
}

// A causal pass folds only the blocks a chunk needs: at Qwen3-8B's heads (32 over 8, hd 128) and 2048 rows, where
// the chunks outnumber what one section needs to fill the grid, well under the 100% of every chunk folding every
// block (a triangle's half, plus the diagonal blocks and the ranges' granularity).
// P is recomputed from scores that pass through a bf16 page, so its error grows with the logits' scale: the claim
// grows as scale sqrt(hd) above the default scale (dq rel L2 0.15 at scale 2, hd 128, against the default 0.031).
TEST(AttentionBackwardTest, TheClaimGrowsWithTheScoreScale) {
  const std::vector<std::pair<double, double>> cases = {{0.0, 1.0}, {0.05, 1.0}, {2.0, 22.627417}};
  for (const auto& [scale, growth] : cases) {
    const absl::StatusOr<Composition> c =
        Lower(BwdSpec({"wormhole_n150", 2, 1, 128, 0, 0, 32, true, scale}), Shipped("wormhole_n150"));
    ASSERT_TRUE(c.ok()) << c.status();
    for (const Section& s : c->sections) {
      if (s.claim.exact) continue;
      EXPECT_NEAR(s.claim.error_growth, growth, 1e-6) << s.name << " at scale " << scale;
    }
  }
}

TEST(AttentionBackwardTest, CausalRangesFoldOnlyTheBlocksTheyNeed) {
  const BwdCase c{"wormhole_n150", 32, 8, 128, 0, 0, 2048, true};
  absl::StatusOr<Composition> comp = Lower(BwdSpec(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  int64_t dq_folds = 0, dkv_folds = 0, dq_full = 0, dkv_full = 0, dq_sections = 0, dkv_sections = 0;
  const int64_t tiles = 2048 / 32;
  for (const Section& s : comp->sections) {
    const bool dq = absl::StrContains(s.name, "_dq_");
    const bool dkv = absl::StrContains(s.name, "_dkv_");
    if (!dq && !dkv) continue;
    const int64_t block = std::stoll(s.name.substr(s.name.rfind(dq ? "_kb" : "_qb") + 3));
    (dq ? dq_folds : dkv_folds) += static_cast<int64_t>(s.items.size()) * s.num_blocks;
    (dq ? dq_full : dkv_full) += static_cast<int64_t>(s.items.size()) * (tiles / block);
    ++(dq ? dq_sections : dkv_sections);
    for (const Stage& st : s.stages) {
      const auto* ld = std::get_if<Load>(&st.op);
      if (ld == nullptr || ld->num_blocks <= 1) continue;
      const bool shared = dq ? (st.name == "load_k" || st.name == "load_v")
                             : (st.name != "load_k" && st.name != "load_v");
      if (shared) {
        EXPECT_EQ(ld->multicast, LoopVar::kItemY) << st.name;
      }
    }
  }
  EXPECT_GT(dq_sections, 1);
  EXPECT_GT(dkv_sections, 1);
  EXPECT_LT(dq_folds, dq_full * 7 / 10);
  EXPECT_LT(dkv_folds, dkv_full * 7 / 10);
}

TEST(AttentionBackwardTest, RefusalsNameWhatIsWrong) {
  const Target& tiny = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(BwdSpec({"test_tiny", 2, 2, 12, 0, 0, 16}), tiny),
            "NotLowered: an attention backward whose head widths are not whole tiles (hd 12, vd 12 on 8 x 8 tiles)");
  EXPECT_EQ(RefusalOf(BwdSpec({"test_tiny", 6, 4, 16, 0, 0, 16}), tiny),
            "NotLowered: an attention backward whose 6 query heads do not group over its 4 K/V heads");
  EXPECT_EQ(RefusalOf(BwdSpec({"test_tiny", 0, 1, 16, 0, 0, 16}), tiny),
            "NotLowered: an attention backward with no heads, no query rows or no head dimension");
  {
    const absl::StatusOr<Composition> c = Lower(BwdSpec({"test_tiny", 2, 2, 16, 0, 8, 16, true}), tiny);
    ASSERT_FALSE(c.ok());
    const absl::Status st = c.status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(),
              "a causal attention backward of 16 rows over 8 positions: the rows are the last positions, so rows <= l");
  }
  {
    const absl::StatusOr<Composition> c = Lower(BwdSpec({"test_tiny", 2, 2, -16, 0, 0, 16}), tiny);
    ASSERT_FALSE(c.ok());
    const absl::Status st = c.status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), "attention_backward.hd is negative (-16)");
  }
}

}  // namespace
}  // namespace spatial::testing
