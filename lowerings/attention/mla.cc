#include "lowerings/attention/mla.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/flash_split.h"
#include "lowerings/attention/relayout_rows.h"
#include "lowerings/matmul/head_matmul.h"
#include "lowerings/tables/tables.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<MlaShape> MlaShapeOf(const proto::OpSpec& spec) {
  if (spec.kind_case() != proto::OpSpec::kMla) {
    return absl::InvalidArgumentError("a latent attention's shape is read from an OpSpec of kind 'mla'");
  }
  const proto::MlaSpec& m = spec.mla();
  RETURN_IF_ERROR(CheckNotNegative("mla", {{"heads", m.heads()}, {"nope", m.nope()}, {"rope", m.rope()},
                                           {"rank", m.rank()}, {"vd", m.vd()}, {"l", m.l()}, {"rows", m.rows()}}));
  if (!std::isfinite(m.scale())) {
    return absl::InvalidArgumentError(absl::StrCat("mla.scale is ", m.scale(), ": a score scale is finite (0: "
                                                   "1 / sqrt(nope + rope))"));
  }
  if (m.heads() == 0 || m.nope() == 0 || m.rope() == 0 || m.rank() == 0 || m.vd() == 0 || m.l() == 0) {
    return NotLowered("a latent attention with no heads, no head widths, no latent or an empty cache");
  }
  MlaShape s;
  s.heads = m.heads();
  s.nope = m.nope();
  s.rope = m.rope();
  s.rank = m.rank();
  s.vd = m.vd();
  s.l = m.l();
  s.attended = m.l();
  s.scale = m.scale() != 0.0 ? m.scale() : DefaultScale(m.nope() + m.rope());
  s.rows = std::max<int64_t>(m.rows(), 1);
  switch (m.pos().kind_case()) {
    case proto::RowIndex::KIND_NOT_SET:
      if (s.rows > 1) return NotLowered("a block of query rows with no causal bound");
      break;
    case proto::RowIndex::kLiteral:
      if (m.pos().literal() < 1 || m.pos().literal() + (s.rows - 1) > m.l()) {
        return LiteralPositionOutsideCache(m.pos().literal(), s.rows, m.l());
      }
      s.attended = m.pos().literal() + (s.rows - 1);  // the last row's
      break;
    case proto::RowIndex::kNamed:
      s.limit = Bound::Operand(4);
      s.operands = 5;
      if (m.pos().named().empty()) {
        return absl::InvalidArgumentError("the latent attention's position is named by an empty string (pos { named: \"\" })");
      }
      if (spec.operands_size() > 4 && spec.operands(4).name() != m.pos().named()) {
        return absl::InvalidArgumentError(absl::StrCat("the latent attention's position is named '",
                                                       m.pos().named(), "' but its operand 4 is '",
                                                       spec.operands(4).name(), "'"));
      }
      break;
  }
  return s;
}

