#include "sim/machine/machine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <tuple>
#include <memory>
#include <string>
// sc_spawn: the sequencers are spawned per site from the elaborating constructor.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/machine/address_check.h"
#include "sim/machine/multicast_groups.h"
#include "sim/machine/row_stream.h"
#include "sim/machine/schedule.h"
#include "sim/machine/stage_cost.h"
#include "sim/machine/tensor_element.h"
#include "sim/place/placement.h"
#include "sim/vm/fault.h"
#include "spatial/semantics/affine.h"
#include "spatial/semantics/table_pages.h"
#include "spatial/status_macros.h"

// libsystemc.so's own main() calls sc_main. Binaries here have their own main() and drive SystemC through
// RunMachine, so this stub only satisfies the link; it sits in the file that defines RunMachine so every binary
// that can elaborate the machine links it.
int sc_main(int, char**) { return 0; }

namespace spatial {
namespace {

// One cycle is one nanosecond of SystemC time whatever the target's clock; the clock only converts cycles to
// seconds in the report. The default time resolution (1 ps) keeps a thousandth of a cycle.
const sc_core::sc_time& CycleTime() {
  static const sc_core::sc_time kCycle(1, sc_core::SC_NS);
  return kCycle;
}
// The simulation's clock, in cycles from its start.
double AbsoluteNow() { return sc_core::sc_time_stamp() / CycleTime(); }
void WaitCycles(double cycles) {
  if (cycles > 0) sc_core::wait(sc_core::sc_time(cycles, sc_core::SC_NS));
}

// Small stacks: a sequencer's frames are shallow, and 193 default 256 KiB stacks would be mostly waste.
constexpr int kStackBytes = 64 * 1024;

// A circular buffer's state on one site: versions [0, pushed) were pushed, [0, front) popped; remaining[i] is the
// number of reader invocations version front + i still waits for. In a section that streams its rows (row_stream.h)
// pushed_at[i] is the cycle it was pushed (elsewhere nothing reads it, and it stays empty).
struct Fifo {
  int64_t depth = 1;
  int64_t pushed = 0;
  int64_t front = 0;
  std::deque<int64_t> remaining;
  std::deque<double> pushed_at;

  void Advance() {
    while (!remaining.empty() && remaining.front() <= 0) {
      remaining.pop_front();
      if (!pushed_at.empty()) pushed_at.pop_front();
      ++front;
    }
  }
  // When version g was pushed (0 for a page nothing on this site wrote).
  double PushedAt(int64_t g) const {
    const int64_t i = g - front;
    return i >= 0 && i < static_cast<int64_t>(pushed_at.size()) ? pushed_at[static_cast<size_t>(i)] : 0.0;
  }
};

struct EngineCounters {
  double busy = 0, stall_in = 0, stall_out = 0, stall_dram = 0;
  int64_t invocations = 0;
};

// What a sequencer is blocked on, kept so a deadlock can name it.
struct WaitInfo {
  enum Kind : uint8_t { kNone, kInput, kSpace, kMulticast } kind = kNone;
  int32_t stage = 0;
  int32_t buffer = 0;
  int64_t version = 0;
};

struct SiteState {
  int64_t y = 0, x = 0;
  std::vector<Fifo> fifos;  // the current section's buffers
  std::array<EngineCounters, kNumEngines> engines;
  int64_t items = 0;
  std::array<WaitInfo, kNumEngineThreads> waiting;
  RowStreamCalendar stream;  // the compute threads' calendars in a section that streams its rows
};

struct SectionPlan {
  const Section* section = nullptr;
  int64_t blocks = 0;
  SectionSchedules schedules;  // one per number of blocks its items fold
  Placement placement;
  std::vector<SitePages> pages;  // per site
  std::vector<StageCost> costs;
  std::vector<MulticastGroups> multicast;  // by stage; empty for a stage that is not a multicast Load
  RowStreamPlan stream;
  std::optional<TablePages> tables;  // the pages known for each item: a gathered block's index among them
};

// One multicast's handshake: members arrive (each having reserved its page: the semaphore the sender waits on),
// the last one to arrive starts the sender's DRAM read and the multicast, and everyone leaves when it lands.
struct MulticastState {
  int32_t arrived = 0, left = 0;
  bool sent = false;
  double ready = 0;
};

struct SectionTotals {
  double start = 0, end = 0;
  double flops = 0;
  // Matrix and SFPU cycles of every invocation. The compute bound's numerator is their sum where the math thread
  // drives both, their larger where the section streams its rows (its vector work issued from the pack thread).
  double fpu_cycles = 0, sfpu_cycles = 0;
  int64_t read_bytes = 0, write_bytes = 0;
  int64_t invocations = 0;
};

class Machine : public sc_core::sc_module {
 public:
  Machine(sc_core::sc_module_name name, const MachineParams& params, std::vector<SectionPlan> plans,
          const MachineOptions& options)
      : sc_core::sc_module(name), p_(params), plans_(std::move(plans)), options_(options) {
    const int64_t n = p_.grid_y * p_.grid_x;
    sites_.resize(static_cast<size_t>(n));
    for (int64_t s = 0; s < n; ++s) {
      sites_[s].y = s / p_.grid_x;
      sites_[s].x = s % p_.grid_x;
      events_.push_back(std::make_unique<sc_core::sc_event>());
    }
    channel_free_.assign(static_cast<size_t>(p_.channels), 0.0);
    channel_tiles_.assign(static_cast<size_t>(p_.channels), 0);
    totals_.resize(plans_.size());
    sc_core::sc_spawn_options opt;
    opt.set_stack_size(kStackBytes);
    sc_core::sc_spawn([this] { Controller(); }, "controller", &opt);
    for (int64_t s = 0; s < n; ++s) {
      for (int t = 0; t < kNumEngineThreads; ++t) {
        starts_.push_back(std::make_unique<sc_core::sc_event>());
        sc_core::sc_spawn([this, s, t] { Sequencer(s, t); }, sc_core::sc_gen_unique_name("sequencer"), &opt);
      }
    }
  }

