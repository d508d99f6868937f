// The exact integer reference of the LUT attention (lut.h), written straight from the spec's math — never through the
// program's sections: per head, the scores over the attended positions, their maximum, each position's table weight,
// and the floored weighted mean of the values.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/lut.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

int64_t FloorDivI(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// a >> by, arithmetic: floor(a / 2^by).
int64_t ShrI(int64_t a, int64_t by) {
  if (by >= 63) return a < 0 ? -1 : 0;
  return a >> by;  // C++20: arithmetic on signed values
}

absl::StatusOr<std::vector<int64_t>> Ints(const TensorMap& inputs, const std::string& name, int64_t rows,
                                          int64_t cols) {
  ASSIGN_OR_RETURN(const TensorData* d, RefInput(inputs, name, rows, cols));
  RETURN_IF_ERROR(RefIntegral(*d, name));
  std::vector<int64_t> out(d->values.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(d->values[i]);
  return out;
}

}  // namespace

absl::StatusOr<TensorMap> ReferenceLutAttention(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(const LutShape s, LutShapeOf(spec));
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "lut_attention", s.named ? 5 : 4));
  ASSIGN_OR_RETURN(const std::vector<int64_t> q, Ints(inputs, ops[0].name, 1, s.h * s.hd));
  ASSIGN_OR_RETURN(const std::vector<int64_t> k, Ints(inputs, ops[1].name, 1, s.l * s.kv * s.hd));
  ASSIGN_OR_RETURN(const std::vector<int64_t> v, Ints(inputs, ops[2].name, 1, s.l * s.kv * s.hd));
  ASSIGN_OR_RETURN(const std::vector<int64_t> e, Ints(inputs, ops[3].name, 1, s.n));
  // The positions live: the first P of the attended ones.
  int64_t live = s.attended;
  if (s.named) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> p, Ints(inputs, ops[4].name, 1, 1));
    if (p[0] < 1 || p[0] > s.l) {
      return absl::InvalidArgumentError(absl::StrCat("LUT attention position ", p[0], " outside [1, ", s.l, "]"));
    }
    live = p[0];
  }
  // The context rides the integer datapath: int32 on every target that lowers it.
  TensorData result = RefResult(1, s.h * s.hd, Precision::kInt32);
  std::vector<int64_t> score(static_cast<size_t>(live)), weight(static_cast<size_t>(live));
  for (int64_t head = 0; head < s.h; ++head) {
    const int64_t kvh = head / s.group;
    for (int64_t j = 0; j < live; ++j) {
      int64_t dot = 0;
      for (int64_t x = 0; x < s.hd; ++x) dot += q[head * s.hd + x] * k[(j * s.kv + kvh) * s.hd + x];
      score[j] = dot;
    }
    const int64_t mx = *std::max_element(score.begin(), score.end());
    int64_t den = 0;
    for (int64_t j = 0; j < live; ++j) {
      const int64_t idx = std::clamp<int64_t>(ShrI((mx - score[j]) * s.m, s.s), 0, s.n - 1);
      weight[j] = e[idx];
      den += weight[j];
    }
    if (den == 0) {
      return absl::InvalidArgumentError(absl::StrCat("LUT attention head ", head, " has weights summing to 0"));
    }
    for (int64_t x = 0; x < s.hd; ++x) {
      int64_t num = 0;
      for (int64_t j = 0; j < live; ++j) num += weight[j] * v[(j * s.kv + kvh) * s.hd + x];
      result.values[head * s.hd + x] = static_cast<double>(FloorDivI(num, den));
    }
  }
  TensorMap m;
  m.emplace(spec.out(), std::move(result));
  return m;
}

}  // namespace spatial
