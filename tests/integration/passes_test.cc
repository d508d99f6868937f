// The pass pipeline (passes/pass.h): fit-site finds the depths that fit and the certifier agrees; compose refuses
// a handle that is read before it is produced or that nothing produces or gives; the pipeline names an unknown pass
// and verifies after each pass.
#include <string>

#include "certify/certify.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "passes/fit_site.h"
#include "passes/handles.h"
#include "passes/pass.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/proto_file.h"
#include "spatial/semantics/footprint.h"
#include "spatial/validate.h"
#include "targets/loader.h"
#include "tests/integration/lower_text.h"

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
  EXPECT_EQ(st.message(), "unknown pass 'fold-everything' (known: verify, fit-site, compose)");
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
