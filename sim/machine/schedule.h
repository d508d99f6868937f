// The page protocol of one work item (DESIGN §3.3-3.5 as a circular-buffer schedule), derived once per section
// from the program's sequential meaning and shared by every item and site.
//
// An item runs its prologue stages, then the body stages once per fold block, then the epilogue stages, in list
// order within each phase. Walking that order, every write of a buffer is a new page (a version) and every read
// sees the latest version. A version is popped when its last reader is done; it may be pushed once every version
// `depth` older is popped (the circular buffer's reserve), or when the only older page in the way is one the
// writing stage itself reads (an in-place update of a one-page carry). Each of a site's three sequencers (reader,
// compute, writer; stage_cost.h) runs its own stages in this order, so they overlap exactly as far as the FIFO
// depths let them, and never deadlock: the sequential order is always one of their interleavings.
//
// Versions are local to an item: version v of item j on a site is global version j * writes_per_item[b] + v. A
// read before the item's first write (v = -1) sees the previous item's last page on that site; on a site's
// first item it reads a page nothing wrote and waits for nothing.
#ifndef SIM_MACHINE_SCHEDULE_H_
#define SIM_MACHINE_SCHEDULE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/machine/stage_cost.h"
#include "spatial/program.h"

namespace spatial {

struct PageRef {
  int32_t buffer = 0;
  int32_t version = 0;  // local to the item; -1: the page before the item's first write
};

struct Invocation {
  int32_t stage = 0;
  int32_t block = -1;  // the fold block of a body stage, else -1
  int32_t reads_begin = 0, reads_end = 0;    // into SectionSchedule::refs: distinct buffers read
  int32_t writes_begin = 0, writes_end = 0;  // distinct buffers written
};

struct SectionSchedule {
  int64_t blocks = 0;
  // Per sequencer (EngineThread), in program order.
  std::array<std::vector<Invocation>, kNumEngineThreads> by_thread;
  std::vector<PageRef> refs;
  std::vector<int64_t> writes_per_item;        // per buffer
  std::vector<std::vector<int32_t>> readers;   // [buffer][version + 1]: invocations reading that version
  int64_t invocations_per_item = 0;

  // Readers of global version g of buffer b, written by the site's item `ordinal` of `items_on_site`.
  int64_t ReadersOf(int32_t b, int64_t g, int64_t items_on_site) const;
};

// The most stage invocations one item may expand to (stages x fold blocks); beyond it a program is refused
// rather than exhausting memory.
inline constexpr int64_t kMaxInvocationsPerItem = int64_t{1} << 24;

// Fails on references a section cannot hold (a buffer or tensor id out of range, a depth or page below one) and
// on a fold too long to expand.
absl::StatusOr<SectionSchedule> BuildSchedule(const Section& section, int64_t blocks);

// A section's schedules when its items fold different numbers of blocks (WorkItem.blocks): one per count. Their
// invocations together are held to kMaxInvocationsPerItem as one schedule's are (many items each folding a
// different long count would otherwise exhaust memory); beyond it the program is refused.
struct SectionSchedules {
  std::vector<SectionSchedule> by_count;  // [0]: the run's own count; then each fewer count an item folds
  std::vector<int32_t> of_item;           // per item: its schedule in by_count
  bool uniform() const { return by_count.size() == 1; }
  const SectionSchedule& Of(int64_t item) const { return by_count[static_cast<size_t>(of_item[item])]; }
};
absl::StatusOr<SectionSchedules> BuildSchedules(const Section& section, int64_t blocks);

// The page numbering of one site's items (in the order it runs them): version v of buffer b written by the item at
// ordinal j is global version first[j][b] + v, and a read of v = -1 sees the page the items before it wrote last.
// `items` are the site's, by ordinal; every call takes the same schedules and items the numbering was built from.
class SitePages {
 public:
  SitePages() = default;
  SitePages(const SectionSchedules& s, const std::vector<int64_t>& items, size_t buffers);
  int64_t Global(const SectionSchedules& s, int64_t ordinal, const PageRef& r) const;
  // The reader invocations of the page: those of its own item, and where it is that item's last write of the
  // buffer, the reads of it by the items after (before each writes the buffer itself).
  int64_t Readers(const SectionSchedules& s, const std::vector<int64_t>& items, int64_t ordinal,
                  const PageRef& r) const;

 private:
  size_t buffers_ = 0;
  std::vector<int64_t> first_;  // [ordinal * buffers + b]; empty where every item runs the same schedule
};

}  // namespace spatial

#endif  // SIM_MACHINE_SCHEDULE_H_
