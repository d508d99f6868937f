// The one meaning of a site's footprint (DESIGN §6): every buffer at its declared depth, depth * page_tiles tiles
// of its precision (fp32 carries at 4 bytes per element). The lowerings, the certifier and the summaries all
// measure here, with one overflow policy: saturate at INT64_MAX, which exceeds every site.
#ifndef SPATIAL_SEMANTICS_FOOTPRINT_H_
#define SPATIAL_SEMANTICS_FOOTPRINT_H_

#include <cstdint>

#include "spatial/program.h"

namespace spatial {

int64_t BufferBytes(const Buffer& b, int64_t tile_rows, int64_t tile_cols);
int64_t SectionFootprint(const Section& s, int64_t tile_rows, int64_t tile_cols);

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_FOOTPRINT_H_
