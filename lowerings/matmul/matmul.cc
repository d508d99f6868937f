#include "lowerings/matmul/matmul.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<Composition> FromMatmul(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "matmul", 2));
  const auto& mm = spec.matmul();
  RETURN_IF_ERROR(CheckElements("matmul", "m", mm.m()));
  RETURN_IF_ERROR(CheckElements("matmul", "k", mm.k()));
  RETURN_IF_ERROR(CheckElements("matmul", "n", mm.n()));
  const int64_t tr = target.tile_rows();
  const int64_t tc = target.tile_cols();
  // A tile-matmul multiplies a TR x TC tile of A by a tile of B whose rows are A's columns: B's tile must have TC
  // rows, which the tiled layout gives it only when TR == TC.
  if (tr != tc) return NotLowered("a matmul in tiles on a tile that is not square");
  const std::optional<Precision> in = target.matrix_in();
  if (!in) return MissingCompute("a matrix datapath", target);
  const Precision acc = target.matrix_acc().value_or(Precision::kFp32);

  // Lower's CheckSpecSizes bounds every tensor to kMaxTensorElems; the products are checked here all the same, as
  // the sizes they are (size_budget.h), never formed unchecked from spec fields.
  ASSIGN_OR_RETURN(const int64_t a_elems, CheckedElements("matmul m x k", mm.m(), mm.k()));
  ASSIGN_OR_RETURN(const int64_t b_elems, CheckedElements("matmul k x n", mm.k(), mm.n()));
  RETURN_IF_ERROR(CheckedElements("matmul m x n", mm.m(), mm.n()).status());
  const int64_t m_t = *CheckedCeilDiv(mm.m(), tr);
  const int64_t k_t = *CheckedCeilDiv(mm.k(), tc);
  const int64_t n_t = *CheckedCeilDiv(mm.n(), tc);
  const int64_t blk = RowBlock(n_t, target);
  const int64_t n_blocks = n_t / blk;
  const int64_t w = blk * tc;
  const std::string name = absl::StrCat("matmul_", mm.m(), "x", mm.k(), "x", mm.n());
  // One item per block of C: checked before the items are built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("matmul m x k x n = ", mm.m(), " x ", mm.k(), " x ", mm.n()),
                                 CheckedMul(m_t, n_blocks)));

  Template t(tr, tc);
  ASSIGN_OR_RETURN(TensorInit a_init, InitOf(ops[0].fill, a_elems));
  ASSIGN_OR_RETURN(TensorInit b_init, InitOf(ops[1].fill, b_elems));
  TensorId a = t.AddTensor(ops[0].name, TensorRole::kInput, mm.m(), mm.k(), *in, std::move(a_init));
  TensorId b = t.AddTensor(ops[1].name, TensorRole::kInput, mm.k(), mm.n(), *in, std::move(b_init));
  TensorId c = t.AddTensor(spec.out(), TensorRole::kOutput, mm.m(), mm.n(), *in, TensorInit::Zero());
  BufferId a_in = t.AddBuffer("in_a", 1, *in);
  BufferId b_in = t.AddBuffer("in_b", blk, *in);
  BufferId out = t.AddBuffer("out", blk, *in);

  // The item's output block is C tile (ITEM_Y, ITEM_X * blk ...); K block KBLOCK reads A tile (ITEM_Y, KBLOCK) and
  // B tiles (KBLOCK, ITEM_X * blk ...). Without a fold KBLOCK is 0 and drops out of the addresses.
  const bool fold = k_t > 1;
  std::vector<Term> a_steps{{LoopVar::kItemY, k_t}};
  std::vector<Term> b_steps{{LoopVar::kItemX, blk}};
  if (fold) {
    a_steps.push_back({LoopVar::kKBlock, 1});
    b_steps.insert(b_steps.begin(), {LoopVar::kKBlock, n_t});
  }

  StageId zero = -1;
  BufferId acc_buf;
  if (fold) {
    // The accumulator is carried across K blocks (two pages: old and new), so the prologue writes it first.
    acc_buf = t.AddScratchDeep("acc", 2, blk, acc);
    t.Fold(k_t);
    zero = t.AddGeneric("zero_acc", TileSpace(tr, w), {}, {}, IdentMap(w), Const(0.0), acc_buf);
    t.SetPhase(Phase::kBody);
  } else {
    acc_buf = t.AddScratch("acc", blk, acc);
  }
  StageId la = t.AddLoad("load_a", a, a_steps, 1, a_in);
  StageId lb = t.AddLoadBlockAt("load_b", b, 0, b_steps, {.w = blk, .pitch = n_t}, b_in);
  StageId mul = t.AddMatmul("matmul", MatmulTiles{1, blk, 1, fold, false}, a_in, b_in, acc_buf);
  if (fold) t.SetPhase(Phase::kEpilogue);
  // The packer: the fp32 accumulator rounds once, to the output precision, on its way out.
  StageId pack = t.AddGeneric("pack", TileSpace(tr, w), {acc_buf}, {IdentMap(w)}, IdentMap(w), Op(0), out);
  StageId st = t.AddStoreBlock(absl::StrCat("store_", spec.out()), c, 0,
                               {{LoopVar::kItemY, n_t}, {LoopVar::kItemX, blk}}, {.w = blk, .pitch = n_t}, out);
  t.AddEdge(la, a_in, mul);
  t.AddEdge(lb, b_in, mul);
  // No edge from zero_acc: an accumulating MatmulTiles reads its own output page (the carry), not an input.
  (void)zero;
  t.AddEdge(mul, acc_buf, pack);
  t.AddEdge(pack, out, st);

  std::vector<WorkItem> items;
  items.reserve(static_cast<size_t>(m_t * n_blocks));
  for (int64_t y = 0; y < m_t; ++y) {
    for (int64_t x = 0; x < n_blocks; ++x) {
      items.push_back(WorkItem{.id = y * n_blocks + x, .y = y, .x = x, .out = TileRect{.row0_t = y, .col0_t = x * blk,
                                                                                       .w_t = blk}});
    }
  }
  t.SetPlan(BlockPlan{.per_site_n = blk, .grid_y = m_t, .grid_x = n_blocks, .num_blocks = k_t, .osw = blk});
  return FinishSection(t, name, std::move(items), acc,
                       ApproxIn("matmul", *in), target);
}

}  // namespace spatial