  bool finished() const { return finished_; }
  // ★ A SECTION KEEPS ITS OWN CLOCK: cycles since its start (an exact difference of SystemC times), so its schedule —
  // the channels' and the row streams' calendars, the multicasts' handshakes — is computed on the same numbers
  // wherever it starts. On the absolute clock the doubles rounded differently at every start (a whole run delayed by
  // 1000.7 cycles: its sections' sum moved by 1.5 k). With the start order (starts_) a section's time is its own.
  double Now() const { return (sc_core::sc_time_stamp() - section_start_) / CycleTime(); }
  int current_section() const { return current_; }
  std::string DeadlockMessage() const;
  MachineResult Collect(const Composition& c, const Target& target);

 private:
  void Controller();
  void Sequencer(int64_t site, int thread);
  void Execute(int64_t site, int thread, const SectionPlan& sp, int64_t ordinal, const WorkItem& item,
               const Invocation& inv);
  // Moves a Load's or Store's tiles over the DRAM channels and the site's link; returns when it is done.
  void Transfer(int64_t site, const SectionPlan& sp, int32_t stage_index, const StageCost& cost,
                const WorkItem& item, int32_t block, bool write, double* busy, double* dram_stall);
  // A multicast Load's share of one group transfer: waits for the group, then for the block to arrive.
  void Multicast(const SectionPlan& sp, int32_t stage_index, const StageCost& cost, const WorkItem& item,
                 int64_t item_index, int32_t block, WaitInfo* waiting, double* busy, double* dram_stall,
                 double* sync_wait);
  // Books a DRAM transfer of the block's tiles for `site` on the channels and the site's link; returns its end.
  double BookDram(int64_t site, const SectionPlan& sp, const AccessPattern& pat, const StageCost& cost,
                  const WorkItem& item, int32_t block, bool write, double now, double* uncontended);
  void Record(int64_t site, Engine e, const Invocation& inv, const WorkItem& item, double start, double dur);

