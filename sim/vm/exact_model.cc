#include "sim/vm/exact_model.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/vm/exact_math.h"

namespace spatial {
namespace vm_kernel {

// c[i][0..32) += (a row i . b columns), each dot summed from 0 in k order: the tile product below for 32 columns of
// a k-major b, register blocked — the row's 32 partial dots are eight 4-double vectors held across k (lane j only
// ever combines column j, so every sum is the scalar one). One ymm a vector with AVX2, two xmm elsewhere;
// target_clones picks at load time. Named vectors, not arrays (GCC keeps arrays of vectors in memory).
using D4 = double __attribute__((vector_size(32)));

__attribute__((target_clones("avx2", "default"))) void RowsTimes32(const double* a, int64_t lda, const double* b,
                                                                   int64_t ldb, double* c, int64_t ldc, int64_t tr,
                                                                   int64_t kk) {
  for (int64_t i = 0; i < tr; ++i) {
    const double* __restrict arow = a + i * lda;
    D4 t0 = {}, t1 = {}, t2 = {}, t3 = {}, t4 = {}, t5 = {}, t6 = {}, t7 = {};
    for (int64_t k = 0; k < kk; ++k) {
      const double* __restrict bk = b + k * ldb;
      const double x = arow[k];
      D4 v;
      std::memcpy(&v, bk, sizeof v);
      t0 += x * v;
      std::memcpy(&v, bk + 4, sizeof v);
      t1 += x * v;
      std::memcpy(&v, bk + 8, sizeof v);
      t2 += x * v;
      std::memcpy(&v, bk + 12, sizeof v);
      t3 += x * v;
      std::memcpy(&v, bk + 16, sizeof v);
      t4 += x * v;
      std::memcpy(&v, bk + 20, sizeof v);
      t5 += x * v;
      std::memcpy(&v, bk + 24, sizeof v);
      t6 += x * v;
      std::memcpy(&v, bk + 28, sizeof v);
      t7 += x * v;
    }
    double* crow = c + i * ldc;
    const D4 t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    for (int q = 0; q < 8; ++q) {
      D4 cv;
      std::memcpy(&cv, crow + 4 * q, sizeof cv);
      cv += t[q];
      std::memcpy(crow + 4 * q, &cv, sizeof cv);
    }
  }
}

}  // namespace vm_kernel

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
    if (tc == 32) {
      if (!transpose_b) {
        vm_kernel::RowsTimes32(a, lda, b, ldb, c, ldc, tr, kk);
        return;
      }
      // b's 32 rows of kk to k-major, an exact copy, so the columns are contiguous.
      thread_local std::vector<double> bk;
      bk.resize(static_cast<size_t>(kk * 32));
      for (int64_t j = 0; j < 32; ++j) {
        for (int64_t k = 0; k < kk; ++k) bk[static_cast<size_t>(k * 32 + j)] = b[j * ldb + k];
      }
      vm_kernel::RowsTimes32(a, lda, bk.data(), 32, c, ldc, tr, kk);
      return;
    }
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
