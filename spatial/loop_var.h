// Loop variables: the iteration axes of a Generic, the work item's coordinate, and the fold block index.
#ifndef SPATIAL_LOOP_VAR_H_
#define SPATIAL_LOOP_VAR_H_

#include <cstdint>
#include <string_view>

namespace spatial {

// Values match proto/program.proto's LoopVar.
enum class LoopVar : uint8_t {
  kUnspecified = 0,
  kRow = 1,    // a Generic's row axis
  kCol = 2,    // a Generic's column axis
  kK = 3,      // a Generic's third axis
  kItemY = 4,  // the work item's coord.y (load/store addresses only: a Generic cannot see the item)
  kItemX = 5,  // the work item's coord.x
  kKBlock = 6, // the fold block index (body-phase load/store addresses only)
};

std::string_view LoopVarName(LoopVar v);  // "ROW", "COL", "K", "ITEM_Y", "ITEM_X", "KBLOCK"

// True for the three axes a Generic iterates; false for the item and block variables.
inline bool IsGenericAxis(LoopVar v) { return v == LoopVar::kRow || v == LoopVar::kCol || v == LoopVar::kK; }

}  // namespace spatial

#endif  // SPATIAL_LOOP_VAR_H_
