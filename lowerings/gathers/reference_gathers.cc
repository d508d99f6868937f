// The op references of the gathers, row writes and argmax (DESIGN §5): their math in f64, straight from the spec.
// Tables are shaped as the lowerings declare them: a dense table rows x cols, any other flat 1 x rows*cols; a named
// index is a 1 x 1 input holding the 1-based row.
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The 1-based index of a spec: the literal, or the value of its 1 x 1 operand (an integer, or an error).
absl::StatusOr<int64_t> IndexValue(const proto::RowIndex& index, const TensorMap& inputs, const std::string& kind) {
  switch (index.kind_case()) {
    case proto::RowIndex::kLiteral:
      return index.literal();
    case proto::RowIndex::kNamed: {
      ASSIGN_OR_RETURN(const TensorData* i, RefInput(inputs, index.named(), 1, 1));
      const double v = i->values[0];
      if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) > 9007199254740992.0) {
        return absl::InvalidArgumentError(absl::StrCat(kind, " index '", index.named(), "' is ", v, ", not a row"));
      }
      return static_cast<int64_t>(v);
    }
    case proto::RowIndex::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(kind, ".index is unset"));
}

absl::Status Positive(const std::string& kind, std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes) {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(kind, " has a size that is not positive (", v, ")"));
  }
  return absl::OkStatus();
}

// A row outside [1, rows] has no values: every tier faults there, and so does the reference.
absl::Status InTable(const std::string& kind, int64_t row, int64_t rows) {
  if (row >= 1 && row <= rows) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(kind, " reads row ", row, " of a ", rows, "-row table"));
}

}  // namespace

absl::StatusOr<TensorMap> ReferenceRowGather(const proto::OpSpec& spec, const TensorMap& inputs) {
  const proto::RowGatherSpec& g = spec.row_gather();
  RETURN_IF_ERROR(Positive("row_gather", {g.rows(), g.cols()}));
  if (spec.operands_size() < 1) return absl::InvalidArgumentError("row_gather names no table");
  const int64_t rows = g.rows(), cols = g.cols();
  ASSIGN_OR_RETURN(const TensorData* t,
                   RefInput(inputs, spec.operands(0).name(), g.dense() ? rows : 1, g.dense() ? cols : rows * cols));
  ASSIGN_OR_RETURN(int64_t i, IndexValue(g.index(), inputs, "row_gather"));
  RETURN_IF_ERROR(InTable("row_gather", i, rows));
  TensorData x = RefResult(1, cols, t->precision);
  for (int64_t j = 0; j < cols; ++j) x.values[j] = t->values[(i - 1) * cols + j];
  return TensorMap{{spec.out(), std::move(x)}};
}

absl::StatusOr<TensorMap> ReferenceRowsGather(const proto::OpSpec& spec, const TensorMap& inputs) {
  const proto::RowsGatherSpec& g = spec.rows_gather();
  RETURN_IF_ERROR(Positive("rows_gather", {g.rows(), g.cols(), g.count()}));
  if (spec.operands_size() < 2) return absl::InvalidArgumentError("rows_gather takes a table and its indices");
  const int64_t rows = g.rows(), cols = g.cols(), n = g.count();
  ASSIGN_OR_RETURN(const TensorData* t, RefInput(inputs, spec.operands(0).name(), 1, rows * cols));
  ASSIGN_OR_RETURN(const TensorData* idx, RefInput(inputs, spec.operands(1).name(), 1, n));
  RETURN_IF_ERROR(RefIntegral(*idx, spec.operands(1).name()));
  TensorData x = RefResult(1, n * cols, t->precision);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = static_cast<int64_t>(idx->values[k]);
    RETURN_IF_ERROR(InTable("rows_gather", i, rows));
    for (int64_t j = 0; j < cols; ++j) x.values[k * cols + j] = t->values[(i - 1) * cols + j];
  }
  return TensorMap{{spec.out(), std::move(x)}};
}

absl::StatusOr<TensorMap> ReferenceSetRow(const proto::OpSpec& spec, const TensorMap& inputs) {
  const proto::SetRowSpec& s = spec.set_row();
  RETURN_IF_ERROR(Positive("set_row", {s.rows(), s.cols(), s.count()}));
  if (s.count() > s.rows()) return absl::InvalidArgumentError("set_row writes more rows than its table has");
  if (spec.operands_size() < 2 || spec.out() != spec.operands(0).name()) {
    return absl::InvalidArgumentError("set_row rewrites its table (operand 0, named by out) with its source");
  }
  const int64_t rows = s.rows(), cols = s.cols(), count = s.count();
  ASSIGN_OR_RETURN(const TensorData* t,
                   RefInput(inputs, spec.operands(0).name(), s.dense() ? rows : 1, s.dense() ? cols : rows * cols));
  const bool block = s.dense() && count > 1;
  ASSIGN_OR_RETURN(const TensorData* src,
                   RefInput(inputs, spec.operands(1).name(), block ? count : 1, block ? cols : count * cols));
  ASSIGN_OR_RETURN(int64_t p, IndexValue(s.index(), inputs, "set_row"));
  // The block's last row must be the table's too.
  RETURN_IF_ERROR(InTable("set_row", p, rows + 1 - count));
  TensorData out = *t;
  for (int64_t e = 0; e < count * cols; ++e) out.values[(p - 1) * cols + e] = src->values[e];
  return TensorMap{{spec.out(), std::move(out)}};
}

absl::StatusOr<TensorMap> ReferenceArgMax(const proto::OpSpec& spec, const TensorMap& inputs) {
  const int64_t n = spec.argmax().n();
  RETURN_IF_ERROR(Positive("argmax", {n}));
  if (spec.operands_size() < 1) return absl::InvalidArgumentError("argmax names no row");
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, spec.operands(0).name(), 1, n));
  if (!spec.argmax().float_()) RETURN_IF_ERROR(RefIntegral(*x, spec.operands(0).name()));
  // The seed's scan: seeded with item 1, replaced only by a strictly greater item. A NaN compares false, so it never
  // replaces anything, and a NaN seed is never replaced.
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x->values[i] > x->values[best]) best = i;
  }
  TensorData t = RefResult(1, 1, Precision::kInt32);
  t.values[0] = static_cast<double>(best + 1);
  return TensorMap{{spec.out(), std::move(t)}};
}

}  // namespace spatial
