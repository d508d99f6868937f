// Template: the section builder every lowering uses (the seed's `Template` from `from_tensor_op`).
//
// Stages are added in execution order. The current phase (prologue by default) is stamped on each new stage:
// a fold is written as  t.SetPhase(kBody) ... t.SetPhase(kEpilogue) ...  with t.Fold(n) or t.SetTrip(trip).
#ifndef SPATIAL_BUILDER_H_
#define SPATIAL_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "spatial/program.h"

namespace spatial {

// A block of tiles of a Load or Store: h x w tiles, `pitch` tiles between block rows (written with named fields at
// call sites: {.w = blk, .pitch = row_t}).
struct BlockShape {
  int64_t h = 1;
  int64_t w = 1;
  int64_t pitch = 1;
};

class Template {
 public:
  // The target's tile shape fixes page widths.
  Template(int64_t tile_rows, int64_t tile_cols) : tile_rows_(tile_rows), tile_cols_(tile_cols) {}

  int64_t tile_rows() const { return tile_rows_; }
  int64_t tile_cols() const { return tile_cols_; }

  // Declares a device tensor. Names unify tensors: declaring a name twice returns the first declaration's id.
  TensorId AddTensor(std::string name, TensorRole role, int64_t rows, int64_t cols, Precision p, TensorInit init);

  // A FIFO of two pages (double-buffered), or of `depth` pages.
  BufferId AddBuffer(std::string name, int64_t page_tiles, Precision p) {
    return AddBufferDeep(std::move(name), 2, page_tiles, p);
  }
  BufferId AddBufferDeep(std::string name, int64_t depth, int64_t page_tiles, Precision p);
  // A compute-to-compute intermediate of one page, or of `depth` pages (a carry is two: old and new).
  BufferId AddScratch(std::string name, int64_t page_tiles, Precision p) {
    return AddScratchDeep(std::move(name), 1, page_tiles, p);
  }
  BufferId AddScratchDeep(std::string name, int64_t depth, int64_t page_tiles, Precision p);

  // A 1 x w_tiles block at tile sum(coef * var) of `tensor`, into a page of `dst`.
  StageId AddLoad(std::string name, TensorId tensor, std::vector<Term> steps, int64_t w_tiles, BufferId dst);
  // A block.h x block.w block at tile base + sum(coef * var); block.pitch is the tile step between block rows.
  StageId AddLoadBlockAt(std::string name, TensorId tensor, int64_t base, std::vector<Term> steps, BlockShape block,
                         BufferId dst);
  // Any load pattern (indirect tiles, strided columns). An indirect index buffer becomes the stage's input.
  StageId AddLoadPattern(std::string name, TensorId tensor, AccessPattern pattern, BufferId dst);
  StageId AddStore(std::string name, TensorId tensor, std::vector<Term> steps, int64_t w_tiles, BufferId src);
  StageId AddStoreBlock(std::string name, TensorId tensor, int64_t base, std::vector<Term> steps, BlockShape block,
                        BufferId src);
  StageId AddStorePattern(std::string name, TensorId tensor, AccessPattern pattern, BufferId src);

  // A Generic: ins[i] reads in_bufs[i] through maps[i].
  StageId AddGeneric(std::string name, std::vector<IterSpec> iters, std::vector<BufferId> in_bufs,
                     std::vector<ElemAccess> maps, ElemAccess out_map, Body body, BufferId dst);
  StageId AddMatmul(std::string name, MatmulTiles mm, BufferId a, BufferId b, BufferId c);
  // Any stage, as built by the caller.
  StageId AddStage(std::string name, StageOp op, std::vector<BufferId> ins, std::vector<BufferId> outs);

  // Marks a Load's block as the same for every item along `axis` (kItemX or kItemY): the machine reads it once
  // and multicasts it (DESIGN §3.4). The certifier proves it (MULTICAST_VARIES).
  void SetMulticast(StageId load, LoopVar axis);
  // Body stage `stage` runs on each item's last `blocks` fold blocks only (Stage.last_blocks).
  void SetLastBlocks(StageId stage, int64_t blocks);

  // A page of `buf` flows from `from` to `to`.
  void AddEdge(StageId from, BufferId buf, StageId to);

  // The phase new stages get.
  void SetPhase(Phase p) { phase_ = p; }
  // The fold's static block count; body-phase loads get num_blocks = n.
  void Fold(int64_t num_blocks) { section_.num_blocks = num_blocks; }
  // A fold count read at run time; `max_blocks` is the most it may run (what loads must be safe for).
  void SetTrip(Trip trip, int64_t max_blocks);
  void SetPlan(BlockPlan plan) { section_.plan = plan; }

  bool StageReads(StageId s, BufferId b) const;
  BufferId StageOutput(StageId s) const { return section_.stages[s].outs.at(0); }
  int64_t PageTiles(BufferId b) const { return section_.buffers[b].page_tiles; }
  // W = page_tiles * TC: the width of the plane a page is read as.
  int64_t PageWidth(int64_t page_tiles) const { return page_tiles * tile_cols_; }
  // max(1, ceil(n / TC)).
  int64_t TilesOf(int64_t n) const;
  const Section& section() const { return section_; }
  Section& mutable_section() { return section_; }

  // Seals the section. Body-phase loads are given the fold's block count.
  Section Finish(std::string name, std::vector<WorkItem> items, Precision acc_precision, NumericsClaim claim);

 private:
  int64_t tile_rows_;
  int64_t tile_cols_;
  Phase phase_ = Phase::kPrologue;
  Section section_;
};

}  // namespace spatial

#endif  // SPATIAL_BUILDER_H_
