#include "lowerings/moe/moe_blocked.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/k_blocks.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The table tile of round ITEM_Y (a pick or a weight): element 0 of tile r.
BufferId RoundTile(Template& t, const std::string& name, const std::string& tensor, int64_t k, Precision p) {
  const TensorId id = t.AddTensor(tensor, TensorRole::kInput, 1, k * t.tile_cols(), p, TensorInit::External());
  const BufferId buf = t.AddBuffer(absl::StrCat("in_", name), 1, p);
  t.AddLoad(absl::StrCat("load_", name), id, {{LoopVar::kItemY, 1}}, 1, buf);
  return buf;
}

// Item (r, ot) of a round's output tiles: r·width_t + ot of a 1 x k·width row.
std::vector<WorkItem> RoundItems(int64_t k, int64_t width_t) {
  std::vector<WorkItem> items;
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t o = 0; o < width_t; ++o) {
      items.push_back(WorkItem{.id = r * width_t + o, .y = r, .x = o,
                               .out = TileRect{.row0_t = 0, .col0_t = r * width_t + o, .h_t = 1, .w_t = 1}});
    }
  }
  return items;
}

// The chosen expert's bias tile ITEM_X of its row of `width_t` tiles in a 1 x ne·width table, gathered.
BufferId BiasTile(Template& t, const std::string& part, const OperandRef& op, TensorInit init, int64_t ne,
                  int64_t width_t, BufferId pick, Precision p, Precision ix) {
  const TensorId table = t.AddTensor(op.name, TensorRole::kInput, 1, ne * width_t * t.tile_cols(), p, std::move(init));
  const BufferId page = t.AddBufferDeep(absl::StrCat("in_", part), 1, 1, p);
  const IndirectTile gather{IndexCopy(t, part, pick, ix), width_t, 0, ne - 1};
  t.AddLoadPattern(absl::StrCat("load_", part), table,
                   AccessPattern{TileAddr{0, {{LoopVar::kItemX, 1}}, gather}, 1, 1, 1, 1}, page);
  return page;
}

}  // namespace

bool MoeBlocks(const proto::MoeSpec& m, const Target& target) {
  const int64_t tw = target.tile_cols();
  return target.tile_rows() == tw && m.d() % tw == 0 && m.dff() % tw == 0;
}

