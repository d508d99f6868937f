#include "sim/simulate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "sim/machine/machine.h"
#include "sim/machine/tensor_element.h"
#include "absl/strings/str_format.h"
#include "sim/report/error_stats.h"
#include "sim/report/progress_line.h"
#include "sim/report/svg.h"
#include "sim/report/timeline.h"
#include "sim/report/verdict.h"
#include "sim/vm/fault.h"
#include "sim/vm/vm.h"
#include "spatial/semantics/trip.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// Fold blocks per section: the trip's ceil((value + bias) / per) when its value is known, else -1 (the machine
// then times num_blocks, the most the fold may run).
absl::StatusOr<std::vector<int64_t>> FoldBlocks(const Composition& c, const TensorMap& values,
                                                const TensorMap& inputs) {
  std::vector<int64_t> blocks;
  for (const Section& s : c.sections) {
    if (!s.trip) {
      blocks.push_back(-1);
      continue;
    }
    const Trip& trip = *s.trip;
    if (trip.tensor < 0 || trip.tensor >= static_cast<int>(s.tensors.size()) || trip.per < 1) {
      return vm_internal::FaultStatus(vm_internal::kBadProgram, absl::StrCat("section '", s.name, "'"), "malformed trip");
    }
    std::optional<double> v = TensorElement(s.tensors[trip.tensor], trip.elem, values, inputs);
    if (!v || !std::isfinite(*v)) {
      blocks.push_back(-1);
      continue;
    }
    absl::StatusOr<int64_t> n = RunTripBlocks(trip, s.num_blocks, *v);  // spatial/semantics/trip.h
    if (!n.ok()) {
      return vm_internal::FaultStatus(vm_internal::kTripOutOfRange, absl::StrCat("section '", s.name, "'"),
                                      absl::StrCat(n.status().message(), " (element ", trip.elem, " of tensor '",
                                                   s.tensors[trip.tensor].name, "')"));
    }
    blocks.push_back(*n);
  }
  return blocks;
}

