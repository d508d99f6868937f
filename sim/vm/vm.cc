// The VM driver: unifies tensors by name, checks every id and size of the composition before running anything
// (a hostile program gets an error, never a crash), then runs sections, items, phases and stages in order.
#include "sim/vm/vm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/vm/exact_model.h"
#include "sim/vm/fault.h"
#include "sim/vm/generic_kernel.h"
#include "sim/vm/run_state.h"
#include "sim/vm/tile_ops.h"
#include "spatial/semantics/trip.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

using vm_internal::BufferState;
using vm_internal::Bindings;
using vm_internal::Fault;
using vm_internal::FaultStatus;
using vm_internal::GenericKernel;
using vm_internal::TensorValue;
using vm_internal::TileShape;
namespace vi = vm_internal;

// Caps that keep a hostile program from exhausting memory or time. Real programs are far below them: the largest
// weight of a 70B model is ~2^28 elements; the work cap is a few minutes of VM time (the tile kernels run ~2.4e9
// element operations a second on one core of this project's machine; Qwen3-8B's 2048-row prefill is 2.7e11).
constexpr int64_t kMaxTileSide = 4096;
constexpr double kMaxTileElems = double{1 << 20};
constexpr double kMaxTensorElems = double{int64_t{1} << 31};  // all tensors of a run together (16 GiB of f64)
constexpr double kMaxPageElems = double{1 << 24};
constexpr double kMaxBufferElems = double{1 << 27};  // all pages of one section (current + spare)
constexpr double kMaxWork = 1e12;                    // element operations of a whole run

std::string Where(const Section& s) { return absl::StrCat("section '", s.name, "'"); }
std::string Where(const Section& s, int stage) {
  return absl::StrCat("section '", s.name, "' stage '", s.stages[stage].name, "' (#", stage, ")");
}
std::string Where(const Section& s, int64_t item, int stage) {
  return absl::StrCat("section '", s.name, "' item ", item, " stage '", s.stages[stage].name, "' (#", stage, ")");
}

struct CompiledStage {
  std::optional<GenericKernel> kernel;  // Generic only
  int tensor = -1;                      // Load/Store: the unified tensor
  int index_buffer = -1;                // Load/Store with an indirect origin
  double cost = 1.0;                    // element operations of one execution
  std::vector<const double*> in_pages;  // Generic: scratch for the slot pointers
};

struct CompiledSection {
  const Section* s = nullptr;
  std::vector<int> tensor;  // section tensor id -> unified tensor
  std::vector<CompiledStage> stages;
  std::vector<int> phase[3];      // stage ids of prologue, body, epilogue, in list order
  std::vector<int> state_reads;   // unified State tensors the section loads
  std::vector<int> state_writes;  // unified State tensors the section stores
  std::vector<int> loaded, stored;  // unified tensors the section loads / stores
  double phase_cost[3] = {0, 0, 0};
  // Items may run in parallel: no tensor is both loaded and stored, so no item can read what another writes.
  bool parallel = false;
};

// What an item's run mutates: the section's pages and its compiled stages' scratch. Sequential runs use the
// runner's own; each parallel worker has copies.
struct Worker {
  std::vector<BufferState>* buffers = nullptr;
  std::vector<CompiledStage>* stages = nullptr;
  std::vector<BufferState> own_buffers;
  std::vector<CompiledStage> own_stages;
};

class Runner {
 public:
  Runner(const Composition& c, TileShape tile, const ValueModel& model, const VmOptions& options)
      : c_(c), tile_(tile), model_(model), progress_(options.progress), follow_(options.follow),
        results_only_(options.results_only), threads_(ThreadsOf(options)) {}

  static int64_t ThreadsOf(const VmOptions& o) {
    if (o.threads > 0) return o.threads;
    return std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  }

