// The SystemC model of a target (DESIGN §8 "Machine"): a grid of sites, each with its engines (reader, unpack,
// matrix, SFPU, pack, writer) driven by three sequencers (reader, compute and writer kernels), its section's
// buffers as page FIFOs with reserve/push/wait/pop, DRAM channels with bandwidth and latency and NoC links
// between them. Sections run one after another, separated by barriers; each starts on a whole cycle, its sequencers
// in site order, and schedules on its own clock, so its cycles do not depend on the sections before it. The model is
// timing only: values come from the VM (sim/simulate.h).
//
// Event-driven at stage-invocation granularity: a sequencer sleeps for an invocation's whole busy period
// (wait(k cycles)) and on one event per site that FIFO state changes notify; nothing is woken per clock. Three
// SC_THREADs per site plus one controller; DRAM channels are reservation calendars (first come, first served at
// the channel's sustained bandwidth), not processes. In a section whose plan streams its rows (BlockPlan.stream_rows,
// row_stream.h) a compute invocation is placed a row group at a time on the site's unpack, math and pack calendars,
// and the compute sequencer sleeps until its last row group is packed.
//
// Multicast (Load.multicast, DESIGN §3.4): the receivers of one block wait for each other (each has reserved its
// page, the semaphore tt-metal's sender waits on); then the sender reads it once from DRAM and sends it once down
// its row or column (its link's bandwidth, the hops to the farthest receiver).
//
// What it leaves out, on purpose (hardware-facts §1.4 warns such a model is optimistic by up to 3x under bad
// placement): NoC congestion on shared routes (a transfer is limited only by its site's link and its channels),
// virtual channels, L1 bank conflicts. Tiles are interleaved over the channels by tile index; an
// indirect load's address takes its admitted range's low end (the value is the VM's to know).
//
// This header does not include SystemC. SystemC elaborates once per process: RunMachine may be called once; a
// second call fails. sim/simulate.h runs it in a forked child.
#ifndef SIM_MACHINE_MACHINE_H_
#define SIM_MACHINE_MACHINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "sim/report/span.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial {

struct MachineOptions {
  // Fold blocks each section runs (a trip's value resolved by the caller); missing entries or -1: num_blocks.
  std::vector<int64_t> blocks_per_section;
  // What the run's tensors are known to hold, for a gathered block's index (TensorElement): the inputs given and
  // the run's final values (empty when timing only). Null: none; the tables' inits still are. Must outlive the run.
  const TensorMap* values = nullptr;
  const TensorMap* inputs = nullptr;
  // Record one span per engine per stage invocation (for traces), at most max_spans.
  bool record_spans = false;
  int64_t max_spans = 4'000'000;
};

struct MachineResult {
  // Timing fields: cycles, engines, sites, stalls, bytes, FLOPs, roofline, sections, stage_invocations.
  proto::SimReport report;
  std::vector<Span> spans;
  bool spans_truncated = false;
  TimelineInfo timeline;
};

// Fails on a target that cannot time programs, on references out of range, and with "Deadlock: ..." naming the
// waiting engines when the FIFO protocol cannot make progress.
absl::StatusOr<MachineResult> RunMachine(const Composition& c, const Target& target, const MachineOptions& options);

}  // namespace spatial

#endif  // SIM_MACHINE_MACHINE_H_
