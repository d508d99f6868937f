// The attention geometry (seed 002, original lines 3834-3894 and 5200-5247): which query heads an attention
// computes, which K/V head each reads, which cache positions each query row sees, and — for the flash form — where
// the heads sit in the fold. Every attention lowering (flash fold, grouped decode, three-section, full attention)
// speaks this vocabulary, and AttentionShapeOf is from_attention's reading of an AttentionSpec (l.3735-3832), so the
// forms agree on what a spec means.
//
// ★ ONE SCHEME, EVERY ATTENTION. Decode is one row whose heads share K/V heads (GQA); a prefill chunk's causal block
// is T such rows; full attention is t rows whose heads read their own K/V head (group = 1).
#ifndef LOWERINGS_ATTENTION_GEOMETRY_H_
#define LOWERINGS_ATTENTION_GEOMETRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/body.h"
#include "targets/target.h"

namespace spatial {

// The value a masked score takes: far below any real score, and still finite in bf16 and fp32 (the seed's MASKED,
// l.5250, which is -1e30). exp(MASKED - m) underflows to exactly 0 against any real maximum m.
// ★ A POWER OF TWO, -2^100 (-1.27e30): bf16 and fp32 hold it exactly, so a section that stores it (the sinks' spread,
// claimed exact) stores the same value under the target's numerics as in exact f64. The seed's -1e30 rounds to bf16
// with a relative error of 2.6e-4, which made gpt-oss-20b's spread sinks differ from the exact VM (`model --values`).
inline constexpr double kMasked = -0x1p100;

// `rows` query rows of `per_row` heads each, a row's heads reading K/V heads in groups of `group`. Query head v is
// head v mod per_row of row v / per_row: its query and output sit at v*hd of the flat rows x (per_row*hd) block.
struct QueryHeads {
  int64_t rows = 1;
  int64_t per_row = 1;
  int64_t group = 1;

  int64_t count() const { return rows * per_row; }
  int64_t row_of(int64_t v) const { return v / per_row; }
  // ★ Query head v reads K/V head (v mod h) / group — not affine in v, so a flash item carries both.
  int64_t kv_of(int64_t v) const { return (v % per_row) / group; }
};

// The first query row's live length P, for a bound the cache's extent does not fix: query row r attends the first
// P + r positions.
struct Bound {
  enum class Kind { kLiteral, kOperand };
  Kind kind = Kind::kLiteral;
  // kLiteral: P, checked against the cache when the attention is lowered. kOperand: the operand index holding P,
  // checked at run time so every row stays inside the cache: 1 <= P <= rows - (T - 1).
  int64_t value = 0;

  static Bound Literal(int64_t p) { return {Kind::kLiteral, p}; }
  static Bound Operand(int64_t i) { return {Kind::kOperand, i}; }
  bool is_operand() const { return kind == Kind::kOperand; }
};

// The largest P a block of `q_rows` query rows admits over a cache of `rows`: its last row's positions all cached.
inline int64_t BoundMax(int64_t rows, int64_t q_rows) { return rows + 1 - q_rows; }

// A window of positions before a row's limit: the last W (sliding) or the row's own chunk of C (chunked).
struct Window {
  enum class Kind { kSliding, kChunked };
  Kind kind = Kind::kSliding;
  int64_t span = 0;  // W or C; 0 is refused (every row's softmax would be empty)

