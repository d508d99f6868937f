#include "lowerings/matmul/matmul.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/matmul/matmul_blocking.h"
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
  // The accumulator: the spec's fp32_dest_acc where it says, else the target's; a 16-bit Dst is bf16.
  const Precision acc = !mm.has_fp32_dest_acc() ? target.matrix_acc().value_or(Precision::kFp32)
                        : mm.fp32_dest_acc()    ? Precision::kFp32
                                                : Precision::kBf16;
  if (target.effective_acc_tiles(acc, true) <= 0) {
    return MissingPrecision(absl::StrCat("matmul.fp32_dest_acc = ", mm.fp32_dest_acc() ? "true" : "false",
                                         ": a Dst that accumulates in ", std::string(PrecisionName(acc))),
                            target);
  }
  if (!proto::Fidelity_IsValid(mm.math_fidelity())) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul.math_fidelity is not a fidelity (", mm.math_fidelity(), ")"));
  }
  const auto fidelity = static_cast<MathFidelity>(mm.math_fidelity());
  ASSIGN_OR_RETURN(const Precision fa, FormatOf(mm.in0_format(), "matmul.in0_format", *in, target));
  ASSIGN_OR_RETURN(const Precision fb, FormatOf(mm.in1_format(), "matmul.in1_format", *in, target));
  ASSIGN_OR_RETURN(const Precision fo, FormatOf(mm.out_format(), "matmul.out_format", *in, target));
  // An operand format the target stores but its matrix engine does not take (fp16, fp32 on a bf16 engine) is a
  // refusal here, not a program the certifier then refuses as an internal error.
  for (const auto& [field, f] : {std::pair{"matmul.in0_format", fa}, std::pair{"matmul.in1_format", fb}}) {
    if (!target.matrix_takes(f)) {
      return MissingPrecision(absl::StrCat(field, " ", std::string(PrecisionName(f)), ": the matrix engine takes ",
                                           std::string(PrecisionName(*in)),
                                           *in == Precision::kBf16 ? " (or bfp8_b, bfp4_b)" : "", " operands"),
                              target);
    }
  }

  // Lower's CheckSpecSizes bounds every tensor to kMaxTensorElems; the products are checked here all the same, as
  // the sizes they are (size_budget.h), never formed unchecked from spec fields.
  ASSIGN_OR_RETURN(const int64_t a_elems, CheckedElements("matmul m x k", mm.m(), mm.k()));
  ASSIGN_OR_RETURN(const int64_t b_elems, CheckedElements("matmul k x n", mm.k(), mm.n()));
  RETURN_IF_ERROR(CheckedElements("matmul m x n", mm.m(), mm.n()).status());
  const int64_t m_t = *CheckedCeilDiv(mm.m(), tr);
  const int64_t k_t = *CheckedCeilDiv(mm.k(), tc);
  const int64_t n_t = *CheckedCeilDiv(mm.n(), tc);
  const std::string what = absl::StrCat("matmul m x k x n = ", mm.m(), " x ", mm.k(), " x ", mm.n());
  const MatmulShape shape{.m_t = m_t, .k_t = k_t, .n_t = n_t, .a = fa, .b = fb, .out = fo, .acc = acc,
                          .product_cycles = target.matmul_cycles(mm.math_fidelity()),
                          .pack_accumulate = mm.packer_l1_acc()};
  ASSIGN_OR_RETURN(const MatmulBlocking bk, mm.has_program_config()
                                                ? FixedMatmulBlocking(shape, target, mm.program_config(), what)
                                                : ChooseMatmulBlocking(shape, target, what));
  const std::string name = absl::StrCat("matmul_", mm.m(), "x", mm.k(), "x", mm.n());
  const int64_t pm = bk.per_site_m, pn = bk.per_site_n, kb = bk.k_block;

  Template t(tr, tc);
  ASSIGN_OR_RETURN(TensorInit a_init, InitOf(ops[0].fill, a_elems));
  ASSIGN_OR_RETURN(TensorInit b_init, InitOf(ops[1].fill, b_elems));
  const bool tb = mm.transpose_b();
  TensorId a = t.AddTensor(ops[0].name, TensorRole::kInput, mm.m(), mm.k(), fa, std::move(a_init));
  TensorId b = t.AddTensor(ops[1].name, TensorRole::kInput, tb ? mm.n() : mm.k(), tb ? mm.k() : mm.n(), fb,
                           std::move(b_init));
  TensorId c = t.AddTensor(spec.out(), TensorRole::kOutput, mm.m(), mm.n(), fo, TensorInit::Zero());
  BufferId a_in = t.AddBuffer("in_a", pm * kb, fa);
  BufferId b_in = t.AddBuffer("in_b", kb * pn, fb);
  // The item's block of C at the accumulator's precision (the partials): one page, accumulated in place across the
  // K blocks (the first block writes it).
  BufferId acc_buf = t.AddScratch("acc", pm * pn, acc);
  BufferId out = t.AddBuffer("out", bk.pack_w, fo);

  // Item (ITEM_Y, ITEM_X) computes C tiles [ITEM_Y * pm, +pm) x [ITEM_X * pn, +pn). Fold block KBLOCK (after the
  // peeled first one) reads K tiles [(KBLOCK + 1) * kb, +kb). A's block depends on ITEM_Y only, so it is the
  // same along ITEM_X (a row of sites) and multicast there; B's on ITEM_X only, multicast along ITEM_Y.
  // ★ A TRANSPOSED B IS READ IN PLACE: its block is the pn x kb tiles of the n x k matrix (rows ITEM_X * pn, the
  // fold's K tiles as columns), each tile transposed by the engine as it multiplies (MatmulTiles.transpose_b).
  const BlockShape a_block{.h = pm, .w = kb, .pitch = k_t};
  const BlockShape b_block = tb ? BlockShape{.h = pn, .w = kb, .pitch = k_t} : BlockShape{.h = kb, .w = pn, .pitch = n_t};
  const int64_t b_item = tb ? pn * k_t : pn;  // B's tile step from one ITEM_X to the next
  const int64_t b_kstep = tb ? kb : kb * n_t;  // and from one K block to the next
  const MatmulTiles first{.m_tiles = pm, .n_tiles = pn, .k_tiles = kb, .accumulate = false, .transpose_b = tb,
                          .fidelity = fidelity};
  StageId la0 = t.AddLoadBlockAt("load_a", a, 0, {{LoopVar::kItemY, pm * k_t}}, a_block, a_in);
  StageId lb0 = t.AddLoadBlockAt("load_b", b, 0, {{LoopVar::kItemX, b_item}}, b_block, b_in);
  t.SetMulticast(la0, LoopVar::kItemX);
  t.SetMulticast(lb0, LoopVar::kItemY);
  StageId mul0 = t.AddMatmul("matmul", first, a_in, b_in, acc_buf);
  t.AddEdge(la0, a_in, mul0);
  t.AddEdge(lb0, b_in, mul0);
  StageId last = mul0;
  if (bk.k_blocks > 1) {
    // A fold of one block is no fold (a section folds two blocks or more): the second block is then written out
    // in the prologue, at its fixed K offset.
    const bool fold = bk.k_blocks > 2;
    std::vector<Term> a_steps{{LoopVar::kItemY, pm * k_t}}, b_steps{{LoopVar::kItemX, b_item}};
    if (fold) {
      t.Fold(bk.k_blocks - 1);
      t.SetPhase(Phase::kBody);
      a_steps.push_back({LoopVar::kKBlock, kb});
      b_steps.insert(tb ? b_steps.end() : b_steps.begin(), {LoopVar::kKBlock, b_kstep});
    }
    StageId la = t.AddLoadBlockAt("load_a_k", a, kb, a_steps, a_block, a_in);
    StageId lb = t.AddLoadBlockAt("load_b_k", b, b_kstep, b_steps, b_block, b_in);
    t.SetMulticast(la, LoopVar::kItemX);
    t.SetMulticast(lb, LoopVar::kItemY);
    MatmulTiles more = first;
    more.accumulate = true;
    // An accumulating MatmulTiles reads its own output page (the carry the first block's product wrote).
    StageId mul = t.AddMatmul("matmul_k", more, a_in, b_in, acc_buf);
    t.AddEdge(la, a_in, mul);
    t.AddEdge(lb, b_in, mul);
    last = mul;
    if (fold) t.SetPhase(Phase::kEpilogue);
  }
  // The packer: the fp32 block rounds once, to the output format, on its way out, a Dst's worth of tiles at a time
  // (chunk j is the acc page's tiles [j * pack_w, +pack_w): tile row j * pack_w / pn of the block).
  const int64_t acc_w = pm * pn * tc, w = bk.pack_w * tc;
  for (int64_t j = 0; j < pm * pn / bk.pack_w; ++j) {
    const int64_t tile0 = j * bk.pack_w, row = tile0 / pn, col = tile0 % pn;
    StageId pack = t.AddGeneric(absl::StrCat("pack_", j), TileSpace(tr, w), {acc_buf}, {Map2(tile0 * tc, acc_w, 1)},
                                IdentMap(w), Op(0), out);
    StageId st = t.AddStoreBlock(absl::StrCat("store_", spec.out(), "_", j), c, row * n_t + col,
                                 {{LoopVar::kItemY, pm * n_t}, {LoopVar::kItemX, pn}}, {.w = bk.pack_w, .pitch = n_t},
                                 out);
    t.AddEdge(last, acc_buf, pack);
    t.AddEdge(pack, out, st);
  }

  std::vector<WorkItem> items;
  items.reserve(static_cast<size_t>(bk.items_y * bk.items_x));
  for (int64_t y = 0; y < bk.items_y; ++y) {
    for (int64_t x = 0; x < bk.items_x; ++x) {
      items.push_back(WorkItem{.id = y * bk.items_x + x, .y = y, .x = x,
                               .out = TileRect{.row0_t = y * pm, .col0_t = x * pn, .h_t = pm, .w_t = pn}});
    }
  }
  // The plan's grid is what placement follows: the item grid, wrapped onto the target's (a 1-D row of blocks
  // longer than the grid's row is spread over every site instead).
  t.SetPlan(BlockPlan{.per_site_m = pm, .per_site_n = pn,
                      .grid_y = bk.one_d ? 1 : std::min(bk.items_y, target.grid_y()),
                      .grid_x = bk.one_d ? bk.items_x : std::min(bk.items_x, target.grid_x()),
                      .num_blocks = bk.k_blocks, .block_k_tiles = kb, .osh = bk.osh, .osw = bk.osw, .ibw = kb,
                      .pack_accumulate = mm.packer_l1_acc()});
  NumericsClaim claim = ApproxIn("matmul", *in);
  // A bfp4_b result keeps 3 bits of magnitude under each 16 values' shared exponent (bfp8_b keeps 7): a value well
  // below its block's largest loses most of its bits, and random 33x65x17 products land at rel L2 0.18-0.20, where
  // the default claim allows 0.031. Eight times the default (0.25) states what the format delivers.
  if (fo == Precision::kBfp4B) claim.error_growth = 8;
  // A 16-bit Dst (grayskull's, or fp32_dest_acc: false) rounds the running sum to bf16 after every K tile, and the
  // roundings' errors walk: measured with random inputs, rel L2 ~0.019 / 0.026 / 0.033 / 0.042 at K = 2048 / 4096 /
  // 8192 / 14336 on 32-wide tiles (64 to 448 roundings), 0.034 at 512 roundings of 8-wide ones, against the default
  // 0.031. The claim grows as the square root of the roundings past 128: 1.41x at 256, 1.87x at 448, 2x at 512.
  // (A growth is at least 1 or none: below 128 roundings the default stands.)
  if (acc == Precision::kBf16 && k_t > 128) {
    claim.error_growth = std::max(claim.error_growth, std::sqrt(static_cast<double>(k_t) / 128.0));
  }
  return FinishSection(t, name, std::move(items), acc, std::move(claim), target);
}

}  // namespace spatial
