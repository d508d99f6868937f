#include "sim/machine/stage_cost.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "spatial/semantics/affine.h"
#include "spatial/semantics/contraction.h"
#include "targets/matmul_step.h"

namespace spatial {
namespace {

// Saturating product of extents: a hostile program's iteration space must not overflow into a negative cost.
int64_t SatMul(int64_t a, int64_t b) {
  constexpr int64_t kMax = int64_t{1} << 52;
  if (a <= 0 || b <= 0) return 0;
  if (a > kMax / b) return kMax;
  return a * b;
}

int64_t CeilDivPos(int64_t a, int64_t b) { return b <= 0 ? a : (a + b - 1) / b; }

struct BodyCounts {
  int64_t add_like = 0;  // Add, Sub, Min, Max
  int64_t mul = 0;
  int64_t other = 0;     // FloorDiv, Shr, Select
  std::vector<SfpuKind> unary;
  // The FPU's prelude to a transform: Add/Sub and Mul nodes inside a Unary's argument whose whole subtree is
  // Add/Sub/Mul of operands and constants.
  int64_t prelude_add = 0;
  int64_t prelude_mul = 0;
};

// Whether `n` is Add/Sub/Mul of operands and constants all the way down (what the FPU computes into Dst).
bool FpuArithmetic(const BodyNode* n, std::unordered_map<const BodyNode*, bool>& memo) {
  if (n == nullptr) return true;
  if (auto it = memo.find(n); it != memo.end()) return it->second;
  bool ok = false;
  switch (n->op) {
    case BodyOp::kOperand:
    case BodyOp::kConst: ok = true; break;
    case BodyOp::kAdd:
    case BodyOp::kSub:
    case BodyOp::kMul: ok = FpuArithmetic(n->a.get(), memo) && FpuArithmetic(n->b.get(), memo); break;
    default: ok = false; break;
  }
  memo[n] = ok;
  return ok;
}

// Counts each distinct node once: a shared subtree is computed once and reused from a register. ★ THE FPU FEEDS
// THE SFPU: arithmetic inside a transform's argument that the FPU can do (Add/Sub/Mul of operands and constants) is
// the eltwise binary that writes Dst before the transform runs in place — tt-metal's sub_tiles_bcast_cols before
// exp_tile (ttnn sdpa compute_common.hpp, sub_exp_block_bcast_cols_inplace) — so it is counted as the prelude, not
// as SFPU instructions. Everything else beside a transform runs on the SFPU.
BodyCounts CountBody(const Body& body) {
  BodyCounts c;
  std::unordered_set<const BodyNode*> seen;
  std::unordered_map<const BodyNode*, bool> fpu;
  std::vector<std::pair<const BodyNode*, bool>> stack;  // (node, under a transform)
  if (body.defined()) stack.push_back({body.get(), false});
  while (!stack.empty()) {
    const auto [n, under] = stack.back();
    stack.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    const bool prelude = under && FpuArithmetic(n, fpu);
    switch (n->op) {
      case BodyOp::kAdd:
      case BodyOp::kSub:
        ++(prelude ? c.prelude_add : c.add_like);
        break;
      case BodyOp::kMin:
      case BodyOp::kMax:
        ++c.add_like;
        break;
      case BodyOp::kMul:
        ++(prelude ? c.prelude_mul : c.mul);
        break;
      case BodyOp::kFloorDiv:
      case BodyOp::kShr:
      case BodyOp::kSelect:
        ++c.other;
        break;
      case BodyOp::kUnary:
        c.unary.push_back(n->sfpu);
        // ★ THE FAST EXP TAKES ITS SCALE FOR FREE: e^(c * x) by the fast exp folds c into Schraudolph's constant
        // (tt-llk _init_exponential_<.., FAST_APPROX, scale>: A_scaled = A * scale), so a constant factor directly
        // under it costs nothing — tt-metal's SDPA computes its probabilities so (exp_tile_init<true, true,
        // scale_fp32>). The other exps multiply on the datapath (SCALE_EN: one more instruction a row).
        if (n->sfpu.op == SfpuOp::kExpFast && n->a.defined() && n->a->op == BodyOp::kMul) {
          const BodyNode* m = n->a.get();
          const bool const_a = m->a.defined() && m->a->op == BodyOp::kConst;
          const bool const_b = m->b.defined() && m->b->op == BodyOp::kConst;
          if ((const_a || const_b) && seen.insert(m).second) {
            const Body& x = const_b ? m->a : m->b;
            if (x.defined()) stack.push_back({x.get(), true});
            continue;
          }
        }
        break;
      case BodyOp::kOperand:
      case BodyOp::kConst:
        break;
    }
    for (const Body* child : {&n->a, &n->b, &n->c}) {
      if (child->defined()) stack.push_back({child->get(), under || n->op == BodyOp::kUnary});
    }
  }
  return c;
}

double SfpuCycles(const Target& target, const SfpuKind& k) {
  const auto& costs = target.proto().costs();
  // ExpAccurate runs the target's exp in its accurate mode whatever the approx mode: costed as EXP, approx false;
  // ExpFast its fast approximate exp: EXP, approx true.
  const bool accurate_exp = k.op == SfpuOp::kExpAccurate;
  const bool fast_exp = k.op == SfpuOp::kExpFast;
  const bool approx = fast_exp || (!accurate_exp && target.proto().numerics().approx_mode());
  const int kind = static_cast<int>(accurate_exp || fast_exp ? SfpuOp::kExp : k.op);
  std::optional<double> other_mode;
  for (const auto& e : costs.sfpu()) {
    if (static_cast<int>(e.kind()) != kind) continue;
    if (e.approx() == approx) return e.cycles_per_tile();
    if (!other_mode) other_mode = e.cycles_per_tile();
  }
  // A kind the table misses in this mode costs what it has in the other mode, else one instruction row.
  return other_mode.value_or(costs.sfpu_op_per_tile());
}

int64_t BufferTileBytes(const Section& s, BufferId b, const Target& target) {
  if (b < 0 || b >= static_cast<int>(s.buffers.size())) return 0;
  return target.tile_bytes(s.buffers[b].precision);
}

int64_t BufferPageTiles(const Section& s, BufferId b) {
  if (b < 0 || b >= static_cast<int>(s.buffers.size())) return 1;
  return std::max<int64_t>(1, s.buffers[b].page_tiles);
}

// The Dst sub-block a MatmulTiles page is computed in: the section plan's (tt-metal's out_subblock_h/w) when it
// describes this product, else tt-metal's own choice (ttnn matmul's SUBBLOCK_HW_CHOICES): the most tiles that divide
// the page and fit half of Dst, the squarest of those, the taller of two — so both unpackers feed as few tiles per
// product as the page allows (a 1-row page keeps one row of the widest width).
std::pair<int64_t, int64_t> SubBlockOf(const Section& s, const MatmulTiles& mm, const Target& target) {
  if (s.plan && s.plan->per_site_m == mm.m_tiles && s.plan->per_site_n == mm.n_tiles && s.plan->osh >= 1 &&
      s.plan->osw >= 1 && mm.m_tiles % s.plan->osh == 0 && mm.n_tiles % s.plan->osw == 0) {
    return {s.plan->osh, s.plan->osw};
  }
  const int64_t cap = std::max<int64_t>(1, target.effective_acc_tiles(s.acc_precision, false));
  std::pair<int64_t, int64_t> best{1, 1};
  auto better = [](std::pair<int64_t, int64_t> a, std::pair<int64_t, int64_t> b) {
    if (a.first * a.second != b.first * b.second) return a.first * a.second > b.first * b.second;
    const int64_t da = std::llabs(a.first - a.second), db = std::llabs(b.first - b.second);
    return da != db ? da < db : a.first > b.first;
  };
  for (int64_t h = 1; h <= std::min(cap, mm.m_tiles); ++h) {
    if (mm.m_tiles % h != 0) continue;
    for (int64_t w = 1; h * w <= cap && w <= mm.n_tiles; ++w) {
      if (mm.n_tiles % w == 0 && better({h, w}, best)) best = {h, w};
    }
  }
  return best;
}

// tt-metal's matmul_block, sub-block by sub-block (bmm_large_block_zm compute kernel): for each osh x osw
// sub-block of C, an accumulating product first reloads the sub-block's partial sums from local memory into Dst
// (unpack + a datacopy pass), unless the plan packs with L1 accumulation (packer_l1_acc); then for each of the
// k_tiles the unpackers feed osh A tiles (SrcA) and osw B tiles (SrcB) at once, and the FPU runs osh * osw tile
// products at the fidelity; the packer writes the sub-block out while the next one computes (Dst halves), one
// Dst hand-off per sub-block.
ComputeCost MatmulCost(const Section& s, const Stage& st, const MatmulTiles& mm, const Target& target) {
  const auto& costs = target.proto().costs();
  ComputeCost c;
  const int64_t m = std::max<int64_t>(0, mm.m_tiles), n = std::max<int64_t>(0, mm.n_tiles),
                k = std::max<int64_t>(0, mm.k_tiles);
  const int64_t products = SatMul(SatMul(m, n), k);
  const BufferId a = st.ins.size() > 0 ? st.ins[0] : -1;
  const BufferId b = st.ins.size() > 1 ? st.ins[1] : -1;
  const BufferId out = st.outs.empty() ? -1 : st.outs[0];
  const auto [osh, osw] = SubBlockOf(s, mm, target);
  const int64_t subblocks = SatMul(CeilDivPos(m, osh), CeilDivPos(n, osw));
  const double ta = static_cast<double>(BufferTileBytes(s, a, target)),
               tb = static_cast<double>(BufferTileBytes(s, b, target)),
               tout = static_cast<double>(BufferTileBytes(s, out, target));
  const bool reload = mm.accumulate && !(s.plan && s.plan->pack_accumulate);
  const double out_tiles = static_cast<double>(SatMul(m, n));
  const double per_step = static_cast<double>(subblocks) * static_cast<double>(k);
  const MatmulStep step = MatmulSubBlockStep(
      target, osh, osw, ta, tb, target.matmul_cycles(static_cast<proto::Fidelity>(mm.fidelity)));
  c.fpu = per_step * step.math;  // SubBlockOf's sub-blocks divide the page: subblocks * osh * osw = m * n
  if (reload) c.fpu += out_tiles * costs.eltwise_add_per_tile();  // the partials' datacopy into Dst
  c.unpack = per_step * step.unpack;
  if (reload && costs.unpack_bytes_per_cycle() > 0) c.unpack += out_tiles * tout / costs.unpack_bytes_per_cycle();
  if (costs.pack_bytes_per_cycle() > 0) c.pack = out_tiles * tout / costs.pack_bytes_per_cycle();
  c.latency = costs.pipeline_latency() + static_cast<double>(subblocks) * costs.dst_sync_cycles();
  c.tiles = std::max<int64_t>(1, subblocks);
  c.flops = 2.0 * static_cast<double>(products) * static_cast<double>(target.tile_rows()) *
            static_cast<double>(target.tile_cols()) * static_cast<double>(target.tile_cols());
  return c;
}

// ── A contraction on the matrix engine ──
// Which Generics are contractions is decided by spatial/semantics/contraction.h, which the VM's numerics read too.
// The matrix engine runs one as ceil(R/tr) x ceil(C/tc) x ceil(K/tc) tile products at the target's fidelity, as
// MatmulTiles costs them (tt-metal's matmul_tiles), not point by point on the eltwise path. A peeled constant
// factor costs one eltwise multiply pass over the output tiles; a guard one SFPU instruction row per tile of the
// smaller operand (masking either operand zeroes the product).
std::optional<ComputeCost> ContractionCost(const Section& s, const Stage& st, const Generic& g, const Target& target,
                                           const MachineParams& p) {
  const std::optional<Contraction> con = RecognizeContraction(g, static_cast<int>(st.ins.size()));
  if (!con) return std::nullopt;
  const double factors = static_cast<double>(con->factors.size()), guards = static_cast<double>(con->guards.size());
  const int64_t rows = con->rows, cols = con->cols, k = con->k;
  const auto& costs = target.proto().costs();
  const int64_t tr = std::max<int64_t>(1, target.tile_rows()), tc = std::max<int64_t>(1, target.tile_cols());
  const int64_t mt = CeilDivPos(rows, tr), nt = CeilDivPos(cols, tc), kt = CeilDivPos(k, tc);
  const int64_t products = SatMul(SatMul(mt, nt), kt);
  const int64_t a_tiles = SatMul(mt, kt), b_tiles = SatMul(CeilDivPos(k, tr), nt), out_tiles = SatMul(mt, nt);
  ComputeCost c;
  c.fpu = static_cast<double>(products) * p.matmul_cycles +
          factors * static_cast<double>(out_tiles) * p.fidelity_phases * costs.eltwise_mul_per_tile();
  c.sfpu = guards * static_cast<double>(std::min(a_tiles, b_tiles)) * costs.sfpu_op_per_tile();
  // Unpack: the A and B tiles, and one tile of every other input (a guard's per-row bound).
  double in_bytes = static_cast<double>(a_tiles) * BufferTileBytes(s, st.ins[con->a], target) +
                    static_cast<double>(b_tiles) * BufferTileBytes(s, st.ins[con->b], target);
  std::vector<BufferId> seen{st.ins[con->a], st.ins[con->b]};
  for (BufferId b : st.ins) {
    if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
    seen.push_back(b);
    in_bytes += BufferTileBytes(s, b, target);
  }
  const BufferId out = st.outs.empty() ? -1 : st.outs[0];
  const double out_bytes = static_cast<double>(out_tiles) * BufferTileBytes(s, out, target);
  if (costs.unpack_bytes_per_cycle() > 0) c.unpack = in_bytes / costs.unpack_bytes_per_cycle();
  if (costs.pack_bytes_per_cycle() > 0) c.pack = out_bytes / costs.pack_bytes_per_cycle();
  c.latency = costs.pipeline_latency();
  c.tiles = std::max<int64_t>(1, products);
  c.flops = 2.0 * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(k) +
            (factors + guards) * static_cast<double>(rows) * static_cast<double>(cols);
  return c;
}

// The output tiles' faces an elementwise stage writes, in units of whole tiles: the SFPU runs a tile a face (a
// quarter, 16 x 16 on Tensix) at a time and skips the faces no output point falls in — tt-metal's VectorMode::C
// for a column of per-row values (ttnn sdpa compute_common.hpp runs the running statistics' max and reciprocal on
// faces 0 and 2 only). nullopt for a reduction (its work is over its inputs), an odd tile, an indirect out map or a
// space too large to enumerate: the caller then charges whole work tiles.
std::optional<double> SfpuFaceTiles(const Section& s, const Stage& st, const Generic& g, const Target& target) {
  const int64_t tr = target.tile_rows(), tc = target.tile_cols();
  if (tr < 2 || tc < 2 || tr % 2 != 0 || tc % 2 != 0 || g.out.indirect || st.outs.empty()) return std::nullopt;
  int64_t points = 1;
  std::array<int64_t, 3> extent{1, 1, 1};
  for (const IterSpec& it : g.iters) {
    if (IsReduce(it.kind)) return std::nullopt;
    const std::optional<AddrVar> v = AddrVarOf(it.var);
    if (!v || *v < AddrVar::kRow || *v > AddrVar::kK || it.extent < 1) return std::nullopt;
    extent[static_cast<int>(*v) - static_cast<int>(AddrVar::kRow)] = it.extent;
    points = SatMul(points, it.extent);
  }
  if (points > (int64_t{1} << 16)) return std::nullopt;
  // A page is one tile row tall: an offset is (row, column) of a tr x w plane.
  const int64_t w = BufferPageTiles(s, st.outs[0]) * tc;
  const AffineForm form = ElemForm(g.out);
  AddrEnv<Wide> env = ZeroEnv<Wide>();
  std::unordered_set<int64_t> faces;
  for (int64_t r = 0; r < extent[0]; ++r) {
    for (int64_t c = 0; c < extent[1]; ++c) {
      for (int64_t k = 0; k < extent[2]; ++k) {
        env[static_cast<int>(AddrVar::kRow)] = r;
        env[static_cast<int>(AddrVar::kCol)] = c;
        env[static_cast<int>(AddrVar::kK)] = k;
        const int64_t off = std::max<int64_t>(0, static_cast<int64_t>(Evaluate(form, env)));
        const int64_t row = (off / w) % tr, col = off % w;
        faces.insert((col / tc) * 4 + row / (tr / 2) * 2 + (col % tc) / (tc / 2));
      }
    }
  }
  return static_cast<double>(faces.size()) / 4.0;
}

ComputeCost GenericCost(const Section& s, const Stage& st, const Generic& g, const Target& target,
                        const MachineParams& p) {
  const auto& costs = target.proto().costs();
  ComputeCost c;
  if (std::optional<ComputeCost> mm = ContractionCost(s, st, g, target, p)) return *mm;
  int64_t points = 1, out_points = 1;
  bool reduce = false;
  for (const IterSpec& it : g.iters) {
    points = SatMul(points, std::max<int64_t>(0, it.extent));
    if (IsReduce(it.kind)) {
      reduce = true;
    } else {
      out_points = SatMul(out_points, std::max<int64_t>(0, it.extent));
    }
  }
  const int64_t elems = std::max<int64_t>(1, target.tile_elems());
  const int64_t work_tiles = CeilDivPos(points, elems);
  const int64_t out_tiles = CeilDivPos(out_points, elems);
  const double wt = static_cast<double>(work_tiles);
  const BodyCounts bc = CountBody(g.body);
  const bool fpu_only = bc.unary.empty() && bc.other == 0;
  if (fpu_only) {
    const int64_t passes = bc.add_like + bc.mul;
    c.fpu = wt * (static_cast<double>(bc.add_like) * costs.eltwise_add_per_tile() +
                  static_cast<double>(bc.mul) * p.fidelity_phases * costs.eltwise_mul_per_tile());
    // No arithmetic at all: a datacopy (or fill) through the FPU, one pass.
    if (passes == 0) c.fpu = wt * costs.eltwise_add_per_tile();
  } else {
    double per_tile = static_cast<double>(bc.add_like + bc.mul + bc.other) * costs.sfpu_op_per_tile();
    for (const SfpuKind& k : bc.unary) per_tile += SfpuCycles(target, k);
    const std::optional<double> face_tiles = SfpuFaceTiles(s, st, g, target);
    c.sfpu = (face_tiles ? std::min(wt, *face_tiles) : wt) * per_tile;
    c.fpu = wt * (static_cast<double>(bc.prelude_add) * costs.eltwise_add_per_tile() +
                  static_cast<double>(bc.prelude_mul) * p.fidelity_phases * costs.eltwise_mul_per_tile());
  }
  if (reduce) c.fpu += wt * costs.eltwise_add_per_tile();
  // Unpack: each distinct input buffer's tiles, at most a page of them (a broadcast reads one tile).
  double in_bytes = 0;
  std::vector<BufferId> seen;
  for (BufferId b : st.ins) {
    if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
    seen.push_back(b);
    in_bytes += static_cast<double>(std::min(BufferPageTiles(s, b), std::max<int64_t>(1, work_tiles))) *
                BufferTileBytes(s, b, target);
  }
  const BufferId out = st.outs.empty() ? -1 : st.outs[0];
  const double out_bytes =
      static_cast<double>(std::min(BufferPageTiles(s, out), std::max<int64_t>(1, out_tiles))) *
      BufferTileBytes(s, out, target);
  if (costs.unpack_bytes_per_cycle() > 0) c.unpack = in_bytes / costs.unpack_bytes_per_cycle();
  if (costs.pack_bytes_per_cycle() > 0) c.pack = out_bytes / costs.pack_bytes_per_cycle();
  c.latency = costs.pipeline_latency();
  c.tiles = std::max<int64_t>(1, work_tiles);
  const int64_t ops = bc.add_like + bc.mul + bc.other + bc.prelude_add + bc.prelude_mul +
                      static_cast<int64_t>(bc.unary.size()) + (reduce ? 1 : 0);
  c.flops = static_cast<double>(points) * static_cast<double>(ops);
  return c;
}

// ★ THE ROW SUM IN THE PACKER (BlockPlan.pack_row_sums). Stage i is such a sum when the plan says so, it is a
// Generic summing its slot 0 over one reduced axis (its other inputs broadcast: the scaler), and stage i - 1, in the
// same phase, is the elementwise Generic that writes slot 0's buffer over as many points: the packer packs those Dst
// tiles a second time into the sums with L1 accumulation (tt-metal's sub_exp_block_bcast_cols,
// compute_streaming.hpp). The sum then costs no unpack and no math, and its producer packs twice.
bool PackedRowSum(const Section& s, size_t i) {
  if (!s.plan || !s.plan->pack_row_sums || i == 0 || i >= s.stages.size()) return false;
  const Stage& st = s.stages[i];
  const Stage& prod = s.stages[i - 1];
  const auto* g = std::get_if<Generic>(&st.op);
  const auto* pg = std::get_if<Generic>(&prod.op);
  if (!g || !pg || st.phase != prod.phase || st.last_blocks != prod.last_blocks || st.ins.empty() ||
      prod.outs.empty() || st.ins[0] != prod.outs[0]) {
    return false;
  }
  int sums = 0;
  int64_t points = 1, prod_points = 1;
  for (const IterSpec& it : g->iters) {
    if (IsReduce(it.kind) && it.kind != IterKind::kReduceSum) return false;
    sums += it.kind == IterKind::kReduceSum;
    points = SatMul(points, std::max<int64_t>(0, it.extent));
  }
  for (const IterSpec& it : pg->iters) {
    if (IsReduce(it.kind)) return false;
    prod_points = SatMul(prod_points, std::max<int64_t>(0, it.extent));
  }
  return sums == 1 && points == prod_points && g->body.defined() && g->body->op == BodyOp::kOperand &&
         g->body->operand == 0;
}

}  // namespace

double ComputeCost::Duration() const {
  const double math = fpu + sfpu;
  const double longest = std::max({unpack, math, pack});
  const double rest = unpack + math + pack - longest;
  return longest + rest / static_cast<double>(std::max<int64_t>(1, tiles)) + latency;
}

int64_t MachineParams::Hops(int64_t c, int64_t y, int64_t x) const {
  if (c < 0 || c >= static_cast<int64_t>(channel_y.size())) return 0;
  return std::llabs(channel_y[c] - y) + std::llabs(channel_x[c] - x);
}

absl::StatusOr<MachineParams> DeriveParams(const Target& target) {
  const auto& t = target.proto();
  MachineParams p;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("target '", target.name(), "' cannot be simulated: ", what));
  };
  if (!(t.clock_hz() > 0)) return bad("clock_hz must be positive");
  if (target.grid_y() < 1 || target.grid_x() < 1) return bad("the grid must have at least one site");
  if (target.tile_rows() < 1 || target.tile_cols() < 1) return bad("the tile shape must be positive");
  // Three sequencer threads per site: a grid beyond this is not a chip this model was built for.
  if (target.sites() > kMaxSites) return bad(absl::StrCat("more than ", kMaxSites, " sites"));
  if (t.dram().channels() < 1 || t.dram().channels() > 4096) return bad("dram.channels must be in [1, 4096]");
  if (!(t.dram().bytes_per_second() > 0)) return bad("dram.bytes_per_second must be positive");
  if (!(t.noc().link_bytes_per_cycle() > 0)) return bad("noc.link_bytes_per_cycle must be positive");
  p.clock_hz = t.clock_hz();
  p.grid_y = target.grid_y();
  p.grid_x = target.grid_x();
  p.channels = t.dram().channels();
  // An unset efficiency means the peak is what is sustained.
  const double eff = t.dram().efficiency() > 0 ? t.dram().efficiency() : 1.0;
  p.channel_bytes_per_cycle = t.dram().bytes_per_second() * eff / static_cast<double>(p.channels) / p.clock_hz;
  p.dram_latency = std::max(0.0, t.dram().latency_cycles());
  p.link_bytes_per_cycle = t.noc().link_bytes_per_cycle();
  p.hop_cycles = std::max(0.0, t.noc().hop_cycles());
  p.niu_cycles = std::max(0.0, t.noc().niu_cycles());
  // The default fidelity (unspecified: HiFi4, the accurate default of tt-metal's compute kernels); its enum value
  // is its number of phases.
  const proto::Fidelity fidelity = target.matmul_fidelity();
  p.fidelity = std::string(MathFidelityName(static_cast<MathFidelity>(fidelity)));
  p.fidelity_phases = static_cast<int>(fidelity);
  p.matmul_cycles = target.matmul_cycles();
  const int64_t west = (p.channels + 1) / 2, east = p.channels / 2;
  for (int64_t c = 0; c < p.channels; ++c) {
    const bool on_west = c % 2 == 0;
    const int64_t idx = c / 2, per_side = on_west ? west : east;
    // Spread the side's channels evenly along y: channel idx at the middle of its share of the rows.
    p.channel_y.push_back(std::min(p.grid_y - 1, (2 * idx + 1) * p.grid_y / (2 * std::max<int64_t>(1, per_side))));
    p.channel_x.push_back(on_west ? -1 : p.grid_x);
  }
  return p;
}

