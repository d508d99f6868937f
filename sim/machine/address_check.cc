#include "sim/machine/address_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/vm/fault.h"
#include "spatial/semantics/affine.h"

namespace spatial {

absl::Status CheckAddresses(const Section& s, int64_t blocks, int64_t tile_rows, int64_t tile_cols) {
  for (size_t si = 0; si < s.stages.size(); ++si) {
    const Stage& st = s.stages[si];
    const AccessPattern* pat = nullptr;
    TensorId tensor = -1;
    if (const auto* l = std::get_if<Load>(&st.op)) {
      pat = &l->pattern;
      tensor = l->tensor;
    } else if (const auto* w = std::get_if<Store>(&st.op)) {
      pat = &w->pattern;
      tensor = w->tensor;
    }
    if (pat == nullptr) continue;
    if (st.phase == Phase::kBody && blocks == 0) continue;  // a fold of no blocks runs no body stage
    const Tensor& t = s.tensors[tensor];
    const int64_t tiles = ((t.rows + tile_rows - 1) / tile_rows) * ((t.cols + tile_cols - 1) / tile_cols);
    const int64_t last_block = st.phase == Phase::kBody ? std::max<int64_t>(0, blocks - 1) : 0;
    const AffineForm form = TileForm(*pat);
    AddrEnv<Interval> env = ZeroEnv<Interval>();
    env[static_cast<int>(AddrVar::kKBlock)] = Interval::Of(0, last_block);
    if (pat->origin.indirect) {
      env[static_cast<int>(AddrVar::kIndex)] = Interval::Of(pat->origin.indirect->lo, pat->origin.indirect->hi);
    }
    env[static_cast<int>(AddrVar::kBlockI)] = Interval::Of(0, Wide{pat->block_h} - 1);
    env[static_cast<int>(AddrVar::kBlockJ)] = Interval::Of(0, Wide{pat->block_w} - 1);
    for (const WorkItem& item : s.items) {
      env[static_cast<int>(AddrVar::kItemY)] = Interval::Point(item.y);
      env[static_cast<int>(AddrVar::kItemX)] = Interval::Point(item.x);
      const Interval reach = Evaluate(form, env);
      if (!reach.Within(0, Wide{tiles} - 1)) {
        return vm_internal::FaultStatus(
            vm_internal::kTileOutOfRange,
            absl::StrCat("section '", s.name, "' item ", item.id, " stage '", st.name, "' (#", si, ")"),
            absl::StrCat(
            "tile ", WideToString(reach.lo < 0 ? reach.lo : reach.hi), " of tensor '", t.name, "' (", tiles, " tiles)",
            st.phase == Phase::kBody ? absl::StrCat(" over blocks [0, ", last_block, "]") : "",
            pat->origin.indirect ? absl::StrCat(" with the index in [", pat->origin.indirect->lo, ", ",
                                                pat->origin.indirect->hi, "]")
                                 : ""));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace spatial
