// The program model of DESIGN §3: a Composition is an ordered list of Sections that share tensors by name; a
// Section is one barrier-to-barrier unit of work built from Loads, Stores, Generic and MatmulTiles stages.
//
// Every reference inside a section (a stage's buffers, a load's tensor, an edge) is an index into that section's
// lists. Validation (spatial/validate.h) checks them; nothing here does.
#ifndef SPATIAL_PROGRAM_H_
#define SPATIAL_PROGRAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "spatial/body.h"
#include "spatial/loop_var.h"
#include "spatial/precision.h"

namespace spatial {

using TensorId = int;
using BufferId = int;
using StageId = int;

// (loop var, coefficient)
using Term = std::pair<LoopVar, int64_t>;

// ── Tensors (device memory) ───────────────────────────────────────────────────────────────────────────────────

enum class TensorRole : uint8_t { kInput = 1, kOutput = 2, kParam = 3, kState = 4 };
std::string_view TensorRoleName(TensorRole r);

struct TensorInit {
  enum class Kind : uint8_t { kZero, kConstF, kValues, kFloatValues, kExternal };
  Kind kind = Kind::kZero;
  double const_f = 0.0;
  std::vector<int64_t> values;       // kValues: flat row-major, missing trailing values are zero
  std::vector<double> float_values;  // kFloatValues

