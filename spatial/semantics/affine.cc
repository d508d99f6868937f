#include "spatial/semantics/affine.h"

#include <atomic>

namespace spatial {
namespace {

std::atomic<int64_t> tile_form_shift{0};

}  // namespace

std::optional<AddrVar> AddrVarOf(LoopVar v) {
  switch (v) {
    case LoopVar::kRow: return AddrVar::kRow;
    case LoopVar::kCol: return AddrVar::kCol;
    case LoopVar::kK: return AddrVar::kK;
    case LoopVar::kItemY: return AddrVar::kItemY;
    case LoopVar::kItemX: return AddrVar::kItemX;
    case LoopVar::kKBlock: return AddrVar::kKBlock;
    case LoopVar::kUnspecified: break;
  }
  return std::nullopt;
}

AffineForm TileForm(const AccessPattern& p) {
  AffineForm f;
  f.base = Clamp(Wide{p.origin.base} + tile_form_shift.load(std::memory_order_relaxed));
  for (const auto& [var, coef] : p.origin.steps) {
    if (const std::optional<AddrVar> a = AddrVarOf(var)) f[*a] = Clamp(f[*a] + coef);
  }
  if (p.origin.indirect) f[AddrVar::kIndex] = p.origin.indirect->tile_stride;
  f[AddrVar::kBlockI] = p.stride_h;
  f[AddrVar::kBlockJ] = p.stride_w;
  return f;
}

AffineForm ElemForm(const ElemAccess& m) {
  AffineForm f;
  f.base = m.base;
  for (const auto& [var, coef] : m.terms) {
    if (const std::optional<AddrVar> a = AddrVarOf(var)) f[*a] = Clamp(f[*a] + coef);
  }
  if (m.indirect) f[AddrVar::kIndex] = m.indirect->stride;
  return f;
}

void SetTileFormShiftForTesting(int64_t tiles) { tile_form_shift.store(tiles, std::memory_order_relaxed); }

}  // namespace spatial
