// What `spatial inspect` and `spatial demo` say about a program at a glance: how many sections, stages of each
// kind, buffers and work items it has, and each section's local-memory footprint on one site.
#ifndef TOOLS_PROGRAM_SUMMARY_H_
#define TOOLS_PROGRAM_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spatial/program.h"

namespace spatial {

struct SectionSummary {
  std::string name;
  int64_t stages = 0;
  int64_t buffers = 0;
  int64_t items = 0;
  int64_t num_blocks = 1;
  bool trip = false;
  // Bytes one site holds for the section's buffers: SectionFootprint (spatial/semantics/footprint.h).
  int64_t footprint_bytes = 0;
};

struct ProgramSummary {
  std::vector<SectionSummary> sections;
  std::map<std::string, int64_t> stages_by_kind;  // "Load", "Store", "Generic", "MatmulTiles"
  int64_t stages = 0;
  int64_t buffers = 0;
  int64_t items = 0;
  int64_t max_footprint_bytes = 0;  // the largest section footprint: what one site must hold at a time
};

// Footprint uses the composition's own tile (c.tile_rows x c.tile_cols).
ProgramSummary Summarize(const Composition& c);

// "12,288 B (12.0 KiB)".
std::string FormatBytes(int64_t bytes);

// A readable multi-line summary: totals, stages by kind, then one line per section.
std::string FormatSummary(const ProgramSummary& s);

}  // namespace spatial

#endif  // TOOLS_PROGRAM_SUMMARY_H_
