#include "lowerings/rows/row_norms.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/rows/row_norms_blocked.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The row scalar of every per-row normalization: square -> fold the row -> transform it (the seed's row_scale_chain).
struct RowScale {
  std::vector<StageId> chain;
  BufferId scale;     // one value per row, at column 0 of row r of a one-tile page
  int64_t scale_w;    // that page's width: row r's scalar is at r * scale_w
};

// The reduce engine's scaler operand, at 1.0: Tensix's reduce_tile multiplies every term by a constant tile and
// REQUIRES one. Every divide in these chains happens ONCE, in the transform.
BufferId ReduceScaler(FlatBuild& b) {
  Template& t = b.t();
  TensorId ones = OnesTile(t, "row_scaler", b.precision());
  BufferId ones_in = t.AddBuffer("in_scaler", 1, b.precision());
  b.AddLoadToWire(t.AddLoad("load_scaler", ones, {}, 1, ones_in), ones_in);
  return ones_in;
}

// `xin` holds row r's element j at r * pitch + j: the flat input (pitch = cols) or a rows x cols plane.
RowScale RowScaleChain(FlatBuild& b, BufferId xin, int64_t pitch, BufferId ones_in, int64_t rows, int64_t cols,
                       SfpuKind xform, const Target& target) {
  Template& t = b.t();
  const int64_t sq_tiles = TilesOf(cols, target);
  const int64_t sqw = t.PageWidth(sq_tiles);
  BufferId xsq = b.Scratch("xsq", sq_tiles);
  // The square reads the FLAT input through a 2-D space (the row is the head) and writes the rows x cols plane the
  // reduction folds.
  StageId s1 = b.Compute("square", HeadSpace(rows, cols), {Slot{xin, Map2(0, pitch, 1)}, Slot{xin, Map2(0, pitch, 1)}},
                         IdentMap(sqw), Mul(Op(0), Op(1)), xsq);
  const int64_t one_w = t.PageWidth(1);
  BufferId ssum = b.Scratch("row_sum", 1);
  StageId s2 = b.Compute("reduce_rows", HeadSpace(rows, cols, IterKind::kReduceSum),
                         {Slot{xsq, Map2(0, sqw, 1)}, Slot{ones_in, ConstMap()}}, PerRowMap(one_w), Op(0), ssum);
  BufferId scale = b.Scratch("row_scale", 1);
  StageId s3 = b.Compute("row_xform", HeadSpace(rows, target.tile_cols()), {Slot{ssum, PerRowMap(one_w)}},
                         PerRowMap(one_w), Unary(xform, Op(0)), scale);
  return RowScale{{s1, s2, s3}, scale, one_w};
}

// Whether the flat form holds the row: one accumulator page for the whole row, and the rows x cols planes of its
// chain in one tile-high page.
bool FlatFits(int64_t rows, int64_t cols, const Target& target) {
  return !RowNeedsBlocking(rows * cols, target) && rows <= target.tile_rows();
}


// Why neither the flat form nor the head-per-item form holds this row.
absl::Status NoFormFor(const std::string& what, int64_t rows, int64_t cols, const Target& target) {
  if (rows > target.tile_rows() && !RowNeedsBlocking(rows * cols, target)) {
    return NotLowered(absl::StrCat("a flat ", what, " over ", rows, " rows, more than a tile's ", target.tile_rows()));
  }
  if (!RowNeedsBlocking(cols, target) && cols % target.tile_cols() != 0) {
    return NotLowered(absl::StrCat("a ", what, " whose heads of ", cols, " are not whole tiles of ",
                                   target.tile_cols(), ", at a width that needs blocking"));
  }
  return absl::OkStatus();  // the flat form, which refuses a row wider than the accumulator
}

}  // namespace

bool HeadIsItem(int64_t cols, const Target& target) {
  return !RowNeedsBlocking(cols, target) && cols % target.tile_cols() == 0;
}

