#include "sim/report/summary.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/report/verdict.h"

namespace spatial {
namespace {

std::string Bytes(double b) {
  if (b >= 1e9) return absl::StrFormat("%.2f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.2f MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.2f kB", b / 1e3);
  return absl::StrFormat("%.0f B", b);
}

std::string Rate(double v, const char* unit) {
  if (v >= 1e12) return absl::StrFormat("%.2f T%s", v / 1e12, unit);
  if (v >= 1e9) return absl::StrFormat("%.2f G%s", v / 1e9, unit);
  if (v >= 1e6) return absl::StrFormat("%.2f M%s", v / 1e6, unit);
  return absl::StrFormat("%.2f %s", v, unit);
}

// The busiest site of one engine: its largest per-site busy fraction (over the run's cycles) and where, ties to the
// lowest (y, x). "-" when the report has no per-site stats.
std::string BusiestSite(const proto::SimReport& r, const std::string& engine) {
  bool found = false;
  double best = 0;
  int64_t by = 0, bx = 0;
  for (const proto::SiteStats& s : r.site_stats()) {
    for (const proto::EngineStats& e : s.engines()) {
      if (e.engine() != engine) continue;
      const double f = e.busy_fraction();
      if (!found || f > best || (f == best && (s.y() < by || (s.y() == by && s.x() < bx)))) {
        found = true;
        best = f;
        by = s.y();
        bx = s.x();
      }
    }
  }
  if (!found) return "-";
  return absl::StrFormat("%5.1f%% (%d,%d)", 100 * best, by, bx);
}

}  // namespace

std::string FormatReport(const proto::SimReport& r) {
  std::string out;
  // A verdict the producer stored wins; a report without one (older, or hand-built) gets it computed here.
  const proto::Verdict v = r.verdict().line().empty() ? ComputeVerdict(r) : r.verdict();
  absl::StrAppendFormat(&out, "%s on %s (sites used %d of %d, %s, %s numerics, certified: %s)\n", r.composition(),
                        r.target(), v.sites_used(), r.sites(), r.fidelity(), r.numerics(),
                        r.certified() ? "yes" : "no");
  absl::StrAppendFormat(&out, "  cycles        %d (%.3f us at %.3g GHz)\n", r.total_cycles(), r.seconds() * 1e6,
                        r.clock_hz() / 1e9);
  absl::StrAppendFormat(&out, "  verdict       %s\n", v.line());
  for (const std::string& note : r.notes()) absl::StrAppendFormat(&out, "  note          %s\n", note);
  const proto::Roofline& rl = r.roofline();
  absl::StrAppendFormat(&out, "  roofline      %.1f%% of the %s bound (%.0f cycles; compute %.0f, dram %.0f)\n",
                        100 * rl.fraction(), rl.limited_by(), rl.bound_cycles(), rl.compute_bound_cycles(),
                        rl.dram_bound_cycles());
  absl::StrAppendFormat(&out, "  achieved      %s, %s DRAM\n", Rate(r.achieved_flops_per_second(), "FLOP/s"),
                        Rate(r.achieved_dram_bytes_per_second(), "B/s"));
  absl::StrAppendFormat(&out, "  dram          read %s, written %s; noc %s (%d byte-hops)\n",
                        Bytes(static_cast<double>(r.dram_read_bytes())),
                        Bytes(static_cast<double>(r.dram_write_bytes())), Bytes(static_cast<double>(r.noc_bytes())),
                        r.noc_byte_hops());
  absl::StrAppendFormat(&out, "  stalls        input %.0f, output space %.0f, dram %.0f cycles (all sites)\n",
                        r.stalls().input_wait_cycles(), r.stalls().output_space_cycles(), r.stalls().dram_cycles());
  // Busy over the run's cycles: "grid avg" over every site (idle ones too), "busiest site" on the one site where
  // the engine was busiest.
  absl::StrAppend(&out, "  engine        grid avg  busiest site    invocations\n");
  for (const proto::EngineStats& e : r.engines()) {
    absl::StrAppendFormat(&out, "    %-10s %8.1f%%  %-15s %d\n", e.engine(), 100 * e.busy_fraction(),
                          BusiestSite(r, e.engine()), e.invocations());
  }
  for (const proto::SectionStats& s : r.sections()) {
    absl::StrAppendFormat(&out, "  section %s: %d cycles from %d, %d items on %d sites, %d blocks, %.1f%% of %s bound\n",
                          s.name(), s.cycles(), s.start_cycle(), s.items(), s.sites_used(), s.fold_blocks(),
                          100 * s.roofline().fraction(), s.roofline().limited_by());
  }
  for (const proto::OutputError& e : r.errors()) {
    absl::StrAppendFormat(&out, "  %s %s: max abs %.3g, max rel %.3g, rel L2 %.3g (tolerance %.3g, %s)%s\n",
                          e.within() ? "ok  " : "FAIL", e.tensor(), e.max_abs(), e.max_rel(), e.rel_l2(),
                          e.tolerance(), e.exact_claim() ? "exact" : "approx",
                          e.nans_on_both_sides() > 0
                              ? absl::StrCat("; ", e.nans_on_both_sides(), " NaN on both sides (inputs outside the "
                                             "op's domain there)")
                              : "");
  }
  if (r.trace_truncated()) absl::StrAppendFormat(&out, "  trace truncated at %d events\n", r.trace_events());
  return out;
}

}  // namespace spatial