EngineThread EngineThreadOf(const Stage& s) {
  if (const auto* ld = std::get_if<Load>(&s.op)) {
    return ld->multicast == LoopVar::kItemY ? EngineThread::kWriter : EngineThread::kReader;
  }
  if (s.is_store()) return EngineThread::kWriter;
  return EngineThread::kCompute;
}

StageCost CostOf(const Section& section, const Stage& stage, const Target& target, const MachineParams& params) {
  StageCost c;
  if (const auto* ld = std::get_if<Load>(&stage.op)) {
    c.thread = EngineThreadOf(stage);
    const auto& pat = ld->pattern;
    c.tiles = SatMul(std::max<int64_t>(0, pat.block_h), std::max<int64_t>(0, pat.block_w));
    if (ld->tensor >= 0 && ld->tensor < static_cast<int>(section.tensors.size())) {
      c.tile_bytes = target.tile_bytes(section.tensors[ld->tensor].precision);
    }
  } else if (const auto* stor = std::get_if<Store>(&stage.op)) {
    c.thread = EngineThreadOf(stage);
    const auto& pat = stor->pattern;
    c.tiles = SatMul(std::max<int64_t>(0, pat.block_h), std::max<int64_t>(0, pat.block_w));
    if (stor->tensor >= 0 && stor->tensor < static_cast<int>(section.tensors.size())) {
      c.tile_bytes = target.tile_bytes(section.tensors[stor->tensor].precision);
    }
  } else if (const auto* mm = std::get_if<MatmulTiles>(&stage.op)) {
    c.compute = MatmulCost(section, stage, *mm, target);
  } else if (const auto* g = std::get_if<Generic>(&stage.op)) {
    c.compute = GenericCost(section, stage, *g, target, params);
    const Stage* first = section.stages.data();
    if (&stage >= first && &stage < first + section.stages.size()) {
      const size_t i = static_cast<size_t>(&stage - first);
      if (PackedRowSum(section, i)) {
        // Accumulated by the packer while its producer's tiles are in Dst (charged to the producer below).
        c.compute = ComputeCost{.latency = c.compute.latency, .tiles = 1, .flops = c.compute.flops};
      } else if (PackedRowSum(section, i + 1)) {
        c.compute.pack *= 2;  // its one output page packed again, into the row sums
      }
    }
  }
  return c;
}

}  // namespace spatial