  absl::StatusOr<TensorMap> Run(const TensorMap& inputs) {
    RETURN_IF_ERROR(UnifyTensors());
    RETURN_IF_ERROR(InitTensors(inputs));
    for (const Section& s : c_.sections) {
      sections_.emplace_back();
      RETURN_IF_ERROR(CompileSection(s, sections_.back()));
    }
    writes_done_.assign(tensors_.size(), 0);
    for (size_t i = 0; i < sections_.size(); ++i) {
      RETURN_IF_ERROR(RunSection(static_cast<int>(i)));
      RETURN_IF_ERROR(Follow(c_.sections[i]));
    }
    TensorMap out;
    for (TensorValue& t : tensors_) {
      const TensorRole role = t.decl->role;
      if (results_only_ && role != TensorRole::kOutput && role != TensorRole::kState) continue;
      TensorData d;
      d.rows = t.rows;
      d.cols = t.cols;
      d.precision = t.decl->precision;
      if (t.borrowed != nullptr) {
        d.values.assign(t.borrowed, t.borrowed + t.rows * t.cols);
      } else {
        d.values = std::move(t.values);
      }
      out.emplace(t.decl->name, std::move(d));
    }
    return out;
  }

 private:
  // ── Tensors ──

  absl::Status UnifyTensors() {
    double total = 0;
    for (const Section& s : c_.sections) {
      for (const Tensor& t : s.tensors) {
        auto [it, fresh] = by_name_.emplace(t.name, static_cast<int>(tensors_.size()));
        if (!fresh) {
          const Tensor& first = *tensors_[it->second].decl;
          if (first.rows != t.rows || first.cols != t.cols) {
            return FaultStatus(vi::kBadProgram, Where(s),
                               absl::StrCat("tensor '", t.name, "' is ", t.rows, "x", t.cols,
                                            " here but was declared ", first.rows, "x", first.cols));
          }
          continue;
        }
        // Each side is bounded so that every size and tile computation on it stays far inside int64.
        constexpr int64_t kMaxSide = int64_t{1} << 40;
        if (t.rows < 0 || t.cols < 0 || t.rows > kMaxSide || t.cols > kMaxSide) {
          return FaultStatus(vi::kBadProgram, Where(s),
                             absl::StrCat("tensor '", t.name, "' has shape ", t.rows, "x", t.cols));
        }
        total += static_cast<double>(t.rows) * static_cast<double>(t.cols);
        if (total > kMaxTensorElems) {
          return FaultStatus(vi::kTooLarge, Where(s),
                             absl::StrFormat("tensors up to '%s' hold %.3g elements; the VM holds at most %.3g",
                                             t.name, total, kMaxTensorElems));
        }
        TensorValue v;
        v.decl = &t;
        v.rows = t.rows;
        v.cols = t.cols;
        v.rows_t = (t.rows + tile_.rows - 1) / tile_.rows;
        v.cols_t = (t.cols + tile_.cols - 1) / tile_.cols;
        tensors_.push_back(std::move(v));
      }
    }
    return absl::OkStatus();
  }

  // Whether `x` (rows of `cols`) is already what storing it at precision `p` leaves (always, in exact f64): checked
  // whole rows at a time (StoreRoundRows), so the check holds no copy of a large table.
  bool AtPrecision(Precision p, const std::vector<double>& x, int64_t cols) const {
    if (model_.exact()) return true;
    std::vector<double> chunk;
    const size_t step = static_cast<size_t>(std::max<int64_t>(1, 4096 / std::max<int64_t>(1, cols)) * cols);
    for (size_t i = 0; i < x.size(); i += step) {
      const size_t n = std::min<size_t>(step, x.size() - i);
      chunk.assign(x.begin() + static_cast<std::ptrdiff_t>(i), x.begin() + static_cast<std::ptrdiff_t>(i + n));
      model_.StoreRoundRows(p, chunk.data(), static_cast<int64_t>(n) / cols, cols);
      for (size_t j = 0; j < n; ++j) {
        // Bitwise: a NaN stays itself, and -0 is not +0.
        if (std::memcmp(&chunk[j], &x[i + j], sizeof(double)) != 0) return false;
      }
    }
    return true;
  }

