#include "lowerings/toolkit/row_blocks.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"
#include "spatial/validate.h"

namespace spatial {

absl::StatusOr<std::vector<OperandRef>> IndexedOperands(const proto::OpSpec& spec, std::string_view kind, int fixed,
                                                        const proto::RowIndex& index, bool in_place) {
  const std::string k(kind);
  if (index.kind_case() == proto::RowIndex::KIND_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(k, ".index is unset"));
  }
  const bool named = index.kind_case() == proto::RowIndex::kNamed;
  const int count = fixed + (named ? 1 : 0);
  std::vector<OperandRef> ops;
  if (!in_place) {
    ASSIGN_OR_RETURN(ops, OperandsOf(spec, kind, count));
  } else {
    if (spec.operands_size() != count) {
      return NotLowered(
          absl::StrCat(k, " takes ", count, count == 1 ? " operand" : " operands", ", got ", spec.operands_size()));
    }
    // The op rewrites its table where it lies: the result IS operand 0, under its own name.
    if (spec.out() != spec.operands(0).name()) {
      return absl::InvalidArgumentError(absl::StrCat("a ", k,
                                                     " rewrites its table in place: out must name operand 0 ('",
                                                     spec.operands(0).name(), "'), got '", spec.out(), "'"));
    }
    std::set<std::string> seen;
    for (int i = 0; i < count; ++i) {
      const proto::Operand& o = spec.operands(i);
      if (o.name().empty()) return absl::InvalidArgumentError(absl::StrCat(k, " operand ", i, " has no name"));
      if (!seen.insert(o.name()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(k, " operand ", i, " is named '", o.name(), "', a name the spec already uses"));
      }
      ops.push_back({o.name(), o.fill()});
    }
  }
  if (named && ops[fixed].name != index.named()) {
    return absl::InvalidArgumentError(
        absl::StrCat(k, ".index names '", index.named(), "' but operand ", fixed, " is '", ops[fixed].name, "'"));
  }
  return ops;
}

absl::StatusOr<RowAddress> RowBlockAddress(Template& t, const proto::RowIndex& index, const OperandRef& operand,
                                           int64_t rows, int64_t row_t, int64_t blk, const Target& target) {
  std::vector<Term> steps{{LoopVar::kItemX, blk}};
  if (index.kind_case() == proto::RowIndex::kLiteral) {
    const int64_t i = index.literal();
    if (i < 1 || i > rows) return NotLowered(kLiteralRowOutside);
    return RowAddress{TileAddr{(i - 1) * row_t, std::move(steps), std::nullopt}, std::nullopt};
  }
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, IndexSpace(rows, 1, operand.fill)));
  RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
  ASSIGN_OR_RETURN(TensorInit init, InitOf(operand.fill, 1));
  const TensorId tok = t.AddTensor(operand.name, TensorRole::kInput, 1, 1, ix, std::move(init));
  const BufferId tin = t.AddBuffer(absl::StrCat("in_", operand.name), 1, ix);
  const StageId load = t.AddLoad(absl::StrCat("load_", operand.name), tok, {}, 1, tin);
  // The 0-based row, a FIFO the movement waits on; its bound [0, rows − 1] is the range check that catches the −1
  // of an index 0 (the guard inside row_index catches everything past the table).
  const BufferId row0 = t.AddBuffer("row_index", 1, ix);
  const StageId s = BiasedIndex(t, "row_index", tin, rows, row0);
  t.AddEdge(load, tin, s);
  return RowAddress{TileAddr{0, std::move(steps), IndirectTile{row0, row_t, 0, rows - 1}}, std::make_pair(s, row0)};
}

std::pair<StageId, BufferId> CopyPage(Template& t, BufferId from, int64_t blk, Precision dt, bool whole_tiles) {
  const BufferId out = t.AddBuffer("row", blk, dt);
  const int64_t w = t.PageWidth(blk);
  // A flat row lives in row 0 of its tiles: the copy walks that row of the page (a matrix's page: all its rows).
  const StageId s = t.AddGeneric("copy_row", whole_tiles ? TileSpace(t.tile_rows(), w) : FlatSpace(w), {from},
                                 {IdentMap(w)}, IdentMap(w), Op(0), out);
  return {s, out};
}

