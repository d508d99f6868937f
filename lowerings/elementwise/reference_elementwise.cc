// The elementwise family's references: each op's textbook formula in f64 (the tanh or erf GELU, the softcap, the pow
// of the decay), not the program's arrangement of it.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// y = f(x) over the op's pointwise shape, with the lowering's checks of the spec. An integer op's operand must hold
// integers.
absl::StatusOr<TensorMap> PointwiseRef(const proto::OpSpec& spec, const TensorMap& inputs, const std::string& kind,
                                       int64_t n, bool integer, const std::function<double(double)>& f) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, kind, 1));
  RETURN_IF_ERROR(CheckElements(kind, "n", n));
  ASSIGN_OR_RETURN(const auto shape, PointwiseShape(kind, spec.shape_rows(), spec.shape_cols(), n));
  const auto [rows, cols] = shape;
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, rows, cols));
  if (integer) RETURN_IF_ERROR(RefIntegral(*x, ops[0].name));
  TensorData y = RefResult(rows, cols, integer ? Precision::kInt32 : Precision::kFp32);
  for (size_t i = 0; i < y.values.size(); ++i) y.values[i] = f(x->values[i]);
  TensorMap out;
  out[spec.out()] = std::move(y);
  return out;
}

}  // namespace

absl::StatusOr<TensorMap> ReferenceSilu(const proto::OpSpec& spec, const TensorMap& inputs) {
  return PointwiseRef(spec, inputs, "silu", spec.silu().n(), false, [](double x) { return x / (1.0 + std::exp(-x)); });
}

absl::StatusOr<TensorMap> ReferenceRelu(const proto::OpSpec& spec, const TensorMap& inputs) {
  return PointwiseRef(spec, inputs, "relu", spec.relu().n(), spec.relu().int_(),
                      [](double x) { return x > 0.0 ? x : 0.0; });
}

absl::StatusOr<TensorMap> ReferenceSigmoid(const proto::OpSpec& spec, const TensorMap& inputs) {
  return PointwiseRef(spec, inputs, "sigmoid", spec.sigmoid().n(), false,
                      [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

absl::StatusOr<TensorMap> ReferenceGelu(const proto::OpSpec& spec, const TensorMap& inputs) {
  if (spec.gelu().erf()) {
    // x Phi(x), Phi through erfc so the lower tail keeps its relative accuracy.
    return PointwiseRef(spec, inputs, "gelu", spec.gelu().n(), false,
                        [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
  }
  // The tanh form; the lowering's x / (1 + e^-2z) is the same function (1 + tanh z = 2 / (1 + e^-2z)).
  const double k = std::sqrt(2.0 / M_PI);
  return PointwiseRef(spec, inputs, "gelu", spec.gelu().n(), false, [k](double x) {
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  });
}

absl::StatusOr<TensorMap> ReferenceBinary(const proto::OpSpec& spec, const TensorMap& inputs) {
  const auto& bs = spec.binary();
  if (!proto::BinarySpec::Op_IsValid(bs.op()) || bs.op() == proto::BinarySpec::OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("binary.op is not ADD, SUB or MUL (", static_cast<int>(bs.op()), ")"));
  }
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "binary", 2));
  RETURN_IF_ERROR(CheckElements("binary", "n", bs.n()));
  ASSIGN_OR_RETURN(const auto shape, PointwiseShape("binary", spec.shape_rows(), spec.shape_cols(), bs.n()));
  const auto [rows, cols] = shape;
  ASSIGN_OR_RETURN(const TensorData* a, RefInput(inputs, ops[0].name, rows, cols));
  ASSIGN_OR_RETURN(const TensorData* b, RefInput(inputs, ops[1].name, bs.broadcast() ? 1 : rows, cols));
  if (bs.int_()) {
    RETURN_IF_ERROR(RefIntegral(*a, ops[0].name));
    RETURN_IF_ERROR(RefIntegral(*b, ops[1].name));
  }
  TensorData c = RefResult(rows, cols, bs.int_() ? Precision::kInt32 : Precision::kFp32);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      const double x = a->values[static_cast<size_t>(r * cols + j)];
      const double y = b->values[static_cast<size_t>((bs.broadcast() ? 0 : r) * cols + j)];
      c.values[static_cast<size_t>(r * cols + j)] = bs.op() == proto::BinarySpec::ADD   ? x + y
                                                    : bs.op() == proto::BinarySpec::SUB ? x - y
                                                                                        : x * y;
    }
  }
  TensorMap out;
  out[spec.out()] = std::move(c);
  return out;
}

