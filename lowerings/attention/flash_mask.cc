#include "lowerings/attention/flash_mask.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash_fold.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

FoldItems FoldItemsOf(const FlashGeometry& g, int64_t tile_rows) {
  FoldItems fi;
  fi.rows = g.grouped ? g.kvw * GroupTiles(g, tile_rows) * tile_rows : g.q.rows;
  fi.per_row = g.grouped ? 1 : g.q.per_row;
  fi.tiles_q = CeilDiv(fi.rows, tile_rows);
  fi.items = fi.tiles_q * fi.per_row;
  return fi;
}

int64_t LiveTileRows(const FlashGeometry& g, const FoldItems& fi, int64_t tile_rows) {
  if (g.grouped) return GroupTiles(g, tile_rows) == 1 ? std::max<int64_t>(1, g.q.group) : tile_rows;
  return fi.tiles_q == 1 ? std::clamp<int64_t>(g.q.rows, 1, tile_rows) : tile_rows;
}

int AddGuardedRead(std::vector<BufferId>& ins, std::vector<ElemAccess>& maps, BufferId b, const ElemAccess& map,
                   int64_t modulus) {
  // Two reads of one element: the guard on the first reads its index through the second (a slot may not index
  // itself), and the certifier bounds both by the guard, since they read the same element of the same page.
  const int guarded = static_cast<int>(ins.size());
  ins.push_back(b);
  maps.push_back(WithIndirect(map, guarded + 1, 0, modulus));
  ins.push_back(b);
  maps.push_back(map);
  return guarded;
}

absl::StatusOr<FoldMask> AddRowLimits(Template& t, const AttentionNames& names, const FlashGeometry& g,
                                      const FoldItems& fi, int64_t blocks, int64_t block_tiles, Precision ix) {
  const int64_t tr = t.tile_rows();
  const int64_t tw = t.tile_cols();
  const int64_t w1 = t.PageWidth(1);
  FoldMask m;
  m.masked = g.limit.has_value() || g.l % tr != 0 || g.window.has_value();
  m.counted = m.masked && (blocks > 1 || g.split > 1);
  if (!m.masked) return m;
  const BufferId row_lim = t.AddScratchDeep("row_limit", 1, 1, ix);
  m.row_limit = row_lim;
  if (!g.limit) {
    // Only the tail block's positions past l are masked: every row's limit is l.
    t.AddGeneric("row_limit", HeadSpace(tr, 1), {}, {}, IdentMap(w1), Const(static_cast<double>(g.l)), row_lim);
  } else {
    std::vector<BufferId> ins;
    std::vector<ElemAccess> maps;
    Body p;
    if (!g.limit->is_operand()) {
      p = Const(static_cast<double>(g.limit->value));
    } else {
      const OperandRef& pos = names.operand(g.limit->value);
      ASSIGN_OR_RETURN(TensorInit init, InitOf(pos.fill, 1));
      const TensorId pt = t.AddTensor(pos.name, TensorRole::kInput, 1, 1, ix, std::move(init));
      m.position = pt;
      const BufferId p_in = t.AddBufferDeep(absl::StrCat("in_", pos.name), 1, 1, ix);
      t.AddLoadBlockAt(absl::StrCat("load_", pos.name), pt, 0, {}, {}, p_in);
      // `1 <= P <= rows - (T - 1)`, in two guards: P itself is first admitted in [0, bound] so that P - 1 cannot
      // leave the index integer, then P - 1 in [0, bound). A P outside faults here, naming the stage and the value,
      // before any block is read — the same P the trip admits.
      const int64_t bound = BoundMax(g.rows, g.q.rows);
      const BufferId biased = t.AddScratchDeep("count_biased", 1, 1, ix);
      std::vector<BufferId> b_ins;
      std::vector<ElemAccess> b_maps;
      const int k = AddGuardedRead(b_ins, b_maps, p_in, Fixed(0), bound + 1);
      t.AddGeneric("count_biased", FlatSpace(1), b_ins, b_maps, IdentMap(w1), Sub(Op(k), Const(1.0)), biased);
      const int kb = AddGuardedRead(ins, maps, biased, Fixed(0), bound);
      p = Add(Op(kb), Const(1.0));
    }
    Body limit = p;
    // A regrouped tile's rows are heads of the one query row: every row's limit is P.
    if (!g.grouped) {
      std::vector<int64_t> tile_rows(static_cast<size_t>(fi.items * tw), 0);
      for (int64_t y = 0; y < fi.items; ++y) tile_rows[y * tw] = (y / fi.per_row) * tr;
      const TensorId tiles_t = t.AddTensor(absl::StrCat(names.out, "__flash_tile_rows"), TensorRole::kParam, 1,
                                           fi.items * tw, ix, TensorInit::Values(std::move(tile_rows)));
      const BufferId q_row = t.AddBufferDeep("in_tile_row", 1, 1, ix);
      t.AddLoadBlockAt("load_tile_row", tiles_t, 0, {{LoopVar::kItemY, 1}}, {}, q_row);
      ins.push_back(q_row);
      maps.push_back(Fixed(0));
      const Body q_row_op = Op(static_cast<int>(ins.size()) - 1);
      std::vector<int64_t> index(static_cast<size_t>(tr * tw));
      for (int64_t e = 0; e < tr * tw; ++e) index[e] = e / tw;
      const TensorId row_index = t.AddTensor(absl::StrCat(names.out, "__flash_row_index"), TensorRole::kParam, tr, tw,
                                             ix, TensorInit::Values(std::move(index)));
      const BufferId r_in = t.AddBufferDeep("in_row_index", 1, 1, ix);
      t.AddLoadBlockAt("load_row_index", row_index, 0, {}, {}, r_in);
      ins.push_back(r_in);
      maps.push_back(PerRowMap(w1));
      const Body r_op = Op(static_cast<int>(ins.size()) - 1);
      limit = Add(Add(p, q_row_op), r_op);
    }
    t.AddGeneric("row_limit", HeadSpace(tr, 1), ins, maps, IdentMap(w1), limit, row_lim);
  }
  if (m.counted) {
    const BufferId start = t.AddScratchDeep("block_start", 2, 1, ix);
    if (g.split == 1) {
      t.AddGeneric("init_start", FlatSpace(1), {}, {}, IdentMap(w1), Const(0.0), start);
    } else {
      // Part c starts at block c: its first position, c * block_tiles * tile, from a table of one tile per part.
      std::vector<int64_t> starts(static_cast<size_t>(g.split * tw), 0);
      for (int64_t c = 0; c < g.split; ++c) starts[c * tw] = c * block_tiles * tr;
      const TensorId starts_t = t.AddTensor(absl::StrCat(names.out, "__flash_part_start"), TensorRole::kParam, 1,
                                            g.split * tw, ix, TensorInit::Values(std::move(starts)));
      const BufferId s_in = t.AddBufferDeep("in_part_start", 1, 1, ix);
      t.AddLoadBlockAt("load_part_start", starts_t, 0, {{LoopVar::kItemX, 1}}, {}, s_in);
      t.AddGeneric("init_start", FlatSpace(1), {s_in}, {Fixed(0)}, IdentMap(w1), Op(0), start);
    }
    m.start = start;
  }
  return m;
}