absl::StatusOr<Composition> FromL2Norm(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "l2norm", 1));
  const auto& l2 = spec.l2norm();
  RETURN_IF_ERROR(CheckElements("l2norm", "rows", l2.rows()));
  RETURN_IF_ERROR(CheckElements("l2norm", "cols", l2.cols()));
  ASSIGN_OR_RETURN(int64_t eps, EpsNano("l2norm", l2.eps()));
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  (void)elem;
  RETURN_IF_ERROR(RequireFp32Accumulator("an l2 normalization", target));
  const int64_t rows = l2.rows();
  const int64_t cols = l2.cols();
  const int64_t n = rows * cols;
  if (!FlatFits(rows, cols, target)) {
    if (HeadIsItem(cols, target)) return BlockedL2Norm(spec, target);
    RETURN_IF_ERROR(NoFormFor("l2norm", rows, cols, target));
  }
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId xin, b.Input(ops[0].name, n, ops[0].fill));
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = b.t().AddBuffer("out", cols_t, b.precision());
  // `over: 1` -- l2norm divides by the root SUM of squares, not the root mean.
  RowScale rs = RowScaleChain(b, xin, cols, ReduceScaler(b), rows, cols, SfpuKind::Rsqrt(eps, 1), target);
  // ★ THE BANDED RESCALE. Head h occupies the flat columns [h*cols, (h+1)*cols), and its scale sits at row h of the
  // scale page -- so inside the band the scale's map is a CONSTANT offset.
  std::vector<Slot> slots{Slot{xin, At(0)}};
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t h = 0; h < rows; ++h) {
    slots.push_back(Slot{rs.scale, Fixed(h * rs.scale_w)});
    bands.push_back({(h + 1) * cols, Mul(Op(0), Op(static_cast<int>(slots.size()) - 1))});
  }
  std::vector<StageId> chain = rs.chain;
  chain.push_back(b.Compute("rescale", FlatSpace(n), std::move(slots), IdentMap(b.t().PageWidth(cols_t)),
                            Banded(bands), out_buf));
  return FitSite(b.Finish(spec.out(), n, chain, out_buf, absl::StrCat("l2norm_", rows, "x", cols),
                          ApproxIn("per-head l2 normalization", b.precision())),
                 "l2norm", target);
}

namespace {

// The seed's from_row_norm_flat: the COMPOSITION-LAYOUT twin of from_fused_row's RMSNorm, the same chain (square ->
// fold -> rsqrt-once -> rescale -> per-column weight) over a FLAT 1 x rows*cols tensor.
// ★ WHY A TWIN AND NOT A PARAMETER: from_fused_row gives the tensor the shape the source declared; inside a
// composition the same tensor is a 1 x n activation, and the two views put element `cols` in different places.
//
// EXTENSION (not in the seed, which refuses "a composed layernorm row op ... no flat twin yet"): LAYER_NORM runs the
// same chain over the centred row. A reduce_mean stage folds the row's sum, a centre stage writes the rows x cols
// plane x - sum * (1/cols) (the mean's divide is a multiply by the constant 1/cols), the RMS chain on that plane gives
// 1/sqrt(var + eps) (Rsqrt{eps, over cols}: the population variance), and the rescale adds the per-column bias.
absl::StatusOr<Composition> RowNormFlat(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                        const Target& target) {
  const auto& fr = spec.fused_row();
  const bool layer = fr.reduce() == proto::FusedRowSpec::LAYER_NORM;
  const int64_t rows = fr.rows();
  const int64_t cols = fr.cols();
  const int64_t n = rows * cols;
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId xin, b.Input(ops[0].name, n, ops[0].fill));
  // The spec's operand order is [x, weight?, residual?, bias?].
  size_t rest = 1;
  std::optional<BufferId> w_in;
  std::optional<BufferId> res_in;
  std::optional<BufferId> bias_in;
  if (fr.weight()) {
    ASSIGN_OR_RETURN(BufferId w, b.Input(ops[rest].name, cols, ops[rest].fill));
    w_in = w;
    ++rest;
  }
  if (fr.residual()) {
    ASSIGN_OR_RETURN(BufferId r, b.Input(ops[rest].name, n, ops[rest].fill));
    res_in = r;
    ++rest;
  }
  if (fr.bias()) {
    if (!layer) return NotLowered("a composed rmsnorm with a bias term");
    ASSIGN_OR_RETURN(BufferId bb, b.Input(ops[rest].name, cols, ops[rest].fill));
    bias_in = bb;
  }
  ASSIGN_OR_RETURN(int64_t eps, EpsNano("fused_row", fr.eps()));
  Template& t = b.t();
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = t.AddBuffer("out", cols_t, b.precision());
  const int64_t ow = t.PageWidth(cols_t);
  // A fused residual add is part of the value that is normalized, so it happens first and its result is what both
  // the reduction and the rescale read.
  std::vector<StageId> chain;
  BufferId src = xin;
  if (res_in) {
    BufferId xr = b.Scratch("xr", cols_t);
    chain.push_back(b.Compute("add_residual", FlatSpace(n), {Slot{xin, At(0)}, Slot{*res_in, At(0)}}, IdentMap(ow),
                              Add(Op(0), Op(1)), xr));
    src = xr;
  }
  BufferId ones_in = ReduceScaler(b);
  // What the chain normalizes: the flat source (row pitch cols), or for a layer norm the centred plane (pitch sqw).
  BufferId norm = src;
  int64_t pitch = cols;
  if (layer) {
    const int64_t one_w = t.PageWidth(1);
    const int64_t sq_tiles = TilesOf(cols, target);
    BufferId total = b.Scratch("row_total", 1);
    chain.push_back(b.Compute("reduce_mean", HeadSpace(rows, cols, IterKind::kReduceSum),
                              {Slot{src, Map2(0, cols, 1)}, Slot{ones_in, ConstMap()}}, PerRowMap(one_w), Op(0),
                              total));
    pitch = t.PageWidth(sq_tiles);
    norm = b.Scratch("xc", sq_tiles);
    chain.push_back(b.Compute("centre", HeadSpace(rows, cols), {Slot{src, Map2(0, cols, 1)}, Slot{total, PerRowMap(one_w)}},
                              IdentMap(pitch), Sub(Op(0), Mul(Op(1), Const(1.0 / static_cast<double>(cols)))), norm));
  }
  RowScale rs = RowScaleChain(b, norm, pitch, ones_in, rows, cols, SfpuKind::Rsqrt(eps, cols), target);
  chain.insert(chain.end(), rs.chain.begin(), rs.chain.end());
  // Head h's element j is flat column c = h*cols + j, at h*pitch + j of what is normalized: c + h*(pitch - cols).
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  auto slot = [&](BufferId buf, ElemAccess map) {
    slots.push_back(Slot{buf, std::move(map)});
    return Op(static_cast<int>(slots.size()) - 1);
  };
  // The flat source is one read shared by every band (the seed's slot 0); the plane is read per head.
  const Body shared = layer ? Body() : slot(norm, At(0));
  for (int64_t h = 0; h < rows; ++h) {
    Body v = layer ? slot(norm, At(h * (pitch - cols))) : shared;
    Body value = Mul(v, slot(rs.scale, Fixed(h * rs.scale_w)));
    if (w_in) value = Mul(value, slot(*w_in, At(-h * cols)));
    if (bias_in) value = Add(value, slot(*bias_in, At(-h * cols)));
    bands.push_back({(h + 1) * cols, value});
  }
  chain.push_back(b.Compute("rescale", FlatSpace(n), std::move(slots), IdentMap(ow), Banded(bands), out_buf));
  const std::string name = absl::StrCat(layer ? "layernorm_flat_" : "rmsnorm_flat_", rows, "x", cols);
  return FitSite(b.Finish(spec.out(), n, chain, out_buf, name, ApproxIn("row reduction", b.precision())),
                 layer ? "layernorm" : "rmsnorm", target);
}

}  // namespace

