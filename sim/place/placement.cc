#include "sim/place/placement.h"

#include <algorithm>

namespace spatial {

int64_t Placement::sites_used() const {
  return std::count_if(site_items.begin(), site_items.end(), [](const auto& v) { return !v.empty(); });
}

Placement PlaceItems(const Section& section, const Target& target) {
  Placement p;
  p.grid_y = std::max<int64_t>(1, target.grid_y());
  p.grid_x = std::max<int64_t>(1, target.grid_x());
  p.site_items.resize(static_cast<size_t>(p.sites()));
  const auto& items = section.items;
  const bool plan_fits = section.plan.has_value() && section.plan->grid_y >= 1 && section.plan->grid_x >= 1 &&
                         section.plan->grid_y <= p.grid_y && section.plan->grid_x <= p.grid_x;
  if (plan_fits) {
    p.followed_plan = true;
    const int64_t gy = section.plan->grid_y, gx = section.plan->grid_x;
    for (size_t k = 0; k < items.size(); ++k) {
      // Coordinates may be negative in a hostile program: a true modulus keeps the site in range.
      const int64_t y = ((items[k].y % gy) + gy) % gy;
      const int64_t x = ((items[k].x % gx) + gx) % gx;
      p.site_items[static_cast<size_t>(y * p.grid_x + x)].push_back(static_cast<int64_t>(k));
    }
    return p;
  }
  for (size_t k = 0; k < items.size(); ++k) {
    p.site_items[k % p.site_items.size()].push_back(static_cast<int64_t>(k));
  }
  return p;
}

}  // namespace spatial
