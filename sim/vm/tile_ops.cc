#include "sim/vm/tile_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "spatial/semantics/affine.h"

namespace spatial::vm_internal {
namespace {

// The index value an indirect origin reads (element 0 of the index page), checked against its admitted range.
bool IndexValue(const IndirectTile& ind, const BufferState* index, Wide& value, Fault& fault) {
  const double v = index->page[0];
  const std::string& name = index->decl->name;
  if (v != std::floor(v)) {
    fault = MakeFault(kIndexOutOfRange, absl::StrCat("index value ", FormatValue(v), " (element 0 of buffer '", name,
                                                     "') is not an integer"));
    return false;
  }
  // The magnitude bound keeps the integer conversion below defined whatever [lo, hi] admits.
  if (!(v >= static_cast<double>(ind.lo) && v <= static_cast<double>(ind.hi)) || std::fabs(v) > 9.0e18) {
    fault = MakeFault(kIndexOutOfRange, absl::StrCat("index value ", FormatValue(v), " (element 0 of buffer '", name,
                                                     "') not in [", ind.lo, ", ", ind.hi, "]"));
    return false;
  }
  value = static_cast<int64_t>(v);
  return true;
}

// The block's addresses: TileForm (spatial/semantics/affine.h) bound to this item, block and index value.
bool BlockEnv(const AccessPattern& p, const Bindings& vars, const BufferState* index, AddrEnv<Wide>& env,
              Fault& fault) {
  env = ZeroEnv<Wide>();
  env[static_cast<int>(AddrVar::kItemY)] = vars.item_y;
  env[static_cast<int>(AddrVar::kItemX)] = vars.item_x;
  env[static_cast<int>(AddrVar::kKBlock)] = vars.kblock;
  return !p.origin.indirect || IndexValue(*p.origin.indirect, index, env[static_cast<int>(AddrVar::kIndex)], fault);
}

// Tile (i, j) of the block, inside the tensor's tile grid.
bool BlockTile(const AffineForm& form, AddrEnv<Wide>& env, int64_t i, int64_t j, const TensorValue& t,
               int64_t& tile, Fault& fault) {
  env[static_cast<int>(AddrVar::kBlockI)] = i;
  env[static_cast<int>(AddrVar::kBlockJ)] = j;
  const Wide a = Evaluate(form, env);
  if (a < std::numeric_limits<int64_t>::min() || a > std::numeric_limits<int64_t>::max()) {
    fault = MakeFault(kTileOutOfRange, absl::StrCat("the address of block tile (", i, ", ", j, ") overflows int64"));
    return false;
  }
  if (a < 0 || a >= t.num_tiles()) {
    fault = MakeFault(kTileOutOfRange,
                      absl::StrCat("tile ", WideToString(a), " of tensor '", t.decl->name, "' (", t.num_tiles(),
                                   " tiles)"));
    return false;
  }
  tile = static_cast<int64_t>(a);
  return true;
}

// The part of tensor tile `tile` inside the tensor: its first element and extent (edge tiles are clipped).
struct TileWindow {
  int64_t row0, col0, nr, nc;
};
TileWindow Window(const TensorValue& t, int64_t tile, TileShape ts) {
  const int64_t row0 = (tile / t.cols_t) * ts.rows;
  const int64_t col0 = (tile % t.cols_t) * ts.cols;
  return {row0, col0, std::min(ts.rows, t.rows - row0), std::min(ts.cols, t.cols - col0)};
}

}  // namespace

bool RunLoad(const Load& load, const TensorValue& t, BufferState& out, const BufferState* index,
             const Bindings& vars, TileShape tile, const ValueModel& model, Fault& fault) {
  const AccessPattern& p = load.pattern;
  const AffineForm form = TileForm(p);
  AddrEnv<Wide> env;
  if (!BlockEnv(p, vars, index, env, fault)) return false;
  std::fill(out.spare.begin(), out.spare.end(), 0.0);
  for (int64_t i = 0; i < p.block_h; ++i) {
    for (int64_t j = 0; j < p.block_w; ++j) {
      int64_t tt;
      if (!BlockTile(form, env, i, j, t, tt, fault)) return false;
      const TileWindow w = Window(t, tt, tile);
      double* dst = out.spare.data() + (i * p.block_w + j) * tile.cols;
      for (int64_t r = 0; r < w.nr; ++r) {
        const double* src = t.data() + (w.row0 + r) * t.cols + w.col0;
        std::copy(src, src + w.nc, dst + r * out.width);
      }
    }
  }
  model.StoreRound(out.decl->precision, out.spare.data(), out.size);
  out.Commit();
  return true;
}

bool RunStore(const Store& store, TensorValue& t, const BufferState& src, const BufferState* index,
              const Bindings& vars, TileShape tile, const ValueModel& model, Fault& fault, StoreClaims* claims,
              int64_t item) {
  const AccessPattern& p = store.pattern;
  const AffineForm form = TileForm(p);
  AddrEnv<Wide> env;
  if (!BlockEnv(p, vars, index, env, fault)) return false;
  for (int64_t i = 0; i < p.block_h; ++i) {
    for (int64_t j = 0; j < p.block_w; ++j) {
      int64_t tt;
      if (!BlockTile(form, env, i, j, t, tt, fault)) return false;
      if (claims != nullptr) {
        int64_t free = -1;
        std::atomic<int64_t>& owner = claims->owner[static_cast<size_t>(tt)];
        if (!owner.compare_exchange_strong(free, item) && free != item) claims->conflict = true;
      }
      const TileWindow w = Window(t, tt, tile);
      const double* from = src.page.data() + (i * p.block_w + j) * tile.cols;
      for (int64_t r = 0; r < w.nr; ++r) {
        double* dst = t.values.data() + (w.row0 + r) * t.cols + w.col0;
        std::copy(from + r * src.width, from + r * src.width + w.nc, dst);
        model.StoreRound(t.decl->precision, dst, w.nc);
      }
    }
  }
  return true;
}

void RunMatmul(const MatmulTiles& mm, const BufferState& a, const BufferState& b, BufferState& c, TileShape tile,
               const ValueModel& model, Precision acc) {
  const int64_t T = tile.rows;  // == tile.cols: the driver refuses non-square tiles
  if (mm.accumulate) {
    std::copy(c.page.begin(), c.page.end(), c.spare.begin());
  } else {
    std::fill(c.spare.begin(), c.spare.end(), 0.0);
  }
  model.MatmulBlock(a.page.data(), a.width, b.page.data(), b.width, mm.transpose_b, c.spare.data(), c.width,
                    mm.m_tiles, mm.n_tiles, mm.k_tiles, T, acc, mm.fidelity);
  model.StoreRound(c.decl->precision, c.spare.data(), c.size);
  c.Commit();
}

}  // namespace spatial::vm_internal
