#include "lowerings/toolkit/tables_rows_common.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "spatial/semantics/footprint.h"

namespace spatial {

bool WholeTiles(std::initializer_list<int64_t> widths, const Target& target) {
  for (int64_t w : widths) {
    if (w % target.tile_cols() != 0) return false;
  }
  return true;
}

std::vector<WorkItem> GroupedBlockItems(int64_t groups, int64_t run_t, int64_t blk) {
  std::vector<WorkItem> items;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t j = 0; j < run_t / blk; ++j) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = g, .x = j,
                               .out = TileRect{.col0_t = g * run_t + j * blk, .w_t = blk}});
    }
  }
  return items;
}

std::vector<WorkItem> DenseGroupedBlockItems(int64_t row_tiles, int64_t groups, int64_t run_t, int64_t blk) {
  std::vector<WorkItem> items;
  for (int64_t r = 0; r < row_tiles; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t j = 0; j < run_t / blk; ++j) {
        items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = r * groups + g, .x = j,
                                 .out = TileRect{.row0_t = r, .col0_t = g * run_t + j * blk, .w_t = blk}});
      }
    }
  }
  return items;
}

int64_t SiteFootprint(const Section& s, const Target& target) {
  return SectionFootprint(s, target.tile_rows(), target.tile_cols());
}

absl::StatusOr<Composition> FitSite(absl::StatusOr<Composition> c, std::string_view what, const Target& target) {
  if (!c.ok()) return c;
  for (const Section& s : c->sections) {
    const int64_t bytes = SiteFootprint(s, target);
    if (bytes > target.max_local_mem_bytes()) {
      return NotLowered(absl::StrCat("a flat ", std::string(what), " whose operands, loaded whole, need ", bytes,
                                     " bytes of a site's ", target.max_local_mem_bytes()));
    }
  }
  return c;
}

absl::Status RequireFp32Accumulator(std::string_view what, const Target& target) {
  if (target.effective_acc_tiles(Precision::kFp32, true) > 0 && target.supports_storage(Precision::kFp32)) {
    return absl::OkStatus();
  }
  return MissingPrecision(absl::StrCat("an fp32 accumulator (Dst) for ", std::string(what)), target);
}

TensorId OnesTile(Template& t, const std::string& name, Precision p, int64_t copies) {
  const int64_t elems = t.tile_rows() * t.tile_cols() * copies;
  return t.AddTensor(name, TensorRole::kParam, t.tile_rows(), t.tile_cols() * copies, p,
                     TensorInit::FloatValues(std::vector<double>(static_cast<size_t>(elems), 1.0)));
}

absl::StatusOr<int64_t> EpsNano(std::string_view kind, double eps) {
  if (!std::isfinite(eps) || eps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(kind), ".eps is negative or not finite (", eps, ")"));
  }
  const double nanos = eps * 1e9;
  if (nanos > 9e15) return absl::InvalidArgumentError(absl::StrCat(std::string(kind), ".eps is too large (", eps, ")"));
  const int64_t whole = std::llround(nanos);
  if (std::fabs(nanos - static_cast<double>(whole)) > 1e-6) {
    return NotLowered(absl::StrCat("an epsilon of ", eps, " that is not a whole number of nano units"));
  }
  return whole;
}

absl::Status CheckDenseHeads(int64_t dense_heads, int64_t rows) {
  if (dense_heads == 0 || (dense_heads > 0 && rows % dense_heads == 0)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("fused_row.dense_heads (", dense_heads, ") does not divide rows (",
                                                 rows, "): the heads of every token row"));
}

}  // namespace spatial
