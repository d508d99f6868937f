#include "lowerings/registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "lowerings/family.h"
#include "lowerings/toolkit/size_budget.h"
#include "passes/handles.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

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
  if (const OpFamily* e = FindFamily(spec.kind_case()); e != nullptr && e->lower != nullptr) {
    // ★ SIZES ARE CHECKED BEFORE ANYTHING IS BUILT FROM THEM (size_budget.h): every tensor the spec makes fits
    // int64 and the program model's limit, so no family forms an overflowing product or sizes a vector from one.
    RETURN_IF_ERROR(CheckSpecSizes(spec));
    ASSIGN_OR_RETURN(Composition c, e->lower(spec, target));
    // ★ SECTIONS MEET THROUGH TYPED HANDLES (passes/handles.h): a name a section reads that no earlier section
    // produces must be one the op is given (an operand, or its result when that is carried state), so a
    // misspelled internal name is a lowering bug here instead of a silent new run input.
    std::set<std::string> given{spec.out()};
    for (const proto::Operand& o : spec.operands()) given.insert(o.name());
    if (absl::Status st = CheckHandles(c, &given); !st.ok()) {
      return absl::InternalError(absl::StrCat("internal: the ", KindName(e->kind), " lowering ", st.message()));
    }
    return c;
  }
  return NotLowered(absl::StrCat("op kind '", OpKindName(spec), "' is not lowered yet"));
}

std::vector<std::string> LoweredKinds() {
  std::vector<std::string> kinds;
  for (const OpFamily& f : OpFamilies()) {
    if (f.lower != nullptr) kinds.push_back(KindName(f.kind));
  }
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

}  // namespace spatial
