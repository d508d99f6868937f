#include "sim/machine/multicast_groups.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>

#include "spatial/semantics/trip.h"

namespace spatial {

std::vector<MulticastGroups> GroupMulticasts(const Section& s, const Placement& pl, int64_t blocks) {
  std::vector<MulticastGroups> out(s.stages.size());
  // Where each item runs: its site and its ordinal there.
  std::vector<int64_t> site_of(s.items.size(), -1), ordinal_of(s.items.size(), -1);
  for (size_t site = 0; site < pl.site_items.size(); ++site) {
    for (size_t j = 0; j < pl.site_items[site].size(); ++j) {
      site_of[pl.site_items[site][j]] = static_cast<int64_t>(site);
      ordinal_of[pl.site_items[site][j]] = static_cast<int64_t>(j);
    }
  }
  for (size_t si = 0; si < s.stages.size(); ++si) {
    const auto* load = std::get_if<Load>(&s.stages[si].op);
    if (load == nullptr || load->multicast == LoopVar::kUnspecified) continue;
    const bool along_x = load->multicast == LoopVar::kItemX;
    MulticastGroups& mg = out[si];
    mg.group_of_item.assign(s.items.size(), -1);
    // (ordinal, the other coordinate, the blocks the item folds) -> group
    std::map<std::tuple<int64_t, int64_t, int64_t>, int32_t> ids;
    std::vector<int64_t> lowest;                          // the sender's axis coordinate
    for (size_t k = 0; k < s.items.size(); ++k) {
      if (site_of[k] < 0) continue;
      const int64_t other = along_x ? s.items[k].y : s.items[k].x;
      const int64_t along = along_x ? s.items[k].x : s.items[k].y;
      auto [it, fresh] =
          ids.try_emplace({ordinal_of[k], other, ItemBlocks(s.items[k], blocks)}, static_cast<int32_t>(mg.size.size()));
      if (fresh) {
        mg.size.push_back(0);
        mg.sender_site.push_back(site_of[k]);
        mg.span_hops.push_back(0);
        lowest.push_back(along);
      }
      const int32_t g = it->second;
      mg.group_of_item[k] = g;
      ++mg.size[g];
      if (along < lowest[g]) {
        lowest[g] = along;
        mg.sender_site[g] = site_of[k];
      }
    }
    for (size_t k = 0; k < s.items.size(); ++k) {
      const int32_t g = mg.group_of_item[k];
      if (g < 0) continue;
      if (mg.size[g] < 2) {
        mg.group_of_item[k] = -1;
        continue;
      }
      const int64_t a = mg.sender_site[g], b = site_of[k];
      const int64_t hops = std::llabs(a / pl.grid_x - b / pl.grid_x) + std::llabs(a % pl.grid_x - b % pl.grid_x);
      mg.span_hops[g] = std::max(mg.span_hops[g], hops);
    }
  }
  return out;
}

}  // namespace spatial
