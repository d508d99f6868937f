#include "lowerings/rows/row_norms_blocked.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/matmul/matmul.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// One work item per head h: coord (0, h), rect (0, h*band_t, 1, band_t).
std::vector<WorkItem> HeadItems(int64_t rows, int64_t band_t) {
  std::vector<WorkItem> items;
  for (int64_t h = 0; h < rows; ++h) items.push_back(WorkItem{.id = h, .y = 0, .x = h,
                                                              .out = TileRect{.col0_t = h * band_t, .w_t = band_t}});
  return items;
}

// The per-head forms address head h at tile h * cols / TC, and compute one head in one accumulator page.
absl::Status CheckHeadIsItem(const std::string& what, int64_t cols, const Target& target) {
  if (cols % target.tile_cols() != 0) {
    return NotLowered(absl::StrCat("a ", what, " per head whose heads of ", cols, " are not whole tiles of ",
                                   target.tile_cols()));
  }
  if (RowNeedsBlocking(cols, target)) {
    return NotLowered(absl::StrCat("a ", what, " per head whose heads of ", cols,
                                   " are wider than the accumulator holds"));
  }
  return absl::OkStatus();
}

}  // namespace

// ★ L2NORM REDUCES PER HEAD, SO IT BLOCKS PER HEAD. The flat form keeps all rows*cols elements resident -- correct,
// and impossible once the flat row is 64 tiles. But the REDUCTION was never over the flat row: each head folds only
// its own cols elements. So the item becomes the HEAD: it loads one band, folds it, takes the reciprocal root and
// rescales it. No banded map is needed at all, because a band is no longer a region inside a bigger page.
absl::StatusOr<Composition> BlockedL2Norm(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "l2norm", 1));
  const auto& l2 = spec.l2norm();
  RETURN_IF_ERROR(CheckElements("l2norm", "rows", l2.rows()));
  RETURN_IF_ERROR(CheckElements("l2norm", "cols", l2.cols()));
  ASSIGN_OR_RETURN(int64_t eps, EpsNano("l2norm", l2.eps()));
  RETURN_IF_ERROR(RequireFp32Accumulator("an l2 normalization", target));
  const int64_t rows = l2.rows();
  const int64_t cols = l2.cols();
  RETURN_IF_ERROR(CheckHeadIsItem("l2norm", cols, target));
  const int64_t n = rows * cols;
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  const int64_t band_t = TilesOf(cols, target);
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[0].fill, n));
  TensorId xt = t.AddTensor(ops[0].name, TensorRole::kInput, 1, n, p, std::move(init));
  TensorId yt = t.AddTensor(spec.out(), TensorRole::kOutput, 1, n, p, TensorInit::Zero());
  const Precision acc = Precision::kFp32;
  BufferId xin = t.AddBuffer("in_x", band_t, p);
  TensorId ones_t = OnesTile(t, absl::StrCat(spec.out(), "__ones"), p);
  BufferId ones_in = t.AddBuffer("in_ones", 1, p);
  BufferId sq = t.AddScratch("band_sq", band_t, acc);
  BufferId ssq = t.AddScratch("band_ssq", 1, acc);
  BufferId inv = t.AddScratch("band_inv", 1, acc);
  BufferId ob = t.AddBuffer("out", band_t, p);
  // The band this item owns: band_t tiles starting at item h.
  const std::vector<Term> step{{LoopVar::kItemX, band_t}};
  StageId lx = t.AddLoad("load_band", xt, step, band_t, xin);
  StageId lo = t.AddLoad("load_ones", ones_t, {}, 1, ones_in);
  const int64_t w = t.PageWidth(band_t);
  const int64_t one = t.PageWidth(1);
  // ★ THE BAND IS ONE HEAD, SO THE 2-D VIEW HAS EXACTLY ONE ROW. Reducing with a full-tile space instead would fold
  // the tile's rows where the band has one, summing the padding rows into the norm.
  StageId s_sq = t.AddGeneric("square", HeadSpace(1, cols), {xin, xin}, {Map2(0, cols, 1), Map2(0, cols, 1)},
                              IdentMap(w), Mul(Op(0), Op(1)), sq);
  StageId s_sum = t.AddGeneric("band_sum", HeadSpace(1, cols, IterKind::kReduceSum), {sq, ones_in},
                               {Map2(0, w, 1), ConstMap()}, PerRowMap(one), Op(0), ssq);
  StageId s_inv = t.AddGeneric("band_rsqrt", HeadSpace(1, target.tile_cols()), {ssq}, {PerRowMap(one)},
                               PerRowMap(one), Unary(SfpuKind::Rsqrt(eps, 1), Op(0)), inv);
  StageId s_out = t.AddGeneric("rescale", HeadSpace(1, cols), {xin, inv}, {Map2(0, cols, 1), Fixed(0)}, IdentMap(w),
                               Mul(Op(0), Op(1)), ob);
  StageId st = t.AddStore(absl::StrCat("store_", spec.out()), yt, step, band_t, ob);
  t.AddEdge(lx, xin, s_sq);
  t.AddEdge(lo, ones_in, s_sum);
  t.AddEdge(s_sq, sq, s_sum);
  t.AddEdge(s_sum, ssq, s_inv);
  t.AddEdge(s_inv, inv, s_out);
  t.AddEdge(s_out, ob, st);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("an l2norm of ", rows, " heads of ", cols), rows));
  return FinishSection(t, absl::StrCat("l2norm_", rows, "x", cols), HeadItems(rows, band_t), acc,
                       ApproxIn("per-head l2 normalization", p), target);
}

