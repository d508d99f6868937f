// The SVG timeline: hand-made spans and reports, no simulation needed.
#include "sim/report/svg.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace spatial {
namespace {

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + needle.size())) ++n;
  return n;
}

Span MakeSpan(int32_t site, Engine engine, double start, double dur) {
  Span s;
  s.site = site;
  s.engine = engine;
  s.start = start;
  s.dur = dur;
  return s;
}

TimelineInfo Grid(int64_t y, int64_t x) {
  TimelineInfo info;
  info.grid_y = y;
  info.grid_x = x;
  info.section_names = {"main"};
  info.stage_names = {{"load", "compute", "store"}};
  return info;
}

proto::SimReport Report(int64_t cycles) {
  proto::SimReport r;
  r.set_composition("silu");
  r.set_target("wormhole_n150");
  r.set_total_cycles(cycles);
  r.set_clock_hz(1e9);
  proto::SectionStats* s = r.add_sections();
  s->set_name("main");
  s->set_start_cycle(0);
  s->set_cycles(cycles);
  s->mutable_roofline()->set_fraction(0.618);
  s->mutable_roofline()->set_limited_by("compute");
  return r;
}

void ExpectWellFormedEnds(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << svg.substr(0, 80);
  ASSERT_GE(svg.size(), 7u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\""), std::string::npos);
  EXPECT_EQ(Count(svg, "<svg "), 1);
}

TEST(Svg, OneRectPerCoalescedIntervalAndSiteLabels) {
  // Two overlapping reader spans merge; a third far from them (52 pixels at this scale) stays its own rect.
  const std::vector<Span> spans = {MakeSpan(0, Engine::kReader, 0, 100), MakeSpan(0, Engine::kReader, 50, 100),
                                   MakeSpan(0, Engine::kReader, 1000, 100), MakeSpan(3, Engine::kMatrix, 100, 200)};
  const std::string svg = RenderSvg(Grid(1, 8), spans, Report(2000));
  ExpectWellFormedEnds(svg);
  EXPECT_EQ(Count(svg, "class=\"busy reader\""), 2);
  EXPECT_EQ(Count(svg, "class=\"busy matrix\""), 1);
  EXPECT_EQ(Count(svg, "class=\"busy "), 3);
  EXPECT_NE(svg.find(">site (0,0)<"), std::string::npos);
  EXPECT_NE(svg.find(">site (0,3)<"), std::string::npos);
  EXPECT_EQ(svg.find("site (0,1)"), std::string::npos);  // unused sites get no rows
  EXPECT_NE(svg.find("2 of 8 sites used"), std::string::npos);
  // Title: composition, target, cycles and microseconds at 1 GHz.
  EXPECT_NE(svg.find("silu on wormhole_n150: 2000 cycles, 2.00 us"), std::string::npos);
  EXPECT_NE(svg.find("main: 2000 cycles, 61.8% of roofline (compute)"), std::string::npos);
  EXPECT_EQ(svg.find("no engine spans recorded"), std::string::npos);
}

TEST(Svg, SiteCoordinatesFollowGridX) {
  const std::string svg = RenderSvg(Grid(4, 8), {MakeSpan(19, Engine::kSfpu, 0, 10)}, Report(10));
  EXPECT_NE(svg.find(">site (2,3)<"), std::string::npos);
}

TEST(Svg, SpansCloserThanHalfAPixelMerge) {
  // 1000 one-cycle spans 10 cycles apart over 100000 cycles: ~0.1 pixel apart, one rect.
  std::vector<Span> spans;
  for (int i = 0; i < 1000; ++i) spans.push_back(MakeSpan(0, Engine::kPack, i * 10.0, 1));
  const std::string svg = RenderSvg(Grid(1, 1), spans, Report(100000));
  EXPECT_EQ(Count(svg, "class=\"busy pack\""), 1);
}

