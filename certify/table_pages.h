// Pages whose contents are compile-time constants for each item: a buffer written only by a Load of a Param table
// at an address that depends on the item alone (no fold block, no index). The seed's column-blocked stages read
// their item's first column and band bounds from such a page ("{stage}__columns"), and their reads are in range
// only relationally (c + o >= k - o + o); read exactly, one item at a time, the interval proof sees it.
#ifndef CERTIFY_TABLE_PAGES_H_
#define CERTIFY_TABLE_PAGES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "spatial/program.h"

namespace spatial::certify {

class TablePages {
 public:
  TablePages(const Section& s, int64_t tile_rows, int64_t tile_cols);

  // The load that fills `b` with a compile-time table, or nullptr.
  const Load* TableLoad(BufferId b) const { return table_load_[b]; }

  // Element `offset` of buffer `b`'s page when item `item` runs, if it is a known constant.
  std::optional<int64_t> Element(BufferId b, const WorkItem& item, int64_t offset) const;

 private:
  const Section& s_;
  int64_t tile_rows_, tile_cols_;
  std::vector<const Load*> table_load_;
};

}  // namespace spatial::certify

#endif  // CERTIFY_TABLE_PAGES_H_
