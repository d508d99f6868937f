#include "spatial/tensor_data.h"

#include <set>

namespace spatial {

bool IsRunInput(const Tensor& t) {
  if (t.role == TensorRole::kInput) return true;
  return (t.role == TensorRole::kState || t.role == TensorRole::kParam) && t.init.kind == TensorInit::Kind::kExternal;
}

std::vector<Tensor> CompositionInputs(const Composition& c) {
  std::vector<Tensor> out;
  std::set<std::string> seen;  // declared by an earlier section (as anything): not an input of the run
  for (const Section& s : c.sections) {
    for (const Tensor& t : s.tensors) {
      if (!seen.insert(t.name).second) continue;
      if (IsRunInput(t)) out.push_back(t);
    }
  }
  return out;
}

std::vector<Tensor> CompositionResults(const Composition& c) {
  std::vector<Tensor> out;
  std::set<std::string> seen;
  for (const Section& s : c.sections) {
    for (const Tensor& t : s.tensors) {
      if (t.role != TensorRole::kOutput && t.role != TensorRole::kState) continue;
      if (seen.insert(t.name).second) out.push_back(t);
    }
  }
  return out;
}

}  // namespace spatial
