#include "spatial/semantics/footprint.h"

#include <algorithm>

#include "spatial/semantics/interval.h"

namespace spatial {

int64_t BufferBytes(const Buffer& b, int64_t tile_rows, int64_t tile_cols) {
  const int64_t tile = TileBytes(b.precision, ToInt64(MulSat(tile_rows, tile_cols)));
  return ToInt64(MulSat(MulSat(b.depth, b.page_tiles), tile));
}

int64_t SectionFootprint(const Section& s, int64_t tile_rows, int64_t tile_cols) {
  Wide total = 0;
  for (const Buffer& b : s.buffers) total = Clamp(total + BufferBytes(b, tile_rows, tile_cols));
  return ToInt64(total);
}

int64_t DstTiles(const Section& s, const Stage& st) {
  if (st.is_matmul()) return 1;
  if (!st.is_generic() || st.outs.empty()) return 0;
  const auto& iters = std::get<Generic>(st.op).iters;
  if (std::none_of(iters.begin(), iters.end(), [](const IterSpec& it) { return IsReduce(it.kind); })) return 1;
  const BufferId b = st.outs[0];
  return b >= 0 && b < static_cast<BufferId>(s.buffers.size()) ? s.buffers[b].page_tiles : 0;
}

bool ExceedsCircularBuffers(const Section& s, int64_t num_cbs) {
  return num_cbs > 0 && static_cast<int64_t>(s.buffers.size()) > num_cbs;
}

}  // namespace spatial
