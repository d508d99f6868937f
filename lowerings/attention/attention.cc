#include "lowerings/attention/attention.h"

#include "lowerings/attention/geometry.h"
#include "lowerings/attention/grouped_decode.h"
#include "lowerings/attention/sections.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<Composition> FromAttention(const proto::OpSpec& spec, const Target& target) {
  // The seed refuses a malformed attention before it looks at its operands.
  ASSIGN_OR_RETURN(const AttentionShape shape, AttentionShapeOf(spec));
  ASSIGN_OR_RETURN(const AttentionNames names, AttentionNamesOf(spec));
  const proto::AttentionSpec& a = spec.attention();
  if (AttentionReadsDense(a.h(), a.kv(), a.hd(), a.vd(), target)) {
    return FlashFormAttention(names, FlashGeometryOf(shape), shape.tag, target);
  }
  return AttentionSections(names, shape.heads, shape.widths, shape.cache, shape.sinks, shape.tag, target);
}

}  // namespace spatial
