// A standalone SVG picture of one simulation, for a person to open in a browser (no viewer to install, unlike the
// Chrome trace and the VCD): a title, a strip of sections on the time axis, and per used site one thin lane per
// engine with its busy intervals. The drawing is bounded whatever the run's size: spans closer than half a pixel
// merge, a lane with too many intervals falls back to a busy fraction per pixel column, and at most 64 sites are
// drawn. The same input always gives the same bytes.
//
// Busy rects carry class="busy <engine>" (e.g. class="busy reader"), so tools and tests can count them.
#ifndef SIM_REPORT_SVG_H_
#define SIM_REPORT_SVG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/report.pb.h"
#include "sim/report/span.h"

namespace spatial {

// Renders one simulation as a standalone SVG a person opens in a browser: per-site engine occupancy over time and
// per-section cycles.
std::string RenderSvg(const TimelineInfo& info, const std::vector<Span>& spans, const proto::SimReport& report);

// RenderSvg written to path; path "-" writes to stdout.
absl::Status WriteSvg(const std::string& path, const TimelineInfo& info, const std::vector<Span>& spans,
                      const proto::SimReport& report);

}  // namespace spatial

#endif  // SIM_REPORT_SVG_H_
