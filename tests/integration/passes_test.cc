// The pass pipeline (passes/pass.h): fit-site finds the depths that fit and the certifier agrees; compose refuses
// a handle that is read before it is produced or that nothing produces or gives; the pipeline names an unknown pass
// and verifies after each pass; online-softmax rewrites three-section attentions into the fold and declines, with the
// reason, what it cannot.
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "certify/certify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "passes/fit_site.h"
#include "passes/handles.h"
#include "passes/pass.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/proto_file.h"
#include "spatial/semantics/footprint.h"
#include "spatial/validate.h"
#include "targets/loader.h"
#include "tests/integration/lower_text.h"
#include "tests/lowerings/harness.h"

namespace spatial {
namespace {

PipelineOptions Verifying() {
  PipelineOptions o;
  o.verify_each = true;
  return o;
}

bool Certified(const Composition& c, const Target& t, std::string* codes) {
  const CertifyResult r = Certify(c, t);
  for (const proto::Diagnostic& d : r.diagnostics) *codes += d.code() + " ";
  return r.ok();
}

// A copy of `tiles` fp32 tiles per item through one stream buffer `depth` pages deep.
Composition Wide(int64_t tiles, int64_t depth, int64_t tr, int64_t tc) {
  Template t(tr, tc);
  const int64_t cols = tiles * tc;
  const TensorId x = t.AddTensor("x", TensorRole::kInput, 1, cols, Precision::kFp32, TensorInit::Zero());
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, cols, Precision::kFp32, TensorInit::Zero());
  const BufferId in = t.AddBufferDeep("in", depth, tiles, Precision::kFp32);
  const StageId l = t.AddLoad("load", x, {}, tiles, in);
  const StageId w = t.AddStore("store", y, {}, tiles, in);
  t.AddEdge(l, in, w);
  Composition c = Single(t.Finish("wide", {WorkItem{0, 0, 0, TileRect{0, 0, 1, tiles}}}, Precision::kFp32,
                                  NumericsClaim::Exact()));
  c.tile_rows = tr;
  c.tile_cols = tc;
  return c;
}

TEST(FitSite, DropsStreamPagesOnlyWhereTheSiteOverflows) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok());
  const int64_t tile = t->tile_bytes(Precision::kFp32);
  const int64_t cap = t->max_local_mem_bytes();
  // One stream of `tiles` tiles: over the site at two pages, inside it at one.
  const int64_t tiles = (cap / tile) * 2 / 3;
  Composition fits = Wide(tiles / 2, 2, t->tile_rows(), t->tile_cols());
  const Composition before = fits;
  ASSERT_TRUE(RunPasses(fits, *t, {"fit-site"}, Verifying()).ok());
  EXPECT_EQ(fits.sections[0].buffers, before.sections[0].buffers) << "a section that fits is left as it is";

  Composition over = Wide(tiles, 2, t->tile_rows(), t->tile_cols());
  std::string codes;
  EXPECT_FALSE(Certified(over, *t, &codes));
  EXPECT_NE(codes.find("FOOTPRINT_EXCEEDED"), std::string::npos) << codes;
  ASSERT_TRUE(RunPasses(over, *t, {"verify", "fit-site", "verify"}, Verifying()).ok());
  for (const Buffer& b : over.sections[0].buffers) {
    EXPECT_EQ(b.depth, 1) << b.name;
  }
  codes.clear();
  EXPECT_TRUE(Certified(over, *t, &codes)) << codes;
  EXPECT_LE(SectionFootprint(over.sections[0], t->tile_rows(), t->tile_cols()), cap);
}

Section Copy(const std::string& name, const std::string& from, const std::string& to, int64_t cols) {
  Template t(4, 4);
  const TensorId x = t.AddTensor(from, TensorRole::kInput, 1, cols, Precision::kFp32, TensorInit::Zero());
  const TensorId y = t.AddTensor(to, TensorRole::kOutput, 1, cols, Precision::kFp32, TensorInit::Zero());
  const BufferId b = t.AddBuffer("b", 1, Precision::kFp32);
  t.AddLoad("load", x, {}, 1, b);
  t.AddStore("store", y, {}, 1, b);
  return t.Finish(name, WholeRow(1), Precision::kFp32, NumericsClaim::Exact());
}

