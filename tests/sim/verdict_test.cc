// The verdict (what bounds a run) on hand-built reports: no simulation needed.
#include "sim/report/verdict.h"

#include <cstdint>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "proto/report.pb.h"
#include "sim/report/summary.h"

namespace spatial {
namespace {

constexpr const char* kEngines[] = {"reader", "unpack", "matrix", "sfpu", "pack", "writer"};

// Adds site (y, x) with `items` work items and every engine, busy as `busy` says (0 otherwise).
void AddSite(proto::SimReport& r, int64_t y, int64_t x, int64_t items, const std::map<std::string, double>& busy) {
  proto::SiteStats* s = r.add_site_stats();
  s->set_y(y);
  s->set_x(x);
  s->set_items(items);
  for (const char* name : kEngines) {
    proto::EngineStats* e = s->add_engines();
    e->set_engine(name);
    const auto it = busy.find(name);
    e->set_busy_fraction(it == busy.end() ? 0.0 : it->second);
    e->set_busy_cycles(1000 * e->busy_fraction());
  }
}

// An 8 x 8 grid whose first `used` sites (row-major) hold 2 items each and run the matrix engine `matrix` of the
// time; the roofline at `fraction` limited by `limited_by`.
proto::SimReport Grid(int used, double matrix, double fraction, const std::string& limited_by) {
  proto::SimReport r;
  r.set_composition("c");
  r.set_target("t");
  r.set_sites(64);
  r.set_total_cycles(1000);
  for (int i = 0; i < 64; ++i) {
    AddSite(r, i / 8, i % 8, i < used ? 2 : 0, i < used ? std::map<std::string, double>{{"matrix", matrix}}
                                                        : std::map<std::string, double>{});
  }
  for (const char* name : kEngines) r.add_engines()->set_engine(name);
  r.mutable_roofline()->set_fraction(fraction);
  r.mutable_roofline()->set_limited_by(limited_by);
  return r;
}

void SetStalls(proto::SimReport& r, double input, double output, double dram) {
  r.mutable_stalls()->set_input_wait_cycles(input);
  r.mutable_stalls()->set_output_space_cycles(output);
  r.mutable_stalls()->set_dram_cycles(dram);
}

TEST(Verdict, DramBoundAtTheRoofline) {
  proto::SimReport r = Grid(64, 0.3, 0.8, "dram");
  const proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.bound(), "DRAM-bound");
  EXPECT_EQ(v.sites_used(), 64);
  EXPECT_EQ(v.sites(), 64);
  EXPECT_EQ(v.line(), "DRAM-bound; 64 of 64 sites used; busiest: matrix 30.0% on site (0,0); no stalls; "
                      "roofline 80.0% of the dram bound");
}

TEST(Verdict, AtTheRooflineWinsOverFewSites) {
  // A run at its roofline is bounded by it however few sites it uses.
  EXPECT_EQ(ComputeVerdict(Grid(8, 0.3, 0.8, "dram")).bound(), "DRAM-bound");
  EXPECT_EQ(ComputeVerdict(Grid(8, 0.3, 0.6, "dram")).bound(), "DRAM-bound");  // the threshold itself counts
  EXPECT_EQ(ComputeVerdict(Grid(8, 0.3, 0.59, "dram")).bound(), "latency-bound: 8 of 64 sites");
}

TEST(Verdict, ComputeLimitedAtTheRooflineNamesTheBusiestEngine) {
  proto::SimReport r = Grid(64, 0.7, 0.75, "compute");
  EXPECT_EQ(ComputeVerdict(r).bound(), "matrix-bound");
  // The SFPU busier than the matrix engine on one site.
  r.mutable_site_stats(9)->mutable_engines(3)->set_busy_fraction(0.9);
  const proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.bound(), "SFPU-bound");
  EXPECT_EQ(v.busiest_engine(), "sfpu");
  EXPECT_DOUBLE_EQ(v.busiest_engine_fraction(), 0.9);
  EXPECT_EQ(v.busiest_site_y(), 1);
  EXPECT_EQ(v.busiest_site_x(), 1);
  EXPECT_EQ(EngineBound("unpack"), "unpack-bound");
  EXPECT_EQ(EngineBound("reader"), "reader-bound");
}

