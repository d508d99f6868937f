#include "lowerings/toolkit/k_blocks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spatial/maps.h"

namespace spatial {

BufferId IndexCopy(Template& t, const std::string& name, BufferId pick, Precision ix) {
  const BufferId index = t.AddScratch(absl::StrCat(name, "_index"), 1, ix);
  t.AddGeneric(absl::StrCat(name, "_index"), FlatSpace(1), {pick}, {Fixed(0)}, IdentMap(t.PageWidth(1)), Op(0), index);
  return index;
}

Phase AddKBlocked(Template& t, int64_t k_blocks, int64_t kb, const std::vector<KOperand>& ops,
                  const std::vector<KProduct>& products, int64_t ne, Precision ix,
                  const std::function<void(int64_t, bool, const std::string&)>& after) {
  auto emit = [&](int64_t block, bool body, const std::string& suffix) {
    for (const KOperand& o : ops) {
      std::optional<IndirectTile> gather;
      if (o.pick) gather = IndirectTile{IndexCopy(t, o.name + suffix, *o.pick, ix), o.pick_stride, 0, ne - 1};
      std::vector<Term> steps = o.steps;
      if (body) steps.push_back({LoopVar::kKBlock, o.k_step});
      const StageId load = t.AddLoadPattern(
          absl::StrCat("load_", o.name, suffix), o.tensor,
          AccessPattern{TileAddr{o.base + block * o.k_step, std::move(steps), gather}, o.block_h, o.block_w, 1, o.pitch},
          o.page);
      if (o.multicast) t.SetMulticast(load, *o.multicast);
    }
    for (const KProduct& p : products) {
      t.AddMatmul(p.name + suffix,
                  MatmulTiles{.m_tiles = 1, .n_tiles = p.n_tiles, .k_tiles = kb, .accumulate = block > 0,
                              .transpose_b = p.transpose_b, .fidelity = p.fidelity},
                  ops[p.a].page, ops[p.b].page, p.acc);
    }
    if (after) after(block, body, suffix);
  };
  emit(0, false, "");
  if (k_blocks == 2) emit(1, false, "_1");
  if (k_blocks <= 2) return Phase::kPrologue;
  t.Fold(k_blocks - 1);
  t.SetPhase(Phase::kBody);
  emit(1, true, "_k");
  return Phase::kEpilogue;
}

std::vector<WorkItem> TokenTilesInner(int64_t rows_t, int64_t cols_t, int64_t w_t) {
  std::vector<WorkItem> items;
  for (int64_t x = 0; x < cols_t; ++x) {
    for (int64_t y = 0; y < rows_t; ++y) {
      items.push_back(WorkItem{.id = x * rows_t + y, .y = y, .x = x,
                               .out = TileRect{.row0_t = y, .col0_t = x * w_t, .h_t = 1, .w_t = w_t}});
    }
  }
  return items;
}

int64_t KBlock(int64_t n_t, int64_t most) {
  for (int64_t kb = std::min(n_t, most); kb > 1; --kb) {
    if (n_t % kb == 0) return kb;
  }
  return 1;
}

}  // namespace spatial
