// The tables-and-heads references: the index arithmetic of each move written out, and the per-head product as the
// plain double loop -- nothing of the bands, tables or tiles the lowerings use.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/reference_tables_rows.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<std::vector<double>> RefValues(const TensorMap& inputs, const OperandRef& op, int64_t n,
                                              std::pair<int64_t, int64_t>* view) {
  auto it = inputs.find(op.name);
  if (it != inputs.end()) {
    const TensorData& d = it->second;
    if (d.rows * d.cols != n || static_cast<int64_t>(d.values.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat("input '", op.name, "' is ", d.rows, " x ", d.cols, " with ",
                                                     d.values.size(), " values; the op reads ", n));
    }
    if (view) *view = {d.rows, d.cols};
    return d.values;
  }
  ASSIGN_OR_RETURN(TensorInit init, InitOf(op.fill, n));
  if (view) *view = {1, n};
  switch (init.kind) {
    case TensorInit::Kind::kConstF:
      return std::vector<double>(n, init.const_f);
    case TensorInit::Kind::kValues: {
      std::vector<double> v(n, 0.0);
      for (int64_t i = 0; i < n && i < static_cast<int64_t>(init.values.size()); ++i) {
        v[i] = static_cast<double>(init.values[i]);
      }
      return v;
    }
    case TensorInit::Kind::kFloatValues: {
      std::vector<double> v = init.float_values;
      v.resize(n, 0.0);
      return v;
    }
    default:
      return absl::NotFoundError(absl::StrCat("operand '", op.name, "' is neither an input nor a known fill"));
  }
}

namespace {

TensorMap One(const std::string& name, TensorData d) {
  TensorMap out;
  out[name] = std::move(d);
  return out;
}

}  // namespace

absl::StatusOr<TensorMap> ReferenceTranspose(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "transpose", 1));
  const int64_t rows = spec.transpose().rows();
  const int64_t cols = spec.transpose().cols();
  if (rows < 0 || cols < 0) return absl::InvalidArgumentError("transpose has a negative shape");
  if (rows * cols == 0) return NotLowered("a transpose of an empty tensor");
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, 1, rows * cols));
  const bool integer = !spec.transpose().float_();
  if (integer) RETURN_IF_ERROR(RefIntegral(*x, ops[0].name));
  TensorData y = RefResult(1, rows * cols, integer ? Precision::kInt32 : Precision::kFp32);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) y.values[j * rows + i] = x->values[i * cols + j];
  }
  return One(spec.out(), std::move(y));
}

absl::StatusOr<TensorMap> ReferenceHeadSlice(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "head_slice", 1));
  const auto& hs = spec.head_slice();
  if (hs.every() < 0 || hs.from() < 0 || hs.width() < 0 || hs.n() < 0 || hs.rows() < 0) {
    return absl::InvalidArgumentError("head_slice has a negative field");
  }
  const int64_t groups = hs.every() == 0 ? 0 : hs.n() / hs.every();
  if (groups * hs.width() == 0 || hs.from() + hs.width() > hs.every()) {
    return NotLowered("a head slice of nothing, or a part past its group");
  }
  // The dense form (rows > 1) is the same values as a rows x n/rows matrix (its row whole groups: else refused).
  const int64_t rows = hs.rows() > 1 ? hs.rows() : 1;
  if (rows > 1 && (hs.n() % rows != 0 || (hs.n() / rows) % hs.every() != 0)) {
    return NotLowered("a dense head slice whose row is not whole groups");
  }
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, rows, hs.n() / rows));
  TensorData y = RefResult(rows, groups / rows * hs.width(), Precision::kFp32);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t k = 0; k < hs.width(); ++k) y.values[g * hs.width() + k] = x->values[g * hs.every() + hs.from() + k];
  }
  return One(spec.out(), std::move(y));
}

absl::StatusOr<TensorMap> ReferenceJoin(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "join", 2));
  const auto& j = spec.join();
  if (j.rows() < 0 || j.heads() < 0 || j.wa() < 0 || j.wb() < 0) {
    return absl::InvalidArgumentError("join has a negative field");
  }
  if (j.heads() == 0 || j.wa() % j.heads() != 0 || j.wb() % j.heads() != 0) {
    return NotLowered("a join whose widths do not divide among its heads");
  }
  const int64_t ha = j.wa() / j.heads();
  const int64_t hb = j.wb() / j.heads();
  const int64_t units = j.rows() * j.heads();
  if (units * (ha + hb) == 0) return NotLowered("a join of nothing");
  // A part of width zero is not an operand the lowering reads.
  const TensorData* a = nullptr;
  const TensorData* b = nullptr;
  // The dense form is the same values as rows x heads * width matrices.
  const int64_t rows = j.dense() ? j.rows() : 1, per_row = units / rows;
  if (ha > 0) {
    ASSIGN_OR_RETURN(a, RefInput(inputs, ops[0].name, rows, per_row * ha));
  }
  if (hb > 0) {
    ASSIGN_OR_RETURN(b, RefInput(inputs, ops[1].name, rows, per_row * hb));
  }
  TensorData y = RefResult(rows, per_row * (ha + hb), Precision::kFp32);
  for (int64_t u = 0; u < units; ++u) {
    for (int64_t k = 0; k < ha; ++k) y.values[u * (ha + hb) + k] = a->values[u * ha + k];
    for (int64_t k = 0; k < hb; ++k) y.values[u * (ha + hb) + ha + k] = b->values[u * hb + k];
  }
  return One(spec.out(), std::move(y));
}

absl::StatusOr<TensorMap> ReferenceHeadMatmul(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "head_matmul", 2));
  const auto& hm = spec.head_matmul();
  if (hm.m() < 0 || hm.heads() < 0 || hm.a() < 0 || hm.b() < 0) {
    return absl::InvalidArgumentError("head_matmul has a negative field");
  }
  const int64_t units = hm.m() * hm.heads();
  const int64_t a = hm.a();
  const int64_t bw = hm.b();
  if (units * bw == 0 || a == 0) return NotLowered("a per-head matmul of nothing");
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, 1, units * a));
  ASSIGN_OR_RETURN(std::vector<double> w, RefValues(inputs, ops[1], hm.heads() * a * bw));
  TensorData y = RefResult(1, units * bw, Precision::kFp32);
  for (int64_t u = 0; u < units; ++u) {
    const int64_t h = u % hm.heads();
    for (int64_t r = 0; r < bw; ++r) {
      double sum = 0.0;
      for (int64_t e = 0; e < a; ++e) sum += x->values[u * a + e] * w[(h * a + e) * bw + r];
      y.values[u * bw + r] = sum;
    }
  }
  return One(spec.out(), std::move(y));
}

}  // namespace spatial