absl::StatusOr<Composition> MoeBlockedRouter(const proto::OpSpec& spec, const MoeOperands& layout,
                                             const std::vector<OperandRef>& operands, const MoeNames& names,
                                             const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), ne = m.ne(), rows = std::max<int64_t>(m.tokens(), 1);
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t d_t = t.TilesOf(d), e_t = t.TilesOf(ne), kb = KBlock(d_t);
  const int64_t rows_t = CeilDiv(rows, t.tile_rows());
  constexpr Precision acc = Precision::kFp32;
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(operands[0].fill, rows * d));
  ASSIGN_OR_RETURN(TensorInit w_init, InitOf(operands[1].fill, d * ne));
  // X is one tensor, so one datatype, in every section of the block.
  const TensorId x = t.AddTensor(operands[0].name, TensorRole::kInput, rows, d, elem, std::move(x_init));
  const TensorId wr = t.AddTensor(operands[1].name, TensorRole::kInput, d, ne, elem, std::move(w_init));
  // Item (token tile ITEM_Y, expert tile ITEM_X): K block c is x's tiles [c·kb, +kb) of its tile row against Wr's
  // tile column ITEM_X, rows [c·kb, +kb). A prefill's token tiles share the router's tiles (multicast).
  std::vector<Term> x_steps, w_steps{{LoopVar::kItemX, 1}};
  if (rows_t > 1) x_steps.push_back({LoopVar::kItemY, d_t});
  std::vector<KOperand> ops{
      KOperand{.name = "x", .tensor = x, .page = t.AddBuffer("in_x", kb, elem), .steps = x_steps, .k_step = kb,
               .block_w = kb},
      KOperand{.name = "router", .tensor = wr, .page = t.AddBuffer("in_router", kb, elem), .steps = w_steps,
               .k_step = kb * e_t, .block_h = kb, .pitch = e_t}};
  if (rows_t > 1) {
    ops[0].multicast = LoopVar::kItemX;
    ops[1].multicast = LoopVar::kItemY;
  }
  const BufferId product = t.AddScratch("router_product", 1, acc);
  t.SetPhase(AddKBlocked(t, d_t / kb, kb, ops, {KProduct{"router", 0, 1, false, MathFidelity::kHiFi4, product}}, ne,
                         Precision::kInt32));
  // One token is row 0 of its tile (tt-metal pads a decode's M to a tile); a prefill's tile holds a row a token.
  const int64_t tw = t.tile_cols();
  const std::vector<IterSpec> space = rows > 1 ? TileSpace(t.tile_rows(), tw) : FlatSpace(tw);
  std::vector<BufferId> ins{product};
  std::vector<ElemAccess> maps{rows > 1 ? IdentMap(tw) : At(0)};
  Body body = Op(0);
  if (layout.router_bias >= 0) {
    const OperandRef& b = operands[layout.router_bias];
    ASSIGN_OR_RETURN(TensorInit b_init, InitOf(b.fill, ne));
    const TensorId bt = t.AddTensor(b.name, TensorRole::kInput, 1, ne, acc, std::move(b_init));
    const BufferId bias = t.AddBuffer("in_router_bias", 1, acc);
    t.AddLoad("load_router_bias", bt, {{LoopVar::kItemX, 1}}, 1, bias);
    ins.push_back(bias);
    maps.push_back(At(0));  // row 0 of the bias tile, for every token's row
    body = Add(Op(0), Op(1));
  }
  const BufferId out = t.AddBuffer("logits", 1, acc);
  t.AddGeneric(layout.router_bias >= 0 ? "router_bias" : "pack", space, std::move(ins), std::move(maps),
               IdentMap(tw), std::move(body), out);
  const TensorId lt = t.AddTensor(names.logits, TensorRole::kOutput, rows, ne, acc, TensorInit::Zero());
  std::vector<Term> store_steps{{LoopVar::kItemX, 1}};
  if (rows_t > 1) store_steps.push_back({LoopVar::kItemY, e_t});
  t.AddStore("store_logits", lt, store_steps, 1, out);
  WireFirstReaders(t);
  return FinishSection(t, rows > 1 ? absl::StrCat("moe_router_", rows, "x", d, "x", ne)
                                   : absl::StrCat("moe_router_", d, "x", ne),
                       rows_t > 1 ? TokenTilesInner(rows_t, e_t, 1) : ItemsPerTile(e_t), acc,
                       ApproxIn("moe router", acc), target);
}

