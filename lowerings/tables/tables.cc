#include "lowerings/tables/tables.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/pointwise.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

// ★ A STAGE'S RESULT IS PLACED BY ITS ITERATION SPACE, so a flat result must iterate the flat output. Its element
// c = j*rows + i (new row j, new column i) is X[i*cols + j], and inside new row j's band [j*rows, (j+1)*rows) that
// offset is c*cols + j*(1 - rows*cols) -- affine. So a matrix transpose is `cols` bands of one read each.
// ★ A VECTOR TRANSPOSES TO ITSELF: a 1 x n row and an n x 1 column are the same flat sequence.
absl::StatusOr<Composition> FromTranspose(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "transpose", 1));
  const auto& tr = spec.transpose();
  const int64_t rows = tr.rows();
  const int64_t cols = tr.cols();
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(absl::StrCat("transpose has a negative shape (", rows, " x ", cols, ")"));
  }
  ASSIGN_OR_RETURN(const int64_t n, CheckedElements("transpose rows x cols", rows, cols));
  if (n == 0) return NotLowered("a transpose of an empty tensor");
  // A matrix transpose is one band (and one input slot) per column of X, unrolled into one Generic.
  if (rows > 1 && cols > 1) {
    RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a transpose of ", rows, " x ", cols), "bands", cols));
  }
  RETURN_IF_ERROR(RequireFp32Accumulator("a transpose", target));
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(DatapathOf(tr.float_()), target));
  ASSIGN_OR_RETURN(BufferId xin, b.Input(ops[0].name, n, ops[0].fill));
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = b.t().AddBuffer("out", cols_t, b.precision());
  Body body;
  std::vector<Slot> slots;
  if (rows == 1 || cols == 1) {
    body = Op(0);
    slots.push_back(Slot{xin, At(0)});
  } else {
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t j = 0; j < cols; ++j) {
      slots.push_back(Slot{xin, ElemAccess{j * (1 - n), {{LoopVar::kCol, cols}}, std::nullopt}});
      bands.push_back({(j + 1) * rows, Op(static_cast<int>(slots.size()) - 1)});
    }
    body = Banded(bands);
  }
  StageId s = b.Compute("transpose", FlatSpace(n), std::move(slots), IdentMap(b.t().PageWidth(cols_t)), body, out_buf);
  return FitSite(b.Finish(spec.out(), n, {s}, out_buf, absl::StrCat("transpose_", rows, "x", cols),
                          NumericsClaim::Exact()),
                 "transpose", target);
}

namespace {

// P = the first|last K of every N of X at whole-tile widths: block j of group g's part is the block at tile
// g*N_t + from_t + j*blk of X, an affine tile copy.
// ★ A DENSE SLICE IS THE FLAT ONE ON 32-ROW TILES. Over a rows x C matrix whose row is whole groups, item y = (tile
// row r, group g) = r * C / every + g starts at linear tile y * every_t in both forms, so one program serves both;
// the dense one moves a tile of 32 token rows where the flat one moves a tile holding one (32 times the DRAM bytes
// for the same values).
absl::StatusOr<Composition> TileHeadSlice(const proto::HeadSliceSpec& spec, const OperandRef& x,
                                          const std::string& out_name, int64_t groups, const Target& target) {
  const int64_t tw = target.tile_cols();
  const int64_t every_t = spec.every() / tw;
  const int64_t from_t = spec.from() / tw;
  const int64_t width_t = spec.width() / tw;
  const int64_t blk = RowBlock(width_t, target);
  const bool dense = spec.rows() > 1;
  const int64_t rows = dense ? spec.rows() : 1;
  const int64_t row_groups = groups / rows;  // dense: a row's groups (FromHeadSlice checked they divide)
  const int64_t row_tiles = CeilDiv(rows, target.tile_rows());
  const int64_t item_groups = dense ? row_tiles * row_groups : groups;
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a head slice of ", groups, " groups of ", spec.width()),
                                 CheckedMul(item_groups, width_t / blk)));
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  Template t(target.tile_rows(), tw);
  ASSIGN_OR_RETURN(TensorInit init, InitOf(x.fill, spec.n()));
  TensorId xt = t.AddTensor(x.name, TensorRole::kInput, rows, spec.n() / rows, p, std::move(init));
  TensorId yt =
      t.AddTensor(out_name, TensorRole::kOutput, rows, groups / rows * spec.width(), p, TensorInit::Zero());
  BufferId xin = t.AddBuffer("in_x", blk, p);
  StageId lx = t.AddLoadBlockAt("load_x", xt, from_t, {{LoopVar::kItemY, every_t}, {LoopVar::kItemX, blk}},
                                {.w = blk, .pitch = TilesOf(spec.n() / rows, target)}, xin);
  auto [copy, out] = CopyPage(t, xin, blk, p, dense);
  StageId st = t.AddStoreBlock(absl::StrCat("store_", out_name), yt, 0,
                               {{LoopVar::kItemY, width_t}, {LoopVar::kItemX, blk}}, {.w = blk,
                               .pitch = groups / rows * width_t}, out);
  t.AddEdge(lx, xin, copy);
  t.AddEdge(copy, out, st);
  return FinishSection(t,
                       absl::StrCat("head_slice_", groups, "x", spec.width(), "_of_", spec.every(), "_tiled",
                                    dense ? absl::StrCat("_rows", rows) : ""),
                       dense ? DenseGroupedBlockItems(row_tiles, row_groups, width_t, blk)
                             : GroupedBlockItems(groups, width_t, blk),
                       AccFor(p), NumericsClaim::Exact(), target);
}

}  // namespace