// The whole simulation, in this process. Runs SystemC: callable once per process.
absl::StatusOr<SimResult> SimulateHere(const Composition& c, const Target& target, const TensorMap& inputs,
                                       const SimOptions& options) {
  SimResult result;
  TensorMap values;
  std::vector<proto::OutputError> errors;
  ProgressLine progress(options.progress);
  if (!options.timing_only) {
    // Only the results come back from each run: the inputs are held once, here (a mixture's expert tables are
    // gigabytes a copy, and the comparison runs the VM up to three times).
    VmOptions vo;
    vo.model = options.model;
    vo.results_only = true;
    vo.progress = progress.VmCallback("values");
    ASSIGN_OR_RETURN(values, RunComposition(c, target.tile_rows(), target.tile_cols(), inputs, vo));
    TensorMap exact, given;
    const TensorMap* ref = &values;
    const TensorMap* choice_ref = &values;
    if (options.compare_vm && options.model != nullptr && !options.model->exact()) {
      VmOptions exact_options;
      exact_options.results_only = true;
      exact_options.progress = progress.VmCallback("exact VM");
      ASSIGN_OR_RETURN(exact, RunComposition(c, target.tile_rows(), target.tile_cols(), inputs, exact_options));
      ref = choice_ref = &exact;
      // The machine's choices, where the run makes any: the exact VM once more, following them.
      TensorMap follow;
      for (const SimOptions::Choice& ch : options.choices) {
        auto v = values.find(ch.tensor);
        if (v != values.end()) follow[ch.tensor] = v->second;
      }
      if (!follow.empty()) {
        exact_options.follow = &follow;
        exact_options.progress = progress.VmCallback("exact VM on the machine's choices");
        ASSIGN_OR_RETURN(given, RunComposition(c, target.tile_rows(), target.tile_cols(), inputs, exact_options));
        ref = &given;
      }
    }
    auto choice_of = [&](const std::string& name) -> const SimOptions::Choice* {
      for (const SimOptions::Choice& ch : options.choices) {
        if (ch.tensor == name) return &ch;
      }
      return nullptr;
    };
    const std::map<std::string, double> claimed = LineageTolerances(c);
    for (const Tensor& t : CompositionResults(c)) {
      auto it = values.find(t.name);
      if (it == values.end()) continue;
      result.outputs[t.name] = it->second;
      if (!options.compare_vm) continue;
      auto r = ref->find(t.name);
      if (r == ref->end()) continue;
      auto lineage = claimed.find(t.name);
      const double own = lineage != claimed.end() ? lineage->second : 0.0;
      const bool exact_claim = own == 0;
      auto tol = options.tolerance.find(t.name);
      const double tolerance = tol != options.tolerance.end() ? tol->second : own;
      const SimOptions::Choice* ch = ref != choice_ref ? choice_of(t.name) : nullptr;
      if (ch != nullptr) {
        // A choice against the exact VM's own (never against the run that follows it).
        const TensorData& own = choice_ref->at(t.name);
        auto sim_scores = values.find(ch->scores);
        auto ref_scores = choice_ref->find(ch->scores);
        errors.push_back(sim_scores != values.end() && ref_scores != choice_ref->end()
                             ? CompareChoice(t.name, it->second, own, sim_scores->second, ref_scores->second,
                                             tolerance)
                             : CompareTensor(t.name, it->second, own, tolerance, exact_claim));
        continue;
      }
      proto::OutputError e = CompareTensor(t.name, it->second, r->second, tolerance, exact_claim);
      // Downstream of a choice: the exact run that follows the machine's choices differs here from the free one.
      if (ref != choice_ref) {
        auto free = choice_ref->find(t.name);
        e.set_given_machine_choices(free != choice_ref->end() && free->second.values != r->second.values);
      }
      errors.push_back(std::move(e));
    }
  }
  MachineOptions mo;
  ASSIGN_OR_RETURN(mo.blocks_per_section, FoldBlocks(c, values, inputs));
  mo.values = &values;
  mo.inputs = &inputs;
  mo.record_spans = !options.trace_path.empty() || !options.vcd_path.empty() || !options.svg_path.empty();
  progress.Update("timing on the machine model");
  ASSIGN_OR_RETURN(MachineResult m, RunMachine(c, target, mo));
  result.report = std::move(m.report);
  result.report.set_timing_only(options.timing_only);
  result.report.set_numerics(options.timing_only ? "none"
                             : (options.model == nullptr || options.model->exact()) ? "exact"
                                                                                    : "target");
  for (proto::OutputError& e : errors) *result.report.add_errors() = std::move(e);
  if (!options.trace_path.empty()) RETURN_IF_ERROR(WriteChromeTrace(options.trace_path, m.timeline, m.spans));
  if (!options.vcd_path.empty()) {
    RETURN_IF_ERROR(WriteVcd(options.vcd_path, m.timeline, m.spans, options.vcd_window_cycles));
  }
  *result.report.mutable_verdict() = ComputeVerdict(result.report);
  if (!options.svg_path.empty()) RETURN_IF_ERROR(WriteSvg(options.svg_path, m.timeline, m.spans, result.report));
  return result;
}

proto::SimOutcome ToOutcome(const absl::StatusOr<SimResult>& r) {
  proto::SimOutcome out;
  if (!r.ok()) {
    out.set_status_code(static_cast<int32_t>(r.status().code()));
    out.set_status_message(std::string(r.status().message()));
    return out;
  }
  *out.mutable_report() = r->report;
  for (const auto& [name, t] : r->outputs) {
    proto::SimTensor* st = out.add_outputs();
    st->set_name(name);
    st->set_rows(t.rows);
    st->set_cols(t.cols);
    st->set_precision(static_cast<proto::Precision>(t.precision));
    st->mutable_values()->Add(t.values.begin(), t.values.end());
  }
  return out;
}

absl::StatusOr<SimResult> FromOutcome(const proto::SimOutcome& o) {
  if (o.status_code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(o.status_code()), o.status_message());
  }
  SimResult r;
  r.report = o.report();
  for (const proto::SimTensor& st : o.outputs()) {
    TensorData t;
    t.rows = st.rows();
    t.cols = st.cols();
    t.precision = static_cast<Precision>(st.precision());
    t.values.assign(st.values().begin(), st.values().end());
    r.outputs[st.name()] = std::move(t);
  }
  return r;
}

