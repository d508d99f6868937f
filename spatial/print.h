// A readable, deterministic listing of a program (MLIR-ish): what `spatial inspect` shows and what a person reads
// next to the seed. Buffers are shown by name, maps as "12 + 32*ROW + COL [+ 4*x1 %<16]", bodies infix.
//
// It never crashes on a malformed program (ids out of range print as "<bad buffer 7>", a body with a missing
// child prints in its flattened form), so it can show a program that failed validation.
#ifndef SPATIAL_PRINT_H_
#define SPATIAL_PRINT_H_

#include <string>

#include "spatial/program.h"

namespace spatial {

std::string PrintComposition(const Composition& c);
std::string PrintSection(const Section& s);

// "12 + 32*ROW + COL [+ 4*x1 %<16]"; "0" for the constant-zero map.
std::string MapToString(const ElemAccess& m);
// "3 + 4*ITEM_X [+ 2*@idx in [0, 7]]" (the index buffer by name when `s` is given).
std::string TileAddrToString(const TileAddr& a, const Section* s = nullptr);

}  // namespace spatial

#endif  // SPATIAL_PRINT_H_