// P = the first|last K of every N of X: group g's K elements from `from` land at [g*K, (g+1)*K), one band per group,
// each an affine read X[c + g*(N - K) + from].
absl::StatusOr<Composition> FromHeadSlice(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "head_slice", 1));
  const auto& hs = spec.head_slice();
  if (hs.every() < 0 || hs.from() < 0 || hs.width() < 0 || hs.n() < 0 || hs.rows() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_slice has a negative field (every ", hs.every(), ", from ",
                                                   hs.from(), ", width ", hs.width(), ", n ", hs.n(), ", rows ",
                                                   hs.rows(), ")"));
  }
  const int64_t every = hs.every();
  const int64_t width = hs.width();
  const int64_t groups = every == 0 ? 0 : hs.n() / every;
  ASSIGN_OR_RETURN(const int64_t n, CheckedElements("head_slice n / every x width", groups, width));
  // from + width past int64 is past any group.
  const std::optional<int64_t> part_end = CheckedAdd(hs.from(), width);
  if (n == 0 || !part_end || *part_end > every) return NotLowered("a head slice of nothing, or a part past its group");
  RETURN_IF_ERROR(RequireFp32Accumulator("a head slice", target));
  if (hs.rows() > 1 && !(hs.n() % hs.rows() == 0 && (hs.n() / hs.rows()) % every == 0 &&
                         WholeTiles({every, hs.from(), width}, target))) {
    return NotLowered(absl::StrCat("a dense head slice (rows ", hs.rows(), ") needs rows of whole groups (n ", hs.n(),
                                   ", every ", every, ") and whole-tile every, from and width"));
  }
  if (WholeTiles({every, hs.from(), width}, target)) return TileHeadSlice(hs, ops[0], spec.out(), groups, target);
  // One band (and one input slot) per group, unrolled into one Generic.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a head slice of ", groups, " groups of ", width), "bands", groups));
  ASSIGN_OR_RETURN(ColumnBuild b, ColumnBuild::Columns(n, target));
  ASSIGN_OR_RETURN(BufferId xin, b.flat().Input(ops[0].name, hs.n(), ops[0].fill));
  BufferId out_buf = b.ResultPage("out", n, b.flat().precision());
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t g = 0; g < groups; ++g) {
    slots.push_back(Slot{xin, At(g * (every - width) + hs.from())});
    bands.push_back({(g + 1) * width, Op(static_cast<int>(g))});
  }
  ASSIGN_OR_RETURN(std::vector<StageId> chain, b.Pointwise("head_slice", n, std::move(slots), Banded(bands), out_buf));
  return FitSite(b.Finish(spec.out(), n, chain, out_buf,
                          absl::StrCat("head_slice_", groups, "x", width, "_of_", every), NumericsClaim::Exact()),
                 "head slice", target);
}

