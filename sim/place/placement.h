// Work items -> sites (DESIGN §8): which site of the target's grid runs each item of a section, and in what order.
//
// Items of a section are independent, so placement changes only time, never values. Two rules:
//  - the section's BlockPlan, when it has one whose grid fits the target: item (y, x) runs on site
//    (y mod plan.grid_y, x mod plan.grid_x), so the plan's 2-D decomposition (the seed's per-site M/N blocks) is
//    what the machine sees;
//  - otherwise round-robin in item order over the whole grid, row-major: item k on site k mod sites.
// A site runs its items in the order they appear in the section.
#ifndef SIM_PLACE_PLACEMENT_H_
#define SIM_PLACE_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

struct Placement {
  int64_t grid_y = 1;
  int64_t grid_x = 1;
  bool followed_plan = false;
  // site_items[y * grid_x + x]: indices into section.items, in run order.
  std::vector<std::vector<int64_t>> site_items;

  int64_t sites() const { return grid_y * grid_x; }
  int64_t sites_used() const;
};

// Never fails: a target with an empty grid is treated as one site.
Placement PlaceItems(const Section& section, const Target& target);

}  // namespace spatial

#endif  // SIM_PLACE_PLACEMENT_H_