  MachineParams p_;
  std::vector<SectionPlan> plans_;
  MachineOptions options_;
  std::vector<SiteState> sites_;
  std::vector<std::unique_ptr<sc_core::sc_event>> events_;  // one per site: any FIFO of the site changed
  // One start event a sequencer (site-major, then thread), notified in that order: the sequencers of a section start
  // in the same order whatever order they finished the last one in, so the first-come bookings at its first cycle
  // (a DRAM channel, a multicast's sender) go the same way.
  std::vector<std::unique_ptr<sc_core::sc_event>> starts_;
  sc_core::sc_event done_;
  uint64_t generation_ = 0;
  int64_t active_ = 0;
  bool finished_ = false;
  int current_ = 0;
  sc_core::sc_time section_start_;  // the current section's start; Now() counts from it
  double section_origin_ = 0;       // the same, in cycles from the simulation's start (the report's and the spans')
  std::vector<double> channel_free_;    // the cycle each DRAM channel's calendar is booked until (section clock)
  std::vector<int64_t> channel_tiles_;  // scratch for Transfer (no wait inside it, so sequencers never share it)
  std::vector<SectionTotals> totals_;
  int64_t noc_bytes_ = 0, noc_byte_hops_ = 0;
  int64_t gathers_at_low_end_ = 0;  // gathered transfers timed at their admitted index's low end (BookDram)
  std::vector<Span> spans_;
  bool spans_truncated_ = false;
  std::map<std::tuple<int32_t, int32_t, int32_t>, MulticastState> multicasts_;  // (stage, group, block)
  sc_core::sc_event multicast_sent_;
  std::vector<RowSpan> row_spans_;  // scratch for a streaming invocation's spans (no wait while it is used)
};

void Machine::Controller() {
  // One delta for every sequencer to reach its start event, so the first section starts them in the same order as
  // every later one (SystemC's initialization runs the processes in an order of its own).
  sc_core::wait(sc_core::SC_ZERO_TIME);
  for (size_t s = 0; s < plans_.size(); ++s) {
    current_ = static_cast<int>(s);
    const SectionPlan& sp = plans_[s];
    for (size_t i = 0; i < sites_.size(); ++i) {
      SiteState& site = sites_[i];
      site.fifos.assign(sp.section->buffers.size(), Fifo{});
      for (size_t b = 0; b < sp.section->buffers.size(); ++b) site.fifos[b].depth = sp.section->buffers[b].depth;
      site.items += static_cast<int64_t>(sp.placement.site_items[i].size());
    }
    section_start_ = sc_core::sc_time_stamp();
    section_origin_ = AbsoluteNow();
    totals_[s].start = section_origin_;
    // Every transfer of the section before ended by the barrier, so no channel is booked past this section's start.
    std::fill(channel_free_.begin(), channel_free_.end(), 0.0);
    active_ = static_cast<int64_t>(sites_.size()) * kNumEngineThreads;
    ++generation_;
    for (const auto& e : starts_) e->notify();
    while (active_ > 0) sc_core::wait(done_);
    // The barrier: the next section starts when every engine of every site is done with this one, on the next whole
    // cycle, so that every section starts on a whole cycle and its reported cycles are its own whatever came before.
    const double done = AbsoluteNow();
    const double edge = std::ceil(done - 1e-6);
    if (edge > done) WaitCycles(edge - done);
    totals_[s].end = AbsoluteNow();
  }
  finished_ = true;
  ++generation_;
  for (const auto& e : starts_) e->notify();  // lets the sequencers return: the simulation ends with every one finished
}

void Machine::Sequencer(int64_t site, int thread) {
  uint64_t seen = 0;
  for (;;) {
    while (generation_ == seen) sc_core::wait(*starts_[static_cast<size_t>(site * kNumEngineThreads + thread)]);
    seen = generation_;
    if (finished_) return;
    const SectionPlan& sp = plans_[current_];
    const auto& items = sp.placement.site_items[site];
    if (thread == static_cast<int>(EngineThread::kCompute) && sp.stream.streams()) {
      sites_[site].stream.Reset(sp.stream, Now());
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t j = 0; j < n; ++j) {
      const WorkItem& item = sp.section->items[items[j]];
      for (const Invocation& inv : sp.schedules.Of(items[j]).by_thread[thread]) {
        Execute(site, thread, sp, j, item, inv);
      }
    }
    if (--active_ == 0) done_.notify();
  }
}

void Machine::Execute(int64_t site, int thread, const SectionPlan& sp, int64_t ordinal, const WorkItem& item,
                      const Invocation& inv) {
  SiteState& st = sites_[site];
  sc_core::sc_event& changed = *events_[site];
  const auto& site_items = sp.placement.site_items[site];
  const SectionSchedule& sch = sp.schedules.Of(site_items[ordinal]);
  const SitePages& pages = sp.pages[site];
  WaitInfo& waiting = st.waiting[thread];
  auto global = [&](const PageRef& r) { return pages.Global(sp.schedules, ordinal, r); };

  // Wait for every input page (cb_wait_front).
  const double t0 = Now();
  for (int32_t r = inv.reads_begin; r < inv.reads_end; ++r) {
    const int64_t g = global(sch.refs[r]);
    if (g < 0) continue;
    Fifo& f = st.fifos[sch.refs[r].buffer];
    while (f.pushed <= g) {
      waiting = {WaitInfo::kInput, inv.stage, sch.refs[r].buffer, g};
      sc_core::wait(changed);
    }
  }
  // Reserve every output page (cb_reserve_back), in version order.
  const double t1 = Now();
  for (int32_t w = inv.writes_begin; w < inv.writes_end; ++w) {
    const int32_t b = sch.refs[w].buffer;
    const int64_t g = global(sch.refs[w]);
    Fifo& f = st.fifos[b];
    int64_t need_front = g - f.depth + 1;
    // An in-place update: the page this stage reads is popped when the stage is done, so it cannot wait for it.
    for (int32_t r = inv.reads_begin; r < inv.reads_end; ++r) {
      if (sch.refs[r].buffer != b) continue;
      const int64_t gr = global(sch.refs[r]);
      if (gr >= 0) need_front = std::min(need_front, gr);
    }
    while (f.pushed != g || f.front < need_front) {
      waiting = {WaitInfo::kSpace, inv.stage, b, g};
      sc_core::wait(changed);
    }
  }
  waiting.kind = WaitInfo::kNone;
  const double t2 = Now();

  const Stage& stage = sp.section->stages[inv.stage];
  const StageCost& cost = sp.costs[inv.stage];
  SectionTotals& tot = totals_[current_];
  ++tot.invocations;
  Engine primary = Engine::kReader;
  if (cost.thread == EngineThread::kCompute) {
    const ComputeCost& cc = cost.compute;
    primary = cc.sfpu > cc.fpu ? Engine::kSfpu : Engine::kMatrix;
    const std::array<std::pair<Engine, double>, 4> parts = {
        {{Engine::kUnpack, cc.unpack}, {Engine::kMatrix, cc.fpu}, {Engine::kSfpu, cc.sfpu}, {Engine::kPack, cc.pack}}};
    if (sp.stream.streams()) {
      // Row streaming (row_stream.h): the invocation may have started on its chain predecessors' row groups before
      // they were pushed; its other inputs hold it back from when they were pushed, its outputs' space from now.
      double floor = t2 > t1 ? t2 : 0.0;
      for (int32_t r = inv.reads_begin; r < inv.reads_end; ++r) {
        const int64_t g = global(sch.refs[r]);
        if (g < 0 || sp.stream.Chained(inv.stage, sch.refs[r].buffer)) continue;
        floor = std::max(floor, st.fifos[sch.refs[r].buffer].PushedAt(g));
      }
      row_spans_.clear();
      const double end = st.stream.Place(sp.stream, inv.stage, cc, floor,
                                         options_.record_spans ? &row_spans_ : nullptr);
      for (const RowSpan& rs : row_spans_) Record(site, parts[rs.engine].first, inv, item, rs.start, rs.dur);
      WaitCycles(end - Now());
    } else {
      const double d = cc.Duration();
      WaitCycles(d);
      const double lead = cc.unpack / static_cast<double>(std::max<int64_t>(1, cc.tiles));
      // Where each engine's share sits in the invocation: unpack leads, math follows a tile behind, pack ends it.
      const std::array<double, 4> starts = {t2, t2 + lead, t2 + lead + cc.fpu, t2 + d - cc.pack};
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].second > 0) Record(site, parts[i].first, inv, item, starts[i], parts[i].second);
      }
    }
    bool any = false;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].second <= 0) continue;
      EngineCounters& part = st.engines[static_cast<int>(parts[i].first)];
      part.busy += parts[i].second;
      ++part.invocations;
      any = true;
    }
    if (!any) ++st.engines[static_cast<int>(primary)].invocations;
    tot.flops += cc.flops;
    tot.fpu_cycles += cc.fpu;
    tot.sfpu_cycles += cc.sfpu;
  } else {
    const bool write = std::holds_alternative<Store>(stage.op);
    primary = cost.thread == EngineThread::kWriter ? Engine::kWriter : Engine::kReader;
    double busy = 0, dram_stall = 0, sync_wait = 0;
    const int64_t item_index = sp.placement.site_items[site][ordinal];
    const bool grouped = !write && !sp.multicast[inv.stage].group_of_item.empty() &&
                         sp.multicast[inv.stage].group_of_item[item_index] >= 0;
    if (grouped) {
      Multicast(sp, inv.stage, cost, item, item_index, inv.block, &waiting, &busy, &dram_stall, &sync_wait);
    } else {
      Transfer(site, sp, inv.stage, cost, item, inv.block, write, &busy, &dram_stall);
    }
    EngineCounters& ec = st.engines[static_cast<int>(primary)];
    ec.busy += busy;
    ec.stall_dram += dram_stall;
    ec.stall_in += sync_wait;
    ++ec.invocations;
    Record(site, primary, inv, item, t2, Now() - t2);
  }
  // Waiting is charged to the engine that runs the stage's main work.
  EngineCounters& ec = st.engines[static_cast<int>(primary)];
  ec.stall_in += t1 - t0;
  ec.stall_out += t2 - t1;

  // Push the outputs (cb_push_back), then pop the inputs this invocation was the last reader of (cb_pop_front).
  for (int32_t w = inv.writes_begin; w < inv.writes_end; ++w) {
    const int32_t b = sch.refs[w].buffer;
    const int64_t g = global(sch.refs[w]);
    Fifo& f = st.fifos[b];
    f.pushed = g + 1;
    f.remaining.push_back(pages.Readers(sp.schedules, site_items, ordinal, sch.refs[w]));
    if (sp.stream.streams()) f.pushed_at.push_back(Now());
    f.Advance();
  }
  for (int32_t r = inv.reads_begin; r < inv.reads_end; ++r) {
    const int64_t g = global(sch.refs[r]);
    if (g < 0) continue;
    Fifo& f = st.fifos[sch.refs[r].buffer];
    const int64_t i = g - f.front;
    if (i >= 0 && i < static_cast<int64_t>(f.remaining.size())) --f.remaining[static_cast<size_t>(i)];
    f.Advance();
  }
  changed.notify();
}

