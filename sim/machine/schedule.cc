#include "sim/machine/schedule.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "spatial/semantics/trip.h"
#include "spatial/status_macros.h"

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
      for (int s : body) {
        if (RunsOnBlock(section.stages[s], sch.blocks, k)) emit(s, static_cast<int32_t>(k));  // trip.h
      }
    }
  }
  for (int s : epilogue) emit(s, -1);
  sch.writes_per_item = written;
  return sch;
}

absl::StatusOr<SectionSchedules> BuildSchedules(const Section& section, int64_t blocks) {
  SectionSchedules out;
  ASSIGN_OR_RETURN(SectionSchedule all, BuildSchedule(section, blocks));
  out.by_count.push_back(std::move(all));
  absl::flat_hash_map<int64_t, int32_t> index_of = {{std::max<int64_t>(0, blocks), 0}};  // count -> schedule
  int64_t total = out.by_count[0].invocations_per_item;
  out.of_item.reserve(section.items.size());
  for (const WorkItem& w : section.items) {
    const int64_t n = ItemBlocks(w, std::max<int64_t>(0, blocks));  // spatial/semantics/trip.h
    auto [it, fresh] = index_of.try_emplace(n, static_cast<int32_t>(out.by_count.size()));
    if (fresh) {
      ASSIGN_OR_RETURN(SectionSchedule fewer, BuildSchedule(section, n));
      total += fewer.invocations_per_item;
      if (total > kMaxInvocationsPerItem) {
        return absl::ResourceExhaustedError(
            absl::StrCat("section '", section.name, "': its items' ", index_of.size(),
                         " different fold counts expand to more than ", kMaxInvocationsPerItem, " stage invocations"));
      }
      out.by_count.push_back(std::move(fewer));
    }
    out.of_item.push_back(it->second);
  }
  return out;
}

SitePages::SitePages(const SectionSchedules& s, const std::vector<int64_t>& items, size_t buffers)
    : buffers_(buffers) {
  if (s.uniform()) return;
  first_.assign(items.size() * buffers, 0);
  for (size_t j = 1; j < items.size(); ++j) {
    const SectionSchedule& prev = s.Of(items[j - 1]);
    for (size_t b = 0; b < buffers; ++b) {
      first_[j * buffers + b] = first_[(j - 1) * buffers + b] + prev.writes_per_item[b];
    }
  }
}

int64_t SitePages::Global(const SectionSchedules& s, int64_t ordinal, const PageRef& r) const {
  if (first_.empty()) return ordinal * s.by_count[0].writes_per_item[r.buffer] + r.version;
  return first_[static_cast<size_t>(ordinal) * buffers_ + static_cast<size_t>(r.buffer)] + r.version;
}

int64_t SitePages::Readers(const SectionSchedules& s, const std::vector<int64_t>& items, int64_t ordinal,
                           const PageRef& r) const {
  const int64_t n = static_cast<int64_t>(items.size());
  if (first_.empty()) return s.by_count[0].ReadersOf(r.buffer, Global(s, ordinal, r), n);
  const SectionSchedule& own = s.Of(items[ordinal]);
  const size_t b = static_cast<size_t>(r.buffer);
  int64_t readers = own.readers[b][static_cast<size_t>(r.version + 1)];
  if (r.version != own.writes_per_item[b] - 1) return readers;
  // The items after it read this page before their first write of b; one that never writes b passes it on.
  for (int64_t j = ordinal + 1; j < n; ++j) {
    const SectionSchedule& next = s.Of(items[j]);
    readers += next.readers[b][0];
    if (next.writes_per_item[b] > 0) break;
  }
  return readers;
}

}  // namespace spatial
