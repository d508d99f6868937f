// The one meaning of a fold's trip (DESIGN §3.5): how many blocks a section folds when its count is read at run
// time, and how many of them one item runs. The VM, the simulator and the certifier all count blocks here.
#ifndef SPATIAL_SEMANTICS_TRIP_H_
#define SPATIAL_SEMANTICS_TRIP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "spatial/program.h"
#include "spatial/semantics/interval.h"

namespace spatial {

// ceil((value + bias) / per), or 0 when that is not positive (a fold of no blocks runs no body stage). Exact.
Wide TripBlocks(const Trip& t, Wide value);

// The block counts the admitted values [lo, hi] give (monotone in the value, so the ends suffice).
Interval TripBlockRange(const Trip& t);

// The block count of a run whose trip tensor holds `value`. Faults (OutOfRange; the message is the detail, the
// caller names the section) when the value is not an integer, lies outside [lo, hi], or would fold more than the
// section's num_blocks (the loads are proven for those only).
absl::StatusOr<int64_t> RunTripBlocks(const Trip& t, int64_t num_blocks, double value);

// The blocks `item` runs of a section run folding `section_blocks`: its own count where it gives one (WorkItem.blocks,
// a causal chunk's), never more than the section's; else all of them.
inline int64_t ItemBlocks(const WorkItem& item, int64_t section_blocks) {
  return item.blocks >= 0 && item.blocks < section_blocks ? item.blocks : section_blocks;
}

// Whether stage `st` runs on fold block k of an item folding `item_blocks` (ItemBlocks): a body stage with
// last_blocks runs on the item's last last_blocks blocks only; every other stage on every block of its phase.
inline bool RunsOnBlock(const Stage& st, int64_t item_blocks, int64_t k) {
  return st.phase != Phase::kBody || st.last_blocks <= 0 || k >= item_blocks - st.last_blocks;
}

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_TRIP_H_