absl::StatusOr<Composition> FromFusedRow(const proto::OpSpec& spec, const Target& target) {
  const auto& fr = spec.fused_row();
  if (fr.reduce() == proto::FusedRowSpec::REDUCE_UNSPECIFIED) {
    return absl::InvalidArgumentError("fused_row.reduce is unspecified (RMS_NORM or LAYER_NORM)");
  }
  const int count = 1 + static_cast<int>(fr.weight()) + static_cast<int>(fr.residual()) + static_cast<int>(fr.bias());
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "fused_row", count));
  RETURN_IF_ERROR(CheckElements("fused_row", "cols", fr.cols()));
  if (fr.rows() < 0) return absl::InvalidArgumentError(absl::StrCat("fused_row.rows is negative (", fr.rows(), ")"));
  RETURN_IF_ERROR(ElemPrecision(target).status());
  RETURN_IF_ERROR(RequireFp32Accumulator("a row reduction", target));
  const int64_t rows = fr.rows();
  const int64_t cols = fr.cols();
  // Dense token rows keep their layout: the tile row of tokens and a head are the item (DenseHeadRms).
  if (fr.dense_heads() != 0) return DenseHeadRms(spec, target);
  // A row the accumulator holds whole, of rows a tile holds: the flat twin. (A row of zero rows is refused by the
  // streamed form, whose message the seed has.)
  if (rows > 0 && FlatFits(rows, cols, target)) return RowNormFlat(spec, ops, target);
  // ★ A PER-HEAD NORM REDUCES PER HEAD, so the head is the item -- the same fact blocked_l2norm turns on.
  if (rows > 0 && HeadIsItem(cols, target) && !fr.residual() && !fr.bias() &&
      fr.reduce() == proto::FusedRowSpec::RMS_NORM) {
    return BlockedHeadRms(spec, target);
  }
  if (rows > 1 && fr.per_head()) {
    RETURN_IF_ERROR(NoFormFor("per-head rmsnorm", rows, cols, target));
    return NotLowered(absl::StrCat("a per-head rmsnorm of ", rows, " heads of ", cols,
                                   " that needs the streamed form, whose rows x cols matrix is not the flat layout of "
                                   "a per-head activation"));
  }
  return BlockedRmsNorm(spec, target);
}

}  // namespace spatial