void AddBlockLimits(Template& t, FoldMask& m, const FlashGeometry& g, int64_t nb, Precision ix) {
  if (!m.row_limit) return;
  const int64_t tr = t.tile_rows();
  const int64_t w1 = t.PageWidth(1);
  // The carried start is b * tile < nb * tile at block b: its guard states that, and bounds what is computed from it.
  const int64_t start_span = nb * tr;
  // Each row's limit in the block's own positions: its limit less the block's start.
  if (m.start) {
    const BufferId lim_b = t.AddScratchDeep("block_limit", 1, 1, ix);
    std::vector<BufferId> ins{*m.row_limit};
    std::vector<ElemAccess> maps{PerRowMap(w1)};
    const int k = AddGuardedRead(ins, maps, *m.start, Fixed(0), start_span);
    t.AddGeneric("block_limit", HeadSpace(tr, 1), ins, maps, IdentMap(w1), Sub(Op(0), Op(k)), lim_b);
    m.lim = lim_b;
  } else {
    m.lim = m.row_limit;
  }
  if (!g.window) return;
  // A window keeps the last W positions below each row's limit: the block's floor is its limit less W. A chunk of C
  // keeps the row's own chunk: its floor, floor((limit - 1) / C) * C of the row's ABSOLUTE limit, less the block's
  // start. Either can be negative, so the comparison is signed.
  const BufferId floor_b = t.AddScratchDeep("block_floor", 1, 1, ix);
  const double span = static_cast<double>(g.window->span);
  if (g.window->kind == Window::Kind::kChunked) {
    std::vector<BufferId> ins{*m.row_limit};
    std::vector<ElemAccess> maps{PerRowMap(w1)};
    Body chunk = Mul(FloorDiv(Sub(Op(0), Const(1.0)), Const(span)), Const(span));
    if (m.start) {
      const int k = AddGuardedRead(ins, maps, *m.start, Fixed(0), start_span);
      chunk = Sub(chunk, Op(k));
    }
    t.AddGeneric("block_floor", HeadSpace(tr, 1), ins, maps, IdentMap(w1), chunk, floor_b);
  } else {
    t.AddGeneric("block_floor", HeadSpace(tr, 1), {*m.lim}, {PerRowMap(w1)}, IdentMap(w1), Sub(Op(0), Const(span)),
                 floor_b);
  }
  m.floor = floor_b;
}

BufferId AddBlockBound(Template& t, const std::string& name, BufferId row_bound, BufferId start, int64_t span,
                       int64_t cols, Precision ix) {
  const ElemAccess stat = StatMap(cols, t.tile_cols());
  const BufferId b = t.AddScratchDeep(name, 1, 1, ix);
  std::vector<BufferId> ins{row_bound};
  std::vector<ElemAccess> maps{stat};
  const int k = AddGuardedRead(ins, maps, start, Fixed(0), span);
  t.AddGeneric(name, HeadSpace(t.tile_rows(), cols), ins, maps, stat, Sub(Op(0), Op(k)), b);
  return b;
}

void AddNextStart(Template& t, const FoldMask& m, int64_t nb, int64_t step) {
  if (!m.start) return;
  const int64_t tr = t.tile_rows();
  std::vector<BufferId> ins;
  std::vector<ElemAccess> maps;
  const int k = AddGuardedRead(ins, maps, *m.start, Fixed(0), nb * tr);
  t.AddGeneric("next_start", FlatSpace(1), ins, maps, IdentMap(t.PageWidth(1)),
               Add(Op(k), Const(static_cast<double>(step))), *m.start);
}

Body Live(const FoldMask& m, LoopVar axis, Body then, Body otherwise, int at) {
  if (!m.lim) return then;
  Body kept = m.floor ? Select(Pred::GeOperand(axis, at + 1), then, otherwise) : then;
  return Select(Pred::LtOperand(axis, at), kept, otherwise);
}

void AddLimitSlots(const FoldMask& m, std::vector<BufferId>& ins, std::vector<ElemAccess>& maps,
                   const ElemAccess& map) {
  for (const std::optional<BufferId>& b : {m.lim, m.floor}) {
    if (!b) continue;
    ins.push_back(*b);
    maps.push_back(map);
  }
}

}  // namespace spatial
