// ★ GATED DELTANET AT REAL WIDTH — the head becomes the WORK ITEM (seed 002, original lines 12219-12843).
//
// The flat form keeps the whole hv·d² memory resident and distinguishes heads with a banded body: at Qwen3.8's real
// geometry that is a 786,432-element buffer and 6,144 bands. Neither survives contact with a site.
//
// ★ WHY THE HEAD HAS TO RIDE THE ITEM'S COORDINATE. A Generic's maps and body cannot see WHERE the work item sits, so
// the flat forms use one enormous item. A LOAD addresses tiles through TileAddr.steps, which DO read the item's
// coordinate — so the head is selected when the data is fetched, not when it is used.
//
// ★ AND WHY THE COORDINATE IS (kh, g) RATHER THAN (h, ·). The memory is indexed by the v-head h while k and q are indexed
// by h mod hk, which is not affine in h. Splitting the head as h = g·hk + kh and carrying BOTH halves in the item's
// coordinate makes each index affine in its own axis: k steps by kh, the memory by both.
//
// ★ THE A-BLOCK IS A STAGE, NOT AN ITEM. A head's memory is an nb x nb tile square — sixteen tiles against an
// eight-tile accumulator — so each a-block (a tile row of the square) is its own chain of stages inside the head's
// item: its prediction, its look S·q, its update, its store, each page nb tiles wide. hv items, not hv·nb.
//
// ★ THIS ONCE DID NOT FINISH, AND THE REASON WAS NOT HERE (the seed): blocking gated delta by head produced a layer of
// ~14,800 stages whose certification ran sixteen minutes, because one check was stores x ops. bench/gdn_bench.cc keeps
// lowering, composing and certifying this form at its real shape under DESIGN §11's budget.
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/carried/gated_delta.h"
#include "lowerings/matmul/matmul.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// ★ A BROADCAST IS A MATMUL AGAINST A SELECTION MATRIX. α and β are per-head SCALARS, the one thing a blocked section
// cannot reach: element h of an hv-long vector lives at tile h/tw offset h%tw, a LOAD selects only tiles, and a MAP
// cannot see which item it runs for. But alpha_t[r, h·tw + j] = α[r, h] is exactly α · SEL for the constant
// hv x (hv·tw) matrix SEL[h, c] = 1 iff c/tw == h — and a matmul is the one operation this compiler already streams.
// So the scalar becomes ONE TILE PER HEAD, which a tile address CAN reach. Row r's tiles are tile row r / tile, its
// values plane row r mod tile of each.
absl::StatusOr<Composition> Broadcast(const proto::GatedDeltaSpec& spec, const OperandRef& src, const std::string& dst,
                                      const std::string& sel, const Target& target) {
  const int64_t hv = spec.hv(), tw = target.tile_cols();
  // The selection matrix is hv x hv*tw values, embedded: checked before its fill is built.
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a blocked gated delta's broadcast over ", hv, " heads"),
                              CheckedMul(CheckedMul(hv, hv), tw)));
  proto::OpSpec mm;
  mm.set_out(dst);
  proto::Operand* a = mm.add_operands();
  a->set_name(src.name);
  *a->mutable_fill() = src.fill;
  proto::Operand* b = mm.add_operands();
  b->set_name(sel);
  proto::Fill::Overrides* o = b->mutable_fill()->mutable_overrides();
  o->mutable_base()->set_const_i(0);
  for (int64_t h = 0; h < hv; ++h) {
    for (int64_t j = 0; j < tw; ++j) {
      proto::Fill::Set* s = o->add_sets();
      s->set_at(h * hv * tw + h * tw + j);
      s->set_value(1);
    }
  }
  mm.mutable_matmul()->set_m(spec.rows());
  mm.mutable_matmul()->set_n(hv * tw);
  mm.mutable_matmul()->set_k(hv);
  ASSIGN_OR_RETURN(Composition c, FromMatmul(mm, target));
  // The selection matrix is a compile-time constant: the matmul declares its B an Input; embedded, it is a Param.
  for (Section& s : c.sections) {
    for (Tensor& t : s.tensors) {
      if (t.name == sel) t.role = TensorRole::kParam;
    }
  }
  return c;
}

struct Step {
  const proto::GatedDeltaSpec& spec;
  const GdNames& names;
  int64_t head;
  const StateName& state;
  const Target& target;
  Precision p;
  int64_t eps_nano;
};

