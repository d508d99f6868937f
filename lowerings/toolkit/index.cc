#include "lowerings/toolkit/index.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"

namespace spatial {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

int64_t SatAbs(int64_t v) { return v == std::numeric_limits<int64_t>::min() ? kI64Max : (v < 0 ? -v : v); }

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kI64Max : r;
}

int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kI64Max : r;
}

}  // namespace

absl::StatusOr<Precision> IndexType(const Target& target, int64_t space) { return target.index_precision_for(space); }

std::optional<int64_t> FillAbsBound(const proto::Fill& fill) {
  switch (fill.kind_case()) {
    case proto::Fill::kConstI:
      return SatAbs(fill.const_i());
    case proto::Fill::kPattern: {
      const int64_t shift = fill.pattern().shift();
      const int64_t last = SatAdd(SatAdd(fill.pattern().modulus(), -1), shift);
      return std::max(SatAbs(shift), SatAbs(last));
    }
    case proto::Fill::kOverrides: {
      std::optional<int64_t> bound = FillAbsBound(fill.overrides().base());
      if (!bound) return std::nullopt;
      for (const auto& s : fill.overrides().sets()) bound = std::max(*bound, SatAbs(s.value()));
      return bound;
    }
    default:
      return std::nullopt;  // Unknown, and every float fill: nothing an index can be sized by
  }
}

int64_t IndexSpace(int64_t span, int64_t per_unit, const proto::Fill& fill) {
  const std::optional<int64_t> bound = FillAbsBound(fill);
  if (!bound) return span;
  return std::max(span, SatMul(SatAdd(*bound, 1), std::max<int64_t>(per_unit, 1)));
}

absl::StatusOr<Precision> TablePrecision(bool is_float, Precision float_p, const proto::Fill& fill,
                                         const Target& target) {
  if (is_float) return float_p;
  return IndexType(target, FillAbsBound(fill).value_or(0));
}

absl::StatusOr<Precision> RowWritePrecision(bool is_float, Precision float_p, const proto::Fill& table,
                                            const proto::Fill& source, const Target& target) {
  if (is_float) return float_p;
  return IndexType(target, std::max(FillAbsBound(table).value_or(0), FillAbsBound(source).value_or(0)));
}

absl::Status RequireIndexArithmetic(std::string_view what, const Target& target) {
  if (target.elementwise_int()) return absl::OkStatus();
  return MissingCompute(absl::StrCat("an integer elementwise datapath for ", std::string(what)), target);
}

absl::StatusOr<Precision> SectionAcc(Precision dt, std::string_view what, const Target& target) {
  if (IsFloat(dt)) {
    RETURN_IF_ERROR(RequireFp32Accumulator(what, target));
    return Precision::kFp32;
  }
  // An integer table passes through the integer datapath's accumulator unchanged: a copy is exact only there.
  RETURN_IF_ERROR(RequireIndexArithmetic(what, target));
  if (target.effective_acc_tiles(dt, true) <= 0) {
    return MissingPrecision(
        absl::StrCat("an ", std::string(PrecisionName(dt)), " accumulator (Dst) for ", std::string(what)), target);
  }
  return dt;
}

absl::StatusOr<int64_t> LiteralRowOffset(int64_t index, int64_t rows, int64_t cols) {
  if (index < 1 || index > rows) return NotLowered(kLiteralRowOutside);
  return (index - 1) * cols;
}

ElemAccess GuardOf(int of, ElemAccess map, int64_t modulus) {
  map.indirect = IndirectTerm{of, 0, modulus};
  return map;
}

StageId ScalarStage(Template& t, std::string name, std::vector<BufferId> ins, std::vector<ElemAccess> maps, Body body,
                    BufferId out) {
  return t.AddGeneric(std::move(name), FlatSpace(1), std::move(ins), std::move(maps), IdentMap(t.PageWidth(1)),
                      std::move(body), out);
}

StageId BiasedIndex(Template& t, std::string name, BufferId index, int64_t admitted, BufferId out) {
  return ScalarStage(t, std::move(name), {index, index}, {Fixed(0), GuardOf(0, Fixed(0), admitted + 1)},
                     Sub(Op(1), Const(1.0)), out);
}

StageId GuardedCopy(Template& t, std::string name, BufferId value, int64_t modulus, double add, BufferId out) {
  Body body = add == 0.0 ? Op(1) : Add(Op(1), Const(add));
  return ScalarStage(t, std::move(name), {value, value}, {Fixed(0), GuardOf(0, Fixed(0), modulus)}, body, out);
}

IndexChain RowOffsetStages(FlatBuild& b, BufferId index, int64_t rows, int64_t cols, Precision ix) {
  Template& t = b.t();
  const BufferId biased = t.AddScratch("row_biased", 1, ix);
  const StageId s0 = BiasedIndex(t, "row_biased", index, rows, biased);
  const BufferId row = t.AddScratch("row_guarded", 1, ix);
  const StageId s1 = GuardedCopy(t, "row_guarded", biased, rows, 0.0, row);
  const BufferId lo = t.AddScratch("row_offset", 1, ix);
  const StageId s2 = ScalarStage(t, "row_offset", {row}, {Fixed(0)}, Mul(Op(0), Const(static_cast<double>(cols))), lo);
  return {{s0, s1, s2}, lo};
}

IndexChain CheckedCount(FlatBuild& b, BufferId count, int64_t rows, Precision ix) {
  Template& t = b.t();
  const BufferId biased = t.AddScratch("count_biased", 1, ix);
  const StageId s0 = BiasedIndex(t, "count_biased", count, rows, biased);
  const BufferId checked = t.AddScratch("count_checked", 1, ix);
  const StageId s1 = GuardedCopy(t, "count_checked", biased, rows, 1.0, checked);
  return {{s0, s1}, checked};
}

std::vector<int64_t> MergeFans(int64_t nb, int64_t fmax) {
  if (nb <= 1) return {};
  fmax = std::max<int64_t>(fmax, 2);
  // f^k >= r, an overflowing power counting as reaching.
  auto reaches = [](int64_t f, int64_t k, int64_t r) {
    int64_t p = 1;
    for (int64_t i = 0; i < k; ++i) {
      if (__builtin_mul_overflow(p, f, &p)) return true;
    }
    return p >= r;
  };
  int64_t levels = 1;
  while (!reaches(fmax, levels, nb)) ++levels;
  std::vector<int64_t> fans;
  int64_t r = nb;
  for (int64_t k = levels; k >= 1; --k) {
    int64_t f = fmax;
    for (int64_t c = 2; c <= fmax; ++c) {
      if (reaches(c, k, r)) {
        f = c;
        break;
      }
    }
    fans.push_back(f);
    r = CeilDiv(r, f);
  }
  return fans;
}

}  // namespace spatial
