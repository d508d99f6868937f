#include "sim/vm/exact_model.h"

#include <algorithm>

#include "sim/vm/exact_math.h"

namespace spatial {
namespace {

class Exact final : public ValueModel {
 public:
  bool exact() const override { return true; }
  void StoreRound(Precision, double*, int64_t) const override {}
  double Arith(BodyOp op, double a, double b, Precision) const override { return vm_math::Binary(op, a, b); }
  double Sfpu(const SfpuKind& k, double x, Precision) const override { return vm_math::Sfpu(k, x); }
  void MatmulTile(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                  int64_t ldc, int64_t tr, int64_t tc, int64_t kk, Precision, MathFidelity) const override {
    // Every element is c + (a row . b column), the dot summed from 0 in k order, whatever b's layout, so the two
    // layouts give bit-identical results. Untransposed b is walked i-k-j into a row of partial dots (same
    // per-element order of operations, contiguous inner loop).
    constexpr int64_t kChunk = 256;
    double dot[kChunk];
    for (int64_t i = 0; i < tr; ++i) {
      const double* arow = a + i * lda;
      double* crow = c + i * ldc;
      if (transpose_b) {
        for (int64_t j = 0; j < tc; ++j) {
          const double* brow = b + j * ldb;
          double s = 0.0;
          for (int64_t k = 0; k < kk; ++k) s += arow[k] * brow[k];
          crow[j] += s;
        }
        continue;
      }
      for (int64_t j0 = 0; j0 < tc; j0 += kChunk) {
        const int64_t nj = std::min(kChunk, tc - j0);
        std::fill(dot, dot + nj, 0.0);
        for (int64_t k = 0; k < kk; ++k) {
          const double av = arow[k];
          const double* brow = b + k * ldb + j0;
          for (int64_t j = 0; j < nj; ++j) dot[j] += av * brow[j];
        }
        for (int64_t j = 0; j < nj; ++j) crow[j0 + j] += dot[j];
      }
    }
  }
};

}  // namespace

const ValueModel& ExactModel() {
  static const Exact kModel;
  return kModel;
}

}  // namespace spatial