namespace {

// "moe_up_...": item (r, ot) folds x against tile row ot of the chosen expert's gate and up slabs, K block by block,
// then takes its biases and the gated activation into tile r·f_t + ot of the hidden row.
absl::StatusOr<Section> UpSection(const proto::OpSpec& spec, const MoeOperands& layout,
                                  const std::vector<OperandRef>& operands, const MoeNames& names, Precision elem,
                                  Precision ix, const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), dff = m.dff(), ne = m.ne(), k = m.k();
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t tw = t.tile_cols(), d_t = t.TilesOf(d), f_t = t.TilesOf(dff), kb = KBlock(d_t);
  constexpr Precision acc = Precision::kFp32;
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(operands[0].fill, d));
  const TensorId x = t.AddTensor(operands[0].name, TensorRole::kInput, 1, d, elem, std::move(x_init));
  const BufferId pick = RoundTile(t, "pick", names.picks, k, ix);
  std::vector<KOperand> ops{KOperand{.name = "x", .tensor = x, .page = t.AddBuffer("in_x", kb, elem), .k_step = kb,
                                     .block_w = kb, .multicast = LoopVar::kItemX}};
  // Expert b's gate (or up) row o is row b·dff + o of an (ne·dff) x d table: tile row b·f_t + ot.
  for (int i = 0; i < 2; ++i) {
    const char* part = i == 0 ? "gate" : "up";
    ASSIGN_OR_RETURN(TensorInit init, InitOf(operands[2 + i].fill, ne * dff * d));
    const TensorId w = t.AddTensor(operands[2 + i].name, TensorRole::kInput, ne * dff, d, elem, std::move(init));
    ops.push_back(KOperand{.name = part, .tensor = w, .page = t.AddBuffer(absl::StrCat("in_", part), kb, elem),
                           .steps = {{LoopVar::kItemX, d_t}}, .k_step = kb, .block_w = kb, .pick = pick,
                           .pick_stride = f_t * d_t});
  }
  const BufferId gate = t.AddScratch("gate", 1, acc), up = t.AddScratch("up", 1, acc);
  t.SetPhase(AddKBlocked(t, d_t / kb, kb, ops,
                         {KProduct{"gate", 0, 1, true, MathFidelity::kDefault, gate},
                          KProduct{"up", 0, 2, true, MathFidelity::kDefault, up}},
                         ne, ix));
  // gated(w·gate + bg, w·up + bu): "w·(x·W) is (w·x)·W", so weighed inputs weigh the products.
  std::vector<BufferId> ins{gate, up};
  std::vector<ElemAccess> maps{At(0), At(0)};
  Body terms[2] = {Op(0), Op(1)};
  if (m.weigh_inputs()) {
    ins.push_back(RoundTile(t, "weight", names.weights, k, acc));
    maps.push_back(Fixed(0));
    const int w = static_cast<int>(ins.size()) - 1;
    for (Body& b : terms) b = Mul(Op(w), b);
  }
  const int bias_at[2] = {layout.gate_bias, layout.up_bias};
  for (int i = 0; i < 2; ++i) {
    if (bias_at[i] < 0) continue;
    ASSIGN_OR_RETURN(TensorInit init, InitOf(operands[bias_at[i]].fill, ne * dff));
    ins.push_back(BiasTile(t, i == 0 ? "gate_bias" : "up_bias", operands[bias_at[i]], std::move(init), ne, f_t, pick,
                           elem, ix));
    maps.push_back(At(0));
    terms[i] = Add(terms[i], Op(static_cast<int>(ins.size()) - 1));
  }
  // The down projection's operand: the matrix engine takes bf16 (the certifier holds it to that), so the hidden
  // row is packed to the datapath's precision here, as tt-metal's MoE stores its SwiGLU before the down matmul.
  // The seed keeps it at fp32; a machine cannot feed that to its FPU.
  const BufferId hidden = t.AddBuffer("hidden", 1, elem);
  t.AddGeneric("hidden", FlatSpace(tw), std::move(ins), std::move(maps), IdentMap(tw),
               MoeGated(m, terms[0], terms[1]), hidden);
  const TensorId ht = t.AddTensor(names.hidden, TensorRole::kOutput, 1, k * dff, elem, TensorInit::Zero());
  t.AddStore("store_hidden", ht, {{LoopVar::kItemY, f_t}, {LoopVar::kItemX, 1}}, 1, hidden);
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c, FinishSection(t, absl::StrCat("moe_up_", ne, "x", k, "_", d, "x", dff),
                                                RoundItems(k, f_t), acc,
                                                ApproxIn("mixture-of-experts gate/up and SwiGLU", elem), target));
  return std::move(c.sections[0]);
}