double Machine::BookDram(int64_t site, const SectionPlan& sp, const AccessPattern& pat, const StageCost& cost,
                         const WorkItem& item, int32_t block, bool write, double now, double* uncontended) {
  // The block's tiles by TileForm, the one address evaluator (spatial/semantics/affine.h). CheckAddresses has
  // proven them inside the tensor; only their residues pick channels. A gathered block's index: element 0 of its
  // index page where the run knows it (a table's, a given input's: TablePages), else the admitted range's low end,
  // counted for the report's note.
  const AffineForm form = TileForm(pat);
  AddrEnv<Wide> env = ZeroEnv<Wide>();
  env[static_cast<int>(AddrVar::kItemY)] = item.y;
  env[static_cast<int>(AddrVar::kItemX)] = item.x;
  env[static_cast<int>(AddrVar::kKBlock)] = std::max<int32_t>(0, block);
  if (pat.origin.indirect) {
    const IndirectTile& ind = *pat.origin.indirect;
    std::optional<int64_t> v = sp.tables->Element(ind.index, item, 0);
    if (v && (*v < ind.lo || *v > ind.hi)) v.reset();  // the run faults there
    env[static_cast<int>(AddrVar::kIndex)] = v.value_or(ind.lo);
    if (!v && ind.lo != ind.hi) ++gathers_at_low_end_;
  }
  const uint64_t channels = static_cast<uint64_t>(p_.channels);
  std::fill(channel_tiles_.begin(), channel_tiles_.end(), 0);
  const int64_t tiles = cost.tiles;
  if (tiles > 64 * p_.channels) {
    // A block this large covers every channel evenly to within a tile.
    for (uint64_t c = 0; c < channels; ++c) {
      channel_tiles_[c] = tiles / p_.channels + (static_cast<int64_t>(c) < tiles % p_.channels ? 1 : 0);
    }
  } else {
    for (int64_t i = 0; i < pat.block_h; ++i) {
      for (int64_t j = 0; j < pat.block_w; ++j) {
        env[static_cast<int>(AddrVar::kBlockI)] = i;
        env[static_cast<int>(AddrVar::kBlockJ)] = j;
        const Wide t = Evaluate(form, env);
        ++channel_tiles_[static_cast<uint64_t>(t < 0 ? 0 : t) % channels];
      }
    }
  }
  const SiteState& st = sites_[site];
  double end = now, fastest = 0, latency = 0;
  int64_t bytes = 0;
  for (uint64_t c = 0; c < channels; ++c) {
    if (channel_tiles_[c] == 0) continue;
    const int64_t b = channel_tiles_[c] * cost.tile_bytes;
    const double dur = static_cast<double>(b) / p_.channel_bytes_per_cycle;
    const double begin = std::max(now, channel_free_[c]);
    channel_free_[c] = begin + dur;
    end = std::max(end, channel_free_[c]);
    fastest = std::max(fastest, dur);
    latency = std::max(latency, p_.Latency(static_cast<int64_t>(c), st.y, st.x));
    bytes += b;
    noc_byte_hops_ += b * p_.Hops(static_cast<int64_t>(c), st.y, st.x);
  }
  // The site's own link carries every byte of the transfer; only this sequencer uses it in this direction.
  const double link = static_cast<double>(bytes) / p_.link_bytes_per_cycle;
  end = std::max(end, now + link) + latency;
  *uncontended = std::max(fastest, link) + latency;
  noc_bytes_ += bytes;
  (write ? totals_[current_].write_bytes : totals_[current_].read_bytes) += bytes;
  return end;
}