absl::StatusOr<DenseRowAt> DenseRow(Template& t, const proto::RowIndex& index, const OperandRef& operand, int64_t rows,
                                    int64_t row_t, const std::vector<Term>& steps, int movements,
                                    const Target& target) {
  const int64_t tr = target.tile_rows();
  DenseRowAt at;
  if (index.kind_case() == proto::RowIndex::kLiteral) {
    const int64_t i = index.literal();
    if (i < 1 || i > rows) return NotLowered(kLiteralRowOutside);
    const int64_t r = i - 1;
    at.tile_rows.assign(movements, RowAddress{TileAddr{(r / tr) * row_t, steps, std::nullopt}, std::nullopt});
    at.in_tile.fixed = r % tr;
    return at;
  }
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, IndexSpace(rows, 1, operand.fill)));
  RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
  ASSIGN_OR_RETURN(TensorInit init, InitOf(operand.fill, 1));
  const TensorId pos = t.AddTensor(operand.name, TensorRole::kInput, 1, 1, ix, std::move(init));
  const int64_t rows_t = CeilDiv(rows, tr);
  const Body tile = Const(static_cast<double>(tr));
  // Each consumer of the index loads the position afresh and computes what it needs from `P − 1`, held first.
  auto row_of = [&](const std::string& what, BufferId out, const Body& of_row) {
    const BufferId tin = t.AddBuffer(absl::StrCat("in_", operand.name, "_", what), 1, ix);
    const StageId load = t.AddLoad(absl::StrCat("load_", operand.name, "_", what), pos, {}, 1, tin);
    const StageId s = ScalarStage(t, what == "in_tile" ? "in_tile_row_index" : absl::StrCat("row_", what), {tin, tin},
                                  {Fixed(0), GuardOf(0, Fixed(0), rows + 1)}, of_row, out);
    t.AddEdge(load, tin, s);
    return s;
  };
  const Body r = Sub(Op(1), Const(1.0));
  static constexpr const char* kMovement[] = {"gather", "scatter"};
  for (int m = 0; m < movements; ++m) {
    const std::string what = m < 2 ? kMovement[m] : absl::StrCat("move", m);
    // The tile row ⌊r / tile⌋: an index of 0 gives −1, which the movement's bound refuses.
    const BufferId fifo = t.AddBuffer(absl::StrCat("row_", what), 1, ix);
    const StageId s = row_of(what, fifo, FloorDiv(r, tile));
    at.tile_rows.push_back(
        RowAddress{TileAddr{0, steps, IndirectTile{fifo, row_t, 0, rows_t - 1}}, std::make_pair(s, fifo)});
  }
  const BufferId in_row = t.AddScratch("in_tile_row_index", 1, ix);
  at.in_tile.stage = row_of("in_tile", in_row, Sub(r, Mul(tile, FloorDiv(r, tile))));
  at.in_tile.row = in_row;
  return at;
}

BlockPlan TileRowPlan(int64_t row_t, int64_t blk) { return BlockPlan{.per_site_n = blk, .grid_x = row_t / blk,
                                                                     .osw = blk}; }

absl::StatusOr<Composition> FinishFlatAs(FlatBuild& b, const std::string& out, int64_t n,
                                         const std::vector<StageId>& chain, BufferId out_buf, std::string name,
                                         NumericsClaim claim, Precision precision, const Target& target) {
  const int64_t cols_t = TilesOf(n, target);
  const TensorId y = b.t().AddTensor(out, TensorRole::kOutput, 1, n, precision, TensorInit::Zero());
  const StageId st = b.t().AddStore(absl::StrCat("store_", out), y, {}, cols_t, out_buf);
  return b.WireAndFinishMany(chain, {{out_buf, st}}, cols_t, std::move(name), std::move(claim));
}

NumericsClaim MovementClaim(std::string_view what, bool is_float, Precision dt) {
  return is_float ? ApproxIn(what, dt) : NumericsClaim::Exact();
}

absl::StatusOr<Composition> FitsSites(absl::StatusOr<Composition> c, std::string_view what, const Target& target) {
  if (!c.ok()) return c;
  for (const Section& s : c->sections) {
    const int64_t bytes = SiteFootprint(s, target);
    if (bytes > target.max_local_mem_bytes()) {
      const bool vowel = !what.empty() && std::string_view("aeiou").find(what.front()) != std::string_view::npos;
      return NotLowered(absl::StrCat(vowel ? "an " : "a ", std::string(what), " whose section '", s.name, "' needs ",
                                     bytes, " bytes of a site's memory, more than its ", target.max_local_mem_bytes(),
                                     " (target ", target.name(), ")"));
    }
  }
  return c;
}

absl::Status NonNegative(std::string_view kind, std::string_view field, int64_t value) {
  if (value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(kind), ".", std::string(field), " is negative (", value, ")"));
}

}  // namespace spatial

namespace spatial {

absl::Status TensorSized(std::string_view kind, int64_t a, int64_t b) {
  int64_t n;
  if (!__builtin_mul_overflow(a, b, &n) && n <= kMaxTensorElems) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(std::string(kind), ": ", a, " x ", b,
                                                 " elements is more than a tensor holds (", kMaxTensorElems, ")"));
}

}  // namespace spatial
