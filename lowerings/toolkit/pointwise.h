// The column-blocked pointwise stage (seed 002, original lines 294-490: FlatBuild::columns, result_page, pointwise
// and the blocked finish): a flat section whose `n`-column result is wider than one accumulator page runs one item
// per block of `blk` result tiles, every operand still loaded whole, so the page an item computes is one block.
//
// The caller writes its slots, maps and band predicates in RESULT columns, exactly as for a one-item section, and
// ColumnBuild::Pointwise rewrites them for the block: column `c` of an item's block is result column `c + o`, `o`
// the item's first column, read from a compile-time table (one page an item, at the target's index integer):
//   - a map that walks the columns (COL coefficient s != 0) gathers through `o`: + s*o (an IndirectTerm on the
//     table's slot, guarded to [0, span]);
//   - a predicate `COL < k` (a constant band bound) becomes `COL < table[1 + m]`, the table holding `k - o`;
//   - a bound the section computes (`COL < Operand(i)`) and a gather index already on a map are moved by `o` in a
//     one-element stage of their own first ("{name}_bound{i}", "{name}_index{j}"); the bound clamped to [0, span]
//     first (the same test, in range of the index type), the index still checked against its own guard.
// A result one page holds is the seed's single whole-row item, and Pointwise is one plain Generic.
//
// Usage (head_slice, join, rope):
//   ASSIGN_OR_RETURN(ColumnBuild b, ColumnBuild::Columns(n, target));
//   ASSIGN_OR_RETURN(BufferId x, b.flat().Input("x", total, fill));
//   BufferId out = b.ResultPage("out", n, b.flat().precision());
//   ASSIGN_OR_RETURN(std::vector<StageId> chain, b.Pointwise("head_slice", n, slots, Banded(bands), out));
//   return b.Finish(spec.out(), n, chain, out, "head_slice_...", NumericsClaim::Exact());
#ifndef LOWERINGS_TOOLKIT_POINTWISE_H_
#define LOWERINGS_TOOLKIT_POINTWISE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "spatial/body.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// A flat result blocked by columns: `items` items of `blk` result tiles each.
struct ColumnBlocks {
  int64_t blk = 1;
  int64_t items = 1;
  friend bool operator==(const ColumnBlocks&, const ColumnBlocks&) = default;
};

// The blocks of an `n`-column result: none when it fits one accumulator page (RowNeedsBlocking), else
// blk = RowBlock(tiles) and tiles / blk items (160 tiles on an 8-tile accumulator: 20 items of 8).
std::optional<ColumnBlocks> ColumnBlocksFor(int64_t n, const Target& target);

class ColumnBuild {
 public:
  // The seed's FlatBuild::columns: a float section (MissingCompute without a float datapath) whose `n`-column result
  // is blocked when it does not fit a page.
  static absl::StatusOr<ColumnBuild> Columns(int64_t n, const Target& target);

  FlatBuild& flat() { return flat_; }
  const std::optional<ColumnBlocks>& blocks() const { return blocks_; }

  // The buffer the `n`-column result is computed into: the whole row, or one block of it.
  BufferId ResultPage(const std::string& name, int64_t n, Precision precision);

  // dst[c] = body(c) over the result's `n` columns, every map and predicate written in result columns (see the top
  // of this file). Returns the stages in execution order (moved stages first, the stage `name` last); the caller puts
  // them in its chain. Fails with MissingPrecision when no index integer of the target holds the table's offsets.
  absl::StatusOr<std::vector<StageId>> Pointwise(const std::string& name, int64_t n, std::vector<Slot> slots,
                                                 const Body& body, BufferId dst);

  // Declares `out_name` a 1 x n Output, stores the whole row (or the item's block at ITEM_X * blk) and seals the
  // section over one whole-row item (or one item per block).
  absl::StatusOr<Composition> Finish(const std::string& out_name, int64_t n, const std::vector<StageId>& chain,
                                     BufferId out_buf, std::string name, NumericsClaim claim);

 private:
  ColumnBuild(FlatBuild flat, std::optional<ColumnBlocks> blocks, const Target& target)
      : flat_(std::move(flat)), blocks_(blocks), target_(&target) {}

  FlatBuild flat_;
  std::optional<ColumnBlocks> blocks_;
  const Target* target_;
};

// The distinct constants k of every `COL < k` / `COL >= k` predicate of `body`, in first-seen order: the bounds the
// blocked rewrite puts in its column table.
std::vector<int64_t> ConstantColumnBounds(const Body& body);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_POINTWISE_H_