void Machine::Transfer(int64_t site, const SectionPlan& sp, int32_t stage_index, const StageCost& cost,
                       const WorkItem& item, int32_t block, bool write, double* busy, double* dram_stall) {
  const Stage& stage = sp.section->stages[static_cast<size_t>(stage_index)];
  const AccessPattern& pat =
      write ? std::get<Store>(stage.op).pattern : std::get<Load>(stage.op).pattern;
  const double now = Now();
  double uncontended = 0;
  const double end = BookDram(site, sp, pat, cost, item, block, write, now, &uncontended);
  *busy = uncontended;
  *dram_stall = std::max(0.0, end - now - uncontended);
  WaitCycles(end - now);
}

void Machine::Multicast(const SectionPlan& sp, int32_t stage_index, const StageCost& cost, const WorkItem& item,
                        int64_t item_index, int32_t block, WaitInfo* waiting, double* busy, double* dram_stall,
                        double* sync_wait) {
  const MulticastGroups& mg = sp.multicast[stage_index];
  const int32_t group = mg.group_of_item[item_index];
  const std::tuple<int32_t, int32_t, int32_t> key{stage_index, group, block};
  MulticastState& g = multicasts_[key];  // node-based: the reference survives other groups' inserts and erases
  const double arrive = Now();
  if (++g.arrived == mg.size[group]) {
    // Every receiver has reserved its page: the sender reads the block from DRAM into its own memory, then sends
    // it once down the row or column (one packet stream on its outbound link, the hops to the farthest receiver).
    const Load& load = std::get<Load>(sp.section->stages[stage_index].op);
    const int64_t sender = mg.sender_site[group];
    double fastest = 0;
    const double dram_end = BookDram(sender, sp, load.pattern, cost, item, block, false, arrive, &fastest);
    const int64_t bytes = cost.tiles * cost.tile_bytes;
    const double send = static_cast<double>(bytes) / p_.link_bytes_per_cycle +
                        static_cast<double>(mg.span_hops[group]) * p_.hop_cycles + 2 * p_.niu_cycles;
    noc_bytes_ += bytes;
    noc_byte_hops_ += bytes * mg.span_hops[group];
    g.ready = dram_end + send;
    g.sent = true;
    *dram_stall = std::max(0.0, dram_end - arrive - fastest);
    multicast_sent_.notify();
  } else {
    // Named for a deadlock report: a group whose members cannot all arrive.
    *waiting = {WaitInfo::kMulticast, stage_index, sp.section->stages[stage_index].outs.at(0), block};
    while (!g.sent) sc_core::wait(multicast_sent_);
    waiting->kind = WaitInfo::kNone;
  }
  const double formed = Now();
  *sync_wait = formed - arrive;
  WaitCycles(g.ready - formed);
  *busy = Now() - formed - *dram_stall;
  if (++g.left == mg.size[group]) multicasts_.erase(key);
}

