// Pages whose contents are known for each item before the run: a buffer written only by a Load of a table at an
// address that depends on the item alone (no fold block, no index). The table is a Param tensor with integer values
// (the certifier's tables: the seed's column-blocked stages read their item's first column and band bounds from such
// a page, "{stage}__columns", and their reads are in range only relationally (c + o >= k - o + o); read exactly, one
// item at a time, the interval proof sees it), or, given `known`, any tensor but a State one whose elements it knows
// (the machine's: a run input given, a tensor an earlier section produced — a gathered block's index, so it books the
// DRAM channels of the tiles the run reads).
#ifndef SPATIAL_SEMANTICS_TABLE_PAGES_H_
#define SPATIAL_SEMANTICS_TABLE_PAGES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "spatial/program.h"

namespace spatial {

// Flat element `elem` of tensor `t` where it is known before the run, else nullopt.
using KnownElement = std::function<std::optional<double>(const Tensor& t, int64_t elem)>;

class TablePages {
 public:
  // `known` (optional): the elements of tensors that are not Param tables with integer values.
  TablePages(const Section& s, int64_t tile_rows, int64_t tile_cols, KnownElement known = {});

  // The load that fills `b` with a table, or nullptr.
  const Load* TableLoad(BufferId b) const { return table_load_[b]; }

  // Element `offset` of buffer `b`'s page when item `item` runs, if it is a known integer.
  std::optional<int64_t> Element(BufferId b, const WorkItem& item, int64_t offset) const;

 private:
  const Section& s_;
  int64_t tile_rows_, tile_cols_;
  KnownElement known_;
  std::vector<const Load*> table_load_;
};

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_TABLE_PAGES_H_
