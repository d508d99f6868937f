#include "lowerings/attention/geometry.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "spatial/status_macros.h"

namespace spatial {

int64_t Window::first(int64_t n) const {
  if (kind == Kind::kSliding) return std::max<int64_t>(1, n - span + 1);
  return ((n - 1) / span) * span + 1;
}

std::optional<Window> WindowOf(const proto::Window& w) {
  switch (w.kind_case()) {
    case proto::Window::kSliding: return Window::Sliding(w.sliding());
    case proto::Window::kChunked: return Window::Chunked(w.chunked());
    case proto::Window::KIND_NOT_SET: break;
  }
  return std::nullopt;
}

bool FlashApplies(int64_t hd, int64_t vd, const Target& target) {
  const int64_t tw = target.tile_cols();
  return hd > 0 && vd > 0 && hd % tw == 0 && vd % tw == 0;
}

bool AttentionReadsDense(int64_t h, int64_t kv, int64_t hd, int64_t vd, const Target& target) {
  return FlashApplies(hd, vd, target) && kv > 0 && h % kv == 0;
}

bool FullAttentionReadsDense(int64_t hd, const Target& target) { return FlashApplies(hd, hd, target); }

AttentionNames AttentionNames::WithOut(std::string new_out) const {
  AttentionNames n = *this;
  n.out = std::move(new_out);
  return n;
}

AttentionNames AttentionNames::WithOperand(int64_t i, std::string name) const {
  AttentionNames n = *this;
  n.operands.at(static_cast<size_t>(i)) = OperandRef{std::move(name), proto::Fill()};
  return n;
}

double DefaultScale(int64_t hd) { return 1.0 / std::sqrt(static_cast<double>(hd)); }

NumericsClaim FlashClaim(const FlashGeometry& g, Precision p, const Target& target) {
  NumericsClaim claim = ApproxIn("attention", p);
  const auto lofi = [&](MathFidelity f) {
    return f == MathFidelity::kLoFi || (f == MathFidelity::kDefault && target.matmul_fidelity() == proto::LOFI);
  };
  if (lofi(g.qk_fidelity) || lofi(g.pv_fidelity)) claim.error_growth = 4;
  // The fast exp (tt-metal's SDPA default, FAST recipe) rounds each probability at ~2^-8 of its value: tt-metal
  // measures 2.9-3.5% at K <= 4096 (13.4% at K 131072) where the accurate exp keeps the STANDARD recipe's 2.4%
  // (SDPAPrecisionRecipes.md, hardware-facts §5.3) — at the default tolerance's edge, past it on short sequences with
  // few values to average the error out (4.3% at 512 positions, differential fuzzing).
  const bool fast_exp = g.probs_exp.op == SfpuOp::kExpFast ||
                        (g.probs_exp.op == SfpuOp::kExp && target.proto().numerics().approx_mode());
  if (fast_exp) claim.error_growth = std::max(1.0, claim.error_growth) * 2;
  // A 16-bit Dst rounds the products' partial sums and the running state's updates to bf16 (the legacy kernel's
  // numerics: tt-metal measures 2.54% at K 4096 against STANDARD's 2.37%, and its BF16 state swamps at long K).
  if (g.dest != Precision::kFp32) claim.error_growth = std::max(1.0, claim.error_growth) * 2;
  return claim;
}

absl::Status LiteralPositionOutsideCache(int64_t p, int64_t rows, int64_t l) {
  return NotLowered(absl::StrCat("a literal attention position ", p, " outside [1, ", l - rows + 1, "] (1-based, the ",
                                 rows > 1 ? "first query row's; its " : "query row's; its ", rows,
                                 rows > 1 ? " rows" : " row", " within the ", l,
                                 "-position cache) — the program fails at run time on every tier, so there is no "
                                 "section to lower"));
}

absl::StatusOr<AttentionShape> AttentionShapeOf(const proto::OpSpec& spec) {
  if (spec.kind_case() != proto::OpSpec::kAttention) {
    return absl::InvalidArgumentError("an attention shape is read from an OpSpec of kind 'attention'");
  }
  const proto::AttentionSpec& a = spec.attention();
  RETURN_IF_ERROR(CheckNotNegative("attention", {{"h", a.h()}, {"kv", a.kv()}, {"hd", a.hd()}, {"vd", a.vd()},
                                                 {"l", a.l()}, {"rows", a.rows()}}));
  const int64_t h = a.h(), kv = a.kv(), hd = a.hd(), l = a.l(), t = a.rows();
  if (h == 0 || kv == 0 || hd == 0 || l == 0 || t == 0) {
    return NotLowered("an attention with no heads, no query rows, no head dimension or an empty cache");
  }
  if (a.vd() == 0) return NotLowered("an attention whose values have no width");
  std::optional<Window> window = WindowOf(a.window());
  if (window && window->span < 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention window span is negative (", window->span, ")"));
  }
  if (window && window->span == 0) {
    return NotLowered("a window of no positions — every row's softmax would be empty");
  }
  // A window at least the cache's length keeps every position a row can see (a sliding window reaches back past
  // position 0, a chunk holds the whole cache), so it is the cache's length: the same meaning, and constants that
  // fit the integer datapath.
  if (window && window->span > l) window->span = l;
  if (!std::isfinite(a.scale())) {
    return absl::InvalidArgumentError(absl::StrCat("attention.scale is not finite (", a.scale(), ")"));
  }
  if (!std::isfinite(a.softcap())) {
    return absl::InvalidArgumentError(absl::StrCat("attention.softcap is not finite (", a.softcap(), ")"));
  }
  const bool named = a.pos().kind_case() == proto::RowIndex::kNamed;
  if (named && a.pos().named().empty()) {
    return absl::InvalidArgumentError("the attention's position is named by an empty string (pos { named: \"\" })");
  }
  if (named && spec.operands_size() > 3 && spec.operands(3).name() != a.pos().named()) {
    return absl::InvalidArgumentError(absl::StrCat("the attention's position is named '", a.pos().named(),
                                                   "' but its operand 3 is '", spec.operands(3).name(), "'"));
  }

  AttentionShape s;
  s.heads = QueryHeads{t, h, std::max<int64_t>(h / kv, 1)};
  // The positions attended: the whole cache, a literal prefix of it, or — masked — the first P + r of query row r,
  // for a P the program reads (its operand follows Q, K, V) or a literal one under a block of rows.
  int64_t attended = l;
  std::optional<Bound> limit;
  switch (a.pos().kind_case()) {
    case proto::RowIndex::KIND_NOT_SET:
      if (t > 1) return NotLowered("a block of query rows with no causal bound");
      break;
    case proto::RowIndex::kLiteral: {
      const int64_t p = a.pos().literal();
      if (p < 1 || p > l - (t - 1)) return LiteralPositionOutsideCache(p, t, l);
      // One row attends exactly its P positions, unmasked; a block of rows is masked from P + r on.
      attended = p + (t - 1);
      if (t > 1) limit = Bound::Literal(p);
      break;
    }
    case proto::RowIndex::kNamed:
      if (t > l) return NotLowered("a block of query rows longer than its cache — no position admits every row");
      limit = Bound::Operand(3);
      break;
  }
  // ★ A WINDOW KEEPS THE LAST W OF EACH ROW'S POSITIONS, so its rows are always masked: an unmasked decode row's
  // bound is the whole of what it attends.
  if (window && !limit) limit = Bound::Literal(attended);
  s.cache = Cache{l, attended, limit, window};
  s.widths = HeadWidths{kv, hd, a.vd(), a.scale() != 0.0 ? a.scale() : DefaultScale(hd), std::nullopt};
  if (a.softcap() != 0.0) s.widths.cap = a.softcap();
  switch (a.probs_exp()) {
    case proto::AttentionSpec::PROBS_EXP_FAST: s.widths.probs_exp = SfpuKind::ExpFast(); break;
    case proto::AttentionSpec::PROBS_EXP_ACCURATE: s.widths.probs_exp = SfpuKind::ExpAccurate(); break;
    default: break;
  }
  for (const auto& [name, f, into] : {std::tuple{"qk_fidelity", a.qk_fidelity(), &s.widths.qk_fidelity},
                                      std::tuple{"pv_fidelity", a.pv_fidelity(), &s.widths.pv_fidelity}}) {
    if (!proto::Fidelity_IsValid(f)) {
      return absl::InvalidArgumentError(absl::StrCat("attention ", name, " is not a fidelity (", f, ")"));
    }
    *into = static_cast<MathFidelity>(f);
  }
  if (a.sinks()) s.sinks = 3 + (named ? 1 : 0);
  s.tag = t == 1 ? "attn" : "causal_attn";
  if (a.kv_chunk() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention kv_chunk is negative (", a.kv_chunk(), ")"));
  }
  s.kv_chunk = a.kv_chunk();
  return s;
}

absl::StatusOr<AttentionNames> AttentionNamesOf(const proto::OpSpec& spec) {
  if (spec.kind_case() != proto::OpSpec::kAttention) {
    return absl::InvalidArgumentError("attention names are read from an OpSpec of kind 'attention'");
  }
  const proto::AttentionSpec& a = spec.attention();
  const int count = 3 + (a.pos().kind_case() == proto::RowIndex::kNamed ? 1 : 0) + (a.sinks() ? 1 : 0);
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "attention", count));
  return AttentionNames{spec.out(), std::move(ops)};
}

FlashGeometry FlashGeometryOf(const AttentionShape& shape) {
  FlashGeometry g;
  g.q = shape.heads;
  g.kvw = shape.widths.kv;
  g.hd = shape.widths.hd;
  g.vd = shape.widths.vd;
  g.rows = shape.cache.rows;
  g.l = shape.cache.attended;
  g.limit = shape.cache.limit;
  g.window = shape.cache.window;
  g.sinks = shape.sinks;
  g.scale = shape.widths.scale;
  g.cap = shape.widths.cap;
  g.probs_exp = shape.widths.probs_exp;
  g.qk_fidelity = shape.widths.qk_fidelity;
  g.pv_fidelity = shape.widths.pv_fidelity;
  g.kv_chunk = shape.kv_chunk;
  return g;
}

}  // namespace spatial
