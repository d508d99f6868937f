// FromGatedDelta: the dispatch among the Gated DeltaNet forms, and the pieces they share.
#include "lowerings/carried/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/gathers/row_writes.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "passes/fit_site.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

Body DeltaGate(proto::GatedDeltaSpec::GateAct gate, Body z) {
  if (gate == proto::GatedDeltaSpec::SIGMOID) {
    return Unary(SfpuKind::Recip(), Add(Const(1.0), Unary(SfpuKind::Exp(), Mul(std::move(z), Const(-1.0)))));
  }
  return SiluExpr(std::move(z));
}

int64_t SolveFactors(int64_t c) {
  int64_t bits = 0;
  for (uint64_t v = c > 1 ? static_cast<uint64_t>(c - 1) : 0; v != 0; v >>= 1) ++bits;
  return bits > 1 ? bits : 1;
}

// Per row one pass over the memory; per block the two gate broadcasts.
int64_t SteppedSections(int64_t rows) { return 2 + rows; }

// Per chunk the gates, A and QKΓ, the solve's factors, U/W, Δ, the output and the memory update; per block the two
// gate broadcasts.
int64_t ChunkedSections(int64_t rows, int64_t tile) {
  int64_t n = 2;
  for (int64_t c = 0; c * tile < rows; ++c) n += 6 + SolveFactors(std::min(rows - c * tile, tile));
  return n;
}

bool TakesChunks(int64_t rows, int64_t tile) { return rows > 1 && ChunkedSections(rows, tile) < SteppedSections(rows); }

// ★ TWO PAGES WHERE THEY FIT, ONE WHERE THEY DO NOT. A buffer an item fills or drains once holds a second page, so the
// next item begins while this one's pages drain; where the second pages leave no room in a site (fp32 at a real width),
// one page computes the same values.
absl::StatusOr<Composition> Paged(const std::function<absl::StatusOr<Composition>(int64_t)>& build,
                                  const Target& target) {
  ASSIGN_OR_RETURN(Composition c, build(2));
  RETURN_IF_ERROR(FitSite(c, target));  // passes/fit_site.h
  return c;
}

namespace {

absl::Status CheckSpec(const proto::GatedDeltaSpec& g) {
  RETURN_IF_ERROR(CheckNotNegative("gated_delta", {{"hv", g.hv()}, {"hk", g.hk()}, {"d", g.d()},
                                                   {"rows", g.rows()}}));
  if (g.hv() == 0 || g.hk() == 0 || g.d() == 0 || g.rows() == 0) {
    return NotLowered("a gated delta step with no heads, no head dimension or no rows");
  }
  if (g.gate() != proto::GatedDeltaSpec::SILU && g.gate() != proto::GatedDeltaSpec::SIGMOID) {
    return absl::InvalidArgumentError("gated_delta.gate names no gate activation (SILU or SIGMOID)");
  }
  return EpsNano("gated_delta", g.eps()).status();
}

// The flat form: ★ A BLOCK OF ROWS IS THE STEP, ROW AFTER ROW. The delta rule is a recurrence — row r reads the memory
// row r − 1 wrote — so a block of tokens is its rows' three sections in turn against the one memory, each reading its
// row of the operands in place and writing its row of the output.
absl::StatusOr<Composition> FlatGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names,
                                           const Target& target) {
  // A recurrence is unrolled row by row: three sections (and a row write) per row.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a flat gated delta of ", spec.rows(), " rows"), "row steps", spec.rows()));
  std::vector<Composition> parts;
  for (int64_t r = 0; r < spec.rows(); ++r) {
    ASSIGN_OR_RETURN(Composition row, FlatGatedDeltaRow(spec, names, r, target));
    parts.push_back(std::move(row));
    if (spec.rows() == 1) break;
    // A row of the flat output shares its tiles with the rows beside it, so each row's output is written into the
    // table by the row write that merges one row into its tiles.
    proto::OpSpec write;
    write.set_out(names.out);
    proto::Operand* table = write.add_operands();
    table->set_name(names.out);
    table->mutable_fill()->set_const_f(0.0);
    write.add_operands()->set_name(absl::StrCat(names.out, "__o", r));
    proto::SetRowSpec* w = write.mutable_set_row();
    w->set_rows(spec.rows());
    w->set_cols(spec.hv() * spec.d());
    w->set_count(1);
    w->mutable_index()->set_literal(r + 1);  // 1-based
    w->set_float_(true);
    w->set_dense(false);
    ASSIGN_OR_RETURN(Composition merged, FromSetRow(write, target));
    parts.push_back(std::move(merged));
  }
  std::string name = parts.front().sections.front().name;
  return ComposeSections(std::move(name), std::move(parts), target);
}

// The delta rule S <- alpha (I - beta k k^T) S + beta k v^T is a contraction when the write strength beta and the
// decay alpha are in [0, 1] (Qwen3-Next makes them a sigmoid and an exp of a negative) and |k| <= 1 (its keys and
// queries are l2-normalized per head); the op's error claims assume it, and outside it the memory grows every step.
// Per element that is [0, 1] for the gates and [-1/sqrt(d), 1/sqrt(d)] for q and k (|k| <= 1 whatever the draw).
// Every section's declaration of the operand carries the domain.
Composition WithDomains(Composition c, const GdNames& names, int64_t d) {
  const double unit = 1.0 / std::sqrt(static_cast<double>(d));
  for (Section& s : c.sections) {
    for (Tensor& t : s.tensors) {
      if (t.name == names.ops[4].name || t.name == names.ops[5].name) t.domain = ValueDomain{0.0, 1.0};
      if (t.name == names.ops[0].name || t.name == names.ops[1].name) t.domain = ValueDomain{-unit, unit};
    }
  }
  return c;
}

absl::StatusOr<Composition> LowerGatedDelta(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "gated_delta", 8));
  const proto::GatedDeltaSpec& g = spec.gated_delta();
  RETURN_IF_ERROR(CheckSpec(g));
  // Every form folds at the seed's AccPolicy::F32.
  RETURN_IF_ERROR(RequireFp32Accumulator("a gated delta step", target));
  GdNames names{spec.out(), std::move(ops)};
  // The flat form keeps the whole hv·d² memory as one row; a memory past one accumulator page of its row is blocked by
  // head: a head of whole tiles as it is, any other widened to whole tiles.
  if (RowNeedsBlocking(g.hv() * g.d() * g.d(), target)) {
    const std::string carried = names.ops[6].name;
    if (g.d() % target.tile_cols() == 0) {
      return BlockedGatedDelta(g, names, g.d(), [carried](int64_t) { return carried; }, target);
    }
    return WidenedGatedDelta(g, names, target);
  }
  return FlatGatedDelta(g, names, target);
}

}  // namespace

absl::StatusOr<Composition> FromGatedDelta(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(Composition c, LowerGatedDelta(spec, target));
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "gated_delta", 8));
  return WithDomains(std::move(c), GdNames{spec.out(), std::move(ops)}, spec.gated_delta().d());
}

}  // namespace spatial
