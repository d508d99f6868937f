#include "lowerings/toolkit/common.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/checked.h"
#include "spatial/semantics/affine.h"
#include "spatial/semantics/footprint.h"
#include "spatial/maps.h"

namespace spatial {

absl::Status NotLowered(std::string_view what) {
  return absl::UnimplementedError(absl::StrCat("NotLowered: ", std::string(what)));
}

absl::Status MissingCompute(std::string_view needed, const Target& target) {
  return absl::FailedPreconditionError(
      absl::StrCat("MissingCompute: ", std::string(needed), " (target ", target.name(), ")"));
}

absl::Status MissingPrecision(std::string_view needed, const Target& target) {
  return absl::FailedPreconditionError(
      absl::StrCat("MissingPrecision: ", std::string(needed), " (target ", target.name(), ")"));
}

absl::StatusOr<Precision> FormatOf(proto::Precision p, std::string_view field, Precision dflt, const Target& target) {
  if (p == proto::PRECISION_UNSPECIFIED) return dflt;
  if (!proto::Precision_IsValid(p)) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " is not a precision (", static_cast<int>(p), ")"));
  }
  const auto f = static_cast<Precision>(p);
  if (!IsFloat(f)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), " = ", std::string(PrecisionName(f)),
                                                   " is not a float format (bf16, fp16, fp32, bfp8_b, bfp4_b)"));
  }
  if (!target.supports_storage(f)) {
    return MissingPrecision(absl::StrCat(std::string(field), " ", std::string(PrecisionName(f))), target);
  }
  return f;
}

absl::Status AccTilesExceeded(std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("AccTilesExceeded: ", std::string(what)));
}

bool IsRefusal(const absl::Status& status) {
  if (status.ok()) return false;
  for (std::string_view kind : {"NotLowered: ", "MissingCompute: ", "MissingPrecision: ", "AccTilesExceeded: "}) {
    if (absl::StartsWith(status.message(), absl::string_view(kind.data(), kind.size()))) return true;
  }
  return false;
}

absl::StatusOr<Precision> ElemPrecision(const Target& target) {
  if (auto p = target.elementwise_float()) return *p;
  return MissingCompute("a float elementwise datapath", target);
}

absl::StatusOr<Precision> DatapathPrecision(Datapath dp, const Target& target) {
  if (dp == Datapath::kFloat) return ElemPrecision(target);
  if (auto p = target.elementwise_int()) return *p;
  return MissingCompute("an integer elementwise datapath", target);
}

Precision AccFor(Precision p) { return IsInteger(p) ? p : Precision::kFp32; }

Precision MapAccFor(Precision in, Precision out, const Target& target) {
  const bool sixteen = in == Precision::kBf16 && out == Precision::kBf16;
  if (sixteen && target.effective_acc_tiles(Precision::kBf16, true) > 0) return Precision::kBf16;
  return AccFor(out);
}

NumericsClaim ApproxIn(std::string_view what, Precision p) {
  return NumericsClaim::Approx(absl::StrCat(std::string(what), " in ", std::string(PrecisionName(p))));
}

NumericsClaim ClaimOf(std::string_view what, const Body& body, Precision p) {
  if (IsInteger(p) && BodyIntegral(body)) return NumericsClaim::Exact();
  return ApproxIn(what, p);
}

int64_t TilesOf(int64_t n, const Target& target) { return std::max<int64_t>(1, CeilDiv(n, target.tile_cols())); }

int64_t RowBlockTiles(const Target& target) {
  return std::max<int64_t>(1, target.effective_acc_tiles(Precision::kFp32, true));
}

bool RowNeedsBlocking(int64_t cols, const Target& target) { return TilesOf(cols, target) > RowBlockTiles(target); }

int64_t RowBlock(int64_t row_t, const Target& target) {
  for (int64_t d = std::min(row_t, RowBlockTiles(target)); d > 1; --d) {
    if (row_t % d == 0) return d;
  }
  return 1;
}

absl::StatusOr<std::pair<int64_t, int64_t>> PointwiseShape(std::string_view kind, int64_t rows, int64_t cols,
                                                           int64_t n) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(kind), " spec has a negative shape (", rows, " x ", cols, ")"));
  }
  if (rows == 0 && cols == 0) return std::pair<int64_t, int64_t>{1, n};
  // A shape that does not hold the op's n elements is a contradiction in the spec, never a hint to ignore: the
  // program's tensors would not be the shape its caller lays the data out in.
  const std::optional<int64_t> elems = CheckedMul(rows, cols);
  if (elems != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(kind), " spec's shape_rows x shape_cols = ", rows, " x ", cols, " = ",
        elems ? absl::StrCat(*elems, " elements") : std::string("more elements than int64 counts"),
        " disagrees with ", std::string(kind), ".n = ", n));
  }
  return std::pair<int64_t, int64_t>{rows, cols};
}

