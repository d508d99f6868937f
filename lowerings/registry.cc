#include "lowerings/registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/attention.h"
#include "lowerings/attention/full_attention.h"
#include "lowerings/attention/lut.h"
#include "lowerings/argmax.h"
#include "lowerings/carried/causal_conv.h"
#include "lowerings/carried/gated_delta.h"
#include "lowerings/elementwise.h"
#include "lowerings/gathers.h"
#include "lowerings/head_matmul.h"
#include "lowerings/matmul.h"
#include "lowerings/row_norms.h"
#include "lowerings/row_writes.h"
#include "lowerings/rope.h"
#include "lowerings/size_budget.h"
#include "lowerings/softmax.h"
#include "lowerings/tables.h"
#include "passes/handles.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

using LowerFn = absl::StatusOr<Composition> (*)(const proto::OpSpec&, const Target&);

struct Entry {
  proto::OpSpec::KindCase kind;
  LowerFn lower;
};

// One line per lowered kind.
constexpr Entry kLowerings[] = {
    // Elementwise (lowerings/elementwise.h).
    {proto::OpSpec::kSilu, &FromSilu},
    {proto::OpSpec::kRelu, &FromRelu},
    {proto::OpSpec::kSigmoid, &FromSigmoid},
    {proto::OpSpec::kGelu, &FromGelu},
    {proto::OpSpec::kScale, &FromScale},
    {proto::OpSpec::kSoftcap, &FromSoftcap},
    {proto::OpSpec::kDecay, &FromDecay},
    {proto::OpSpec::kIntRequant, &FromIntRequant},
    {proto::OpSpec::kIntClamp, &FromIntClamp},
    // Matmul (lowerings/matmul.h).
    {proto::OpSpec::kMatmul, &FromMatmul},
    // Tables and heads (lowerings/tables.h, lowerings/head_matmul.h).
    {proto::OpSpec::kTranspose, &FromTranspose},
    {proto::OpSpec::kHeadSlice, &FromHeadSlice},
    {proto::OpSpec::kJoin, &FromJoin},
    {proto::OpSpec::kHeadMatmul, &FromHeadMatmul},
    // Rows (lowerings/row_norms.h, lowerings/softmax.h).
    {proto::OpSpec::kL2Norm, &FromL2Norm},
    {proto::OpSpec::kFusedRow, &FromFusedRow},
    {proto::OpSpec::kSoftmax, &FromSoftmax},
    // Attention (lowerings/attention/).
    {proto::OpSpec::kAttention, &FromAttention},
    {proto::OpSpec::kLutAttention, &FromLutAttention},
    {proto::OpSpec::kFullAttention, &FromFullAttention},
    // Gathers, row writes, argmax (lowerings/gathers.h, row_writes.h, argmax.h).
    {proto::OpSpec::kRowGather, &FromRowGather},
    {proto::OpSpec::kRowsGather, &FromRowsGather},
    {proto::OpSpec::kSetRow, &FromSetRow},
    {proto::OpSpec::kArgmax, &FromArgMax},
    // Rope (lowerings/rope.h).
    {proto::OpSpec::kRope, &FromRope},
    // Carried state (lowerings/carried/).
    {proto::OpSpec::kCausalConv, &FromCausalConv},
    {proto::OpSpec::kGatedDelta, &FromGatedDelta},
};

std::string KindName(proto::OpSpec::KindCase kind) {
  const auto* field = proto::OpSpec::descriptor()->FindFieldByNumber(static_cast<int>(kind));
  return field == nullptr ? std::string() : field->name();
}

}  // namespace

std::string OpKindName(const proto::OpSpec& spec) {
  if (spec.kind_case() == proto::OpSpec::KIND_NOT_SET) return "";
  return KindName(spec.kind_case());
}

absl::StatusOr<Composition> Lower(const proto::OpSpec& spec, const Target& target) {
  if (spec.kind_case() == proto::OpSpec::KIND_NOT_SET) return absl::InvalidArgumentError("op spec has no kind");
  for (const Entry& e : kLowerings) {
    if (e.kind != spec.kind_case()) continue;
    // ★ SIZES ARE CHECKED BEFORE ANYTHING IS BUILT FROM THEM (size_budget.h): every tensor the spec makes fits
    // int64 and the program model's limit, so no family forms an overflowing product or sizes a vector from one.
    RETURN_IF_ERROR(CheckSpecSizes(spec));
    ASSIGN_OR_RETURN(Composition c, e.lower(spec, target));
    // ★ SECTIONS MEET THROUGH TYPED HANDLES (passes/handles.h): a name a section reads that no earlier section
    // produces must be one the op is given (an operand, or its result when that is carried state), so a
    // misspelled internal name is a lowering bug here instead of a silent new run input.
    std::set<std::string> given{spec.out()};
    for (const proto::Operand& o : spec.operands()) given.insert(o.name());
    if (absl::Status st = CheckHandles(c, &given); !st.ok()) {
      return absl::InternalError(absl::StrCat("internal: the ", KindName(e.kind), " lowering ", st.message()));
    }
    return c;
  }
  return NotLowered(absl::StrCat("op kind '", OpKindName(spec), "' is not lowered yet"));
}

std::vector<std::string> LoweredKinds() {
  std::vector<std::string> kinds;
  for (const Entry& e : kLowerings) kinds.push_back(KindName(e.kind));
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

}  // namespace spatial
