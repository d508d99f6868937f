// Gated DeltaNet (lowerings/carried/gated_delta.h) three ways — the VM against the f64 op reference (the recurrence
// step by step) to 1e-12 for the output AND the memory it leaves, the program valid, certified on every shipped target
// that lowers it — in its flat, blocked and widened forms, one row and blocks of rows, both gate activations; the
// memory's declared state order and StaleStateRead when the sections run out of it; decode steps on one memory.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/carried/gated_delta.h"
#include "spatial/maps.h"
#include "spatial/proto_file.h"
#include "tests/lowerings/three_way.h"

namespace spatial {
// Readable state orders in failure messages (internal linkage: other tests may print them too).
[[maybe_unused]] static void PrintTo(const StateStep& s, std::ostream* os) {
  *os << s.tensor << "@" << s.section << (s.access == StateAccess::kRead ? ":R" : ":W");
}
}  // namespace spatial

namespace spatial::testing {
namespace {

constexpr double kTol = 1e-12;

struct Shape {
  int64_t hv, hk, d, rows;
  bool sigmoid;
};

proto::OpSpec Gdn(const Shape& s) {
  proto::OpSpec spec = Spec({"q", "k", "v", "z", "beta", "alpha", "S", "gn"});
  spec.set_out("y");
  proto::GatedDeltaSpec* g = spec.mutable_gated_delta();
  g->set_hv(s.hv);
  g->set_hk(s.hk);
  g->set_d(s.d);
  g->set_rows(s.rows);
  g->set_eps(1e-6);
  g->set_gate(s.sigmoid ? proto::GatedDeltaSpec::SIGMOID : proto::GatedDeltaSpec::SILU);
  // The norm weight is a Param where the head is the item: the lowering embeds its fill.
  proto::Fill::RealPattern* gn = spec.mutable_operands(7)->mutable_fill()->mutable_real_pattern();
  gn->set_modulus(13);
  gn->set_scale(0.1);
  gn->set_offset(0.4);
  return spec;
}

// The gates are decays and write strengths in (0, 1); q and k small, as an l2-normalized key is.
Draw GdnDraw() {
  return [](const std::string& name, Rng& r) {
    if (name == "alpha" || name == "beta") return r.Real(0.05, 0.99);
    if (name == "q" || name == "k") return r.Real(-0.5, 0.5);
    if (name == "z") return r.Real(-3, 3);
    return r.Real(-1, 1);
  };
}

void ExpectSameValues(const TensorData& got, const TensorData& want, const std::string& what) {
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.values.size() && bad < 5; ++i) {
    if (!Near(got.values[i], want.values[i], kTol)) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": VM " << got.values[i] << ", reference " << want.values[i];
    }
  }
}

// The three-way check of y (ThreeWay), then the memory the VM leaves against the reference's.
Composition CheckGdn(const Shape& s, const Target& target, uint64_t seed = 9) {
  const proto::OpSpec spec = Gdn(s);
  SCOPED_TRACE(spec.ShortDebugString() + " on " + target.name());
  Composition c = ThreeWay(spec, target, GdnDraw(), kTol, seed);
  if (c.sections.empty()) return c;
  TensorMap inputs = MakeInputs(c, GdnDraw(), seed);
  absl::StatusOr<TensorMap> vm = RunComposition(c, target.tile_rows(), target.tile_cols(), inputs);
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  EXPECT_TRUE(vm.ok() && ref.ok());
  if (vm.ok() && ref.ok()) ExpectSameValues(vm->at("S"), ref->at("S"), "memory S");
  return c;
}

// The declared steps of one tensor, in order.
std::vector<StateStep> StepsOf(const Composition& c, const std::string& tensor) {
  std::vector<StateStep> out;
  for (const StateStep& s : c.state_order) {
    if (s.tensor == tensor) out.push_back(s);
  }
  return out;
}

