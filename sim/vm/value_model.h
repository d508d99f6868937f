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

  // Rounds a rows x cols tensor's flat row-major values, in place, a row at a time: a block format's groups of 16
  // (bfp8_b, bfp4_b) start at column 0 of every row, as a tile's face rows do, so a row whose width is not a
  // multiple of 16 never shares an exponent with the next row. Every tensor-wide rounding goes through here.
  void StoreRoundRows(Precision p, double* v, int64_t rows, int64_t cols) const {
    for (int64_t r = 0; r < rows; ++r) StoreRound(p, v + r * cols, cols);
  }

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

  // A MatmulTiles stage's block of t x t tiles: for each of the m x n output tiles in row-major order, its k tile
  // products in k order, each as MatmulTile computes it. The pages hold their tiles side by side in one tile row:
  // A tile (i, kt) at column (i * k + kt) * t of a page lda wide, B tile (kt, j) at (kt * n + j) * t
  // (transpose_b: (j * k + kt) * t), C tile (i, j) at (i * n + j) * t. The default is exactly those MatmulTile
  // calls; a model may override it to prepare each operand tile once for the block (the same bits).
  virtual void MatmulBlock(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                           int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t t, Precision acc,
                           MathFidelity fidelity) const {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t kt = 0; kt < k; ++kt) {
          const int64_t bt = transpose_b ? j * k + kt : kt * n + j;
          MatmulTile(a + (i * k + kt) * t, lda, b + bt * t, ldb, transpose_b, c + (i * n + j) * t, ldc, t, t, t, acc,
                     fidelity);
        }
      }
    }
  }
};

}  // namespace spatial

#endif  // SIM_VM_VALUE_MODEL_H_
