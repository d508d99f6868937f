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

// The operands, the body, the precisions and the names of the map.
struct BinaryPlan {
  std::vector<OperandRef> ops;
  std::string out;
  std::string kind;  // "binary_add", the stage's name
  Body body;
  Precision p = Precision::kBf16;   // the result, and a float map's inputs
  Precision in = Precision::kBf16;  // the inputs
  Precision acc = Precision::kFp32;
  bool broadcast = false;
};

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
  BinaryPlan b;
  ASSIGN_OR_RETURN(b.ops, OperandsOf(spec, "binary", 2));
  RETURN_IF_ERROR(CheckElements("binary", "n", bs.n()));
  ASSIGN_OR_RETURN(const auto shape, PointwiseShape("binary", spec.shape_rows(), spec.shape_cols(), bs.n()));
  const auto [rows, cols] = shape;
  b.out = spec.out();
  b.broadcast = bs.broadcast();
  const char* op_name = bs.op() == proto::BinarySpec::ADD ? "add" : bs.op() == proto::BinarySpec::SUB ? "sub" : "mul";
  b.kind = absl::StrCat("binary_", op_name);
  b.body = bs.op() == proto::BinarySpec::ADD   ? Add(Op(0), Op(1))
           : bs.op() == proto::BinarySpec::SUB ? Sub(Op(0), Op(1))
                                               : Mul(Op(0), Op(1));
  ASSIGN_OR_RETURN(b.p, DatapathPrecision(DatapathOf(!bs.int_()), target));
  if (bs.int_()) {
    const std::optional<Precision> in = IntInputs(bs.op(), b.p, target);
    if (!in) {
      return NotLowered(absl::StrCat("an int binary ", op_name, " whose result leaves the ",
                                     std::string(PrecisionName(b.p)), " datapath even for the narrowest integer ",
                                     target.name(), " stores"));
    }
    b.in = *in;
    b.acc = AccFor(b.p);
  } else {
    b.in = b.p;
    // tt-metal's eltwise binary computes bf16 data in a 16-bit Dst (fp32_dest_acc_en only for fp32 data).
    b.acc = MapAccFor(b.in, b.p, target);
  }
  const std::string name = b.broadcast && rows > 1 ? absl::StrCat(b.kind, "_row") : b.kind;
  return PointwiseMap(name, b.kind, b.p, b.acc, b.body,
                      {MapOperand{.ref = b.ops[0], .in = b.in, .label = "a"},
                       MapOperand{.ref = b.ops[1], .in = b.in, .label = "b", .row_broadcast = b.broadcast}},
                      b.out, rows, cols, target);
}

}  // namespace spatial