// J = A joined with B across H heads at whole-tile parts: unit u's run of (ha + hb)/TC tiles is its ha/TC tiles of A
// then its hb/TC of B, moved `blk` tiles an item (`blk` dividing both parts).
//
// ★ EVERY ITEM RUNS THE SAME STAGES, SO THE SOURCE IS DATA. Block s of a unit comes from A for s < ha/blk and from B
// after. Each item reads both: A's block min(s, ha/blk - 1) and B's block max(s - ha/blk, 0), each an IndirectTile
// over the unit's run addressed by a compile-time table one tile per block, and keeps A's where a third table holds
// the block's width and B's where it holds zero. Every address is in its tensor, whatever the block.
//
// Dense (A rows x heads*ha, B rows x heads*hb): a unit is a tile row's head, so its run starts at linear tile
// unit * (ha/TC) of A as in the flat form (a row of A is whole heads): the same program on 32-row tiles.
absl::StatusOr<Composition> TileJoin(const OperandRef& a_op, const OperandRef& b_op, const std::string& out_name,
                                     int64_t rows, int64_t heads, int64_t ha, int64_t hb, const Target& target,
                                     bool dense) {
  const int64_t tw = target.tile_cols();
  const int64_t ha_t = ha / tw;
  const int64_t hb_t = hb / tw;
  const int64_t row_tiles = CeilDiv(rows, target.tile_rows());
  const int64_t units = dense ? row_tiles * heads : rows * heads;
  const int64_t t_rows = dense ? rows : 1;  // the tensors' rows
  int64_t blk = 1;
  for (int64_t d = std::min({ha_t, hb_t, RowBlockTiles(target)}); d > 1; --d) {
    if (ha_t % d == 0 && hb_t % d == 0) {
      blk = d;
      break;
    }
  }
  const int64_t na = ha_t / blk;
  const int64_t nb = hb_t / blk;
  const int64_t blocks = na + nb;
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a join of ", rows, " x ", heads, " units of ", ha, " + ", hb),
                                 CheckedMul(units, blocks)));
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  ASSIGN_OR_RETURN(Precision ix, target.index_precision_for(std::max(blk * tw, blocks) + 1));
  Template t(target.tile_rows(), tw);
  ASSIGN_OR_RETURN(TensorInit a_init, InitOf(a_op.fill, rows * heads * ha));
  ASSIGN_OR_RETURN(TensorInit b_init, InitOf(b_op.fill, rows * heads * hb));
  const int64_t per_row = dense ? heads : rows * heads;  // units of a tensor row
  TensorId a = t.AddTensor(a_op.name, TensorRole::kInput, t_rows, per_row * ha, p, std::move(a_init));
  TensorId b = t.AddTensor(b_op.name, TensorRole::kInput, t_rows, per_row * hb, p, std::move(b_init));
  TensorId y = t.AddTensor(out_name, TensorRole::kOutput, t_rows, per_row * (ha + hb), p, TensorInit::Zero());
  // One value a block, at element 0 of its tile.
  auto per_block = [&](const std::string& what, const std::function<int64_t(int64_t)>& value) {
    std::vector<int64_t> tiles(blocks * tw, 0);
    for (int64_t s = 0; s < blocks; ++s) tiles[s * tw] = value(s);
    return t.AddTensor(absl::StrCat(out_name, "__join_", what), TensorRole::kParam, 1, blocks * tw, ix,
                       TensorInit::Values(std::move(tiles)));
  };
  TensorId from_a = per_block("from_a", [&](int64_t s) { return std::min(s, na - 1); });
  TensorId from_b = per_block("from_b", [&](int64_t s) { return std::min(std::max<int64_t>(s - na, 0), nb - 1); });
  TensorId keep_a = per_block("keep_a", [&](int64_t s) { return s < na ? blk * tw : 0; });
  auto gather = [&](const std::string& part, TensorId tensor, TensorId table, int64_t run_t, int64_t bound) {
    BufferId pick = t.AddBufferDeep(absl::StrCat("in_", part, "_block"), 1, 1, ix);
    StageId l_pick =
        t.AddLoadBlockAt(absl::StrCat("load_", part, "_block"), table, 0, {{LoopVar::kItemX, 1}}, {}, pick);
    BufferId page = t.AddBuffer(absl::StrCat("in_", part), blk, p);
    AccessPattern pattern{TileAddr{0, {{LoopVar::kItemY, run_t}}, IndirectTile{pick, blk, 0, bound}}, 1, blk, 1, 1};
    StageId l_page = t.AddLoadPattern(absl::StrCat("load_", part), tensor, pattern, page);
    t.AddEdge(l_pick, pick, l_page);
    return std::pair<StageId, BufferId>{l_page, page};
  };
  auto [l_a, a_in] = gather("a", a, from_a, ha_t, na - 1);
  auto [l_b, b_in] = gather("b", b, from_b, hb_t, nb - 1);
  BufferId keep_in = t.AddBufferDeep("in_keep_a", 1, 1, ix);
  StageId l_keep = t.AddLoadBlockAt("load_keep_a", keep_a, 0, {{LoopVar::kItemX, 1}}, {}, keep_in);
  const int64_t w = t.PageWidth(blk);
  BufferId out = t.AddBuffer("out", blk, p);
  StageId s = t.AddGeneric("join", dense ? TileSpace(target.tile_rows(), w) : FlatSpace(w), {a_in, b_in, keep_in},
                           {IdentMap(w), IdentMap(w), Fixed(0)},
                           IdentMap(w), Select(Pred::LtOperand(LoopVar::kCol, 2), Op(0), Op(1)), out);
  StageId st = t.AddStoreBlock(absl::StrCat("store_", out_name), y, 0,
                               {{LoopVar::kItemY, ha_t + hb_t}, {LoopVar::kItemX, blk}}, {.w = blk,
                               .pitch = per_row * (ha_t + hb_t)}, out);
  t.AddEdge(l_a, a_in, s);
  t.AddEdge(l_b, b_in, s);
  t.AddEdge(l_keep, keep_in, s);
  t.AddEdge(s, out, st);
  return FinishSection(t, absl::StrCat("join_", rows, "x", heads, "_", ha, "+", hb, "_tiled", dense ? "_dense" : ""),
                       dense ? DenseGroupedBlockItems(row_tiles, heads, ha_t + hb_t, blk)
                             : GroupedBlockItems(units, ha_t + hb_t, blk),
                       AccFor(p), NumericsClaim::Exact(), target);
}

