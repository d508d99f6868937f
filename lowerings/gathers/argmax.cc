#include "lowerings/gathers/argmax.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ★ EXACTLY THE VM'S SCAN, NaN INCLUDED — the seed's VM: seeded with item 1, moved only by a strictly greater item, so
// a NaN at item 1 is never replaced and is the answer. Our ArgMax pool (DESIGN §3.4) ignores NaN everywhere: a NaN
// seed yields to the first number. So a NaN at item 1 enters the scan as +∞ — nothing is strictly greater, and it is
// first — which keeps the seed's answer. A NaN compares false both ways, the one test the algebra has for it:
// COL ≥ x and COL < x both fail. `x` is slot `slot`, read at the single point where this is evaluated.
Body NanHeld(int slot) {
  return Select(Pred::GeOperand(LoopVar::kCol, slot), Op(slot),
                Select(Pred::LtOperand(LoopVar::kCol, slot), Op(slot), Const(kInf)));
}

// `0 < operand` at the single point of a one-element stage: whether a scan moved off its seed.
Pred PastSeed(int slot) { return Pred::LtOperand(LoopVar::kCol, slot); }

// The row one ArgMax folds: "argmax" (the 0-based first maximum), then "one_based".
absl::StatusOr<Composition> FlatArgMax(const proto::OpSpec& spec, const OperandRef& x, const Target& target) {
  const proto::ArgMaxSpec& a = spec.argmax();
  const int64_t n = a.n();
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(DatapathOf(a.float_()), target));
  ASSIGN_OR_RETURN(Precision dt, TablePrecision(a.float_(), b.precision(), x.fill, target));
  RETURN_IF_ERROR(SectionAcc(b.precision(), "an argmax", target).status());
  // The result is a 1-based position in [1, n].
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, n));
  RETURN_IF_ERROR(RequireIndexArithmetic("an argmax position", target));
  ASSIGN_OR_RETURN(BufferId xin, b.InputPaged(x.name, n, x.fill, dt, 2));
  const int64_t one = b.t().PageWidth(1);
  const BufferId at0 = b.t().AddScratch("argmax", 1, ix);
  const Body scanned = a.float_() ? Select(Pred::Lt(LoopVar::kCol, 1), NanHeld(0), Op(0)) : Op(0);
  const StageId s1 = b.Compute("argmax", HeadSpace(1, n, IterKind::kReduceArgMax), {Slot{xin, Map2(0, 0, 1)}},
                               PerRowMap(one), scanned, at0);
  const BufferId out = b.t().AddBuffer("index", 1, ix);
  const StageId s2 =
      b.Compute("one_based", FlatSpace(1), {Slot{at0, Fixed(0)}}, IdentMap(one), Add(Op(0), Const(1.0)), out);
  return FinishFlatAs(b, spec.out(), 1, {s1, s2}, out, absl::StrCat("argmax_", n), NumericsClaim::Exact(), ix, target);
}

// `(value, position)` packed into one partial tile: the value at +0, the position at +1.
StageId PackPartial(Template& t, BufferId value, BufferId position, BufferId into) {
  return t.AddGeneric("pack_partial", FlatSpace(2), {value, position}, {Fixed(0), Fixed(0)}, IdentMap(t.PageWidth(1)),
                      Select(Pred::Lt(LoopVar::kCol, 1), Op(0), Op(1)), into);
}