// The child: simulate, send the outcome, exit without running the parent's atexit handlers or flushing its
// stdio buffers a second time.
[[noreturn]] void RunChild(int fd, const Composition& c, const Target& target, const TensorMap& inputs,
                           const SimOptions& options) {
  proto::SimOutcome outcome;
  try {
    outcome = ToOutcome(SimulateHere(c, target, inputs, options));
  } catch (const std::exception& e) {
    outcome.set_status_code(static_cast<int32_t>(absl::StatusCode::kInternal));
    outcome.set_status_message(absl::StrCat("simulation threw: ", e.what()));
  }
  std::string bytes;
  if (!outcome.SerializeToString(&bytes)) _exit(3);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(4);
    done += static_cast<size_t>(n);
  }
  close(fd);
  _exit(0);
}

}  // namespace

std::map<std::string, double> LineageTolerances(const Composition& c) {
  // One forward pass in section order. A section that re-stores a tensor it also loads keeps what the tensor had
  // (the old values may survive): the largest over every section that stores it.
  std::map<std::string, double> tolerance;
  for (const Section& s : c.sections) {
    double stored = s.claim.exact ? 0.0 : DefaultTolerance(false) * std::max(1.0, s.claim.error_growth);
    for (const Stage& st : s.stages) {
      const auto* load = std::get_if<Load>(&st.op);
      if (!s.claim.exact || load == nullptr) continue;  // an approximate section claims its own
      if (load->tensor < 0 || load->tensor >= static_cast<int>(s.tensors.size())) continue;
      auto it = tolerance.find(s.tensors[load->tensor].name);
      if (it != tolerance.end()) stored = std::max(stored, it->second);
    }
    for (const Stage& st : s.stages) {
      const auto* store = std::get_if<Store>(&st.op);
      if (store != nullptr && store->tensor >= 0 && store->tensor < static_cast<int>(s.tensors.size())) {
        double& t = tolerance[s.tensors[store->tensor].name];
        t = std::max(t, stored);
      }
    }
  }
  return tolerance;
}

bool ExactLineage(const Composition& c, const std::string& name) {
  const std::map<std::string, double> tolerance = LineageTolerances(c);
  auto it = tolerance.find(name);
  return it == tolerance.end() || it->second == 0;
}

absl::StatusOr<SimResult> Simulate(const Composition& c, const Target& target, const TensorMap& inputs,
                                   const SimOptions& options) {
  if (c.tile_rows != target.tile_rows() || c.tile_cols != target.tile_cols()) {
    return absl::InvalidArgumentError(absl::StrCat("composition '", c.name, "' was built for a ", c.tile_rows, "x",
                                                   c.tile_cols, " tile; target '", target.name(), "' has ",
                                                   target.tile_rows(), "x", target.tile_cols()));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  std::fflush(nullptr);  // or the child's exit path could repeat buffered output
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    RunChild(fds[1], c, target, inputs, options);
  }
  close(fds[1]);

  using Clock = std::chrono::steady_clock;
  const bool limited = options.timeout_seconds > 0;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(options.timeout_seconds);
  std::string bytes;
  char buf[1 << 16];
  bool timed_out = false;
  for (;;) {
    int wait_ms = -1;
    if (limited) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline check above ends the loop
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF (or a broken pipe): the child is done
    bytes.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("simulation of '", c.name, "' exceeded its timeout of ",
                                                    options.timeout_seconds, " s and was killed"));
  }
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("simulation of '", c.name, "' crashed: signal ", WTERMSIG(status), " (",
                                            strsignal(WTERMSIG(status)), ")"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("simulation of '", c.name, "' exited with status ",
                                            WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  proto::SimOutcome outcome;
  if (!outcome.ParseFromString(bytes)) {
    return absl::InternalError(absl::StrCat("simulation of '", c.name, "' sent an unreadable result (", bytes.size(),
                                            " bytes)"));
  }
  return FromOutcome(outcome);
}

}  // namespace spatial
