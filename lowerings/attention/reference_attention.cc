#include "lowerings/attention/reference_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

absl::Status Count(const char* what, const std::vector<double>& x, int64_t n) {
  if (static_cast<int64_t>(x.size()) == n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("attention ", what, " has ", x.size(), " values, expected ", n));
}

// Runs NaiveAttention on the named operands and shapes the result like the queries.
absl::StatusOr<TensorMap> Run(const AttentionShape& s, const std::string& out, const std::string& q_name,
                              const std::string& k_name, const std::string& v_name,
                              const std::optional<std::string>& p_name, const std::optional<std::string>& sinks_name,
                              const TensorMap& inputs) {
  const int64_t t = s.heads.rows, h = s.heads.per_row;
  const int64_t kv = s.widths.kv, hd = s.widths.hd, vd = s.widths.vd, l = s.cache.rows;
  ASSIGN_OR_RETURN(const TensorData* q, RefInputRows(inputs, q_name, t * h * hd, t, "attention"));
  ASSIGN_OR_RETURN(const TensorData* k, RefInputRows(inputs, k_name, l * kv * hd, l, "attention"));
  ASSIGN_OR_RETURN(const TensorData* v, RefInputRows(inputs, v_name, l * kv * vd, l, "attention"));
  std::optional<int64_t> position;
  if (p_name) {
    ASSIGN_OR_RETURN(const TensorData* p, RefInput(inputs, *p_name, 1, 1));
    RETURN_IF_ERROR(RefIntegral(*p, *p_name));
    position = static_cast<int64_t>(p->values[0]);
  }
  std::vector<double> sinks;
  if (sinks_name) {
    ASSIGN_OR_RETURN(const TensorData* sk, RefInputRows(inputs, *sinks_name, h, 1, "attention"));
    sinks = sk->values;
  }
  ASSIGN_OR_RETURN(std::vector<double> values, NaiveAttention(s, q->values, k->values, v->values, position, sinks));
  // Shaped like the queries: dense T x h*vd, or the flat row.
  const int64_t rows = q->rows == t ? t : 1;
  TensorData result = RefResult(rows, t * h * vd / rows, q->precision);
  result.values = std::move(values);
  TensorMap m;
  m.emplace(out, std::move(result));
  return m;
}

}  // namespace

absl::StatusOr<std::vector<double>> NaiveAttention(const AttentionShape& shape, const std::vector<double>& q,
                                                   const std::vector<double>& k, const std::vector<double>& v,
                                                   std::optional<int64_t> position, const std::vector<double>& sinks) {
  const QueryHeads& heads = shape.heads;
  const int64_t t = heads.rows, h = heads.per_row;
  const int64_t kv = shape.widths.kv, hd = shape.widths.hd, vd = shape.widths.vd;
  const int64_t l = shape.cache.rows;
  RETURN_IF_ERROR(Count("Q", q, t * h * hd));
  RETURN_IF_ERROR(Count("K", k, l * kv * hd));
  RETURN_IF_ERROR(Count("V", v, l * kv * vd));
  if (shape.sinks) RETURN_IF_ERROR(Count("sinks", sinks, h));
  // The first row's live length P, when there is one.
  std::optional<int64_t> p;
  if (shape.cache.limit) {
    if (shape.cache.limit->is_operand()) {
      if (!position) return absl::InvalidArgumentError("the attention's position operand has no value");
      p = *position;
    } else {
      p = shape.cache.limit->value;
    }
    if (*p < 1 || *p > BoundMax(l, t)) {
      return absl::InvalidArgumentError(absl::StrCat("attention position ", *p, " outside [1, ", BoundMax(l, t), "] (",
                                                     t, " query rows over a cache of ", l, ")"));
    }
  }
  std::vector<double> out(static_cast<size_t>(t * h * vd), 0.0);
  std::vector<double> scores(static_cast<size_t>(l));
  std::vector<char> live(static_cast<size_t>(l));
  for (int64_t r = 0; r < t; ++r) {
    // Row r's positions: below its limit and, windowed, at or past its window's first.
    const int64_t n = p ? *p + r : shape.cache.attended;
    const int64_t first = shape.cache.window ? shape.cache.window->first(n) - 1 : 0;
    for (int64_t i = 0; i < h; ++i) {
      const int64_t vh = r * h + i;
      const int64_t kvh = heads.kv_of(vh);
      if (kvh >= kv) {
        return absl::InvalidArgumentError(
            absl::StrCat("query head ", vh, " reads K/V head ", kvh, " of ", kv, " (", h, " heads per row)"));
      }
      const double* qv = q.data() + vh * hd;
      for (int64_t j = 0; j < l; ++j) {
        live[j] = j < n && j >= first;
        if (!live[j]) continue;
        const double* kj = k.data() + (j * kv + kvh) * hd;
        double dot = 0.0;
        for (int64_t e = 0; e < hd; ++e) dot += qv[e] * kj[e];
        double s = shape.widths.scale * dot;
        if (shape.widths.cap) s = *shape.widths.cap * std::tanh(s / *shape.widths.cap);
        scores[j] = s;
      }
      // The softmax, directly: its maximum over the live scores (and the sink), then the exponentials and their sum.
      double m = shape.sinks ? sinks[i] : -INFINITY;
      for (int64_t j = 0; j < l; ++j) {
        if (live[j]) m = std::max(m, scores[j]);
      }
      double den = shape.sinks ? std::exp(sinks[i] - m) : 0.0;
      double* o = out.data() + vh * vd;
      for (int64_t j = 0; j < l; ++j) {
        if (!live[j]) continue;
        const double w = std::exp(scores[j] - m);
        den += w;
        const double* vj = v.data() + (j * kv + kvh) * vd;
        for (int64_t c = 0; c < vd; ++c) o[c] += w * vj[c];
      }
      for (int64_t c = 0; c < vd; ++c) o[c] /= den;
    }
  }
  return out;
}

absl::StatusOr<TensorMap> ReferenceAttention(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(const AttentionShape s, AttentionShapeOf(spec));
  ASSIGN_OR_RETURN(const AttentionNames names, AttentionNamesOf(spec));
  std::optional<std::string> p_name;
  if (s.cache.limit && s.cache.limit->is_operand()) p_name = names.operand(s.cache.limit->value).name;
  std::optional<std::string> sinks_name;
  if (s.sinks) sinks_name = names.operand(*s.sinks).name;
  return Run(s, names.out, names.operand(0).name, names.operand(1).name, names.operand(2).name, p_name, sinks_name,
             inputs);
}

absl::StatusOr<TensorMap> ReferenceFullAttention(const proto::OpSpec& spec, const TensorMap& inputs) {
  const proto::FullAttentionSpec& f = spec.full_attention();
  if (f.t() < 1 || f.h() < 1 || f.hd() < 1) {
    return absl::InvalidArgumentError("a full attention with no positions, no heads or no head dimension");
  }
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "full_attention", 3));
  AttentionShape s;
  s.heads = QueryHeads{f.t(), f.h(), 1};
  s.widths = HeadWidths{f.h(), f.hd(), f.hd(), DefaultScale(f.hd()), std::nullopt};
  s.cache = Cache{f.t(), f.t(), std::nullopt, std::nullopt};
  s.tag = "full_attn";
  return Run(s, spec.out(), ops[0].name, ops[1].name, ops[2].name, std::nullopt, std::nullopt, inputs);
}

}  // namespace spatial
