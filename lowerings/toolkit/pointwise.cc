#include "lowerings/toolkit/pointwise.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// Walks every Select of `b` whose predicate is on COL, in the seed's order (the node, then its branches).
template <typename F>
void ForEachColumnPred(const Body& b, F&& f) {
  if (!b.defined()) return;
  const BodyNode& n = *b;
  switch (n.op) {
    case BodyOp::kOperand:
    case BodyOp::kConst:
      return;
    case BodyOp::kUnary:
    case BodyOp::kShr:
      ForEachColumnPred(n.a, f);
      return;
    case BodyOp::kSelect:
      if (n.pred.var == LoopVar::kCol) f(n.pred);
      ForEachColumnPred(n.b, f);
      ForEachColumnPred(n.c, f);
      return;
    default:  // the binary ops
      ForEachColumnPred(n.a, f);
      ForEachColumnPred(n.b, f);
      return;
  }
}

// The slots a computed bound `COL < Operand(i)` names, in first-seen order.
std::vector<int> ComputedColumnBounds(const Body& body) {
  std::vector<int> out;
  ForEachColumnPred(body, [&](const Pred& p) {
    if (!p.rhs_is_operand) return;
    const int slot = static_cast<int>(p.rhs);
    if (std::find(out.begin(), out.end(), slot) == out.end()) out.push_back(slot);
  });
  return out;
}

// The body as the blocked stage reads it: every operand moves past the table slots (`shift`), a constant column
// bound k reads the table's k - o, a computed column bound reads its moved page (`moved_bound[i]` is that page's
// slot), and any other axis' operand bound moves with its operand.
struct Rewrite {
  int shift;
  const std::vector<int64_t>& bounds;
  const std::vector<std::pair<int, int>>& moved_bound;  // (original slot, new slot)

  Body operator()(const Body& b) const {
    const BodyNode& n = *b;
    switch (n.op) {
      case BodyOp::kOperand: return Op(n.operand + shift);
      case BodyOp::kConst: return Const(n.value);
      case BodyOp::kAdd: return Add((*this)(n.a), (*this)(n.b));
      case BodyOp::kSub: return Sub((*this)(n.a), (*this)(n.b));
      case BodyOp::kMul: return Mul((*this)(n.a), (*this)(n.b));
      case BodyOp::kMin: return Min((*this)(n.a), (*this)(n.b));
      case BodyOp::kMax: return Max((*this)(n.a), (*this)(n.b));
      case BodyOp::kFloorDiv: return FloorDiv((*this)(n.a), (*this)(n.b));
      case BodyOp::kShr: return Shr((*this)(n.a), n.shift);
      case BodyOp::kUnary: return Unary(n.sfpu, (*this)(n.a));
      case BodyOp::kSelect: {
        Pred p = n.pred;
        if (p.var == LoopVar::kCol && !p.rhs_is_operand) {
          const auto at = std::find(bounds.begin(), bounds.end(), p.rhs) - bounds.begin();
          p.rhs_is_operand = true;
          p.rhs = 1 + at;
        } else if (p.var == LoopVar::kCol) {
          for (const auto& [from, to] : moved_bound) {
            if (from == p.rhs) p.rhs = to;
          }
        } else if (p.rhs_is_operand) {
          p.rhs += shift;
        }
        return Select(p, (*this)(n.b), (*this)(n.c));
      }
    }
    return b;
  }
};

}  // namespace

std::vector<int64_t> ConstantColumnBounds(const Body& body) {
  std::vector<int64_t> out;
  ForEachColumnPred(body, [&](const Pred& p) {
    if (p.rhs_is_operand) return;
    if (std::find(out.begin(), out.end(), p.rhs) == out.end()) out.push_back(p.rhs);
  });
  return out;
}

std::optional<ColumnBlocks> ColumnBlocksFor(int64_t n, const Target& target) {
  if (!RowNeedsBlocking(n, target)) return std::nullopt;
  const int64_t cols_t = TilesOf(n, target);
  const int64_t blk = RowBlock(cols_t, target);
  return ColumnBlocks{blk, cols_t / blk};
}

absl::StatusOr<ColumnBuild> ColumnBuild::Columns(int64_t n, const Target& target) {
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kFloat, target));
  const std::optional<ColumnBlocks> blocks = ColumnBlocksFor(n, target);
  // One item per block: checked before any caller builds its slots, bands or items.
  if (blocks) RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a column-blocked row of ", n, " elements"), blocks->items));
  return ColumnBuild(std::move(f), blocks, target);
}