namespace {

// "{out}__mla_qcat": each head's [q_nope W_uk | q_rope] over a prefill's rows, DENSE in and out — item (token tile
// ITEM_Y, head ITEM_X) copies the head's latent query tiles and its rope tiles side by side. ★ NO FLAT ROWS AT A
// PREFILL: a 1 x n row fills one row of every tile, so T rows of it move 32 times their bytes.
absl::StatusOr<Composition> DenseQuery(const OperandRef& qlat, const OperandRef& q, const std::string& out,
                                       const MlaShape& s, Precision p, const Target& target) {
  const int64_t tr = target.tile_rows(), tw = target.tile_cols(), T = s.rows;
  const int64_t rank_t = s.rank / tw, rope_t = s.rope / tw, key_t = rank_t + rope_t, every_t = s.q_every() / tw;
  const int64_t rows_t = CeilDiv(T, tr);
  RETURN_IF_ERROR(WorkItemBudget("a latent attention's prefill query", CheckedMul(rows_t, s.heads)));
  Template t(tr, tw);
  const TensorId lt = t.AddTensor(qlat.name, TensorRole::kInput, T, s.heads * s.rank, p, TensorInit::External());
  ASSIGN_OR_RETURN(TensorInit q_init, InitOf(q.fill, T * s.heads * s.q_every()));
  const TensorId qt = t.AddTensor(q.name, TensorRole::kInput, T, s.heads * s.q_every(), p, std::move(q_init));
  const TensorId y = t.AddTensor(out, TensorRole::kOutput, T, s.heads * s.key(), p, TensorInit::Zero());
  struct Part {
    const char* name;
    TensorId from;
    int64_t tiles, base, row_tiles, every, at;
  };
  for (const Part& part : {Part{"latent", lt, rank_t, 0, s.heads * rank_t, rank_t, 0},
                           Part{"rope", qt, rope_t, s.nope / tw, s.heads * every_t, every_t, rank_t}}) {
    const BufferId in = t.AddBuffer(absl::StrCat("in_", part.name), part.tiles, p);
    t.AddLoadBlockAt(absl::StrCat("load_", part.name), part.from, part.base,
                     {{LoopVar::kItemY, part.row_tiles}, {LoopVar::kItemX, part.every}}, {.w = part.tiles}, in);
    const BufferId copy = t.AddBuffer(part.name, part.tiles, p);
    const int64_t w = t.PageWidth(part.tiles);
    t.AddGeneric(part.name, TileSpace(tr, w), {in}, {IdentMap(w)}, IdentMap(w), Op(0), copy);
    t.AddStoreBlock(absl::StrCat("store_", part.name), y, part.at,
                    {{LoopVar::kItemY, s.heads * key_t}, {LoopVar::kItemX, key_t}}, {.w = part.tiles}, copy);
  }
  WireFirstReaders(t);
  std::vector<WorkItem> items;
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t i = 0; i < rows_t; ++i) {
      items.push_back(WorkItem{.id = h * rows_t + i, .y = i, .x = h,
                               .out = TileRect{.row0_t = i, .col0_t = h * key_t, .h_t = 1, .w_t = key_t}});
    }
  }
  return FinishSection(t, out, std::move(items), AccFor(p), NumericsClaim::Exact(), target, DstPolicy::kStreamed);
}

// A prefill's rows (mla.h): the absorbed query of every row and head, the fold with the rows as query rows of every
// head over the one latent cache, and W_uv over the rows.
absl::StatusOr<Composition> MlaRows(const proto::OpSpec& spec, const MlaShape& s, const std::vector<OperandRef>& ops,
                                    const Target& target) {
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  const std::string& out = spec.out();
  auto name = [&](const char* part) { return absl::StrCat(out, "__mla_", part); };
  auto internal = [&](const char* part) { return OperandRef{name(part), proto::Fill()}; };
  const int64_t T = s.rows;
  std::vector<absl::StatusOr<Composition>> parts;
  // ★ A PREFILL'S ABSORBED QUERY IS A PRODUCT PER HEAD: T rows of q_nope[h] against W_uk[h], on the matrix engine.
  parts.push_back(TileHeadMatmulRows(HeadMatmulTiles{.x = ops[0], .x_every = s.q_every(), .x_from = 0, .w = ops[1],
                                                     .out = name("qlat"), .heads = s.heads, .a = s.nope,
                                                     .b = s.rank, .scaler = {}},
                                     T, target));
  parts.push_back(DenseQuery(internal("qlat"), ops[0], name("q"), s, precision, target));

  // The fold: T query rows of every head, one latent K/V head, row t limited to P + t positions.
  FlashGeometry g;
  g.q = QueryHeads{T, s.heads, s.heads};
  g.kvw = 1;
  g.hd = s.key();
  g.vd = s.rank;
  g.rows = s.l;
  g.l = s.attended;
  g.limit = s.limit ? Bound::Operand(3) : Bound::Literal(s.attended - (T - 1));
  g.latent = true;
  g.scale = s.scale;
  AttentionNames fold_names{name("ctx"), {internal("q"), ops[2], ops[2]}};
  if (s.limit) fold_names.operands.push_back(ops[4]);
  parts.push_back(FlashAttention(fold_names, g, "mla", target));

  // Each head's latent context through W_uv[h], over the rows.
  parts.push_back(TileHeadMatmulRows(HeadMatmulTiles{.x = internal("ctx"), .x_every = s.rank, .x_from = 0,
                                                     .w = ops[3], .out = out, .heads = s.heads, .a = s.rank,
                                                     .b = s.vd, .scaler = {}},
                                     T, target));
  std::vector<Composition> sections;
  for (absl::StatusOr<Composition>& part : parts) {
    RETURN_IF_ERROR(part.status());
    sections.push_back(*std::move(part));
  }
  return ComposeSections(absl::StrCat("mla_", T, "x", s.heads, "x", s.nope, "+", s.rope, "_r", s.rank, "_v", s.vd,
                                      "_l", s.l),
                         std::move(sections), target);
}

}  // namespace

