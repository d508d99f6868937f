// What bounds a simulated run, named honestly. The roofline (proto::Roofline) assumes every site of the grid works
// and every byte streams at the aggregate DRAM bandwidth, so "9.1% of the dram bound" says little about a program
// that uses 8 of 64 sites; and the grid's engine busy shares are averaged over idle sites. The verdict looks at how
// much of the grid was used, the busiest engine on the busiest site and the dominant stall, and names the bound
// from those.
#ifndef SIM_REPORT_VERDICT_H_
#define SIM_REPORT_VERDICT_H_

#include <string>

#include "proto/report.pb.h"

namespace spatial {

// A run whose roofline fraction reaches this sits at its roofline: the grid-wide lower bound explains most of its
// time, so the roofline's limiter (DRAM, or compute = the busiest engine) is the bound. Below it more than 40% of
// the time is something the roofline does not model (latency, imbalance, stalls).
inline constexpr double kAtRooflineFraction = 0.6;

// A run that places work on fewer than this share of the grid's sites is bounded by how little of the grid it
// uses: the roofline spreads the work over every site, so it cannot be reached however fast each used site runs.
inline constexpr double kMinSitesUsedShare = 0.5;

// An engine busy for at least this share of the run's cycles on one site bounds that site (and so the run, which
// ends when its slowest site does): shaving its work shortens the run; below it the engine mostly waits.
inline constexpr double kEngineBoundFraction = 0.6;

// The verdict of `r`, a pure function of the report's fields:
//   sites_used  sites in site_stats with items > 0; sites: r.sites().
//   busiest     the site whose most-busy engine has the largest busy_fraction (ties: lowest y, then x; within a
//               site the first engine listed); "" and site (0,0) when no engine was busy at all.
//   stall       the largest of the input / output space / dram stall cycles (ties in that order) and its share of
//               their sum; "" and 0 when nothing stalled.
//   bound       the first that applies:
//     roofline fraction >= kAtRooflineFraction     "DRAM-bound" when the roofline is limited by dram, else
//                                                  "<engine>-bound" for the busiest engine ("matrix-bound",
//                                                  "SFPU-bound", ...; "compute-bound" when none was busy)
//     sites_used < kMinSitesUsedShare x sites      "latency-bound: U of S sites"
//     busiest fraction >= kEngineBoundFraction     "<engine>-bound on site (y,x)"
//     otherwise                                    "latency-bound: stalls (<stall>)", or "latency-bound"
//   line        the bound with its numbers, e.g. "latency-bound: 8 of 64 sites used; busiest: matrix 41.2% on
//               site (0,3); stalls mostly input (87.0%); roofline 9.1% of the dram bound".
proto::Verdict ComputeVerdict(const proto::SimReport& r);

// The bound's name of an engine: "sfpu" -> "SFPU-bound", "matrix" -> "matrix-bound".
std::string EngineBound(const std::string& engine);

}  // namespace spatial

#endif  // SIM_REPORT_VERDICT_H_