  absl::Status InitTensors(const TensorMap& inputs) {
    // The tensors some section stores: never read in place (a store writes them).
    std::set<std::string> stored;
    for (const Section& s : c_.sections) {
      for (const Stage& st : s.stages) {
        const auto* sd = std::get_if<Store>(&st.op);
        if (sd != nullptr && sd->tensor >= 0 && sd->tensor < static_cast<int>(s.tensors.size())) {
          stored.insert(s.tensors[static_cast<size_t>(sd->tensor)].name);
        }
      }
    }
    for (const auto& [name, data] : inputs) {
      auto it = by_name_.find(name);
      std::string who = absl::StrCat("tensor '", name, "'");
      if (it == by_name_.end()) {
        return FaultStatus(vi::kBadInput, who, absl::StrCat("not a tensor of composition '", c_.name, "'"));
      }
      const Tensor& t = *tensors_[it->second].decl;
      if (!IsRunInput(t)) {
        return FaultStatus(vi::kBadInput, who,
                           absl::StrCat("is ", std::string(TensorRoleName(t.role)),
                                        ": its values come from its init, not from the run's inputs"));
      }
    }
    for (TensorValue& v : tensors_) {
      const Tensor& t = *v.decl;
      const size_t n = static_cast<size_t>(v.rows * v.cols);
      std::string who = absl::StrCat("tensor '", t.name, "'");
      if (IsRunInput(t)) {
        auto it = inputs.find(t.name);
        if (it == inputs.end()) {
          return FaultStatus(vi::kBadInput, who,
                             absl::StrCat("missing (a run input of ", v.rows, "x", v.cols, ")"));
        }
        const TensorData& d = it->second;
        if (d.rows != v.rows || d.cols != v.cols) {
          return FaultStatus(vi::kBadInput, who,
                             absl::StrCat("expected ", v.rows, "x", v.cols, ", got ", d.rows, "x", d.cols));
        }
        if (d.values.size() != n) {
          return FaultStatus(vi::kBadInput, who,
                             absl::StrCat(d.values.size(), " values for ", v.rows, "x", v.cols, " (", n, ")"));
        }
        if (!stored.count(t.name) && AtPrecision(t.precision, d.values, v.cols)) {
          v.borrowed = d.values.data();
          continue;
        }
        v.values = d.values;
      } else {
        v.values.assign(n, 0.0);
        const TensorInit& init = t.init;
        switch (init.kind) {
          case TensorInit::Kind::kConstF: std::fill(v.values.begin(), v.values.end(), init.const_f); break;
          case TensorInit::Kind::kValues:
            if (init.values.size() > n) {
              return FaultStatus(vi::kBadProgram, who,
                                 absl::StrCat(init.values.size(), " init values for ", v.rows, "x", v.cols));
            }
            for (size_t i = 0; i < init.values.size(); ++i) v.values[i] = static_cast<double>(init.values[i]);
            break;
          case TensorInit::Kind::kFloatValues:
            if (init.float_values.size() > n) {
              return FaultStatus(vi::kBadProgram, who,
                                 absl::StrCat(init.float_values.size(), " init values for ", v.rows, "x", v.cols));
            }
            std::copy(init.float_values.begin(), init.float_values.end(), v.values.begin());
            break;
          default: break;  // Zero (External is a run input, above)
        }
      }
      model_.StoreRoundRows(t.precision, v.values.data(), v.rows, v.cols);
    }
    return absl::OkStatus();
  }

  // ── Compilation: every id, size and map is checked here, before anything runs ──

