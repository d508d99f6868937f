// ★ ROW STREAMING (BlockPlan.stream_rows): how a section's compute stages overlap when its kernel interleaves them a
// row group at a time, as tt-metal's streaming SDPA kernel does (compute_streaming.hpp: the QK product of a row
// group, then its maximum started on a semaphore as the product is packed, its exp issued from the pack thread
// while the math thread multiplies the next row group, the value product and the output's correction row by row).
//
// Without the plan's word a compute stage runs on its whole page after the stage before it (ComputeCost::Duration:
// its unpack, math and pack pipelined over its own tiles). With it, each of a site's three compute threads keeps its
// own calendar:
//  - unpack runs a stage's unpack, math its FPU work, pack its vector (SFPU) work and then its pack: the streaming
//    kernel issues the exps from the pack thread (exp_packthread_tile), so the matrix engine is free for the next
//    row group while they run;
//  - a stage is cut into `rows` row groups (one tile row of the plan's per_site_m each); row group r of a stage may
//    start once every stage of its phase before it that last wrote a buffer it reads (its chain predecessors) has
//    packed row group r, and once its other input pages were pushed;
//  - within a row group the threads pipeline as a whole stage does (each waits for the thread before it to finish
//    its first tile, and finishes a tile after it);
//  - a row group takes the earliest gap on its thread's calendar where it fits. The kernel's threads run its row
//    groups in row-major order (for row group r: the exp of r - 1, the product of r, the maximum of r, ...; then the
//    value product of r and the correction of r - 1), so a thread does not wait for every row group of one stage
//    before the next stage's first; the machine places the program's stages one after another, and the gaps let a
//    later stage's early row groups slot in beside an earlier stage's late ones. Where an earlier stage keeps a
//    thread busy back to back (the QK product on the matrix engine), a later stage's row groups on that thread wait
//    for all of it, where the kernel's order would slip them in between: the model errs slow there (on Wormhole the
//    matrix engine idles ~5-7 k cycles of a ~60 k-cycle 8 x 16-tile prefill block, whose products are 49 k).
// The stage's pages are pushed when its last row group is packed (plus the pipeline latency). A thread's calendar
// never holds two row groups at once.
#ifndef SIM_MACHINE_ROW_STREAM_H_
#define SIM_MACHINE_ROW_STREAM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "sim/machine/stage_cost.h"
#include "spatial/program.h"

namespace spatial {

// What a section's streaming needs, derived once from its stages.
struct RowStreamPlan {
  int64_t rows = 0;  // row groups per stage; 0: the section does not stream
  // Per stage: its chain predecessors, and which of the buffers it reads come from one (their pages' push times do
  // not hold the stage back: the predecessor's row groups do).
  std::vector<std::vector<int32_t>> deps;
  std::vector<std::vector<BufferId>> chained;
  // Per stage: where a chain predecessor's row groups are kept (-1: no stage reads them); `slots` of them.
  std::vector<int32_t> slot;
  int32_t slots = 0;

  bool streams() const { return rows > 0; }
  bool Chained(int32_t stage, BufferId b) const;
};

// The most row groups a stage is cut into: finer than this changes a chain's fill by less than 1/64 of a stage.
inline constexpr int64_t kMaxStreamRows = 64;
// The most predecessors' row groups a site keeps (slots x rows): a section of very many chain predecessors is cut
// into fewer row groups rather than given a calendar the size of its program on every site.
inline constexpr int64_t kMaxStreamSlotRows = 4096;

// rows = 0 unless the section's plan says stream_rows.
RowStreamPlan PlanRowStream(const Section& section);

// One row group's share of an engine, for the trace: engine 0 unpack, 1 matrix, 2 SFPU, 3 pack.
struct RowSpan {
  int engine = 0;
  double start = 0, dur = 0;
};

// One compute thread's busy intervals, sorted and disjoint. Before `horizon` it counts as busy: the oldest intervals
// are folded into it so the calendar stays short.
class ThreadCalendar {
 public:
  void Reset(double now);
  // Books the earliest [start, start + length) with start >= earliest that overlaps nothing booked; returns start.
  double Book(double earliest, double length);

 private:
  double horizon_ = 0;
  std::vector<std::pair<double, double>> busy_;
};

// The most intervals a thread's calendar keeps before folding the oldest into its horizon: a few blocks' row groups.
inline constexpr size_t kMaxCalendarIntervals = 512;

// One site's compute threads in a streaming section.
class RowStreamCalendar {
 public:
  // At a section's start: every thread free at `now`, no row group packed.
  void Reset(const RowStreamPlan& plan, double now);
  // Places an invocation of `stage` whose other inputs were pushed by `floor`; returns when its last row group is
  // packed, plus the latency: when its pages are pushed. Appends each row group's engine shares to `spans` if given.
  double Place(const RowStreamPlan& plan, int32_t stage, const ComputeCost& c, double floor,
               std::vector<RowSpan>* spans);

 private:
  std::array<ThreadCalendar, 3> threads_;  // unpack, math, pack
  std::vector<double> packed_;  // [slot * rows + r]: when the stage's latest invocation packed row group r
};

}  // namespace spatial

#endif  // SIM_MACHINE_ROW_STREAM_H_
