// A small, valid, two-section composition that uses every construct of the program model once: each stage kind,
// each TensorInit kind, indirect tiles and indirect element terms, every body op and SFPU kind, a trip-counted
// fold with all three phases, a plan, and a State tensor shared across sections with its state order.
// Shared by the proto_io, validate and print tests, which mutate it one field at a time.
#ifndef TESTS_SPATIAL_IO_TEST_PROGRAM_H_
#define TESTS_SPATIAL_IO_TEST_PROGRAM_H_

#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/program.h"

namespace spatial::testing {

// Stage and buffer ids of section 0 ("rich_fold"), for tests that plant a fault in one of them.
struct RichIds {
  StageId load_idx, load_idx2, load_scaler, gather, init_carry;  // prologue
  StageId load_x, load_w, mix, mm;                                // body
  StageId finish, store_out, store_cache;                         // epilogue
  BufferId idx_buf, idx_buf2, sc, gathered, carry, xin, wa, acc, res;
  TensorId x, idx, scaler, w, cache, pos, out;
};

inline Composition RichComposition(RichIds* ids_out = nullptr) {
  RichIds d;
  Template t(32, 32);
  d.x = t.AddTensor("x", TensorRole::kInput, 1, 128, Precision::kBf16, TensorInit::External());
  d.idx = t.AddTensor("idx", TensorRole::kParam, 1, 4, Precision::kInt32, TensorInit::Values({0, 1, 2, 3}));
  d.scaler = t.AddTensor("scaler", TensorRole::kParam, 32, 32, Precision::kBf16, TensorInit::ConstF(1.0));
  d.w = t.AddTensor("w", TensorRole::kParam, 32, 128, Precision::kFp32, TensorInit::FloatValues({0.5, -1.25, 3.0}));
  d.cache = t.AddTensor("cache", TensorRole::kState, 4, 128, Precision::kBf16, TensorInit::Zero());
  d.pos = t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  d.out = t.AddTensor("out", TensorRole::kOutput, 1, 128, Precision::kBf16, TensorInit::Zero());

  d.idx_buf = t.AddBuffer("idx_buf", 1, Precision::kInt32);
  d.idx_buf2 = t.AddBuffer("idx_buf2", 1, Precision::kInt32);
  d.sc = t.AddBuffer("sc", 1, Precision::kBf16);
  d.gathered = t.AddBuffer("gathered", 1, Precision::kBf16);
  d.carry = t.AddScratchDeep("carry", 2, 1, Precision::kFp32);
  d.xin = t.AddBuffer("xin", 1, Precision::kBf16);
  d.wa = t.AddBufferDeep("wa", 3, 1, Precision::kFp32);
  d.acc = t.AddScratch("acc", 1, Precision::kFp32);
  d.res = t.AddBuffer("res", 4, Precision::kBf16);

  // Prologue: index pages (one per reader), the scaler, a gathered cache tile, the carry's initial value.
  d.load_idx = t.AddLoad("load_idx", d.idx, {}, 1, d.idx_buf);
  d.load_idx2 = t.AddLoad("load_idx2", d.idx, {}, 1, d.idx_buf2);
  d.load_scaler = t.AddLoad("load_scaler", d.scaler, {}, 1, d.sc);
  AccessPattern gather{TileAddr{0, {}, IndirectTile{d.idx_buf, 1, 0, 3}}, 1, 1, 1, 1};
  d.gather = t.AddLoadPattern("gather", d.cache, gather, d.gathered);
  d.init_carry = t.AddGeneric("init_carry", TileSpace(32, 32), {d.sc}, {IdentMap(32)}, IdentMap(32),
                              Mul(Op(0), Const(0.0)), d.carry);

  // Body: one block of x and of w per fold block; a banded mix of every body op into the carry; a matmul.
  t.SetPhase(Phase::kBody);
  d.load_x = t.AddLoad("load_x", d.x, {{LoopVar::kKBlock, 1}}, 1, d.xin);
  d.load_w = t.AddLoadBlockAt("load_w", d.w, 0, {{LoopVar::kKBlock, 1}}, {.pitch = 4}, d.wa);
  Body shared = Add(Op(0), Op(1));  // used twice: emitted once on the wire
  Body band0 = Unary(SfpuKind::Rsqrt(1000, 128), shared);
  Body band1 = Sub(Shr(Max(Op(2), Op(1)), 1), Min(FloorDiv(Op(0), Const(3)), Unary(SfpuKind::Exp(), shared)));
  Body band2 = Select(Pred::GeOperand(LoopVar::kRow, 2),
                      Mul(Unary(SfpuKind::Ln(), Op(0)), Unary(SfpuKind::Recip(), Op(1))),
                      Unary(SfpuKind::Silu(), Const(-0.5)));
  Body body = Banded({{8, band0}, {16, band1}, {0, band2}});
  d.mix = t.AddGeneric("mix", FlatSpace(32), {d.xin, d.gathered, d.carry},
                       {Map2(0, 32, 1), WithIndirect(At(12), 2, 4, 16), IdentMap(32)}, IdentMap(32), body, d.carry);
  d.mm = t.AddMatmul("mm", MatmulTiles{1, 1, 1, true, true}, d.wa, d.xin, d.acc);

  // Epilogue: a row reduction, the result, the gathered tile written back in place.
  t.SetPhase(Phase::kEpilogue);
  d.finish = t.AddGeneric("finish", TileSpace(32, 32, IterKind::kReduceSum), {d.acc, d.carry},
                          {Map2(0, 32, 1), Map2(0, 32, 1)}, PerRowMap(32), Mul(Op(0), Unary(SfpuKind::Exp(), Op(1))),
                          d.res);
  d.store_out = t.AddStore("store_out", d.out, {}, 4, d.res);
  AccessPattern back{TileAddr{0, {}, IndirectTile{d.idx_buf2, 1, 0, 3}}, 1, 1, 1, 1};
  d.store_cache = t.AddStorePattern("store_cache", d.cache, back, d.gathered);

  t.AddEdge(d.load_idx, d.idx_buf, d.gather);
  t.AddEdge(d.load_idx2, d.idx_buf2, d.store_cache);
  t.AddEdge(d.load_scaler, d.sc, d.init_carry);
  t.AddEdge(d.gather, d.gathered, d.mix);
  t.AddEdge(d.gather, d.gathered, d.store_cache);
  t.AddEdge(d.init_carry, d.carry, d.mix);
  t.AddEdge(d.load_x, d.xin, d.mix);
  t.AddEdge(d.load_x, d.xin, d.mm);
  t.AddEdge(d.load_w, d.wa, d.mm);
  t.AddEdge(d.mix, d.carry, d.finish);
  t.AddEdge(d.mm, d.acc, d.finish);
  t.AddEdge(d.finish, d.res, d.store_out);

  t.SetTrip(Trip{d.pos, 0, 1, 128, 31, 32}, 4);
  t.SetPlan(BlockPlan{1, 4, 1, 1, 4, 1, 1, 4, 1, true, true, true});
  std::vector<WorkItem> items = WholeRow(4);
  items[0].blocks = 3;  // folds at most 3 of the trip's blocks (WorkItem.blocks)
  Section fold = t.Finish("rich_fold", std::move(items), Precision::kFp32,
                          NumericsClaim::Approx("bf16 storage, fp32 accumulation"));

  // Section 1 reads the cache section 0 wrote, one item per tile.
  Template u(32, 32);
  TensorId cache = u.AddTensor("cache", TensorRole::kState, 4, 128, Precision::kBf16, TensorInit::Zero());
  TensorId out2 = u.AddTensor("out2", TensorRole::kOutput, 4, 128, Precision::kBf16, TensorInit::Zero());
  BufferId cb = u.AddBuffer("cb", 1, Precision::kBf16);
  BufferId ob = u.AddBuffer("ob", 1, Precision::kBf16);
  StageId l = u.AddLoad("load_cache", cache, {{LoopVar::kItemX, 1}}, 1, cb);
  StageId g = u.AddGeneric("copy", TileSpace(32, 32), {cb}, {IdentMap(32)}, IdentMap(32), Op(0), ob);
  StageId s = u.AddStore("store_copy", out2, {{LoopVar::kItemX, 1}}, 1, ob);
  u.AddEdge(l, cb, g);
  u.AddEdge(g, ob, s);
  Section copy = u.Finish("consume_cache", ItemsPerTile(4), Precision::kFp32, NumericsClaim::Exact());

  Composition c;
  c.name = "rich";
  c.sections.push_back(std::move(fold));
  c.sections.push_back(std::move(copy));
  DeclareStateOrder(c);
  c.target = "wormhole_n150";
  c.tile_rows = 32;
  c.tile_cols = 32;
  if (ids_out != nullptr) *ids_out = d;
  return c;
}

}  // namespace spatial::testing

#endif  // TESTS_SPATIAL_IO_TEST_PROGRAM_H_