absl::StatusOr<Composition> FromMla(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(const MlaShape s, MlaShapeOf(spec));
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "mla", s.operands));
  const int64_t tr = target.tile_rows();
  if (!WholeTiles({s.nope, s.rope, s.rank, s.vd}, target) || s.heads % tr != 0) {
    return NotLowered(absl::StrCat("a latent attention whose widths are not whole tiles, or whose heads are not "
                                   "whole tile rows (nope ", s.nope, ", rope ", s.rope, ", rank ", s.rank, ", vd ",
                                   s.vd, ", heads ", s.heads, " on ", target.tile_rows(), " x ", target.tile_cols(),
                                   " tiles)"));
  }
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  const std::string& out = spec.out();
  auto name = [&](const char* part) { return absl::StrCat(out, "__mla_", part); };
  auto internal = [&](const char* part) { return OperandRef{name(part), proto::Fill()}; };
  std::vector<absl::StatusOr<Composition>> parts;
  if (s.rows > 1) return MlaRows(spec, s, ops, target);

  // 1-4: the query each head scores the cache with, [q_nope W_uk | q_rope], as row h of a dense matrix.
  parts.push_back(TileHeadMatmul(HeadMatmulTiles{.x = ops[0], .x_every = s.q_every(), .x_from = 0, .w = ops[1],
                                                 .out = name("qlat"), .heads = s.heads, .a = s.nope, .b = s.rank,
                                                 .scaler = name("absorb_scaler")},
                                 target));
  proto::OpSpec slice;
  slice.set_out(name("qrope"));
  *slice.add_operands() = spec.operands(0);
  proto::HeadSliceSpec* hs = slice.mutable_head_slice();
  hs->set_every(s.q_every());
  hs->set_from(s.nope);
  hs->set_width(s.rope);
  hs->set_n(s.heads * s.q_every());
  parts.push_back(FromHeadSlice(slice, target));
  parts.push_back(TileJoin(internal("qlat"), internal("qrope"), name("qcat"), 1, s.heads, s.rank, s.rope, target));
  parts.push_back(RelayoutRowsToDense(internal("qcat"), name("q"), s.heads, s.key(), precision, target));

  // 5: the fold. Its keys and values are the one cache: K the whole row, V its latent.
  FlashGeometry g;
  g.q = QueryHeads{1, s.heads, s.heads};
  g.kvw = 1;
  g.hd = s.key();
  g.vd = s.rank;
  g.rows = s.l;
  g.l = s.attended;
  g.limit = s.limit;
  g.grouped = true;
  g.latent = true;
  g.scale = s.scale;
  g.split = DecodeSplit(g, target);
  AttentionNames fold_names{name("ctx"), {internal("q"), ops[2], ops[2]}};
  if (s.limit) fold_names.operands.push_back(ops[4]);
  // The fold reads P as its operand 3.
  if (g.limit) g.limit = Bound::Operand(3);
  parts.push_back(FlashAttention(fold_names, g, "mla", target));

  // 6-7: each head's latent context through W_uv[h].
  parts.push_back(RelayoutDenseToRows(internal("ctx"), name("octx"), s.heads, s.rank, precision, target));
  parts.push_back(TileHeadMatmul(HeadMatmulTiles{.x = internal("octx"), .x_every = s.rank, .x_from = 0, .w = ops[3],
                                                 .out = out, .heads = s.heads, .a = s.rank, .b = s.vd,
                                                 .scaler = name("expand_scaler")},
                                 target));
  std::vector<Composition> sections;
  for (absl::StatusOr<Composition>& part : parts) {
    RETURN_IF_ERROR(part.status());
    sections.push_back(*std::move(part));
  }
  return ComposeSections(
      absl::StrCat("mla_", s.heads, "x", s.nope, "+", s.rope, "_r", s.rank, "_v", s.vd, "_l", s.l),
      std::move(sections), target);
}

}  // namespace spatial