// Row r's step, ONE PASS OVER EACH HEAD'S MEMORY. ★ EVERY TERM OF THE STEP IS LOCAL TO AN A-BLOCK. Row a of the
// prediction u = S·k, of the update S'[a, ·] = α·S[a, ·] + β·(v[a] − α·u[a])·k and of the output (S'·q)[a] read only
// row a of the memory, and the output needs no second read of it: S'·q = α·(S·q) + β·(v − α·u)·(k·q), k·q one number
// per head. So the item loads each a-block ONCE, forms u and w = S·q from it, writes the updated a-block back, and
// assembles the output from w, u and k·q: the memory is read once and written once a step.
absl::StatusOr<Composition> StepSection(const Step& c, int64_t r, int64_t pages) {
  const proto::GatedDeltaSpec& spec = c.spec;
  const int64_t hv = spec.hv(), hk = spec.hk(), d = spec.d(), rows = spec.rows();
  const int64_t tr = c.target.tile_rows(), tw = c.target.tile_cols();
  const int64_t nb = d / tw;
  const int64_t out_len = hv * d, s_rows = hv * d;
  const int64_t qk_t = hk * nb, v_t = hv * nb;
  const Precision p = c.p;
  const Precision acc = Precision::kFp32;
  const OperandRef &q = c.names.ops[0], &k = c.names.ops[1], &v = c.names.ops[2], &z = c.names.ops[3];
  const OperandRef &st = c.names.ops[6], &gn = c.names.ops[7];
  const std::string& out = c.names.out;
  // Tile steps that rebuild h = g·hk + kh from the coordinate (kh, g).
  auto head_steps = [hk](int64_t per) -> std::vector<Term> {
    return {{LoopVar::kItemY, per}, {LoopVar::kItemX, hk * per}};
  };

  Template t(tr, tw);
  // The output first: the step's result, whose strips are the items' rectangles. A block's flat output is written
  // in part by each row's step: State.
  const TensorId y = rows == 1 ? t.AddTensor(out, TensorRole::kOutput, 1, out_len, p, TensorInit::Zero())
                               : t.AddTensor(out, TensorRole::kState, 1, rows * out_len, p, TensorInit::Zero());
  ASSIGN_OR_RETURN(TensorInit st_init, InitOf(st.fill, s_rows * d));
  const std::string before = c.state(r), after = c.state(r + 1);
  // The carried memory keeps its one name and is updated in place (State: the load is a read, the store a write);
  // a version of the op's own memory is read as an Input and written in place of its own zeros (State, written once).
  const bool in_place = before == after;
  const TensorId s_in =
      t.AddTensor(before, in_place ? TensorRole::kState : TensorRole::kInput, s_rows, d, p, std::move(st_init));
  const TensorId s_next = in_place ? s_in : t.AddTensor(after, TensorRole::kState, s_rows, d, p, TensorInit::Zero());
  auto input = [&](const OperandRef& o, int64_t n) -> absl::StatusOr<TensorId> {
    ASSIGN_OR_RETURN(TensorInit init, InitOf(o.fill, n));
    return t.AddTensor(o.name, TensorRole::kInput, 1, n, p, std::move(init));
  };
  ASSIGN_OR_RETURN(TensorId qt, input(q, rows * hk * d));
  ASSIGN_OR_RETURN(TensorId kt, input(k, rows * hk * d));
  ASSIGN_OR_RETURN(TensorId vt, input(v, rows * out_len));
  ASSIGN_OR_RETURN(TensorId zt, input(z, rows * out_len));
  ASSIGN_OR_RETURN(TensorInit gn_init, InitOf(gn.fill, d));
  const TensorId gnt = t.AddTensor(gn.name, TensorRole::kParam, 1, d, p, std::move(gn_init));
  const TensorId alpha = t.AddTensor(absl::StrCat(out, "__alpha_t"), TensorRole::kInput, rows, hv * tw, p,
                                     TensorInit::External());
  const TensorId beta = t.AddTensor(absl::StrCat(out, "__beta_t"), TensorRole::kInput, rows, hv * tw, p,
                                    TensorInit::External());
  const TensorId ones = OnesTile(t, absl::StrCat(out, "__gd_scaler"), p);

  // The head's operands, each loaded once: k and q at its k-head, v at its v-head, α and β at plane row r mod tile of
  // the head's tile.
  const BufferId kin = t.AddBufferDeep("in_k", 1, nb, p);
  const BufferId qin = t.AddBufferDeep("in_q", 1, nb, p);
  const BufferId vin = t.AddBufferDeep("in_v", 1, nb, p);
  const BufferId ain = t.AddBufferDeep("in_a", 1, 1, p);
  const BufferId bin = t.AddBufferDeep("in_b", 1, 1, p);
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, p);
  const StageId lk = t.AddLoadBlockAt("load_k", kt, r * qk_t, {{LoopVar::kItemY, nb}}, {.w = nb, .pitch = nb}, kin);
  const StageId lq = t.AddLoadBlockAt("load_q", qt, r * qk_t, {{LoopVar::kItemY, nb}}, {.w = nb, .pitch = nb}, qin);
  const StageId lv = t.AddLoadBlockAt("load_v", vt, r * v_t, head_steps(nb), {.w = nb, .pitch = nb}, vin);
  const StageId la = t.AddLoadBlockAt("load_a", alpha, (r / tr) * hv, head_steps(1), {}, ain);
  const StageId lb = t.AddLoadBlockAt("load_b", beta, (r / tr) * hv, head_steps(1), {}, bin);
  const StageId l_sc = t.AddLoad("load_scaler", ones, {}, 1, sc_in);
  const BufferId gin = t.AddBufferDeep("in_gn", pages, nb, p);
  const StageId lg = t.AddLoad("load_gn", gnt, {}, nb, gin);
  const ElemAccess scalar = Fixed((r % tr) * tw);
  const ElemAccess column = PerColMap();
  const ElemAccess down{0, {{LoopVar::kRow, 1}}, std::nullopt};
  // Fold b (the ROW), keep a (the COLUMN): Σ_b S[a, b]·x[b] lands at column a of the one-tile page.
  auto matvec = [&](const std::string& name, BufferId s, BufferId x, BufferId into) {
    return t.AddGeneric(name, {{LoopVar::kRow, d, IterKind::kReduceSum}, {LoopVar::kCol, tw, IterKind::kParallel}},
                        {s, x, sc_in},
                        {ElemAccess{0, {{LoopVar::kCol, d}, {LoopVar::kRow, 1}}, std::nullopt}, down, ConstMap()},
                        PerColMap(), Mul(Op(0), Op(1)), into);
  };
  struct Part {
    BufferId u, w, sout;
    StageId update;
    int64_t j;
  };
  std::vector<Part> parts;
  for (int64_t j = 0; j < nb; ++j) {
    const BufferId sin = t.AddBufferDeep(absl::StrCat("in_s", j), 1, nb, p);
    const StageId ls = t.AddLoadBlockAt(absl::StrCat("load_s", j), s_in, j * nb, head_steps(nb * nb),
                                        {.w = nb, .pitch = nb}, sin);
    const BufferId u = t.AddScratchDeep(absl::StrCat("u", j), 1, 1, acc);
    const BufferId w = t.AddScratchDeep(absl::StrCat("w", j), 1, 1, acc);
    const StageId s_u = matvec(absl::StrCat("gd_predict", j), sin, kin, u);
    matvec(absl::StrCat("gd_look", j), sin, qin, w);
    // S'[a, b] = α·S[a, b] + β·(v[a] − α·u[a])·k[b] — 0:S 1:k 2:α 3:β 4:v 5:u.
    const BufferId sout = t.AddBufferDeep(absl::StrCat("out_s", j), pages, nb, p);
    Body coef = Mul(Op(3), Sub(Op(4), Mul(Op(2), Op(5))));
    const StageId s_upd = t.AddGeneric(
        absl::StrCat("gd_update", j), {{LoopVar::kRow, tr, IterKind::kParallel}, {LoopVar::kCol, d,
                                                                                  IterKind::kParallel}},
        {sin, kin, ain, bin, vin, u},
        {Map2(0, d, 1), column, scalar, scalar, ElemAccess{j * tw, {{LoopVar::kRow, 1}}, std::nullopt}, down},
        Map2(0, d, 1), Add(Mul(Op(2), Op(0)), Mul(coef, Op(1))), sout);
    // Each a-block's write depends on its read: the update reads the prediction formed from the loaded block.
    t.AddEdge(ls, sin, s_u);
    t.AddEdge(s_u, u, s_upd);
    parts.push_back({u, w, sout, s_upd, j});
  }
  // k·q, one number per head, across row 0 of its page.
  const int64_t one_w = tw;
  const BufferId kq = t.AddScratch("kq", 1, acc);
  const StageId s_kq = t.AddGeneric("gd_kq", HeadSpace(1, d, IterKind::kReduceSum), {kin, qin, sc_in},
                                    {column, column, ConstMap()}, PerRowMap(one_w), Mul(Op(0), Op(1)), kq);
  // o[c] = (α·w[a] + β·(v[c] − α·u[a])·(k·q)) / √d, a = c − j·tile in a-block j's band.
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(c.head));
  const BufferId ovec = t.AddScratch("gd_o", nb, acc);
  std::vector<BufferId> o_ins{ain, bin, vin, kq};
  std::vector<ElemAccess> o_maps{scalar, scalar, column, Fixed(0)};
  std::vector<std::pair<int64_t, Body>> bands;
  for (const Part& part : parts) {
    const ElemAccess shift{-part.j * tw, {{LoopVar::kCol, 1}}, std::nullopt};
    o_ins.insert(o_ins.end(), {part.u, part.w});
    o_maps.insert(o_maps.end(), {shift, shift});
    const int us = static_cast<int>(o_ins.size()) - 2, ws = us + 1;
    Body value = Mul(Add(Mul(Op(0), Op(ws)), Mul(Mul(Op(1), Sub(Op(2), Mul(Op(0), Op(us)))), Op(3))),
                     Const(inv_sqrt_d));
    bands.push_back({(part.j + 1) * tw, value});
  }
  const int64_t w = nb * tw;
  const StageId s_o = t.AddGeneric("gd_o", FlatSpace(d), o_ins, o_maps, IdentMap(w), Banded(bands), ovec);
  for (auto [l, b, to] : {std::tuple{lk, kin, s_kq}, {lq, qin, s_kq}, {lv, vin, s_o}, {la, ain, s_o}, {lb, bin, s_o},
                          {l_sc, sc_in, s_kq}}) {
    t.AddEdge(l, b, to);
  }
  // The head's RMSNorm, then the weight and the gate.
  const BufferId sq = t.AddScratch("o_sq", nb, acc);
  const StageId s_sq = t.AddGeneric("square", FlatSpace(w), {ovec, ovec}, {IdentMap(w), IdentMap(w)}, IdentMap(w),
                                    Mul(Op(0), Op(1)), sq);
  const BufferId ssum = t.AddScratch("o_sum", 1, acc);
  const StageId s_sum = t.AddGeneric("o_sum", HeadSpace(1, d, IterKind::kReduceSum), {sq, sc_in},
                                     {Map2(0, w, 1), ConstMap()}, PerRowMap(one_w), Op(0), ssum);
  const BufferId inv = t.AddScratch("o_inv", 1, acc);
  const StageId s_inv = t.AddGeneric("o_rsqrt", HeadSpace(1, tw), {ssum}, {PerRowMap(one_w)}, PerRowMap(one_w),
                                     Unary(SfpuKind::Rsqrt(c.eps_nano, c.head), Op(0)), inv);
  const BufferId ob = t.AddBufferDeep("out", pages, nb, p);
  // The gate's z at the head's strip, loaded as v is: one buffer (every buffer is a circular buffer of the site,
  // and a site has num_cbs of them).
  const BufferId zin = t.AddBufferDeep("in_z", 1, nb, p);
  const StageId lz = t.AddLoadBlockAt("load_z", zt, r * v_t, head_steps(nb), {.w = nb, .pitch = nb}, zin);
  // y = o · inv · GN · gate(z).
  const Body gated = Mul(Mul(Mul(Op(0), Op(1)), Op(2)), DeltaGate(spec.gate(), Op(3)));
  const StageId s_out = t.AddGeneric("gd_gate", FlatSpace(w), {ovec, inv, gin, zin},
                                     {IdentMap(w), Fixed(0), IdentMap(w), IdentMap(w)}, IdentMap(w), gated, ob);
  // Where the head's strip of row r sits in the flat output.
  const int64_t y_col = r * v_t;
  const StageId store = t.AddStoreBlock("store_y", y, y_col, head_steps(nb), {.w = nb, .pitch = nb}, ob);
  t.AddEdge(s_o, ovec, s_sq);
  t.AddEdge(s_sq, sq, s_sum);
  t.AddEdge(s_sum, ssum, s_inv);
  t.AddEdge(s_inv, inv, s_out);
  t.AddEdge(lg, gin, s_out);
  t.AddEdge(lz, zin, s_out);
  t.AddEdge(s_out, ob, store);
  // The updated a-blocks leave last: the output's store is the section's result (its strips are the items' rects),
  // and nothing after an a-block's update reads its page but its store.
  for (const Part& part : parts) {
    const StageId st_s = t.AddStoreBlock(absl::StrCat("store_s", part.j), s_next, part.j * nb, head_steps(nb * nb),
                                         {.w = nb, .pitch = nb}, part.sout);
    t.AddEdge(part.update, part.sout, st_s);
  }
  // One item per v-head, coordinate (kh, g). The item's RECT is its strip of the output, the step's result; the
  // memory's nb x nb square it also writes is covered by the tiles its stores address.
  std::vector<WorkItem> items;
  for (int64_t h = 0; h < hv; ++h) items.push_back(WorkItem{.id = h, .y = h % hk, .x = h / hk,
                                                            .out = TileRect{.col0_t = y_col + h * nb, .w_t = nb}});
  const std::string tag = rows == 1 ? "" : absl::StrCat("_row", r);
  return FinishSection(t, absl::StrCat("gd_step_", hv, "x", d, tag), std::move(items), Precision::kFp32,
                       ApproxIn("gated-delta step", p), c.target);
}

}  // namespace

