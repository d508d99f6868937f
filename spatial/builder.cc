#include "spatial/builder.h"

#include <algorithm>

#include "spatial/maps.h"

namespace spatial {

TensorId Template::AddTensor(std::string name, TensorRole role, int64_t rows, int64_t cols, Precision p,
                             TensorInit init) {
  int existing = section_.FindTensor(name);
  if (existing >= 0) return existing;
  section_.tensors.push_back(Tensor{std::move(name), role, rows, cols, p, std::move(init), std::nullopt});
  return static_cast<TensorId>(section_.tensors.size() - 1);
}

BufferId Template::AddBufferDeep(std::string name, int64_t depth, int64_t page_tiles, Precision p) {
  section_.buffers.push_back(Buffer{std::move(name), depth, page_tiles, p, BufferKind::kBuffer});
  return static_cast<BufferId>(section_.buffers.size() - 1);
}

BufferId Template::AddScratchDeep(std::string name, int64_t depth, int64_t page_tiles, Precision p) {
  section_.buffers.push_back(Buffer{std::move(name), depth, page_tiles, p, BufferKind::kScratch});
  return static_cast<BufferId>(section_.buffers.size() - 1);
}

StageId Template::AddLoad(std::string name, TensorId tensor, std::vector<Term> steps, int64_t w_tiles,
                          BufferId dst) {
  return AddLoadBlockAt(std::move(name), tensor, 0, std::move(steps), {.w = w_tiles, .pitch = w_tiles}, dst);
}

StageId Template::AddLoadBlockAt(std::string name, TensorId tensor, int64_t base, std::vector<Term> steps,
                                 BlockShape block, BufferId dst) {
  AccessPattern p{TileAddr{base, std::move(steps), std::nullopt}, block.h, block.w, 1, block.pitch};
  return AddLoadPattern(std::move(name), tensor, std::move(p), dst);
}

StageId Template::AddLoadPattern(std::string name, TensorId tensor, AccessPattern pattern, BufferId dst) {
  std::vector<BufferId> ins;
  if (pattern.origin.indirect) ins.push_back(pattern.origin.indirect->index);
  return AddStage(std::move(name), Load{tensor, std::move(pattern), 1}, std::move(ins), {dst});
}

StageId Template::AddStore(std::string name, TensorId tensor, std::vector<Term> steps, int64_t w_tiles,
                           BufferId src) {
  return AddStoreBlock(std::move(name), tensor, 0, std::move(steps), {.w = w_tiles, .pitch = w_tiles}, src);
}

StageId Template::AddStoreBlock(std::string name, TensorId tensor, int64_t base, std::vector<Term> steps,
                                BlockShape block, BufferId src) {
  AccessPattern p{TileAddr{base, std::move(steps), std::nullopt}, block.h, block.w, 1, block.pitch};
  return AddStorePattern(std::move(name), tensor, std::move(p), src);
}

StageId Template::AddStorePattern(std::string name, TensorId tensor, AccessPattern pattern, BufferId src) {
  std::vector<BufferId> ins{src};
  if (pattern.origin.indirect) ins.push_back(pattern.origin.indirect->index);
  return AddStage(std::move(name), Store{tensor, std::move(pattern)}, std::move(ins), {});
}

StageId Template::AddGeneric(std::string name, std::vector<IterSpec> iters, std::vector<BufferId> in_bufs,
                             std::vector<ElemAccess> maps, ElemAccess out_map, Body body, BufferId dst) {
  Generic g{std::move(iters), std::move(maps), std::move(out_map), std::move(body)};
  return AddStage(std::move(name), std::move(g), std::move(in_bufs), {dst});
}

StageId Template::AddMatmul(std::string name, MatmulTiles mm, BufferId a, BufferId b, BufferId c) {
  return AddStage(std::move(name), mm, {a, b}, {c});
}

StageId Template::AddStage(std::string name, StageOp op, std::vector<BufferId> ins, std::vector<BufferId> outs) {
  section_.stages.push_back(Stage{std::move(name), phase_, std::move(ins), std::move(outs), std::move(op)});
  return static_cast<StageId>(section_.stages.size() - 1);
}

void Template::SetMulticast(StageId load, LoopVar axis) {
  std::get<Load>(section_.stages.at(load).op).multicast = axis;
}

void Template::SetLastBlocks(StageId stage, int64_t blocks) { section_.stages.at(stage).last_blocks = blocks; }

void Template::AddEdge(StageId from, BufferId buf, StageId to) { section_.edges.push_back(Edge{from, buf, to}); }

void Template::SetTrip(Trip trip, int64_t max_blocks) {
  section_.trip = trip;
  section_.num_blocks = max_blocks;
}

bool Template::StageReads(StageId s, BufferId b) const {
  const auto& ins = section_.stages[s].ins;
  return std::find(ins.begin(), ins.end(), b) != ins.end();
}

int64_t Template::TilesOf(int64_t n) const { return std::max<int64_t>(1, CeilDiv(n, tile_cols_)); }

Section Template::Finish(std::string name, std::vector<WorkItem> items, Precision acc_precision,
                         NumericsClaim claim) {
  for (Stage& s : section_.stages) {
    if (auto* l = std::get_if<Load>(&s.op); l && s.phase == Phase::kBody) l->num_blocks = section_.num_blocks;
  }
  section_.name = std::move(name);
  section_.items = std::move(items);
  section_.acc_precision = acc_precision;
  section_.claim = std::move(claim);
  return std::move(section_);
}

}  // namespace spatial
