#include "lowerings/matmul/matmul_blocking.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/semantics/footprint.h"
#include "spatial/status_macros.h"
#include "targets/matmul_step.h"

namespace spatial {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    d.push_back(i);
    if (i != n / i) d.push_back(n / i);
  }
  std::sort(d.begin(), d.end());
  return d;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest osh x osw <= cap with osh | m and osw | n; of equal areas the squarer one: tt-metal's own order
// (ttnn's SUBBLOCK_HW_CHOICES, the most tiles first), so the lowering's blocking is the one tt-metal would run. Not
// the cheapest by the machine's step: on Wormhole a 1 x 8 sub-block (no held pair, Costs.matmul_held_pairs) models
// ~10% faster than 4 x 2 at bf16 HiFi2, which no published figure confirms.
std::pair<int64_t, int64_t> SubBlock(int64_t m, int64_t n, int64_t cap) {
  std::pair<int64_t, int64_t> best{1, 1};
  for (int64_t h : Divisors(m)) {
    for (int64_t w : Divisors(n)) {
      if (h * w > cap) continue;
      const int64_t area = h * w, best_area = best.first * best.second;
      if (area > best_area || (area == best_area && std::max(h, w) < std::max(best.first, best.second))) {
        best = {h, w};
      }
    }
  }
  return best;
}

// What every candidate is measured against: the target's costs and capacities, read once.
struct BlockingContext {
  const MatmulShape& s;
  const Target& target;
  int64_t gy, gx, sites, mem;
  int64_t ta, tb, to, tacc;
  int64_t dst_half, dst_full;
  double link, unpack, pack, dram;

  BlockingContext(const MatmulShape& shape, const Target& t) : s(shape), target(t) {
    const auto& costs = t.proto().costs();
    gy = std::max<int64_t>(1, t.grid_y());
    gx = std::max<int64_t>(1, t.grid_x());
    sites = gy * gx;
    mem = t.max_local_mem_bytes();
    ta = t.tile_bytes(s.a);
    tb = t.tile_bytes(s.b);
    to = t.tile_bytes(s.out);
    tacc = t.tile_bytes(s.acc);
    // Dst: one half of it while the packer drains the other (tt-metal's default double buffering) for the
    // sub-block; the whole of it for the pack chunks (the certifier's limit on a stage's output page).
    dst_half = std::max<int64_t>(1, t.effective_acc_tiles(s.acc, false));
    dst_full = std::max<int64_t>(1, t.effective_acc_tiles(s.acc, true));
    link = std::max(1.0, t.proto().noc().link_bytes_per_cycle());
    unpack = std::max(1.0, costs.unpack_bytes_per_cycle());
    pack = std::max(1.0, costs.pack_bytes_per_cycle());
    const auto& d = t.proto().dram();
    dram = std::max(1e-9, d.bytes_per_second() * (d.efficiency() > 0 ? d.efficiency() : 1.0) /
                              std::max(1.0, t.proto().clock_hz()));
  }

  MatmulStep Step(int64_t osh, int64_t osw) const {
    return MatmulSubBlockStep(target, osh, osw, static_cast<double>(ta), static_cast<double>(tb), s.product_cycles);
  }

  int64_t Bytes(int64_t depth, int64_t page_tiles, Precision p) const {
    const Buffer b{.name = "", .depth = depth, .page_tiles = page_tiles, .precision = p};
    return BufferBytes(b, target.tile_rows(), target.tile_cols());
  }
  int64_t PackWidth(int64_t pn) const {
    int64_t pack_w = 1;
    for (int64_t d : Divisors(pn)) {
      if (d <= dst_full) pack_w = d;
    }
    return pack_w;
  }
  // The buffers matmul.cc declares, measured as the certifier measures them (spatial/semantics/footprint.h): the
  // accumulator block stays (one page); A and B blocks and the packed chunks are double-buffered.
  int64_t FixedBytes(int64_t pm, int64_t pn) const { return Bytes(1, pm * pn, s.acc) + Bytes(2, PackWidth(pn), s.out); }
  int64_t Footprint(int64_t pm, int64_t pn, int64_t kb) const {
    return FixedBytes(pm, pn) + Bytes(2, pm * kb, s.a) + Bytes(2, kb * pn, s.b);
  }

  // The blocking of per_site_m x per_site_n items folding K in blocks of kb, with Dst sub-blocks osh x osw, and
  // its estimate.
  MatmulBlocking Evaluate(int64_t pm, int64_t pn, int64_t kb, int64_t osh, int64_t osw) const {
    const int64_t iy = s.m_t / pm, ix = s.n_t / pn;
    MatmulBlocking c;
    c.per_site_m = pm;
    c.per_site_n = pn;
    c.items_y = iy;
    c.items_x = ix;
    c.k_block = kb;
    c.k_blocks = s.k_t / kb;
    c.osh = osh;
    c.osw = osw;
    c.pack_w = PackWidth(pn);
    c.one_d = iy == 1 && ix > gx;
    c.rounds = c.one_d ? CeilDiv(ix, sites) : CeilDiv(iy, gy) * CeilDiv(ix, gx);
    // One fold block on one site: the matrix work, the two unpackers' operand reads, the accumulator's round
    // trip through local memory, and the reader's NoC traffic (each block in from DRAM and out to the row or
    // column: counted twice, the sender's share).
    // Per sub-block and K tile: the machine's MatmulTiles cost (targets/matmul_step.h).
    const MatmulStep step = Step(c.osh, c.osw);
    const double steps = static_cast<double>((pm / c.osh) * (pn / c.osw) * kb);
    const double math = steps * step.math, operands = steps * step.unpack;
    const double carry = static_cast<double>(pm * pn * tacc) * ((s.pack_accumulate ? 0 : 1 / unpack) + 1 / pack);
    const double noc = 2.0 * static_cast<double>(kb * (pm * ta + pn * tb)) / link;
    const double block = std::max({math, operands + carry, noc});
    // The chip's DRAM: A is read once per round of columns of items, B once per round of rows (the multicast
    // shares a read only among the items that run together), C written once.
    const int64_t x_rounds = c.one_d ? c.rounds : CeilDiv(ix, gx), y_rounds = c.one_d ? 1 : CeilDiv(iy, gy);
    const double dram_bytes = static_cast<double>(s.m_t * s.k_t * ta * x_rounds + s.k_t * s.n_t * tb * y_rounds +
                                                  s.m_t * s.n_t * to);
    c.site_cycles = static_cast<double>(c.rounds) * static_cast<double>(c.k_blocks) * block;
    c.est_cycles = std::max(c.site_cycles, dram_bytes / dram);
    return c;
  }
};

}  // namespace

