#include "lowerings/matmul/head_matmul.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/k_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
// Y = X matmul W for one row at whole-tile widths: item (h, o) is output tile o of head h,
// sum_e X[h*every + e] * W[h*a + e, o*TC + c] -- head h's a/TC input tiles against the a/TC x 1 tile column o of its
// rows of W. Only the head's rows of one tile column move an item, so W is never on chip whole.
absl::StatusOr<Composition> TileHeadMatmul(const HeadMatmulTiles& hm, const Target& target) {
  const int64_t heads = hm.heads;
  const int64_t a = hm.a;
  const int64_t bw = hm.b;
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  if (tr != tw) {
    return NotLowered(
        "a per-head matmul in tiles on a tile that is not square — a weight tile's rows are the input's elements");
  }
  if (!WholeTiles({a, bw, hm.x_every, hm.x_from}, target) || hm.x_from < 0 || hm.x_from + a > hm.x_every) {
    return NotLowered("a per-head matmul in tiles whose heads' inputs are not whole tiles of their rows");
  }
  const std::vector<OperandRef> ops{hm.x, hm.w};
  const std::string& out_name = hm.out;
  const int64_t a_t = a / tw;
  const int64_t b_t = bw / tw;
  const int64_t every_t = hm.x_every / tw;
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a per-head matmul of ", heads, " heads of ", a, " x ", bw),
                                 CheckedMul(heads, b_t)));
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  Template t(tr, tw);
  TensorId scaler = OnesTile(t, hm.scaler, p);
  ASSIGN_OR_RETURN(const int64_t x_elems, CheckedElements("head_matmul heads x a", heads, hm.x_every));
  ASSIGN_OR_RETURN(const int64_t w_elems, CheckedElements("head_matmul heads x a x b", heads * a, bw));
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(ops[0].fill, x_elems));
  ASSIGN_OR_RETURN(TensorInit w_init, InitOf(ops[1].fill, w_elems));
  TensorId x = t.AddTensor(ops[0].name, TensorRole::kInput, 1, x_elems, p, std::move(x_init));
  TensorId w = t.AddTensor(ops[1].name, TensorRole::kParam, heads * a, bw, p, std::move(w_init));
  TensorId y = t.AddTensor(out_name, TensorRole::kOutput, 1, heads * bw, p, TensorInit::Zero());
  BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, p);
  BufferId x_in = t.AddBuffer("in_x", a_t, p);
  BufferId w_in = t.AddBuffer("in_w", a_t, p);
  BufferId out = t.AddBuffer("out", 1, p);
  StageId l_sc = t.AddLoadBlockAt("load_scaler", scaler, 0, {}, {}, sc_in);
  StageId l_x = t.AddLoadBlockAt("load_x", x, hm.x_from / tw, {{LoopVar::kItemY, every_t}},
                                 {.w = a_t, .pitch = heads * every_t}, x_in);
  StageId l_w = t.AddLoadBlockAt("load_w", w, 0, {{LoopVar::kItemY, a_t * b_t}, {LoopVar::kItemX, 1}},
                                 {.h = a_t, .pitch = b_t}, w_in);
  // ★ A PAGE IS ONE PLANE OF ITS TILES SIDE BY SIDE, so the weight's a/TC stacked tiles lie as tile k at columns
  // [TC*k, TC*(k+1)): input e = TC*k + r, output c is at row r, column TC*k + c, and the input row's e at column
  // TC*k + r of row 0. The fold runs over both: the tile's rows r and the tiles k.
  std::vector<IterSpec> iters{{LoopVar::kRow, tr, IterKind::kReduceSum},
                              {LoopVar::kCol, tw, IterKind::kParallel},
                              {LoopVar::kK, a_t, IterKind::kReduceSum}};
  std::vector<ElemAccess> maps{
      ElemAccess{0, {{LoopVar::kRow, a_t * tw}, {LoopVar::kK, tw}, {LoopVar::kCol, 1}}, std::nullopt},
      ElemAccess{0, {{LoopVar::kK, tw}, {LoopVar::kRow, 1}}, std::nullopt}, ConstMap()};
  StageId s = t.AddGeneric("head_dot", std::move(iters), {w_in, x_in, sc_in}, std::move(maps), PerColMap(),
                           Mul(Op(0), Op(1)), out);
  StageId st = t.AddStoreBlock(absl::StrCat("store_", out_name), y, 0, {{LoopVar::kItemY, b_t}, {LoopVar::kItemX, 1}},
                               {.pitch = heads * b_t}, out);
  t.AddEdge(l_w, w_in, s);
  t.AddEdge(l_x, x_in, s);
  t.AddEdge(l_sc, sc_in, s);
  t.AddEdge(s, out, st);
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, absl::StrCat("head_matmul_1x", heads, "x", a, "x", bw, "_tiled"),
                                 GroupedBlockItems(heads, b_t, 1), Precision::kFp32,
                                 ApproxIn("per-head matmul", p), target));
  if (SiteFootprint(c.sections[0], target) > target.max_local_mem_bytes()) {
    return NotLowered("a per-head matmul whose head's inputs and weight column do not fit a site");
  }
  return c;
}