  absl::Status CompileSection(const Section& s, CompiledSection& cs) {
    cs.s = &s;
    for (const Tensor& t : s.tensors) cs.tensor.push_back(by_name_.at(t.name));
    const int nb = static_cast<int>(s.buffers.size());
    double buffer_elems = 0;
    for (const Buffer& b : s.buffers) {
      const double elems = static_cast<double>(tile_.rows) * static_cast<double>(b.page_tiles) * tile_.cols;
      if (b.page_tiles < 1 || elems > kMaxPageElems) {
        return FaultStatus(vi::kBadProgram, Where(s),
                           absl::StrCat("buffer '", b.name, "' has ", b.page_tiles, " tiles per page"));
      }
      buffer_elems += 2 * elems;
    }
    if (buffer_elems > kMaxBufferElems) {
      return FaultStatus(vi::kTooLarge, Where(s),
                         absl::StrFormat("its buffers hold %.3g elements; the VM holds at most %.3g", buffer_elems,
                                         kMaxBufferElems));
    }
    if (s.num_blocks < 0) {
      return FaultStatus(vi::kBadProgram, Where(s), absl::StrCat("num_blocks is ", s.num_blocks));
    }
    if (s.trip) {
      const Trip& tr = *s.trip;
      if (tr.tensor < 0 || tr.tensor >= static_cast<int>(s.tensors.size())) {
        return FaultStatus(vi::kBadProgram, Where(s), absl::StrCat("trip tensor id ", tr.tensor, " out of range"));
      }
      const TensorValue& t = tensors_[cs.tensor[tr.tensor]];
      if (tr.elem < 0 || tr.elem >= t.rows * t.cols) {
        return FaultStatus(vi::kBadProgram, Where(s),
                           absl::StrCat("trip element ", tr.elem, " outside tensor '", t.decl->name, "' (",
                                        t.rows * t.cols, " elements)"));
      }
      if (tr.per <= 0) return FaultStatus(vi::kBadProgram, Where(s), absl::StrCat("trip per is ", tr.per));
    }
    auto buffer_ok = [nb](BufferId b) { return b >= 0 && b < nb; };
    auto page_tiles = [&s](BufferId b) { return s.buffers[b].page_tiles; };
    for (int si = 0; si < static_cast<int>(s.stages.size()); ++si) {
      const Stage& st = s.stages[si];
      auto bad = [&](std::string what) { return FaultStatus(vi::kBadProgram, Where(s, si), what); };
      int ph = static_cast<int>(st.phase) - 1;
      if (ph < 0 || ph > 2) return bad(absl::StrCat("unknown phase ", ph + 1));
      for (BufferId b : st.ins) {
        if (!buffer_ok(b)) return bad(absl::StrCat("input buffer id ", b, " out of range (", nb, " buffers)"));
      }
      for (BufferId b : st.outs) {
        if (!buffer_ok(b)) return bad(absl::StrCat("output buffer id ", b, " out of range (", nb, " buffers)"));
      }
      CompiledStage c;
      auto tile_access = [&](TensorId tid, const AccessPattern& p, BufferId page_buf) -> absl::Status {
        if (tid < 0 || tid >= static_cast<int>(s.tensors.size())) {
          return bad(absl::StrCat("tensor id ", tid, " out of range (", s.tensors.size(), " tensors)"));
        }
        c.tensor = cs.tensor[tid];
        if (p.block_h < 0 || p.block_w < 0) return bad(absl::StrCat("block ", p.block_h, "x", p.block_w));
        const double tiles = static_cast<double>(p.block_h) * static_cast<double>(p.block_w);
        if (tiles > static_cast<double>(page_tiles(page_buf))) {
          return bad(absl::StrCat("a block of ", p.block_h, "x", p.block_w, " tiles does not fit a page of buffer '",
                                  s.buffers[page_buf].name, "' (", page_tiles(page_buf), " tiles)"));
        }
        if (p.origin.indirect) {
          c.index_buffer = p.origin.indirect->index;
          if (!buffer_ok(c.index_buffer)) {
            return bad(absl::StrCat("index buffer id ", c.index_buffer, " out of range (", nb, " buffers)"));
          }
        }
        c.cost = 1 + tiles * tile_.rows * tile_.cols + static_cast<double>(s.buffers[page_buf].page_tiles) *
                                                          tile_.rows * tile_.cols;
        return absl::OkStatus();
      };
      if (const auto* l = std::get_if<Load>(&st.op)) {
        if (st.outs.size() != 1) return bad(absl::StrCat("a Load has 1 output buffer, not ", st.outs.size()));
        RETURN_IF_ERROR(tile_access(l->tensor, l->pattern, st.outs[0]));
        if (s.tensors[l->tensor].role == TensorRole::kState) cs.state_reads.push_back(c.tensor);
        cs.loaded.push_back(c.tensor);
      } else if (const auto* w = std::get_if<Store>(&st.op)) {
        if (st.ins.empty()) return bad("a Store has no input buffer");
        RETURN_IF_ERROR(tile_access(w->tensor, w->pattern, st.ins[0]));
        if (s.tensors[w->tensor].role == TensorRole::kState) cs.state_writes.push_back(c.tensor);
        cs.stored.push_back(c.tensor);
      } else if (const auto* g = std::get_if<Generic>(&st.op)) {
        if (st.outs.size() != 1) return bad(absl::StrCat("a Generic has 1 output buffer, not ", st.outs.size()));
        std::vector<int64_t> sizes;
        for (BufferId b : st.ins) sizes.push_back(tile_.rows * page_tiles(b) * tile_.cols);
        const int64_t out_size = tile_.rows * page_tiles(st.outs[0]) * tile_.cols;
        auto k = GenericKernel::Compile(*g, std::move(sizes), out_size, tile_.rows, tile_.cols);
        if (!k.ok()) return bad(std::string(k.status().message()));
        c.cost = 1 + k->cost() + static_cast<double>(out_size);
        c.in_pages.resize(st.ins.size());
        c.kernel.emplace(std::move(*k));
      } else if (const auto* mm = std::get_if<MatmulTiles>(&st.op)) {
        if (st.ins.size() != 2 || st.outs.size() != 1) {
          return bad(absl::StrCat("MatmulTiles reads [A, B] and writes [C], not ", st.ins.size(), " inputs and ",
                                  st.outs.size(), " outputs"));
        }
        if (tile_.rows != tile_.cols) {
          return bad(absl::StrCat("MatmulTiles needs square tiles, not ", tile_.rows, "x", tile_.cols));
        }
        if (mm->m_tiles < 0 || mm->n_tiles < 0 || mm->k_tiles < 0) {
          return bad(absl::StrCat("MatmulTiles of ", mm->m_tiles, "x", mm->n_tiles, "x", mm->k_tiles, " tiles"));
        }
        const double m = mm->m_tiles, n = mm->n_tiles, k = mm->k_tiles;
        const std::pair<double, BufferId> need[] = {{m * k, st.ins[0]}, {k * n, st.ins[1]}, {m * n, st.outs[0]}};
        for (const auto& [tiles, b] : need) {
          if (tiles > static_cast<double>(page_tiles(b))) {
            return bad(absl::StrFormat("MatmulTiles %dx%dx%d needs %.0f tiles of buffer '%s' (pages of %d)",
                                       mm->m_tiles, mm->n_tiles, mm->k_tiles, tiles, s.buffers[b].name,
                                       page_tiles(b)));
          }
        }
        const double t = static_cast<double>(tile_.rows);
        c.cost = 1 + m * n * k * t * t * t + static_cast<double>(page_tiles(st.outs[0])) * t * t;
      } else {
        return bad("unknown stage kind");
      }
      cs.phase_cost[ph] += c.cost;
      cs.phase[ph].push_back(si);
      cs.stages.push_back(std::move(c));
    }
    cs.parallel = std::none_of(cs.stored.begin(), cs.stored.end(), [&](int t) {
      return std::find(cs.loaded.begin(), cs.loaded.end(), t) != cs.loaded.end();
    });
    return absl::OkStatus();
  }