TEST(Svg, DenseLanesStayBounded) {
  // Spans just over half a pixel apart do not merge; however many there are, a lane stays within ~2000 rects
  // (the pixel-column fallback draws busy fractions as opacity).
  for (double spacing : {10.4, 10.6, 12.0, 20.0}) {
    std::vector<Span> spans;
    for (double t = 0; t < 21000; t += spacing) spans.push_back(MakeSpan(0, Engine::kWriter, t, 0.01));
    const std::string svg = RenderSvg(Grid(1, 1), spans, Report(21000));
    const int rects = Count(svg, "class=\"busy writer\"");
    EXPECT_GE(rects, 1) << spacing;
    EXPECT_LE(rects, 2000) << spacing;
    ExpectWellFormedEnds(svg);
    // At 10.4 cycles (0.52 pixels on the 1050-pixel plot) 2020 intervals survive merging: the fallback draws.
    if (spacing == 10.4) {
      EXPECT_NE(svg.find("fill-opacity"), std::string::npos);
    }
  }
}

TEST(Svg, TextIsEscaped) {
  proto::SimReport report = Report(100);
  report.set_composition("a\"b'c");
  report.mutable_sections(0)->set_name("x<&>y");
  const std::string svg = RenderSvg(Grid(1, 1), {MakeSpan(0, Engine::kReader, 0, 50)}, report);
  EXPECT_NE(svg.find("x&lt;&amp;&gt;y"), std::string::npos);
  EXPECT_EQ(svg.find("<&>"), std::string::npos);
  EXPECT_NE(svg.find("a&quot;b&apos;c on"), std::string::npos);
  EXPECT_EQ(svg.find("a\"b"), std::string::npos);
}

TEST(Svg, Deterministic) {
  std::vector<Span> spans;
  for (int i = 0; i < 200; ++i) {
    spans.push_back(MakeSpan(i % 7, static_cast<Engine>(i % kNumEngines), i * 3.5, 5 + i % 4));
  }
  const TimelineInfo info = Grid(2, 4);
  const proto::SimReport report = Report(800);
  EXPECT_EQ(RenderSvg(info, spans, report), RenderSvg(info, spans, report));
}

TEST(Svg, MoreThan64SitesAreCut) {
  std::vector<Span> spans;
  for (int s = 0; s < 70; ++s) spans.push_back(MakeSpan(s, Engine::kReader, s, 10));
  const std::string svg = RenderSvg(Grid(10, 10), spans, Report(100));
  ExpectWellFormedEnds(svg);
  EXPECT_NE(svg.find("... 6 more sites not drawn"), std::string::npos);
  EXPECT_EQ(Count(svg, "text-anchor=\"end\">site ("), 64);
  EXPECT_EQ(Count(svg, "class=\"busy reader\""), 64);
  EXPECT_NE(svg.find(">site (6,3)<"), std::string::npos);  // site 63, the last drawn
  EXPECT_EQ(svg.find(">site (6,4)<"), std::string::npos);
}

TEST(Svg, NoSpansStillDrawsSections) {
  const std::string svg = RenderSvg(Grid(1, 1), {}, Report(500));
  ExpectWellFormedEnds(svg);
  EXPECT_NE(svg.find("no engine spans recorded"), std::string::npos);
  EXPECT_NE(svg.find("<title>main: 500 cycles"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"busy "), 0);
}

TEST(Svg, TicksAreRoundCycles) {
  const std::string svg = RenderSvg(Grid(1, 1), {}, Report(4138));
  // Steps of 500 over 4138 cycles: 0, 500, ..., 4000.
  EXPECT_NE(svg.find("text-anchor=\"middle\">0<"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"middle\">500<"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"middle\">4000<"), std::string::npos);
  EXPECT_EQ(Count(svg, "text-anchor=\"middle\">"), 9);
}

TEST(Svg, WriteSvgWritesRenderSvg) {
  const std::vector<Span> spans = {MakeSpan(2, Engine::kUnpack, 5, 20)};
  const TimelineInfo info = Grid(1, 4);
  const proto::SimReport report = Report(50);
  const std::string path = ::testing::TempDir() + "/svg_test_out.svg";
  ASSERT_TRUE(WriteSvg(path, info, spans, report).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_EQ(bytes.str(), RenderSvg(info, spans, report));
  std::remove(path.c_str());
  EXPECT_FALSE(WriteSvg("/nonexistent-dir/x.svg", info, spans, report).ok());
}

}  // namespace
}  // namespace spatial
