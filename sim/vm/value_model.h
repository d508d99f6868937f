// How values are computed and stored: the one seam between the f64 reference VM and the simulator's
// tile-accurate numerics. The VM runs a program's meaning (DESIGN §3) and asks the model only how arithmetic
// rounds; the f64 model (ExactModel) is the identity, the target's model (sim/numerics) rounds where the
// datapath rounds.
#ifndef SIM_VM_VALUE_MODEL_H_
#define SIM_VM_VALUE_MODEL_H_

#include <cstdint>

#include "spatial/body.h"
#include "spatial/precision.h"
#include "spatial/program.h"

namespace spatial {

class ValueModel {
 public:
  virtual ~ValueModel() = default;

  // True for the exact f64 model: the VM may then take its fast path and never call the hooks below for
  // arithmetic (it still never rounds).
  virtual bool exact() const = 0;

  // Rounds `n` values written into a buffer page or a tensor of precision `p`, in place.
  virtual void StoreRound(Precision p, double* v, int64_t n) const = 0;

  // One binary operation of a Generic body (kAdd, kSub, kMul, kMin, kMax, kFloorDiv) on the compute datapath
  // whose precision is `acc` (the section's accumulator precision).
  virtual double Arith(BodyOp op, double a, double b, Precision acc) const = 0;

  // One transform on the vector engine.
  virtual double Sfpu(const SfpuKind& k, double x, Precision acc) const = 0;

  // c[tr x tc] (+)= a[tr x kk] * b[kk x tc] for one tile pair, all row-major with the given row strides;
  // b is read transposed (b[j][k]) when transpose_b. The accumulation is at precision `acc`.
  virtual void MatmulTile(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                          int64_t ldc, int64_t tr, int64_t tc, int64_t kk, Precision acc,
                          MathFidelity fidelity) const = 0;
};

}  // namespace spatial

#endif  // SIM_VM_VALUE_MODEL_H_