  // ── Running ──

  // The given values of every followed tensor `s` stores, in place of what it computed (VmOptions::follow).
  absl::Status Follow(const Section& s) {
    if (follow_ == nullptr) return absl::OkStatus();
    for (const Stage& st : s.stages) {
      const auto* store = std::get_if<Store>(&st.op);
      if (store == nullptr || store->tensor < 0 || store->tensor >= static_cast<int>(s.tensors.size())) continue;
      const std::string& name = s.tensors[store->tensor].name;
      auto given = follow_->find(name);
      auto at = by_name_.find(name);
      if (given == follow_->end() || at == by_name_.end()) continue;
      TensorValue& t = tensors_[at->second];
      if (given->second.values.size() != t.values.size()) {
        return FaultStatus(vi::kBadProgram, Where(s),
                           absl::StrCat("the followed values of tensor '", name, "' are ", given->second.values.size(),
                                        " elements; it has ", t.values.size()));
      }
      t.values = given->second.values;
    }
    return absl::OkStatus();
  }

  absl::Status CheckStateOrder(int si) {
    const CompiledSection& cs = sections_[si];
    if (c_.state_order.empty()) return absl::OkStatus();
    for (int g : cs.state_reads) {
      const std::string& name = tensors_[g].decl->name;
      int64_t declared = 0;
      bool found = false;
      for (const StateStep& step : c_.state_order) {
        if (step.tensor != name) continue;
        if (step.section == si && step.access == StateAccess::kRead) {
          found = true;
          break;
        }
        if (step.access == StateAccess::kWrite) ++declared;
      }
      if (!found) {
        return FaultStatus(vi::kStaleStateRead, "",
                           absl::StrCat("section '", cs.s->name, "' reads state '", name,
                                        "' but the state order declares no such read"));
      }
      if (writes_done_[g] != declared) {
        return FaultStatus(vi::kStaleStateRead, "",
                           absl::StrCat("section '", cs.s->name, "' reads state '", name, "' after ",
                                        writes_done_[g], " of its ", declared, " declared earlier writes"));
      }
    }
    return absl::OkStatus();
  }

