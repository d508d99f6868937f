// The chunked Gated DeltaNet (seed 002, original lines 13073-14279).
//
// ★ A BLOCK OF ROWS IS A CHUNK AT A TIME, NOT A ROW AT A TIME. Unrolling the step over a chunk of C rows (the WY/UT
// form of the delta rule — the Gated DeltaNet paper's chunked algorithm) turns its recurrence into per-head products:
// with g_t = Σ_{s≤t} ln α_s, Γ_{ti} = e^{g_t − g_i} (i ≤ t), A_{ti} = β_t Γ_{ti} k_t·k_i (i < t), X = (I + A)⁻¹,
// U = X diag(β) V, W = X diag(β e^g) K, Δ = U − W S₀ᵀ:
//
//   O   = (diag(e^g) Q S₀ᵀ + (QKᵀ ⊙ Γ) Δ) / √d        every row's output, before its norm and gate
//   S_C = e^{g_C} S₀ + Δᵀ diag(e^{g_C − g}) K          the memory the chunk leaves
//
// Every product is ONE contraction (the K loop var), and the unit lower-triangular solve is the product
// (I + N)(I + N²)(I + N⁴)… with N = −A — ⌈log₂ C⌉ doublings, not C steps. The memory is read and written once per
// chunk instead of once per row.
//
// A chunk is ONE TILE ROW of the block's rows, so a head's chunk of Q, K, V, Z is a 1 x nb page of the DENSE table:
// the tables are read dense (rows x width). A computed page has one consumer, so what the algebra uses twice (G, A,
// the solve's factors, U, W, Δ) crosses a section as a per-chunk tensor "{out}__c{c}_{what}", loaded once per reader.
// A partial last chunk masks its rows on the contraction variable; its padding rows compute to zero, never to a NaN
// (a masked logarithm or exponential is SELECTED away, never multiplied by zero).
//
// One departure: the seed's memory section walks a head's a-blocks as sub-blocks of its item (a loop variable this
// program model does not have); here, as in the stepped form (★ THE A-BLOCK IS A STAGE, NOT AN ITEM), each a-block is
// its own chain of stages inside the head's item.
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/attention/relayout_rows.h"
#include "lowerings/carried/gated_delta.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

using Terms = std::vector<Term>;

ElemAccess M(Terms terms) { return ElemAccess{0, std::move(terms), std::nullopt}; }

// [ROW rows_x, COL cols_x, K k (summed)]: one contraction.
std::vector<IterSpec> Contract(int64_t rows_x, int64_t cols_x, int64_t k) {
  return {{LoopVar::kRow, rows_x, IterKind::kParallel},
          {LoopVar::kCol, cols_x, IterKind::kParallel},
          {LoopVar::kK, k, IterKind::kReduceSum}};
}

class Chunked {
 public:
  Chunked(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head, const StateName& state,
          const Target& target, Precision p, int64_t eps_nano)
      : spec_(spec), names_(names), head_(head), state_(state), target_(target), p_(p), eps_nano_(eps_nano) {
    hv_ = spec.hv();
    hk_ = spec.hk();
    d_ = spec.d();
    rows_ = spec.rows();
    tr_ = target.tile_rows();
    tw_ = target.tile_cols();
    nb_ = d_ / tw_;
    qk_w_ = hk_ * d_;
    v_w_ = hv_ * d_;
    qk_t_ = hk_ * nb_;
    v_t_ = hv_ * nb_;
    w1_ = tw_;
    wd_ = nb_ * tw_;
    o_name_ = absl::StrCat(names.out, "__dense");
  }