TEST(Compose, ReadAfterProducedAndGiven) {
  Composition c;
  c.sections = {Copy("first", "x", "mid", 4), Copy("second", "mid", "y", 4)};
  EXPECT_TRUE(CheckHandles(c, nullptr).ok());
  const std::set<std::string> given{"x", "y"};
  EXPECT_TRUE(CheckHandles(c, &given).ok());

  // A misspelled handle: 'mdi' is read, produced by no section and not given.
  c.sections[1] = Copy("second", "mdi", "y", 4);
  absl::Status st = CheckHandles(c, &given);
  EXPECT_EQ(st.message(),
            "run input 'mdi' is read but no section produces it before it is read and the op is not given it (a "
            "misspelled handle?)");
  EXPECT_TRUE(CheckHandles(c, nullptr).ok()) << "without the given names only types and order are known";

  // Read before it is produced.
  c.sections = {Copy("second", "mid", "y", 4), Copy("first", "x", "mid", 4)};
  EXPECT_EQ(CheckHandles(c, nullptr).message(),
            "section 'second' reads 'mid', which section 'first' produces only after it (sections run in order)");

  // One name, two types: validation's rule, which the verify pass runs.
  c.sections = {Copy("first", "x", "mid", 4), Copy("second", "mid", "y", 8)};
  c.tile_rows = c.tile_cols = 4;
  const std::string invalid(ValidateComposition(c).message());
  EXPECT_NE(invalid.find("tensor 'mid' rows x cols x precision"), std::string::npos) << invalid;
}

TEST(Pipeline, NamesUnknownPassesAndRefusals) {
  absl::StatusOr<Target> t = LoadTarget("test_tiny");
  ASSERT_TRUE(t.ok());
  Composition c = LowerText("out: \"y\" operands { name: \"x\" } silu { n: 256 }", *t);
  absl::Status st = RunPasses(c, *t, {"verify", "fold-everything"});
  EXPECT_EQ(st.message(), "unknown pass 'fold-everything' (known: verify, fit-site, compose, online-softmax)");
  Composition wrong_tile = c;
  wrong_tile.tile_rows = 32;
  st = RunPasses(wrong_tile, *t, {"verify"});
  EXPECT_EQ(st.message(), "pass 'verify': the program's tile is 32 x 8, the target's 8 x 8");
  int seen = 0;
  PipelineOptions o;
  o.after_each = [&](const Pass&, const Composition&) { ++seen; };
  EXPECT_TRUE(RunPasses(c, *t, {"verify", "fit-site", "compose"}, o).ok());
  EXPECT_EQ(seen, 3);
}

}  // namespace
}  // namespace spatial

