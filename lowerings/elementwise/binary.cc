#include "lowerings/elementwise/binary.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/elementwise/map_forms.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The widest integer the target stores whose every a op b stays on the integer datapath `dp`.
std::optional<Precision> IntInputs(proto::BinarySpec::Op op, Precision dp, const Target& target) {
  for (Precision in : {Precision::kInt32, Precision::kInt16, Precision::kInt8}) {
    if (!target.supports_storage(in) || *IntBits(in) > *IntBits(dp)) continue;
    const double m = static_cast<double>(-IntMin(in));  // the largest magnitude an input holds
    const double worst = op == proto::BinarySpec::MUL ? m * m : 2.0 * m;
    if (worst <= static_cast<double>(IntMax(dp))) return in;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Composition> FromBinary(const proto::OpSpec& spec, const Target& target) {
  const auto& bs = spec.binary();
  if (!proto::BinarySpec::Op_IsValid(bs.op()) || bs.op() == proto::BinarySpec::OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("binary.op is ", bs.op() == proto::BinarySpec::OP_UNSPECIFIED ? "unset" : "not an op", " (",
                     static_cast<int>(bs.op()), "): ADD, SUB or MUL"));
  }
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "binary", 2));
  return BinaryOf(spec, ops, target);
}

absl::StatusOr<Composition> BinaryOf(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                     const Target& target) {
  const auto& bs = spec.binary();
  RETURN_IF_ERROR(CheckElements("binary", "n", bs.n()));
  ASSIGN_OR_RETURN(const auto shape, PointwiseShape("binary", spec.shape_rows(), spec.shape_cols(), bs.n()));
  const auto [rows, cols] = shape;
  const char* op_name = bs.op() == proto::BinarySpec::ADD ? "add" : bs.op() == proto::BinarySpec::SUB ? "sub" : "mul";
  const std::string kind = absl::StrCat("binary_", op_name);
  const Body body = bs.op() == proto::BinarySpec::ADD   ? Add(Op(0), Op(1))
                    : bs.op() == proto::BinarySpec::SUB ? Sub(Op(0), Op(1))
                                                        : Mul(Op(0), Op(1));
  ASSIGN_OR_RETURN(const Precision p, DatapathPrecision(DatapathOf(!bs.int_()), target));
  Precision in = p, acc = AccFor(p);
  if (bs.int_()) {
    const std::optional<Precision> narrow = IntInputs(bs.op(), p, target);
    if (!narrow) {
      return NotLowered(absl::StrCat("an int binary ", op_name, " whose result leaves the ",
                                     std::string(PrecisionName(p)), " datapath even for the narrowest integer ",
                                     target.name(), " stores"));
    }
    in = *narrow;
  } else {
    // tt-metal's eltwise binary computes bf16 data in a 16-bit Dst (fp32_dest_acc_en only for fp32 data).
    acc = MapAccFor(in, p, target);
  }
  const std::string name = bs.broadcast() && rows > 1 ? absl::StrCat(kind, "_row") : kind;
  return PointwiseMap(name, kind, p, acc, body,
                      {MapOperand{.ref = ops[0], .in = in, .label = "a"},
                       MapOperand{.ref = ops[1], .in = in, .label = "b", .row_broadcast = bs.broadcast()}},
                      spec.out(), rows, cols, target);
}

}  // namespace spatial
