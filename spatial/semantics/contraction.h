// Which Generics are contractions (DESIGN §3.6): decided once, here, for the timing model and the numerics alike.
//
// A Generic whose axes are ROW and COL (parallel) and K (reduced by Sum), and whose body, once guards
// `pred ? x : 0` (either branch the constant 0) and constant factors are peeled off, is the product of two input
// slots, one read over (ROW, K) and the other over (K, COL), is C = A * B: linalg.generic's matmul, e.g. the flash
// fold's Q K^T and P V. The machine runs it on the matrix engine as MatmulTiles does (tt-metal's matmul_tiles):
// operands unpacked to the engine's source format at the target's fidelity, the factors as one eltwise multiply
// each over the result, a guard as a mask of the operand (or result) whose axes it reads. The simulator times it
// that way (sim/machine/stage_cost.cc) and the VM computes it that way (sim/vm/contraction_kernel.h), so the
// simulated time and the simulated values describe one machine.
//
// Masking an operand entry makes it zero; its product with a non-finite partner is then NaN where the lazy Select
// of the body would give 0. The hardware masks operands, and so does this model.
#ifndef SPATIAL_SEMANTICS_CONTRACTION_H_
#define SPATIAL_SEMANTICS_CONTRACTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "spatial/program.h"

namespace spatial {

enum class GuardSide : uint8_t { kA, kB, kOut };

// The product counts where `pred` holds (keep_when_true) or where it fails.
struct ContractionGuard {
  Pred pred;
  bool keep_when_true = true;
  GuardSide side = GuardSide::kOut;
};

struct Contraction {
  int a = -1;  // the input slot read over (ROW, K)
  int b = -1;  // the input slot read over (K, COL)
  int64_t rows = 1, cols = 1, k = 1;  // extents (an absent ROW or COL axis is 1)
  std::vector<double> factors;        // applied to the result innermost first
  std::vector<ContractionGuard> guards;
};

// The contraction `g` is, or nullopt. `num_slots` is the stage's input count.
std::optional<Contraction> RecognizeContraction(const Generic& g, int num_slots);

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_CONTRACTION_H_
