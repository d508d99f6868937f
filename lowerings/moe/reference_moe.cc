// The op reference of a mixture of experts: the naive f64 MoE of lowerings/moe/moe.h, every expert's FFN computed
// in plain loops from the spec, independent of the lowering's sections.
//
// The choice of experts, stated: a score is compared as max(score, −1e30) after the selection bias where there is
// one (a NaN scores −1e30; a softmax's scores are used as they are — one NaN logit makes all of them NaN); a round
// picks the first maximum among the scores that are not NaN (the first expert when all are NaN), an earlier pick and
// an expert outside the kept groups scoring −1e30 less. A group scores the sum of its two best selection scores (its
// one, when it has one).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/moe/moe.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The values of input `name`, which must hold `n` of them (its rows x cols is the lowering's layout).
absl::StatusOr<const std::vector<double>*> Values(const TensorMap& inputs, const std::string& name, int64_t n) {
  auto it = inputs.find(name);
  if (it == inputs.end()) return absl::NotFoundError(absl::StrCat("no input named '", name, "'"));
  if (static_cast<int64_t>(it->second.values.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' has ", it->second.values.size(),
                                                   " values; the mixture reads ", n));
  }
  return &it->second.values;
}

// The first maximum of v[0, n) among the values that are not NaN; 0 when all are.
int64_t FirstMax(const std::vector<double>& v) {
  int64_t best = 0;
  for (int64_t i = 1; i < static_cast<int64_t>(v.size()); ++i) {
    if (!std::isnan(v[i]) && (std::isnan(v[best]) || v[i] > v[best])) best = i;
  }
  return best;
}

// `rounds` picks over `scores`, each masking the earlier ones by −1e30.
std::vector<int64_t> Picks(const std::vector<double>& scores, int64_t rounds) {
  std::vector<int64_t> picks;
  std::vector<double> left = scores;
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t p = FirstMax(left);
    picks.push_back(p);
    left[p] = scores[p] + kMoeMasked;
  }
  return picks;
}

double SiluOf(double v) { return v / (1.0 + std::exp(-v)); }

}  // namespace

