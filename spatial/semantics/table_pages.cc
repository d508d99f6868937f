#include "spatial/semantics/table_pages.h"

#include <cmath>
#include <utility>

#include "spatial/maps.h"
#include "spatial/semantics/affine.h"

namespace spatial {
namespace {

// A tensor whose every element is known at compile time, as an integer.
bool KnownIntegers(const Tensor& t) {
  if (t.role != TensorRole::kParam) return false;
  switch (t.init.kind) {
    case TensorInit::Kind::kZero:
    case TensorInit::Kind::kValues: return true;
    case TensorInit::Kind::kConstF: return t.init.const_f == std::floor(t.init.const_f) && std::fabs(t.init.const_f) < 9e15;
    default: return false;
  }
}

}  // namespace

TablePages::TablePages(const Section& s, int64_t tile_rows, int64_t tile_cols, KnownElement known)
    : s_(s), tile_rows_(tile_rows), tile_cols_(tile_cols), known_(std::move(known)),
      table_load_(s.buffers.size(), nullptr) {
  std::vector<int> writers(s.buffers.size(), 0);
  for (const Stage& st : s.stages) {
    for (BufferId b : st.outs) ++writers[b];
  }
  for (const Stage& st : s.stages) {
    const auto* l = std::get_if<Load>(&st.op);
    if (!l || st.outs.size() != 1 || writers[st.outs[0]] != 1 || l->pattern.origin.indirect) continue;
    const Tensor& t = s.tensors[l->tensor];
    if (TileForm(l->pattern).Uses(AddrVar::kKBlock) ||
        !(KnownIntegers(t) || (known_ && t.role != TensorRole::kState))) {
      continue;
    }
    table_load_[st.outs[0]] = l;
  }
}

std::optional<int64_t> TablePages::Element(BufferId b, const WorkItem& item, int64_t offset) const {
  const Load* l = table_load_[b];
  if (!l) return std::nullopt;
  const AccessPattern& p = l->pattern;
  const int64_t width = s_.buffers[b].page_tiles * tile_cols_;
  if (offset < 0 || offset >= tile_rows_ * width) return std::nullopt;
  const int64_t row = offset / width, col = offset % width;
  const int64_t k = col / tile_cols_;
  if (k >= p.block_h * p.block_w) return std::nullopt;  // past the loaded block: not the table's
  // Tile k of the page is tile (k / block_w, k % block_w) of the block, by the one address evaluator.
  AddrEnv<Wide> env = ZeroEnv<Wide>();
  env[static_cast<int>(AddrVar::kItemY)] = item.y;
  env[static_cast<int>(AddrVar::kItemX)] = item.x;
  env[static_cast<int>(AddrVar::kBlockI)] = k / p.block_w;
  env[static_cast<int>(AddrVar::kBlockJ)] = k % p.block_w;
  const Wide at = Evaluate(TileForm(p), env);
  const Tensor& t = s_.tensors[l->tensor];
  const int64_t cols_t = CeilDiv(t.cols, tile_cols_);
  if (at < 0 || at >= CeilDiv(t.rows, tile_rows_) * cols_t) return std::nullopt;  // the load faults
  const int64_t tile = static_cast<int64_t>(at);
  const int64_t r = (tile / cols_t) * tile_rows_ + row;
  const int64_t c = (tile % cols_t) * tile_cols_ + col % tile_cols_;
  if (r >= t.rows || c >= t.cols) return 0;  // tile padding
  if (!KnownIntegers(t)) {
    const std::optional<double> v = known_(t, r * t.cols + c);
    if (!v || *v != std::floor(*v) || !(std::fabs(*v) < 9e15)) return std::nullopt;
    return static_cast<int64_t>(*v);
  }
  switch (t.init.kind) {
    case TensorInit::Kind::kValues: {
      const int64_t at = r * t.cols + c;
      return at < static_cast<int64_t>(t.init.values.size()) ? t.init.values[at] : 0;
    }
    case TensorInit::Kind::kConstF: return static_cast<int64_t>(t.init.const_f);
    default: return 0;
  }
}

}  // namespace spatial
