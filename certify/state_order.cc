// The composition's state order (DESIGN §3, seed B §3.1): for every State tensor, the declared sequence of reads
// and writes across sections must be exactly what the sections do (a load is a read, a store a write) and must
// follow execution order, so that every read comes after the writes declared before it. The certificate
// records the checked order; the VM enforces it at run time with StaleStateRead.
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"

namespace spatial::certify {
namespace {

using Key = std::tuple<std::string, int, int>;  // tensor, section, access

std::string AccessName(StateAccess a) { return a == StateAccess::kRead ? "READ" : "WRITE"; }

// Execution rank of a step: sections in order; within one section an item reads, then writes (the in-place
// KV-cache write), which is the order DeclareStateOrder emits.
int64_t Rank(int section, StateAccess a) { return int64_t{section} * 2 + (a == StateAccess::kWrite ? 1 : 0); }

}  // namespace

void CheckStateOrder(const Composition& c, DiagnosticSink& sink, proto::Certificate& cert) {
  // What the sections actually do, in section order.
  std::vector<Key> actual;
  absl::flat_hash_set<Key> actual_set;
  for (int si = 0; si < static_cast<int>(c.sections.size()); ++si) {
    const Section& s = c.sections[si];
    for (const Stage& st : s.stages) {
      TensorId t = -1;
      StateAccess a = StateAccess::kRead;
      if (const auto* l = std::get_if<Load>(&st.op)) t = l->tensor;
      if (const auto* w = std::get_if<Store>(&st.op)) {
        t = w->tensor;
        a = StateAccess::kWrite;
      }
      if (t < 0 || s.tensors[t].role != TensorRole::kState) continue;
      Key k{s.tensors[t].name, si, static_cast<int>(a)};
      if (actual_set.insert(k).second) actual.push_back(std::move(k));
    }
  }

  absl::flat_hash_set<Key> declared;
  absl::flat_hash_map<std::string, std::pair<int64_t, size_t>> last;  // tensor -> (rank, step) of the last step
  for (size_t i = 0; i < c.state_order.size(); ++i) {
    const StateStep& step = c.state_order[i];
    const bool in_range = step.section >= 0 && step.section < static_cast<int>(c.sections.size());
    const std::string section_name = in_range ? c.sections[step.section].name : "";
    sink.SetSection(in_range ? step.section : -1, section_name);
    const std::string field = absl::StrCat("state_order[", i, "]");
    proto::StateStepProof* p = cert.add_state_order();
    p->set_tensor(step.tensor);
    p->set_section(step.section);
    p->set_section_name(section_name);
    p->set_access(static_cast<proto::StateAccess>(step.access));

    Key k{step.tensor, step.section, static_cast<int>(step.access)};
    if (!declared.insert(k).second) {
      sink.Add(codes::kStateOrder, -1, "", field, "each access declared once", "declared twice",
               absl::StrCat("the ", AccessName(step.access), " of '", step.tensor, "' by this section is declared twice"));
      continue;
    }
    if (!actual_set.contains(k)) {
      sink.Add(codes::kStateOrder, -1, "", field,
               absl::StrCat("a ", step.access == StateAccess::kRead ? "load" : "store", " of '", step.tensor, "'"),
               "none",
               absl::StrCat("the state order declares a ", AccessName(step.access), " of '", step.tensor,
                            "' by this section, but the section never ",
                            step.access == StateAccess::kRead ? "loads" : "stores", " it"));
    }
    const int64_t rank = Rank(step.section, step.access);
    auto [it, fresh] = last.try_emplace(step.tensor, rank, i);
    if (!fresh) {
      if (rank < it->second.first) {
        const StateStep& prev = c.state_order[it->second.second];
        sink.Add(codes::kStateOrder, -1, "", field,
                 absl::StrCat("after state_order[", it->second.second, "] in execution order"),
                 absl::StrCat(AccessName(step.access), " in section #", step.section),
                 absl::StrCat("the ", AccessName(step.access), " of '", step.tensor, "' by section #", step.section,
                              " is declared after the ", AccessName(prev.access), " by section #", prev.section,
                              ", but runs before it: a read would see the wrong version"));
      } else {
        it->second = {rank, i};
      }
    }
  }

  for (const Key& k : actual) {
    if (declared.contains(k)) continue;
    const auto& [tensor, si, access] = k;
    sink.SetSection(si, c.sections[si].name);
    const StateAccess a = static_cast<StateAccess>(access);
    sink.Add(codes::kStateOrder, -1, "", "state_order",
             absl::StrCat("a ", AccessName(a), " step of '", tensor, "' for this section"), "none declared",
             absl::StrCat("the section ", a == StateAccess::kRead ? "loads" : "stores", " State tensor '", tensor,
                          "', but the composition's state order does not declare it"));
  }
  sink.SetSection(-1, "");
}

}  // namespace spatial::certify
