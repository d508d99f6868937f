#include "lowerings/moe/moe_experts.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/index.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// How a round reads its chosen expert's run: the page holding it and, when the run does not start at the page's
// element 0, the term that moves the read to it — the pick by the run's length in a whole table, the run's offset
// in a window that does not start at it.
struct ExpertRun {
  BufferId page = 0;
  struct By {
    BufferId index;
    int64_t stride;
    int64_t modulus;
  };
  std::optional<By> by;

  // Reads element Σ terms of the run; the moving term reads the stage's next slot, which this appends.
  void AddSlot(std::vector<BufferId>& ins, std::vector<ElemAccess>& maps, std::vector<Term> terms) const {
    ElemAccess m{0, std::move(terms), std::nullopt};
    if (by) m.indirect = IndirectTerm{static_cast<int>(ins.size()) + 1, by->stride, by->modulus};
    ins.push_back(page);
    maps.push_back(std::move(m));
    if (by) {
      ins.push_back(by->index);
      maps.push_back(Fixed(0));
    }
  }
};

// A flat table of `ne` expert runs of `span` elements each, read by every round at its chosen expert's run.
//
// ★ A ROUND MOVES ITS EXPERT'S RUN, OR THE TABLE MOVES ONCE, WHICHEVER IS FEWER TILES. Run e starts at element
// e·span, mid-tile unless span is whole tiles. A round loads the window of whole tiles around its run — W tiles, the
// most any run reaches from its first element's offset in its tile, started at min(⌊e·span/TC⌋, T − W) so it ends
// inside the table — and reads the run at its offset e·span − TC·start in the page; a run of whole tiles is its own
// window, addressed by the pick alone. k rounds move k·W tiles of a T-tile table; where that is not fewer, the table
// loads once and each round reads its run out of it by element.
class ExpertTable {
 public:
  ExpertTable(Template& t, const OperandRef& op, TensorInit init, int64_t ne, int64_t span, int64_t k, Precision p)
      : span_(span), table_t_(t.TilesOf(ne * span)) {
    const int64_t tw = t.tile_cols();
    // e·span mod TC repeats with period TC / gcd(span, TC) ≤ TC: the first min(ne, TC) runs reach every offset.
    int64_t window = 1;
    for (int64_t e = 0; e < std::min(ne, tw); ++e) window = std::max(window, CeilDiv(e * span % tw + span, tw));
    window_t_ = std::min(window, table_t_);
    tensor_ = t.AddTensor(op.name, TensorRole::kInput, 1, ne * span, p, std::move(init));
    whole_ = k * window_t_ >= table_t_;
    if (whole_) {
      // Loaded once, in the prologue, and read by every round.
      page_ = t.AddBufferDeep(absl::StrCat("in_", op.name), 1, table_t_, p);
      t.AddLoad(absl::StrCat("load_", op.name), tensor_, {}, table_t_, page_);
    }
  }

  // The round's run of `part`, chosen by the pick page `pick` (in [0, ne)): the window's index stage, its gather
  // and — unless the run is whole tiles — its offset stage, shared by the tables of one span through `offsets`.
  absl::StatusOr<ExpertRun> Run(Template& t, const std::string& part, BufferId pick, int64_t ne, Precision p,
                                std::map<int64_t, BufferId>& offsets, const Target& target) const {
    if (whole_) return ExpertRun{page_, ExpertRun::By{pick, span_, ne}};
    const int64_t tw = t.tile_cols();
    const int64_t one = t.PageWidth(1);
    ASSIGN_OR_RETURN(Precision ix, IndexType(target, ne * span_ + tw));
    const bool whole_tiles = span_ % tw == 0;
    auto first = [&] {
      return Min(FloorDiv(Mul(Op(0), Const(static_cast<double>(span_))), Const(static_cast<double>(tw))),
                 Const(static_cast<double>(table_t_ - window_t_)));
    };
    // ★ EACH GATHER RETIRES ITS INDEX PAGE, so the load reads a page of its own: the pick, or the window's first tile.
    const BufferId index = t.AddScratch(absl::StrCat(part, "_window"), 1, ix);
    t.AddGeneric(absl::StrCat(part, "_window"), FlatSpace(1), {pick}, {Fixed(0)}, IdentMap(one),
                 whole_tiles ? Op(0) : first(), index);
    const IndirectTile indirect = whole_tiles ? IndirectTile{index, window_t_, 0, ne - 1}
                                              : IndirectTile{index, 1, 0, table_t_ - window_t_};
    const BufferId page = t.AddBufferDeep(absl::StrCat("in_", part), 1, window_t_, p);
    t.AddLoadPattern(absl::StrCat("load_", part), tensor_,
                     AccessPattern{TileAddr{0, {}, indirect}, 1, window_t_, 1, window_t_}, page);
    if (whole_tiles) return ExpertRun{page, std::nullopt};
    auto [at, fresh] = offsets.try_emplace(span_, 0);
    if (fresh) {
      at->second = t.AddScratch(absl::StrCat(part, "_offset"), 1, ix);
      t.AddGeneric(absl::StrCat(part, "_offset"), FlatSpace(1), {pick}, {Fixed(0)}, IdentMap(one),
                   Sub(Mul(Op(0), Const(static_cast<double>(span_))), Mul(first(), Const(static_cast<double>(tw)))),
                   at->second);
    }
    return ExpertRun{page, ExpertRun::By{at->second, 1, window_t_ * tw - span_ + 1}};
  }