// "moe_down_...": item (r, ot) folds round r's hidden row against tile row ot of the chosen expert's down slab, then
// takes its bias, into tile r·d_t + ot of the experts' outputs.
absl::StatusOr<Section> DownSection(const proto::OpSpec& spec, const MoeOperands& layout,
                                    const std::vector<OperandRef>& operands, const MoeNames& names, Precision elem,
                                    Precision ix, const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), dff = m.dff(), ne = m.ne(), k = m.k();
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t tw = t.tile_cols(), d_t = t.TilesOf(d), f_t = t.TilesOf(dff), kb = KBlock(f_t);
  constexpr Precision acc = Precision::kFp32;
  const BufferId pick = RoundTile(t, "pick", names.picks, k, ix);
  const TensorId ht = t.AddTensor(names.hidden, TensorRole::kInput, 1, k * dff, elem, TensorInit::External());
  ASSIGN_OR_RETURN(TensorInit init, InitOf(operands[4].fill, ne * d * dff));
  // Expert b's down row o is row b·d + o of an (ne·d) x dff table: tile row b·d_t + ot.
  const TensorId wd = t.AddTensor(operands[4].name, TensorRole::kInput, ne * d, dff, elem, std::move(init));
  std::vector<KOperand> ops{
      KOperand{.name = "hidden", .tensor = ht, .page = t.AddBuffer("in_hidden", kb, elem),
               .steps = {{LoopVar::kItemY, f_t}}, .k_step = kb, .block_w = kb},
      KOperand{.name = "down", .tensor = wd, .page = t.AddBuffer("in_down", kb, elem),
               .steps = {{LoopVar::kItemX, f_t}}, .k_step = kb, .block_w = kb, .pick = pick,
               .pick_stride = d_t * f_t}};
  const BufferId down = t.AddScratch("down", 1, acc);
  t.SetPhase(AddKBlocked(t, f_t / kb, kb, ops, {KProduct{"down", 0, 1, true, MathFidelity::kDefault, down}}, ne, ix));
  std::vector<BufferId> ins{down};
  std::vector<ElemAccess> maps{At(0)};
  Body body = Op(0);
  if (layout.down_bias >= 0) {
    ASSIGN_OR_RETURN(TensorInit b_init, InitOf(operands[layout.down_bias].fill, ne * d));
    ins.push_back(BiasTile(t, "down_bias", operands[layout.down_bias], std::move(b_init), ne, d_t, pick, elem, ix));
    maps.push_back(At(0));
    body = Add(Op(0), Op(1));
  }
  const BufferId y = t.AddBuffer("expert_out", 1, acc);
  t.AddGeneric("expert_out", FlatSpace(tw), std::move(ins), std::move(maps), IdentMap(tw), std::move(body), y);
  const TensorId yt = t.AddTensor(names.down, TensorRole::kOutput, 1, k * d, acc, TensorInit::Zero());
  t.AddStore("store_down", yt, {{LoopVar::kItemY, d_t}, {LoopVar::kItemX, 1}}, 1, y);
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c, FinishSection(t, absl::StrCat("moe_down_", ne, "x", k, "_", d, "x", dff),
                                                RoundItems(k, d_t), acc,
                                                ApproxIn("mixture-of-experts down projection", elem), target));
  return std::move(c.sections[0]);
}