  // The fold's block count: static, or read from the trip tensor as it is when the section starts.
  absl::StatusOr<int64_t> Blocks(const CompiledSection& cs) {
    const Section& s = *cs.s;
    if (!s.trip) return s.num_blocks;
    const Trip& tr = *s.trip;
    const TensorValue& t = tensors_[cs.tensor[tr.tensor]];
    const double v = t.data()[tr.elem];
    const std::string elem = absl::StrCat(" (element ", tr.elem, " of tensor '", t.decl->name, "')");
    absl::StatusOr<int64_t> blocks = RunTripBlocks(tr, s.num_blocks, v);  // spatial/semantics/trip.h
    if (!blocks.ok()) return FaultStatus(vi::kTripOutOfRange, Where(s), std::string(blocks.status().message()) + elem);
    return *blocks;
  }

  absl::Status RunSection(int si) {
    CompiledSection& cs = sections_[si];
    const Section& s = *cs.s;
    RETURN_IF_ERROR(CheckStateOrder(si));
    ASSIGN_OR_RETURN(const int64_t nb, Blocks(cs));
    const double cost = static_cast<double>(s.items.size()) *
                        (1 + static_cast<double>(s.buffers.size()) + cs.phase_cost[0] +
                         static_cast<double>(nb) * (1 + cs.phase_cost[1]) + cs.phase_cost[2]);
    work_ += cost;
    if (work_ > kMaxWork) {
      return FaultStatus(vi::kTooLarge, Where(s),
                         absl::StrFormat("the run would take %.3g element operations (%d items, %d blocks); the VM "
                                         "refuses more than %.0e",
                                         work_, s.items.size(), nb, kMaxWork));
    }
    const int64_t items = static_cast<int64_t>(s.items.size());
    const int64_t threads = std::min<int64_t>(threads_, items);
    bool ran = false;
    if (cs.parallel && threads > 1) {
      bool conflict = false;
      RETURN_IF_ERROR(RunItemsInParallel(si, nb, threads, conflict));
      // Two items wrote one tile: the program breaks item independence, and only the sequential order defines
      // which write stands. No item read another's (nothing stored is loaded), so running again in order gives
      // exactly the sequential result.
      ran = !conflict;
    }
    if (!ran) {
      Worker w{&buffers_, &cs.stages, {}, {}};
      ResetBuffers(s, buffers_);
      for (int64_t item = 0; item < items; ++item) {
        if (progress_) progress_(si, static_cast<int>(sections_.size()), item, items);
        RETURN_IF_ERROR(RunItem(cs, w, item, nb, nullptr));
      }
    }
    // A section that stores a State tensor completes one declared WRITE step of it (DeclareStateOrder).
    std::vector<int> writes = cs.state_writes;
    std::sort(writes.begin(), writes.end());
    writes.erase(std::unique(writes.begin(), writes.end()), writes.end());
    for (int g : writes) ++writes_done_[g];
    return absl::OkStatus();
  }