absl::StatusOr<Composition> TileHeadMatmulRows(const HeadMatmulTiles& hm, int64_t rows, const Target& target) {
  const int64_t heads = hm.heads, a = hm.a, bw = hm.b;
  const int64_t tr = target.tile_rows(), tw = target.tile_cols();
  if (tr != tw) {
    return NotLowered(
        "a per-head matmul in tiles on a tile that is not square — a weight tile's rows are the input's elements");
  }
  if (!WholeTiles({a, bw, hm.x_every, hm.x_from}, target) || hm.x_from < 0 || hm.x_from + a > hm.x_every) {
    return NotLowered("a per-head matmul in tiles whose heads' inputs are not whole tiles of their rows");
  }
  const int64_t a_t = a / tw, b_t = bw / tw, every_t = hm.x_every / tw, rows_t = CeilDiv(rows, tr);
  const int64_t kb = KBlock(a_t);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a per-head matmul of ", rows, " rows x ", heads, " heads"),
                                 CheckedMul(rows_t, heads)));
  ASSIGN_OR_RETURN(const Precision p, ElemPrecision(target));
  ASSIGN_OR_RETURN(const int64_t x_cols, CheckedElements("head_matmul heads x a", heads, hm.x_every));
  ASSIGN_OR_RETURN(const int64_t x_elems, CheckedElements("head_matmul rows x heads x a", rows, x_cols));
  ASSIGN_OR_RETURN(const int64_t w_elems, CheckedElements("head_matmul heads x a x b", heads * a, bw));
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(hm.x.fill, x_elems));
  ASSIGN_OR_RETURN(TensorInit w_init, InitOf(hm.w.fill, w_elems));
  Template t(tr, tw);
  const TensorId x = t.AddTensor(hm.x.name, TensorRole::kInput, rows, x_cols, p, std::move(x_init));
  const TensorId w = t.AddTensor(hm.w.name, TensorRole::kParam, heads * a, bw, p, std::move(w_init));
  const TensorId y = t.AddTensor(hm.out, TensorRole::kOutput, rows, heads * bw, p, TensorInit::Zero());
  // Head h's K block c: its input tiles [h·every + from + c·kb, +kb) of the token tile's row, against its weight
  // rows [h·a + c·kb·TC, +kb·TC), all b wide.
  std::vector<KOperand> ops{
      KOperand{.name = "x", .tensor = x, .page = t.AddBuffer("in_x", kb, p),
               .steps = {{LoopVar::kItemY, heads * every_t}, {LoopVar::kItemX, every_t}}, .base = hm.x_from / tw,
               .k_step = kb, .block_w = kb},
      KOperand{.name = "w", .tensor = w, .page = t.AddBuffer("in_w", kb * b_t, p),
               .steps = {{LoopVar::kItemX, a_t * b_t}}, .k_step = kb * b_t, .block_h = kb, .block_w = b_t,
               .pitch = b_t, .multicast = LoopVar::kItemY}};
  const BufferId acc = t.AddScratch("acc", b_t, Precision::kFp32);
  t.SetPhase(AddKBlocked(t, a_t / kb, kb, ops, {KProduct{"head_mm", 0, 1, false, MathFidelity::kDefault, acc, b_t}},
                         1, Precision::kInt32));
  const BufferId out = t.AddBuffer("out", b_t, p);
  t.AddGeneric("pack", TileSpace(tr, t.PageWidth(b_t)), {acc}, {IdentMap(t.PageWidth(b_t))}, IdentMap(t.PageWidth(b_t)),
               Op(0), out);
  t.AddStore(absl::StrCat("store_", hm.out), y, {{LoopVar::kItemY, heads * b_t}, {LoopVar::kItemX, b_t}}, b_t, out);
  WireFirstReaders(t);
  std::vector<WorkItem> items;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < rows_t; ++i) {  // the token tiles of a head side by side: its weight rows multicast
      items.push_back(WorkItem{.id = h * rows_t + i, .y = i, .x = h,
                               .out = TileRect{.row0_t = i, .col0_t = h * b_t, .h_t = 1, .w_t = b_t}});
    }
  }
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, absl::StrCat("head_matmul_", rows, "x", heads, "x", a, "x", bw, "_rows"),
                                 std::move(items), Precision::kFp32, ApproxIn("per-head matmul", p), target,
                                 DstPolicy::kStreamed));  // the pack streams through Dst, as tt-metal's matmul packs
  if (SiteFootprint(c.sections[0], target) > target.max_local_mem_bytes()) {
    return NotLowered("a per-head matmul whose K block and weight rows do not fit a site");
  }
  return c;
}