absl::StatusOr<TensorMap> ReferenceMoe(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(MoeOperands layout, CheckMoe(spec));
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "moe", layout.count));
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), dff = m.dff(), ne = m.ne(), k = m.k();
  // A prefill's T tokens are T independent rows: each is routed and run as one token is.
  const int64_t tokens = std::max<int64_t>(m.tokens(), 1);
  ASSIGN_OR_RETURN(const std::vector<double>* xs, Values(inputs, ops[0].name, tokens * d));
  ASSIGN_OR_RETURN(const std::vector<double>* wr, Values(inputs, ops[1].name, d * ne));
  ASSIGN_OR_RETURN(const std::vector<double>* wg, Values(inputs, ops[2].name, ne * dff * d));
  ASSIGN_OR_RETURN(const std::vector<double>* wu, Values(inputs, ops[3].name, ne * dff * d));
  ASSIGN_OR_RETURN(const std::vector<double>* wd, Values(inputs, ops[4].name, ne * d * dff));
  auto optional = [&](int at, int64_t n) -> absl::StatusOr<const std::vector<double>*> {
    if (at < 0) return nullptr;
    return Values(inputs, ops[at].name, n);
  };
  ASSIGN_OR_RETURN(const std::vector<double>* rb, optional(layout.router_bias, ne));
  ASSIGN_OR_RETURN(const std::vector<double>* gb, optional(layout.gate_bias, ne * dff));
  ASSIGN_OR_RETURN(const std::vector<double>* ub, optional(layout.up_bias, ne * dff));
  ASSIGN_OR_RETURN(const std::vector<double>* db, optional(layout.down_bias, ne * d));
  ASSIGN_OR_RETURN(const std::vector<double>* sb, optional(layout.selection_bias, ne));
  const std::vector<double>* sg = nullptr;
  const std::vector<double>* su = nullptr;
  const std::vector<double>* sd = nullptr;
  const std::vector<double>* sw = nullptr;
  if (layout.shared_gate >= 0) {
    const int64_t sdff = m.shared_dff();
    ASSIGN_OR_RETURN(sg, Values(inputs, ops[layout.shared_gate].name, d * sdff));
    ASSIGN_OR_RETURN(su, Values(inputs, ops[layout.shared_gate + 1].name, d * sdff));
    ASSIGN_OR_RETURN(sd, Values(inputs, ops[layout.shared_gate + 2].name, sdff * d));
    if (layout.shared_weight >= 0) {
      ASSIGN_OR_RETURN(sw, Values(inputs, ops[layout.shared_weight].name, d));
    }
  }
  TensorData out = RefResult(tokens, d, Precision::kFp32);
  for (int64_t token = 0; token < tokens; ++token) {
    const std::vector<double> x_row(xs->begin() + token * d, xs->begin() + (token + 1) * d);
    const std::vector<double>* x = &x_row;
    double* y_row = out.values.data() + token * d;

    // The router and its scores.
    std::vector<double> p(ne);
    for (int64_t e = 0; e < ne; ++e) {
      double l = 0.0;
      for (int64_t t = 0; t < d; ++t) l += (*x)[t] * (*wr)[t * ne + e];
      p[e] = rb ? l + (*rb)[e] : l;
    }
    if (m.score() == proto::MoeSpec::SOFTMAX) {
      double mx = p[0];
      for (double v : p) mx = std::fmax(mx, v);
      double z = 0.0;
      for (double& v : p) z += (v = std::exp(v - mx));
      for (double& v : p) v /= z;
    } else {
      for (double& v : p) v = 1.0 / (1.0 + std::exp(-v));
    }
    // What the rounds choose by.
    std::vector<double> sel = p;
    for (int64_t e = 0; e < ne; ++e) {
      if (sb) {
        sel[e] = std::fmax(p[e] + (*sb)[e], kMoeMasked);
      } else if (m.score() == proto::MoeSpec::SIGMOID) {
        sel[e] = std::fmax(p[e], kMoeMasked);
      }
    }
    if (m.group_count() > 0) {
      const int64_t count = m.group_count(), per = ne / count;
      std::vector<double> group(count);
      for (int64_t g = 0; g < count; ++g) {
        std::vector<double> members(sel.begin() + g * per, sel.begin() + (g + 1) * per);
        const int64_t best = FirstMax(members);
        double score = members[best];
        if (per > 1) {
          members[best] = kMoeMasked;
          double second = members[0];
          for (double v : members) second = std::fmax(second, v);
          score += second;
        }
        group[g] = score;
      }
      std::vector<double> kept(ne, kMoeMasked);
      for (int64_t g : Picks(group, m.group_kept())) {
        for (int64_t c = g * per; c < (g + 1) * per; ++c) kept[c] = 0.0;
      }
      for (int64_t e = 0; e < ne; ++e) sel[e] += kept[e];
    }

    // The experts.
    std::vector<double> acc(d, 0.0);
    double wsum = 0.0;
    for (int64_t b : Picks(sel, k)) {
      const double w = p[b] * MoeRoundScale(m);
      wsum += w;
      std::vector<double> xin(*x);
      if (m.weigh_inputs()) {
        for (double& v : xin) v *= w;
      }
      std::vector<double> h(dff);
      for (int64_t o = 0; o < dff; ++o) {
        double g = 0.0, u = 0.0;
        for (int64_t t = 0; t < d; ++t) {
          g += xin[t] * (*wg)[(b * dff + o) * d + t];
          u += xin[t] * (*wu)[(b * dff + o) * d + t];
        }
        if (gb) g += (*gb)[b * dff + o];
        if (ub) u += (*ub)[b * dff + o];
        if (m.act() == proto::MoeSpec::CLAMPED_SWIGLU) {
          const double lim = m.clamp_limit(), a = m.clamp_slope();
          const double gc = std::fmin(g, lim);
          const double uc = std::fmax(std::fmin(u, lim), -lim);
          h[o] = gc / (1.0 + std::exp(-a * gc)) * (uc + 1.0);
        } else {
          h[o] = SiluOf(g) * u;
        }
      }
      for (int64_t o = 0; o < d; ++o) {
        double y = 0.0;
        for (int64_t t = 0; t < dff; ++t) y += h[t] * (*wd)[(b * d + o) * dff + t];
        if (db) y += (*db)[b * d + o];
        acc[o] += m.weigh_inputs() ? y : w * y;
      }
    }
    for (int64_t o = 0; o < d; ++o) {
      double v = acc[o];
      if (m.renormalize()) {
        v /= MoeSumCanClamp(m) ? std::fmax(wsum, kMoeSumFloor) : wsum;
        if (m.scale() != 0.0) v *= m.scale();
      }
      y_row[o] = v;
    }
    // The shared experts: a plain SwiGLU of x, added unweighted (or, with shared_gate, weighed by its gate).
    if (sg != nullptr) {
      const int64_t sdff = m.shared_dff();
      std::vector<double> h(sdff);
      for (int64_t o = 0; o < sdff; ++o) {
        double g = 0.0, u = 0.0;
        for (int64_t t = 0; t < d; ++t) {
          g += (*x)[t] * (*sg)[t * sdff + o];
          u += (*x)[t] * (*su)[t * sdff + o];
        }
        h[o] = SiluOf(g) * u;
      }
      // Qwen3-Next: weighed by sigmoid(x . w).
      double weight = 1.0;
      if (sw != nullptr) {
        double logit = 0.0;
        for (int64_t t = 0; t < d; ++t) logit += (*x)[t] * (*sw)[t];
        weight = 1.0 / (1.0 + std::exp(-logit));
      }
      for (int64_t o = 0; o < d; ++o) {
        double y = 0.0;
        for (int64_t t = 0; t < sdff; ++t) y += h[t] * (*sd)[t * d + o];
        y_row[o] += weight * y;
      }
    }
  }
  TensorMap result;
  result[spec.out()] = std::move(out);
  return result;
}

}  // namespace spatial