TEST(CarriedGdnTest, FlatOneRow) {
  const Target& t = Shipped("test_tiny");
  // The flat form holds hv·d² in one accumulator page: 32 elements on test_tiny.
  for (const Shape& s : std::vector<Shape>{{1, 1, 4, 1, false}, {2, 1, 4, 1, true}, {2, 2, 2, 1, false},
                                           {3, 3, 3, 1, true}, {4, 2, 2, 1, false}, {8, 4, 2, 1, true},
                                           {1, 1, 5, 1, false}, {3, 2, 3, 1, false}}) {
    Composition c = CheckGdn(s, t);
    ASSERT_EQ(c.sections.size(), 3u);
    EXPECT_EQ(c.sections[0].name, absl::StrCat("gd_predict_", s.hv, "x", s.d));
    EXPECT_EQ(c.sections[1].name, absl::StrCat("gd_update_", s.hv, "x", s.d));
    EXPECT_EQ(c.sections[2].name, absl::StrCat("gd_read_", s.hv, "x", s.d));
    // ★ Read the old memory, write it, read the new one.
    const std::vector<StateStep> order{{"S", 0, StateAccess::kRead}, {"S", 1, StateAccess::kRead},
                                       {"S", 1, StateAccess::kWrite}, {"S", 2, StateAccess::kRead}};
    EXPECT_EQ(c.state_order, order);
  }
  // A flat memory at wormhole_n150's page: two heads of 64 (8192 elements, 128 row bands).
  CheckGdn({2, 1, 64, 1, true}, Shipped("wormhole_n150"));
}

TEST(CarriedGdnTest, FlatBlockOfRows) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{2, 1, 4, 2, false}, {2, 2, 3, 3, true}, {1, 1, 4, 5, true}}) {
    Composition c = CheckGdn(s, t);
    // Per row: predict, update, read, and the row write into the flat output table.
    ASSERT_EQ(c.sections.size(), static_cast<size_t>(4 * s.rows));
    EXPECT_EQ(c.sections[1].name, absl::StrCat("gd_update_", s.hv, "x", s.d, "_row0"));
    std::vector<StateStep> memory;
    for (int64_t r = 0; r < s.rows; ++r) {
      const int b = static_cast<int>(4 * r);
      memory.insert(memory.end(), {{"S", b, StateAccess::kRead}, {"S", b + 1, StateAccess::kRead},
                                   {"S", b + 1, StateAccess::kWrite}, {"S", b + 2, StateAccess::kRead}});
    }
    EXPECT_EQ(StepsOf(c, "S"), memory);
  }
}

TEST(CarriedGdnTest, BlockedOneRow) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{2, 1, 8, 1, false}, {4, 2, 16, 1, true}, {2, 2, 32, 1, false},
                                           {3, 1, 8, 1, true}, {6, 3, 24, 1, false}}) {
    Composition c = CheckGdn(s, t);
    // The two gate broadcasts, then the step: one item per v-head.
    ASSERT_EQ(c.sections.size(), 3u);
    EXPECT_EQ(c.sections[0].name, absl::StrCat("matmul_1x", s.hv, "x", s.hv * 8));
    EXPECT_EQ(c.sections[2].name, absl::StrCat("gd_step_", s.hv, "x", s.d));
    EXPECT_EQ(c.sections[2].items.size(), static_cast<size_t>(s.hv));
    // The memory is read once and written once a step, in place.
    const std::vector<StateStep> order{{"S", 2, StateAccess::kRead}, {"S", 2, StateAccess::kWrite}};
    EXPECT_EQ(StepsOf(c, "S"), order);
  }
  // Qwen3-Next's Gated DeltaNet decode step: 32 value heads over 16 key heads of 128.
  Composition real = CheckGdn({32, 16, 128, 1, false}, Shipped("wormhole_n150"));
  ASSERT_EQ(real.sections.size(), 3u);
  EXPECT_EQ(real.sections[2].name, "gd_step_32x128");
}

