// The exact model's tile product (sim/vm/exact_model.cc): the register-blocked kernel of 32-column tiles must give
// the bits of the general loop — every element c + (a row . b column), the dot summed from 0 in k order — on
// arbitrary operands, where any change of summation order shows. A 32-column tile is four 8-column tiles (which
// take the general loop), lane by lane.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "sim/vm/exact_model.h"

namespace spatial {
namespace {

TEST(ExactMatmul, BlockedKernelMatchesTheGeneralLoop) {
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> any(-3.0, 3.0);
  const ValueModel& model = ExactModel();
  for (int rows : {32, 7, 1}) {
    for (int kk : {32, 13, 1}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << rows << " rows, k " << kk << ", transpose_b " << tb);
        std::vector<double> a(rows * kk), b(kk * 32), c0(rows * 32);
        for (double& v : a) v = any(rng);
        for (double& v : b) v = any(rng);
        for (double& v : c0) v = any(rng);
        const int64_t ldb = tb ? kk : 32;
        std::vector<double> got = c0, want = c0;
        model.MatmulTile(a.data(), kk, b.data(), ldb, tb, got.data(), 32, rows, 32, kk, Precision::kFp32,
                         MathFidelity::kDefault);
        for (int q = 0; q < 4; ++q) {
          const double* bq = tb ? b.data() + q * 8 * kk : b.data() + q * 8;
          model.MatmulTile(a.data(), kk, bq, ldb, tb, want.data() + q * 8, 32, rows, 8, kk, Precision::kFp32,
                           MathFidelity::kDefault);
        }
        for (size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], want[e]) << "element " << e;
      }
    }
  }
}

}  // namespace
}  // namespace spatial
