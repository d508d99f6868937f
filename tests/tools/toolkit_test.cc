// The tool's helpers that need only the program model: flag parsing, diagnostics, summaries, seeded inputs,
// error figures.
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cli.h"
#include "spatial/semantics/footprint.h"
#include "tools/program_summary.h"
#include "tools/random_inputs.h"
#include "tools/tensor_report.h"

namespace spatial {
namespace {

using ::testing::HasSubstr;

cli::CommandSpec VmLike() {
  cli::CommandSpec s;
  s.name = "vm";
  s.summary = "run";
  s.positional = "PROG";
  s.min_positional = 1;
  s.max_positional = 1;
  s.flags = {{"input", cli::FlagSpec::Kind::kRepeated, "NAME=FILE", "an input"},
             {"output-dir", cli::FlagSpec::Kind::kValue, "DIR", "where"},
             {"quiet", cli::FlagSpec::Kind::kBool, "", "hush"},
             {"o", cli::FlagSpec::Kind::kValue, "FILE", "out"}};
  s.examples = {"spatial vm p.textproto"};
  return s;
}

TEST(Cli, ParsesEveryFlagSpelling) {
  auto a = cli::ParseArgs(VmLike(), {"--input", "x=a.npy", "--input=y=b.npy", "-o", "out.binpb", "--output_dir=d",
                                     "--quiet", "-"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->GetAll("input"), (std::vector<std::string>{"x=a.npy", "y=b.npy"}));
  EXPECT_EQ(a->Get("o"), "out.binpb");
  EXPECT_EQ(a->Get("output-dir"), "d");
  EXPECT_TRUE(a->GetBool("quiet"));
  EXPECT_EQ(a->positional, (std::vector<std::string>{"-"}));
  EXPECT_FALSE(a->help);
}

TEST(Cli, RejectsBadUsageWithNamedFlags) {
  auto spec = VmLike();
  EXPECT_THAT(std::string(cli::ParseArgs(spec, {"p", "--bogus=1"}).status().message()),
              HasSubstr("unknown flag '--bogus' (flags of 'vm': --input, --output-dir, --quiet, -o)"));
  EXPECT_THAT(std::string(cli::ParseArgs(spec, {"p", "--output-dir"}).status().message()),
              HasSubstr("flag --output-dir needs a value"));
  EXPECT_THAT(std::string(cli::ParseArgs(spec, {"p", "-o", "a", "-o", "b"}).status().message()),
              HasSubstr("flag -o given more than once"));
  EXPECT_THAT(std::string(cli::ParseArgs(spec, {"p", "--quiet=maybe"}).status().message()),
              HasSubstr("flag --quiet takes no value or =true/=false"));
  EXPECT_THAT(std::string(cli::ParseArgs(spec, {}).status().message()), HasSubstr("missing argument PROG"));
  EXPECT_THAT(std::string(cli::ParseArgs(spec, {"p", "q"}).status().message()), HasSubstr("unexpected argument 'q'"));
  cli::CommandSpec needs = spec;
  needs.flags[1].required = true;
  EXPECT_THAT(std::string(cli::ParseArgs(needs, {"p"}).status().message()), HasSubstr("missing --output-dir=DIR"));
  EXPECT_THAT(cli::CommandHelp(needs), HasSubstr("[--input=NAME=FILE...] --output-dir=DIR [--quiet]"));
  // --help wins over a missing positional.
  auto h = cli::ParseArgs(spec, {"--help"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
}

TEST(Cli, HelpListsEveryFlagAndAnExample) {
  std::string help = cli::CommandHelp(VmLike());
  EXPECT_THAT(help, HasSubstr("usage: spatial vm [--input=NAME=FILE...] [--output-dir=DIR] [--quiet] [-o FILE] PROG"));
  EXPECT_THAT(help, HasSubstr("--input=NAME=FILE  an input (repeatable)"));
  EXPECT_THAT(help, HasSubstr("-h, --help"));
  EXPECT_THAT(help, HasSubstr("example:\n  spatial vm p.textproto\n"));
}

TEST(Cli, ErrorsKeepTheirLocationOrGetOne) {
  EXPECT_TRUE(cli::HasLocation("a.textproto:3:7: error: bad"));
  EXPECT_TRUE(cli::HasLocation("a.npy: error: bad"));
  EXPECT_FALSE(cli::HasLocation("section 'x': error: bad"));
  EXPECT_FALSE(cli::HasLocation("TileOutOfRange: section 's' item 2"));
  std::ostringstream err;
  cli::PrintError(err, "p.textproto", absl::InvalidArgumentError("TileOutOfRange: tile 9"));
  cli::PrintError(err, "p.textproto", absl::InvalidArgumentError("t.textproto:1:2: error: unknown field"));
  EXPECT_EQ(err.str(), "p.textproto: error: TileOutOfRange: tile 9\nt.textproto:1:2: error: unknown field\n");
  std::ostringstream usage;
  EXPECT_EQ(cli::UsageError(usage, "vm", "missing argument PROG"), cli::kExitUsage);
  EXPECT_EQ(usage.str(), "spatial vm: error: missing argument PROG\nrun 'spatial vm --help' for usage\n");
  EXPECT_EQ(cli::DisplayName("-"), "<stdin>");
}

Section TwoBufferSection(const std::string& name, Precision p0, Precision p1) {
  Section s;
  s.name = name;
  s.buffers = {{"in", 2, 4, p0, BufferKind::kBuffer}, {"out", 3, 1, p1, BufferKind::kScratch}};
  s.stages.resize(3);
  s.stages[0].op = Load{};
  s.stages[1].op = Generic{};
  s.stages[2].op = Store{};
  s.items = {{0, 0, 0, {}}, {1, 0, 1, {}}};
  return s;
}

TEST(ProgramSummary, FootprintIsDepthTimesPageTilesTimesTileBytes) {
  Composition c;
  c.tile_rows = 32;
  c.tile_cols = 32;
  c.sections = {TwoBufferSection("a", Precision::kBf16, Precision::kFp32),
                TwoBufferSection("b", Precision::kBfp8B, Precision::kInt8)};
  c.sections[1].num_blocks = 4;
  ProgramSummary s = Summarize(c);
  ASSERT_EQ(s.sections.size(), 2u);
  // a: 2*4*2048 (bf16) + 3*1*4096 (fp32) = 16384 + 12288.
  EXPECT_EQ(s.sections[0].footprint_bytes, 28672);
  // b: 2*4*1088 (bfp8_b) + 3*1*1024 (int8).
  EXPECT_EQ(s.sections[1].footprint_bytes, 8704 + 3072);
  EXPECT_EQ(s.max_footprint_bytes, 28672);
  EXPECT_EQ(s.stages, 6);
  EXPECT_EQ(s.buffers, 4);
  EXPECT_EQ(s.items, 4);
  EXPECT_EQ(s.stages_by_kind, (std::map<std::string, int64_t>{{"Generic", 2}, {"Load", 2}, {"Store", 2}}));
  std::string text = FormatSummary(s);
  EXPECT_THAT(text, HasSubstr("stages:     6 (2 Generic, 2 Load, 2 Store)"));
  EXPECT_THAT(text, HasSubstr("footprint:  28,672 B (28.0 KiB) per site"));
  EXPECT_THAT(text, HasSubstr("[1] b: 3 stages, 2 buffers, 2 items, fold 4 blocks, 11,776 B (11.5 KiB) per site"));
}

TEST(ProgramSummary, AbsurdSizesSaturateInsteadOfOverflowing) {
  Section s;
  s.buffers = {{"huge", int64_t{1} << 40, int64_t{1} << 40, Precision::kFp32, BufferKind::kBuffer}};
  EXPECT_EQ(SectionFootprint(s, 32, 32), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::max()), "overflow (more than 2^63 B)");
  EXPECT_EQ(FormatBytes(512), "512 B");
}

TEST(RandomInputs, DeterministicPerSeedAndName) {
  Tensor x{"x", TensorRole::kInput, 4, 64, Precision::kBf16, {}, std::nullopt};
  Tensor other{"w", TensorRole::kInput, 2, 2, Precision::kFp32, {}, std::nullopt};
  TensorData a = RandomTensor(x, 7), b = RandomTensor(x, 7), c = RandomTensor(x, 8);
  EXPECT_EQ(a.values, b.values);
  EXPECT_NE(a.values, c.values);
  // Adding another input does not change this one's values.
  EXPECT_EQ(RandomInputs({other, x}, 7).at("x").values, a.values);
  EXPECT_EQ(a.values.size(), 256u);
  EXPECT_EQ(a.precision, Precision::kBf16);
  double lo = 0, hi = 0;
  for (double v : a.values) {
    EXPECT_GE(v, -2.0);
    EXPECT_LT(v, 2.0);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // 256 uniform draws cover most of the range.
  EXPECT_LT(lo, -1.5);
  EXPECT_GT(hi, 1.5);
}

// A float input with a domain (a gate in [0, 1]) draws inside it, over most of it.
TEST(RandomInputs, FloatsDrawFromTheTensorsDomain) {
  Tensor gate{"alpha", TensorRole::kInput, 1, 512, Precision::kBf16, {}, ValueDomain{0.0, 1.0}};
  double lo = 1, hi = 0;
  for (double v : RandomTensor(gate, 3).values) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, 0.05);
  EXPECT_GT(hi, 0.95);
  // A domain as wide as the doubles draws finite values inside it (hi - lo would overflow).
  gate.domain = ValueDomain{-1e308, 1e308};
  for (double v : RandomTensor(gate, 4).values) {
    EXPECT_TRUE(std::isfinite(v)) << v;
    EXPECT_LT(v, 1e308);
  }
}

TEST(RandomInputs, IntegersStayInTheClippedRange) {
  Tensor i8{"idx", TensorRole::kInput, 1, 2000, Precision::kInt8, {}, std::nullopt};
  std::set<double> seen;
  for (double v : RandomTensor(i8, 3).values) {
    EXPECT_EQ(v, std::trunc(v));
    EXPECT_GE(v, -100);
    EXPECT_LE(v, 100);
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 150u);  // spread over the 201 values, not a constant
}

TEST(TensorReport, ErrorFigures) {
  TensorData want{1, 4, Precision::kFp32, {1.0, -2.0, 4.0, 0.0}};
  TensorData got{1, 4, Precision::kFp32, {1.0, -2.5, 4.0, 0.0}};
  auto e = CompareTensors(got, want);
  ASSERT_TRUE(e.ok());
  EXPECT_DOUBLE_EQ(e->max_abs, 0.5);
  EXPECT_DOUBLE_EQ(e->max_rel, 0.25);
  EXPECT_EQ(e->worst, 1);
  // Equal tensors: zero error, even where the reference is zero.
  auto same = CompareTensors(want, want);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->max_abs, 0.0);
  EXPECT_EQ(same->max_rel, 0.0);
  // A nonzero value where zero is expected is a huge relative error, not a hidden one.
  got.values = {1.0, -2.0, 4.0, 1e-9};
  EXPECT_GT(CompareTensors(got, want)->max_rel, 1e200);
  TensorData other{2, 2, Precision::kFp32, {0, 0, 0, 0}};
  EXPECT_THAT(std::string(CompareTensors(other, want).status().message()),
              HasSubstr("shape 2x2 differs from the reference's 1x4"));
  TensorStats s = StatsOf(want);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 4.0);
  EXPECT_DOUBLE_EQ(s.mean, 0.75);
  std::string table = FormatTensorTable({{"y", &want}});
  EXPECT_THAT(table, HasSubstr("tensor"));
  EXPECT_THAT(table, HasSubstr("1x4"));
  EXPECT_THAT(table, HasSubstr("0.75"));
}

}  // namespace
}  // namespace spatial