void Machine::Record(int64_t site, Engine e, const Invocation& inv, const WorkItem& item, double start,
                     double dur) {
  if (!options_.record_spans) return;
  if (static_cast<int64_t>(spans_.size()) >= options_.max_spans) {
    spans_truncated_ = true;
    return;
  }
  Span s;
  s.start = section_origin_ + start;
  s.dur = dur;
  s.site = static_cast<int32_t>(site);
  s.section = current_;
  s.stage = inv.stage;
  s.block = inv.block;
  s.item = item.id;
  s.engine = e;
  spans_.push_back(s);
}

std::string Machine::DeadlockMessage() const {
  const Section& sec = *plans_[current_].section;
  std::string msg = absl::StrCat("Deadlock: section '", sec.name, "' cannot make progress at cycle ",
                                 static_cast<int64_t>(AbsoluteNow()), ":");
  static constexpr const char* kThreadNames[] = {"reader", "compute", "writer"};
  int shown = 0, total = 0;
  for (const SiteState& st : sites_) {
    for (int t = 0; t < kNumEngineThreads; ++t) {
      const WaitInfo& w = st.waiting[t];
      if (w.kind == WaitInfo::kNone) continue;
      ++total;
      if (shown >= 6) continue;
      ++shown;
      if (w.kind == WaitInfo::kMulticast) {
        absl::StrAppend(&msg, " site (", st.y, ",", st.x, ") ", kThreadNames[t], " at multicast stage '",
                        sec.stages[w.stage].name, "' waits for the other receivers of block ", w.version, ";");
        continue;
      }
      const Fifo& f = st.fifos[w.buffer];
      absl::StrAppend(&msg, " site (", st.y, ",", st.x, ") ", kThreadNames[t], " at stage '",
                      sec.stages[w.stage].name, "' waits for ",
                      w.kind == WaitInfo::kInput ? "page " : "space for page ", w.version, " of buffer '",
                      sec.buffers[w.buffer].name, "' (", f.pushed, " pushed, ", f.front, " popped, depth ", f.depth,
                      ");");
    }
  }
  if (total > shown) absl::StrAppend(&msg, " and ", total - shown, " more");
  return msg;
}

