// The op reference of RoPE-NEOX (DESIGN §5): the rotation in f64, straight from the spec.
//
// Head h of query row y = h / (h_total / rows) sits at position ρ = y (no cache) or P − 1 + y (reading a cache at P).
// With theta > 0 the reference computes its own angles, ρ·theta^(−i/half) for pair i < half (the HF/Qwen rotary
// inv_freq over a rotary width of 2·half), and ignores the operand tables: it judges the program against the real
// rotation, not against the tables it was handed. With theta = 0 the angles are the tables' (rc, rs row ρ).
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<TensorMap> ReferenceRope(const proto::OpSpec& spec, const TensorMap& inputs) {
  const proto::RopeSpec& r = spec.rope();
  const int64_t heads = r.h(), hd = r.hd(), half = r.half(), rows = r.rows();
  if (heads <= 0 || hd <= 0 || half <= 0 || 2 * half > hd || rows <= 0 || heads % rows != 0) {
    return absl::InvalidArgumentError("rope: the rotated width must fit the head, and the rows divide the heads");
  }
  if (!std::isfinite(r.theta()) || r.theta() < 0) return absl::InvalidArgumentError("rope.theta is not a base");
  const bool from = r.has_from() && r.from().kind_case() != proto::RowIndex::KIND_NOT_SET;
  if (spec.operands_size() < (from && r.from().has_named() ? 4 : 3)) {
    return absl::InvalidArgumentError("rope takes q, rc, rs (and the position)");
  }
  const int64_t n = heads * hd;
  // A block of rows may be read flat or as the rows x (heads / rows)·hd matrix (rope.h's dense form).
  ASSIGN_OR_RETURN(const TensorData* q, RefInputRows(inputs, spec.operands(0).name(), n, rows, "rope"));
  int64_t first = 0;  // the block's first position, 0-based
  const int64_t table_rows = from ? r.cache() : rows;
  if (from) {
    int64_t p = r.from().literal();
    if (r.from().has_named()) {
      ASSIGN_OR_RETURN(const TensorData* pt, RefInput(inputs, r.from().named(), 1, 1));
      const double v = pt->values[0];
      if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) > 9e15) {
        return absl::InvalidArgumentError(absl::StrCat("rope position '", r.from().named(), "' is ", v));
      }
      p = static_cast<int64_t>(v);
    }
    if (p < 1 || p + rows - 1 > r.cache()) {
      return absl::OutOfRangeError(
          absl::StrCat("rope block of ", rows, " rows at position ", p, " leaves its cache of ", r.cache()));
    }
    first = p - 1;
  }
  const TensorData* rc = nullptr;
  const TensorData* rs = nullptr;
  if (r.theta() == 0) {
    ASSIGN_OR_RETURN(rc, RefInput(inputs, spec.operands(1).name(), 1, table_rows * half));
    ASSIGN_OR_RETURN(rs, RefInput(inputs, spec.operands(2).name(), 1, table_rows * half));
  }
  const int64_t per_row = heads / rows;
  TensorData y = RefResult(q->rows, q->cols, q->precision);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t rho = first + h / per_row;
    const double* x = q->values.data() + h * hd;
    double* out = y.values.data() + h * hd;
    for (int64_t i = 0; i < half; ++i) {
      double c, s;
      if (rc) {
        c = rc->values[rho * half + i];
        s = rs->values[rho * half + i];
      } else {
        const double angle = static_cast<double>(rho) * std::pow(r.theta(), -static_cast<double>(i) / half);
        c = std::cos(angle);
        s = std::sin(angle);
      }
      out[i] = x[i] * c - x[i + half] * s;
      out[i + half] = x[i] * s + x[i + half] * c;
    }
    for (int64_t i = 2 * half; i < hd; ++i) out[i] = x[i];
  }
  return TensorMap{{spec.out(), std::move(y)}};
}

}  // namespace spatial
