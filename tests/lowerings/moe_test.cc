// Mixture of experts (lowerings/moe/moe.h): the flat form's three sections over softmax and sigmoid routers,
// router, selection and expert biases, group limits, renormalization, the routed scale, weighed inputs and gpt-oss's
// clamped SwiGLU, at the real routing shapes of Qwen3-30B-A3B, gpt-oss-20b and DeepSeek-V3 (at a reduced hidden
// size), each checked against the naive f64 reference on the VM, validated and certified.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gtest/gtest.h"
#include "tests/lowerings/harness.h"
#include "tests/lowerings/moe_cases.h"

namespace spatial::testing {
namespace {

TEST(MoeTest, MatchesReference) {
  using S = proto::MoeSpec;
  const std::vector<MoeCase> cases = {
      {"test_tiny", 8, 8, 4, 2},
      {"test_tiny", 5, 3, 6, 1, S::SOFTMAX, false},
      {"test_tiny", 6, 7, 8, 3, S::SIGMOID},
      {"test_tiny", 9, 4, 5, 2, S::SOFTMAX, true, 0.0, 0, 0, /*router_bias=*/true},
      {"test_tiny", 4, 6, 6, 6},                                   // every expert chosen
      {"test_tiny", 1, 1, 1, 1},                                   // one of one
      {"test_tiny", 4, 2, 3, 2},                                   // whole table: k windows cover it
      {"test_tiny", 4, 4, 16, 2, S::SOFTMAX, true},                // runs of whole tiles: the pick addresses them
      {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, false, 1.5},          // the scale rides each round's weight
      {"test_tiny", 7, 5, 8, 3, S::SIGMOID, false, 0.0, 0, 0, false, false, false, /*weigh_inputs=*/true},
      {"test_tiny", 7, 5, 8, 2, S::SIGMOID, false, 2.0, 0, 0, false, false, false, true},
      {"test_tiny", 5, 4, 8, 3, S::SIGMOID, true, 2.5, 4, 2, false, false, /*selection_bias=*/true},
      {"test_tiny", 5, 4, 8, 2, S::SOFTMAX, true, 0.0, 4, 3},      // groups over a softmax
      {"test_tiny", 5, 4, 6, 2, S::SIGMOID, true, 0.0, 6, 3},      // groups of one expert
      {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, false, /*expert_biases=*/true},
      {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, false, true, false, false, /*clamped=*/true},
      {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, false, 0.0, 0, 0, true, true, true, false, true},  // everything
      // Qwen3-30B-A3B's routing: 128 experts, top 8, softmax, renormalized (norm_topk_prob).
      {"wormhole_n150", 16, 12, 128, 8},
      // gpt-oss-20b: 32 experts, top 4, router and expert biases, clamped SwiGLU (limit 7, alpha 1.702).
      {"wormhole_n150", 12, 10, 32, 4, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true},
      // DeepSeek-V3: 256 experts in 8 groups, top 4 groups, top 8, sigmoid, selection bias, routed scale 2.5.
      {"wormhole_n150", 8, 8, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true},
      {"wormhole_n150", 40, 24, 16, 2},
      {"blackhole_p150", 10, 6, 64, 6, S::SIGMOID, true, 0.0, 0, 0, false, false, true},
      // The blocked form (d and dff whole tiles): every product on the matrix engine, the weights gathered by tile.
      {"test_tiny", 16, 24, 8, 3},
      {"test_tiny", 192, 16, 6, 2},  // K in three blocks of 8 tiles: a fold of two
      {"test_tiny", 128, 8, 4, 2},   // two K blocks, both in the prologue
      {"test_tiny", 16, 8, 16, 4, S::SIGMOID, true, 2.5, 4, 2, false, false, true},
      {"test_tiny", 8, 16, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true},
      {"test_tiny", 24, 16, 6, 2, S::SIGMOID, false, 0.0, 0, 0, false, false, false, true},
      {"test_tiny", 24, 16, 6, 2, S::SIGMOID, false, 1.5, 0, 0, false, false, false, false},
      {"wormhole_n150", 256, 96, 128, 8},                                                          // Qwen3-30B-A3B
      {"wormhole_n150", 128, 128, 32, 4, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true},  // gpt-oss
      {"wormhole_n150", 64, 64, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true},           // DeepSeek-V3
      {"blackhole_p150", 96, 64, 64, 6, S::SIGMOID, true, 0.0, 0, 0, false, false, true},
      // Shared experts beside the routed ones (DeepSeek-V3's one, at a reduced width), both forms.
      {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, /*shared=*/7},
      {"test_tiny", 16, 8, 16, 4, S::SIGMOID, true, 2.5, 4, 2, false, false, true, false, false, 16},
      {"wormhole_n150", 64, 64, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true, false, false, 64},
      // Qwen3-Next's shared expert, weighed by its sigmoid gate, both forms; its 512 experts' fp32 scores are twice
      // the accumulator's width, so the softmax's and the rounds' row pages stream through it.
      {"test_tiny", 6, 5, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 7, true},
      {"wormhole_n150", 64, 32, 512, 10, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 32, true},
  };
  int checked = 0;
  for (const MoeCase& c : cases) {
    const proto::OpSpec spec = MoeSpecOf(c);
    const Target& t = Shipped(c.target);
    Composition comp = CheckLowering(spec, t, MoeDraw(c.d, c.dff), 1e-12, static_cast<uint64_t>(c.ne * 100 + c.d));
    const bool blocked = c.d % t.tile_cols() == 0 && c.dff % t.tile_cols() == 0;
    ASSERT_EQ(comp.sections.size(), (blocked ? 6u : 4u) + (c.groups > 0 ? 1u : 0u) + (c.shared > 0 ? 6u : 0u) +
                                        (c.shared_gate ? 1u : 0u))
        << spec.ShortDebugString();
    const CertifyResult cert = Certify(comp, t);
    EXPECT_TRUE(cert.ok()) << spec.ShortDebugString() << ": "
                           << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(MoeTest, SectionsAndNames) {
  MoeCase c{"wormhole_n150", 16, 12, 128, 8};
  absl::StatusOr<Composition> comp = Lower(MoeSpecOf(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_EQ(comp->sections.size(), 4u);
  EXPECT_EQ(comp->sections[0].name, "moe_router_16x128");
  EXPECT_EQ(comp->sections[1].name, "moe_softmax_128");
  EXPECT_EQ(comp->sections[2].name, "moe_routing_128x8");
  EXPECT_EQ(comp->sections[3].name, "moe_128x8_16x12");
  // ★ A ROUND IS A BLOCK OF THE FOLD: the rounds are the routing's and the experts' folds, one item each.
  for (int s : {2, 3}) {
    EXPECT_EQ(comp->sections[s].items.size(), 1u);
    EXPECT_EQ(comp->sections[s].num_blocks, 8);
  }
  // The router's logits and scores stay fp32.
  const Section& router = comp->sections[0];
  EXPECT_EQ(router.tensors[router.FindTensor("y__moe_logits")].precision, Precision::kFp32);
  c.score = proto::MoeSpec::SIGMOID;
  comp = Lower(MoeSpecOf(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  EXPECT_EQ(comp->sections[1].name, "moe_sigmoid_128");
  c.groups = 8;
  c.kept = 4;
  comp = Lower(MoeSpecOf(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  EXPECT_EQ(comp->sections[2].name, "moe_groups_128x4");
  EXPECT_EQ(comp->sections[2].num_blocks, 4);
}

// ★ ONLY THE CHOSEN EXPERTS' RUNS MOVE: a round loads the window around its expert's run, not the table.
TEST(MoeTest, OnlyTheChosenRunsMove) {
  MoeCase c{"wormhole_n150", 16, 12, 128, 8};
  absl::StatusOr<Composition> comp = Lower(MoeSpecOf(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  const Section& experts = comp->sections[3];
  int gathers = 0;
  for (const Stage& s : experts.stages) {
    const auto* load = std::get_if<Load>(&s.op);
    if (load == nullptr || !load->pattern.origin.indirect) continue;
    ++gathers;
    // span 192 at offsets of 0 mod 32: 6 or 7 tiles of a 768-tile table.
    EXPECT_LE(load->pattern.block_w, 7) << s.name;
    EXPECT_EQ(s.phase, Phase::kBody) << s.name;
  }
  EXPECT_EQ(gathers, 3);  // gate, up and down, in every round's block
}

// Qwen3-30B-A3B's MoE at its real widths (hidden 2048, expert width 768, 128 experts, top 8): lowered in the
// blocked form and certified; each round moves only its expert's tiles. The three-way check runs its widths over 16
// experts (the 128-expert tables are 1.6 GB each in f64) and its routing at a reduced width above.
TEST(MoeTest, Qwen3MoeAtRealWidth) {
  const Target& t = Shipped("wormhole_n150");
  MoeCase full{"wormhole_n150", 2048, 768, 128, 8};
  absl::StatusOr<Composition> comp = Lower(MoeSpecOf(full), t);
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_EQ(comp->sections.size(), 6u);
  const CertifyResult cert = Certify(*comp, t);
  EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
  const Section& up = comp->sections[3];
  EXPECT_EQ(up.name, "moe_up_128x8_2048x768");
  EXPECT_EQ(up.items.size(), 8u * 24u);
  int gathers = 0;
  for (const Stage& s : up.stages) {
    const auto* load = std::get_if<Load>(&s.op);
    if (load == nullptr || !load->pattern.origin.indirect) continue;
    ++gathers;
    EXPECT_EQ(load->pattern.block_h * load->pattern.block_w, 8) << s.name;  // one K block of one tile row
  }
  EXPECT_EQ(gathers, 2 * 2);  // gate and up, in the peeled first block and the fold's body
  MoeCase widths{"wormhole_n150", 2048, 768, 16, 8};
  CheckLowering(MoeSpecOf(widths), t, MoeDraw(widths.d, widths.dff), 1e-12, 3);
}

// Ties go to the lowest expert, a NaN score never wins, and the reference states both as the VM runs them.
TEST(MoeTest, TiesAndNaNs) {
  MoeCase c{"test_tiny", 2, 2, 4, 2, proto::MoeSpec::SIGMOID, false};
  const proto::OpSpec spec = MoeSpecOf(c);
  const Target& t = Shipped(c.target);
  absl::StatusOr<Composition> comp = Lower(spec, t);
  ASSERT_TRUE(comp.ok()) << comp.status();
  TensorMap inputs = MakeInputs(*comp, MoeDraw(2, 2), 7);
  // Router columns: expert 0 NaN, experts 1 and 3 tied, expert 2 lower.
  std::vector<double>& wr = inputs["wr"].values;
  const double nan = std::nan("");
  for (int64_t t2 = 0; t2 < 2; ++t2) {
    wr[t2 * 4 + 0] = nan;
    wr[t2 * 4 + 1] = 0.5;
    wr[t2 * 4 + 2] = -0.5;
    wr[t2 * 4 + 3] = 0.5;
  }
  inputs["x"].values = {1.0, 1.0};
  absl::StatusOr<TensorMap> vm = RunComposition(*comp, t.tile_rows(), t.tile_cols(), inputs);
  ASSERT_TRUE(vm.ok()) << vm.status();
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // Picks 1 and 3 (NaN never wins; the tie goes to 1 first): the output is finite and equals the reference's.
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(std::isfinite(vm->at("y").values[i]));
    EXPECT_NEAR(vm->at("y").values[i], ref->at("y").values[i], 1e-12);
  }
}

// A chosen expert past the table faults the VM at the gather, naming it; the certifier proves every gather's
// guard from the routing's picks, which the arg-max bounds to [0, ne).
TEST(MoeTest, AnExpertPastTheTableFaults) {
  const Target& t = Shipped("test_tiny");
  for (const MoeCase& c : {MoeCase{"test_tiny", 16, 24, 8, 3}, MoeCase{"test_tiny", 6, 5, 8, 2}}) {
    absl::StatusOr<Composition> comp = Lower(MoeSpecOf(c), t);
    ASSERT_TRUE(comp.ok()) << comp.status();
    const CertifyResult cert = Certify(*comp, t);
    EXPECT_TRUE(cert.ok());
    // The experts' first section on its own, fed a pick table that names expert ne.
    Composition experts = *comp;
    experts.sections.erase(experts.sections.begin(), experts.sections.begin() + 3);  // router, scores, routing
    TensorMap inputs = MakeInputs(experts, MoeDraw(c.d, c.dff), 5);
    for (double& v : inputs.at("y__moe_picks").values) v = static_cast<double>(c.ne);
    absl::StatusOr<TensorMap> vm = RunComposition(experts, t.tile_rows(), t.tile_cols(), inputs);
    ASSERT_FALSE(vm.ok());
    const std::string stage = c.d % 8 == 0 ? "'gate_index'" : "stage 'gate'";
    EXPECT_NE(std::string(vm.status().message()).find(stage), std::string::npos) << vm.status();
  }
}

// DeepSeek-V3's mixture at its real widths (hidden 7168, expert width 2048, 256 experts in 8 groups, top 4 groups,
// top 8, sigmoid, selection bias, routed scale 2.5, one shared expert of 2048): lowered, and certified whole.
TEST(MoeTest, DeepSeekV3MoeAtRealWidth) {
  const Target& t = Shipped("wormhole_n150");
  MoeCase full{"wormhole_n150", 7168, 2048, 256, 8, proto::MoeSpec::SIGMOID, true, 2.5, 8, 4, false, false, true,
               false, false, /*shared=*/2048};
  absl::StatusOr<Composition> comp = Lower(MoeSpecOf(full), t);
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_EQ(comp->sections.size(), 13u);
  EXPECT_EQ(comp->name, "moe_256x8_7168x2048_shared2048");
  EXPECT_EQ(comp->sections.back().name, "binary_add_7168");
  const CertifyResult cert = Certify(*comp, t);
  EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
}

// A prefill's tokens through the dense form (lowerings/moe/moe_prefill.h): every expert over every token, weighed
// by the token's routing weight (0 where unchosen), against the reference's token-by-token routing; one and two
// token tiles, a last tile part full, softmax and sigmoid, biases, the clamped SwiGLU, scales, shared experts (and
// Qwen3-Next's gated one).
TEST(MoeTest, PrefillMatchesReference) {
  using S = proto::MoeSpec;
  auto prefill = [](MoeCase c, int64_t tokens) {
    c.tokens = tokens;
    return c;
  };
  const std::vector<MoeCase> cases = {
      prefill({"test_tiny", 16, 24, 8, 3}, 3),
      prefill({"test_tiny", 16, 24, 8, 3}, 13),  // two token tiles, the second part full
      prefill({"test_tiny", 16, 8, 16, 4, S::SIGMOID, false, 2.5, 0, 0, false, false, true}, 9),
      prefill({"test_tiny", 8, 16, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true}, 6),  // gpt-oss
      prefill({"test_tiny", 24, 16, 8, 1, S::SOFTMAX, false, 1.5}, 4),
      prefill({"test_tiny", 8, 16, 8, 8}, 5),  // every expert chosen
      prefill({"test_tiny", 16, 8, 16, 4, S::SIGMOID, true, 2.5, 0, 0, false, false, true, false, false, 16}, 7),
      prefill({"wormhole_n150", 64, 64, 32, 4}, 40),                                                   // Qwen3-MoE
      prefill({"wormhole_n150", 64, 96, 32, 4, S::SOFTMAX, true, 0.0, 0, 0, true, true, false, false, true}, 3),
      prefill({"wormhole_n150", 64, 32, 512, 10}, 33),  // Qwen3-Next's 512 experts, its scores streamed
      // Qwen3-Next's gated shared expert: a weight a token.
      prefill({"wormhole_n150", 64, 32, 512, 10, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 32,
               true},
              33),
      prefill({"test_tiny", 16, 8, 8, 2, S::SOFTMAX, true, 0.0, 0, 0, false, false, false, false, false, 8, true}, 11),
      // DeepSeek-V3's group limit a row a token: groups of two and of one, then its real routing with the shared
      // expert.
      prefill({"test_tiny", 16, 8, 16, 4, S::SIGMOID, true, 2.5, 4, 2, false, false, true}, 9),
      prefill({"test_tiny", 8, 8, 8, 2, S::SOFTMAX, true, 0.0, 8, 3}, 5),
      prefill({"wormhole_n150", 64, 64, 256, 8, S::SIGMOID, true, 2.5, 8, 4, false, false, true, false, false, 64},
              40),
  };
  for (const MoeCase& c : cases) {
    const proto::OpSpec spec = MoeSpecOf(c);
    SCOPED_TRACE(spec.ShortDebugString());
    const Target& t = Shipped(c.target);
    Composition comp = CheckLowering(spec, t, MoeDraw(c.d, c.dff), 1e-12, static_cast<uint64_t>(c.ne * 7 + c.tokens));
    const size_t groups = c.groups > 0 ? 1 : 0;
    ASSERT_EQ(comp.sections.size(), 5u + groups + (c.shared > 0 ? 6u : 0u) + (c.shared_gate ? 1u : 0u));
    if (groups) {
      EXPECT_EQ(comp.sections[1].name, absl::StrCat("moe_groups_", c.tokens, "x", c.ne, "x", c.kept));
    }
    EXPECT_EQ(comp.sections[1 + groups].name, absl::StrCat("moe_route_", c.tokens, "x", c.ne, "x", c.k));
    EXPECT_EQ(comp.sections[3 + groups].name,
              absl::StrCat("moe_dense_up_", c.tokens, "x", c.ne, "_", c.d, "x", c.dff));
    const CertifyResult cert = Certify(comp, t);
    EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
  }
}

// ★ AT A PREFILL EVERY EXPERT'S WEIGHTS MOVE ONCE: the gate/up and down rows are multicast along the token tiles,
// so Qwen3-30B-A3B's 128 tokens read each table once, not once a token tile.
TEST(MoeTest, PrefillReadsEachExpertOnce) {
  MoeCase c{"wormhole_n150", 2048, 768, 128, 8};
  c.tokens = 128;
  absl::StatusOr<Composition> comp = Lower(MoeSpecOf(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  const CertifyResult cert = Certify(*comp, Shipped(c.target));
  EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
  for (const Section& s : comp->sections) {
    for (const Stage& st : s.stages) {
      const auto* load = std::get_if<Load>(&st.op);
      if (load == nullptr) continue;
      const std::string& tensor = s.tensors[load->tensor].name;
      if (tensor == "wg" || tensor == "wu" || tensor == "wd" || tensor == "wr") {
        EXPECT_EQ(load->multicast, LoopVar::kItemY) << s.name << " " << st.name;
      }
    }
  }
}

TEST(MoeTest, PrefillRefusals) {
  auto status = [](MoeCase c, int64_t tokens) -> std::string {
    c.tokens = tokens;
    return std::string(Lower(MoeSpecOf(c), Shipped(c.target)).status().message());
  };
  EXPECT_EQ(status({"test_tiny", 6, 5, 8, 2}, 4),
            "NotLowered: a mixture of experts over a prefill's 4 tokens whose widths (d 6, dff 5) are not whole tiles "
            "of a square tile");
  EXPECT_EQ(status({"test_tiny", 8, 8, 6, 2}, 4),
            "NotLowered: a mixture of experts over a prefill's 4 tokens whose 6 experts are not whole tiles of 8");
  EXPECT_EQ(status({"test_tiny", 16, 8, 16, 4, proto::MoeSpec::SIGMOID, true, 2.5, 16, 2}, 4),
            "NotLowered: a group limit over a prefill's tokens with more groups (16) than a tile has columns");
  MoeCase weighed{"test_tiny", 8, 8, 8, 2, proto::MoeSpec::SIGMOID, false};
  weighed.weigh_inputs = true;
  EXPECT_EQ(status(weighed, 4),
            "NotLowered: weighed inputs over a prefill's 4 tokens (the dense form weighs the hidden rows)");
  MoeCase negative{"test_tiny", 8, 8, 8, 2};
  EXPECT_EQ(Lower([&] {
              proto::OpSpec s = MoeSpecOf(negative);
              s.mutable_moe()->set_tokens(-3);
              return s;
            }(), Shipped("test_tiny")).status(),
            absl::InvalidArgumentError("moe.tokens is negative (-3)"));
}

TEST(MoeTest, Refusals) {
  const Target& t = Shipped("test_tiny");
  auto status = [&](const MoeCase& c, auto edit) {
    proto::OpSpec s = MoeSpecOf(c);
    edit(s);
    return Lower(s, t).status();
  };
  const MoeCase base{"test_tiny", 4, 4, 4, 2};
  auto none = [](proto::OpSpec&) {};
  EXPECT_EQ(status(MoeCase{"test_tiny", 4, 4, 4, 5}, none).message(),
            "NotLowered: a mixture-of-experts block with no width, no experts, or more chosen experts than there are");
  EXPECT_EQ(status(MoeCase{"test_tiny", 0, 4, 4, 1}, none).message(),
            "NotLowered: a mixture-of-experts block with no width, no experts, or more chosen experts than there are");
  MoeCase weighed = base;
  weighed.weigh_inputs = true;
  EXPECT_EQ(status(weighed, none).message(),
            "NotLowered: a mixture whose renormalized weights scale its experts' inputs — each round is weighed as it "
            "is picked");
  EXPECT_EQ(status(MoeCase{"test_tiny", 4, 4, 16, 2, proto::MoeSpec::SIGMOID, true, 0.0, 16, 2}, none).message(),
            "NotLowered: a group limit over more groups than a page has rows");
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_score(proto::MoeSpec::SCORE_UNSPECIFIED); }),
            absl::InvalidArgumentError("moe.score is unset (0): SOFTMAX or SIGMOID"));
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_k(-1); }),
            absl::InvalidArgumentError("moe.k is negative (-1)"));
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_act(proto::MoeSpec::CLAMPED_SWIGLU); }),
            absl::InvalidArgumentError("moe.clamp_limit is 0: a clamped SwiGLU needs a positive finite one"));
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_group_count(3); }),
            absl::InvalidArgumentError("moe.group_count 3 does not divide moe.ne 4"));
  EXPECT_EQ(status(base,
                   [](proto::OpSpec& s) {
                     s.mutable_moe()->set_group_count(2);
                     s.mutable_moe()->set_group_kept(3);
                   }),
            absl::InvalidArgumentError("moe.group_kept is 3: a group limit keeps 1 to group_count (2) groups"));
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_scale(-1.0); }),
            absl::InvalidArgumentError("moe.scale is -1: the routed scale is finite and positive (0: none)"));
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_operands()->RemoveLast(); }).message(),
            "NotLowered: moe takes 5 operands, got 4");
  MoeCase shared_clamped{"test_tiny", 6, 5, 8, 2, proto::MoeSpec::SOFTMAX, true, 0.0, 0, 0, false, false, false,
                         false, /*clamped=*/true, /*shared=*/8};
  EXPECT_EQ(status(shared_clamped, none).message(),
            "NotLowered: a shared expert beside a clamped SwiGLU — the shared experts are a plain SwiGLU");
  MoeCase shared = base;
  shared.shared = 8;
  EXPECT_EQ(status(shared, [](proto::OpSpec& s) { s.mutable_operands()->RemoveLast(); }).message(),
            "NotLowered: moe takes 8 operands, got 7");
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_shared_gate(true); }),
            absl::InvalidArgumentError("moe.shared_gate is set without a shared_dff"));
  EXPECT_EQ(status(base, [](proto::OpSpec& s) { s.mutable_moe()->set_shared_dff(-2); }),
            absl::InvalidArgumentError("moe.shared_dff is negative (-2)"));
  // The reference refuses alike.
  proto::OpSpec bad = MoeSpecOf(base);
  bad.mutable_moe()->set_group_count(3);
  EXPECT_EQ(ReferenceOp(bad, {}).status(), Lower(bad, t).status());
}

}  // namespace
}  // namespace spatial::testing