// J = A joined with B across H heads: unit u holds its ha elements of A then its hb of B at [u*(ha+hb), (u+1)*(ha+hb)):
// two bands per unit, A[c - u*hb] then B[c - (u+1)*ha].
absl::StatusOr<Composition> FromJoin(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "join", 2));
  const auto& j = spec.join();
  if (j.rows() < 0 || j.heads() < 0 || j.wa() < 0 || j.wb() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("join has a negative field (rows ", j.rows(), ", heads ",
                                                   j.heads(), ", wa ", j.wa(), ", wb ", j.wb(), ")"));
  }
  const int64_t rows = j.rows();
  const int64_t heads = j.heads();
  if (heads == 0 || j.wa() % heads != 0 || j.wb() % heads != 0) {
    return NotLowered("a join whose widths do not divide among its heads");
  }
  const int64_t ha = j.wa() / heads;
  const int64_t hb = j.wb() / heads;
  const int64_t units = rows * heads;
  const int64_t w = ha + hb;
  const int64_t n = units * w;
  if (n == 0) return NotLowered("a join of nothing");
  RETURN_IF_ERROR(RequireFp32Accumulator("a join", target));
  if (j.dense() && !(ha > 0 && hb > 0 && WholeTiles({ha, hb}, target))) {
    return NotLowered(absl::StrCat("a dense join needs both per-head parts whole tiles (", ha, " + ", hb, ")"));
  }
  if (ha > 0 && hb > 0 && WholeTiles({ha, hb}, target)) {
    return TileJoin(ops[0], ops[1], spec.out(), rows, heads, ha, hb, target, j.dense() && rows > 1);
  }
  // Up to two bands (and input slots) per unit, unrolled into one Generic.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a join of ", rows, " x ", heads, " units of ", ha, " + ", hb), "bands",
                               CheckedMul(units, int64_t{(ha > 0) + (hb > 0)})));
  ASSIGN_OR_RETURN(ColumnBuild b, ColumnBuild::Columns(n, target));
  // A part of width zero is never read: declaring it would leave a load nothing in the chain reads.
  std::optional<BufferId> ain;
  std::optional<BufferId> bin;
  if (ha > 0) {
    ASSIGN_OR_RETURN(BufferId buf, b.flat().Input(ops[0].name, rows * j.wa(), ops[0].fill));
    ain = buf;
  }
  if (hb > 0) {
    ASSIGN_OR_RETURN(BufferId buf, b.flat().Input(ops[1].name, rows * j.wb(), ops[1].fill));
    bin = buf;
  }
  BufferId out_buf = b.ResultPage("out", n, b.flat().precision());
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t u = 0; u < units; ++u) {
    if (ain) {
      slots.push_back(Slot{*ain, At(-u * hb)});
      bands.push_back({u * w + ha, Op(static_cast<int>(slots.size()) - 1)});
    }
    if (bin) {
      slots.push_back(Slot{*bin, At(-(u + 1) * ha)});
      bands.push_back({(u + 1) * w, Op(static_cast<int>(slots.size()) - 1)});
    }
  }
  ASSIGN_OR_RETURN(std::vector<StageId> chain, b.Pointwise("join", n, std::move(slots), Banded(bands), out_buf));
  return FitSite(b.Finish(spec.out(), n, chain, out_buf, absl::StrCat("join_", rows, "x", heads, "_", ha, "+", hb),
                          NumericsClaim::Exact()),
                 "join", target);
}

}  // namespace spatial