  absl::StatusOr<Composition> Lower(std::vector<Composition> parts) {
    // About a dozen sections per chunk of a tile's rows, unrolled: checked before the first is built.
    RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a chunked gated delta of ", rows_, " rows"), "chunks",
                                 CheckedCeilDiv(rows_, tr_)));
    for (int64_t c = 0; c * tr_ < rows_; ++c) {
      const int64_t cc = std::min(rows_ - c * tr_, tr_);
      const int64_t factors = SolveFactors(cc);
      ASSIGN_OR_RETURN(Composition g, Gates(c, cc));
      parts.push_back(std::move(g));
      ASSIGN_OR_RETURN(Composition a, AAndQk(c));
      parts.push_back(std::move(a));
      for (int64_t j = 0; j < factors; ++j) {
        ASSIGN_OR_RETURN(Composition s, Solve(c, j, factors));
        parts.push_back(std::move(s));
      }
      ASSIGN_OR_RETURN(Composition uw, UAndW(c, factors));
      parts.push_back(std::move(uw));
      ASSIGN_OR_RETURN(Composition delta, Delta(c));
      parts.push_back(std::move(delta));
      ASSIGN_OR_RETURN(Composition out, Output(c));
      parts.push_back(std::move(out));
      ASSIGN_OR_RETURN(Composition memory, Memory(c, cc));
      parts.push_back(std::move(memory));
    }
    // The dense output back to the program's flat rows.
    ASSIGN_OR_RETURN(Composition rows, RelayoutDenseToRows({o_name_, {}}, names_.out, rows_, v_w_, p_, target_));
    parts.push_back(std::move(rows));
    return ComposeSections(absl::StrCat("gd_chunk0_g_", hv_, "x", d_), std::move(parts), target_);
  }

 private:
  // Tile steps that rebuild h = g·hk + kh from the coordinate (kh, g); k and q step by kh alone.
  Terms HeadSteps(int64_t per) const { return {{LoopVar::kItemY, per}, {LoopVar::kItemX, hk_ * per}}; }
  Terms KSteps() const { return {{LoopVar::kItemY, nb_}}; }

  std::vector<WorkItem> HeadItems(const std::function<TileRect(int64_t)>& rect) const {
    std::vector<WorkItem> items;
    for (int64_t h = 0; h < hv_; ++h) items.push_back(WorkItem{.id = h, .y = h % hk_, .x = h / hk_, .out = rect(h)});
    return items;
  }
  std::vector<WorkItem> TileItems() const {
    return HeadItems([](int64_t h) { return TileRect{.col0_t = h}; });
  }
  std::vector<WorkItem> StripItems() const {
    return HeadItems([this](int64_t h) { return TileRect{.col0_t = h * nb_, .w_t = nb_}; });
  }

  // A constant tr x tw tile "{out}__gd_{what}": the masks' row and column bounds, the causal mask, the identity.
  TensorId Param(Template& t, const std::string& what, const std::function<double(int64_t, int64_t)>& f) const {
    std::vector<double> v(tr_ * tw_);
    for (int64_t e = 0; e < tr_ * tw_; ++e) v[e] = f(e / tw_, e % tw_);
    return t.AddTensor(absl::StrCat(names_.out, "__gd_", what), TensorRole::kParam, tr_, tw_, p_,
                       TensorInit::FloatValues(std::move(v)));
  }
  // A per-chunk tensor a section writes (Output) or reads (Input): one tile per head, or a strip of nb per head.
  TensorId ChunkTensor(Template& t, int64_t c, const std::string& what, TensorRole role, int64_t cols) const {
    return t.AddTensor(absl::StrCat(names_.out, "__c", c, "_", what), role, tr_, cols, p_,
                       role == TensorRole::kOutput ? TensorInit::Zero() : TensorInit::External());
  }
  TensorId Gate(Template& t, const std::string& which) const {
    return t.AddTensor(absl::StrCat(names_.out, "__", which), TensorRole::kInput, rows_, hv_ * tw_, p_,
                       TensorInit::External());
  }
  // An operand as the dense rows x width table a chunk reads a tile row of.
  absl::StatusOr<TensorId> Dense(Template& t, int op, int64_t width) const {
    const OperandRef& o = names_.ops[op];
    ASSIGN_OR_RETURN(TensorInit init, InitOf(o.fill, rows_ * width));
    return t.AddTensor(o.name, TensorRole::kInput, rows_, width, p_, std::move(init));
  }
  // The memory before chunk c: the carried memory (State, read in place) or the op's own version c (an Input).
  absl::StatusOr<TensorId> MemoryBefore(Template& t, int64_t c) const {
    const std::string name = state_(c);
    ASSIGN_OR_RETURN(TensorInit init, InitOf(names_.ops[6].fill, hv_ * d_ * d_));
    return t.AddTensor(name, name == state_(c + 1) ? TensorRole::kState : TensorRole::kInput, hv_ * d_, d_, p_,
                       std::move(init));
  }
  // A tile of a per-chunk tensor for the item's head.
  StageId LoadTile(Template& t, const std::string& name, TensorId tensor, BufferId into, int64_t base = 0) const {
    return t.AddLoadBlockAt(name, tensor, base, HeadSteps(1), {.pitch = hv_}, into);
  }
  absl::StatusOr<Composition> Finish(Template& t, const std::string& what, int64_t c, std::vector<WorkItem> items,
                                     double error_growth = 0) const {
    NumericsClaim claim = ApproxIn("chunked gated delta", p_);
    claim.error_growth = error_growth;
    return FinishSection(t, absl::StrCat("gd_chunk", c, "_", what, "_", hv_, "x", d_), std::move(items),
                         Precision::kFp32, std::move(claim), target_);
  }

  // ── G and LG: G[t, ·] = Σ_{s ≤ t} ln α_s, the cumulative log decay down the rows of a row-broadcast tile, and
  // LG[t, i] = Σ_{i < s ≤ t} ln α_s, the log of every ratio γ_t / γ_i — each over the chunk's rows s < C.
  //
  // ★ A RATIO IS SUMMED, NEVER SUBTRACTED. g_t grows with the chunk (−22 after 32 rows of α ≈ ½), where a bf16 page
  // keeps it only to 1/8; e^{g_t − g_i} from two stored sums is then off by up to e^{±1/8} exactly where it matters —
  // near the diagonal, where the ratio is close to one. Summed over (i, t] alone, a near-diagonal log ratio is a few
  // small terms and keeps its precision.
  // ★ ln α AT LEAST THE LEAST NORMAL FLOAT'S. A gate of 0 (a full reset; e^g underflowed) has ln α = −∞, and the
  // cumulative sum multiplies it by the triangle's zeros (0 · −∞ = NaN), so one reset row made the whole chunk NaN.
  // ln(max(α, 2^−126)) = −87.3: the decay it gives is e^−87 ≈ 1e−38, a reset to within fp32's least normal value.
  // (A gate below 0 has no log at all; the chunked form reads it as a reset, the stepped recurrence as a sign flip.)
  static Body LnDecay(Body alpha) { return Unary(SfpuKind::Ln(), Max(std::move(alpha), Const(0x1p-126))); }

  absl::StatusOr<Composition> Gates(int64_t c, int64_t cc) const {
    Template t(tr_, tw_);
    const TensorId at = Gate(t, "alpha_t");
    const TensorId l = Param(t, "tril", [](int64_t r, int64_t s) { return s <= r ? 1.0 : 0.0; });
    const TensorId col1 = Param(t, "col1", [](int64_t, int64_t i) { return static_cast<double>(i + 1); });
    const TensorId row1 = Param(t, "row1", [](int64_t r, int64_t) { return static_cast<double>(r + 1); });
    const TensorId g = ChunkTensor(t, c, "g", TensorRole::kOutput, hv_ * tw_);
    const TensorId lg = ChunkTensor(t, c, "lg", TensorRole::kOutput, hv_ * tw_);
    const BufferId ain = t.AddBuffer("in_alpha", 1, p_);
    const BufferId lin = t.AddBuffer("in_tril", 1, p_);
    const BufferId gout = t.AddBuffer("g", 1, p_);
    const StageId la = LoadTile(t, "load_alpha", at, ain, c * hv_);
    const StageId ll = t.AddLoad("load_tril", l, {}, 1, lin);
    const StageId s = t.AddGeneric("gd_log_decay", Contract(tr_, tw_, tr_), {lin, ain},
                                   {M({{LoopVar::kRow, w1_}, {LoopVar::kK, 1}}), M({{LoopVar::kK, w1_}, {LoopVar::kCol, 1}})},
                                   IdentMap(w1_),
                                   Select(Pred::Lt(LoopVar::kK, cc), Mul(Op(0), LnDecay(Op(1))), Const(0.0)),
                                   gout);
    const StageId st = t.AddStoreBlock("store_g", g, 0, HeadSteps(1), {.pitch = hv_}, gout);
    t.AddEdge(ll, lin, s);
    t.AddEdge(la, ain, s);
    t.AddEdge(s, gout, st);
    const BufferId ain2 = t.AddBuffer("in_alpha_r", 1, p_);
    const BufferId cin = t.AddBuffer("in_col1", 1, p_);
    const BufferId rin = t.AddBuffer("in_row1", 1, p_);
    const BufferId lgout = t.AddBuffer("lg", 1, p_);
    const StageId la2 = LoadTile(t, "load_alpha_r", at, ain2, c * hv_);
    const StageId lc = t.AddLoad("load_col1", col1, {}, 1, cin);
    const StageId lr = t.AddLoad("load_row1", row1, {}, 1, rin);
    // 0:α_s  1:i + 1  2:t + 1 — s counted when s < C, s ≥ i + 1 and s < t + 1.
    Body within = Select(Pred::Lt(LoopVar::kK, cc),
                         Select(Pred::GeOperand(LoopVar::kK, 1),
                                Select(Pred::LtOperand(LoopVar::kK, 2), LnDecay(Op(0)), Const(0.0)),
                                Const(0.0)),
                         Const(0.0));
    const StageId s2 = t.AddGeneric("gd_log_ratio", Contract(tr_, tw_, tr_), {ain2, cin, rin},
                                    {M({{LoopVar::kK, w1_}}), IdentMap(w1_), IdentMap(w1_)}, IdentMap(w1_), within,
                                    lgout);
    const StageId st2 = t.AddStoreBlock("store_lg", lg, 0, HeadSteps(1), {.pitch = hv_}, lgout);
    t.AddEdge(la2, ain2, s2);
    t.AddEdge(lc, cin, s2);
    t.AddEdge(lr, rin, s2);
    t.AddEdge(s2, lgout, st2);
    return Finish(t, "g", c, TileItems());
  }

  // ── A and QKΓ: A[t, i] = β_t Γ[t, i] Σ_b k_t[b] k_i[b] below the diagonal; QKΓ[t, i] = Γ[t, i] Σ_b q_t[b] k_i[b] on
  // and below it.
  absl::StatusOr<Composition> AAndQk(int64_t c) const {
    Template t(tr_, tw_);
    ASSIGN_OR_RETURN(TensorId q, Dense(t, 0, qk_w_));
    ASSIGN_OR_RETURN(TensorId k, Dense(t, 1, qk_w_));
    const TensorId bt = Gate(t, "beta_t");
    const TensorId lg = ChunkTensor(t, c, "lg", TensorRole::kInput, hv_ * tw_);
    const TensorId r0 = Param(t, "row", [](int64_t r, int64_t) { return static_cast<double>(r); });
    const TensorId r1 = Param(t, "row1", [](int64_t r, int64_t) { return static_cast<double>(r + 1); });
    const TensorId a = ChunkTensor(t, c, "a", TensorRole::kOutput, hv_ * tw_);
    const TensorId qk = ChunkTensor(t, c, "qk", TensorRole::kOutput, hv_ * tw_);
    auto part = [&](const std::string& what, TensorId left, bool beta, bool strict, TensorId out_t) {
      const BufferId lin = t.AddBufferDeep(absl::StrCat("in_", what, "_l"), 1, nb_, p_);
      const BufferId kin = t.AddBufferDeep(absl::StrCat("in_", what, "_k"), 1, nb_, p_);
      const BufferId gin = t.AddBuffer(absl::StrCat("in_", what, "_lg"), 1, p_);
      const BufferId rin = t.AddBuffer(absl::StrCat("in_", what, "_r"), 1, p_);
      std::vector<std::pair<StageId, BufferId>> loads{
          {t.AddLoadBlockAt(absl::StrCat("load_", what, "_l"), left, c * qk_t_, KSteps(), {.w = nb_, .pitch = qk_t_},
                            lin), lin},
          {t.AddLoadBlockAt(absl::StrCat("load_", what, "_k"), k, c * qk_t_, KSteps(), {.w = nb_, .pitch = qk_t_},
                            kin), kin},
          {LoadTile(t, absl::StrCat("load_", what, "_lg"), lg, gin), gin},
          {t.AddLoad(absl::StrCat("load_", what, "_r"), strict ? r0 : r1, {}, 1, rin), rin}};
      // 0:left_t[b]  1:k_i[b]  2:LG[t, i]  3:the mask's row bound  (4:β_t)
      std::vector<BufferId> ins{lin, kin, gin, rin};
      std::vector<ElemAccess> maps{M({{LoopVar::kRow, wd_}, {LoopVar::kK, 1}}),
                                   M({{LoopVar::kCol, wd_}, {LoopVar::kK, 1}}), IdentMap(w1_), IdentMap(w1_)};
      Body value = Mul(Unary(SfpuKind::Exp(), Op(2)), Mul(Op(0), Op(1)));
      if (beta) {
        const BufferId bin = t.AddBuffer(absl::StrCat("in_", what, "_b"), 1, p_);
        loads.push_back({LoadTile(t, absl::StrCat("load_", what, "_b"), bt, bin, c * hv_), bin});
        ins.push_back(bin);
        maps.push_back(M({{LoopVar::kRow, w1_}}));
        value = Mul(Op(4), value);
      }
      const BufferId out = t.AddBuffer(what, 1, p_);
      const StageId s = t.AddGeneric(absl::StrCat("gd_", what), Contract(tr_, tw_, d_), ins, maps, IdentMap(w1_),
                                     Select(Pred::LtOperand(LoopVar::kCol, 3), value, Const(0.0)), out);
      const StageId st = t.AddStoreBlock(absl::StrCat("store_", what), out_t, 0, HeadSteps(1), {.pitch = hv_}, out);
      for (const auto& [l, b] : loads) t.AddEdge(l, b, s);
      t.AddEdge(s, out, st);
    };
    part("a", k, true, true, a);
    part("qk", q, false, false, qk);
    return Finish(t, "a", c, TileItems());
  }

  // ── The solve: X = (I + N)(I + N²)(I + N⁴)… with N = −A, factor by factor. Section j forms X_j (X₀ = I − A, then
  // X_j = X_{j−1} + X_{j−1}·P_j with P_j = N^{2^j}) and, when another factor follows, squares into P_{j+1}.
  //
  // ★ A SQUARE DOUBLES ITS OPERAND'S RELATIVE ERROR. P_{j+1} = N^{2^{j+1}} is 2^{j+1} factors of the rounded N, so its
  // relative error grows as 2^{j+1} times N's (measured on Qwen3-Next's prefill, chunks of 32 rows, rel L2 against
  // exact f64: P1 4.4%, P2 7.3%, P3 10%, P4 18%), while its weight in X shrinks as fast (the powers of a nilpotent N
  // vanish): X, U, W and the output stay within the default tolerance. The section claims that growth
  // (NumericsClaim.error_growth), so its stored power is compared with what its algorithm can deliver.
  absl::StatusOr<Composition> Solve(int64_t c, int64_t j, int64_t factors) const {
    Template t(tr_, tw_);
    const std::vector<ElemAccess> product{M({{LoopVar::kRow, w1_}, {LoopVar::kK, 1}}),
                                          M({{LoopVar::kK, w1_}, {LoopVar::kCol, 1}})};
    if (j + 1 < factors) {
      // P_{j+1}: A² at the first factor (N² = A²), then the previous power squared.
      const TensorId src = ChunkTensor(t, c, j == 0 ? "a" : absl::StrCat("p", j), TensorRole::kInput, hv_ * tw_);
      const TensorId dst = ChunkTensor(t, c, absl::StrCat("p", j + 1), TensorRole::kOutput, hv_ * tw_);
      const BufferId pin = t.AddBuffer("in_p", 1, p_);
      const BufferId pin2 = t.AddBuffer("in_p2", 1, p_);
      const StageId lp = LoadTile(t, "load_p", src, pin);
      const StageId lp2 = LoadTile(t, "load_p2", src, pin2);
      const BufferId out = t.AddBuffer("p_sq", 1, p_);
      const StageId s = t.AddGeneric("gd_square", Contract(tr_, tw_, tr_), {pin, pin2}, product, IdentMap(w1_),
                                     Mul(Op(0), Op(1)), out);
      const StageId st = t.AddStoreBlock("store_p", dst, 0, HeadSteps(1), {.pitch = hv_}, out);
      t.AddEdge(lp, pin, s);
      t.AddEdge(lp2, pin2, s);
      t.AddEdge(s, out, st);
    }
    const TensorId x_out = ChunkTensor(t, c, absl::StrCat("x", j), TensorRole::kOutput, hv_ * tw_);
    const BufferId out = t.AddBuffer("x", 1, p_);
    StageId last;
    if (j == 0) {
      const TensorId a = ChunkTensor(t, c, "a", TensorRole::kInput, hv_ * tw_);
      const TensorId id = Param(t, "eye", [](int64_t r, int64_t i) { return r == i ? 1.0 : 0.0; });
      const BufferId ain = t.AddBuffer("in_a", 1, p_);
      const BufferId iin = t.AddBuffer("in_eye", 1, p_);
      const StageId la = LoadTile(t, "load_a", a, ain);
      const StageId li = t.AddLoad("load_eye", id, {}, 1, iin);
      last = t.AddGeneric("gd_x0", TileSpace(tr_, tw_), {ain, iin}, {IdentMap(w1_), IdentMap(w1_)}, IdentMap(w1_),
                          Sub(Op(1), Op(0)), out);
      t.AddEdge(la, ain, last);
      t.AddEdge(li, iin, last);
    } else {
      const TensorId x_prev = ChunkTensor(t, c, absl::StrCat("x", j - 1), TensorRole::kInput, hv_ * tw_);
      const TensorId pj = ChunkTensor(t, c, absl::StrCat("p", j), TensorRole::kInput, hv_ * tw_);
      const BufferId xin = t.AddBuffer("in_x", 1, p_);
      const BufferId pin = t.AddBuffer("in_xp_p", 1, p_);
      const BufferId xin2 = t.AddBuffer("in_x_add", 1, p_);
      const StageId lx = LoadTile(t, "load_x", x_prev, xin);
      const StageId lp = LoadTile(t, "load_xp_p", pj, pin);
      const StageId lx2 = LoadTile(t, "load_x_add", x_prev, xin2);
      const BufferId xp = t.AddBuffer("xp", 1, p_);
      const StageId s1 = t.AddGeneric("gd_xp", Contract(tr_, tw_, tr_), {xin, pin}, product, IdentMap(w1_),
                                      Mul(Op(0), Op(1)), xp);
      last = t.AddGeneric("gd_x", TileSpace(tr_, tw_), {xp, xin2}, {IdentMap(w1_), IdentMap(w1_)}, IdentMap(w1_),
                          Add(Op(0), Op(1)), out);
      t.AddEdge(lx, xin, s1);
      t.AddEdge(lp, pin, s1);
      t.AddEdge(s1, xp, last);
      t.AddEdge(lx2, xin2, last);
    }
    const StageId st = t.AddStoreBlock("store_x", x_out, 0, HeadSteps(1), {.pitch = hv_}, out);
    t.AddEdge(last, out, st);
    return Finish(t, absl::StrCat("solve", j), c, TileItems(),
                  j + 1 < factors ? static_cast<double>(int64_t{1} << (j + 1)) : 0.0);
  }

  // ── U and W: U[t, e] = Σ_i X[t, i] β_i v_i[e], W[t, b] = Σ_i X[t, i] β_i e^{g_i} k_i[b].
  absl::StatusOr<Composition> UAndW(int64_t c, int64_t factors) const {
    Template t(tr_, tw_);
    const TensorId x = ChunkTensor(t, c, absl::StrCat("x", factors - 1), TensorRole::kInput, hv_ * tw_);
    const TensorId bt = Gate(t, "beta_t");
    const TensorId g = ChunkTensor(t, c, "g", TensorRole::kInput, hv_ * tw_);
    ASSIGN_OR_RETURN(TensorId v, Dense(t, 2, v_w_));
    ASSIGN_OR_RETURN(TensorId k, Dense(t, 1, qk_w_));
    const TensorId u = ChunkTensor(t, c, "u", TensorRole::kOutput, hv_ * d_);
    const TensorId w = ChunkTensor(t, c, "w", TensorRole::kOutput, hv_ * d_);
    auto part = [&](const std::string& what, TensorId right, int64_t right_base, Terms right_steps,
                    int64_t right_stride, bool gated, TensorId out_t) {
      const BufferId xin = t.AddBuffer(absl::StrCat("in_", what, "_x"), 1, p_);
      const BufferId bin = t.AddBuffer(absl::StrCat("in_", what, "_b"), 1, p_);
      const BufferId rin = t.AddBufferDeep(absl::StrCat("in_", what, "_r"), 1, nb_, p_);
      std::vector<std::pair<StageId, BufferId>> loads{
          {LoadTile(t, absl::StrCat("load_", what, "_x"), x, xin), xin},
          {LoadTile(t, absl::StrCat("load_", what, "_b"), bt, bin, c * hv_), bin},
          {t.AddLoadBlockAt(absl::StrCat("load_", what, "_r"), right, right_base, std::move(right_steps),
                            {.w = nb_, .pitch = right_stride}, rin),
           rin}};
      std::vector<BufferId> ins{xin, bin, rin};
      std::vector<ElemAccess> maps{M({{LoopVar::kRow, w1_}, {LoopVar::kK, 1}}), M({{LoopVar::kK, w1_}}),
                                   M({{LoopVar::kK, wd_}, {LoopVar::kCol, 1}})};
      Body value = Mul(Mul(Op(0), Op(1)), Op(2));
      if (gated) {
        const BufferId gin = t.AddBuffer(absl::StrCat("in_", what, "_g"), 1, p_);
        loads.push_back({LoadTile(t, absl::StrCat("load_", what, "_g"), g, gin), gin});
        ins.push_back(gin);
        maps.push_back(M({{LoopVar::kK, w1_}}));
        value = Mul(value, Unary(SfpuKind::Exp(), Op(3)));
      }
      const BufferId out = t.AddBufferDeep(what, 1, nb_, p_);
      const StageId s =
          t.AddGeneric(absl::StrCat("gd_", what), Contract(tr_, wd_, tr_), ins, maps, IdentMap(wd_), value, out);
      const StageId st = t.AddStoreBlock(absl::StrCat("store_", what), out_t, 0, HeadSteps(nb_),
                                         {.w = nb_, .pitch = v_t_}, out);
      for (const auto& [l, b] : loads) t.AddEdge(l, b, s);
      t.AddEdge(s, out, st);
    };
    part("u", v, c * v_t_, HeadSteps(nb_), v_t_, false, u);
    part("w", k, c * qk_t_, KSteps(), qk_t_, true, w);
    return Finish(t, "uw", c, StripItems());
  }

  // Joins nb one-tile pages into a head's strip: strip[t, c] = part_j[t, c − j·tile] in a-block j's band.
  StageId Join(Template& t, const std::string& name, const std::vector<std::pair<StageId, BufferId>>& parts,
               BufferId strip) const {
    std::vector<BufferId> ins;
    std::vector<ElemAccess> maps;
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t j = 0; j < nb_; ++j) {
      ins.push_back(parts[j].second);
      maps.push_back(ElemAccess{-j * tw_, {{LoopVar::kRow, w1_}, {LoopVar::kCol, 1}}, std::nullopt});
      bands.push_back({(j + 1) * tw_, Op(static_cast<int>(j))});
    }
    const StageId s = t.AddGeneric(name, TileSpace(tr_, wd_), ins, maps, IdentMap(wd_), Banded(bands), strip);
    for (const auto& [from, b] : parts) t.AddEdge(from, b, s);
    return s;
  }

  // ── Δ: Δ[t, a] = U[t, a] − Σ_b W[t, b] S₀[a, b], one a-block (tile) at a time, joined into the head's strip.
  absl::StatusOr<Composition> Delta(int64_t c) const {
    Template t(tr_, tw_);
    const TensorId u = ChunkTensor(t, c, "u", TensorRole::kInput, hv_ * d_);
    const TensorId w = ChunkTensor(t, c, "w", TensorRole::kInput, hv_ * d_);
    ASSIGN_OR_RETURN(TensorId st, MemoryBefore(t, c));
    const TensorId dt = ChunkTensor(t, c, "d", TensorRole::kOutput, hv_ * d_);
    std::vector<std::pair<StageId, BufferId>> parts;
    for (int64_t j = 0; j < nb_; ++j) {
      const BufferId win = t.AddBufferDeep(absl::StrCat("in_w", j), 1, nb_, p_);
      const BufferId sin = t.AddBufferDeep(absl::StrCat("in_s", j), 1, nb_, p_);
      const BufferId uin = t.AddBuffer(absl::StrCat("in_u", j), 1, p_);
      const StageId lw = t.AddLoadBlockAt(absl::StrCat("load_w", j), w, 0, HeadSteps(nb_), {.w = nb_, .pitch = v_t_},
                                          win);
      const StageId ls =
          t.AddLoadBlockAt(absl::StrCat("load_s", j), st, j * nb_, HeadSteps(nb_ * nb_), {.w = nb_, .pitch = nb_}, sin);
      const StageId lu = t.AddLoadBlockAt(absl::StrCat("load_u", j), u, j, HeadSteps(nb_), {.pitch = v_t_}, uin);
      const BufferId ws = t.AddBuffer(absl::StrCat("ws", j), 1, p_);
      const StageId s1 = t.AddGeneric(absl::StrCat("gd_ws", j), Contract(tr_, tw_, d_), {win, sin},
                                      {M({{LoopVar::kRow, wd_}, {LoopVar::kK, 1}}),
                                       M({{LoopVar::kCol, wd_}, {LoopVar::kK, 1}})},
                                      IdentMap(w1_), Mul(Op(0), Op(1)), ws);
      const BufferId dj = t.AddScratchDeep(absl::StrCat("d", j), 1, 1, p_);
      const StageId s2 = t.AddGeneric(absl::StrCat("gd_d", j), TileSpace(tr_, tw_), {uin, ws},
                                      {IdentMap(w1_), IdentMap(w1_)}, IdentMap(w1_), Sub(Op(0), Op(1)), dj);
      t.AddEdge(lw, win, s1);
      t.AddEdge(ls, sin, s1);
      t.AddEdge(s1, ws, s2);
      t.AddEdge(lu, uin, s2);
      parts.push_back({s2, dj});
    }
    const BufferId strip = t.AddBufferDeep("d_strip", 1, nb_, p_);
    const StageId join = Join(t, "d_join", parts, strip);
    const StageId sto = t.AddStoreBlock("store_d", dt, 0, HeadSteps(nb_), {.w = nb_, .pitch = v_t_}, strip);
    t.AddEdge(join, strip, sto);
    return Finish(t, "delta", c, StripItems());
  }

  // ── The output rows: o = (e^{g_t} q_t·S₀ᵀ + Σ_i QKΓ[t, i] Δ[i]) / √d, the head's RMSNorm per row, GN, gate(z).
  absl::StatusOr<Composition> Output(int64_t c) const {
    Template t(tr_, tw_);
    ASSIGN_OR_RETURN(TensorId q, Dense(t, 0, qk_w_));
    ASSIGN_OR_RETURN(TensorId st, MemoryBefore(t, c));
    const TensorId qk = ChunkTensor(t, c, "qk", TensorRole::kInput, hv_ * tw_);
    const TensorId dt = ChunkTensor(t, c, "d", TensorRole::kInput, hv_ * d_);
    const TensorId g = ChunkTensor(t, c, "g", TensorRole::kInput, hv_ * tw_);
    ASSIGN_OR_RETURN(TensorId z, Dense(t, 3, v_w_));
    ASSIGN_OR_RETURN(TensorInit gn_init, InitOf(names_.ops[7].fill, d_));
    const TensorId gn = t.AddTensor(names_.ops[7].name, TensorRole::kParam, 1, d_, p_, std::move(gn_init));
    // The dense output, written a chunk's tile row at a time: State, written in part.
    const TensorId y = t.AddTensor(o_name_, TensorRole::kState, rows_, v_w_, p_, TensorInit::Zero());
    const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(head_));
    std::vector<std::pair<StageId, BufferId>> parts;
    // The chunk's q rows, its QKΓ tile and its g tile are the same for every output block j: loaded once, read by
    // each block (a 128-wide head's four blocks would otherwise hold 38 circular buffers, a Tensix core has 32).
    const BufferId qin = t.AddBufferDeep("in_q", 1, nb_, p_);
    const BufferId qkin = t.AddBuffer("in_qk", 1, p_);
    const BufferId gin_t = t.AddBuffer("in_g", 1, p_);
    const StageId lq = t.AddLoadBlockAt("load_q", q, c * qk_t_, KSteps(), {.w = nb_, .pitch = qk_t_}, qin);
    const StageId lqk = LoadTile(t, "load_qk", qk, qkin);
    const StageId lg = LoadTile(t, "load_g", g, gin_t);
    for (int64_t j = 0; j < nb_; ++j) {
      const BufferId sin = t.AddBufferDeep(absl::StrCat("in_s", j), 1, nb_, p_);
      const BufferId din = t.AddBuffer(absl::StrCat("in_d", j), 1, p_);
      const BufferId gin = gin_t;
      const StageId ls =
          t.AddLoadBlockAt(absl::StrCat("load_s", j), st, j * nb_, HeadSteps(nb_ * nb_), {.w = nb_, .pitch = nb_}, sin);
      const StageId ld = t.AddLoadBlockAt(absl::StrCat("load_d", j), dt, j, HeadSteps(nb_), {.pitch = v_t_}, din);
      const BufferId qs = t.AddBuffer(absl::StrCat("qs", j), 1, p_);
      const StageId s1 = t.AddGeneric(absl::StrCat("gd_qs", j), Contract(tr_, tw_, d_), {qin, sin},
                                      {M({{LoopVar::kRow, wd_}, {LoopVar::kK, 1}}),
                                       M({{LoopVar::kCol, wd_}, {LoopVar::kK, 1}})},
                                      IdentMap(w1_), Mul(Op(0), Op(1)), qs);
      const BufferId qd = t.AddBuffer(absl::StrCat("qd", j), 1, p_);
      const StageId s2 = t.AddGeneric(absl::StrCat("gd_qd", j), Contract(tr_, tw_, tr_), {qkin, din},
                                      {M({{LoopVar::kRow, w1_}, {LoopVar::kK, 1}}),
                                       M({{LoopVar::kK, w1_}, {LoopVar::kCol, 1}})},
                                      IdentMap(w1_), Mul(Op(0), Op(1)), qd);
      const BufferId oj = t.AddScratchDeep(absl::StrCat("o", j), 1, 1, p_);
      const StageId s3 = t.AddGeneric(absl::StrCat("gd_o", j), TileSpace(tr_, tw_), {qs, qd, gin},
                                      {IdentMap(w1_), IdentMap(w1_), M({{LoopVar::kRow, w1_}})}, IdentMap(w1_),
                                      Mul(Add(Mul(Unary(SfpuKind::Exp(), Op(2)), Op(0)), Op(1)), Const(inv_sqrt_d)),
                                      oj);
      t.AddEdge(ls, sin, s1);
      t.AddEdge(ld, din, s2);
      if (j == 0) {  // the shared pages' first readers
        t.AddEdge(lq, qin, s1);
        t.AddEdge(lqk, qkin, s2);
        t.AddEdge(lg, gin, s3);
      }
      t.AddEdge(s1, qs, s3);
      t.AddEdge(s2, qd, s3);
      parts.push_back({s3, oj});
    }
    const Precision acc = Precision::kFp32;
    const BufferId ovec = t.AddScratchDeep("o_strip", 1, nb_, acc);
    const StageId join = Join(t, "o_join", parts, ovec);
    // Each row's RMSNorm over the head: the row's sum of squares (a column fold, one value per row), its reciprocal
    // root, then the weight and the gate. The strip is a scratch the sum and the gate both read.
    const BufferId ssum = t.AddScratch("o_sum", 1, acc);
    const StageId s_sum = t.AddGeneric("o_sum", HeadSpace(tr_, d_, IterKind::kReduceSum), {ovec, ovec},
                                       {IdentMap(wd_), IdentMap(wd_)}, PerRowMap(w1_), Mul(Op(0), Op(1)), ssum);
    t.AddEdge(join, ovec, s_sum);
    const BufferId inv = t.AddScratch("o_inv", 1, acc);
    const StageId s_inv = t.AddGeneric("o_rsqrt", TileSpace(tr_, tw_), {ssum}, {PerRowMap(w1_)}, PerRowMap(w1_),
                                       Unary(SfpuKind::Rsqrt(eps_nano_, head_), Op(0)), inv);
    t.AddEdge(s_sum, ssum, s_inv);
    const BufferId gin = t.AddBuffer("in_gn", nb_, p_);
    const BufferId zin = t.AddBufferDeep("in_z", 1, nb_, p_);
    const StageId lgn = t.AddLoad("load_gn", gn, {}, nb_, gin);
    const StageId lz = t.AddLoadBlockAt("load_z", z, c * v_t_, HeadSteps(nb_), {.w = nb_, .pitch = v_t_}, zin);
    const BufferId ob = t.AddBufferDeep("out", 1, nb_, p_);
    const StageId gate =
        t.AddGeneric("gd_gate", TileSpace(tr_, wd_), {ovec, inv, gin, zin},
                     {IdentMap(wd_), PerRowMap(w1_), M({{LoopVar::kCol, 1}}), IdentMap(wd_)}, IdentMap(wd_),
                     Mul(Mul(Mul(Op(0), Op(1)), Op(2)), DeltaGate(spec_.gate(), Op(3))), ob);
    t.AddEdge(s_inv, inv, gate);
    t.AddEdge(lgn, gin, gate);
    t.AddEdge(lz, zin, gate);
    const StageId sto = t.AddStoreBlock("store_o", y, c * v_t_, HeadSteps(nb_), {.w = nb_, .pitch = v_t_}, ob);
    t.AddEdge(gate, ob, sto);
    return Finish(t, "out", c, HeadItems([this, c](int64_t h) { return TileRect{.row0_t = c, .col0_t = h * nb_,
                                                                                .w_t = nb_}; }));
  }

  // ── The memory the chunk leaves: S_C[a, b] = e^{g_C} S₀[a, b] + Σ_t Δ[t, a] e^{g_C − g_t} k_t[b], per a-block.
  absl::StatusOr<Composition> Memory(int64_t c, int64_t cc) const {
    Template t(tr_, tw_);
    ASSIGN_OR_RETURN(TensorId st, MemoryBefore(t, c));
    const bool in_place = state_(c) == state_(c + 1);
    const TensorId st_out =
        in_place ? st : t.AddTensor(state_(c + 1), TensorRole::kState, hv_ * d_, d_, p_, TensorInit::Zero());
    const TensorId dt = ChunkTensor(t, c, "d", TensorRole::kInput, hv_ * d_);
    ASSIGN_OR_RETURN(TensorId k, Dense(t, 1, qk_w_));
    const TensorId g = ChunkTensor(t, c, "g", TensorRole::kInput, hv_ * tw_);
    const TensorId lg = ChunkTensor(t, c, "lg", TensorRole::kInput, hv_ * tw_);
    const BufferId kin = t.AddBufferDeep("in_k", 1, nb_, p_);
    const BufferId lgin = t.AddBufferDeep("in_lg", 1, 1, p_);
    const BufferId gin = t.AddBufferDeep("in_g_c", 1, 1, p_);
    const StageId lk = t.AddLoadBlockAt("load_k", k, c * qk_t_, KSteps(), {.w = nb_, .pitch = qk_t_}, kin);
    const StageId llg = LoadTile(t, "load_lg", lg, lgin);
    const StageId lgc = LoadTile(t, "load_g_c", g, gin);
    // 0:Δ[t, a]  1:k_t[b]  2:LG[C − 1, t] = ln(γ_C / γ_t) — folded over the chunk's rows t.
    const Body update = Select(Pred::Lt(LoopVar::kK, cc), Mul(Mul(Op(0), Op(1)), Unary(SfpuKind::Exp(), Op(2))),
                               Const(0.0));
    struct Block {
      StageId decay;
      BufferId out;
      int64_t j;
    };
    std::vector<Block> blocks;
    StageId first_update = -1, first_decay = -1;
    for (int64_t j = 0; j < nb_; ++j) {
      const BufferId din = t.AddBufferDeep(absl::StrCat("in_d", j), 1, 1, p_);
      const BufferId sin = t.AddBufferDeep(absl::StrCat("in_s", j), 1, nb_, p_);
      const StageId ld = t.AddLoadBlockAt(absl::StrCat("load_d", j), dt, j, HeadSteps(nb_), {.pitch = v_t_}, din);
      const StageId ls =
          t.AddLoadBlockAt(absl::StrCat("load_s", j), st, j * nb_, HeadSteps(nb_ * nb_), {.w = nb_, .pitch = nb_}, sin);
      const BufferId upd = t.AddBufferDeep(absl::StrCat("upd", j), 1, nb_, p_);
      const StageId s1 = t.AddGeneric(
          absl::StrCat("gd_s_update", j), Contract(tr_, d_, tr_), {din, kin, lgin},
          {M({{LoopVar::kK, w1_}, {LoopVar::kRow, 1}}), M({{LoopVar::kK, wd_}, {LoopVar::kCol, 1}}),
           ElemAccess{(cc - 1) * w1_, {{LoopVar::kK, 1}}, std::nullopt}},
          IdentMap(wd_), update, upd);
      const BufferId ob = t.AddBufferDeep(absl::StrCat("out", j), 1, nb_, p_);
      const StageId s2 = t.AddGeneric(absl::StrCat("gd_s_decay", j), TileSpace(tr_, d_), {upd, sin, gin},
                                      {IdentMap(wd_), IdentMap(wd_), Fixed((cc - 1) * w1_)}, IdentMap(wd_),
                                      Add(Op(0), Mul(Unary(SfpuKind::Exp(), Op(2)), Op(1))), ob);
      t.AddEdge(ld, din, s1);
      t.AddEdge(s1, upd, s2);
      t.AddEdge(ls, sin, s2);
      if (j == 0) first_update = s1, first_decay = s2;
      blocks.push_back({s2, ob, j});
    }
    t.AddEdge(lk, kin, first_update);
    t.AddEdge(llg, lgin, first_update);
    t.AddEdge(lgc, gin, first_decay);
    // Every a-block is read before any is written back: the items read the memory in place.
    for (const Block& b : blocks) {
      const StageId sto = t.AddStoreBlock(absl::StrCat("store_s", b.j), st_out, b.j * nb_, HeadSteps(nb_ * nb_),
                                          {.w = nb_, .pitch = nb_}, b.out);
      t.AddEdge(b.decay, b.out, sto);
    }
    t.SetPlan(BlockPlan{.per_site_m = nb_, .per_site_n = nb_, .grid_y = hv_, .osw = nb_});
    return Finish(t, "memory", c, HeadItems([this](int64_t h) { return TileRect{.row0_t = h * nb_, .h_t = nb_,
                                                                                .w_t = nb_}; }));
  }

  const proto::GatedDeltaSpec& spec_;
  const GdNames& names_;
  int64_t head_;
  const StateName& state_;
  const Target& target_;
  Precision p_;
  int64_t eps_nano_;
  int64_t hv_, hk_, d_, rows_, tr_, tw_, nb_, qk_w_, v_w_, qk_t_, v_t_, w1_, wd_;
  std::string o_name_;
};

}  // namespace

absl::StatusOr<Composition> ChunkedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                              const StateName& state, std::vector<Composition> gates,
                                              const Target& target) {
  ASSIGN_OR_RETURN(Precision p, ElemPrecision(target));
  ASSIGN_OR_RETURN(int64_t eps_nano, EpsNano("gated_delta", spec.eps()));
  Chunked chunked(spec, names, head, state, target, p, eps_nano);
  return chunked.Lower(std::move(gates));
}

}  // namespace spatial
