#include "lowerings/reference.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lowerings/family.h"
#include "lowerings/registry.h"
#include "lowerings/toolkit/common.h"

namespace spatial {

absl::StatusOr<const TensorData*> RefInput(const TensorMap& inputs, const std::string& name, int64_t rows,
                                           int64_t cols) {
  auto it = inputs.find(name);
  if (it == inputs.end()) return absl::NotFoundError(absl::StrCat("no input named '", name, "'"));
  const TensorData& d = it->second;
  if (d.rows != rows || d.cols != cols || static_cast<int64_t>(d.values.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is ", d.rows, " x ", d.cols, " with ",
                                                   d.values.size(), " values; the op reads it as ", rows, " x ",
                                                   cols));
  }
  return &d;
}

absl::StatusOr<const TensorData*> RefInputRows(const TensorMap& inputs, const std::string& name, int64_t n,
                                               int64_t rows, std::string_view reader) {
  auto it = inputs.find(name);
  if (it == inputs.end()) return absl::NotFoundError(absl::StrCat("no input named '", name, "'"));
  const TensorData& d = it->second;
  const bool shaped = (d.rows == 1 && d.cols == n) || (d.rows == rows && rows > 0 && d.cols * rows == n);
  if (!shaped || static_cast<int64_t>(d.values.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is ", d.rows, " x ", d.cols, " with ",
                                                   d.values.size(), " values; the ", std::string(reader), " reads ", n,
                                                   " values, as 1 x ", n, " or ", rows, " rows"));
  }
  return &d;
}

absl::Status RefIntegral(const TensorData& x, const std::string& name) {
  for (size_t i = 0; i < x.values.size(); ++i) {
    const double v = x.values[i];
    if (!std::isfinite(v) || v != std::trunc(v) || std::fabs(v) > 9007199254740992.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", name, "' element ", i, " is ", v, ", not an integer an integer op reads"));
    }
  }
  return absl::OkStatus();
}

TensorData RefResult(int64_t rows, int64_t cols, Precision precision) {
  return TensorData{rows, cols, precision, std::vector<double>(rows * cols, 0.0)};
}

absl::StatusOr<TensorMap> ReferenceOp(const proto::OpSpec& spec, const TensorMap& inputs) {
  if (spec.kind_case() == proto::OpSpec::KIND_NOT_SET) return absl::InvalidArgumentError("op spec has no kind");
  if (const OpFamily* f = FindFamily(spec.kind_case()); f != nullptr && f->reference != nullptr) {
    return f->reference(spec, inputs);
  }
  return absl::UnimplementedError(absl::StrCat("op kind '", OpKindName(spec), "' has no reference yet"));
}

std::vector<std::string> ReferencedKinds() {
  std::vector<std::string> kinds;
  for (const OpFamily& e : OpFamilies()) {
    if (e.reference == nullptr) continue;
    const auto* f = proto::OpSpec::descriptor()->FindFieldByNumber(static_cast<int>(e.kind));
    kinds.push_back(f->name());
  }
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

}  // namespace spatial
