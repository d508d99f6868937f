#include "lowerings/attention/flash.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash_fold.h"
#include "lowerings/attention/flash_mask.h"
#include "lowerings/attention/flash_prefill.h"
#include "lowerings/attention/flash_split.h"
#include "lowerings/tables/tables.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/pointwise.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/semantics/footprint.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

Composition ComposeSections(std::string name, std::vector<Composition> parts, const Target& target) {
  Composition c;
  c.name = std::move(name);
  for (Composition& p : parts) {
    for (Section& s : p.sections) c.sections.push_back(std::move(s));
  }
  c.target = target.name();
  c.tile_rows = target.tile_rows();
  c.tile_cols = target.tile_cols();
  DeclareStateOrder(c);
  return c;
}

absl::StatusOr<Composition> SpreadSinks(const OperandRef& sinks, int64_t per_row, const std::string& out, int64_t n,
                                        const std::function<std::optional<int64_t>(int64_t)>& head_of,
                                        const Target& target) {
  ASSIGN_OR_RETURN(ColumnBuild b, ColumnBuild::Columns(n, target));
  ASSIGN_OR_RETURN(BufferId sk, b.flat().Input(sinks.name, per_row, sinks.fill));
  const BufferId out_buf = b.ResultPage("sinks", n, b.flat().precision());
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t e = 0; e < n;) {
    const std::optional<int64_t> head = head_of(e);
    int64_t end = e + 1;
    while (end < n && head_of(end) == head) ++end;
    // One band per run of a head's elements: bounded as it is built, so a huge spread stops here.
    if (static_cast<int64_t>(bands.size()) >= kMaxUnrolled) {
      return UnrollBudget(absl::StrCat("a spread of sinks over ", n, " elements"), "bands", std::nullopt);
    }
    Body body = Const(kMasked);
    if (head) {
      slots.push_back(Slot{sk, Fixed(*head)});
      body = Op(static_cast<int>(slots.size()) - 1);
    }
    bands.push_back({end, body});
    e = end;
  }
  // A section whose every row is unfilled still reads its operand, so the load has a reader.
  if (slots.empty()) slots.push_back(Slot{sk, Fixed(0)});
  ASSIGN_OR_RETURN(std::vector<StageId> chain,
                   b.Pointwise("spread_sinks", n, std::move(slots), Banded(bands), out_buf));
  return b.Finish(out, n, chain, out_buf, absl::StrCat("spread_sinks_", n), NumericsClaim::Exact());
}