namespace {

// A per-head rmsnorm's spec, checked: the plain RMS reduction (no residual, no bias), whole-tile heads that fit an
// accumulator page, operands [x, weight?].
struct HeadRms {
  std::vector<OperandRef> ops;
  int64_t rows = 0;  // heads, all told
  int64_t cols = 0;  // a head's width
  int64_t n = 0;     // rows * cols
  int64_t head_t = 1;
  int64_t eps = 0;  // nano units
  Precision p = Precision::kBf16;
};

absl::StatusOr<HeadRms> CheckHeadRms(const proto::OpSpec& spec, const Target& target) {
  const auto& fr = spec.fused_row();
  if (fr.reduce() != proto::FusedRowSpec::RMS_NORM || fr.residual() || fr.bias()) {
    return NotLowered("a per-head rmsnorm with a residual, a bias or another reduction");
  }
  HeadRms h;
  ASSIGN_OR_RETURN(h.ops, OperandsOf(spec, "fused_row", fr.weight() ? 2 : 1));
  RETURN_IF_ERROR(CheckElements("fused_row", "rows", fr.rows()));
  RETURN_IF_ERROR(CheckElements("fused_row", "cols", fr.cols()));
  ASSIGN_OR_RETURN(h.eps, EpsNano("fused_row", fr.eps()));
  RETURN_IF_ERROR(RequireFp32Accumulator("a row reduction", target));
  h.rows = fr.rows();
  h.cols = fr.cols();
  RETURN_IF_ERROR(CheckHeadIsItem("rmsnorm", h.cols, target));
  ASSIGN_OR_RETURN(h.n, CheckedElements("a per-head rmsnorm", h.rows, h.cols));
  h.head_t = TilesOf(h.cols, target);
  ASSIGN_OR_RETURN(h.p, ElemPrecision(target));
  return h;
}

// Where a per-head norm's items find their heads: x and the result are x_rows x x_cols; an item's page is
// `page_rows` rows of one head, at tile `step` (over the item's coordinates) of a tensor `pitch` tiles wide.
struct HeadLayout {
  int64_t x_rows = 1;
  int64_t x_cols = 1;
  int64_t page_rows = 1;
  int64_t pitch = 1;
  std::vector<Term> step;
  std::vector<WorkItem> items;
  std::string name;
};

// The per-head rmsnorm's chain, one page of everything: square, head_sum (each row's sum of squares), head_rsqrt
// (Rsqrt{eps, over cols}: the divide by the head width happens ONCE, inside the transform — the arrangement
// from_fused_row documents, and measured a bf16 ulp off when it did not), rescale x * inv [* w], the weight a Param
// per-column table every head and row reads.
absl::StatusOr<Composition> HeadRmsSection(const proto::OpSpec& spec, const HeadRms& h, const HeadLayout& l,
                                           const Target& target) {
  const Precision acc = Precision::kFp32;
  const int64_t tw = target.tile_cols();
  Template t(target.tile_rows(), tw);
  ASSIGN_OR_RETURN(TensorInit init, InitOf(h.ops[0].fill, h.n));
  const TensorId xt = t.AddTensor(h.ops[0].name, TensorRole::kInput, l.x_rows, l.x_cols, h.p, std::move(init));
  const TensorId yt = t.AddTensor(spec.out(), TensorRole::kOutput, l.x_rows, l.x_cols, h.p, TensorInit::Zero());
  const TensorId ones = t.AddTensor(absl::StrCat(spec.out(), "__rms_scaler"), TensorRole::kParam, target.tile_rows(),
                                    tw, h.p, TensorInit::ConstF(1.0));
  const BufferId xin = t.AddBufferDeep("in_x", 1, h.head_t, h.p);
  const BufferId oin = t.AddBufferDeep("in_scaler", 1, 1, h.p);
  t.AddLoadBlockAt("load_head", xt, 0, l.step, {.w = h.head_t, .pitch = l.pitch}, xin);
  t.AddLoadBlockAt("load_scaler", ones, 0, {}, {}, oin);
  const ElemAccess at = IdentMap(h.cols);  // (row r, column e of the head) in the page's plane
  const ElemAccess per_row = PerRowMap(tw);
  const BufferId sq = t.AddScratchDeep("head_sq", 1, h.head_t, acc);
  t.AddGeneric("square", HeadSpace(l.page_rows, h.cols), {xin, xin}, {at, at}, at, Mul(Op(0), Op(1)), sq);
  const BufferId ssq = t.AddScratchDeep("head_ssq", 1, 1, acc);
  t.AddGeneric("head_sum", HeadSpace(l.page_rows, h.cols, IterKind::kReduceSum), {sq, oin}, {at, ConstMap()}, per_row,
               Op(0), ssq);
  const BufferId inv = t.AddScratchDeep("head_inv", 1, 1, acc);
  t.AddGeneric("head_rsqrt", HeadSpace(l.page_rows, 1), {ssq}, {per_row}, per_row,
               Unary(SfpuKind::Rsqrt(h.eps, h.cols), Op(0)), inv);
  std::vector<BufferId> ins{xin, inv};
  std::vector<ElemAccess> maps{at, per_row};
  Body body = Mul(Op(0), Op(1));
  if (spec.fused_row().weight()) {
    ASSIGN_OR_RETURN(TensorInit w_init, InitOf(h.ops[1].fill, h.cols));
    const TensorId wt = t.AddTensor(h.ops[1].name, TensorRole::kParam, 1, h.cols, h.p, std::move(w_init));
    const BufferId wb = t.AddBufferDeep("in_w", 1, h.head_t, h.p);
    t.AddLoadBlockAt("load_w", wt, 0, {}, {.w = h.head_t, .pitch = h.head_t}, wb);
    ins.push_back(wb);
    maps.push_back(ElemAccess{0, {{LoopVar::kCol, 1}}, std::nullopt});  // column e of the weight's row, every row
    body = Mul(body, Op(2));
  }
  const BufferId ob = t.AddBufferDeep("out", 1, h.head_t, h.p);
  t.AddGeneric("rescale", HeadSpace(l.page_rows, h.cols), std::move(ins), std::move(maps), at, body, ob);
  t.AddStoreBlock(absl::StrCat("store_", spec.out()), yt, 0, l.step, {.w = h.head_t, .pitch = l.pitch}, ob);
  WireFirstReaders(t);
  // Every head reads the same scaler and weight (no step on ITEM_X): read once and multicast to the heads.
  MulticastSharedPrologue(t, LoopVar::kItemX);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a per-head rmsnorm of ", h.rows, " heads of ", h.cols),
                                 static_cast<int64_t>(l.items.size())));
  return FinishSection(t, l.name, l.items, acc, ApproxIn("per-head rmsnorm", h.p), target);
}

}  // namespace