TEST(Verdict, FewSitesIsLatencyBound) {
  proto::SimReport r = Grid(8, 0.1, 0.091, "dram");
  r.mutable_site_stats(3)->mutable_engines(2)->set_busy_fraction(0.412);
  SetStalls(r, 870, 100, 30);
  const proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.sites_used(), 8);
  EXPECT_EQ(v.bound(), "latency-bound: 8 of 64 sites");
  EXPECT_EQ(v.line(), "latency-bound: 8 of 64 sites used; busiest: matrix 41.2% on site (0,3); "
                      "stalls mostly input (87.0%); roofline 9.1% of the dram bound");
  // Even an engine busy all the time on its site does not hide that the grid is mostly idle.
  r.mutable_site_stats(3)->mutable_engines(2)->set_busy_fraction(0.95);
  EXPECT_EQ(ComputeVerdict(r).bound(), "latency-bound: 8 of 64 sites");
}

TEST(Verdict, HalfTheGridIsNotFewSites) {
  // 32 of 64 is not below half the grid; 31 is.
  EXPECT_EQ(ComputeVerdict(Grid(32, 0.2, 0.1, "dram")).bound(), "latency-bound");
  EXPECT_EQ(ComputeVerdict(Grid(31, 0.2, 0.1, "dram")).bound(), "latency-bound: 31 of 64 sites");
}

TEST(Verdict, AnEngineBusyMostOfTheRunBoundsItsSite) {
  proto::SimReport r = Grid(64, 0.3, 0.3, "compute");
  r.mutable_site_stats(2 * 8 + 5)->mutable_engines(4)->set_busy_fraction(0.75);  // pack on (2,5)
  SetStalls(r, 10, 500, 0);
  const proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.bound(), "pack-bound on site (2,5)");
  EXPECT_EQ(v.line(), "pack-bound on site (2,5); 64 of 64 sites used; busiest: pack 75.0% on site (2,5); "
                      "stalls mostly output space (98.0%); roofline 30.0% of the compute bound");
  // At exactly the threshold the engine still bounds the site.
  r.mutable_site_stats(2 * 8 + 5)->mutable_engines(4)->set_busy_fraction(0.6);
  EXPECT_EQ(ComputeVerdict(r).bound(), "pack-bound on site (2,5)");
}

TEST(Verdict, OtherwiseTheStallsBoundIt) {
  proto::SimReport r = Grid(40, 0.3, 0.2, "dram");
  SetStalls(r, 100, 50, 250);
  proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.bound(), "latency-bound: stalls (dram)");
  EXPECT_EQ(v.dominant_stall(), "dram");
  EXPECT_DOUBLE_EQ(v.dominant_stall_fraction(), 0.625);

  SetStalls(r, 0, 0, 0);
  v = ComputeVerdict(r);
  EXPECT_EQ(v.bound(), "latency-bound");
  EXPECT_EQ(v.dominant_stall(), "");
  EXPECT_EQ(v.dominant_stall_fraction(), 0.0);
  EXPECT_EQ(v.line(), "latency-bound; 40 of 64 sites used; busiest: matrix 30.0% on site (0,0); no stalls; "
                      "roofline 20.0% of the dram bound");
}

TEST(Verdict, DominantStall) {
  proto::SimReport r = Grid(64, 0.3, 0.2, "dram");
  SetStalls(r, 50, 300, 50);
  proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.dominant_stall(), "output space");
  EXPECT_DOUBLE_EQ(v.dominant_stall_fraction(), 0.75);
  // Ties go in the order input, output space, dram.
  SetStalls(r, 0, 200, 200);
  v = ComputeVerdict(r);
  EXPECT_EQ(v.dominant_stall(), "output space");
  EXPECT_DOUBLE_EQ(v.dominant_stall_fraction(), 0.5);
  SetStalls(r, 100, 100, 100);
  EXPECT_EQ(ComputeVerdict(r).dominant_stall(), "input");
}

