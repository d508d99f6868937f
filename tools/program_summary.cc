#include "tools/program_summary.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spatial/semantics/footprint.h"

namespace spatial {
namespace {

// 12288 -> "12,288" (v >= 0).
std::string Grouped(int64_t v) {
  std::string digits = absl::StrCat(v);
  std::string out;
  int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    out.push_back(digits[i]);
    if ((n - 1 - i) % 3 == 0 && i != n - 1) out.push_back(',');
  }
  return out;
}

}  // namespace

ProgramSummary Summarize(const Composition& c) {
  ProgramSummary out;
  for (const Section& s : c.sections) {
    SectionSummary ss;
    ss.name = s.name;
    ss.stages = static_cast<int64_t>(s.stages.size());
    ss.buffers = static_cast<int64_t>(s.buffers.size());
    ss.items = static_cast<int64_t>(s.items.size());
    ss.num_blocks = s.num_blocks;
    ss.trip = s.trip.has_value();
    ss.footprint_bytes = SectionFootprint(s, c.tile_rows, c.tile_cols);
    for (const Stage& st : s.stages) out.stages_by_kind[std::string(StageKindName(st))]++;
    out.stages += ss.stages;
    out.buffers += ss.buffers;
    out.items += ss.items;
    out.max_footprint_bytes = std::max(out.max_footprint_bytes, ss.footprint_bytes);
    out.sections.push_back(std::move(ss));
  }
  return out;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes == std::numeric_limits<int64_t>::max()) return "overflow (more than 2^63 B)";
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  return absl::StrFormat("%s B (%.1f KiB)", Grouped(bytes), static_cast<double>(bytes) / 1024.0);
}

std::string FormatSummary(const ProgramSummary& s) {
  std::string kinds;
  for (const auto& [kind, n] : s.stages_by_kind) absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", n, " ", kind);
  std::string out = absl::StrCat("sections:   ", s.sections.size(), "\n", "stages:     ", s.stages,
                                 kinds.empty() ? "" : absl::StrCat(" (", kinds, ")"), "\n", "buffers:    ", s.buffers,
                                 "\n", "work items: ", s.items, "\n", "footprint:  ", FormatBytes(s.max_footprint_bytes),
                                 " per site (largest section)\n");
  for (size_t i = 0; i < s.sections.size(); ++i) {
    const SectionSummary& ss = s.sections[i];
    std::string fold = ss.trip ? absl::StrCat(", trip fold <= ", ss.num_blocks, " blocks")
                       : ss.num_blocks > 1 ? absl::StrCat(", fold ", ss.num_blocks, " blocks")
                                           : std::string();
    absl::StrAppend(&out, "  [", i, "] ", ss.name, ": ", ss.stages, " stages, ", ss.buffers, " buffers, ", ss.items,
                    " items", fold, ", ", FormatBytes(ss.footprint_bytes), " per site\n");
  }
  return out;
}

}  // namespace spatial
