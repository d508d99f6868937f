#include "spatial/semantics/footprint.h"

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

}  // namespace spatial
