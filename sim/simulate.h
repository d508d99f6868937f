// The simulation entry point (DESIGN §8): one call simulates a composition on a target and returns its outputs
// and a report. Tests and the CLI use this one entry.
//
// Each call runs in its own forked child process: SystemC elaborates once per process, so the parent never
// creates SystemC objects and one binary can simulate any number of programs. The child sends the result back over
// a pipe (proto::SimOutcome); a crash, a non-zero exit or the timeout becomes an error in the parent.
//
// Values come from the VM (sim/vm/vm.h) run with the options' ValueModel: the VM and the model define the meaning,
// the machine (sim/machine) only times it. timing_only skips values (a trip count is then read from the inputs or
// the tensor's init, else the fold's maximum is timed).
#ifndef SIM_SIMULATE_H_
#define SIM_SIMULATE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/report.pb.h"
#include "sim/vm/value_model.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial {

struct SimOptions {
  bool timing_only = false;
  // Also run the exact f64 VM and report, per output, max abs / max rel / relative L2 error next to the
  // tolerance (report.errors). Ignored with timing_only.
  bool compare_vm = false;
  std::string trace_path;  // Chrome-trace JSON of every engine's stage invocations; empty: none
  std::string vcd_path;    // VCD of engine busy wires; empty: none
  std::string svg_path;    // an SVG of per-site engine occupancy and per-section cycles; empty: none
  // Print a progress line (one that updates in place) to stderr while the run is long: the VM's section and
  // item, then the timing run. For terminals; callers decide (the CLI: stderr is a terminal and not --quiet).
  bool progress = false;
  int64_t vcd_window_cycles = 0;  // the VCD covers [0, window); 0: the whole run
  const ValueModel* model = nullptr;  // numerics; nullptr = exact f64
  // Relative-L2 tolerance per output for compare_vm; missing outputs get their claims' (LineageTolerances:
  // sim/report/error_stats.h's 0 for Exact, 2^-5 for Approx, times an Approx claim's error_growth).
  std::map<std::string, double> tolerance;
  // ★ A DISCRETE CHOICE IS COMPARED AS ONE: a mixture's routing picks the largest scores, and where two are nearly
  // tied the machine's rounding may pick either. Each `tensor` (T x n weights, 0 where not chosen) chosen by the
  // largest of `scores` (T x n, in the choice's order) is compared with compare_vm's exact VM by CompareChoice
  // (sim/report/error_stats.h), and every other output with the exact VM run on the machine's values of these
  // tensors (VmOptions.follow): what follows a choice is checked given the choice the machine made.
  struct Choice {
    std::string tensor;
    std::string scores;
  };
  std::vector<Choice> choices;
  int timeout_seconds = 600;  // <= 0: none
};

struct SimResult {
  TensorMap outputs;  // every Output and State tensor of the composition (empty with timing_only)
  proto::SimReport report;
};

// The relative-L2 tolerance compare_vm holds each stored tensor to, from the claims on its way from the run's inputs:
// what an approximate section stores, DefaultTolerance(false) times its claim's error_growth (at least 1); what an
// exact section stores, the largest of what it loads (an exact relayout of an approximate attention output is
// approximate, and keeps its allowance); 0 when every section on the way is exact. Inputs, Params and anything no
// section stores are absent (exact).
std::map<std::string, double> LineageTolerances(const Composition& c);
// Whether tensor `name`'s values are exact functions of the run's inputs (its LineageTolerances entry is 0 or absent).
bool ExactLineage(const Composition& c, const std::string& name);

// Errors: the VM's faults unchanged (their message starts with the fault's code); "Deadlock: ..." when the FIFO
// protocol cannot progress; DeadlineExceeded on timeout; Internal when the simulation process dies.
absl::StatusOr<SimResult> Simulate(const Composition& c, const Target& target, const TensorMap& inputs,
                                   const SimOptions& options = {});

}  // namespace spatial

#endif  // SIM_SIMULATE_H_