namespace {

absl::StatusOr<Composition> Blocked(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                    const StateName& state, bool may_chunk, const Target& target) {
  const int64_t hv = spec.hv(), hk = spec.hk(), d = spec.d();
  const int64_t tw = target.tile_cols();
  if (d % tw != 0 || hv % hk != 0) {
    return NotLowered(
        "a blocked gated delta needs a head dimension in whole tiles and v-heads a multiple of k-heads");
  }
  // The matvecs fold a tile's ROWS into its COLUMNS: a-block row a is plane row a and output column a.
  if (target.tile_rows() != tw) return NotLowered("a blocked gated delta on a tile that is not square");
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  ASSIGN_OR_RETURN(int64_t eps_nano, EpsNano("gated_delta", spec.eps()));
  // One item per value head; without chunks, one step section per row. Checked before anything is built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a blocked gated delta of ", spec.hv(), " heads"), spec.hv()));
  if (may_chunk && TakesChunks(spec.rows(), target.tile_rows())) {
    RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a chunked gated delta of ", spec.rows(), " rows"), "chunks",
                                 CheckedCeilDiv(spec.rows(), target.tile_rows())));
  } else {
    RETURN_IF_ERROR(
        UnrollBudget(absl::StrCat("a blocked gated delta of ", spec.rows(), " rows"), "row steps", spec.rows()));
  }
  std::vector<Composition> parts;
  ASSIGN_OR_RETURN(Composition alpha_t, Broadcast(spec, names.ops[5], absl::StrCat(names.out, "__alpha_t"),
                                                  absl::StrCat(names.out, "__sel_a"), target));
  ASSIGN_OR_RETURN(Composition beta_t, Broadcast(spec, names.ops[4], absl::StrCat(names.out, "__beta_t"),
                                                 absl::StrCat(names.out, "__sel_b"), target));
  parts.push_back(std::move(alpha_t));
  parts.push_back(std::move(beta_t));
  if (may_chunk && TakesChunks(spec.rows(), target.tile_rows())) {
    return ChunkedGatedDelta(spec, names, head, state, std::move(parts), target);
  }
  const Step step{spec, names, head, state, target, p, eps_nano};
  for (int64_t r = 0; r < spec.rows(); ++r) {
    ASSIGN_OR_RETURN(Composition s, Paged([&](int64_t pages) { return StepSection(step, r, pages); }, target));
    parts.push_back(std::move(s));
  }
  return ComposeSections(absl::StrCat("gd_step_", hv, "x", d), std::move(parts), target);
}

}  // namespace

absl::StatusOr<Composition> BlockedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                              const StateName& state, const Target& target) {
  return Blocked(spec, names, head, state, /*may_chunk=*/true, target);
}

absl::StatusOr<Composition> SteppedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                              const StateName& state, const Target& target) {
  return Blocked(spec, names, head, state, /*may_chunk=*/false, target);
}

}  // namespace spatial