// The flat twin with the HEAD as the work item: y[h, i] = x[h, i] * w[i] * rsqrt(mean_i x[h, i]^2 + eps) over the
// flat 1 x rows*cols row, a one-row page a head.
absl::StatusOr<Composition> BlockedHeadRms(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(const HeadRms h, CheckHeadRms(spec, target));
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a per-head rmsnorm of ", h.rows, " heads of ", h.cols), h.rows));
  return HeadRmsSection(spec, h,
                        HeadLayout{.x_rows = 1, .x_cols = h.n, .page_rows = 1, .pitch = h.head_t,
                                   .step = {{LoopVar::kItemX, h.head_t}}, .items = HeadItems(h.rows, h.head_t),
                                   .name = absl::StrCat("rmsnorm_heads_", h.rows, "x", h.cols)},
                        target);
}

absl::StatusOr<Composition> DenseHeadRms(const proto::OpSpec& spec, const Target& target) {
  const auto& fr = spec.fused_row();
  if (!fr.per_head()) return NotLowered("a dense-heads norm that is not per-head (per_head false)");
  RETURN_IF_ERROR(CheckDenseHeads(fr.dense_heads(), fr.rows()));
  const int64_t heads = fr.dense_heads();
  if (heads < 1) return NotLowered("a dense per-head rmsnorm of no heads");  // 0 is the flat form's
  ASSIGN_OR_RETURN(const HeadRms h, CheckHeadRms(spec, target));
  const int64_t tokens = h.rows / heads;
  const int64_t width_t = heads * h.head_t;  // at most n / tile: checked
  const int64_t rows_t = CeilDiv(tokens, target.tile_rows());
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a dense per-head rmsnorm of ", tokens, " x ", heads, " heads"),
                                 CheckedMul(rows_t, heads)));
  // Item (y, x): tile row y, head x — tile y * width_t + x * head_t.
  HeadLayout l{.x_rows = tokens, .x_cols = heads * h.cols, .page_rows = target.tile_rows(), .pitch = width_t,
               .step = {{LoopVar::kItemY, width_t}, {LoopVar::kItemX, h.head_t}}, .items = {},
               .name = absl::StrCat("rmsnorm_dense_heads_", tokens, "x", heads, "x", h.cols)};
  for (int64_t y = 0; y < rows_t; ++y) {
    for (int64_t x = 0; x < heads; ++x) {
      l.items.push_back(WorkItem{.id = static_cast<int64_t>(l.items.size()), .y = y, .x = x,
                                 .out = TileRect{.row0_t = y, .col0_t = x * h.head_t, .w_t = h.head_t}});
    }
  }
  return HeadRmsSection(spec, h, l, target);
}

