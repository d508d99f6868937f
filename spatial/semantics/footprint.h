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

// The accumulator (Dst) tiles a compute stage needs at once. A reducing Generic computes its whole output page in
// Dst before the packer writes it out (its partial results stay there while the reduction runs): its page. An
// elementwise Generic (no reduce axis) computes each output point from its inputs alone, so its page streams
// through Dst a tile at a time, packed out as it goes (tt-metal's eltwise kernels: acquire_dst, compute, pack,
// release): one tile. A MatmulTiles page lives in local memory and is computed a Dst
// sub-block at a time (tt-metal's out_subblock_h x out_subblock_w, at least one tile), each sub-block accumulating
// its K tiles in Dst and packed out before the next: one tile is the least it needs (DESIGN §8: the engine
// accumulates in Dst when the block fits, through local memory when it does not). 0 for a non-compute stage.
int64_t DstTiles(const Section& s, const Stage& st);

// Every buffer is a page FIFO with its own circular-buffer id on its site: a section needs one per buffer, and a
// site has `num_cbs` (0 or less: no limit). The certifier's CB_COUNT_EXCEEDED and the lowerings' choice of a
// narrower fold both ask here.
bool ExceedsCircularBuffers(const Section& s, int64_t num_cbs);

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_FOOTPRINT_H_