// t = argmax(X) + 1 over a row wider than a site holds. Sections: the BLOCKS, then a merge tree.
//
// Cut into blocks, the row's scan is block 0's scan (seeded by item 1), then every later block's scan seeded by the
// mask (a NaN at a later block's start must not capture it), then a scan over the blocks' results in position order.
// So every block folds `blk` tiles behind ONE seed element and reports the value it holds and that value's position in
// the row; each merge level scans `fan` results the same way. The row's last block starts `blk` tiles before its end,
// overlapping the one before it — harmless: the overlap reports a position twice and the earlier report is kept. Its
// padding past n is masked, and a pad block of the tree is masked whole.
//
// ★ A MASKED POSITION FOLDS AS THE SCAN'S IDENTITY — −∞ for a float row, the type's minimum for an integer one — never
// a large finite negative: a row of logits below −1e30 is a row like any other. A masked position never replaces the
// seed, and a live value equal to the mask is kept because it comes first.
//
// A float row's partials are fp32: its values are the datapath's (exact in fp32) and a position below 2^24 is exact
// too. An integer row's partials are its own integer type.
absl::StatusOr<Composition> BlockedArgMax(const proto::OpSpec& spec, const OperandRef& x, const Target& target) {
  const proto::ArgMaxSpec& a = spec.argmax();
  const int64_t n = a.n();
  const int64_t tw = target.tile_cols();
  const int64_t blk = RowBlockTiles(target);
  const int64_t block = blk * tw;
  const int64_t x_tiles = TilesOf(n, target);
  const int64_t nb = CeilDiv(x_tiles, blk);
  Precision dt;
  if (a.float_()) {
    ASSIGN_OR_RETURN(dt, ElemPrecision(target));
  } else {
    ASSIGN_OR_RETURN(dt, IndexType(target, FillAbsBound(x.fill).value_or(0)));
  }
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, n + block + 1));
  RETURN_IF_ERROR(RequireIndexArithmetic("an argmax position", target));
  Precision pd;
  double mask;
  if (a.float_()) {
    if (n >= (int64_t{1} << 24)) {
      return MissingPrecision("int64 argmax partials (fp32 holds a position exactly only below 2^24)", target);
    }
    pd = Precision::kFp32;
    mask = -kInf;
  } else {
    ASSIGN_OR_RETURN(pd, IndexType(target, std::max(FillAbsBound(x.fill).value_or(0), n + block + 1)));
    // The least value the integer datapath holds (IntMin: sign-magnitude, -(2^31 - 1) for int32).
    mask = static_cast<double>(IntMin(pd));
  }
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(pd, "an argmax", target));
  const std::vector<int64_t> fans = MergeFans(nb, blk);
  const int64_t slots = std::max<int64_t>(
      1, std::accumulate(fans.begin(), fans.end(), int64_t{1}, [](int64_t p, int64_t f) { return p * f; }));
  // One item and four table tiles per slot of the merge tree: checked before the table is built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("an argmax of ", n), slots));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("an argmax of ", n), CheckedMul(CheckedMul(slots, 4), tw)));
  const int64_t last_start_t = x_tiles - blk;
  // Per block, four index tiles: the start TILE (the gather's index: our IndirectTile counts tiles, where the seed's
  // divides an element start by elems_per_tile), the start position (the position base), the live bound `limit + 1`
  // over the scan's 1 + block elements (element 0 is the seed), and whether the block is the row's first (its seed is
  // item 1; every other block's is the mask).
  constexpr int64_t kFields = 4;
  std::vector<int64_t> table(kFields * slots * tw, 0);
  for (int64_t b = 0; b < slots; ++b) {
    int64_t start_t = 0, live = 1, first = 0;
    if (b < nb) {
      start_t = std::min(b * blk, last_start_t);
      live = std::min(n - start_t * tw, block) + 1;
      first = b == 0 ? 1 : 0;
    }
    const int64_t fields[kFields] = {start_t, start_t * tw, live, first};
    for (int64_t f = 0; f < kFields; ++f) table[(kFields * b + f) * tw] = fields[f];
  }
  const std::string out_name = spec.out();
  auto partial = [&](size_t level) { return absl::StrCat(out_name, "__argmax_part", level); };
  Composition c;
  c.name = absl::StrCat("argmax_", n, "_blocked");

  {  // The blocks.
    Template t(target.tile_rows(), tw);
    const int64_t one = t.PageWidth(1);
    ASSIGN_OR_RETURN(TensorInit x_init, InitOf(x.fill, n));
    const TensorId xt = t.AddTensor(x.name, TensorRole::kInput, 1, n, dt, std::move(x_init));
    const TensorId tab = t.AddTensor(absl::StrCat(out_name, "__argmax_blocks"), TensorRole::kParam, 1,
                                     kFields * slots * tw, ix, TensorInit::Values(std::move(table)));
    const TensorId part = t.AddTensor(partial(0), TensorRole::kOutput, 1, slots * tw, pd, TensorInit::Zero());
    static constexpr const char* kNames[kFields] = {"start", "base", "live", "first"};
    std::vector<BufferId> field(kFields);
    std::vector<StageId> load(kFields);
    for (int64_t f = 0; f < kFields; ++f) {
      field[f] = t.AddBuffer(absl::StrCat("in_", kNames[f]), 1, ix);
      load[f] =
          t.AddLoadBlockAt(absl::StrCat("load_", kNames[f]), tab, f, {{LoopVar::kItemX, kFields}}, {}, field[f]);
    }
    const BufferId x_in = t.AddBuffer("in_x", blk, dt);
    const TileAddr origin{0, {}, IndirectTile{field[0], 1, 0, last_start_t}};
    const StageId l_x = t.AddLoadPattern("load_x", xt, AccessPattern{origin, 1, blk, 1, x_tiles}, x_in);
    t.AddEdge(load[0], field[0], l_x);
    // The seed: item 1 for the row's first block (a NaN there held as +∞), the mask for every other.
    const BufferId seed = t.AddScratch("block_seed", 1, pd);
    const StageId s_seed =
        t.AddGeneric("block_seed", FlatSpace(1), {x_in, field[3]}, {Fixed(0), Fixed(0)}, IdentMap(one),
                     Select(PastSeed(1), a.float_() ? NanHeld(0) : Op(0), Const(mask)), seed);
    // The scan over [seed, x_0, …, x_{block−1}]: element c >= 1 is position c − 1, live below the bound.
    const Body scanned =
        Select(Pred::Lt(LoopVar::kCol, 1), Op(2), Select(Pred::LtOperand(LoopVar::kCol, 1), Op(0), Const(mask)));
    const std::vector<BufferId> scan_ins{x_in, field[2], seed};
    const std::vector<ElemAccess> scan_maps{Map2(-1, 0, 1), Fixed(0), Fixed(0)};
    const BufferId at = t.AddScratch("block_argmax", 1, ix);
    const StageId s_at = t.AddGeneric("block_argmax", HeadSpace(1, block + 1, IterKind::kReduceArgMax), scan_ins,
                                      scan_maps, PerRowMap(one), scanned, at);
    // The value the scan holds. The seed reads it back at its index (`x[at − 1]`, or the seed); that read's offset is
    // −1 unless `at > 0`, a relation no range proves, so here it is the scan's maximum instead: the same scan folded
    // with Max (NaN-ignoring, as the ArgMax pool is) holds exactly the value at the first maximum's position.
    const BufferId v = t.AddScratch("block_value", 1, pd);
    const StageId s_v = t.AddGeneric("block_value", HeadSpace(1, block + 1, IterKind::kReduceMax), scan_ins, scan_maps,
                                     PerRowMap(one), scanned, v);
    // Its position in the row: base + at − 1, or base for the seed (item 1 itself in the first block).
    const BufferId pos = t.AddScratch("block_position", 1, ix);
    const StageId s_pos =
        t.AddGeneric("block_position", FlatSpace(1), {at, field[1]}, {Fixed(0), Fixed(0)}, IdentMap(one),
                     Select(PastSeed(0), Add(Sub(Op(0), Const(1.0)), Op(1)), Op(1)), pos);
    const BufferId out = t.AddBuffer("out", 1, pd);
    const StageId s_pack = PackPartial(t, v, pos, out);
    // Each hand-off's edge goes to its FIRST reader; a later stage naming the same page reads it before the last
    // reader pops it.
    t.AddEdge(l_x, x_in, s_seed);
    t.AddEdge(load[3], field[3], s_seed);
    t.AddEdge(s_seed, seed, s_at);
    t.AddEdge(load[2], field[2], s_at);
    t.AddEdge(s_at, at, s_pos);
    t.AddEdge(load[1], field[1], s_pos);
    t.AddEdge(s_v, v, s_pack);
    t.AddEdge(s_pos, pos, s_pack);
    const StageId st = t.AddStore("store_partial", part, {{LoopVar::kItemX, 1}}, 1, out);
    t.AddEdge(s_pack, out, st);
    RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("an argmax of ", spec.argmax().n()), slots));
    ASSIGN_OR_RETURN(Composition blocks, FinishSection(t, absl::StrCat("argmax_blocks_", n, "_b", blk),
                                                       ItemsPerTile(slots), acc, NumericsClaim::Exact(), target));
    c.sections.push_back(std::move(blocks.sections[0]));
  }

  int64_t n_in = slots;
  for (size_t level = 0; level < fans.size(); ++level) {
    const int64_t fan = fans[level];
    const bool root = level + 1 == fans.size();
    const int64_t n_out = n_in / fan;
    Template t(target.tile_rows(), tw);
    const int64_t one = t.PageWidth(1);
    const TensorId part_in = t.AddTensor(partial(level), TensorRole::kInput, 1, n_in * tw, pd, TensorInit::External());
    const BufferId p_in = t.AddBuffer("in_parts", fan, pd);
    const StageId l_p = t.AddLoad("load_parts", part_in, {{LoopVar::kItemX, fan}}, fan, p_in);
    // Partial f sits at column f·tile of the page: its value at +0, its position at +1.
    const ElemAccess values{0, {{LoopVar::kCol, tw}}, std::nullopt};
    const BufferId f_at = t.AddScratch("merge_argmax", 1, ix);
    const StageId s_f = t.AddGeneric("merge_argmax", HeadSpace(1, fan, IterKind::kReduceArgMax), {p_in}, {values},
                                     PerRowMap(one), Op(0), f_at);
    auto field = [&](int64_t at) { return WithIndirect(Fixed(at), 1, tw, fan); };
    const BufferId pos = t.AddScratch("merge_position", 1, pd);
    const StageId s_pos =
        t.AddGeneric("merge_position", FlatSpace(1), {p_in, f_at}, {field(1), Fixed(0)}, IdentMap(one), Op(0), pos);
    t.AddEdge(l_p, p_in, s_f);
    t.AddEdge(s_f, f_at, s_pos);
    const std::string name = absl::StrCat("argmax_merge", level + 1, "_f", fan);
    absl::StatusOr<Composition> merged;
    if (root) {
      // The row's first maximum, 1-based.
      const TensorId res = t.AddTensor(out_name, TensorRole::kOutput, 1, 1, ix, TensorInit::Zero());
      const BufferId o = t.AddBuffer("index", 1, ix);
      // An integer partial is a value or a position of the same integer type, so nothing bounds what `pos` may hold
      // but its type, and pos + 1 could wrap: it is read through a guard of the positions [0, n) first (it always
      // passes). A float partial rides the float datapath, where there is nothing to wrap.
      const bool integer = IsInteger(pd);
      const StageId s_o = t.AddGeneric(
          "one_based", FlatSpace(1), integer ? std::vector<BufferId>{pos, pos} : std::vector<BufferId>{pos},
          integer ? std::vector<ElemAccess>{Fixed(0), GuardOf(0, Fixed(0), n)} : std::vector<ElemAccess>{Fixed(0)},
          IdentMap(one), Add(Op(integer ? 1 : 0), Const(1.0)), o);
      t.AddEdge(s_pos, pos, s_o);
      const StageId st = t.AddStore(absl::StrCat("store_", out_name), res, {}, 1, o);
      t.AddEdge(s_o, o, st);
      ASSIGN_OR_RETURN(Precision root_acc, SectionAcc(ix, "an argmax", target));
      merged = FinishSection(t, name, ItemsPerTile(1), root_acc, NumericsClaim::Exact(), target);
    } else {
      const TensorId part_out =
          t.AddTensor(partial(level + 1), TensorRole::kOutput, 1, n_out * tw, pd, TensorInit::Zero());
      // The value the scan holds, read back at its index.
      const BufferId v = t.AddScratch("merge_value", 1, pd);
      const StageId s_v =
          t.AddGeneric("merge_value", FlatSpace(1), {p_in, f_at}, {field(0), Fixed(0)}, IdentMap(one), Op(0), v);
      const BufferId o = t.AddBuffer("out", 1, pd);
      const StageId s_pack = PackPartial(t, v, pos, o);
      t.AddEdge(s_v, v, s_pack);
      t.AddEdge(s_pos, pos, s_pack);
      const StageId st = t.AddStore("store_partial", part_out, {{LoopVar::kItemX, 1}}, 1, o);
      t.AddEdge(s_pack, o, st);
      RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("an argmax merge of ", n_out), n_out));
      merged = FinishSection(t, name, ItemsPerTile(n_out), acc, NumericsClaim::Exact(), target);
    }
    if (!merged.ok()) return merged.status();
    c.sections.push_back(std::move(merged->sections[0]));
    n_in = n_out;
  }
  DeclareStateOrder(c);
  c.target = target.name();
  c.tile_rows = target.tile_rows();
  c.tile_cols = target.tile_cols();
  return c;
}

}  // namespace

absl::StatusOr<Composition> FromArgMax(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "argmax", 1));
  RETURN_IF_ERROR(NonNegative("argmax", "n", spec.argmax().n()));
  RETURN_IF_ERROR(TensorSized("argmax", 1, spec.argmax().n()));
  if (spec.argmax().n() == 0) return NotLowered("an argmax of an empty tensor");
  if (TilesOf(spec.argmax().n(), target) > RowBlockTiles(target)) {
    return FitsSites(BlockedArgMax(spec, ops[0], target), "argmax", target);
  }
  return FitsSites(FlatArgMax(spec, ops[0], target), "argmax", target);
}

}  // namespace spatial
