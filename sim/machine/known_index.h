// ★ AN INDEX THE RUN ALREADY KNOWS. A gathered Load's or Store's block (IndirectTile) starts at the value of element
// 0 of its index page, which only the values know, so the machine's timing took the admitted range's low end for
// every item. Which DRAM channels a block's tiles occupy depends on it: ten heads reading their K and V through the
// prefill's table of K/V heads all booked head 0's tiles, on half of Blackhole's eight channels, and the run read
// DRAM at half its rate. Where the index page is loaded straight from a tensor whose value is known — a table the
// program holds (the lowerings' head, chunk and row tables), a run input given, a tensor an earlier section produced
// when the values ran — the machine times the tiles the run reads, by the rule a fold's trip reads its count with
// (TensorElement). An index computed on a site, or read from a tensor nobody gave, keeps the low end, and the report
// says how many transfers did.
#ifndef SIM_MACHINE_KNOWN_INDEX_H_
#define SIM_MACHINE_KNOWN_INDEX_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "spatial/program.h"
#include "spatial/semantics/affine.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The value of flat element `elem` of tensor `t` as a run reads it: from `inputs` (the value the run starts with),
// else `values` (the run's final values: a tensor an earlier section produced), else its init; nullopt where none
// says (an external tensor not given, an element outside the tensor).
std::optional<double> TensorElement(const Tensor& t, int64_t elem, const TensorMap& values, const TensorMap& inputs);

// The table a gathered stage's index page is loaded from, and where.
struct KnownIndex {
  const Tensor* table = nullptr;  // not a State tensor (its value changes during the run)
  AffineForm form;                // the index page's Load: its block's tiles, in the item and the fold block
  bool per_block = false;         // that Load runs once a block (body); else once an item, at block 0
  int64_t tile_rows = 1, tile_cols = 1;
  int64_t lo = 0, hi = 0;         // the gathered stage's admitted range

  // The index item (y, x) reads at `block`: element 0 of the page — element (0, 0) of the block's first tile, by
  // TensorElement. nullopt where that is unknown, or not an integer in [lo, hi] (the run faults there).
  std::optional<int64_t> At(int64_t item_y, int64_t item_x, int32_t block, const TensorMap& values,
                            const TensorMap& inputs) const;
};

// By stage of `s`: where each gathered Load or Store whose index buffer no stage writes but one direct Load of a
// tensor that is not State (in the body only for a stage in the body) reads its index; nullopt for every other stage.
std::vector<std::optional<KnownIndex>> KnownIndices(const Section& s, int64_t tile_rows, int64_t tile_cols);

}  // namespace spatial

#endif  // SIM_MACHINE_KNOWN_INDEX_H_
