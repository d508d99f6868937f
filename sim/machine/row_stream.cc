#include "sim/machine/row_stream.h"

#include <algorithm>

namespace spatial {

bool RowStreamPlan::Chained(int32_t stage, BufferId b) const {
  if (stage < 0 || static_cast<size_t>(stage) >= chained.size()) return false;
  const auto& c = chained[static_cast<size_t>(stage)];
  return std::find(c.begin(), c.end(), b) != c.end();
}

RowStreamPlan PlanRowStream(const Section& section) {
  RowStreamPlan plan;
  if (!section.plan || !section.plan->stream_rows) return plan;
  const size_t n = section.stages.size();
  plan.deps.resize(n);
  plan.chained.resize(n);
  plan.slot.assign(n, -1);
  auto computes = [&](size_t i) { return EngineThreadOf(section.stages[i]) == EngineThread::kCompute; };
  for (size_t s = 0; s < n; ++s) {
    const Stage& st = section.stages[s];
    if (!computes(s)) continue;
    for (const BufferId b : st.ins) {
      // The latest stage of the phase before this one that writes b: a compute stage is a chain predecessor; a
      // Load (or nothing: a page from the previous block or the prologue) leaves b to its page's push time. A writer
      // that skips blocks (Stage.last_blocks: in place) leaves the page of the writer before it on those blocks, so
      // that one is a predecessor too (its packed time is this block's where the skipper's is stale), and a Load
      // there keeps b to its push time.
      bool any = false, all_compute = true;
      for (size_t p = s; p-- > 0;) {
        const Stage& prev = section.stages[p];
        if (prev.phase != st.phase) break;
        if (std::find(prev.outs.begin(), prev.outs.end(), b) == prev.outs.end()) continue;
        if (computes(p)) {
          auto& d = plan.deps[s];
          if (std::find(d.begin(), d.end(), static_cast<int32_t>(p)) == d.end()) d.push_back(static_cast<int32_t>(p));
          any = true;
        } else {
          all_compute = false;
        }
        if (prev.last_blocks > 0) continue;
        break;
      }
      if (any && all_compute && std::find(plan.chained[s].begin(), plan.chained[s].end(), b) == plan.chained[s].end()) {
        plan.chained[s].push_back(b);
      }
    }
  }
  for (const auto& d : plan.deps) {
    for (const int32_t p : d) {
      if (plan.slot[static_cast<size_t>(p)] < 0) plan.slot[static_cast<size_t>(p)] = plan.slots++;
    }
  }
  const int64_t most = std::max<int64_t>(1, kMaxStreamSlotRows / std::max<int64_t>(1, plan.slots));
  plan.rows = std::clamp<int64_t>(section.plan->per_site_m, 1, std::min(kMaxStreamRows, most));
  return plan;
}

void ThreadCalendar::Reset(double now) {
  horizon_ = now;
  busy_.clear();
}

double ThreadCalendar::Book(double earliest, double length) {
  double start = std::max(earliest, horizon_);
  // The intervals are disjoint and sorted, so their ends are too: skip those that end by the candidate start, then
  // try each gap in turn.
  auto it = std::partition_point(busy_.begin(), busy_.end(),
                                 [start](const std::pair<double, double>& iv) { return iv.second <= start; });
  for (;; ++it) {
    const double end = start + length;
    if (it == busy_.end() || end <= it->first) {
      it = busy_.insert(it, {start, end});
      break;
    }
    start = std::max(start, it->second);
  }
  if (busy_.size() > kMaxCalendarIntervals) {
    const size_t drop = busy_.size() / 2;
    horizon_ = std::max(horizon_, busy_[drop - 1].second);
    busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  return start;
}

void RowStreamCalendar::Reset(const RowStreamPlan& plan, double now) {
  for (ThreadCalendar& t : threads_) t.Reset(now);
  packed_.assign(static_cast<size_t>(plan.slots) * static_cast<size_t>(std::max<int64_t>(0, plan.rows)), now);
}

double RowStreamCalendar::Place(const RowStreamPlan& plan, int32_t stage, const ComputeCost& c, double floor,
                               std::vector<RowSpan>* spans) {
  const int64_t rows = std::max<int64_t>(1, plan.rows);
  const double r_n = static_cast<double>(rows);
  // A row group's tiles: the pipeline granularity within it.
  const double k = static_cast<double>(std::max<int64_t>(1, c.tiles / rows));
  // The three threads' shares of one row group: the pack thread runs the vector work, then packs.
  const double sfpu = c.sfpu / r_n, pack = c.pack / r_n;
  const double shares[3] = {c.unpack / r_n, c.fpu / r_n, sfpu + pack};
  const int32_t slot = plan.slot[static_cast<size_t>(stage)];
  const auto& deps = plan.deps[static_cast<size_t>(stage)];
  double end = floor;
  for (int64_t r = 0; r < rows; ++r) {
    double ready = floor;
    for (const int32_t d : deps) {
      ready = std::max(ready, packed_[static_cast<size_t>(plan.slot[static_cast<size_t>(d)] * rows + r)]);
    }
    double prev_start = ready, prev_end = ready, prev_share = 0;
    for (int t = 0; t < 3; ++t) {
      if (shares[t] <= 0) continue;
      // Starts a tile after the thread before it started and ends a tile after it ended; the row group is booked as
      // one stretch of its thread's own work, as late as that allows, so the thread's waits between the tiles stay
      // open for other row groups (the first thread with work waits for nothing but its inputs and its calendar).
      const double earliest = std::max(prev_start + prev_share / k, prev_end + shares[t] / k - shares[t]);
      const double start = threads_[t].Book(earliest, shares[t]);
      const double stop = start + shares[t];
      if (spans != nullptr) {
        if (t < 2) {
          spans->push_back({t, start, shares[t]});
        } else {
          if (sfpu > 0) spans->push_back({2, start, sfpu});
          if (pack > 0) spans->push_back({3, stop - pack, pack});
        }
      }
      prev_start = start;
      prev_end = stop;
      prev_share = shares[t];
    }
    if (slot >= 0) packed_[static_cast<size_t>(slot * rows + r)] = prev_end + c.latency;
    end = std::max(end, prev_end + c.latency);
  }
  return end;
}

}  // namespace spatial