  void ResetBuffers(const Section& s, std::vector<BufferState>& buffers) const {
    buffers.clear();
    buffers.resize(s.buffers.size());
    for (size_t b = 0; b < s.buffers.size(); ++b) {
      BufferState& st = buffers[b];
      st.decl = &s.buffers[b];
      st.width = st.decl->page_tiles * tile_.cols;
      st.size = tile_.rows * st.width;
      st.page.assign(static_cast<size_t>(st.size), 0.0);
      st.spare.assign(static_cast<size_t>(st.size), 0.0);
    }
  }

  // Item `item`'s prologue, its body blocks of the section's nb (ItemBlocks) and its epilogue, on worker w.
  absl::Status RunItem(CompiledSection& cs, Worker& w, int64_t item, int64_t nb,
                       std::vector<std::unique_ptr<vi::StoreClaims>>* claims) {
    const Section& s = *cs.s;
    for (BufferState& b : *w.buffers) b.written = false;
    Bindings vars{s.items[item].y, s.items[item].x, 0};
    for (int stage : cs.phase[0]) RETURN_IF_ERROR(RunStage(cs, w, item, stage, vars, claims));
    const int64_t blocks = ItemBlocks(s.items[item], nb);  // spatial/semantics/trip.h
    for (int64_t block = 0; block < blocks; ++block) {
      vars.kblock = block;
      for (int stage : cs.phase[1]) {
        if (RunsOnBlock(s.stages[stage], blocks, block)) RETURN_IF_ERROR(RunStage(cs, w, item, stage, vars, claims));
      }
    }
    vars.kblock = 0;
    for (int stage : cs.phase[2]) RETURN_IF_ERROR(RunStage(cs, w, item, stage, vars, claims));
    return absl::OkStatus();
  }

  // ★ ITEMS ARE INDEPENDENT, SO THEY RUN ON EVERY CORE WITH THE SAME BITS. Worker t runs items t, t + T, ... (a
  // causal section's heavy and light items interleave), each on its own pages and stage scratch; every element is
  // computed exactly as in order. A fault is the lowest faulting item's, as the ordered run would report. Sets
  // `conflict` when two items stored one tile.
  absl::Status RunItemsInParallel(int si, int64_t nb, int64_t threads, bool& conflict) {
    CompiledSection& cs = sections_[si];
    const Section& s = *cs.s;
    const int64_t items = static_cast<int64_t>(s.items.size());
    std::vector<std::unique_ptr<vi::StoreClaims>> claims(tensors_.size());
    for (int t : cs.stored) {
      if (claims[t]) continue;
      claims[t] = std::make_unique<vi::StoreClaims>();
      const auto n = static_cast<size_t>(tensors_[t].num_tiles());
      claims[t]->owner = std::make_unique<std::atomic<int64_t>[]>(n);
      for (size_t e = 0; e < n; ++e) claims[t]->owner[e].store(-1, std::memory_order_relaxed);
    }
    std::vector<Worker> workers(static_cast<size_t>(threads));
    std::vector<absl::Status> faults(static_cast<size_t>(threads));
    std::vector<int64_t> fault_item(static_cast<size_t>(threads), items);
    auto work = [&](int64_t t) {
      Worker& w = workers[static_cast<size_t>(t)];
      ResetBuffers(s, w.own_buffers);
      w.own_stages = cs.stages;
      w.buffers = &w.own_buffers;
      w.stages = &w.own_stages;
      for (int64_t item = t; item < items; item += threads) {
        if (t == 0 && progress_) progress_(si, static_cast<int>(sections_.size()), item, items);
        absl::Status st = RunItem(cs, w, item, nb, &claims);
        if (!st.ok()) {
          faults[static_cast<size_t>(t)] = std::move(st);
          fault_item[static_cast<size_t>(t)] = item;
          return;
        }
      }
    };
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (std::thread& th : pool) th.join();
    const auto first = std::min_element(fault_item.begin(), fault_item.end());
    if (*first < items) return faults[static_cast<size_t>(first - fault_item.begin())];
    conflict = std::any_of(claims.begin(), claims.end(), [](const auto& c) { return c && c->conflict.load(); });
    return absl::OkStatus();
  }

