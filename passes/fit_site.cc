#include "passes/fit_site.h"

#include "spatial/semantics/footprint.h"

namespace spatial {

bool FitSectionToSite(Section& s, const Target& target) {
  const int64_t cap = target.max_local_mem_bytes();
  if (SectionFootprint(s, target.tile_rows(), target.tile_cols()) <= cap) return true;
  for (Buffer& b : s.buffers) {
    if (b.kind == BufferKind::kBuffer && b.depth == 2) b.depth = 1;
  }
  return SectionFootprint(s, target.tile_rows(), target.tile_cols()) <= cap;
}

absl::Status FitSite(Composition& c, const Target& target) {
  for (Section& s : c.sections) FitSectionToSite(s, target);
  return absl::OkStatus();
}

}  // namespace spatial
