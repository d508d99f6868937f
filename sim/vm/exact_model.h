// The exact f64 value model: no rounding, exact math functions. The VM never calls it per element (it runs its
// own inlined fast path when model->exact()); it exists so code written against ValueModel (the simulator's
// comparisons, tests) can name the reference explicitly.
#ifndef SIM_VM_EXACT_MODEL_H_
#define SIM_VM_EXACT_MODEL_H_

#include "sim/vm/value_model.h"

namespace spatial {

// The process-wide exact model (stateless, thread-safe).
const ValueModel& ExactModel();

}  // namespace spatial

#endif  // SIM_VM_EXACT_MODEL_H_