namespace {

// The fill's values as integers (is_int) or reals; false when nothing is known.
struct FillValues {
  bool known = true;
  bool is_int = true;
  std::vector<int64_t> ints;
  std::vector<double> reals;
};

absl::StatusOr<FillValues> ValuesOf(const proto::Fill& fill, int64_t n) {
  FillValues v;
  switch (fill.kind_case()) {
    case proto::Fill::KIND_NOT_SET:
    case proto::Fill::kUnknown:
      v.known = false;
      return v;
    case proto::Fill::kConstI:
      v.ints.assign(n, fill.const_i());
      return v;
    case proto::Fill::kPattern: {
      // A modulus of zero or less repeats nothing: every value is the shift.
      const int64_t m = fill.pattern().modulus();
      v.ints.resize(n);
      for (int64_t p = 0; p < n; ++p) v.ints[p] = (m > 0 ? p % m : 0) + fill.pattern().shift();
      return v;
    }
    case proto::Fill::kOverrides: {
      ASSIGN_OR_RETURN(FillValues base, ValuesOf(fill.overrides().base(), n));
      if (!base.known || !base.is_int) {
        return absl::InvalidArgumentError("an Overrides fill needs an integer base fill");
      }
      for (const auto& s : fill.overrides().sets()) {
        if (s.at() < 0 || s.at() >= n) {
          return absl::InvalidArgumentError(
              absl::StrCat("an Overrides fill sets element ", s.at(), " of a ", n, "-element operand"));
        }
        base.ints[s.at()] = s.value();
      }
      return base;
    }
    case proto::Fill::kConstF:
      v.is_int = false;
      v.reals.assign(n, fill.const_f());
      return v;
    case proto::Fill::kFloatOverrides:
      v.is_int = false;
      v.reals.assign(n, fill.float_overrides().base());
      for (const auto& s : fill.float_overrides().sets()) {
        if (s.at() < 0 || s.at() >= n) {
          return absl::InvalidArgumentError(
              absl::StrCat("a FloatOverrides fill sets element ", s.at(), " of a ", n, "-element operand"));
        }
        v.reals[s.at()] = s.value();
      }
      return v;
    case proto::Fill::kRealPattern: {
      const auto& rp = fill.real_pattern();
      v.is_int = false;
      v.reals.resize(n);
      for (int64_t p = 0; p < n; ++p) {
        v.reals[p] = rp.scale() * static_cast<double>(rp.modulus() > 0 ? p % rp.modulus() : 0) + rp.offset();
      }
      return v;
    }
  }
  v.known = false;
  return v;
}

}  // namespace

absl::StatusOr<TensorInit> InitOf(const proto::Fill& fill, int64_t n) {
  if (fill.kind_case() == proto::Fill::kConstF) return TensorInit::ConstF(fill.const_f());
  if (fill.kind_case() == proto::Fill::KIND_NOT_SET || fill.kind_case() == proto::Fill::kUnknown) {
    return TensorInit::External();
  }
  // Every other fill is materialized, one value per element, into the program (size_budget.h, kMaxFillValues).
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("a fill of a negative element count (", n, ")"));
  if (n > kMaxFillValues) {
    return NotLowered(absl::StrCat("a known fill of ", n, " values, more than the ", kMaxFillValues,
                                   " a program embeds (an operand this large is a run-time input)"));
  }
  ASSIGN_OR_RETURN(FillValues v, ValuesOf(fill, n));
  if (!v.known) return TensorInit::External();
  if (v.is_int) return TensorInit::Values(std::move(v.ints));
  return TensorInit::FloatValues(std::move(v.reals));
}