TEST(CarriedGdnTest, BlockedRowsStepped) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{2, 1, 8, 2, true}, {4, 2, 16, 3, false}, {2, 2, 8, 9, true}}) {
    Composition c = CheckGdn(s, t);
    ASSERT_EQ(c.sections.size(), static_cast<size_t>(2 + s.rows));
    EXPECT_EQ(c.sections.back().name, absl::StrCat("gd_step_", s.hv, "x", s.d, "_row", s.rows - 1));
  }
  // Ten rows at 32-wide tiles are still stepped (12 sections either way; the chunks must take fewer).
  Composition ten = CheckGdn({16, 4, 32, 10, true}, Shipped("wormhole_n150"));
  EXPECT_EQ(ten.sections.size(), 12u);
}

TEST(CarriedGdnTest, Widened) {
  const Target& t = Shipped("test_tiny");
  // Heads of 9 to 15 widened to 16 (a head under 8 widened to 8 takes more runs per 8-wide tile than a table page of
  // 8 names: refused, see carried_refusal_test.cc).
  for (const Shape& s : std::vector<Shape>{{2, 1, 12, 1, false}, {2, 2, 10, 1, true}, {4, 2, 9, 1, false},
                                           {2, 1, 12, 3, true}, {3, 1, 11, 2, false}}) {
    Composition c = CheckGdn(s, t);
    ASSERT_FALSE(c.sections.empty());
    // The op's own memory is moved in first and out last: a read, then a write.
    const std::vector<StateStep> steps = StepsOf(c, "S");
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0].access, StateAccess::kRead);
    EXPECT_EQ(steps[1].access, StateAccess::kWrite);
    EXPECT_EQ(steps[1].section, static_cast<int>(c.sections.size()) - 1);
    EXPECT_EQ(c.sections.back().name, "move_runs_S");
  }
  // Heads of 80 widened to 96 at wormhole_n150's 32-wide tiles.
  Composition real = CheckGdn({2, 1, 80, 1, true}, Shipped("wormhole_n150"));
  EXPECT_EQ(real.sections.back().name, "move_runs_S");
}

// A block of rows a chunk of a tile's rows at a time, where the chunks take fewer sections than the rows stepped (at
// 32-wide tiles: 11 rows and more).
TEST(CarriedGdnTest, Chunked) {
  const Target& t = Shipped("wormhole_n150");
  EXPECT_FALSE(TakesChunks(10, 32));
  EXPECT_TRUE(TakesChunks(11, 32));
  EXPECT_FALSE(TakesChunks(32, 8));  // a chunk of 8 rows takes 9 sections: never fewer than its rows
  EXPECT_EQ(SolveFactors(1), 1);
  EXPECT_EQ(SolveFactors(2), 1);
  EXPECT_EQ(SolveFactors(3), 2);
  EXPECT_EQ(SolveFactors(17), 5);
  EXPECT_EQ(SolveFactors(32), 5);
  EXPECT_EQ(ChunkedSections(33, 32), 20);
  for (const Shape& s : std::vector<Shape>{{4, 2, 64, 11, false}, {4, 1, 64, 32, true}, {4, 2, 64, 20, true},
                                           {4, 2, 64, 40, false}}) {
    Composition c = CheckGdn(s, t);
    ASSERT_FALSE(c.sections.empty());
    EXPECT_EQ(c.sections[2].name, absl::StrCat("gd_chunk0_g_", s.hv, "x", s.d));
    // The gate broadcasts, each chunk's 6 + factors sections, the relayout of the dense output to flat rows.
    int64_t chunk_sections = 0;
    for (const Section& sec : c.sections) chunk_sections += absl::StartsWith(sec.name, "gd_chunk");
    EXPECT_EQ(chunk_sections + 2, ChunkedSections(s.rows, 32));
    // The memory is read by each chunk's Δ, output and memory sections, then written by the memory section.
    const std::vector<StateStep> steps = StepsOf(c, "S");
    ASSERT_EQ(steps.size(), static_cast<size_t>(4 * CeilDiv(s.rows, 32)));
    EXPECT_EQ(steps[3].access, StateAccess::kWrite);
    // The solve's section j that squares into P_{j+1} claims 2^{j+1} times the default error for what it stores
    // (a power of the rounded N compounds its error); every other section claims the default.
    int64_t squares = 0;
    for (const Section& sec : c.sections) {
      const size_t at = sec.name.find("_solve");
      bool stores_power = false;
      for (const Stage& st : sec.stages) {
        const auto* store = std::get_if<Store>(&st.op);
        if (store == nullptr) continue;
        const std::string& n = sec.tensors[store->tensor].name;  // "{out}__c{c}_p{j}"
        const size_t p = n.rfind("_p");
        stores_power |= n.find("__c") != std::string::npos && p != std::string::npos && p + 2 < n.size() &&
                        std::all_of(n.begin() + static_cast<std::ptrdiff_t>(p) + 2, n.end(),
                                    [](char ch) { return ch >= '0' && ch <= '9'; });
      }
      if (at == std::string::npos || !stores_power) {
        EXPECT_EQ(sec.claim.error_growth, 0) << sec.name;
        continue;
      }
      const int64_t j = std::stoll(sec.name.substr(at + 6));
      EXPECT_EQ(sec.claim.error_growth, static_cast<double>(int64_t{1} << (j + 1))) << sec.name;
      ++squares;
    }
    int64_t expected_squares = 0;
    for (int64_t r0 = 0; r0 < s.rows; r0 += 32) {
      expected_squares += SolveFactors(std::min<int64_t>(s.rows - r0, 32)) - 1;
    }
    EXPECT_EQ(squares, expected_squares) << "one square per factor after the first, per chunk";
  }
  // A widened head (48 -> 64) in chunks.
  CheckGdn({4, 2, 48, 12, true}, t);
}

