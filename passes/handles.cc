#include "passes/handles.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "spatial/tensor_data.h"

namespace spatial {
namespace {

struct Seen {
  const Tensor* first = nullptr;
  int first_section = 0;
  int first_store = -1;  // the first section that stores the name, -1: none
};

}  // namespace

absl::Status CheckHandles(const Composition& c, const std::set<std::string>* given) {
  std::map<std::string, Seen> seen;
  for (int si = 0; si < static_cast<int>(c.sections.size()); ++si) {
    const Section& s = c.sections[si];
    for (const Tensor& t : s.tensors) seen.try_emplace(t.name, Seen{&t, si, -1});
    for (const Stage& st : s.stages) {
      const auto* w = std::get_if<Store>(&st.op);
      if (w == nullptr || w->tensor < 0 || w->tensor >= static_cast<int>(s.tensors.size())) continue;
      Seen& x = seen[s.tensors[w->tensor].name];
      if (x.first_store < 0) x.first_store = si;
    }
  }
  // Reads: a section's Input tensors (what it loads) must be produced before it or be the run's own inputs.
  for (int si = 0; si < static_cast<int>(c.sections.size()); ++si) {
    const Section& s = c.sections[si];
    for (const Tensor& t : s.tensors) {
      if (t.role != TensorRole::kInput) continue;
      const Seen& x = seen[t.name];
      if (x.first_store > si) {
        return absl::InvalidArgumentError(
            absl::StrCat("section '", s.name, "' reads '", t.name, "', which section '",
                         c.sections[x.first_store].name, "' produces only after it (sections run in order)"));
      }
    }
  }
  if (given == nullptr) return absl::OkStatus();
  for (const Tensor& t : CompositionInputs(c)) {
    if (given->count(t.name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run input '", t.name, "' is read but no section produces it before it is read and the op is not given "
          "it (a misspelled handle?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace spatial
