// The registry: kinds, names, determinism, and the shipped op examples.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

// The foundation's kinds: a family may add kinds, never drop one of these.
const std::vector<std::string> kFoundationKinds = {"decay", "gelu",  "int_clamp", "int_requant", "matmul",
                                                   "relu",  "scale", "sigmoid",   "silu",        "softcap"};

// Every lowered kind has its f64 op reference (the judge of the lowering), and nothing else does.
TEST(RegistryTest, LoweredKinds) {
  std::vector<std::string> kinds = LoweredKinds();
  EXPECT_EQ(ReferencedKinds(), kinds);
  for (const std::string& k : kFoundationKinds) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
  }
}

TEST(RegistryTest, OpKindName) {
  proto::OpSpec s;
  EXPECT_EQ(OpKindName(s), "");
  s.mutable_int_requant();
  EXPECT_EQ(OpKindName(s), "int_requant");
  s.mutable_moe();
  EXPECT_EQ(OpKindName(s), "moe");
}

// One spec per kind and form, at shapes that exercise each form.
std::vector<proto::OpSpec> OneOfEach() {
  std::vector<proto::OpSpec> specs;
  auto unary = [&](auto set, int64_t rows, int64_t cols) {
    proto::OpSpec s = Spec({"x"});
    set(s, rows * cols);
    if (rows > 1) {
      s.set_shape_rows(rows);
      s.set_shape_cols(cols);
    }
    specs.push_back(s);
  };
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 20}, {1, 100}, {5, 20}}) {
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_silu()->set_n(n); }, rows, cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_relu()->set_n(n); }, rows, cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_sigmoid()->set_n(n); }, rows, cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_gelu()->set_n(n); }, rows, cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_scale()->set_n(n), s.mutable_scale()->set_factor(0.5); }, rows,
          cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_softcap()->set_n(n), s.mutable_softcap()->set_cap(3); }, rows,
          cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_int_requant()->set_n(n), s.mutable_int_requant()->set_s(3); },
          rows, cols);
    unary([](proto::OpSpec& s, int64_t n) { s.mutable_int_clamp()->set_n(n), s.mutable_int_clamp()->set_hi(9); },
          rows, cols);
  }
  for (int64_t rows : {1, 4}) {
    proto::OpSpec d = Spec({"ar", "dt", "alog"});
    d.mutable_decay()->set_n(24);
    d.mutable_decay()->set_rows(rows);
    specs.push_back(d);
  }
  for (int64_t k : {8, 40}) {
    proto::OpSpec m = Spec({"a", "b"});
    m.mutable_matmul()->set_m(9);
    m.mutable_matmul()->set_k(k);
    m.mutable_matmul()->set_n(50);
    specs.push_back(m);
  }
  return specs;
}

TEST(RegistryTest, LoweringIsDeterministic) {
  for (const char* target : {"test_tiny", "wormhole_n150"}) {
    absl::StatusOr<Target> t1 = LoadTarget(target);
    absl::StatusOr<Target> t2 = LoadTarget(target);
    ASSERT_TRUE(t1.ok() && t2.ok());
    for (const proto::OpSpec& spec : OneOfEach()) {
      absl::StatusOr<Composition> a = Lower(spec, *t1);
      absl::StatusOr<Composition> b = Lower(spec, *t2);
      ASSERT_TRUE(a.ok() && b.ok()) << spec.ShortDebugString() << ": " << a.status() << " / " << b.status();
      const std::string bytes = ToProto(*a).SerializeAsString();
      EXPECT_FALSE(bytes.empty());
      EXPECT_EQ(bytes, ToProto(*b).SerializeAsString()) << spec.ShortDebugString();
    }
  }
}

// Every shipped example parses, names a lowered kind, lowers and validates on every shipped target it fits.
TEST(RegistryTest, ShippedExamplesLower) {
  const std::filesystem::path dir = std::filesystem::path(SPATIAL_SOURCE_DIR) / "examples" / "ops";
  std::vector<std::string> kinds;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".textproto") continue;
    SCOPED_TRACE(entry.path().string());
    std::string text;
    ASSERT_TRUE(ReadFileToString(entry.path().string(), &text).ok());
    EXPECT_NE(text.find("# proto-message: spatial.proto.OpSpec"), std::string::npos);
    proto::OpSpec spec;
    absl::Status parsed = ParseTextProto(text, entry.path().string(), &spec);
    ASSERT_TRUE(parsed.ok()) << parsed;
    EXPECT_EQ(OpKindName(spec), entry.path().stem().string());
    kinds.push_back(OpKindName(spec));
    for (const char* target : {"test_tiny", "wormhole_n150"}) {
      absl::StatusOr<Composition> c = Lower(spec, Shipped(target));
      // The one example at widths test_tiny's fictional 96 KiB site cannot hold: DeepSeek-V3's latent attention,
      // whose 576-wide keys are 72 of its 8 x 8 tiles and whose values need 64 circular buffers. It must be refused
      // by name there, and lower on the real target.
      if (!c.ok() && std::string(target) == "test_tiny" && OpKindName(spec) == "mla") {
        EXPECT_EQ(c.status().message(),
                  "NotLowered: a flash attention fold — one tile of queries against one tile row of its K/V head — "
                  "does not fit a site");
        continue;
      }
      ASSERT_TRUE(c.ok()) << target << ": " << c.status();
      absl::Status valid = ValidateComposition(*c);
      EXPECT_TRUE(valid.ok()) << target << ": " << valid;
    }
  }
  // examples/ops holds one spec per lowered kind, named after it.
  std::sort(kinds.begin(), kinds.end());
  std::vector<std::string> lowered = LoweredKinds();
  std::sort(lowered.begin(), lowered.end());
  EXPECT_EQ(kinds, lowered);
}

// The example a reader meets first, run through: Qwen3-0.6B's MLP gate at its real width.
TEST(RegistryTest, SiluExampleRunsOnTheVm) {
  proto::OpSpec spec;
  ASSERT_TRUE(ReadProtoFile(std::string(SPATIAL_SOURCE_DIR) + "/examples/ops/silu.textproto", &spec).ok());
  EXPECT_EQ(spec.silu().n(), 3072);
  Composition c = CheckLowering(spec, Shipped("wormhole_n150"), Reals(-6, 6), 1e-12);
  ASSERT_EQ(c.sections.size(), 1u);
  EXPECT_EQ(c.sections[0].items.size(), 96u);  // 96 tiles of 32, more than the 8-tile accumulator: one item each
}

}  // namespace
}  // namespace spatial::testing