TEST(Verdict, BusiestSiteTiesGoToTheLowestYThenX) {
  proto::SimReport r;
  r.set_sites(4);
  // Listed out of row-major order, so the rule (not the listing) decides.
  AddSite(r, 3, 1, 1, {{"matrix", 0.5}});
  AddSite(r, 1, 4, 1, {{"sfpu", 0.5}});
  AddSite(r, 1, 2, 1, {{"reader", 0.5}, {"writer", 0.5}});
  AddSite(r, 0, 7, 1, {{"pack", 0.4}});
  proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.busiest_site_y(), 1);
  EXPECT_EQ(v.busiest_site_x(), 2);
  EXPECT_EQ(v.busiest_engine(), "reader");  // within a site, the first engine listed
  EXPECT_DOUBLE_EQ(v.busiest_engine_fraction(), 0.5);
  // A strictly busier site wins over a lower one.
  r.mutable_site_stats(0)->mutable_engines(2)->set_busy_fraction(0.51);
  v = ComputeVerdict(r);
  EXPECT_EQ(v.busiest_site_y(), 3);
  EXPECT_EQ(v.busiest_site_x(), 1);
  EXPECT_EQ(v.busiest_engine(), "matrix");
}

TEST(Verdict, NoBusyEngineAndNoSites) {
  proto::SimReport r;
  r.mutable_roofline()->set_fraction(0.9);
  r.mutable_roofline()->set_limited_by("compute");
  const proto::Verdict v = ComputeVerdict(r);
  EXPECT_EQ(v.busiest_engine(), "");
  EXPECT_EQ(v.bound(), "compute-bound");
  EXPECT_NE(v.line().find("busiest: none"), std::string::npos) << v.line();
}

TEST(Verdict, FormatReportSaysTheVerdictAndTheNotes) {
  proto::SimReport r = Grid(8, 0.1, 0.091, "dram");
  r.mutable_site_stats(3)->mutable_engines(2)->set_busy_fraction(0.412);
  r.mutable_engines(2)->set_busy_fraction(0.016);
  SetStalls(r, 870, 100, 30);
  r.add_notes("inputs filled with zeros (--zero-missing)");
  r.add_notes("certification skipped (--no-certify)");
  const std::string text = FormatReport(r);
  EXPECT_NE(text.find("  verdict       latency-bound: 8 of 64 sites used; busiest: matrix 41.2% on site (0,3); "
                      "stalls mostly input (87.0%); roofline 9.1% of the dram bound\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  note          inputs filled with zeros (--zero-missing)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  note          certification skipped (--no-certify)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sites used 8 of 64"), std::string::npos) << text;
  EXPECT_NE(text.find("certified: no"), std::string::npos) << text;
  EXPECT_NE(text.find("grid avg"), std::string::npos) << text;
  EXPECT_NE(text.find("busiest site"), std::string::npos) << text;
  EXPECT_NE(text.find("    matrix          1.6%   41.2% (0,3)"), std::string::npos) << text;
  EXPECT_NE(text.find("roofline      9.1% of the dram bound"), std::string::npos) << text;
  // The verdict comes right after the cycles line.
  const size_t cycles = text.find("  cycles");
  ASSERT_NE(cycles, std::string::npos);
  EXPECT_EQ(text.find("  verdict", cycles), text.find('\n', cycles) + 1) << text;

  // A verdict the report carries is printed as it is.
  r.set_certified(true);
  r.mutable_verdict()->set_line("stored verdict");
  r.mutable_verdict()->set_sites_used(8);
  const std::string stored = FormatReport(r);
  EXPECT_NE(stored.find("  verdict       stored verdict\n"), std::string::npos) << stored;
  EXPECT_NE(stored.find("certified: yes"), std::string::npos) << stored;
}

}  // namespace
}  // namespace spatial