MachineResult Machine::Collect(const Composition& c, const Target& target) {
  MachineResult res;
  proto::SimReport& r = res.report;
  r.set_composition(c.name);
  r.set_target(target.name());
  r.set_clock_hz(p_.clock_hz);
  r.set_sites(static_cast<int64_t>(sites_.size()));
  r.set_fidelity(p_.fidelity);
  const double end = AbsoluteNow();
  const int64_t cycles = static_cast<int64_t>(std::ceil(end - 1e-6));
  r.set_total_cycles(std::max<int64_t>(0, cycles));
  const double seconds = static_cast<double>(r.total_cycles()) / p_.clock_hz;
  r.set_seconds(seconds);
  const double span = std::max(1.0, static_cast<double>(r.total_cycles()));
  const double nsites = static_cast<double>(sites_.size());

  std::array<EngineCounters, kNumEngines> agg;
  for (const SiteState& st : sites_) {
    proto::SiteStats* ss = r.add_site_stats();
    ss->set_y(st.y);
    ss->set_x(st.x);
    ss->set_items(st.items);
    for (int e = 0; e < kNumEngines; ++e) {
      const EngineCounters& ec = st.engines[e];
      proto::EngineStats* es = ss->add_engines();
      es->set_engine(std::string(EngineName(static_cast<Engine>(e))));
      es->set_busy_cycles(ec.busy);
      es->set_busy_fraction(ec.busy / span);
      es->set_stall_input_cycles(ec.stall_in);
      es->set_stall_output_cycles(ec.stall_out);
      es->set_stall_dram_cycles(ec.stall_dram);
      es->set_invocations(ec.invocations);
      agg[e].busy += ec.busy;
      agg[e].stall_in += ec.stall_in;
      agg[e].stall_out += ec.stall_out;
      agg[e].stall_dram += ec.stall_dram;
      agg[e].invocations += ec.invocations;
    }
  }
  proto::StallStats* stalls = r.mutable_stalls();
  for (int e = 0; e < kNumEngines; ++e) {
    proto::EngineStats* es = r.add_engines();
    es->set_engine(std::string(EngineName(static_cast<Engine>(e))));
    es->set_busy_cycles(agg[e].busy);
    es->set_busy_fraction(agg[e].busy / (span * nsites));
    es->set_stall_input_cycles(agg[e].stall_in);
    es->set_stall_output_cycles(agg[e].stall_out);
    es->set_stall_dram_cycles(agg[e].stall_dram);
    es->set_invocations(agg[e].invocations);
    stalls->set_input_wait_cycles(stalls->input_wait_cycles() + agg[e].stall_in);
    stalls->set_output_space_cycles(stalls->output_space_cycles() + agg[e].stall_out);
    stalls->set_dram_cycles(stalls->dram_cycles() + agg[e].stall_dram);
  }

  double flops = 0, compute_bound = 0, dram_bound = 0, bound = 0;
  int64_t read = 0, written = 0, invocations = 0;
  for (size_t s = 0; s < plans_.size(); ++s) {
    const SectionTotals& t = totals_[s];
    const SectionPlan& sp = plans_[s];
    proto::SectionStats* ss = r.add_sections();
    ss->set_name(sp.section->name);
    // Whole cycles on the same grid as total_cycles, so consecutive sections' cycles add up to it.
    const int64_t start = static_cast<int64_t>(std::ceil(t.start - 1e-6));
    ss->set_start_cycle(start);
    ss->set_cycles(static_cast<int64_t>(std::ceil(t.end - 1e-6)) - start);
    ss->set_items(static_cast<int64_t>(sp.section->items.size()));
    ss->set_sites_used(sp.placement.sites_used());
    ss->set_fold_blocks(sp.blocks);
    ss->set_flops(t.flops);
    ss->set_dram_read_bytes(t.read_bytes);
    ss->set_dram_write_bytes(t.write_bytes);
    const double math =
        sp.stream.streams() ? std::max(t.fpu_cycles, t.sfpu_cycles) : t.fpu_cycles + t.sfpu_cycles;
    const double cb = math / nsites;
    const double db = static_cast<double>(t.read_bytes + t.write_bytes) / p_.dram_bytes_per_cycle();
    proto::Roofline* rl = ss->mutable_roofline();
    rl->set_compute_bound_cycles(cb);
    rl->set_dram_bound_cycles(db);
    rl->set_bound_cycles(std::max(cb, db));
    rl->set_limited_by(cb >= db ? "compute" : "dram");
    rl->set_fraction(t.end > t.start ? std::max(cb, db) / (t.end - t.start) : 0.0);
    flops += t.flops;
    compute_bound += cb;
    dram_bound += db;
    bound += std::max(cb, db);
    read += t.read_bytes;
    written += t.write_bytes;
    invocations += t.invocations;
  }
  r.set_dram_read_bytes(read);
  r.set_dram_write_bytes(written);
  r.set_noc_bytes(noc_bytes_);
  r.set_noc_byte_hops(noc_byte_hops_);
  r.set_flops(flops);
  r.set_stage_invocations(invocations);
  if (seconds > 0) {
    r.set_achieved_flops_per_second(flops / seconds);
    r.set_achieved_dram_bytes_per_second(static_cast<double>(read + written) / seconds);
  }
  proto::Roofline* rl = r.mutable_roofline();
  rl->set_compute_bound_cycles(compute_bound);
  rl->set_dram_bound_cycles(dram_bound);
  rl->set_bound_cycles(bound);
  rl->set_limited_by(compute_bound >= dram_bound ? "compute" : "dram");
  rl->set_fraction(end > 0 ? bound / end : 0.0);

  res.spans = std::move(spans_);
  res.spans_truncated = spans_truncated_;
  r.set_trace_events(static_cast<int64_t>(res.spans.size()));
  r.set_trace_truncated(spans_truncated_);
  if (gathers_at_low_end_ > 0) {
    r.add_notes(absl::StrCat(gathers_at_low_end_, " gathered block transfer(s) timed at the low end of their admitted "
                             "index, which is computed on a site or read from a tensor not given: the DRAM channels "
                             "they occupy, and their contention, may differ on hardware"));
  }
  TimelineInfo& tl = res.timeline;
  tl.clock_hz = p_.clock_hz;
  tl.grid_y = p_.grid_y;
  tl.grid_x = p_.grid_x;
  for (const SectionPlan& sp : plans_) {
    tl.section_names.push_back(sp.section->name);
    std::vector<std::string> names;
    for (const Stage& st : sp.section->stages) names.push_back(st.name);
    tl.stage_names.push_back(std::move(names));
  }
  return res;
}

