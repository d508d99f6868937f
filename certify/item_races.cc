// Item independence (DESIGN §3.5): the items of a section run on different sites at the same time, so no two items
// may store the same tile, and no item may load a tile that another item of the same section stores. The output
// rects (work.cc) say what items mean to write; this pass checks what their Stores address, for every stored tensor,
// tile by tile, through the one address evaluator (spatial/semantics/affine.h) — a store whose item coordinates
// disagree with its rect would otherwise pass. An item reading and rewriting its own tiles (a State updated in
// place: a KV cache row, a recurrent memory) is the exception the program model allows.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"
#include "spatial/semantics/affine.h"

namespace spatial::certify {
namespace {

// The most tile addresses the check enumerates in a section; beyond it independence is recorded as unproven.
constexpr int64_t kMaxEnumerated = int64_t{1} << 22;

// Calls f(tile) for every tile `p` can address for `item` over the blocks the run may fold and every admitted index
// value; returns false when the budget runs out first.
template <typename F>
bool ForEachTile(const AccessPattern& p, Phase phase, int64_t blocks, const WorkItem& item, int64_t& budget, F&& f) {
  const AffineForm form = TileForm(p);
  AddrEnv<Wide> env = ZeroEnv<Wide>();
  env[static_cast<int>(AddrVar::kItemY)] = item.y;
  env[static_cast<int>(AddrVar::kItemX)] = item.x;
  const int64_t last_block = phase == Phase::kBody && form.Uses(AddrVar::kKBlock) ? blocks - 1 : 0;
  const int64_t lo = p.origin.indirect ? p.origin.indirect->lo : 0, hi = p.origin.indirect ? p.origin.indirect->hi : 0;
  const Wide count = Wide{last_block + 1} * (Wide{hi} - lo + 1) * p.block_h * p.block_w;
  if (count > budget) return false;
  budget -= static_cast<int64_t>(count);
  for (int64_t k = 0; k <= last_block; ++k) {
    env[static_cast<int>(AddrVar::kKBlock)] = k;
    for (int64_t v = lo; v <= hi; ++v) {
      env[static_cast<int>(AddrVar::kIndex)] = v;
      for (int64_t i = 0; i < p.block_h; ++i) {
        env[static_cast<int>(AddrVar::kBlockI)] = i;
        for (int64_t j = 0; j < p.block_w; ++j) {
          env[static_cast<int>(AddrVar::kBlockJ)] = j;
          f(Evaluate(form, env));
        }
      }
    }
  }
  return true;
}

}  // namespace

void CheckItemIndependence(SectionContext& ctx) {
  const Section& s = ctx.s;
  bool enumerated = true;  // false once the budget runs out
  bool unproven = false;   // a clash through an indirect address
  int64_t budget = kMaxEnumerated;
  // Which item writes each tile of each stored tensor (the first): 0 none, else 1 + the item, negated when written
  // through an indirect address. Tiles outside the tensor are the address proof's to report (accesses.cc) and are
  // skipped here.
  std::vector<std::vector<int64_t>> writers(s.tensors.size());
  for (size_t si = 0; si < s.stages.size() && enumerated; ++si) {
    const auto* w = std::get_if<Store>(&s.stages[si].op);
    if (w == nullptr) continue;
    const int64_t tiles = ctx.TensorTiles(w->tensor);
    if (tiles > kMaxEnumerated) {
      enumerated = false;
      break;
    }
    std::vector<int64_t>& writer = writers[static_cast<size_t>(w->tensor)];
    writer.resize(static_cast<size_t>(tiles), 0);
    const bool indirect = w->pattern.origin.indirect.has_value();
    for (size_t k = 0; k < s.items.size() && enumerated; ++k) {
      const int64_t mark = indirect ? -static_cast<int64_t>(k + 1) : static_cast<int64_t>(k + 1);
      int64_t clash = -1;
      size_t other = 0;
      enumerated = ForEachTile(w->pattern, s.stages[si].phase, s.num_blocks, s.items[k], budget, [&](Wide t) {
        if (t < 0 || t >= tiles) return;
        int64_t& at = writer[static_cast<size_t>(t)];
        if (at == 0) {
          at = mark;
          return;
        }
        const size_t by = static_cast<size_t>((at < 0 ? -at : at) - 1);
        if (by == k || clash >= 0) return;
        // Two items whose addresses are read at run time may still write different tiles: unproven, not wrong.
        if (indirect || at < 0) {
          unproven = true;
          return;
        }
        clash = static_cast<int64_t>(t);
        other = by;
      });
      if (clash < 0 || ctx.rects_overlap) continue;
      const Tensor& t = s.tensors[w->tensor];
      ctx.Diag(codes::kItemsOverlap, static_cast<int>(si), "pattern", "no tile another item stores",
               absl::StrCat("tile ", clash),
               absl::StrCat("items ", s.items[other].id, " and ", s.items[k].id, " both store tile ", clash, " of '",
                            t.name, "': items run at the same time on different sites, so a section's items must "
                            "write disjoint tiles (does an item's coordinate disagree with its output rect?)"));
      ctx.proof.set_items_disjoint(false);
      ctx.proof.set_reads_independent(false);
      return;
    }
  }
  for (size_t li = 0; li < s.stages.size() && enumerated; ++li) {
    const auto* l = std::get_if<Load>(&s.stages[li].op);
    if (l == nullptr || writers[static_cast<size_t>(l->tensor)].empty()) continue;
    const int64_t tiles = ctx.TensorTiles(l->tensor);
    const std::vector<int64_t>& writer = writers[static_cast<size_t>(l->tensor)];
    const bool indirect_load = l->pattern.origin.indirect.has_value();
    for (size_t k = 0; k < s.items.size() && enumerated; ++k) {
      int64_t clash = -1;
      size_t other = 0;
      enumerated = ForEachTile(l->pattern, s.stages[li].phase, s.num_blocks, s.items[k], budget, [&](Wide t) {
        if (clash >= 0 || t < 0 || t >= tiles) return;
        const int64_t w = writer[static_cast<size_t>(t)];
        const size_t by = static_cast<size_t>((w < 0 ? -w : w) - 1);
        if (w == 0 || by == k) return;
        if (indirect_load || w < 0) {
          unproven = true;
          return;
        }
        clash = static_cast<int64_t>(t);
        other = by;
      });
      if (clash < 0) continue;
      const Tensor& t = s.tensors[l->tensor];
      ctx.Diag(codes::kItemsOverlap, static_cast<int>(li), "pattern", "no tile another item stores",
               absl::StrCat("tile ", clash),
               absl::StrCat("item ", s.items[k].id, " loads tile ", clash, " of '", t.name, "', which item ",
                            s.items[other].id, " of the same section stores: items run at the same time on "
                            "different sites, so a section's items must be independent"));
      ctx.proof.set_reads_independent(false);
      return;
    }
  }
  ctx.proof.set_reads_independent(enumerated && !unproven);
}

}  // namespace spatial::certify
