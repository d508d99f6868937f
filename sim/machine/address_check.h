// Before the machine times a section: every tile a Load or Store forms, for every item and fold block the run
// executes, lies in its tensor. The machine refuses, as the VM does, to time an access outside memory (a program run
// with --no-certify and no values would otherwise report cycles for reading tile 1000 of a 4-tile tensor). The reach
// of each item is TileForm over the item's coordinates, the blocks the run folds, the index's admitted range and the
// block's tiles: exact, since each variable appears once (spatial/semantics/affine.h).
#ifndef SIM_MACHINE_ADDRESS_CHECK_H_
#define SIM_MACHINE_ADDRESS_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "spatial/program.h"

namespace spatial {

// OK, or the VM's TileOutOfRange fault naming the section, item, stage, tile and tensor. `blocks`: the fold blocks
// the run executes (0: no body stage runs).
absl::Status CheckAddresses(const Section& s, int64_t blocks, int64_t tile_rows, int64_t tile_cols);

}  // namespace spatial

#endif  // SIM_MACHINE_ADDRESS_CHECK_H_