absl::StatusOr<MatmulBlocking> ChooseMatmulBlocking(const MatmulShape& s, const Target& target,
                                                    const std::string& what) {
  const BlockingContext ctx(s, target);
  std::optional<MatmulBlocking> best;
  int64_t fewest_items = std::numeric_limits<int64_t>::max();  // of the candidates that fit memory
  const std::vector<int64_t> kdiv = Divisors(s.k_t);
  for (int64_t pm : Divisors(s.m_t)) {
    for (int64_t pn : Divisors(s.n_t)) {
      const int64_t iy = s.m_t / pm, ix = s.n_t / pn;
      if (ctx.FixedBytes(pm, pn) > ctx.mem) continue;
      int64_t kb = 0;
      for (int64_t d : kdiv) {
        if (d > 8) break;  // tt-metal's in0_block_w stays small: the blocks are double-buffered in L1
        if (ctx.Footprint(pm, pn, d) <= ctx.mem) kb = d;
      }
      if (kb == 0) continue;
      fewest_items = std::min(fewest_items, iy * ix);
      if (iy * ix > kMaxWorkItems) continue;
      const auto [osh, osw] = SubBlock(pm, pn, ctx.dst_half);
      const MatmulBlocking c = ctx.Evaluate(pm, pn, kb, osh, osw);
      // Of equal estimates (both DRAM-bound, say), the one whose sites have less to do; then fewer items
      // (larger blocks: less traffic the estimate does not see).
      if (!best || c.est_cycles < best->est_cycles ||
          (c.est_cycles == best->est_cycles &&
           (c.site_cycles < best->site_cycles ||
            (c.site_cycles == best->site_cycles && iy * ix < best->items_y * best->items_x)))) {
        best = c;
      }
    }
  }
  if (!best && fewest_items != std::numeric_limits<int64_t>::max()) {
    // Every block that fits memory makes more items than a section holds: the budget's own refusal.
    RETURN_IF_ERROR(WorkItemBudget(what, fewest_items));
  }
  if (!best) {
    return NotLowered(absl::StrCat("matmul of ", s.m_t, " x ", s.k_t, " x ", s.n_t,
                                   " tiles: not even a one-tile block and its operands fit a site's ", ctx.mem,
                                   " bytes of local memory"));
  }
  return *best;
}

absl::StatusOr<MatmulBlocking> FixedMatmulBlocking(const MatmulShape& s, const Target& target,
                                                   const proto::MatmulProgramConfig& config,
                                                   const std::string& what) {
  const BlockingContext ctx(s, target);
  const int64_t pm = config.out_block_h(), pn = config.out_block_w(), kb = config.in0_block_w(),
                osh = config.out_subblock_h(), osw = config.out_subblock_w();
  const auto field = [&what](std::string_view name, int64_t v, std::string_view must) {
    return absl::InvalidArgumentError(absl::StrCat("matmul.program_config.", std::string(name), " = ", v, " ",
                                                   std::string(must), " (", what, ")"));
  };
  if (pm < 1 || s.m_t % pm != 0) {
    return field("out_block_h", pm, absl::StrCat("must be at least 1 and divide m's ", s.m_t, " tiles"));
  }
  if (pn < 1 || s.n_t % pn != 0) {
    return field("out_block_w", pn, absl::StrCat("must be at least 1 and divide n's ", s.n_t, " tiles"));
  }
  if (kb < 1 || s.k_t % kb != 0) {
    return field("in0_block_w", kb, absl::StrCat("must be at least 1 and divide k's ", s.k_t, " tiles"));
  }
  if (osh < 1 || pm % osh != 0) {
    return field("out_subblock_h", osh, absl::StrCat("must be at least 1 and divide out_block_h = ", pm));
  }
  if (osw < 1 || pn % osw != 0) {
    return field("out_subblock_w", osw, absl::StrCat("must be at least 1 and divide out_block_w = ", pn));
  }
  if (osh * osw > ctx.dst_half) {
    return NotLowered(absl::StrCat("matmul.program_config: a ", osh, " x ", osw, " sub-block is over the ",
                                   ctx.dst_half, " tiles that half of ", target.name(), "'s Dst holds in ",
                                   std::string(PrecisionName(s.acc)), " (", what, ")"));
  }
  const int64_t items = (s.m_t / pm) * (s.n_t / pn);
  RETURN_IF_ERROR(WorkItemBudget(what, items));
  const int64_t need = ctx.Footprint(pm, pn, kb);
  if (need > ctx.mem) {
    return NotLowered(absl::StrCat("matmul.program_config: a ", pm, " x ", pn, " block folding K ", kb,
                                   " tiles at a time needs ", need, " bytes a site, over ", target.name(), "'s ",
                                   ctx.mem, " (", what, ")"));
  }
  return ctx.Evaluate(pm, pn, kb, osh, osw);
}

}  // namespace spatial
