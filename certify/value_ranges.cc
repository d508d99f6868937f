#include "certify/value_ranges.h"

#include <cmath>

#include "spatial/tensor_data.h"

namespace spatial::certify {

Interval PrecisionRange(Precision p) {
  if (!IsInteger(p)) return Interval::Everything();
  return Interval::Of(IntMin(p), IntMax(p));
}

namespace {

// Doubles far beyond int64 saturate; NaN gives no information.
Interval FloatHull(double lo, double hi) {
  if (std::isnan(lo) || std::isnan(hi)) return Interval::Everything();
  auto wide = [](double v) -> Wide {
    if (v >= 1e30) return kSaturate;
    if (v <= -1e30) return -kSaturate;
    return static_cast<Wide>(v);
  };
  return Interval::Of(wide(std::floor(lo)), wide(std::ceil(hi)));
}

}  // namespace

Interval InitRange(const Tensor& t) {
  const Interval full = PrecisionRange(t.precision);
  if (t.role == TensorRole::kInput) return full;
  Interval r = Interval::Point(0);  // missing tail values and tile padding are zero
  switch (t.init.kind) {
    case TensorInit::Kind::kZero: break;
    case TensorInit::Kind::kConstF: r = Hull(r, FloatHull(t.init.const_f, t.init.const_f)); break;
    case TensorInit::Kind::kValues:
      for (int64_t v : t.init.values) r = Hull(r, Interval::Point(v));
      break;
    case TensorInit::Kind::kFloatValues:
      for (double v : t.init.float_values) r = Hull(r, FloatHull(v, v));
      break;
    case TensorInit::Kind::kExternal: return full;
  }
  if (!IsInteger(t.precision)) return Interval::Everything();
  // A table value its precision cannot hold is stored as something else: only the precision's range is known.
  return r.Within(full.lo, full.hi) ? r : full;
}

Interval TensorRanges::Get(const Tensor& t) {
  auto [it, fresh] = ranges_.try_emplace(t.name);
  if (fresh) {
    auto g = given_.find(t.name);
    it->second = g != given_.end() && IsRunInput(t) ? Meet(g->second, InitRange(t)) : InitRange(t);
  }
  return IsInteger(t.precision) ? Meet(it->second, PrecisionRange(t.precision)) : Interval::Everything();
}

Interval TensorRanges::PageRange(const Tensor& t) {
  if (given_.contains(t.name) && IsRunInput(t)) return Get(t);
  return Hull(Get(t), Interval::Point(0));
}

void TensorRanges::AddStore(const Tensor& t, const Interval& r) {
  const Interval old = Get(t);
  const Interval full = PrecisionRange(t.precision);
  ranges_[t.name] = r.Within(full.lo, full.hi) ? Hull(old, r) : full;
}

}  // namespace spatial::certify
