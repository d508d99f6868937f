#include "sim/machine/known_index.h"

#include <cmath>

namespace spatial {

std::optional<double> TensorElement(const Tensor& t, int64_t elem, const TensorMap& values, const TensorMap& inputs) {
  for (const TensorMap* m : {&inputs, &values}) {
    auto it = m->find(t.name);
    if (it == m->end()) continue;
    if (elem < 0 || elem >= static_cast<int64_t>(it->second.values.size())) return std::nullopt;
    return it->second.values[static_cast<size_t>(elem)];
  }
  if (elem < 0 || elem >= t.rows * t.cols) return std::nullopt;
  switch (t.init.kind) {
    case TensorInit::Kind::kZero:
      return 0.0;
    case TensorInit::Kind::kConstF:
      return t.init.const_f;
    case TensorInit::Kind::kValues:
      return elem < static_cast<int64_t>(t.init.values.size()) ? static_cast<double>(t.init.values[elem]) : 0.0;
    case TensorInit::Kind::kFloatValues:
      return elem < static_cast<int64_t>(t.init.float_values.size()) ? t.init.float_values[elem] : 0.0;
    case TensorInit::Kind::kExternal:
      break;
  }
  return std::nullopt;
}

std::optional<int64_t> KnownIndex::At(int64_t item_y, int64_t item_x, int32_t block, const TensorMap& values,
                                      const TensorMap& inputs) const {
  AddrEnv<Wide> env = ZeroEnv<Wide>();
  env[static_cast<int>(AddrVar::kItemY)] = item_y;
  env[static_cast<int>(AddrVar::kItemX)] = item_x;
  env[static_cast<int>(AddrVar::kKBlock)] = per_block ? std::max<int32_t>(0, block) : 0;
  const Wide tile = Evaluate(form, env);
  // Tile t of the table's tiled layout (spatial/program.h): its element (0, 0) is (t / per_row * TR, t % per_row * TC).
  const int64_t per_row = (table->cols + tile_cols - 1) / tile_cols;
  const int64_t tiles = (table->rows + tile_rows - 1) / tile_rows * per_row;
  if (tile < 0 || tile >= tiles) return std::nullopt;  // CheckAddresses refuses the run first
  const int64_t t = static_cast<int64_t>(tile);
  const int64_t r = t / per_row * tile_rows, c = t % per_row * tile_cols;
  const std::optional<double> v = TensorElement(*table, r * table->cols + c, values, inputs);
  if (!v || *v != std::floor(*v) || *v < static_cast<double>(lo) || *v > static_cast<double>(hi)) return std::nullopt;
  return static_cast<int64_t>(*v);
}

std::vector<std::optional<KnownIndex>> KnownIndices(const Section& s, int64_t tile_rows, int64_t tile_cols) {
  std::vector<std::optional<KnownIndex>> known(s.stages.size());
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const Stage& st = s.stages[i];
    const AccessPattern* pat = st.is_load()    ? &std::get<Load>(st.op).pattern
                               : st.is_store() ? &std::get<Store>(st.op).pattern
                                               : nullptr;
    if (pat == nullptr || !pat->origin.indirect) continue;
    const BufferId index = pat->origin.indirect->index;
    const Stage* writer = nullptr;
    int writers = 0;
    for (const Stage& w : s.stages) {
      for (const BufferId b : w.outs) {
        if (b == index) {
          writer = &w;
          ++writers;
        }
      }
    }
    // A page loaded once a block is known at a block only to a stage of the same blocks.
    if (writers != 1 || !writer->is_load() || (writer->phase == Phase::kBody && st.phase != Phase::kBody)) continue;
    const Load& load = std::get<Load>(writer->op);
    if (load.pattern.origin.indirect || load.tensor < 0 || load.tensor >= static_cast<TensorId>(s.tensors.size())) {
      continue;
    }
    const Tensor& table = s.tensors[static_cast<size_t>(load.tensor)];
    if (table.role == TensorRole::kState) continue;
    known[i] = KnownIndex{.table = &table,
                          .form = TileForm(load.pattern),
                          .per_block = writer->phase == Phase::kBody,
                          .tile_rows = tile_rows,
                          .tile_cols = tile_cols,
                          .lo = pat->origin.indirect->lo,
                          .hi = pat->origin.indirect->hi};
  }
  return known;
}

}  // namespace spatial
