#include "sim/report/verdict.h"

#include <algorithm>
#include <cmath>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spatial {
namespace {

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100 * fraction); }

std::string Site(int64_t y, int64_t x) { return absl::StrCat("site (", y, ",", x, ")"); }

// (y, x) before (by, bx) in row-major order: the tie rule for the busiest site.
bool Before(int64_t y, int64_t x, int64_t by, int64_t bx) { return y < by || (y == by && x < bx); }

}  // namespace

std::string EngineBound(const std::string& engine) {
  // The SFPU is an acronym; every other engine is named in lower case, as in the trace.
  if (engine == "sfpu") return "SFPU-bound";
  return absl::StrCat(engine, "-bound");
}

proto::Verdict ComputeVerdict(const proto::SimReport& r) {
  proto::Verdict v;
  v.set_sites(r.sites());

  int64_t used = 0;
  bool found = false;  // some engine on some site was busy
  double best = 0;
  int64_t by = 0, bx = 0;
  std::string engine;
  for (const proto::SiteStats& s : r.site_stats()) {
    if (s.items() > 0) ++used;
    // The site's most-busy engine; the first listed wins a tie, so the order is the trace's.
    const proto::EngineStats* top = nullptr;
    for (const proto::EngineStats& e : s.engines()) {
      if (e.busy_fraction() > 0 && (top == nullptr || e.busy_fraction() > top->busy_fraction())) top = &e;
    }
    if (top == nullptr) continue;
    const double f = top->busy_fraction();
    if (!found || f > best || (f == best && Before(s.y(), s.x(), by, bx))) {
      found = true;
      best = f;
      by = s.y();
      bx = s.x();
      engine = top->engine();
    }
  }
  // Sites at work over the run, each section's sites weighted by its cycles: a run whose 630k-cycle fold uses 8
  // sites and whose 5k-cycle relayout uses 32 works on 8 sites, not on the 36 that ever held an item.
  double weighted = 0, cycles = 0;
  for (const proto::SectionStats& s : r.sections()) {
    weighted += static_cast<double>(s.sites_used()) * static_cast<double>(s.cycles());
    cycles += static_cast<double>(s.cycles());
  }
  if (cycles > 0) used = std::min<int64_t>(used, static_cast<int64_t>(std::llround(weighted / cycles)));
  v.set_sites_used(used);
  v.set_busiest_site_y(by);
  v.set_busiest_site_x(bx);
  v.set_busiest_engine(engine);
  v.set_busiest_engine_fraction(best);

  const proto::StallStats& st = r.stalls();
  const double stalls[] = {st.input_wait_cycles(), st.output_space_cycles(), st.dram_cycles()};
  static constexpr const char* kStallNames[] = {"input", "output space", "dram"};
  double sum = 0, top_stall = 0;
  int which = -1;
  for (int i = 0; i < 3; ++i) {
    sum += stalls[i];
    if (stalls[i] > top_stall) {
      top_stall = stalls[i];
      which = i;
    }
  }
  if (which >= 0 && sum > 0) {
    v.set_dominant_stall(kStallNames[which]);
    v.set_dominant_stall_fraction(top_stall / sum);
  }

  const proto::Roofline& rl = r.roofline();
  const std::string sites_used = absl::StrCat(used, " of ", r.sites(), " sites");
  const bool few_sites =
      r.sites() > 0 && static_cast<double>(used) < kMinSitesUsedShare * static_cast<double>(r.sites());
  std::string bound;
  bool bound_counts_sites = false;  // the bound already says "U of S sites"
  if (rl.fraction() >= kAtRooflineFraction) {
    if (rl.limited_by() == "dram") {
      bound = "DRAM-bound";
    } else {
      // Compute-limited at the roofline: the engine doing the most work is the one the bound is made of.
      bound = engine.empty() ? "compute-bound" : EngineBound(engine);
    }
  } else if (few_sites) {
    bound = absl::StrCat("latency-bound: ", sites_used);
    bound_counts_sites = true;
  } else if (found && best >= kEngineBoundFraction) {
    bound = absl::StrCat(EngineBound(engine), " on ", Site(by, bx));
  } else if (!v.dominant_stall().empty()) {
    bound = absl::StrCat("latency-bound: stalls (", v.dominant_stall(), ")");
  } else {
    bound = "latency-bound";
  }
  v.set_bound(bound);

  // The line repeats the sites-used count unless the bound already says it.
  std::string line = bound_counts_sites ? absl::StrCat(bound, " used") : absl::StrCat(bound, "; ", sites_used, " used");
  if (found) {
    absl::StrAppend(&line, "; busiest: ", engine, " ", Percent(best), " on ", Site(by, bx));
  } else {
    absl::StrAppend(&line, "; busiest: none (no engine was busy)");
  }
  if (!v.dominant_stall().empty()) {
    absl::StrAppend(&line, "; stalls mostly ", v.dominant_stall(), " (", Percent(v.dominant_stall_fraction()), ")");
  } else {
    absl::StrAppend(&line, "; no stalls");
  }
  absl::StrAppend(&line, "; roofline ", Percent(rl.fraction()), " of the ",
                  rl.limited_by().empty() ? std::string("compute") : std::string(rl.limited_by()), " bound");
  v.set_line(line);
  return v;
}

}  // namespace spatial