BufferId ColumnBuild::ResultPage(const std::string& name, int64_t n, Precision precision) {
  const int64_t tiles = blocks_ ? blocks_->blk : TilesOf(n, *target_);
  return flat_.t().AddBuffer(name, tiles, precision);
}

absl::StatusOr<std::vector<StageId>> ColumnBuild::Pointwise(const std::string& name, int64_t n,
                                                            std::vector<Slot> slots, const Body& body,
                                                            BufferId dst) {
  Template& t = flat_.t();
  if (!blocks_) {
    const int64_t w = t.PageWidth(t.PageTiles(dst));
    return std::vector<StageId>{flat_.Compute(name, FlatSpace(n), std::move(slots), IdentMap(w), body, dst)};
  }
  const int64_t blk = blocks_->blk;
  const int64_t items = blocks_->items;
  const int64_t tw = target_->tile_cols();
  const int64_t span = items * blk * tw;  // the padded row: the last item's block ends here

  // Item i's page: its first column o = i * blk * tw, then each constant bound less o (negative before the item).
  const std::vector<int64_t> bounds = ConstantColumnBounds(body);
  const int64_t per = CeilDiv(1 + static_cast<int64_t>(bounds.size()), tw);
  int64_t largest = 0;
  for (int64_t k : bounds) largest = std::max(largest, k);
  ASSIGN_OR_RETURN(Precision ix, target_->index_precision_for(std::max(span, largest) + span));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a column-blocked ", name), CheckedMul(CheckedMul(items, per), tw)));
  std::vector<int64_t> values;
  values.reserve(items * per * tw);
  for (int64_t i = 0; i < items; ++i) {
    const int64_t o = i * blk * tw;
    values.push_back(o);
    for (int64_t k : bounds) values.push_back(k - o);
    values.resize((i + 1) * per * tw, 0);
  }
  TensorId table = t.AddTensor(absl::StrCat(name, "__columns"), TensorRole::kParam, 1, items * per * tw, ix,
                               TensorInit::Values(std::move(values)));
  BufferId at_table = t.AddBufferDeep(absl::StrCat("in_", name, "_columns"), 1, per, ix);
  StageId l_table = t.AddLoadBlockAt(absl::StrCat("load_", name, "_columns"), table, 0, {{LoopVar::kItemX, per}},
                                     {.w = per, .pitch = items * per}, at_table);
  flat_.AddLoadToWire(l_table, at_table);

  // The block's slots: the first column, each bound, then the section's own, then what is moved by o.
  std::vector<Slot> out{Slot{at_table, Fixed(0)}};
  for (size_t m = 0; m < bounds.size(); ++m) out.push_back(Slot{at_table, Fixed(1 + static_cast<int64_t>(m))});
  const int shift = static_cast<int>(out.size());
  const int64_t one = t.PageWidth(1);
  std::vector<StageId> stages;
  std::vector<Slot> extra;
  // A one-element index stage: body over [o, the moved value's own slot, that slot again read through `guard`],
  // into a one-tile page at ix.
  auto moved = [&](const std::string& what, const Slot& from, std::optional<IndirectTerm> guard, Body b) {
    BufferId page = t.AddScratchDeep(absl::StrCat(name, "_", what), 1, 1, ix);
    std::vector<Slot> in{Slot{at_table, Fixed(0)}, Slot{from.buf, from.map}};
    if (guard) {
      ElemAccess guarded = from.map;
      guarded.indirect = guard;
      in.push_back(Slot{from.buf, std::move(guarded)});
    }
    stages.push_back(
        flat_.Compute(absl::StrCat(name, "_", what), FlatSpace(1), std::move(in), IdentMap(one), std::move(b), page));
    extra.push_back(Slot{page, Fixed(0)});
    return static_cast<int>(extra.size()) - 1;
  };

  std::vector<Slot> own;
  std::vector<std::pair<size_t, int>> gathers;  // (own slot, extra index) whose indirect operand is resolved below
  for (size_t j = 0; j < slots.size(); ++j) {
    const Slot& slot = slots[j];
    int64_t walks = 0;
    for (const auto& [v, s] : slot.map.terms) {
      if (v == LoopVar::kCol) walks = s;
    }
    ElemAccess map = slot.map;
    if (walks == 0) {
      // The seed keeps such a slot's indirect operand unshifted (guide seed002-A §6, "stale operand index"); the
      // slot it names moved past the table, so it moves too.
      if (map.indirect) map.indirect->operand += shift;
    } else if (!map.indirect) {
      map.indirect = IndirectTerm{0, walks, span + 1};
    } else {
      // A gather already indexed by data: its index moves by s*o too. The moved value s*o + stride*idx is lifted by
      // what its negative parts can reach, so it is never negative (the seed lifts by |stride|*modulus always, and
      // not at all for a negative s -- guide seed002-A §6); an all-positive move needs no lift, and its map keeps its
      // own base, which is what lets the address be proven from the guard's admitted range alone.
      const IndirectTerm ind = *map.indirect;
      const int64_t s_abs = std::llabs(walks);
      const int64_t idx_reach = std::llabs(ind.stride) * (ind.modulus - 1);
      const int64_t lift = (ind.stride < 0 ? idx_reach : 0) + (walks < 0 ? s_abs * span : 0);
      // The index keeps its own guard: the moved stage reads it a second time through a stride-0 term admitting
      // [0, modulus), the check the gather made (the seed moves the index unguarded, so only the combined value was
      // range-checked), and which bounds the stage's integer arithmetic.
      const Slot& index = slots[ind.operand];
      std::optional<IndirectTerm> guard;
      if (!index.map.indirect) guard = IndirectTerm{1, 0, ind.modulus};
      const int k = moved(absl::StrCat("index", j), index, guard,
                          Add(Add(Mul(Op(0), Const(static_cast<double>(walks))),
                                  Mul(Op(guard ? 2 : 1), Const(static_cast<double>(ind.stride)))),
                              Const(static_cast<double>(lift))));
      map.base -= lift;
      map.indirect = IndirectTerm{-1, 1, s_abs * span + idx_reach + lift + 1};
      gathers.push_back({own.size(), k});
    }
    own.push_back(Slot{slot.buf, std::move(map)});
  }
  // A bound the section computes moves by o: bound - o.
  std::vector<std::pair<int, int>> moved_bound;
  const int base = shift + static_cast<int>(own.size());
  for (int o : ComputedColumnBounds(body)) {
    if (o < 0 || o >= static_cast<int>(slots.size())) {
      return absl::InvalidArgumentError(absl::StrCat("pointwise '", name, "' compares COL with slot ", o, " of ",
                                                     slots.size()));
    }
    // Clamped to [0, span] first: c < bound - o over c in [0, blk*tw) and o in [0, span - blk*tw] is the same test
    // for every bound below 0 (never) or above span (always), and the clamp keeps the subtraction in the index type.
    const Body clamped = Min(Max(Op(1), Const(0.0)), Const(static_cast<double>(span)));
    const int k = moved(absl::StrCat("bound", o), slots[o], std::nullopt, Sub(clamped, Op(0)));
    moved_bound.push_back({o, base + k});
  }
  for (const auto& [j, k] : gathers) own[j].map.indirect->operand = base + k;
  for (Slot& s : own) out.push_back(std::move(s));
  for (Slot& s : extra) out.push_back(std::move(s));

  Body rewritten = Rewrite{shift, bounds, moved_bound}(body);
  const int64_t w = t.PageWidth(blk);
  stages.push_back(flat_.Compute(name, FlatSpace(blk * tw), std::move(out), IdentMap(w), std::move(rewritten), dst));
  return stages;
}

absl::StatusOr<Composition> ColumnBuild::Finish(const std::string& out_name, int64_t n,
                                                const std::vector<StageId>& chain, BufferId out_buf,
                                                std::string name, NumericsClaim claim) {
  if (!blocks_) return flat_.Finish(out_name, n, chain, out_buf, std::move(name), std::move(claim));
  const int64_t cols_t = TilesOf(n, *target_);
  const int64_t blk = blocks_->blk;
  Template& t = flat_.t();
  TensorId y = t.AddTensor(out_name, TensorRole::kOutput, 1, n, flat_.precision(), TensorInit::Zero());
  StageId st = t.AddStore(absl::StrCat("store_", out_name), y, {{LoopVar::kItemX, blk}}, blk, out_buf);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a column-blocked ", name), cols_t / blk));
  return flat_.WireAndFinishItems(chain, {{out_buf, st}}, RowItems(cols_t, blk), std::move(name), std::move(claim));
}

}  // namespace spatial
