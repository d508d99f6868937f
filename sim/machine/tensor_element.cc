#include "sim/machine/tensor_element.h"

namespace spatial {

std::optional<double> TensorElement(const Tensor& t, int64_t elem, const TensorMap& values, const TensorMap& inputs) {
  for (const TensorMap* m : {&inputs, &values}) {
    auto it = m->find(t.name);
    if (it == m->end()) continue;
    if (elem < 0 || elem >= static_cast<int64_t>(it->second.values.size())) return std::nullopt;
    return it->second.values[static_cast<size_t>(elem)];
  }
  if (elem < 0 || elem >= t.rows * t.cols) return std::nullopt;
  switch (t.init.kind) {
    case TensorInit::Kind::kZero:
      return 0.0;
    case TensorInit::Kind::kConstF:
      return t.init.const_f;
    case TensorInit::Kind::kValues:
      return elem < static_cast<int64_t>(t.init.values.size()) ? static_cast<double>(t.init.values[elem]) : 0.0;
    case TensorInit::Kind::kFloatValues:
      return elem < static_cast<int64_t>(t.init.float_values.size()) ? t.init.float_values[elem] : 0.0;
    case TensorInit::Kind::kExternal:
      break;
  }
  return std::nullopt;
}

}  // namespace spatial