  static Window Sliding(int64_t w) { return {Kind::kSliding, w}; }
  static Window Chunked(int64_t c) { return {Kind::kChunked, c}; }
  // The 1-based first position a row attending its first n positions keeps: max(1, n - W + 1) for a sliding window,
  // floor((n - 1) / C) * C + 1 for a chunk.
  int64_t first(int64_t n) const;
};

// The window of a spec (nullopt when unset).
std::optional<Window> WindowOf(const proto::Window& w);

// The cache an attention reads: `rows` positions declared, the first `attended` covered, and — masked — the bound
// each query row's live positions end at, and the window a row keeps before it.
struct Cache {
  int64_t rows = 0;
  int64_t attended = 0;
  std::optional<Bound> limit;
  std::optional<Window> window;
};

// The widths of an attention's heads: kv K/V heads per position, keys hd and values vd wide, the factor every score
// takes, and the soft cap every scaled score takes before the mask, c*tanh(s/c).
struct HeadWidths {
  int64_t kv = 1;
  int64_t hd = 1;
  int64_t vd = 1;
  double scale = 1.0;
  std::optional<double> cap;
  // The exp that turns a score into a probability in the flash forms (AttentionSpec.probs_exp): the target's, or
  // its fast or accurate variant whatever its approx mode (tt-metal's SDPA recipes).
  SfpuKind probs_exp = SfpuKind::Exp();
  // The flash forms' contractions' fidelities (AttentionSpec.qk_fidelity / pv_fidelity): kDefault, the target's.
  MathFidelity qk_fidelity = MathFidelity::kDefault;
  MathFidelity pv_fidelity = MathFidelity::kDefault;
};

// Where a flash attention's query heads sit (l.5200-5229). Item (v, x) owns query head v of `q` and reads its K/V
// head x of a cache of `rows` positions holding `kvw` heads each. The blocks cover the first `l` positions, and
// `limit` masks query row r's positions from P + r on.
//
// `grouped`: the queries are ONE row regrouped by K/V head (grouped_decode.h) — a (kvw * tiles * tile) x hd matrix
// whose `tiles` = ceil(group / tile) tile rows from x * tiles hold K/V head x's query heads, one per row. Item y is
// then query tile y, reading K/V head y / tiles, and every row is limited by the one query row's P. A group taller
// than a tile (a latent attention's heads all share its one cache) streams the cache ONCE for its tiles: the K/V
// loads are multicast along the items of one K/V head.
//
// `latent`: the values are the first vd columns of each key — a latent attention's cache, whose rows are the latent
// and then the rope key. V is then not read: each block's key page is its value page too.
struct FlashGeometry {
  QueryHeads q;
  int64_t kvw = 1;
  int64_t hd = 1;
  // The values' width a head: the keys' hd, or another (a latent attention's values are its keys' latent part).
  int64_t vd = 1;
  // The value pages this fold computes, (first, count), when not all of them: a fold too large for a site is one
  // fold per page (flash.h, ValuePages).
  std::optional<std::pair<int64_t, int64_t>> v_part;
  int64_t rows = 0;  // cache positions declared
  int64_t l = 0;     // positions the blocks cover: ceil(l / tile) blocks
  std::optional<Bound> limit;
  std::optional<Window> window;
  // The operand holding one sink logit per query head (per_row of them), which joins each head's softmax and takes
  // no value.
  std::optional<int64_t> sinks;
  bool grouped = false;
  bool latent = false;
  // Flash-decoding (flash_split.h): the cache's blocks dealt round robin to `split` items per query tile, block b to
  // item b mod split, each folding its blocks to a partial (m, s, O) that a combine section merges. 1: no split.
  int64_t split = 1;
  // Grouped and split: the combine writes each K/V head's group of rows straight into ONE flat result row, query head
  // v at columns [v * vd, (v + 1) * vd) (the grouped decode's result), instead of the regrouped matrix a relayout
  // section would then pick the rows out of (grouped_decode.h).
  bool ungroup_out = false;
  // The positions a block covers (AttentionSpec.kv_chunk, tt-metal's k_chunk_size): whole tile rows; 0: the fold's
  // choice (flash_fold.h's FoldBlockTiles, flash_prefill.h).
  int64_t kv_chunk = 0;
  double scale = 1.0;
  std::optional<double> cap;
  SfpuKind probs_exp = SfpuKind::Exp();  // HeadWidths.probs_exp
  MathFidelity qk_fidelity = MathFidelity::kDefault;  // HeadWidths.qk_fidelity
  MathFidelity pv_fidelity = MathFidelity::kDefault;  // HeadWidths.pv_fidelity
  // The K/V caches' storage (AttentionSpec.kv_format, checked against the target by FromAttention); unset: the
  // datapath's precision, as Q's.
  std::optional<Precision> kv_precision;
  // The prefill fold's accumulator (AttentionSpec.dest_acc): fp32, or bf16 (checked by FromAttention).
  Precision dest = Precision::kFp32;
  // The prefill fold's K/V blocks read by every item itself, not multicast (AttentionSpec.kv_reads PER_ITEM).
  bool kv_per_item = false;
  // The prefill fold's chunks dealt to the sites as tt-metal's SDPA program factory deals them
  // (AttentionSpec.chunk_split CONTIGUOUS), not balanced.
  bool contiguous_chunks = false;
};

// Keys hd and values vd wide take the flash form on `target`: whole tiles (a key of any width is one contraction into
// a tile of scores; values wider than an accumulator page fold a page at a time).
bool FlashApplies(int64_t hd, int64_t vd, const Target& target);
// An attention of h query heads over kv K/V heads reads its K and V as DENSE tiles — the flash form's cache layout.
// A table an attention reads dense is written dense too, so this is the one place the two agree.
bool AttentionReadsDense(int64_t h, int64_t kv, int64_t hd, int64_t vd, const Target& target);
// AttentionReadsDense for a full attention, whose query heads read K/V heads one to one.
bool FullAttentionReadsDense(int64_t hd, const Target& target);

// An attention lowering's names: the result and its operands (the seed's StageNames).
struct AttentionNames {
  std::string out;
  std::vector<OperandRef> operands;

