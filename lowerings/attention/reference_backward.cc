#include "lowerings/attention/reference_backward.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

double Dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}

// Row t, head i's scaled scores over its live positions.
std::vector<double> Scores(const BackwardShape& s, const std::vector<double>& q, const std::vector<double>& k,
                           int64_t t, int64_t i) {
  const int64_t x = i / s.group();
  const double* qi = q.data() + (t * s.h + i) * s.hd;
  std::vector<double> sc(static_cast<size_t>(std::max<int64_t>(s.Limit(t), 0)));
  for (size_t j = 0; j < sc.size(); ++j) {
    sc[j] = s.scale * Dot(qi, k.data() + (static_cast<int64_t>(j) * s.kv + x) * s.hd, s.hd);
  }
  return sc;
}

}  // namespace

ForwardRows BackwardForward(const BackwardShape& s, const std::vector<double>& q, const std::vector<double>& k,
                            const std::vector<double>& v) {
  ForwardRows f{std::vector<double>(static_cast<size_t>(s.rows * s.h * s.vd), 0.0),
                std::vector<double>(static_cast<size_t>(s.rows * s.h), 0.0)};
  for (int64_t t = 0; t < s.rows; ++t) {
    for (int64_t i = 0; i < s.h; ++i) {
      const std::vector<double> sc = Scores(s, q, k, t, i);
      if (sc.empty()) continue;
      const double m = *std::max_element(sc.begin(), sc.end());
      double sum = 0.0;
      for (double x : sc) sum += std::exp(x - m);
      const double lse = m + std::log(sum);
      f.lse[t * s.h + i] = lse;
      double* o = f.o.data() + (t * s.h + i) * s.vd;
      for (size_t j = 0; j < sc.size(); ++j) {
        const double p = std::exp(sc[j] - lse);
        const double* vj = v.data() + (static_cast<int64_t>(j) * s.kv + i / s.group()) * s.vd;
        for (int64_t c = 0; c < s.vd; ++c) o[c] += p * vj[c];
      }
    }
  }
  return f;
}

Gradients BackwardDirect(const BackwardShape& s, const std::vector<double>& q, const std::vector<double>& k,
                         const std::vector<double>& v, const std::vector<double>& o, const std::vector<double>& d_o,
                         const std::vector<double>& lse) {
  Gradients g{std::vector<double>(q.size(), 0.0), std::vector<double>(k.size(), 0.0),
              std::vector<double>(v.size(), 0.0)};
  for (int64_t t = 0; t < s.rows; ++t) {
    for (int64_t i = 0; i < s.h; ++i) {
      const int64_t x = i / s.group();
      const std::vector<double> sc = Scores(s, q, k, t, i);
      const double* dout = d_o.data() + (t * s.h + i) * s.vd;
      const double* qi = q.data() + (t * s.h + i) * s.hd;
      const double d = Dot(dout, o.data() + (t * s.h + i) * s.vd, s.vd);
      double* dq = g.dq.data() + (t * s.h + i) * s.hd;
      for (size_t jj = 0; jj < sc.size(); ++jj) {
        const int64_t j = static_cast<int64_t>(jj);
        const double p = std::exp(sc[jj] - lse[t * s.h + i]);
        const double dp = Dot(dout, v.data() + (j * s.kv + x) * s.vd, s.vd);
        const double ds = p * (dp - d);
        const double* kj = k.data() + (j * s.kv + x) * s.hd;
        double* dk = g.dk.data() + (j * s.kv + x) * s.hd;
        double* dv = g.dv.data() + (j * s.kv + x) * s.vd;
        for (int64_t e = 0; e < s.hd; ++e) {
          dq[e] += s.scale * ds * kj[e];
          dk[e] += s.scale * ds * qi[e];
        }
        for (int64_t c = 0; c < s.vd; ++c) dv[c] += p * dout[c];
      }
    }
  }
  return g;
}

absl::StatusOr<TensorMap> ReferenceAttentionBackward(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(const BackwardShape s, BackwardShapeOf(spec));
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "attention_backward", 6));
  ASSIGN_OR_RETURN(const TensorData* q, RefInput(inputs, ops[0].name, s.rows, s.h * s.hd));
  ASSIGN_OR_RETURN(const TensorData* k, RefInput(inputs, ops[1].name, s.l, s.kv * s.hd));
  ASSIGN_OR_RETURN(const TensorData* v, RefInput(inputs, ops[2].name, s.l, s.kv * s.vd));
  ASSIGN_OR_RETURN(const TensorData* o, RefInput(inputs, ops[3].name, s.rows, s.h * s.vd));
  ASSIGN_OR_RETURN(const TensorData* d_o, RefInput(inputs, ops[4].name, s.rows, s.h * s.vd));
  ASSIGN_OR_RETURN(const TensorData* lse, RefInput(inputs, ops[5].name, s.rows, s.h));
  Gradients g = BackwardDirect(s, q->values, k->values, v->values, o->values, d_o->values, lse->values);
  TensorMap m;
  auto put = [&](std::string name, int64_t rows, int64_t cols, std::vector<double> values) {
    TensorData r = RefResult(rows, cols, q->precision);
    r.values = std::move(values);
    m.emplace(std::move(name), std::move(r));
  };
  put(spec.out(), s.rows, s.h * s.hd, std::move(g.dq));
  put(absl::StrCat(spec.out(), "_dk"), s.l, s.kv * s.hd, std::move(g.dk));
  put(absl::StrCat(spec.out(), "_dv"), s.l, s.kv * s.vd, std::move(g.dv));
  return m;
}

}  // namespace spatial