absl::StatusOr<std::vector<OperandRef>> OperandsOf(const proto::OpSpec& spec, std::string_view kind, int count) {
  if (spec.operands_size() != count) {
    return NotLowered(absl::StrCat(std::string(kind), " takes ", count, count == 1 ? " operand" : " operands",
                                   ", got ", spec.operands_size()));
  }
  if (spec.out().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("a ", std::string(kind), " spec names no result (out)"));
  }
  std::set<std::string> seen{spec.out()};
  std::vector<OperandRef> ops;
  for (int i = 0; i < count; ++i) {
    const proto::Operand& o = spec.operands(i);
    if (o.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(kind), " operand ", i, " has no name"));
    }
    // The lowerings name their own tensors "{out}__..." (a scaler tile, a table, a composed op's intermediate): an
    // operand of that name would unify with one of them (found by the lowering fuzzer: a gated delta operand
    // named "{out}__sel_b" met the gather's table of another shape).
    if (absl::StartsWith(o.name(), absl::StrCat(spec.out(), "__"))) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(kind), " operand ", i, " is named '", o.name(),
                                                     "': names beginning '", spec.out(),
                                                     "__' are the lowering's own (its intermediate tensors)"));
    }
    // Tensors unify by name inside a section, so two roles under one name would silently become one tensor.
    if (!seen.insert(o.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(kind), " operand ", i, " is named '", o.name(),
                                                     "', a name the spec already uses"));
    }
    ops.push_back({o.name(), o.fill()});
  }
  return ops;
}

absl::Status CheckNotNegative(std::string_view kind, std::initializer_list<SizeField> fields) {
  for (const SizeField& f : fields) {
    if (f.value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(kind), ".", f.name, " is negative (", f.value, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckElements(std::string_view kind, std::string_view field, int64_t value) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(kind), ".", std::string(field), " is negative (", value, ")"));
  }
  if (value == 0) {
    const bool vowel = !kind.empty() && std::string_view("aeiou").find(kind.front()) != std::string_view::npos;
    return NotLowered(absl::StrCat(vowel ? "an " : "a ", std::string(kind), " of an empty tensor"));
  }
  return absl::OkStatus();
}

void WireFirstReaders(Template& t) {
  const Section& s = t.section();
  std::vector<Edge> edges;
  for (StageId i = 0; i < static_cast<StageId>(s.stages.size()); ++i) {
    for (BufferId b : s.stages[i].outs) {
      for (StageId k = i + 1; k < static_cast<StageId>(s.stages.size()); ++k) {
        if (t.StageReads(k, b)) {
          edges.push_back(Edge{i, b, k});
          break;
        }
      }
    }
  }
  for (const Edge& e : edges) t.AddEdge(e.from, e.buffer, e.to);
}

void MulticastSharedPrologue(Template& t, LoopVar axis, const std::vector<TensorId>& own) {
  const AddrVar var = axis == LoopVar::kItemX ? AddrVar::kItemX : AddrVar::kItemY;
  for (StageId i = 0; i < static_cast<StageId>(t.section().stages.size()); ++i) {
    const Stage& st = t.section().stages[i];
    const auto* ld = std::get_if<Load>(&st.op);
    if (ld != nullptr && st.phase == Phase::kPrologue && ld->multicast == LoopVar::kUnspecified &&
        !ld->pattern.origin.indirect && !TileForm(ld->pattern).Uses(var) &&
        std::find(own.begin(), own.end(), ld->tensor) == own.end()) {
      t.SetMulticast(i, axis);
    }
  }
}

absl::StatusOr<Composition> FinishSection(Template& t, std::string name, std::vector<WorkItem> items,
                                          Precision acc_precision, NumericsClaim claim, const Target& target,
                                          DstPolicy policy) {
  // A section computes into the accumulator at its acc precision; a target without one (Grayskull has no 32-bit
  // Dst) cannot run it, so it is refused here rather than certified against a register that does not exist.
  if (target.effective_acc_tiles(acc_precision, true) <= 0) {
    return MissingPrecision(absl::StrCat("an ", std::string(PrecisionName(acc_precision)), " accumulator (Dst) for ",
                                         name),
                            target);
  }
  // The certifier's limit: the Dst tiles at the section's accumulator precision (a 16-bit Dst holds twice the
  // fp32 tiles).
  const int64_t budget = target.effective_acc_tiles(acc_precision, true);
  const Section& s = t.section();
  for (const Stage& st : s.stages) {
    // The certifier's measure (spatial/semantics/footprint.h), or the seed's whole page for every Generic.
    const int64_t tiles = policy == DstPolicy::kStreamed || !st.is_generic() || st.outs.empty()
                              ? DstTiles(s, st)
                              : s.buffers[st.outs[0]].page_tiles;
    if (tiles > budget) {
      return AccTilesExceeded(absl::StrCat("stage '", st.name, "' of ", name, " computes a page of ", tiles,
                                           " tiles; the accumulator holds ", budget, " ",
                                           std::string(PrecisionName(acc_precision)), " tiles (target ",
                                           target.name(), ")"));
    }
  }
  Composition c = Single(t.Finish(std::move(name), std::move(items), acc_precision, std::move(claim)));
  c.target = target.name();
  c.tile_rows = target.tile_rows();
  c.tile_cols = target.tile_cols();
  return c;
}

}  // namespace spatial