// A gate of exactly 0 (a full reset: e^g underflowed) in the chunked form: ln 0 = -inf times the cumulative sum's
// triangle zeros made the whole chunk NaN; with ln α floored at the least normal float's the VM matches the stepped
// reference, the memory included.
TEST(CarriedGdnTest, ChunkedTakesAGateOfZero) {
  const Target& t = Shipped("wormhole_n150");
  const proto::OpSpec spec = Gdn({4, 2, 64, 20, false});
  auto alpha_at = std::make_shared<int64_t>(0);
  const Draw base = GdnDraw();
  const Draw reset = [=](const std::string& name, Rng& r) {
    if (name == "alpha" && (*alpha_at)++ == 4 * 7 + 1) return 0.0;  // row 7, head 1
    return base(name, r);
  };
  *alpha_at = 0;
  Composition c = ThreeWay(spec, t, reset, kTol, 5);
  ASSERT_FALSE(c.sections.empty());
  *alpha_at = 0;
  TensorMap inputs = MakeInputs(c, reset, 5);
  absl::StatusOr<TensorMap> vm = RunComposition(c, t.tile_rows(), t.tile_cols(), inputs);
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  ASSERT_TRUE(vm.ok() && ref.ok());
  for (double v : vm->at("S").values) ASSERT_TRUE(std::isfinite(v));
  ExpectSameValues(vm->at("S"), ref->at("S"), "memory S");
}

// Swapping the update and the read of the flat form (and the blocked step with the gate broadcast before it) while
// keeping each section's declared steps makes the order a lie: the VM faults StaleStateRead, the certifier rejects it.
TEST(CarriedGdnTest, SectionsOutOfOrderFaultStaleStateRead) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{2, 1, 4, 1, false}, {2, 1, 4, 2, true}}) {
    absl::StatusOr<Composition> c = Lower(Gdn(s), t);
    ASSERT_TRUE(c.ok()) << c.status();
    TensorMap inputs = MakeInputs(*c, GdnDraw(), 3);
    ASSERT_TRUE(RunComposition(*c, t.tile_rows(), t.tile_cols(), inputs).ok());
    Composition swapped = *c;
    std::swap(swapped.sections[1], swapped.sections[2]);
    for (StateStep& step : swapped.state_order) {
      if (step.section == 1 || step.section == 2) step.section = 3 - step.section;
    }
    absl::StatusOr<TensorMap> run = RunComposition(swapped, t.tile_rows(), t.tile_cols(), inputs);
    ASSERT_FALSE(run.ok());
    EXPECT_TRUE(absl::StartsWith(run.status().message(), "StaleStateRead")) << run.status();
    EXPECT_TRUE(Certify(*c, t).ok());
    EXPECT_FALSE(Certify(swapped, t).ok());
  }
}

