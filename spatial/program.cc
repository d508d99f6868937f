#include "spatial/program.h"

namespace spatial {
namespace {

template <typename T>
int FindByName(const std::vector<T>& v, std::string_view name) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::string_view TensorRoleName(TensorRole r) {
  switch (r) {
    case TensorRole::kInput: return "Input";
    case TensorRole::kOutput: return "Output";
    case TensorRole::kParam: return "Param";
    case TensorRole::kState: return "State";
  }
  return "?";
}

std::string_view MathFidelityName(MathFidelity f) {
  switch (f) {
    case MathFidelity::kDefault: return "default";
    case MathFidelity::kLoFi: return "LoFi";
    case MathFidelity::kHiFi2: return "HiFi2";
    case MathFidelity::kHiFi3: return "HiFi3";
    case MathFidelity::kHiFi4: return "HiFi4";
  }
  return "?";
}

std::string_view PhaseName(Phase p) {
  switch (p) {
    case Phase::kPrologue: return "prologue";
    case Phase::kBody: return "body";
    case Phase::kEpilogue: return "epilogue";
  }
  return "?";
}

std::string_view StageKindName(const Stage& s) {
  switch (s.op.index()) {
    case 0: return "Load";
    case 1: return "Store";
    case 2: return "Generic";
    case 3: return "MatmulTiles";
  }
  return "?";
}

int Section::FindTensor(std::string_view name) const { return FindByName(tensors, name); }
int Section::FindBuffer(std::string_view name) const { return FindByName(buffers, name); }
int Section::FindStage(std::string_view name) const { return FindByName(stages, name); }

Composition Single(Section s) {
  Composition c;
  c.name = s.name;
  c.sections.push_back(std::move(s));
  DeclareStateOrder(c);
  return c;
}

void DeclareStateOrder(Composition& c) {
  c.state_order.clear();
  for (size_t si = 0; si < c.sections.size(); ++si) {
    const Section& s = c.sections[si];
    for (StateAccess access : {StateAccess::kRead, StateAccess::kWrite}) {
      for (size_t ti = 0; ti < s.tensors.size(); ++ti) {
        const Tensor& t = s.tensors[ti];
        if (t.role != TensorRole::kState) continue;
        bool touches = false;
        for (const Stage& st : s.stages) {
          if (access == StateAccess::kRead) {
            if (auto* l = std::get_if<Load>(&st.op); l && l->tensor == static_cast<int>(ti)) touches = true;
          } else {
            if (auto* w = std::get_if<Store>(&st.op); w && w->tensor == static_cast<int>(ti)) touches = true;
          }
        }
        if (touches) c.state_order.push_back({t.name, static_cast<int>(si), access});
      }
    }
  }
}

}  // namespace spatial
