// The VM's run-time state: device tensors (logical row-major, unified by name across sections) and a section's
// buffers (one current page each: stages run in list order, so a reader always sees the latest page written).
#ifndef SIM_VM_RUN_STATE_H_
#define SIM_VM_RUN_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "spatial/precision.h"
#include "spatial/program.h"

namespace spatial::vm_internal {

struct TensorValue {
  const Tensor* decl = nullptr;  // the first declaration: name, role, shape, precision, init
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t rows_t = 0;  // ceil(rows / TR)
  int64_t cols_t = 0;  // ceil(cols / TC)
  std::vector<double> values;  // rows * cols, row-major
  // A run input no section stores, whose given values are already at its precision: read in place from the caller's
  // inputs instead of copied into `values` (a mixture's expert tables are gigabytes a copy).
  const double* borrowed = nullptr;
  const double* data() const { return borrowed != nullptr ? borrowed : values.data(); }
  int64_t num_tiles() const { return rows_t * cols_t; }
};

struct BufferState {
  const Buffer* decl = nullptr;
  int64_t width = 0;  // W = page_tiles * TC: the page is a TR x W plane
  int64_t size = 0;   // TR * W
  std::vector<double> page;   // the current page
  std::vector<double> spare;  // where the next page is built (a stage may read the buffer it rewrites)
  bool written = false;       // reset for every work item

  // Makes `spare` the new current page (after a stage built it).
  void Commit() {
    page.swap(spare);
    written = true;
  }
};

// The loop variables a Load/Store address may read (ROW, COL and K read as zero there).
struct Bindings {
  int64_t item_y = 0;
  int64_t item_x = 0;
  int64_t kblock = 0;
  int64_t Value(LoopVar v) const {
    switch (v) {
      case LoopVar::kItemY: return item_y;
      case LoopVar::kItemX: return item_x;
      case LoopVar::kKBlock: return kblock;
      default: return 0;
    }
  }
};

}  // namespace spatial::vm_internal

#endif  // SIM_VM_RUN_STATE_H_
