#include "tools/tensor_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spatial {

TensorStats StatsOf(const TensorData& t) {
  TensorStats s;
  double sum = 0.0;
  int64_t n = 0;
  for (double v : t.values) {
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    if (n == 0) s.min = s.max = v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    sum += v;
    ++n;
  }
  s.mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  return s;
}

std::string FormatTensorTable(const std::vector<std::pair<std::string, const TensorData*>>& rows) {
  size_t name_w = 6, shape_w = 5;
  std::vector<std::string> shapes;
  for (const auto& [name, t] : rows) {
    shapes.push_back(absl::StrCat(t->rows, "x", t->cols));
    name_w = std::max(name_w, name.size());
    shape_w = std::max(shape_w, shapes.back().size());
  }
  std::string out = absl::StrFormat("%-*s  %-*s  %-9s  %13s  %13s  %13s\n", name_w, "tensor", shape_w, "shape",
                                    "precision", "min", "max", "mean");
  for (size_t i = 0; i < rows.size(); ++i) {
    const TensorData& t = *rows[i].second;
    TensorStats s = StatsOf(t);
    absl::StrAppend(&out, absl::StrFormat("%-*s  %-*s  %-9s  %13.6g  %13.6g  %13.6g", name_w, rows[i].first, shape_w,
                                          shapes[i], std::string(PrecisionName(t.precision)), s.min, s.max, s.mean));
    if (s.nan > 0) absl::StrAppend(&out, "  (", s.nan, " NaN)");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<ErrorStats> CompareTensors(const TensorData& got, const TensorData& want) {
  if (got.rows != want.rows || got.cols != want.cols || got.values.size() != want.values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("shape ", got.rows, "x", got.cols, " differs from the reference's ",
                                                   want.rows, "x", want.cols));
  }
  ErrorStats e;
  for (size_t i = 0; i < got.values.size(); ++i) {
    double g = got.values[i], w = want.values[i];
    if (std::isnan(g) || std::isnan(w)) {
      if (std::isnan(g) != std::isnan(w)) ++e.mismatched_nan;
      continue;
    }
    double abs = std::fabs(g - w);
    if (g == w) abs = 0.0;  // equal infinities
    double rel = abs == 0.0 ? 0.0 : abs / std::max(std::fabs(w), 1e-300);
    e.max_abs = std::max(e.max_abs, abs);
    if (e.worst < 0 || rel > e.max_rel) {
      e.worst = static_cast<int64_t>(i);
      e.max_rel = rel;
    }
  }
  return e;
}

}  // namespace spatial