absl::StatusOr<Composition> FromHeadMatmul(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "head_matmul", 2));
  const auto& hm = spec.head_matmul();
  if (hm.m() < 0 || hm.heads() < 0 || hm.a() < 0 || hm.b() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_matmul has a negative field (m ", hm.m(), ", heads ",
                                                   hm.heads(), ", a ", hm.a(), ", b ", hm.b(), ")"));
  }
  const int64_t m = hm.m();
  const int64_t heads = hm.heads();
  const int64_t a = hm.a();
  const int64_t bw = hm.b();
  ASSIGN_OR_RETURN(const int64_t units, CheckedElements("head_matmul m x heads", m, heads));
  ASSIGN_OR_RETURN(const int64_t n, CheckedElements("head_matmul m x heads x b", units, bw));
  if (n == 0 || a == 0) return NotLowered("a per-head matmul of nothing");
  RETURN_IF_ERROR(RequireFp32Accumulator("a per-head matmul", target));
  // The seed picks the tiled form before it checks the tile is square: a non-square tile refuses, it does not fall
  // back to the flat form (guide seed002-A §6).
  if (m == 1 && WholeTiles({a, bw}, target)) {
    return TileHeadMatmul(HeadMatmulTiles{.x = ops[0], .x_every = a, .w = ops[1], .out = spec.out(), .heads = heads,
                                          .a = a, .b = bw, .scaler = "hm_scaler"},
                          target);
  }
  // One band (two input slots) per unit, unrolled into one Generic.
  RETURN_IF_ERROR(
      UnrollBudget(absl::StrCat("a per-head matmul of ", m, " x ", heads, " heads of ", a, " x ", bw), "bands", units));
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kFloat, target));
  Template& t = f.t();
  ASSIGN_OR_RETURN(BufferId x, f.Input(ops[0].name, units * a, ops[0].fill));
  ASSIGN_OR_RETURN(BufferId w, f.Input(ops[1].name, heads * a * bw, ops[1].fill));
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = t.AddBuffer("out", cols_t, f.precision());
  TensorId ones = OnesTile(t, "hm_scaler", f.precision());
  BufferId ones_in = t.AddBuffer("in_scaler", 1, f.precision());
  f.AddLoadToWire(t.AddLoad("load_scaler", ones, {}, 1, ones_in), ones_in);
  // The folded axis is the ROW: e over a head's a inputs. The scaler (slot 0) is the reduce engine's operand, not
  // the body's.
  std::vector<IterSpec> iters{{LoopVar::kRow, a, IterKind::kReduceSum}, {LoopVar::kCol, n, IterKind::kParallel}};
  std::vector<Slot> slots{Slot{ones_in, ConstMap()}};
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t h = u % heads;
    slots.push_back(Slot{x, ElemAccess{u * a, {{LoopVar::kRow, 1}}, std::nullopt}});
    const int x_slot = static_cast<int>(slots.size()) - 1;
    slots.push_back(Slot{w, ElemAccess{h * a * bw - u * bw, {{LoopVar::kRow, bw}, {LoopVar::kCol, 1}}, std::nullopt}});
    const int w_slot = static_cast<int>(slots.size()) - 1;
    bands.push_back({(u + 1) * bw, Mul(Op(x_slot), Op(w_slot))});
  }
  StageId s = f.Compute("head_matmul", std::move(iters), std::move(slots), PerColMap(), Banded(bands), out_buf);
  return FitSite(f.Finish(spec.out(), n, {s}, out_buf, absl::StrCat("head_matmul_", m, "x", heads, "x", a, "x", bw),
                          ApproxIn("per-head matmul", f.precision())),
                 "per-head matmul", target);
}

}  // namespace spatial
