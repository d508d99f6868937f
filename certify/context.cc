#include "certify/context.h"

#include <algorithm>

#include "spatial/maps.h"
#include "spatial/semantics/trip.h"

namespace spatial::certify {

SectionContext::SectionContext(const Composition& c, int index, const Target& t, DiagnosticSink& d,
                               proto::SectionProof& p, TensorRanges& tr)
    : comp(c),
      section_index(index),
      s(c.sections[index]),
      target(t),
      sink(d),
      proof(p),
      tensor_ranges(tr),
      tile_rows(c.tile_rows),
      tile_cols(c.tile_cols) {
  uses.resize(s.buffers.size());
  for (int i = 0; i < static_cast<int>(s.stages.size()); ++i) {
    const Stage& st = s.stages[i];
    // Stages are visited in ascending order, so "last entry is i" is the only duplicate possible.
    for (BufferId b : Reads(st)) {
      auto& r = uses[b].readers;
      if (r.empty() || r.back() != i) r.push_back(i);
    }
    for (BufferId b : st.outs) {
      auto& w = uses[b].writers;
      if (w.empty() || w.back() != i) w.push_back(i);
    }
    const AccessPattern* pattern = nullptr;
    if (const auto* l = std::get_if<Load>(&st.op)) pattern = &l->pattern;
    if (const auto* w = std::get_if<Store>(&st.op)) pattern = &w->pattern;
    if (pattern && pattern->origin.indirect) uses[pattern->origin.indirect->index].index_page = true;
  }
  min_blocks = max_blocks = s.num_blocks;
  if (s.trip && s.trip->per >= 1) {
    const Interval blocks = TripBlockRange(*s.trip);  // spatial/semantics/trip.h
    min_blocks = ToInt64(std::clamp<Wide>(blocks.lo, 0, s.num_blocks));
    max_blocks = ToInt64(std::clamp<Wide>(blocks.hi, 0, s.num_blocks));
  }
  // An item that folds fewer blocks of its own (WorkItem.blocks) is the fewest some item runs.
  for (const WorkItem& w : s.items) min_blocks = std::min(min_blocks, ItemBlocks(w, min_blocks));
}

int64_t SectionContext::TensorTiles(TensorId t) const {
  const Tensor& x = s.tensors[t];
  return CeilDiv(x.rows, tile_rows) * CeilDiv(x.cols, tile_cols);
}

void SectionContext::Diag(std::string_view code, int stage, std::string field, std::string expected,
                          std::string actual, std::string message) {
  sink.Add(code, stage, stage >= 0 ? s.stages[stage].name : std::string(), std::move(field), std::move(expected),
           std::move(actual), std::move(message));
}

std::vector<BufferId> SectionContext::Reads(const Stage& st) {
  std::vector<BufferId> r = st.ins;
  if (const auto* m = std::get_if<MatmulTiles>(&st.op); m && m->accumulate) {
    for (BufferId c : st.outs) r.push_back(c);
  }
  return r;
}

}  // namespace spatial::certify
