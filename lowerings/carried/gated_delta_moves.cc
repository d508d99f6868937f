// The widened Gated DeltaNet and the exact moves it is built from (seed 002, original lines 12845-13071).
//
// ★ A HEAD THAT IS NOT WHOLE TILES IS WIDENED TO THEM. The blocked form addresses a head by whole tiles (its memory an
// nb x nb square of them, its vectors nb of them), so a head of 16 or 80 whose memory is past the flat form's one page
// has no form of its own. Zeros past a head's d are a fixed point of the step: zero entries of k, q and v keep the
// memory zero past d in both axes and the prediction and the output zero past d, and leave the norm's sum of squares as
// it was. So each head is widened to dp, the next whole tiles (Q, K, V, Z and the norm weight per head, the memory per
// head in both axes), the blocked step runs at dp reading the head's own d for its 1/√d and its norm, and the output
// and the memory are narrowed back. Every move copies a head's run or writes zeros, so the moves are exact and a
// non-finite value stays in its own head.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/attention/relayout_rows.h"
#include "lowerings/carried/gated_delta.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

std::vector<Run> JoinedZeroRuns(const std::vector<Run>& runs) {
  std::vector<Run> out;
  out.reserve(runs.size());
  for (const Run& r : runs) {
    if (!out.empty() && !r.from && !out.back().from) {
      out.back().end = r.end;
    } else if (!out.empty() && out.back().end == r.end) {
      // an empty run
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// ★ AN ITEM IS AN OUTPUT TILE, AND IT LOADS ONLY THE SOURCE IT MOVES. A flat row spends a tile per tile-width of
// elements, so a section that loads its whole source into every item outgrows a site at a widened memory's length.
// Output tile i loads a window of W source tiles (W the most any tile's runs reach) from the tile a compile-time table
// names for it, through an IndirectTile, and reads each of its runs at the offset the same table gives: a run that
// starts mid-tile, in either array, costs nothing more. Tile i's table page holds the window's first tile, then for
// each of its runs (R of them, the most any tile holds, the unused ones empty) the column the zeros before it end at,
// the column it ends at, and its offset in the window. The page is loaded twice, once as the window's address and once
// for the body, a loaded page having one reader.
absl::StatusOr<Composition> MovedRuns(const OperandRef& src, int64_t src_len, const std::string& out,
                                      const std::vector<Run>& runs, const Target& target) {
  const int64_t n = runs.empty() ? 0 : runs.back().end;
  if (n == 0 || src_len == 0) return NotLowered("a move of nothing");
  const int64_t tw = target.tile_cols();
  const int64_t n_t = TilesOf(n, target), src_t = TilesOf(src_len, target);
  ASSIGN_OR_RETURN(Precision dt, ElemPrecision(target));
  // Each output tile's runs: its first column in the tile, the column it ends at, the source element it starts at.
  struct Piece {
    int64_t a, b, f;
  };
  std::vector<std::vector<Piece>> pieces(n_t);
  int64_t start = 0;
  for (const Run& run : runs) {
    if (run.from) {
      for (int64_t e = start; e < run.end;) {
        const int64_t i = e / tw;
        const int64_t stop = std::min(run.end, (i + 1) * tw);
        pieces[i].push_back({e - i * tw, stop - i * tw, *run.from + (e - start)});
        e = stop;
      }
    }
    start = run.end;
  }
  // The source tiles [lo, hi) a tile's pieces reach.
  auto reach = [tw](const std::vector<Piece>& ps) {
    int64_t lo = ps[0].f, hi = 0;
    for (const Piece& p : ps) {
      lo = std::min(lo, p.f);
      hi = std::max(hi, p.f + (p.b - p.a));
    }
    return std::pair<int64_t, int64_t>{lo / tw, CeilDiv(hi, tw)};
  };
  int64_t window = 1;
  size_t r_max = 1;
  for (const auto& ps : pieces) {
    if (ps.empty()) continue;
    auto [lo, hi] = reach(ps);
    window = std::max(window, hi - lo);
    r_max = std::max(r_max, ps.size());
  }
  window = std::clamp<int64_t>(window, 1, src_t);
  if (1 + 3 * static_cast<int64_t>(r_max) > tw) {
    return NotLowered("a move whose output tiles each take more runs than a table page names");
  }
  // A run's offset in the window, lifted by a tile so it is never negative: column c reads c + off − tile.
  const int64_t lift = tw;
  std::vector<int64_t> values;
  values.reserve(n_t * tw);
  for (const auto& ps : pieces) {
    const int64_t first = ps.empty() ? 0 : std::min(reach(ps).first, src_t - window);
    std::vector<int64_t> page{first};
    int64_t last = 0;
    for (size_t k = 0; k < r_max; ++k) {
      if (k < ps.size()) {
        page.insert(page.end(), {ps[k].a, ps[k].b, ps[k].f - first * tw - ps[k].a + lift});
        last = ps[k].b;
      } else {
        page.insert(page.end(), {last, last, lift});
      }
    }
    page.resize(tw, 0);
    values.insert(values.end(), page.begin(), page.end());
  }
  const int64_t reach_max = std::max<int64_t>(0, *std::max_element(values.begin(), values.end()));
  ASSIGN_OR_RETURN(Precision ix, target.index_precision_for(std::max(reach_max, src_t)));
  Template t(target.tile_rows(), tw);
  ASSIGN_OR_RETURN(TensorInit src_init, InitOf(src.fill, src_len));
  const TensorId source = t.AddTensor(src.name, TensorRole::kInput, 1, src_len, dt, std::move(src_init));
  const TensorId y = t.AddTensor(out, TensorRole::kOutput, 1, n, dt, TensorInit::Zero());
  const TensorId table =
      t.AddTensor(absl::StrCat(out, "__runs"), TensorRole::kParam, 1, n_t * tw, ix, TensorInit::Values(values));
  const BufferId addr = t.AddBuffer("in_runs_window", 1, ix);
  const StageId l_addr = t.AddLoadBlockAt("load_runs_window", table, 0, {{LoopVar::kItemX, 1}}, {.pitch = n_t}, addr);
  const BufferId at = t.AddBuffer("in_runs", 1, ix);
  const StageId l_at = t.AddLoadBlockAt("load_runs", table, 0, {{LoopVar::kItemX, 1}}, {.pitch = n_t}, at);
  const BufferId page = t.AddBuffer("in_window", window, dt);
  AccessPattern window_at{TileAddr{0, {}, IndirectTile{addr, 1, 0, src_t - window}}, 1, window, 1, src_t};
  const StageId l_page = t.AddLoadPattern("load_window", source, std::move(window_at), page);
  t.AddEdge(l_addr, addr, l_page);
  // Operands: the table's entries for each run, then the window read at each run's offset.
  std::vector<BufferId> bufs;
  std::vector<ElemAccess> maps;
  auto entry = [&](int64_t k) {
    bufs.push_back(at);
    maps.push_back(Fixed(k));
    return static_cast<int>(bufs.size()) - 1;
  };
  struct Band {
    int a, b, read;
  };
  std::vector<Band> bands;
  for (size_t k = 0; k < r_max; ++k) {
    const int a = entry(1 + 3 * k), b = entry(2 + 3 * k), off = entry(3 + 3 * k);
    bufs.push_back(page);
    maps.push_back(WithIndirect(At(-lift), off, 1, reach_max + 1));
    bands.push_back({a, b, static_cast<int>(bufs.size()) - 1});
  }
  // Nested: below a_k zeros, below b_k run k, past it the next run.
  Body body = Const(0.0);
  for (auto it = bands.rbegin(); it != bands.rend(); ++it) {
    body = Select(Pred::LtOperand(LoopVar::kCol, it->a), Const(0.0),
                  Select(Pred::LtOperand(LoopVar::kCol, it->b), Op(it->read), body));
  }
  const BufferId ob = t.AddBuffer("out", 1, dt);
  const StageId s_move = t.AddGeneric("move_runs", FlatSpace(tw), bufs, maps, IdentMap(tw), body, ob);
  t.AddEdge(l_at, at, s_move);
  t.AddEdge(l_page, page, s_move);
  const StageId st = t.AddStoreBlock("store_runs", y, 0, {{LoopVar::kItemX, 1}}, {.pitch = n_t}, ob);
  t.AddEdge(s_move, ob, st);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a move of ", n_t, " tiles"), n_t));
  return FinishSection(t, absl::StrCat("move_runs_", out), RowItems(n_t, 1), AccFor(dt), NumericsClaim::Exact(),
                       target);
}

absl::StatusOr<Composition> WidenedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names,
                                              const Target& target) {
  const int64_t hv = spec.hv(), hk = spec.hk(), d = spec.d(), rows = spec.rows();
  if (hv % hk != 0) return NotLowered("a gated delta whose v-heads are not a multiple of its k-heads");
  const int64_t tr = target.tile_rows(), tw = target.tile_cols();
  const int64_t dp = CeilDiv(d, tw) * tw;
  ASSIGN_OR_RETURN(Precision dt, ElemPrecision(target));
  const std::string& out_name = names.out;
  auto wide = [&](const std::string& what) { return absl::StrCat(out_name, "__wide_", what); };
  // `n` runs of `from` elements, each copied to the start of `to`.
  auto runs = [](int64_t n, int64_t from, int64_t to) {
    std::vector<Run> rs;
    for (int64_t u = 0; u < n; ++u) {
      rs.push_back({u * to + std::min(from, to), u * from});
      rs.push_back({(u + 1) * to, std::nullopt});
    }
    return JoinedZeroRuns(rs);
  };
  const bool chunked = TakesChunks(rows, tr);
  std::vector<Composition> parts;
  // Q, K, V and Z, each row's heads in turn; the chunked step reads them as matrices.
  auto widen = [&](int i, int64_t heads, const std::string& what) -> absl::StatusOr<std::string> {
    const std::string to = wide(what);
    const std::string flat = chunked ? absl::StrCat(to, "__rows") : to;
    ASSIGN_OR_RETURN(Composition m, MovedRuns(names.ops[i], rows * heads * d, flat, runs(rows * heads, d, dp), target));
    parts.push_back(std::move(m));
    if (chunked) {
      ASSIGN_OR_RETURN(Composition r, RelayoutRowsToDense({flat, {}}, to, rows, heads * dp, dt, target));
      parts.push_back(std::move(r));
    }
    return to;
  };
  ASSIGN_OR_RETURN(std::string q, widen(0, hk, "q"));
  ASSIGN_OR_RETURN(std::string k, widen(1, hk, "k"));
  ASSIGN_OR_RETURN(std::string v, widen(2, hv, "v"));
  ASSIGN_OR_RETURN(std::string z, widen(3, hv, "z"));
  const std::string gn = wide("gn");
  ASSIGN_OR_RETURN(Composition gn_move, MovedRuns(names.ops[7], d, gn, runs(1, d, dp), target));
  parts.push_back(std::move(gn_move));
  // The memory: head h's row a of d lands at row h·dp + a of dp, its rows past d zero; the step reads it as the
  // hv·dp x dp matrix.
  const OperandRef& st_op = names.ops[6];
  const std::string st = wide("state");
  const std::string st_rows = absl::StrCat(st, "__rows");
  std::vector<Run> into;
  for (int64_t y = 0; y < hv * dp; ++y) {
    const int64_t h = y / dp, a = y % dp;
    if (a < d) into.push_back({y * dp + d, (h * d + a) * d});
    into.push_back({(y + 1) * dp, std::nullopt});
  }
  ASSIGN_OR_RETURN(Composition st_in, MovedRuns(st_op, hv * d * d, st_rows, JoinedZeroRuns(into), target));
  const size_t first_move = parts.size();
  parts.push_back(std::move(st_in));
  ASSIGN_OR_RETURN(Composition st_dense, RelayoutRowsToDense({st_rows, {}}, st, hv * dp, dp, dt, target));
  parts.push_back(std::move(st_dense));
  const std::string out = wide("out");
  GdNames step{out, {{q, {}}, {k, {}}, {v, {}}, {z, {}}, names.ops[4], names.ops[5], {st, {}}, {gn, {}}}};
  // The widened memory is the op's own, so each row's (or chunk's) version has a name of its own and one writer.
  auto version = [st](int64_t i) { return i == 0 ? st : absl::StrCat(st, "__", i); };
  proto::GatedDeltaSpec at_dp = spec;
  at_dp.set_d(dp);
  ASSIGN_OR_RETURN(Composition blocked, BlockedGatedDelta(at_dp, step, d, version, target));
  parts.push_back(std::move(blocked));
  const int64_t last = chunked ? CeilDiv(rows, tr) : rows;
  // Back to the program's layout: the output's heads, and the memory's rows.
  ASSIGN_OR_RETURN(Composition y_back, MovedRuns({out, {}}, rows * hv * dp, out_name, runs(rows * hv, dp, d), target));
  parts.push_back(std::move(y_back));
  const std::string back = absl::StrCat(st, "__back");
  ASSIGN_OR_RETURN(Composition st_rows_back, RelayoutDenseToRows({version(last), {}}, back, hv * dp, dp, dt, target));
  parts.push_back(std::move(st_rows_back));
  std::vector<Run> from;
  for (int64_t y = 0; y < hv * d; ++y) from.push_back({y * d + d, (y / d * dp + y % d) * dp});
  ASSIGN_OR_RETURN(Composition st_out, MovedRuns({back, {}}, hv * dp * dp, st_op.name, from, target));
  const size_t last_move = parts.size();
  parts.push_back(std::move(st_out));
  // The op's memory is carried state: its first move reads it and its last move writes it, in place (State), so the
  // composition's state order holds the read before the write.
  ASSIGN_OR_RETURN(TensorInit st_init, InitOf(st_op.fill, hv * d * d));
  for (size_t i : {first_move, last_move}) {
    for (Section& s : parts[i].sections) {
      for (Tensor& t : s.tensors) {
        if (t.name != st_op.name) continue;
        t.role = TensorRole::kState;
        t.init = st_init;
      }
    }
  }
  return ComposeSections(absl::StrCat("gd_widened_", hv, "x", d), std::move(parts), target);
}

}  // namespace spatial