  static TensorInit Zero() { return {}; }
  static TensorInit ConstF(double v) { return {Kind::kConstF, v, {}, {}}; }
  static TensorInit Values(std::vector<int64_t> v) { return {Kind::kValues, 0.0, std::move(v), {}}; }
  static TensorInit FloatValues(std::vector<double> v) { return {Kind::kFloatValues, 0.0, {}, std::move(v)}; }
  static TensorInit External() { return {Kind::kExternal, 0.0, {}, {}}; }
  friend bool operator==(const TensorInit&, const TensorInit&) = default;
};

// Tiled layout: element (r, c) is in tile (r / TR) * ceil(cols / TC) + c / TC at in-tile offset
// (r % TR) * TC + c % TC. Tiles past the edge are padded with zeros. Activations are flat 1 x n.
struct ValueDomain {
  double lo = 0;
  double hi = 0;
  friend bool operator==(const ValueDomain&, const ValueDomain&) = default;
};

struct Tensor {
  std::string name;
  TensorRole role = TensorRole::kInput;
  int64_t rows = 1;
  int64_t cols = 1;
  Precision precision = Precision::kBf16;
  TensorInit init;
  // The values a float run input is meant to take, lo < hi, both finite (proto ValueDomain): the op's claims assume
  // them. Set by the lowering where an op's meaning needs it (a gated delta's gates in [0, 1]).
  std::optional<ValueDomain> domain;
  friend bool operator==(const Tensor&, const Tensor&) = default;
};

// ── Buffers (a site's local memory) ───────────────────────────────────────────────────────────────────────────

enum class BufferKind : uint8_t { kBuffer = 1, kScratch = 2 };

// A FIFO of `depth` pages of `page_tiles` tiles. A page is read as a plane of TR rows by W = page_tiles * TC
// columns: flat offset f is row f / W, column f % W; tile k of the page is columns [k*TC, (k+1)*TC).
struct Buffer {
  std::string name;
  int64_t depth = 2;
  int64_t page_tiles = 1;
  Precision precision = Precision::kBf16;
  BufferKind kind = BufferKind::kBuffer;
  friend bool operator==(const Buffer&, const Buffer&) = default;
};

// ── Generic: element maps, iteration space ────────────────────────────────────────────────────────────────────

// Adds stride * v to the offset, v the value of input slot `operand` read through that slot's own map.
// v must satisfy 0 <= v < modulus or the run faults; stride 0 makes the term a pure guard.
struct IndirectTerm {
  int operand = 0;
  int64_t stride = 0;
  int64_t modulus = 1;
  friend bool operator==(const IndirectTerm&, const IndirectTerm&) = default;
};

// A signed flat offset into a page: base + sum(coef * var) [+ stride * v]. A missing term is a broadcast.
struct ElemAccess {
  int64_t base = 0;
  std::vector<Term> terms;
  std::optional<IndirectTerm> indirect;
  friend bool operator==(const ElemAccess&, const ElemAccess&) = default;
};

enum class IterKind : uint8_t { kParallel = 1, kReduceSum = 2, kReduceMax = 3, kReduceArgMax = 4 };
inline bool IsReduce(IterKind k) { return k != IterKind::kParallel; }

struct IterSpec {
  LoopVar var = LoopVar::kCol;
  int64_t extent = 1;
  IterKind kind = IterKind::kParallel;
  friend bool operator==(const IterSpec&, const IterSpec&) = default;
};

// For every point of the iteration space, out[out_map(point)] (pool)= body(point). ins[i] is the map of the
// stage's i-th input buffer. Reduce axes fold with their pool; each execution starts from the pool's identity.
struct Generic {
  std::vector<IterSpec> iters;
  std::vector<ElemAccess> ins;
  ElemAccess out;
  Body body;
};

// The matrix engine's fidelity phases (values match proto/target.proto's Fidelity): a product at kLoFi multiplies
// only the operands' top mantissa bits, once; kHiFi4 all of them in four passes. kDefault: the target's.
enum class MathFidelity : uint8_t { kDefault = 0, kLoFi = 1, kHiFi2 = 2, kHiFi3 = 3, kHiFi4 = 4 };
std::string_view MathFidelityName(MathFidelity f);  // "default", "LoFi", "HiFi2", "HiFi3", "HiFi4"

// C (+)= A · B over tiles: ins = [A, B], outs = [C]. A's page holds m_tiles x k_tiles tiles row-major
// (tile (i, k) at page tile i * k_tiles + k), B's k_tiles x n_tiles (or n_tiles x k_tiles with transpose_b),
// C's m_tiles x n_tiles. With `accumulate` the product adds to C's current page (a carry the prologue wrote).
struct MatmulTiles {
  int64_t m_tiles = 1;
  int64_t n_tiles = 1;
  int64_t k_tiles = 1;
  bool accumulate = false;
  bool transpose_b = false;
  MathFidelity fidelity = MathFidelity::kDefault;
  friend bool operator==(const MatmulTiles&, const MatmulTiles&) = default;
};

// ── Loads and stores: tile addressing ─────────────────────────────────────────────────────────────────────────

// Adds tile_stride * v to a tile address, v read from element 0 of `index` (a buffer among the stage's ins),
// admitted only in the inclusive range [lo, hi] (else the run faults).
struct IndirectTile {
  BufferId index = 0;
  int64_t tile_stride = 0;
  int64_t lo = 0;
  int64_t hi = 0;
  friend bool operator==(const IndirectTile&, const IndirectTile&) = default;
};

// A linear tile index in the tensor's row-major tile grid: base + sum(coef * var) [+ tile_stride * v].
struct TileAddr {
  int64_t base = 0;
  std::vector<Term> steps;
  std::optional<IndirectTile> indirect;
  friend bool operator==(const TileAddr&, const TileAddr&) = default;
};

// block_h x block_w tiles: tile (i, j) of the block is origin + i * stride_h + j * stride_w and lands at page
// tile i * block_w + j.
struct AccessPattern {
  TileAddr origin;
  int64_t block_h = 1;
  int64_t block_w = 1;
  int64_t stride_w = 1;
  int64_t stride_h = 1;
  friend bool operator==(const AccessPattern&, const AccessPattern&) = default;
};

// Copies a block of tiles from a tensor into one page of the stage's out buffer. Loads always execute, so every
// address they can form must be inside the tensor. num_blocks > 1: a body-phase load, once per fold block.
struct Load {
  TensorId tensor = 0;
  AccessPattern pattern;
  int64_t num_blocks = 1;
  // kItemX or kItemY: the block is the same for every item that differs only in that coordinate, so the machine
  // reads it once and multicasts it (DESIGN §3.4). kUnspecified: no multicast. Never changes the meaning; the
  // certifier proves the origin cannot depend on the axis (MULTICAST_VARIES).
  LoopVar multicast = LoopVar::kUnspecified;
  friend bool operator==(const Load&, const Load&) = default;
};

// The mirror of Load: one page of the stage's in buffer into the tensor. Padding past the edge is dropped.
struct Store {
  TensorId tensor = 0;
  AccessPattern pattern;
  friend bool operator==(const Store&, const Store&) = default;
};

// ── Stages ────────────────────────────────────────────────────────────────────────────────────────────────────

enum class Phase : uint8_t { kPrologue = 1, kBody = 2, kEpilogue = 3 };
std::string_view PhaseName(Phase p);

using StageOp = std::variant<Load, Store, Generic, MatmulTiles>;

struct Stage {
  std::string name;
  Phase phase = Phase::kPrologue;
  std::vector<BufferId> ins;
  std::vector<BufferId> outs;
  StageOp op;
  // A body stage run on each item's last `last_blocks` blocks only (0: every block); see RunsOnBlock
  // (spatial/semantics/trip.h) and validate.cc's rule (an in-place compute stage).
  int64_t last_blocks = 0;