  const OperandRef& operand(int64_t i) const { return operands.at(static_cast<size_t>(i)); }
  // These names with the result renamed, and operand i replaced (a fold over a regrouped query, a value page).
  AttentionNames WithOut(std::string new_out) const;
  AttentionNames WithOperand(int64_t i, std::string name) const;
};

// What an AttentionSpec means, read the way from_attention reads it (l.3735-3832).
struct AttentionShape {
  QueryHeads heads;
  HeadWidths widths;
  Cache cache;
  std::optional<int64_t> sinks;  // the sinks' operand index: 3, or 4 after a named position
  std::string tag;               // "attn" (one query row) or "causal_attn"
  int64_t kv_chunk = 0;          // AttentionSpec.kv_chunk: positions a flash block covers, 0 the lowering's choice
};

// Reads `spec.attention()`. Refusals (NotLowered, the seed's messages): no heads, no query rows, no head dimension or
// an empty cache; a window of no positions; a block of query rows with no causal bound; a literal position outside
// its cache. A negative field (kv_chunk too), a value width of zero, or a named position that is not operand 3 is InvalidArgument.
// ★ A window always masks: an unmasked row's bound is the whole of what it attends (limit = Literal(attended)).
absl::StatusOr<AttentionShape> AttentionShapeOf(const proto::OpSpec& spec);

// The refusal of a literal position P whose query rows leave the cache: P is 1-based, the first query row's, and
// rows P .. P + rows - 1 must lie in 1 .. l (every attention form with a literal position says it this way).
absl::Status LiteralPositionOutsideCache(int64_t p, int64_t rows, int64_t l);

// The operands an attention spec takes: Q, K, V, then P when the position is named, then the sinks.
absl::StatusOr<AttentionNames> AttentionNamesOf(const proto::OpSpec& spec);

// The flash geometry of an attention shape (v_part none, not grouped): l = attended, rows = the cache's.
FlashGeometry FlashGeometryOf(const AttentionShape& shape);

// The default score scale, 1 / sqrt(hd).
double DefaultScale(int64_t hd);

// What a flash form's sections claim (the fold's, its combine's): approximate in `p`, and where either contraction
// runs at LoFi (the spec's qk_fidelity / pv_fidelity, else the target's fidelity), an error four times the default.
// LoFi multiplies one operand's top 5 significant bits, not bf16's 8 (tt-metal: "LoFi truncates SrcA to 5 and SrcB
// to 7 significant bits"; its FAST recipe rounds Q, K and V onto that grid first, prepare_sdpa_input, so that the
// truncation loses nothing, and reaches 2.9-3.0%). Unprepared bf16 inputs at LoFi measured 4.5-7.7% relative L2
// against the exact VM (prefill and decode, the fast and the accurate exp, uniform inputs) where HiFi2 gives ~2.4%.
NumericsClaim FlashClaim(const FlashGeometry& g, Precision p, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_GEOMETRY_H_
