// The data-movement and matrix stages of DESIGN §3.4 on the VM's state: Load (tensor tiles -> a new page),
// Store (a page -> tensor tiles) and MatmulTiles (C (+)= A . B over the tiles of pages). The driver has checked
// every id and that each block fits its page; these check what depends on run-time values (addresses, indices).
#ifndef SIM_VM_TILE_OPS_H_
#define SIM_VM_TILE_OPS_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "sim/vm/fault.h"
#include "sim/vm/run_state.h"
#include "sim/vm/value_model.h"
#include "spatial/program.h"

namespace spatial::vm_internal {

struct TileShape {
  int64_t rows = 0;  // TR
  int64_t cols = 0;  // TC
};

// Writes a new page of `out`: zeros, then the block's tiles. `index` is the indirect index buffer (written), or
// nullptr when the origin has no indirect term.
bool RunLoad(const Load& load, const TensorValue& t, BufferState& out, const BufferState* index,
             const Bindings& vars, TileShape tile, const ValueModel& model, Fault& fault);

// Which item wrote each tile of a tensor in this section, when items run in parallel: -1 unwritten. A tile a second
// item writes is a conflict (items of a section must be independent); the driver then reruns the section in order.
struct StoreClaims {
  std::unique_ptr<std::atomic<int64_t>[]> owner;  // per tile of the tensor
  std::atomic<bool> conflict{false};
};

// Writes the page of `src` into the block's tiles of `t`, dropping elements past the tensor's edge. With `claims`,
// each tile written is claimed for `item` first.
bool RunStore(const Store& store, TensorValue& t, const BufferState& src, const BufferState* index,
              const Bindings& vars, TileShape tile, const ValueModel& model, Fault& fault,
              StoreClaims* claims = nullptr, int64_t item = 0);

// Writes a new page of `c`: (accumulate ? c's current page : zeros) + A . B tile by tile. Tiles are square.
void RunMatmul(const MatmulTiles& mm, const BufferState& a, const BufferState& b, BufferState& c, TileShape tile,
               const ValueModel& model, Precision acc);

}  // namespace spatial::vm_internal

#endif  // SIM_VM_TILE_OPS_H_
