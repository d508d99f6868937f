// What one stage invocation costs on a target (DESIGN §8 "Timing"), from the target's cost table alone. No
// SystemC here: the machine asks these numbers, the report's roofline reuses them.
//
//  - Load / Store: bytes = block tiles x the tensor's tile bytes, moved over the DRAM channels the tiles are
//    interleaved on (tile t on channel t mod channels, as tt-metal's interleaved buffers) and the site's NoC link.
//  - MatmulTiles: m*n*k tile products x the matrix engine's cycles at the stage's fidelity (else the target's),
//    computed a Dst sub-block (the plan's osh x osw) at a time: per K tile both unpackers feed osh A and osw B
//    tiles at once (capped by the shared L1 port); an accumulating product first reloads its partials into Dst
//    (unless the plan packs with L1 accumulation); one Dst hand-off per sub-block. Where the target holds the
//    reused operand in pairs (Costs.matmul_held_pairs, Wormhole), the math waits per pair and K tile for the
//    pair's second tile and the first streamed one.
//  - Generic: per work tile (iteration points / tile elements): the FPU's eltwise costs when the body is only
//    Add/Sub/Mul/Min/Max (a Mul costs one pass per fidelity phase; a body with no arithmetic is a datacopy at
//    the add cost), otherwise the SFPU: each Unary at costs.sfpu for its kind and the target's approx mode
//    (ExpAccurate at EXP's non-approx cost, ExpFast at its approx cost), every other op at sfpu_op_per_tile but the
//    Add/Sub/Mul inside a transform's argument, which the FPU computes into Dst first (its eltwise costs), and a
//    constant factor directly under the fast exp, which it folds into its own constant (free); an
//    elementwise SFPU stage is charged only the faces (tile quarters) its output touches (VectorMode::C for a column
//    of per-row values). A reduction adds one FPU pass per work tile (reductions run on the FPU).
//    A CONTRACTION — ROW x COL outputs, K reduced by Sum, the body a product of a (ROW, K) and a (K, COL) operand
//    under constant factors and `pred ? x : 0` guards — is a matrix product and costs what MatmulTiles costs for its
//    tile products (plus an eltwise pass per factor and an SFPU row per tile of the smaller operand per guard).
//  - A row sum right after the elementwise stage that writes its input, where the plan says so
//    (BlockPlan.pack_row_sums, tt-metal SDPA's packer L1 accumulation): no unpack and no math of its own; its
//    producer packs its page twice.
//  - Compute stages pipeline unpack -> math -> pack per tile (the three TRISC threads of a Tensix): an
//    invocation takes max(unpack, math, pack) + the other two spread over its tiles + the pipeline latency. Where
//    the plan says stream_rows, the machine instead overlaps the section's compute stages a row group at a time on
//    the three threads' calendars (row_stream.h); the costs here are the same.
#ifndef SIM_MACHINE_STAGE_COST_H_
#define SIM_MACHINE_STAGE_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The engine-sequencer a stage runs on: a site's reader kernel issues its Loads in program order, the compute
// kernel its Generic and MatmulTiles stages, the writer kernel its Stores.
enum class EngineThread : uint8_t { kReader = 0, kCompute = 1, kWriter = 2 };
inline constexpr int kNumEngineThreads = 3;

// Which sequencer runs a stage: Loads the reader, Stores the writer, the rest compute. A Tensix has two
// data-movement cores, each on its own NoC; tt-metal's multicast matmul reads in0 on one (its reader kernel) and
// in1 on the other, beside the output writes (its writer kernel). So a Load multicast along ITEM_Y (B's block,
// shared by a column of sites) runs on the writer sequencer, and the two operand streams overlap.
EngineThread EngineThreadOf(const Stage& s);

struct ComputeCost {
  double unpack = 0;  // cycles of the unpacker (bytes / unpack bandwidth)
  double fpu = 0;     // matrix engine (FPU) cycles
  double sfpu = 0;    // vector engine cycles
  double pack = 0;    // cycles of the packer
  double latency = 0; // issue to result, once per invocation
  int64_t tiles = 1;  // pipeline granularity
  double flops = 0;

  // unpack, math (fpu then sfpu: one math thread drives both) and pack overlap tile by tile.
  double Duration() const;
};

struct StageCost {
  EngineThread thread = EngineThread::kCompute;
  ComputeCost compute;      // kCompute
  int64_t tile_bytes = 0;   // kReader / kWriter: bytes of one tile of the tensor
  int64_t tiles = 0;        // kReader / kWriter: tiles per invocation
};

// The target's numbers the machine uses, checked once.
struct MachineParams {
  double clock_hz = 1e9;
  int64_t grid_y = 1;
  int64_t grid_x = 1;
  int64_t channels = 1;
  double channel_bytes_per_cycle = 0;  // dram.bytes_per_second * efficiency / channels / clock
  double dram_latency = 0;
  double link_bytes_per_cycle = 0;
  double hop_cycles = 0;
  double niu_cycles = 0;
  double matmul_cycles = 0;            // per tile product at `fidelity`
  std::string fidelity;                // "LoFi", "HiFi2", "HiFi3", "HiFi4"
  int fidelity_phases = 4;
  // DRAM channels sit on the grid's west (x = -1) and east (x = grid_x) edges, alternating, spread along y.
  std::vector<int64_t> channel_y;
  std::vector<int64_t> channel_x;

  double dram_bytes_per_cycle() const { return channel_bytes_per_cycle * static_cast<double>(channels); }
  // Router hops from channel c to site (y, x): the Manhattan distance.
  int64_t Hops(int64_t c, int64_t y, int64_t x) const;
  // Latency of a transfer between channel c and site (y, x): DRAM + hops + an NIU at each end.
  double Latency(int64_t c, int64_t y, int64_t x) const {
    return dram_latency + static_cast<double>(Hops(c, y, x)) * hop_cycles + 2 * niu_cycles;
  }
};

inline constexpr int64_t kMaxSites = 1024;

// Fails on a target whose clock, grid, DRAM or NoC numbers cannot time a program (zero or negative).
absl::StatusOr<MachineParams> DeriveParams(const Target& target);

// Never fails on a structurally valid stage; ids are checked by the caller.
StageCost CostOf(const Section& section, const Stage& stage, const Target& target, const MachineParams& params);

}  // namespace spatial

#endif  // SIM_MACHINE_STAGE_COST_H_