// SystemC time is 64-bit picoseconds (1.8e16 cycles of 1 ns): a program that could run longer than
// kMaxCycles, counting every invocation as if nothing overlapped, is refused before it overflows the clock.
constexpr double kMaxCycles = 1e15;

absl::Status CheckRunLength(const std::vector<SectionPlan>& plans, const MachineParams& p) {
  double serial = 0;
  const double slowest = std::min(p.channel_bytes_per_cycle, p.link_bytes_per_cycle);
  for (const SectionPlan& sp : plans) {
    double item = 0;
    for (const auto& invs : sp.schedules.by_count[0].by_thread) {
      for (const Invocation& inv : invs) {
        const StageCost& c = sp.costs[inv.stage];
        item += c.thread == EngineThread::kCompute
                    ? c.compute.Duration()
                    : static_cast<double>(c.tiles) * static_cast<double>(c.tile_bytes) / slowest + p.dram_latency +
                          static_cast<double>(p.grid_y + p.grid_x + 2) * p.hop_cycles + 2 * p.niu_cycles;
      }
    }
    serial += item * static_cast<double>(sp.section->items.size());
    if (!(serial <= kMaxCycles)) {
      return absl::ResourceExhaustedError(absl::StrCat("TooLarge: section '", sp.section->name,
                                                       "' could run more than ", kMaxCycles,
                                                       " cycles, beyond the simulator's clock"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MachineResult> RunMachine(const Composition& c, const Target& target, const MachineOptions& options) {
  static std::atomic<bool> used{false};
  if (used.exchange(true)) {
    return absl::FailedPreconditionError(
        "the SystemC machine elaborates once per process; run each simulation in its own process (Simulate forks "
        "one)");
  }
  ASSIGN_OR_RETURN(MachineParams params, DeriveParams(target));
  std::vector<SectionPlan> plans;
  for (size_t s = 0; s < c.sections.size(); ++s) {
    const Section& sec = c.sections[s];
    SectionPlan sp;
    sp.section = &sec;
    int64_t blocks = std::max<int64_t>(0, sec.num_blocks);
    if (s < options.blocks_per_section.size() && options.blocks_per_section[s] >= 0) {
      blocks = options.blocks_per_section[s];
    }
    sp.blocks = blocks;
    ASSIGN_OR_RETURN(sp.schedules, BuildSchedules(sec, blocks));
    sp.placement = PlaceItems(sec, target);
    for (const auto& items : sp.placement.site_items) sp.pages.emplace_back(sp.schedules, items, sec.buffers.size());
    for (const Stage& st : sec.stages) sp.costs.push_back(CostOf(sec, st, target, params));
    sp.multicast = GroupMulticasts(sec, sp.placement, blocks);
    sp.stream = PlanRowStream(sec);
    sp.tables.emplace(sec, target.tile_rows(), target.tile_cols(),
                      [values = options.values, inputs = options.inputs](const Tensor& t, int64_t elem) {
                        static const TensorMap kNone;
                        return TensorElement(t, elem, values != nullptr ? *values : kNone,
                                             inputs != nullptr ? *inputs : kNone);
                      });
    plans.push_back(std::move(sp));
  }

  RETURN_IF_ERROR(CheckRunLength(plans, params));
  for (const SectionPlan& sp : plans) {
    RETURN_IF_ERROR(CheckAddresses(*sp.section, sp.blocks, target.tile_rows(), target.tile_cols()));
  }
  // Before SystemC's first use: its banner would otherwise go to stdout.
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);
  try {
    sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    sc_core::sc_report_handler::set_actions(sc_core::SC_WARNING, sc_core::SC_DO_NOTHING);
    // Process lifetime: after a deadlock the sequencers are suspended inside it, and SystemC's processes must not
    // outlive the module their closures point into. The process simulates once and exits.
    static std::unique_ptr<Machine> machine;
    machine = std::make_unique<Machine>("machine", params, std::move(plans), options);
    sc_core::sc_start();
    if (!machine->finished()) return absl::AbortedError(machine->DeadlockMessage());
    return machine->Collect(c, target);
  } catch (const sc_core::sc_report& e) {
    return absl::InternalError(absl::StrCat("SystemC: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("machine: ", e.what()));
  }
}

}  // namespace spatial
