// Item independence for reads (DESIGN §4): the items of a section run on different sites at the same time, so no
// item may load a tile that another item of the same section stores. The output rects (work.cc) cover what items
// write to the result; this pass covers every tensor a section both loads and stores, tile by tile, through the one
// address evaluator (spatial/semantics/affine.h). An item reading and rewriting its own tiles (a State updated in
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

void CheckItemReads(SectionContext& ctx) {
  const Section& s = ctx.s;
  bool enumerated = true;  // false once the budget runs out
  bool unproven = false;   // a clash through an indirect address
  int64_t budget = kMaxEnumerated;
  std::vector<int> stores_of(s.tensors.size(), 0);
  for (const Stage& st : s.stages) {
    if (const auto* w = std::get_if<Store>(&st.op)) ++stores_of[w->tensor];
  }
  for (size_t li = 0; li < s.stages.size() && enumerated; ++li) {
    const auto* l = std::get_if<Load>(&s.stages[li].op);
    if (l == nullptr || stores_of[l->tensor] == 0) continue;
    // Which item writes each tile of the tensor (the first; two writers are the rects' check): 0 none, else 1 + the
    // item, negated when written through an indirect address. Tiles outside the tensor are the address proof's to
    // report (accesses.cc) and are skipped here.
    const int64_t tiles = ctx.TensorTiles(l->tensor);
    if (tiles > kMaxEnumerated) {
      enumerated = false;
      break;
    }
    std::vector<int64_t> writer(static_cast<size_t>(tiles), 0);
    for (const Stage& st : s.stages) {
      const auto* w = std::get_if<Store>(&st.op);
      if (w == nullptr || w->tensor != l->tensor) continue;
      const bool indirect = w->pattern.origin.indirect.has_value();
      for (size_t k = 0; k < s.items.size() && enumerated; ++k) {
        const int64_t mark = indirect ? -static_cast<int64_t>(k + 1) : static_cast<int64_t>(k + 1);
        enumerated = ForEachTile(w->pattern, st.phase, s.num_blocks, s.items[k], budget, [&](Wide t) {
          if (t >= 0 && t < tiles && writer[static_cast<size_t>(t)] == 0) writer[static_cast<size_t>(t)] = mark;
        });
      }
    }
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
