#include "lowerings/carried/causal_conv.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The seed's checks on the spec: a negative size is a malformed spec; no taps or no channels is the seed's refusal.
absl::Status CheckConvSpec(const proto::CausalConvSpec& c) {
  RETURN_IF_ERROR(CheckNotNegative("causal_conv", {{"taps", c.taps()}, {"chan", c.chan()}, {"rows", c.rows()}}));
  if (c.taps() == 0 || c.chan() == 0) return NotLowered("a causal conv with no taps or no channels");
  return absl::OkStatus();
}

// Declares the ring State before FlatBuild::Input loads it (tensors unify by name, the first declaration wins), so the
// section's load of it is a read of carried state and its store a write, in the composition's declared order.
absl::Status DeclareFlatRing(FlatBuild& b, const OperandRef& cs, int64_t ring_len) {
  ASSIGN_OR_RETURN(TensorInit init, InitOf(cs.fill, ring_len));
  b.t().AddTensor(cs.name, TensorRole::kState, 1, ring_len, b.precision(), std::move(init));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Composition> FlatCausalConv(const proto::CausalConvSpec& spec, const std::vector<OperandRef>& ops,
                                           const std::string& out, const Target& target) {
  const int64_t taps = spec.taps();
  const int64_t chan = spec.chan();
  const int64_t ring_len = taps * chan;
  const OperandRef& x = ops[0];
  const OperandRef& w = ops[1];
  const OperandRef& cs = ops[2];

  // ── Section 1: the ring update. `CS'[t, c] = t < taps-1 ? CS[t+1, c] : X[c]`, over the flat ring.
  ASSIGN_OR_RETURN(FlatBuild shift, FlatBuild::On(Datapath::kFloat, target));
  RETURN_IF_ERROR(DeclareFlatRing(shift, cs, ring_len));
  ASSIGN_OR_RETURN(BufferId cs_in, shift.Input(cs.name, ring_len, cs.fill));
  ASSIGN_OR_RETURN(BufferId x_in, shift.Input(x.name, chan, x.fill));
  const int64_t ring_t = TilesOf(ring_len, target);
  const BufferId ring = shift.t().AddBuffer("ring", ring_t, shift.precision());
  // Two bands: the shifted rows (CS[c + chan], one row up), then the appended newest row (X[c - (taps-1)·chan]).
  const StageId s = shift.Compute("ring_shift", FlatSpace(ring_len),
                                  {Slot{cs_in, At(chan)}, Slot{x_in, At(-(taps - 1) * chan)}},
                                  IdentMap(shift.t().PageWidth(ring_t)),
                                  Banded({{(taps - 1) * chan, Op(0)}, {ring_len, Op(1)}}), ring);
  ASSIGN_OR_RETURN(Composition update, shift.Finish(cs.name, ring_len, {s}, ring,
                                                    absl::StrCat("conv_ring_", taps, "x", chan),
                                                    NumericsClaim::Exact()));

  // ── Section 2: the tap reduction against the UPDATED ring.
  ASSIGN_OR_RETURN(FlatBuild red, FlatBuild::On(Datapath::kFloat, target));
  RETURN_IF_ERROR(DeclareFlatRing(red, cs, ring_len));
  ASSIGN_OR_RETURN(BufferId ring_in, red.Input(cs.name, ring_len, cs.fill));
  ASSIGN_OR_RETURN(BufferId w_in, red.Input(w.name, ring_len, w.fill));
  const int64_t cols_t = TilesOf(chan, target);
  const BufferId out_buf = red.t().AddBuffer("out", cols_t, red.precision());
  const TensorId ones = OnesTile(red.t(), "conv_scaler", red.precision());
  const BufferId ones_in = red.t().AddBuffer("in_scaler", 1, red.precision());
  red.AddLoadToWire(red.t().AddLoad("load_scaler", ones, {}, 1, ones_in), ones_in);
  // ★ THE TAP AXIS IS THE REDUCED ONE, AND IT IS THE *ROW*. Folding the ROW axis leaves one value per COLUMN, written
  // DOWN the output tile — so the answer is present at row 0 of every column, which IS the flat 1 x chan layout the
  // next section reads. The channel is the column, the tap is the row, and CS[t, c] is the flat offset t·chan + c.
  const std::vector<IterSpec> iters{{LoopVar::kRow, taps, IterKind::kReduceSum},
                                    {LoopVar::kCol, chan, IterKind::kParallel}};
  const StageId r = red.Compute("tap_reduce", iters,
                                {Slot{ring_in, Map2(0, chan, 1)}, Slot{w_in, Map2(0, chan, 1)},
                                 Slot{ones_in, ConstMap()}},
                                PerColMap(), Mul(Op(0), Op(1)), out_buf);
  ASSIGN_OR_RETURN(Composition reduce, red.Finish(out, chan, {r}, out_buf, absl::StrCat("conv_taps_", taps, "x", chan),
                                                  ApproxIn("causal convolution", red.precision())));
  std::vector<Composition> parts;
  parts.push_back(std::move(update));
  parts.push_back(std::move(reduce));
  return ComposeSections(absl::StrCat("conv_ring_", taps, "x", chan), std::move(parts), target);
}

// ★ A CAUSAL CONV BLOCKS BY CHANNEL, AND NEEDS NO HALO. `y[c] = Σ_t W[t,c]·CS[t,c]` — every channel reads only its OWN
// column of the ring, so channels are independent and a block of them is a complete sub-problem. The ring is the
// taps x chan matrix: one channel tile's taps are the plane rows of ONE tile, so inside the page a tap's stride is
// one TILE WIDTH, not `chan` — the whole difference from the flat form; getting it wrong reads another channel's
// history.
absl::StatusOr<Composition> BlockedCausalConv(const proto::CausalConvSpec& spec, const std::vector<OperandRef>& ops,
                                              const std::string& out, const Target& target) {
  const int64_t taps = spec.taps();
  const int64_t chan = spec.chan();
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  if (chan % tw != 0) {
    return NotLowered("a blocked causal conv whose channel count is not a whole number of tiles");
  }
  // Every tap of a channel tile is a plane row of the one tile an item loads; the seed does not check it and would
  // read the next tile's padding as a tap.
  if (taps > tr) return NotLowered("a blocked causal conv whose ring is taller than a tile row");
  const int64_t chan_t = chan / tw;
  const int64_t ring_len = taps * chan;
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a causal conv of ", chan, " channels"), chan_t));
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  const OperandRef& x = ops[0];
  const OperandRef& w = ops[1];
  const OperandRef& cs = ops[2];
  ASSIGN_OR_RETURN(TensorInit cs_init, InitOf(cs.fill, ring_len));
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(x.fill, chan));
  ASSIGN_OR_RETURN(TensorInit w_init, InitOf(w.fill, ring_len));
  const std::vector<Term> by_tile{{LoopVar::kItemX, 1}};

  // ── Section 1: the ring shift, one channel tile per item.
  Template t1(tr, tw);
  const TensorId ring1 = t1.AddTensor(cs.name, TensorRole::kState, taps, chan, p, cs_init);
  const TensorId xt = t1.AddTensor(x.name, TensorRole::kInput, 1, chan, p, std::move(x_init));
  const BufferId cin = t1.AddBuffer("in_cs", 1, p);
  const BufferId xin = t1.AddBuffer("in_x", 1, p);
  const BufferId ob1 = t1.AddBuffer("ring", 1, p);
  const StageId lc = t1.AddLoad("load_ring", ring1, by_tile, 1, cin);
  const StageId lx = t1.AddLoad("load_x", xt, by_tile, 1, xin);
  // Inside the page the tap is the plane row, so one tap up is one tile width along the flat plane.
  const StageId s1 = t1.AddGeneric("ring_shift", HeadSpace(taps, tw), {cin, xin}, {Map2(tw, tw, 1), Map2(0, 0, 1)},
                                   Map2(0, tw, 1), Select(Pred::Lt(LoopVar::kRow, taps - 1), Op(0), Op(1)), ob1);
  const StageId st1 = t1.AddStore("store_ring", ring1, by_tile, 1, ob1);
  t1.AddEdge(lc, cin, s1);
  t1.AddEdge(lx, xin, s1);
  t1.AddEdge(s1, ob1, st1);
  ASSIGN_OR_RETURN(Composition shift, FinishSection(t1, absl::StrCat("conv_ring_", taps, "x", chan),
                                                    ItemsPerTile(chan_t), AccFor(p), NumericsClaim::Exact(), target));

  // ── Section 2: the tap reduction against the updated ring, same blocking.
  Template t2(tr, tw);
  const TensorId ring2 = t2.AddTensor(cs.name, TensorRole::kState, taps, chan, p, std::move(cs_init));
  const TensorId wt = t2.AddTensor(w.name, TensorRole::kParam, taps, chan, p, std::move(w_init));
  const TensorId yt = t2.AddTensor(out, TensorRole::kOutput, 1, chan, p, TensorInit::Zero());
  const TensorId ones = OnesTile(t2, absl::StrCat(out, "__conv_scaler"), p);
  const BufferId rin = t2.AddBuffer("in_cs", 1, p);
  const BufferId win = t2.AddBuffer("in_w", 1, p);
  const BufferId oin = t2.AddBuffer("in_scaler", 1, p);
  const BufferId ob2 = t2.AddBuffer("out", 1, p);
  const StageId lr = t2.AddLoad("load_ring", ring2, by_tile, 1, rin);
  const StageId lw = t2.AddLoad("load_w", wt, by_tile, 1, win);
  const StageId lo = t2.AddLoad("load_scaler", ones, {}, 1, oin);
  const std::vector<IterSpec> iters{{LoopVar::kRow, taps, IterKind::kReduceSum},
                                    {LoopVar::kCol, tw, IterKind::kParallel}};
  const StageId s2 = t2.AddGeneric("tap_reduce", iters, {rin, win, oin}, {Map2(0, tw, 1), Map2(0, tw, 1), ConstMap()},
                                   PerColMap(), Mul(Op(0), Op(1)), ob2);
  const StageId st2 = t2.AddStore("store_y", yt, by_tile, 1, ob2);
  t2.AddEdge(lr, rin, s2);
  t2.AddEdge(lw, win, s2);
  t2.AddEdge(lo, oin, s2);
  t2.AddEdge(s2, ob2, st2);
  ASSIGN_OR_RETURN(Composition reduce,
                   FinishSection(t2, absl::StrCat("conv_taps_", taps, "x", chan), ItemsPerTile(chan_t), AccFor(p),
                                 ApproxIn("causal convolution", p), target));
  std::vector<Composition> parts;
  parts.push_back(std::move(shift));
  parts.push_back(std::move(reduce));
  return ComposeSections(absl::StrCat("conv_ring_", taps, "x", chan), std::move(parts), target);
}

