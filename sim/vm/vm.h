// The f64 reference VM (DESIGN §7): runs a composition exactly as DESIGN §3 defines it. It is the oracle for the
// simulator's numerics and, against the op references, for the lowerings.
//
// Every fault is an error status whose message starts with the fault's name and says where it happened:
//   "TileOutOfRange: section 's' item 2 stage 'load_x' (#0): tile 9 of tensor 'x' (4 tiles)"
// Names: BadInput, BadProgram (malformed ids, sizes, maps), TooLarge, TileOutOfRange, IndexOutOfRange,
// UnwrittenBuffer, TripOutOfRange, StaleStateRead, DivisionByZero. The VM never crashes or hangs on any
// composition; a program whose work would exceed ~1e12 element operations is refused with TooLarge.
#ifndef SIM_VM_VM_H_
#define SIM_VM_VM_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "sim/vm/value_model.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"

namespace spatial {

struct VmOptions {
  // How arithmetic rounds. nullptr = exact f64 (ExactModel()), the reference.
  const ValueModel* model = nullptr;
  // Called before each work item runs, with the section and item it is at, so a long run can show progress.
  // It must be cheap (it is called once per item); it never changes the run.
  std::function<void(int section, int sections, int64_t item, int64_t items)> progress;
  // Threads a section's items run on (0: the machine's cores). The result's bits do not depend on it.
  int threads = 0;
  // Tensors whose values the run takes as given instead of computing them: once a section has stored one, its values
  // are replaced by these (same shape), so every later section reads them. The simulator's comparison runs the exact
  // VM on the machine's discrete choices (a mixture's routing) this way. nullptr: none.
  const TensorMap* follow = nullptr;
  // Return only the composition's results (its Output and State tensors), not its inputs and constants: a caller
  // that holds the inputs already need not hold them twice (the simulator's comparison runs the VM up to three times).
  bool results_only = false;
};

// Runs `c` on a TR x TC tile (callers pass the target's tile; the composition's own fields are not read).
// `inputs` must hold exactly the run's inputs (spatial::CompositionInputs: every Input tensor and every State or
// Param tensor with External init, first declaration wins), each rows x cols. Returns EVERY tensor of the composition
// by name with its final values, logical row-major (only its results with VmOptions::results_only). A run input no
// section stores is read in place where its values are already at its precision: `inputs` must outlive the call
// (it does: the call returns before its arguments go).
absl::StatusOr<TensorMap> RunComposition(const Composition& c, int64_t tile_rows, int64_t tile_cols,
                                         const TensorMap& inputs, const VmOptions& options = {});

}  // namespace spatial

#endif  // SIM_VM_VM_H_
