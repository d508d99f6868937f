// The rows references: each normalization's formula per row in f64 (a layer norm's textbook mean and population
// variance), straight from the spec -- one loop per row, no bands, no tiles, no streamed sums.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/reference_tables_rows.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

absl::Status CheckEps(const std::string& kind, double eps) {
  if (!std::isfinite(eps) || eps < 0) return absl::InvalidArgumentError(absl::StrCat(kind, ".eps is negative"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorMap> ReferenceL2Norm(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "l2norm", 1));
  const auto& l2 = spec.l2norm();
  RETURN_IF_ERROR(CheckElements("l2norm", "rows", l2.rows()));
  RETURN_IF_ERROR(CheckElements("l2norm", "cols", l2.cols()));
  RETURN_IF_ERROR(CheckEps("l2norm", l2.eps()));
  const int64_t rows = l2.rows();
  const int64_t cols = l2.cols();
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, 1, rows * cols));
  TensorData y = RefResult(1, rows * cols, Precision::kFp32);
  for (int64_t h = 0; h < rows; ++h) {
    double ss = 0.0;
    for (int64_t i = 0; i < cols; ++i) ss += x->values[h * cols + i] * x->values[h * cols + i];
    const double inv = 1.0 / std::sqrt(ss + l2.eps());
    for (int64_t i = 0; i < cols; ++i) y.values[h * cols + i] = x->values[h * cols + i] * inv;
  }
  TensorMap out;
  out[spec.out()] = std::move(y);
  return out;
}

absl::StatusOr<TensorMap> ReferenceFusedRow(const proto::OpSpec& spec, const TensorMap& inputs) {
  const auto& fr = spec.fused_row();
  if (fr.reduce() == proto::FusedRowSpec::REDUCE_UNSPECIFIED) {
    return absl::InvalidArgumentError("fused_row.reduce is unspecified (RMS_NORM or LAYER_NORM)");
  }
  const int count = 1 + static_cast<int>(fr.weight()) + static_cast<int>(fr.residual()) + static_cast<int>(fr.bias());
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "fused_row", count));
  RETURN_IF_ERROR(CheckElements("fused_row", "rows", fr.rows()));
  RETURN_IF_ERROR(CheckElements("fused_row", "cols", fr.cols()));
  RETURN_IF_ERROR(CheckEps("fused_row", fr.eps()));
  // Dense token rows hold the same row-major numbers as the flat form: only their view differs (kept below).
  RETURN_IF_ERROR(CheckDenseHeads(fr.dense_heads(), fr.rows()));
  const bool layer = fr.reduce() == proto::FusedRowSpec::LAYER_NORM;
  if (fr.bias() && !layer) return NotLowered("an rmsnorm with a bias term");
  const int64_t rows = fr.rows();
  const int64_t cols = fr.cols();
  const int64_t n = rows * cols;
  // The result has the view x was given in: flat 1 x n, or the rows x cols matrix of the streamed form.
  std::pair<int64_t, int64_t> view;
  ASSIGN_OR_RETURN(std::vector<double> v, RefValues(inputs, ops[0], n, &view));
  size_t rest = 1;
  std::vector<double> w(cols, 1.0);
  if (fr.weight()) {
    ASSIGN_OR_RETURN(w, RefValues(inputs, ops[rest], cols));
    ++rest;
  }
  if (fr.residual()) {
    ASSIGN_OR_RETURN(std::vector<double> r, RefValues(inputs, ops[rest], n));
    for (int64_t i = 0; i < n; ++i) v[i] += r[i];
    ++rest;
  }
  std::vector<double> bias(cols, 0.0);
  if (fr.bias()) {
    ASSIGN_OR_RETURN(bias, RefValues(inputs, ops[rest], cols));
  }
  TensorData y = RefResult(view.first, view.second, Precision::kFp32);
  for (int64_t h = 0; h < rows; ++h) {
    double* row = &v[h * cols];
    // A layer norm centres the row on its mean first; an RMS norm does not.
    double mean = 0.0;
    if (layer) {
      for (int64_t j = 0; j < cols; ++j) mean += row[j];
      mean /= static_cast<double>(cols);
    }
    double ss = 0.0;
    for (int64_t j = 0; j < cols; ++j) ss += (row[j] - mean) * (row[j] - mean);
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(cols) + fr.eps());
    for (int64_t j = 0; j < cols; ++j) y.values[h * cols + j] = (row[j] - mean) * scale * w[j] + bias[j];
  }
  TensorMap out;
  out[spec.out()] = std::move(y);
  return out;
}

absl::StatusOr<TensorMap> ReferenceSoftmax(const proto::OpSpec& spec, const TensorMap& inputs) {
  const auto& s = spec.softmax();
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "softmax", s.sinks() ? 2 : 1));
  RETURN_IF_ERROR(CheckElements("softmax", "rows", s.rows()));
  RETURN_IF_ERROR(CheckElements("softmax", "cols", s.cols()));
  const int64_t rows = s.rows();
  const int64_t cols = s.cols();
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, 1, rows * cols));
  const TensorData* sinks = nullptr;
  if (s.sinks()) {
    ASSIGN_OR_RETURN(sinks, RefInput(inputs, ops[1].name, 1, rows));
  }
  TensorData y = RefResult(1, rows * cols, Precision::kFp32);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x->values[r * cols];
    // A sink joins the row's maximum and its denominator, and takes no value.
    double m = *std::max_element(row, row + cols);
    if (sinks) m = std::max(m, sinks->values[r]);
    double z = sinks ? std::exp(sinks->values[r] - m) : 0.0;
    for (int64_t j = 0; j < cols; ++j) z += std::exp(row[j] - m);
    for (int64_t j = 0; j < cols; ++j) y.values[r * cols + j] = std::exp(row[j] - m) / z;
  }
  TensorMap out;
  out[spec.out()] = std::move(y);
  return out;
}

}  // namespace spatial