namespace {

// A pointwise map of two equal-shaped tensors -- the fused residual add -- one item per tile: of a 1 x n row
// (the seed's blocked_binary_map, "{name}_{n}") or of a rows x cols matrix (matrix_binary_map,
// "{name}_{rows}x{cols}").
absl::StatusOr<Section> BinaryMap(const std::string& name, const std::string& kind, const Body& body,
                                  const OperandRef& a, const OperandRef& b, const std::string& out, int64_t rows,
                                  int64_t cols, Precision p, const Target& target) {
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit a_init, InitOf(a.fill, rows * cols));
  ASSIGN_OR_RETURN(TensorInit b_init, InitOf(b.fill, rows * cols));
  TensorId at = t.AddTensor(a.name, TensorRole::kInput, rows, cols, p, std::move(a_init));
  TensorId bt = t.AddTensor(b.name, TensorRole::kInput, rows, cols, p, std::move(b_init));
  TensorId yt = t.AddTensor(out, TensorRole::kOutput, rows, cols, p, TensorInit::Zero());
  const int64_t rows_t = CeilDiv(rows, target.tile_rows());
  const int64_t cols_t = CeilDiv(cols, target.tile_cols());
  const bool matrix = rows > 1;
  const std::vector<Term> steps =
      matrix ? TileGridSteps(cols_t) : std::vector<Term>{{LoopVar::kItemX, 1}};
  BufferId ain = t.AddBuffer("in_a", 1, p);
  BufferId bin = t.AddBuffer("in_b", 1, p);
  BufferId ob = t.AddBuffer("out", 1, p);
  StageId la = t.AddLoad("load_a", at, steps, 1, ain);
  StageId lb = t.AddLoad("load_b", bt, steps, 1, bin);
  const int64_t w = target.tile_cols();
  // A matrix tile has TR data rows; a flat row's tile has one.
  StageId s = t.AddGeneric(kind, matrix ? TileSpace(target.tile_rows(), w) : FlatSpace(w), {ain, bin},
                           {IdentMap(w), IdentMap(w)}, IdentMap(w), body, ob);
  StageId st = t.AddStore(absl::StrCat("store_", out), yt, steps, 1, ob);
  t.AddEdge(la, ain, s);
  t.AddEdge(lb, bin, s);
  t.AddEdge(s, ob, st);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat(name, " of ", rows, " x ", cols),
                                 matrix ? CheckedMul(rows_t, cols_t) : std::optional<int64_t>(cols_t)));
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, matrix ? absl::StrCat(name, "_", rows, "x", cols) : absl::StrCat(name, "_", cols),
                                 matrix ? ItemsPerTileGrid(rows_t, cols_t) : ItemsPerTile(cols_t), Precision::kFp32,
                                 ApproxIn(kind, p), target));
  return std::move(c.sections[0]);
}