  bool is_load() const { return std::holds_alternative<Load>(op); }
  bool is_store() const { return std::holds_alternative<Store>(op); }
  bool is_generic() const { return std::holds_alternative<Generic>(op); }
  bool is_matmul() const { return std::holds_alternative<MatmulTiles>(op); }
};
std::string_view StageKindName(const Stage& s);  // "Load", "Store", "Generic", "MatmulTiles"

// A page flows from `from` to `to` through `buffer`.
struct Edge {
  StageId from = 0;
  BufferId buffer = 0;
  StageId to = 0;
  friend bool operator==(const Edge&, const Edge&) = default;
};

// ── Work, fold, claims ────────────────────────────────────────────────────────────────────────────────────────

struct TileRect {
  int64_t row0_t = 0;
  int64_t col0_t = 0;
  int64_t h_t = 1;
  int64_t w_t = 1;
  friend bool operator==(const TileRect&, const TileRect&) = default;
};

// Running an item binds ITEM_Y = y and ITEM_X = x for load/store addresses. `out` is the item's output
// rectangle in tiles of the section's result.
struct WorkItem {
  int64_t id = 0;
  int64_t y = 0;
  int64_t x = 0;
  TileRect out;
  // The fold blocks this item runs (proto WorkItem.blocks; spatial/semantics/trip.h ItemBlocks); -1: the section's.
  int64_t blocks = -1;
  friend bool operator==(const WorkItem&, const WorkItem&) = default;
};

// ceil((value + bias) / per) fold blocks, value = flat element `elem` of `tensor`, checked lo <= value <= hi.
struct Trip {
  TensorId tensor = 0;
  int64_t elem = 0;
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t bias = 0;
  int64_t per = 1;
  friend bool operator==(const Trip&, const Trip&) = default;
};

// The seed's BlockPlan: a hint for placement and timing, never a change of meaning.
struct BlockPlan {
  int64_t per_site_m = 1;
  int64_t per_site_n = 1;
  int64_t grid_y = 1;
  int64_t grid_x = 1;
  int64_t num_blocks = 1;
  int64_t block_k_tiles = 1;
  int64_t osh = 1;
  int64_t osw = 1;
  int64_t ibw = 1;
  bool pack_accumulate = false;
  bool pack_row_sums = false;  // proto BlockPlan.pack_row_sums
  bool stream_rows = false;    // proto BlockPlan.stream_rows
  friend bool operator==(const BlockPlan&, const BlockPlan&) = default;
};

// Exact: integer arithmetic on integers or pure data movement. Approx: float arithmetic that rounds where the
// datapath rounds; the reference is f64.
struct NumericsClaim {
  bool exact = false;
  std::string reason;
  // Approx only: the stored values may carry this many times the default relative error (proto NumericsClaim); 0 or
  // 1: the default.
  double error_growth = 0;
  static NumericsClaim Exact() { return {true, "", 0}; }
  static NumericsClaim Approx(std::string why, double error_growth = 0) {
    return {false, std::move(why), error_growth};
  }
  friend bool operator==(const NumericsClaim&, const NumericsClaim&) = default;
};

struct Section {
  std::string name;
  std::vector<Tensor> tensors;
  std::vector<Buffer> buffers;
  std::vector<Stage> stages;
  std::vector<Edge> edges;
  std::vector<WorkItem> items;
  int64_t num_blocks = 1;  // the fold's static block count; with a trip, the most it may run
  std::optional<Trip> trip;
  std::optional<BlockPlan> plan;
  NumericsClaim claim;
  Precision acc_precision = Precision::kFp32;

  // Index of the tensor/buffer/stage with this name, or -1.
  int FindTensor(std::string_view name) const;
  int FindBuffer(std::string_view name) const;
  int FindStage(std::string_view name) const;
  bool has_fold() const { return num_blocks > 1 || trip.has_value(); }
};

enum class StateAccess : uint8_t { kRead = 1, kWrite = 2 };

// One declared access to a State tensor: section `section` reads or writes `tensor`.
struct StateStep {
  std::string tensor;
  int section = 0;
  StateAccess access = StateAccess::kRead;
  friend bool operator==(const StateStep&, const StateStep&) = default;
};

// Sections run in order; section i+1 starts after section i has finished everywhere. Sections share tensors by
// name. `state_order` declares, per State tensor, the order of its reads and writes across sections.
struct Composition {
  std::string name;
  std::vector<Section> sections;
  std::vector<StateStep> state_order;
  // The target it was lowered for and that target's tile shape (page planes and tiling depend on it).
  std::string target;
  int64_t tile_rows = 32;
  int64_t tile_cols = 32;
};

// A composition of one section, named after it, with its state order declared.
Composition Single(Section s);

// Declares the state order the section list implies: for every State tensor, in section order, a READ for each
// section that loads it and then a WRITE for each that stores it. Replaces `c.state_order`.
void DeclareStateOrder(Composition& c);

}  // namespace spatial

#endif  // SPATIAL_PROGRAM_H_
