// The K-blocked products of the matrix-engine sections that build their own (the mixture's blocked and dense forms,
// a latent attention's per-head products over a prefill's rows): operands read a K block at a time, the products
// accumulating over the blocks, the first block (and the second when there are only two) peeled into the prologue
// and the rest a fold.
#ifndef LOWERINGS_TOOLKIT_K_BLOCKS_H_
#define LOWERINGS_TOOLKIT_K_BLOCKS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "spatial/builder.h"
#include "spatial/program.h"

namespace spatial {

// One operand of a K-blocked product: a block_h x block_w block of `tensor` per K block, at tile base + Σ steps +
// block·k_step, gathered by the pick page `pick` (its expert's slab pick_stride tiles apart) when set.
struct KOperand {
  std::string name;
  TensorId tensor = 0;
  BufferId page = 0;
  std::vector<Term> steps = {};
  int64_t base = 0;
  int64_t k_step = 0;
  int64_t block_h = 1, block_w = 1, pitch = 1;
  std::optional<BufferId> pick = std::nullopt;
  int64_t pick_stride = 0;
  // The block is the same for every item along this axis: read once and multicast (x, for every tile of the
  // gate/up rows; measured at Qwen3-30B-A3B's decode, 228k cycles for the section against 308k. A round's hidden row
  // for the down tiles is not: 262k against 249k, its K only three blocks and the senders waiting on 64 receivers).
  std::optional<LoopVar> multicast = std::nullopt;
};

// ops[a] x ops[b] (transposed when transpose_b) into `acc`, an n_tiles-wide page a block.
struct KProduct {
  std::string name;
  int a = 0, b = 0;
  bool transpose_b = false;
  MathFidelity fidelity = MathFidelity::kDefault;
  BufferId acc = 0;
  int64_t n_tiles = 1;
};

// The gathered tile's index page: a copy of the pick, since each gather retires its index page.
BufferId IndexCopy(Template& t, const std::string& name, BufferId pick, Precision ix);

// The products over k_blocks K blocks of kb tiles: block 0 (and block 1 when there are only two: a fold of one block
// is no fold) in the prologue, the rest as the fold's body, accumulating into each product's page. `after`, when
// set, adds a block's own stages after its products (block, whether in the body, the stage-name suffix). A gathered
// operand's pick is in [0, ne) at index type `ix`. Returns the phase the stages after the products take.
Phase AddKBlocked(Template& t, int64_t k_blocks, int64_t kb, const std::vector<KOperand>& ops,
                  const std::vector<KProduct>& products, int64_t ne, Precision ix,
                  const std::function<void(int64_t, bool, const std::string&)>& after = nullptr);

// Items (y, x) over a rows_t x cols_t tile grid, each writing a 1 x w_t block at (y, x·w_t), ordered y fastest: the
// machine joins a multicast's receivers among items at the same ordinal of their sites (sim/machine/
// multicast_groups.h), so the token tiles that share a weight block run side by side, and so do the items of one
// token tile that share its row (up to the grid's sites).
std::vector<WorkItem> TokenTilesInner(int64_t rows_t, int64_t cols_t, int64_t w_t);

// The K block of a contraction over n_t tiles: its largest divisor up to `most` tiles a page.
int64_t KBlock(int64_t n_t, int64_t most = 8);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_K_BLOCKS_H_