namespace spatial {
namespace {

// An attention spec with result "y", operands q, k, v, then a named position "pos" and sinks "sinks" when used.
proto::OpSpec AttentionOf(int64_t h, int64_t kv, int64_t hd, int64_t vd, int64_t l, int64_t rows,
                          std::optional<int64_t> literal, bool named, bool sinks, double cap, double scale = 0.0) {
  proto::OpSpec s;
  s.set_out("y");
  for (const char* o : {"q", "k", "v"}) s.add_operands()->set_name(o);
  proto::AttentionSpec* a = s.mutable_attention();
  a->set_h(h);
  a->set_kv(kv);
  a->set_hd(hd);
  a->set_vd(vd);
  a->set_l(l);
  a->set_rows(rows);
  a->set_scale(scale);
  a->set_softcap(cap);
  if (literal) a->mutable_pos()->set_literal(*literal);
  if (named) {
    a->mutable_pos()->set_named("pos");
    s.add_operands()->set_name("pos");
  }
  if (sinks) {
    a->set_sinks(true);
    s.add_operands()->set_name("sinks");
  }
  a->set_form(proto::AttentionSpec::FORM_SECTIONS);
  return s;
}

proto::OpSpec Windowed(proto::OpSpec s, int64_t span, bool chunked) {
  if (chunked) {
    s.mutable_attention()->mutable_window()->set_chunked(span);
  } else {
    s.mutable_attention()->mutable_window()->set_sliding(span);
  }
  return s;
}

bool HasSection(const Composition& c, const std::string& part) {
  for (const Section& s : c.sections) {
    if (s.name.find(part) != std::string::npos) return true;
  }
  return false;
}

int64_t Cycles(const Composition& c, const Target& t) {
  SimOptions o;
  o.timing_only = true;
  TensorMap none;
  for (const Tensor& x : CompositionInputs(c)) none[x.name] = TensorData{x.rows, x.cols, x.precision,
                                                                          std::vector<double>(x.rows * x.cols, 1.0)};
  absl::StatusOr<SimResult> r = Simulate(c, t, none, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->report.total_cycles() : 0;
}

// Every spec where the fold applies: its three-section program becomes a fold that certifies and computes the same
// values on the VM to 1e-12 relative (the same row-major numbers in each layout; a named position 1 below its
// largest) — and simulates in fewer cycles, on test_tiny's toy sizes (rows of at most 32 scores) as on Wormhole (at the
// sizes the sections can hold at all: a row of at most 8 fp32 tiles of scores). At toy sizes that needs the fold's
// blocks of several tile rows, its per-row stages over the live rows only, and no running state for one block.
TEST(OnlineSoftmax, RewritesThreeSectionAttentionsIntoTheFold) {
  struct Case {
    const char* target;
    proto::OpSpec spec;
    const char* what;
  };
  const std::vector<Case> cases = {
      {"test_tiny", AttentionOf(2, 1, 16, 16, 12, 1, 12, false, false, 0), "a decode step over a literal length"},
      {"test_tiny", AttentionOf(2, 2, 8, 8, 12, 1, std::nullopt, false, false, 0, 0.7),
       "the whole cache, an explicit scale"},
      {"test_tiny", AttentionOf(2, 1, 8, 8, 12, 1, std::nullopt, true, false, 0), "a named position"},
      {"test_tiny", AttentionOf(2, 1, 16, 8, 8, 2, 7, false, true, 0.7), "causal rows, sinks, a soft cap, vd < hd"},
      {"test_tiny", AttentionOf(4, 2, 8, 8, 6, 1, 5, false, false, 0), "GQA 2 over a literal length"},
      {"test_tiny", Windowed(AttentionOf(2, 1, 8, 8, 12, 1, std::nullopt, true, false, 0), 4, false),
       "a sliding window over a named position"},
      {"test_tiny", Windowed(AttentionOf(2, 1, 8, 8, 12, 1, std::nullopt, true, false, 0), 5, true),
       "a chunked window over a named position"},
      {"test_tiny", Windowed(AttentionOf(2, 1, 8, 8, 8, 2, 7, false, false, 0), 3, false),
       "a sliding window over causal rows"},
      {"test_tiny", Windowed(AttentionOf(2, 1, 8, 8, 8, 2, 7, false, false, 0), 4, true),
       "a chunked window over causal rows"},
      {"test_tiny", Windowed(AttentionOf(2, 1, 8, 8, 12, 1, 7, false, false, 0), 20, false),
       "a window wider than the positions"},
      {"wormhole_n150", AttentionOf(2, 1, 64, 64, 128, 1, std::nullopt, true, false, 0), "Wormhole, a named position"},
      {"wormhole_n150", AttentionOf(4, 2, 32, 32, 64, 1, 60, false, false, 0), "Wormhole, GQA 2"},
      {"wormhole_n150", AttentionOf(1, 1, 32, 32, 64, 4, 61, false, false, 0), "Wormhole, causal rows"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const Target& t = testing::Shipped(k.target);
    absl::StatusOr<Composition> three = Lower(k.spec, t);
    ASSERT_TRUE(three.ok()) << three.status();
    ASSERT_TRUE(HasSection(*three, "_softmax_"));
    Composition folded = *three;
    ASSERT_TRUE(RunPasses(folded, t, {"online-softmax"}, Verifying()).ok());
    EXPECT_FALSE(HasSection(folded, "_softmax_"));
    EXPECT_TRUE(HasSection(folded, "_flash_"));
    std::string codes;
    EXPECT_TRUE(Certified(folded, t, &codes)) << codes;
    // The same values, each program in its own layout of them.
    testing::Rng rng(11);
    TensorMap in_three, in_fold;
    for (const Tensor& x : CompositionInputs(*three)) {
      TensorData d{x.rows, x.cols, x.precision, std::vector<double>(x.rows * x.cols)};
      for (double& v : d.values) v = x.name == "pos" ? k.spec.attention().l() - 1 : rng.Real(-1, 1);
      in_three[x.name] = d;
    }
    for (const Tensor& x : CompositionInputs(folded)) {
      ASSERT_TRUE(in_three.count(x.name)) << x.name;
      in_fold[x.name] = TensorData{x.rows, x.cols, x.precision, in_three.at(x.name).values};
    }
    absl::StatusOr<TensorMap> a = RunComposition(*three, t.tile_rows(), t.tile_cols(), in_three);
    absl::StatusOr<TensorMap> b = RunComposition(folded, t.tile_rows(), t.tile_cols(), in_fold);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    const std::vector<double>& ya = a->at("y").values;
    const std::vector<double>& yb = b->at("y").values;
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(yb[i], ya[i], 1e-12 * std::max(1.0, std::fabs(ya[i]))) << i;
    EXPECT_LT(Cycles(folded, t), Cycles(*three, t));
  }
}

// The declines, each with its reason.
TEST(OnlineSoftmax, DeclinesWithTheReason) {
  const Target& t = testing::Shipped("test_tiny");
  auto decline = [&](Composition c) {
    const absl::Status st = RunPasses(c, t, {"online-softmax"});
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    std::cout << st.message() << "\n";  // each decline prints its reason
    return std::string(st.message());
  };
  // Nothing to rewrite.
  const Composition silu = LowerText("out: \"y\" operands { name: \"x\" } silu { n: 64 }", t);
  EXPECT_EQ(decline(silu), "pass 'online-softmax': declined: no attention in the program: neither the three sections "
                            "(scores, row softmax, weighted sum) nor one composed of a matmul by keys read transposed, "
                            "a row softmax and a matmul by values");
  // Heads that are not whole tiles: the sections are recognized, the fold does not apply.
  absl::StatusOr<Composition> ragged = Lower(AttentionOf(2, 1, 6, 6, 8, 1, 3, false, false, 0), t);
  ASSERT_TRUE(ragged.ok()) << ragged.status();
  EXPECT_THAT(decline(*ragged), ::testing::HasSubstr("declined: the fold does not apply: NotLowered: the flash form"));
  // Another reader of the probabilities: the fold would leave it nothing to read.
  absl::StatusOr<Composition> base = Lower(AttentionOf(2, 1, 8, 8, 12, 1, 12, false, false, 0), t);
  ASSERT_TRUE(base.ok()) << base.status();
  {
    Composition c = *base;
    Section reader = c.sections.back();  // the weighted sum, read again as a second reader of the probabilities
    reader.name = "another_reader";
    for (Tensor& x : reader.tensors) {
      if (x.role == TensorRole::kOutput) x.name = "y2";
    }
    c.sections.push_back(reader);
    EXPECT_THAT(decline(c), ::testing::HasSubstr("are read by section 'another_reader', not only by the weighted sum"));
  }
  // An elementwise step between the probabilities and the value pass (seed 000's active dropout).
  {
    Composition c = *base;
    Section dropout = c.sections.back();
    dropout.name = "dropout";
    for (Stage& st : dropout.stages) {
      if (st.name == "attn_weighted") st.name = "drop_probs";
    }
    for (Tensor& x : dropout.tensors) {
      if (x.role == TensorRole::kOutput) x.name = "y_dropped";
    }
    c.sections.insert(c.sections.end() - 1, dropout);
    EXPECT_THAT(decline(c), ::testing::HasSubstr("are read by section 'dropout', not only by the weighted sum"));
  }
  // Scores that are not a contraction of two reads.
  {
    Composition c = *base;
    for (Stage& st : c.sections[0].stages) {
      if (st.name == "attn_scores") std::get<Generic>(st.op).body = Mul(Op(1), Const(0.5));
    }
    EXPECT_THAT(decline(c), ::testing::HasSubstr("a score is not scale * (q . k)"));
  }
  // Mixed precisions: the probabilities stored at fp32 are not the attention's sections.
  {
    Composition c = *base;
    for (Section& s : c.sections) {
      for (Tensor& x : s.tensors) {
        if (x.name == "y_probs") x.precision = Precision::kFp32;
      }
    }
    EXPECT_THAT(decline(c), ::testing::HasSubstr("declined: the sections differ from the attention they resemble"));
  }
  // A normalizer other than the sum: the softmax's reciprocal replaced by 1 (an unnormalized weighting).
  {
    Composition c = *base;
    bool changed = false;
    for (Stage& st : c.sections[1].stages) {
      auto* g = std::get_if<Generic>(&st.op);
      if (g == nullptr || st.name.find("recip") == std::string::npos) continue;
      g->body = Const(1.0);
      changed = true;
    }
    ASSERT_TRUE(changed) << "no reciprocal stage in " << c.sections[1].name;
    EXPECT_THAT(decline(c), ::testing::HasSubstr("declined: the sections differ from the attention they resemble"));
  }
}

}  // namespace
}  // namespace spatial
