#include "lowerings/attention/full_attention.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/sections.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {

FlashGeometry FullAttentionGeometry(const proto::FullAttentionSpec& spec) {
  FlashGeometry g;
  // ★ ONE SCHEME, EVERY ATTENTION: t rows whose heads read their own K/V head.
  g.q = QueryHeads{spec.t(), spec.h(), 1};
  g.kvw = spec.h();
  g.hd = spec.hd();
  g.vd = spec.hd();
  g.rows = spec.t();
  g.l = spec.t();
  g.scale = DefaultScale(spec.hd());
  return g;
}

absl::StatusOr<Composition> FromFullAttention(const proto::OpSpec& spec, const Target& target) {
  const proto::FullAttentionSpec& f = spec.full_attention();
  if (f.t() < 0 || f.h() < 0 || f.hd() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_attention has a negative field (t ", f.t(), ", h ", f.h(), ", hd ", f.hd(), ")"));
  }
  if (f.t() == 0 || f.h() == 0 || f.hd() == 0) {
    return NotLowered("a full attention with no positions, no heads or no head dimension");
  }
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "full_attention", 3));
  const FlashGeometry g = FullAttentionGeometry(f);
  AttentionNames names{spec.out(), std::move(ops)};
  if (FullAttentionReadsDense(f.hd(), target)) return FlashAttention(names, g, "full_attn", target);
  // A head that is not whole tiles: the three flat sections, every row seeing all t positions.
  return AttentionSections(names, g.q, HeadWidths{g.kvw, g.hd, g.vd, g.scale, std::nullopt},
                           Cache{g.rows, g.l, std::nullopt, std::nullopt}, std::nullopt, "full_attn", target);
}

}  // namespace spatial