absl::StatusOr<Composition> FlashAttention(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                           const Target& target) {
  if (target.tile_rows() != target.tile_cols()) {
    return NotLowered(
        "a flash attention fold on a tile that is not square — a block's positions are its scores' columns");
  }
  // A 16-bit Dst (AttentionSpec.dest_acc) is the prefill fold's only, whose running state is fp32 buffers too: a
  // target with no fp32 accumulator is refused for that first, as without one.
  if (g.dest != Precision::kFp32) {
    RETURN_IF_ERROR(RequireFp32Accumulator("the flash fold's running softmax", target));
  }
  const auto outside_prefill = [&] {
    return NotLowered(
        "a 16-bit Dst (dest_acc BF16) outside the prefill fold (tt-metal's streaming kernel): this attention takes "
        "the one-tile fold, whose running state stays in a 32-bit Dst");
  };
  if (g.dest != Precision::kFp32 && !PrefillFoldApplies(g, target)) return outside_prefill();
  if (g.kv_per_item && !PrefillFoldApplies(g, target)) {
    return NotLowered(
        "K/V read per item (kv_reads PER_ITEM) outside the prefill fold (tt-metal's causal SDPA kernels): this "
        "attention takes the one-tile fold");
  }
  if (g.contiguous_chunks && !PrefillFoldApplies(g, target)) {
    return NotLowered(
        "tt-metal's contiguous chunk split (chunk_split CONTIGUOUS) outside the prefill fold: this attention takes "
        "the one-tile fold, whose items are not query chunks");
  }
  // ★ A FOLD WHOSE RUNNING OUTPUT ALONE OUTGROWS A SITE NEVER FITS: the output is carried as nv value pages of vt
  // fp32 tiles, two deep, in every paging of the fold, so its footprint is at least that. Such a fold goes to
  // ValuePages without being built (at vd = 2^20 that is thousands of value pages of stages, twice, before the
  // footprint says no).
  const int64_t v_t = g.vd / target.tile_cols();
  const int64_t vt = RowBlock(v_t, target);
  const int64_t nv = g.v_part ? g.v_part->second : v_t / vt;
  const std::optional<int64_t> carried =
      CheckedMul(CheckedMul(CheckedMul(nv, vt), 2), target.tile_rows() * target.tile_cols() * 4);
  if (g.hd > 0 && g.vd > 0 && g.vd % target.tile_cols() == 0 &&
      (!carried || *carried > target.max_local_mem_bytes())) {
    return ValuePages(names, g, tag, target);
  }
  // A block of query rows takes the prefill fold where it applies and fits a site (flash_prefill.h), else the
  // one-tile fold.
  std::optional<Composition> prefill;
  if (PrefillFoldApplies(g, target)) {
    absl::StatusOr<Composition> p = PrefillFold(names, g, tag, target);
    if (p.ok()) {
      prefill = *std::move(p);
    } else if (!IsRefusal(p.status()) || g.dest != Precision::kFp32 || g.kv_per_item || g.contiguous_chunks) {
      // A choice only the prefill fold makes (a 16-bit Dst, K/V per item, tt-metal's chunk split): its own refusal
      // says why, where the one-tile fold would ignore the choice.
      return p.status();
    }
  }
  Composition fold;
  if (prefill) {
    fold = *std::move(prefill);
  } else if (g.dest != Precision::kFp32) {
    return outside_prefill();
  } else {
    ASSIGN_OR_RETURN(fold, FlashFold(names, g, tag, target));
    // Each value page adds four buffers (its stream, block product, carry and output); past the site's circular
    // buffers the fold goes a page at a time too.
    if (SiteFootprint(fold.sections[0], target) > target.max_local_mem_bytes() ||
        ExceedsCircularBuffers(fold.sections[0], target.proto().num_cbs())) {
      return ValuePages(names, g, tag, target);
    }
  }
  std::vector<Composition> parts;
  // Split: the parts' combine follows the fold.
  auto finish = [&](Composition fold) -> absl::StatusOr<Composition> {
    if (g.split == 1 && parts.empty()) return fold;
    std::string name = fold.name;
    parts.push_back(std::move(fold));
    if (g.split > 1) {
      ASSIGN_OR_RETURN(Composition combine, CombineParts(names, g, tag, target));
      parts.push_back(std::move(combine));
    }
    return ComposeSections(std::move(name), std::move(parts), target);
  };
  if (!g.sinks) return finish(std::move(fold));
  // ★ A SINK IS THE RUNNING SOFTMAX'S FIRST TERM. Each fold row starts from its head's sink logit as its maximum,
  // with a sum of one and no value. The sinks are first spread one tile per item, a row's sink in its own column.
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, target.tile_rows());
  auto head_of = [&](int64_t e) -> std::optional<int64_t> {
    const int64_t y = e / tw;
    const int64_t row = e % tw;
    if (g.grouped) {
      // Item y is query tile y mod GroupTiles of K/V head y / GroupTiles.
      const int64_t tiles = GroupTiles(g, target.tile_rows());
      const int64_t in_group = (y % tiles) * target.tile_rows() + row;
      if (in_group < g.q.group) return (y / tiles) * g.q.group + in_group;
      return std::nullopt;  // a regrouped tile's pad rows: MASKED, a term e^(MASKED - m) = 0
    }
    return y % fi.per_row;
  };
  ASSIGN_OR_RETURN(Composition spread,
                   SpreadSinks(names.operand(*g.sinks), g.q.per_row, absl::StrCat(names.out, "__flash_sinks"),
                               fi.items * tw, head_of, target));
  parts.push_back(std::move(spread));
  return finish(std::move(fold));
}

absl::StatusOr<Composition> ValuePages(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                       const Target& target) {
  const int64_t tw = target.tile_cols();
  const int64_t v_t = g.vd / tw;
  const int64_t vt = RowBlock(v_t, target);
  const int64_t pages = v_t / vt;
  if (pages < 2 || g.grouped || g.q.rows != 1 || g.v_part) {
    return NotLowered(
        "a flash attention fold — one tile of queries against one tile row of its K/V head — does not fit a site");
  }
  // One fold (and one join) per value page; join j rewrites the j pages before it, so the joins' items grow as
  // pages^2: per_row heads x (j + 1) vt-tile runs in blocks of at least RowBlock(vt) tiles.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a flash attention of values ", g.vd, " wide"), "value pages", pages));
  RETURN_IF_ERROR(WorkItemBudget(
      absl::StrCat("the value-page joins of a flash attention of values ", g.vd, " wide"),
      CheckedMul(CheckedMul(g.q.per_row, vt / RowBlock(vt, target)), pages * (pages + 1) / 2 - 1)));
  auto page_name = [&](int64_t j) { return absl::StrCat(names.out, "__values", j); };
  std::vector<Composition> parts;
  std::string name;
  for (int64_t j = 0; j < pages; ++j) {
    FlashGeometry part = g;
    part.v_part = std::make_pair(j, int64_t{1});
    ASSIGN_OR_RETURN(Composition fold, FlashAttention(names.WithOut(page_name(j)), part, tag, target));
    if (j == 0) name = fold.name;
    parts.push_back(std::move(fold));
  }
  const int64_t page = vt * tw;
  std::string joined = page_name(0);
  for (int64_t j = 1; j < pages; ++j) {
    const std::string out = j + 1 == pages ? names.out : absl::StrCat(names.out, "__values0to", j);
    ASSIGN_OR_RETURN(Composition join,
                     TileJoin(OperandRef{joined, proto::Fill()}, OperandRef{page_name(j), proto::Fill()}, out, 1,
                              g.q.per_row, j * page, page, target));
    parts.push_back(std::move(join));
    joined = out;
  }
  return ComposeSections(std::move(name), std::move(parts), target);
}

}  // namespace spatial
