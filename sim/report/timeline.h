// Timeline outputs of a simulation: Chrome-trace JSON (opens in Perfetto and chrome://tracing) and VCD (GTKWave).
//
// Chrome trace: one process per site ("site (y,x)"), one thread per engine, one complete event ("ph":"X") per
// engine per stage invocation with ts/dur in microseconds of simulated time; the cycle, item and block ride in
// args. Every engine of every site gets a named track, busy or not, so tracks line up across sites.
// VCD: one busy wire per engine per site, value changes only (never sampled per cycle), for a window of cycles.
#ifndef SIM_REPORT_TIMELINE_H_
#define SIM_REPORT_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/report/span.h"

namespace spatial {

absl::Status WriteChromeTrace(const std::string& path, const TimelineInfo& info, const std::vector<Span>& spans);

// Busy wires for [0, window_cycles) (window_cycles <= 0: the whole run).
absl::Status WriteVcd(const std::string& path, const TimelineInfo& info, const std::vector<Span>& spans,
                      int64_t window_cycles);

}  // namespace spatial

#endif  // SIM_REPORT_TIMELINE_H_