 private:
  int64_t span_;
  int64_t table_t_;
  int64_t window_t_ = 1;
  TensorId tensor_ = 0;
  bool whole_ = false;
  BufferId page_ = 0;
};

}  // namespace

absl::StatusOr<Composition> MoeExpertsSection(const proto::OpSpec& spec, const MoeOperands& layout,
                                              const std::vector<OperandRef>& operands, const MoeNames& names,
                                              const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), dff = m.dff(), ne = m.ne(), k = m.k();
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, ne + 1));
  // The partial results stay at the accumulator's width; only the block's output leaves at the datapath's.
  const Precision acc_p = AccFor(elem);
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t dff_t = t.TilesOf(dff), d_t = t.TilesOf(d);
  const int64_t dffw = t.PageWidth(dff_t), dw = t.PageWidth(d_t);
  auto init_of = [&](int at, int64_t n) { return InitOf(operands[at].fill, n); };
  // X is one tensor, so one datatype, in every section of the block.
  ASSIGN_OR_RETURN(TensorInit x_init, init_of(0, d));
  const TensorId xt = t.AddTensor(operands[0].name, TensorRole::kInput, 1, d, elem, std::move(x_init));
  const BufferId x = t.AddBufferDeep("in_x", 1, d_t, elem);
  t.AddLoad("load_x", xt, {}, d_t, x);
  std::vector<ExpertTable> tables;
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(TensorInit init, init_of(2 + i, ne * dff * d));
    tables.emplace_back(t, operands[2 + i], std::move(init), ne, dff * d, k, elem);
  }
  // Each expert bias table: ne runs of its projection's width.
  const int bias_at[3] = {layout.gate_bias, layout.up_bias, layout.down_bias};
  std::vector<std::optional<ExpertTable>> biases(3);
  for (int i = 0; i < 3; ++i) {
    if (bias_at[i] < 0) continue;
    const int64_t width = i == 2 ? d : dff;
    ASSIGN_OR_RETURN(TensorInit init, init_of(bias_at[i], ne * width));
    biases[i].emplace(t, operands[bias_at[i]], std::move(init), ne, width, k, elem);
  }
  const BufferId acc = t.AddScratchDeep("acc", 2, d_t, acc_p);
  t.AddGeneric("init_acc", FlatSpace(d), {}, {}, IdentMap(dw), Const(0.0), acc);

  // ── A round a block: its pick and weight, the expert's gated FFN over its gathered runs, the weighted sum.
  const MoeRounds rounds = MoeRounds::Begin(t, k);
  auto table_tile = [&](const std::string& name, const std::string& tensor, Precision p) {
    const TensorId id = t.AddTensor(tensor, TensorRole::kInput, 1, k * t.tile_cols(), p, TensorInit::External());
    const BufferId buf = t.AddBuffer(absl::StrCat("in_", name), 1, p);
    t.AddLoad(absl::StrCat("load_", name), id, rounds.tile, 1, buf);
    return buf;
  };
  const BufferId pick = table_tile("pick", names.picks, ix);
  const BufferId weight = table_tile("weight", names.weights, Precision::kFp32);
  // The input the expert reads: x, or x scaled by its weight when the weights scale the inputs ("w·(x·W) is
  // (w·x)·W").
  BufferId x_in = x;
  if (m.weigh_inputs()) {
    x_in = t.AddScratch("scaled_x", d_t, acc_p);
    t.AddGeneric("scaled_x", FlatSpace(d), {weight, x}, {Fixed(0), At(0)}, IdentMap(dw), Mul(Op(0), Op(1)), x_in);
  }
  std::map<int64_t, BufferId> offsets;
  // into[o] = Σ_t in[t]·W[o·fold + t] over the chosen expert's run of W.
  auto gemv = [&](const std::string& name, const ExpertRun& run, BufferId in, int64_t fold, int64_t width,
                  int64_t tiles) {
    std::vector<BufferId> ins{in};
    std::vector<ElemAccess> maps{ElemAccess{0, {{LoopVar::kRow, 1}}, std::nullopt}};
    run.AddSlot(ins, maps, {{LoopVar::kCol, fold}, {LoopVar::kRow, 1}});
    const BufferId into = t.AddScratch(name, tiles, acc_p);
    t.AddGeneric(name, {{LoopVar::kRow, fold, IterKind::kReduceSum}, {LoopVar::kCol, width}}, std::move(ins),
                 std::move(maps), PerColMap(), Mul(Op(0), Op(1)), into);
    return into;
  };
  // out[c] = y[c] + B[c] over the chosen expert's run of B: a projection's output and its expert's bias row.
  auto biased = [&](int i, const std::string& name, BufferId y, int64_t width,
                    int64_t tiles) -> absl::StatusOr<BufferId> {
    if (!biases[i]) return y;
    ASSIGN_OR_RETURN(ExpertRun run, biases[i]->Run(t, name, pick, ne, elem, offsets, target));
    std::vector<BufferId> ins{y};
    std::vector<ElemAccess> maps{At(0)};
    run.AddSlot(ins, maps, {{LoopVar::kCol, 1}});
    const BufferId into = t.AddScratch(name, tiles, acc_p);
    t.AddGeneric(name, FlatSpace(width), std::move(ins), std::move(maps), IdentMap(t.PageWidth(tiles)),
                 Add(Op(0), Op(1)), into);
    return into;
  };
  ASSIGN_OR_RETURN(ExpertRun gate_run, tables[0].Run(t, "gate", pick, ne, elem, offsets, target));
  BufferId gate = gemv("gate", gate_run, x_in, d, dff, dff_t);
  ASSIGN_OR_RETURN(ExpertRun up_run, tables[1].Run(t, "up", pick, ne, elem, offsets, target));
  BufferId up = gemv("up", up_run, x_in, d, dff, dff_t);
  ASSIGN_OR_RETURN(gate, biased(0, "gate_bias", gate, dff, dff_t));
  ASSIGN_OR_RETURN(up, biased(1, "up_bias", up, dff, dff_t));
  const BufferId hidden = t.AddScratch("hidden", dff_t, acc_p);
  t.AddGeneric("hidden", FlatSpace(dff), {gate, up}, {At(0), At(0)}, IdentMap(dffw), MoeGated(m, Op(0), Op(1)),
               hidden);
  ASSIGN_OR_RETURN(ExpertRun down_run, tables[2].Run(t, "down", pick, ne, elem, offsets, target));
  BufferId y = gemv("down", down_run, hidden, dff, d, d_t);
  ASSIGN_OR_RETURN(y, biased(2, "down_bias", y, d, d_t));
  // The weighted sum; an expert whose input took its weight adds as it is.
  if (m.weigh_inputs()) {
    t.AddGeneric("accumulate", FlatSpace(d), {acc, y}, {At(0), At(0)}, IdentMap(dw), Add(Op(0), Op(1)), acc);
  } else {
    t.AddGeneric("accumulate", FlatSpace(d), {acc, weight, y}, {At(0), Fixed(0), At(0)}, IdentMap(dw),
                 Add(Op(0), Mul(Op(1), Op(2))), acc);
  }

  // ── The combine: Σ_r w_r·y_r / Σ_r w_r is the desugar's Σ_r (w_r / Σ w)·y_r, the sum divided out once.
  t.SetPhase(rounds.after);
  std::vector<BufferId> ins{acc};
  std::vector<ElemAccess> maps{At(0)};
  Body combine = Op(0);
  if (m.renormalize()) {
    const TensorId nt = t.AddTensor(names.norm, TensorRole::kInput, 1, 1, Precision::kFp32, TensorInit::External());
    const BufferId norm = t.AddBufferDeep("in_norm", 1, 1, Precision::kFp32);
    t.AddLoad("load_norm", nt, {}, 1, norm);
    ins.push_back(norm);
    maps.push_back(Fixed(0));
    combine = Mul(Op(0), Op(1));
    if (m.scale() != 0.0) combine = Mul(std::move(combine), Const(m.scale()));
  }
  const BufferId out = t.AddBufferDeep("out", 1, d_t, elem);
  t.AddGeneric("combine", FlatSpace(d), std::move(ins), std::move(maps), IdentMap(dw), std::move(combine), out);
  const TensorId result = t.AddTensor(spec.out(), TensorRole::kOutput, 1, d, elem, TensorInit::Zero());
  t.AddStore(absl::StrCat("store_", spec.out()), result, {}, d_t, out);
  WireFirstReaders(t);
  return FinishSection(t, absl::StrCat("moe_", ne, "x", k, "_", d, "x", dff), WholeRow(d_t), acc_p,
                       ApproxIn("mixture of experts", elem), target);
}

}  // namespace spatial