absl::StatusOr<TensorMap> ReferenceScale(const proto::OpSpec& spec, const TensorMap& inputs) {
  const double c = spec.scale().factor();
  if (!std::isfinite(c)) return absl::InvalidArgumentError("scale.factor is not finite");
  return PointwiseRef(spec, inputs, "scale", spec.scale().n(), false, [c](double x) { return x * c; });
}

absl::StatusOr<TensorMap> ReferenceSoftcap(const proto::OpSpec& spec, const TensorMap& inputs) {
  const double c = spec.softcap().cap();
  if (!std::isfinite(c) || c == 0.0) return absl::InvalidArgumentError("softcap.cap must be finite and non-zero");
  return PointwiseRef(spec, inputs, "softcap", spec.softcap().n(), false,
                      [c](double x) { return c * std::tanh(x / c); });
}

absl::StatusOr<TensorMap> ReferenceIntRequant(const proto::OpSpec& spec, const TensorMap& inputs) {
  const int64_t m = spec.int_requant().m();
  const int64_t s = spec.int_requant().s();
  if (s < 0 || s > 62) return absl::InvalidArgumentError(absl::StrCat("int_requant.s is outside [0, 62] (", s, ")"));
  return PointwiseRef(spec, inputs, "int_requant", spec.int_requant().n(), true, [m, s](double x) {
    // floor(x * M / 2^S) on the exact product.
    const __int128 p = static_cast<__int128>(static_cast<int64_t>(x)) * m;
    const __int128 d = static_cast<__int128>(1) << s;
    __int128 q = p / d;
    if (p % d != 0 && p < 0) q -= 1;
    return static_cast<double>(q);
  });
}

absl::StatusOr<TensorMap> ReferenceIntClamp(const proto::OpSpec& spec, const TensorMap& inputs) {
  const double lo = static_cast<double>(spec.int_clamp().lo());
  const double hi = static_cast<double>(spec.int_clamp().hi());
  return PointwiseRef(spec, inputs, "int_clamp", spec.int_clamp().n(), true,
                      [lo, hi](double x) { return std::min(std::max(x, lo), hi); });
}

absl::StatusOr<TensorMap> ReferenceDecay(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "decay", 3));
  const int64_t n = spec.decay().n();
  RETURN_IF_ERROR(CheckElements("decay", "n", n));
  const int64_t rows = std::max<int64_t>(spec.decay().rows(), 1);
  const int64_t heads = n / rows;
  if (rows * heads != n || heads == 0) {
    return absl::InvalidArgumentError("a block decay whose rows do not divide its elements");
  }
  // Flat: three 1 x n rows. Dense: ar is rows x heads, dt and alog one value per head for every row.
  const bool dense = rows > 1;
  ASSIGN_OR_RETURN(const TensorData* ar, RefInput(inputs, ops[0].name, dense ? rows : 1, dense ? heads : n));
  ASSIGN_OR_RETURN(const TensorData* dt, RefInput(inputs, ops[1].name, 1, dense ? heads : n));
  ASSIGN_OR_RETURN(const TensorData* al, RefInput(inputs, ops[2].name, 1, dense ? heads : n));
  TensorData y = RefResult(dense ? rows : 1, dense ? heads : n, Precision::kFp32);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = dense ? i % heads : i;
    y.values[i] = std::pow(1.0 + std::exp(ar->values[i] + dt->values[h]), al->values[h]);
  }
  TensorMap out;
  out[spec.out()] = std::move(y);
  return out;
}

}  // namespace spatial