  absl::Status Unwritten(const CompiledSection& cs, int64_t item, int stage, BufferId b, const char* role) {
    return FaultStatus(vi::kUnwrittenBuffer, Where(*cs.s, item, stage),
                       absl::StrCat(role, " buffer '", cs.s->buffers[b].name,
                                    "' is read before any stage of this item wrote it"));
  }

  absl::Status RunStage(CompiledSection& cs, Worker& w, int64_t item, int stage, const Bindings& vars,
                        std::vector<std::unique_ptr<vi::StoreClaims>>* claims) {
    const Stage& st = cs.s->stages[stage];
    CompiledStage& c = (*w.stages)[stage];
    std::vector<BufferState>& pages = *w.buffers;  // this worker's pages
    for (BufferId b : st.ins) {
      if (!pages[b].written) return Unwritten(cs, item, stage, b, "input");
    }
    const BufferState* index = nullptr;
    if (c.index_buffer >= 0) {
      if (!pages[c.index_buffer].written) return Unwritten(cs, item, stage, c.index_buffer, "index");
      index = &pages[c.index_buffer];
    }
    Fault fault;
    bool ok = true;
    if (const auto* l = std::get_if<Load>(&st.op)) {
      ok = vi::RunLoad(*l, tensors_[c.tensor], pages[st.outs[0]], index, vars, tile_, model_, fault);
    } else if (const auto* sto = std::get_if<Store>(&st.op)) {
      ok = vi::RunStore(*sto, tensors_[c.tensor], pages[st.ins[0]], index, vars, tile_, model_, fault,
                        claims != nullptr ? (*claims)[c.tensor].get() : nullptr, item);
    } else if (std::holds_alternative<Generic>(st.op)) {
      for (size_t i = 0; i < st.ins.size(); ++i) c.in_pages[i] = pages[st.ins[i]].page.data();
      BufferState& out = pages[st.outs[0]];
      std::fill(out.spare.begin(), out.spare.end(), 0.0);
      ok = c.kernel->Run(c.in_pages.data(), out.spare.data(), model_, cs.s->acc_precision, fault);
      if (ok) {
        model_.StoreRound(out.decl->precision, out.spare.data(), out.size);
        out.Commit();
      }
    } else if (const auto* mm = std::get_if<MatmulTiles>(&st.op)) {
      BufferState& out = pages[st.outs[0]];
      if (mm->accumulate && !out.written) return Unwritten(cs, item, stage, st.outs[0], "accumulator");
      vi::RunMatmul(*mm, pages[st.ins[0]], pages[st.ins[1]], out, tile_, model_, cs.s->acc_precision);
    }
    if (!ok) return FaultStatus(fault, Where(*cs.s, item, stage));
    return absl::OkStatus();
  }

  const Composition& c_;
  const TileShape tile_;
  const ValueModel& model_;
  const std::function<void(int, int, int64_t, int64_t)>& progress_;
  const TensorMap* follow_;
  const bool results_only_;
  std::map<std::string, int> by_name_;
  std::vector<TensorValue> tensors_;
  std::vector<CompiledSection> sections_;
  std::vector<int64_t> writes_done_;
  std::vector<BufferState> buffers_;
  const int64_t threads_;
  double work_ = 0;
};

}  // namespace

absl::StatusOr<TensorMap> RunComposition(const Composition& c, int64_t tile_rows, int64_t tile_cols,
                                         const TensorMap& inputs, const VmOptions& options) {
  if (tile_rows < 1 || tile_cols < 1 || tile_rows > kMaxTileSide || tile_cols > kMaxTileSide ||
      static_cast<double>(tile_rows) * static_cast<double>(tile_cols) > kMaxTileElems) {
    return vi::FaultStatus(vi::kBadProgram, "", absl::StrCat("tile shape ", tile_rows, "x", tile_cols));
  }
  const ValueModel& model = options.model != nullptr ? *options.model : ExactModel();
  Runner runner(c, TileShape{tile_rows, tile_cols}, model, options);
  return runner.Run(inputs);
}

}  // namespace spatial
