#include "sim/machine/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace spatial {

int64_t SectionSchedule::ReadersOf(int32_t b, int64_t g, int64_t items_on_site) const {
  const int64_t w = writes_per_item[b];
  if (w <= 0 || g < 0) return 0;
  const int64_t ordinal = g / w, v = g % w;
  int64_t n = readers[b][static_cast<size_t>(v + 1)];
  // The item's last page is also what the next item reads before its own first write.
  if (v == w - 1 && ordinal + 1 < items_on_site) n += readers[b][0];
  return n;
}

namespace {



absl::Status CheckSection(const Section& s) {
  const int nb = static_cast<int>(s.buffers.size());
  const int nt = static_cast<int>(s.tensors.size());
  auto where = [&](const Stage& st) { return absl::StrCat("section '", s.name, "' stage '", st.name, "': "); };
  for (int b = 0; b < nb; ++b) {
    if (s.buffers[b].depth < 1 || s.buffers[b].page_tiles < 1) {
      return absl::InvalidArgumentError(absl::StrCat("section '", s.name, "' buffer '", s.buffers[b].name,
                                                     "': depth and page_tiles must be at least 1"));
    }
  }
  for (const Stage& st : s.stages) {
    for (BufferId b : st.ins) {
      if (b < 0 || b >= nb) return absl::InvalidArgumentError(absl::StrCat(where(st), "input buffer ", b, " out of range"));
    }
    for (BufferId b : st.outs) {
      if (b < 0 || b >= nb) return absl::InvalidArgumentError(absl::StrCat(where(st), "output buffer ", b, " out of range"));
    }
    int tensor = 0;
    if (const auto* l = std::get_if<Load>(&st.op)) tensor = l->tensor;
    if (const auto* w = std::get_if<Store>(&st.op)) tensor = w->tensor;
    if ((st.is_load() || st.is_store()) && (tensor < 0 || tensor >= nt)) {
      return absl::InvalidArgumentError(absl::StrCat(where(st), "tensor ", tensor, " out of range"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SectionSchedule> BuildSchedule(const Section& section, int64_t blocks) {
  if (absl::Status st = CheckSection(section); !st.ok()) return st;
  SectionSchedule sch;
  sch.blocks = std::max<int64_t>(0, blocks);
  std::vector<int> prologue, body, epilogue;
  for (int i = 0; i < static_cast<int>(section.stages.size()); ++i) {
    switch (section.stages[i].phase) {
      case Phase::kBody:
        body.push_back(i);
        break;
      case Phase::kEpilogue:
        epilogue.push_back(i);
        break;
      default:
        prologue.push_back(i);
        break;
    }
  }
  const int64_t total = static_cast<int64_t>(prologue.size() + epilogue.size()) +
                        (body.empty() ? 0 : sch.blocks * static_cast<int64_t>(body.size()));
  if (sch.blocks > kMaxInvocationsPerItem || total > kMaxInvocationsPerItem) {
    return absl::ResourceExhaustedError(absl::StrCat("section '", section.name, "': ", sch.blocks,
                                                     " fold blocks expand to more than ", kMaxInvocationsPerItem,
                                                     " stage invocations per item"));
  }
  sch.invocations_per_item = total;
  const size_t nbuf = section.buffers.size();
  std::vector<int64_t> written(nbuf, 0);  // writes so far in the item
  // Reader counts grow as versions appear; index 0 is version -1.
  sch.readers.assign(nbuf, std::vector<int32_t>(1, 0));
  std::vector<int32_t> distinct;
  auto emit = [&](int stage, int32_t block) {
    const Stage& st = section.stages[stage];
    Invocation inv;
    inv.stage = stage;
    inv.block = block;
    inv.reads_begin = static_cast<int32_t>(sch.refs.size());
    distinct.clear();
    for (BufferId b : st.ins) {
      if (std::find(distinct.begin(), distinct.end(), b) != distinct.end()) continue;
      distinct.push_back(b);
      const int64_t v = written[b] - 1;
      sch.refs.push_back(PageRef{b, static_cast<int32_t>(v)});
      ++sch.readers[b][static_cast<size_t>(v + 1)];
    }
    inv.reads_end = inv.writes_begin = static_cast<int32_t>(sch.refs.size());
    distinct.clear();
    for (BufferId b : st.outs) {
      if (std::find(distinct.begin(), distinct.end(), b) != distinct.end()) continue;
      distinct.push_back(b);
      sch.refs.push_back(PageRef{b, static_cast<int32_t>(written[b]++)});
      sch.readers[b].push_back(0);
    }
    inv.writes_end = static_cast<int32_t>(sch.refs.size());
    sch.by_thread[static_cast<int>(EngineThreadOf(st))].push_back(inv);
  };
  for (int s : prologue) emit(s, -1);
  if (!body.empty()) {
    for (int64_t k = 0; k < sch.blocks; ++k) {
      for (int s : body) emit(s, static_cast<int32_t>(k));
    }
  }
  for (int s : epilogue) emit(s, -1);
  sch.writes_per_item = written;
  return sch;
}

}  // namespace spatial