bool RingIsMatrix(const proto::CausalConvSpec& spec, const Target& target) {
  if (RowNeedsBlocking(spec.taps() * spec.chan(), target)) return true;
  proto::CausalConvSpec step = spec;
  step.set_rows(1);
  const std::vector<OperandRef> ops{{"x", {}}, {"w", {}}, {"cs", {}}};
  absl::StatusOr<Composition> flat = FlatCausalConv(step, ops, "y", target);
  if (!flat.ok()) return true;
  for (const Section& s : flat->sections) {
    if (SiteFootprint(s, target) > target.max_local_mem_bytes()) return true;
  }
  return false;
}

absl::StatusOr<Composition> FromCausalConv(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "causal_conv", 3));
  const proto::CausalConvSpec& c = spec.causal_conv();
  RETURN_IF_ERROR(CheckConvSpec(c));
  // Every form sums its taps in one unrolled body.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a causal conv of ", c.taps(), " taps"), "taps", c.taps()));
  // Every form folds (or moves) at the seed's AccPolicy::F32.
  RETURN_IF_ERROR(RequireFp32Accumulator("a causal conv", target));
  if (c.rows() > 1) return BlockCausalConv(c, ops, spec.out(), target);
  if (RingIsMatrix(c, target)) return BlockedCausalConv(c, ops, spec.out(), target);
  return FlatCausalConv(c, ops, spec.out(), target);
}

}  // namespace spatial