// "moe_combine_{k}x{d}": item ot sums the k rounds' tile ot, each by its weight (or as it is, when the inputs took
// the weights), and renormalizes: Σ_r w_r·y_r / Σ_r w_r is the desugar's Σ_r (w_r / Σ w)·y_r.
absl::StatusOr<Section> CombineSection(const proto::OpSpec& spec, const MoeNames& names, Precision elem,
                                       const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), k = m.k();
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t tw = t.tile_cols(), d_t = t.TilesOf(d);
  constexpr Precision acc = Precision::kFp32;
  const TensorId yt = t.AddTensor(names.down, TensorRole::kInput, 1, k * d, acc, TensorInit::External());
  const BufferId ys = t.AddBufferDeep("in_down", 1, k, acc);
  t.AddLoadPattern("load_down", yt, AccessPattern{TileAddr{0, {{LoopVar::kItemX, 1}}, std::nullopt}, 1, k, d_t, k},
                   ys);
  std::vector<BufferId> ins{ys};
  // Round r's output element c sits at r·TC + c of the page, its weight at r·TC of the weights'.
  std::vector<ElemAccess> maps{ElemAccess{0, {{LoopVar::kRow, tw}, {LoopVar::kCol, 1}}, std::nullopt}};
  Body term = Op(0);
  if (!m.weigh_inputs()) {
    const TensorId wt = t.AddTensor(names.weights, TensorRole::kInput, 1, k * tw, acc, TensorInit::External());
    const BufferId ws = t.AddBufferDeep("in_weights", 1, k, acc);
    t.AddLoad("load_weights", wt, {}, k, ws);
    ins.push_back(ws);
    maps.push_back(ElemAccess{0, {{LoopVar::kRow, tw}}, std::nullopt});
    term = Mul(Op(1), Op(0));
  }
  const BufferId sum = t.AddScratch("weighted", 1, acc);
  t.AddGeneric("weighted", {{LoopVar::kRow, k, IterKind::kReduceSum}, {LoopVar::kCol, tw}}, std::move(ins),
               std::move(maps), PerColMap(), std::move(term), sum);
  std::vector<BufferId> cins{sum};
  std::vector<ElemAccess> cmaps{At(0)};
  Body combine = Op(0);
  if (m.renormalize()) {
    const TensorId nt = t.AddTensor(names.norm, TensorRole::kInput, 1, 1, acc, TensorInit::External());
    const BufferId norm = t.AddBufferDeep("in_norm", 1, 1, acc);
    t.AddLoad("load_norm", nt, {}, 1, norm);
    cins.push_back(norm);
    cmaps.push_back(Fixed(0));
    combine = Mul(Op(0), Op(1));
    if (m.scale() != 0.0) combine = Mul(std::move(combine), Const(m.scale()));
  }
  const BufferId out = t.AddBuffer("out", 1, elem);
  t.AddGeneric("combine", FlatSpace(tw), std::move(cins), std::move(cmaps), IdentMap(tw), std::move(combine), out);
  const TensorId result = t.AddTensor(spec.out(), TensorRole::kOutput, 1, d, elem, TensorInit::Zero());
  t.AddStore(absl::StrCat("store_", spec.out()), result, {{LoopVar::kItemX, 1}}, 1, out);
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c, FinishSection(t, absl::StrCat("moe_combine_", k, "x", d), ItemsPerTile(d_t), acc,
                                                ApproxIn("mixture-of-experts combine", elem), target));
  return std::move(c.sections[0]);
}

}  // namespace

absl::StatusOr<Composition> MoeBlockedExperts(const proto::OpSpec& spec, const MoeOperands& layout,
                                              const std::vector<OperandRef>& operands, const MoeNames& names,
                                              const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  // An expert pick is in [0, ne).
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, m.ne() + 1));
  const int64_t d_t = TilesOf(m.d(), target), f_t = TilesOf(m.dff(), target);
  RETURN_IF_ERROR(WorkItemBudget("a mixture-of-experts gate/up section", CheckedMul(m.k(), f_t)));
  RETURN_IF_ERROR(WorkItemBudget("a mixture-of-experts down section", CheckedMul(m.k(), d_t)));
  Composition c;
  ASSIGN_OR_RETURN(Section up, UpSection(spec, layout, operands, names, elem, ix, target));
  c.sections.push_back(std::move(up));
  ASSIGN_OR_RETURN(Section down, DownSection(spec, layout, operands, names, elem, ix, target));
  c.sections.push_back(std::move(down));
  ASSIGN_OR_RETURN(Section combine, CombineSection(spec, names, elem, target));
  c.sections.push_back(std::move(combine));
  return c;
}

}  // namespace spatial
