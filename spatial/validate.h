// Structural validation of the program model (DESIGN §3): every id in range, every stage of the right arity for
// its kind, every size positive and bounded, loop variables where they may appear, phases in order.
//
// It is purely structural: it never evaluates an address (the certifier proves addresses in range) and never
// runs the program. What passes is safe to hand to the VM, the simulator and the certifier: none of them need
// re-check an index before using it. The FIRST error is returned, naming the section, the stage (index and name),
// the field, and what was expected against what was found.
#ifndef SPATIAL_VALIDATE_H_
#define SPATIAL_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "spatial/diagnostic_status.h"
#include "spatial/program.h"

namespace spatial {

// Bounds against absurd values: each far above any real program, low enough that products of them cannot
// overflow int64 in the consumers.
inline constexpr int64_t kMaxTensorElems = int64_t{1} << 32;     // rows * cols of one tensor
inline constexpr int64_t kMaxPageTiles = int64_t{1} << 16;       // tiles in one page
inline constexpr int64_t kMaxBufferDepth = 64;                   // pages in one FIFO
inline constexpr int64_t kMaxGenericPoints = int64_t{1} << 34;   // product of one Generic's extents
inline constexpr int64_t kMaxWorkItems = int64_t{1} << 20;       // items of one section
inline constexpr int64_t kMaxFoldBlocks = int64_t{1} << 24;      // num_blocks of a section or a load
inline constexpr int64_t kMaxTileSide = 1024;                    // tile_rows, tile_cols
inline constexpr int64_t kMaxMatmulTiles = int64_t{1} << 16;     // m_tiles, n_tiles, k_tiles

// A section's numerics claim: an error growth is none (0) or at least 1, finite, and only on an approximate claim.
// The validator's rule, which the program reader applies as it reads (so a lowering cannot write a program that
// does not read back: a 16-bit matmul over K = 1024 once claimed 0.5).
absl::Status ValidateClaim(const NumericsClaim& claim, const DiagWhere& where);

// One section on a TR x TC tile.
absl::Status ValidateSection(const Section& s, int64_t tile_rows, int64_t tile_cols);

// Every section, then what ties them together: a tensor name means one rows x cols x precision everywhere, and
// every state_order step names a State tensor of its section.
absl::Status ValidateComposition(const Composition& c, int64_t tile_rows, int64_t tile_cols);
// On the composition's own tile (c.tile_rows x c.tile_cols).
absl::Status ValidateComposition(const Composition& c);

}  // namespace spatial

#endif  // SPATIAL_VALIDATE_H_