// y[r][c] = x[r][c] * w[c] * inv[r], one item per tile: of a 1 x n row with inv a single element read through a
// fixed map so the same scalar reaches every block (the seed's rescale_row, "rmsnorm_rescale_{n}"), or of a rows x n
// matrix with the weight's tile broadcast down the tile's rows and the item's tile of the rows x 1 scale broadcast
// along them (rescale_rows, "rmsnorm_rescale_{rows}x{n}").
absl::StatusOr<Section> Rescale(const OperandRef& x, const std::optional<OperandRef>& weight, const std::string& inv,
                                const std::string& y, int64_t rows, int64_t n, Precision p, const Target& target) {
  const bool matrix = rows > 1;
  const int64_t rows_t = CeilDiv(rows, target.tile_rows());
  const int64_t cols_t = CeilDiv(n, target.tile_cols());
  const std::vector<Term> steps = matrix ? TileGridSteps(cols_t) : std::vector<Term>{{LoopVar::kItemX, 1}};
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(x.fill, rows * n));
  TensorId xt = t.AddTensor(x.name, TensorRole::kInput, rows, n, p, std::move(x_init));
  TensorId it = t.AddTensor(inv, TensorRole::kInput, rows, 1, p, TensorInit::External());
  TensorId yt = t.AddTensor(y, TensorRole::kOutput, rows, n, p, TensorInit::Zero());
  BufferId xin = t.AddBuffer("in_x", 1, p);
  BufferId iin = t.AddBuffer("in_inv", 1, p);
  BufferId ob = t.AddBuffer("out", 1, p);
  StageId lx = t.AddLoad("load_x", xt, steps, 1, xin);
  // The scale column is one tile wide: an item reads the tile of its own rows.
  std::vector<Term> row_steps;
  if (matrix && rows_t > 1) row_steps.push_back({LoopVar::kItemY, 1});
  StageId li = t.AddLoad("load_inv", it, row_steps, 1, iin);
  const int64_t w = target.tile_cols();
  std::vector<BufferId> ins{xin};
  std::vector<ElemAccess> maps{IdentMap(w)};
  Body body = Op(0);
  std::optional<std::pair<StageId, BufferId>> wl;
  if (weight) {
    ASSIGN_OR_RETURN(TensorInit w_init, InitOf(weight->fill, n));
    TensorId wt = t.AddTensor(weight->name, TensorRole::kParam, 1, n, p, std::move(w_init));
    BufferId b = t.AddBuffer("in_w", 1, p);
    wl = {t.AddLoad("load_w", wt, {{LoopVar::kItemX, 1}}, 1, b), b};
    ins.push_back(b);
    maps.push_back(matrix ? PerColMap() : IdentMap(w));
    body = Mul(body, Op(static_cast<int>(ins.size()) - 1));
  }
  ins.push_back(iin);
  maps.push_back(matrix ? PerRowMap(w) : Fixed(0));
  body = Mul(body, Op(static_cast<int>(ins.size()) - 1));
  StageId s = t.AddGeneric("rescale", matrix ? TileSpace(target.tile_rows(), w) : FlatSpace(w), std::move(ins),
                           std::move(maps), IdentMap(w), body, ob);
  StageId st = t.AddStore(absl::StrCat("store_", y), yt, steps, 1, ob);
  t.AddEdge(lx, xin, s);
  if (wl) t.AddEdge(wl->first, wl->second, s);
  t.AddEdge(li, iin, s);
  t.AddEdge(s, ob, st);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("an rmsnorm rescale of ", rows, " x ", n),
                                 matrix ? CheckedMul(rows_t, cols_t) : std::optional<int64_t>(cols_t)));
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, matrix ? absl::StrCat("rmsnorm_rescale_", rows, "x", n)
                                           : absl::StrCat("rmsnorm_rescale_", n),
                                 matrix ? ItemsPerTileGrid(rows_t, cols_t) : ItemsPerTile(cols_t), Precision::kFp32,
                                 ApproxIn("rmsnorm", p), target));
  return std::move(c.sections[0]);
}

}  // namespace

