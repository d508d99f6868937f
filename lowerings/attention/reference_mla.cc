// The op reference of a latent attention: the NAIVE form, not the absorbed one the lowering computes. Each head's
// keys and values are materialized from the cache as the model defines them — k[h, j] = [W_uk[h]^T c[j] | k_rope[j]],
// v[h, j] = W_uv[h]^T c[j] — and the head attends them by the attention reference (reference_attention.h), one
// head over its own K/V head. The absorbed form is the same sum in another order, so agreement checks the
// lowering's algebra, not only its arithmetic.
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/mla.h"
#include "lowerings/attention/reference_attention.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// y[0, n) += a * x[0, n), four doubles a vector (one ymm in the AVX2 clone). Always inlined, so it compiles for
// the ISA of the clone that calls it.
using V4 = double __attribute__((vector_size(32)));
__attribute__((always_inline)) inline void Axpy(double* y, const double* x, double a, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4 yv, xv;
    std::memcpy(&yv, y + i, sizeof(V4));
    std::memcpy(&xv, x + i, sizeof(V4));
    yv += xv * a;
    std::memcpy(y + i, &yv, sizeof(V4));
  }
  for (; i < n; ++i) y[i] += x[i] * a;
}

// Head h's keys and values at positions [0, n): k[j] = [W_uk^T c[j] | k_rope[j]] (nope + rope wide) and
// v[j] = W_uv^T c[j], from w_t (W_uk transposed, rank x nope) and uv (W_uv, rank x vd). Each is a sum over the latent
// row by row, so the inner loops run along contiguous rows (the AVX2 clone where the machine has it).
__attribute__((target_clones("avx2", "default"))) void Materialize(const double* cache, int64_t key,
                                                                   const double* w_t, const double* uv, int64_t nope,
                                                                   int64_t rope, int64_t rank, int64_t vd, int64_t n,
                                                                   double* k, double* v) {
  // Eight positions at a time, so each weight row read from memory serves eight of them.
  constexpr int64_t kBlock = 8;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t jn = std::min(kBlock, n - j0);
    for (int64_t jj = 0; jj < jn; ++jj) {
      std::fill(k + (j0 + jj) * (nope + rope), k + (j0 + jj) * (nope + rope) + nope, 0.0);
      std::fill(v + (j0 + jj) * vd, v + (j0 + jj + 1) * vd, 0.0);
    }
    for (int64_t r = 0; r < rank; ++r) {
      const double* wk = w_t + r * nope;
      const double* wv = uv + r * vd;
      for (int64_t jj = 0; jj < jn; ++jj) {
        const double cr = cache[(j0 + jj) * key + r];
        double* kj = k + (j0 + jj) * (nope + rope);
        double* vj = v + (j0 + jj) * vd;
        Axpy(kj, wk, cr, nope);
        Axpy(vj, wv, cr, vd);
      }
    }
    for (int64_t jj = 0; jj < jn; ++jj) {
      const double* c = cache + (j0 + jj) * key;
      std::copy(c + rank, c + rank + rope, k + (j0 + jj) * (nope + rope) + nope);
    }
  }
}

}  // namespace

absl::StatusOr<TensorMap> ReferenceMla(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(const MlaShape s, MlaShapeOf(spec));
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "mla", s.operands));
  const int64_t heads = s.heads, nope = s.nope, rope = s.rope, rank = s.rank, vd = s.vd;
  // The operands as the lowering declares them.
  const int64_t T = s.rows;
  ASSIGN_OR_RETURN(const TensorData* q_in, RefInput(inputs, ops[0].name, T, heads * s.q_every()));
  ASSIGN_OR_RETURN(const TensorData* uk_in, RefInput(inputs, ops[1].name, heads * nope, rank));
  ASSIGN_OR_RETURN(const TensorData* cache_in, RefInput(inputs, ops[2].name, s.l, s.key()));
  ASSIGN_OR_RETURN(const TensorData* uv_in, RefInput(inputs, ops[3].name, heads * rank, vd));
  const std::vector<double>* q = &q_in->values;
  const std::vector<double>* w_uk = &uk_in->values;
  const std::vector<double>* cache = &cache_in->values;
  const std::vector<double>* w_uv = &uv_in->values;
  // Row t attends the first P + t positions (a decode's one row its P).
  int64_t first = s.attended - (T - 1);
  if (s.limit) {
    ASSIGN_OR_RETURN(const TensorData* p, RefInput(inputs, ops[4].name, 1, 1));
    RETURN_IF_ERROR(RefIntegral(*p, ops[4].name));
    first = static_cast<int64_t>(p->values[0]);
    if (first < 1 || first + (T - 1) > s.l) {
      return absl::InvalidArgumentError(absl::StrCat("latent attention position ", first, " outside [1, ",
                                                     s.l - (T - 1), "] (a cache of ", s.l, ", ", T, " rows)"));
    }
  }
  const int64_t n = first + (T - 1);
  // One head attending its own materialized keys and values over a row's live positions.
  AttentionShape one;
  one.heads = QueryHeads{1, 1, 1};
  one.widths = HeadWidths{1, s.q_every(), vd, s.scale, std::nullopt};
  std::vector<double> out(static_cast<size_t>(T * heads * vd));
  // The heads are independent: they split over the machine's threads, each head's sums in the same order whichever
  // thread computes it, so the result does not depend on the split.
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::min<int64_t>(heads, 8));
  std::vector<absl::Status> failed(static_cast<size_t>(threads));
  auto run = [&](int64_t worker) {
    std::vector<double> k(static_cast<size_t>(n * s.q_every()));
    std::vector<double> v(static_cast<size_t>(n * vd));
    std::vector<double> w_t(static_cast<size_t>(rank * nope));  // head h's W_uk, transposed: rank x nope
    for (int64_t h = worker; h < heads; h += threads) {
      const double* uk = w_uk->data() + h * nope * rank;
      for (int64_t i = 0; i < nope; ++i) {
        for (int64_t r = 0; r < rank; ++r) w_t[r * nope + i] = uk[i * rank + r];
      }
      Materialize(cache->data(), s.key(), w_t.data(), w_uv->data() + h * rank * vd, nope, rope, rank, vd, n,
                  k.data(), v.data());
      for (int64_t t = 0; t < T; ++t) {
        const int64_t live = first + t;
        AttentionShape row = one;
        row.cache = Cache{live, live, std::nullopt, std::nullopt};
        const int64_t q0 = (t * heads + h) * s.q_every();
        const std::vector<double> qh(q->begin() + q0, q->begin() + q0 + s.q_every());
        const std::vector<double> kt(k.begin(), k.begin() + live * s.q_every());
        const std::vector<double> vt(v.begin(), v.begin() + live * vd);
        absl::StatusOr<std::vector<double>> oh = NaiveAttention(row, qh, kt, vt, std::nullopt, {});
        if (!oh.ok()) {
          failed[static_cast<size_t>(worker)] = oh.status();
          return;
        }
        std::copy(oh->begin(), oh->end(), out.begin() + (t * heads + h) * vd);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < threads; ++w) pool.emplace_back(run, w);
  run(0);
  for (std::thread& th : pool) th.join();
  for (const absl::Status& st : failed) RETURN_IF_ERROR(st);
  TensorData result = RefResult(T, heads * vd, q_in->precision);
  result.values = std::move(out);
  TensorMap m;
  m.emplace(spec.out(), std::move(result));
  return m;
}

}  // namespace spatial