// Three decode steps, each its own op on the one memory, as one composition: the VM equals the reference taken op
// after op, each reading the memory the one before left.
TEST(CarriedGdnTest, DecodeStepsOnOneMemory) {
  const Target& t = Shipped("test_tiny");
  for (const Shape& s : std::vector<Shape>{{2, 1, 4, 1, false}, {2, 1, 8, 1, true}}) {
    std::vector<proto::OpSpec> specs;
    std::vector<Composition> parts;
    for (int i = 0; i < 3; ++i) {
      proto::OpSpec spec = Gdn(s);
      spec.set_out(absl::StrCat("y", i));
      for (int o : {0, 1, 2, 3, 4, 5}) {
        spec.mutable_operands(o)->set_name(absl::StrCat(spec.operands(o).name(), i));
      }
      absl::StatusOr<Composition> c = Lower(spec, t);
      ASSERT_TRUE(c.ok()) << c.status();
      parts.push_back(std::move(*c));
      specs.push_back(spec);
    }
    Composition all = ComposeSections("decode_steps", std::move(parts), t);
    ASSERT_TRUE(ValidateComposition(all, t.tile_rows(), t.tile_cols()).ok());
    ExpectCertifies(all, t);
    TensorMap inputs = MakeInputs(all, [](const std::string& name, Rng& r) {
      return GdnDraw()(name.substr(0, name.size() - (name == "S" || name == "gn" ? 0 : 1)), r);
    }, 4);
    absl::StatusOr<TensorMap> vm = RunComposition(all, t.tile_rows(), t.tile_cols(), inputs);
    ASSERT_TRUE(vm.ok()) << vm.status();
    TensorMap state = inputs;
    for (const proto::OpSpec& spec : specs) {
      absl::StatusOr<TensorMap> ref = ReferenceOp(spec, state);
      ASSERT_TRUE(ref.ok()) << ref.status();
      ExpectSameValues(vm->at(spec.out()), ref->at(spec.out()), spec.out());
      state["S"] = ref->at("S");
    }
    ExpectSameValues(vm->at("S"), state.at("S"), "the memory left behind");
  }
}

}  // namespace
}  // namespace spatial::testing

namespace spatial::testing {
namespace {

proto::OpSpec Example(const std::string& kind) {
  proto::OpSpec spec;
  absl::Status read = ReadProtoFile(std::string(SPATIAL_SOURCE_DIR) + "/examples/ops/" + kind + ".textproto", &spec);
  EXPECT_TRUE(read.ok()) << read;
  EXPECT_EQ(OpKindName(spec), kind);
  // A Param the example leaves unknown (the conv weight, the norm weight) gets values here, so the reference and the
  // VM see the same ones.
  for (proto::Operand& o : *spec.mutable_operands()) {
    if (o.name() == "conv1d_weight" || o.name() == "norm_weight") {
      o.mutable_fill()->mutable_real_pattern()->set_modulus(29);
      o.mutable_fill()->mutable_real_pattern()->set_scale(0.03);
      o.mutable_fill()->mutable_real_pattern()->set_offset(-0.2);
    }
  }
  return spec;
}

// The shipped examples, three ways on test_tiny and wormhole_n150.
TEST(CarriedExamplesTest, EveryExampleIsCheckedThreeWays) {
  for (const char* target : {"test_tiny", "wormhole_n150"}) {
    Composition conv = ThreeWay(Example("causal_conv"), Shipped(target), Reals(-2, 2), kTol);
    EXPECT_EQ(conv.sections.size(), 2u);
    Draw draw = [](const std::string& name, Rng& r) {
      return GdnDraw()(name == "query" ? "q" : name == "key" ? "k" : name, r);
    };
    Composition gdn = ThreeWay(Example("gated_delta"), Shipped(target), draw, kTol);
    EXPECT_EQ(gdn.sections.size(), 3u);
  }
}

}  // namespace
}  // namespace spatial::testing