// ★ THE NUMERICS ARE THE ONES THE FUSED FORM ALREADY EARNED. The scale is applied ONCE, at step 4, and the division
// by n rides inside Rsqrt{over} rather than being smeared across the reduction's terms. The accumulation path stays
// at the accumulator's width; only the sections' outputs round.
absl::StatusOr<Composition> BlockedRmsNorm(const proto::OpSpec& spec, const Target& target) {
  const auto& fr = spec.fused_row();
  if (fr.reduce() != proto::FusedRowSpec::RMS_NORM) {
    return NotLowered("a blocked softmax or layernorm row op — only rmsnorm streams today");
  }
  if (fr.bias()) return NotLowered("a blocked rmsnorm with a bias term");
  const int64_t rows = fr.rows();
  const int64_t n = fr.cols();
  if (rows == 0) return NotLowered("a blocked rmsnorm over no rows");
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops,
                   OperandsOf(spec, "fused_row", 1 + static_cast<int>(fr.weight()) + static_cast<int>(fr.residual())));
  if (rows < 0) return absl::InvalidArgumentError(absl::StrCat("fused_row.rows is negative (", rows, ")"));
  RETURN_IF_ERROR(CheckElements("fused_row", "cols", n));
  ASSIGN_OR_RETURN(int64_t eps, EpsNano("fused_row", fr.eps()));
  RETURN_IF_ERROR(RequireFp32Accumulator("a row reduction", target));
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  // The squares one section writes are the matrix operand the next reads: one tensor, so one datatype.
  if (target.matrix_in() != p) {
    return MissingPrecision(absl::StrCat("a matrix engine taking ", std::string(PrecisionName(p)),
                                         " for a streamed rmsnorm's sum of squares"),
                            target);
  }
  // The spec's operand order is [x, weight?, residual?, bias?].
  size_t rest = 1;
  std::optional<OperandRef> weight;
  std::optional<OperandRef> residual;
  if (fr.weight()) weight = ops[rest++];
  if (fr.residual()) residual = ops[rest++];
  const std::string& y = spec.out();
  const std::string sq_name = absl::StrCat(y, "__xsq");
  const std::string ssq_name = absl::StrCat(y, "__ssq");
  const std::string inv_name = absl::StrCat(y, "__inv");
  const std::string ones_name = absl::StrCat(y, "__ones");
  // ★ AND WITH ITS REAL FILL. x is read by two sections (the squares and the rescale) and stored by neither, so it
  // keeps the fill the source gave it; a fused residual add's result IS produced by a section and has none.
  const OperandRef base = residual ? OperandRef{absl::StrCat(y, "__xr"), proto::Fill()} : ops[0];

  Composition out;
  out.name = absl::StrCat("rmsnorm_blocked_", rows, "x", n);
  out.target = target.name();
  out.tile_rows = target.tile_rows();
  out.tile_cols = target.tile_cols();
  if (residual) {
    ASSIGN_OR_RETURN(Section xr, BinaryMap("xr", "add", Add(Op(0), Op(1)), ops[0], *residual, base.name, rows, n, p,
                                           target));
    out.sections.push_back(std::move(xr));
  }
  // 1. the squares
  ASSIGN_OR_RETURN(Composition xsq,
                   UnaryMap("xsq", "square", Datapath::kFloat, Mul(Op(0), Op(0)), base, sq_name, rows, n, target));
  out.sections.push_back(std::move(xsq.sections[0]));
  // 2. the sum, as the contraction it is: [rows x n] * [n x 1] against a Param of ones.
  proto::OpSpec mm;
  mm.set_out(ssq_name);
  mm.add_operands()->set_name(sq_name);
  proto::Operand* ones = mm.add_operands();
  ones->set_name(ones_name);
  ones->mutable_fill()->set_const_f(1.0);
  mm.mutable_matmul()->set_m(rows);
  mm.mutable_matmul()->set_k(n);
  mm.mutable_matmul()->set_n(1);
  ASSIGN_OR_RETURN(Composition ssq, FromMatmul(mm, target));
  Section& sum = ssq.sections[0];
  // The ones are a compile-time constant the lowering embeds, not an operand a run is given.
  for (Tensor& tensor : sum.tensors) {
    if (tensor.name == ones_name) tensor.role = TensorRole::kParam;
  }
  out.sections.push_back(std::move(sum));
  // 3. the scale, computed once per row
  ASSIGN_OR_RETURN(Composition scale,
                   UnaryMap("rms_scale", "rsqrt", Datapath::kFloat, Unary(SfpuKind::Rsqrt(eps, n), Op(0)),
                            OperandRef{ssq_name, proto::Fill()}, inv_name, rows, 1, target));
  out.sections.push_back(std::move(scale.sections[0]));
  // 4. the rescale, with each row's scalar broadcast across every tile of its row
  ASSIGN_OR_RETURN(Section rescale, Rescale(base, weight, inv_name, y, rows, n, p, target));
  out.sections.push_back(std::move(rescale));
  DeclareStateOrder(out);
  return out;
}

}  // namespace spatial
