#include "spatial/semantics/contraction.h"

#include <algorithm>

#include "spatial/semantics/affine.h"

namespace spatial {
namespace {

bool IsConstNode(const Body& x) { return x.defined() && x->op == BodyOp::kConst; }
bool IsZeroConst(const Body& x) { return IsConstNode(x) && x->value == 0.0; }

// The variables a guard reads: its own axis and, for an operand right-hand side, that slot's map.
struct Reads {
  bool row = false, col = false, k = false, other = false;
};

void AddVar(Reads& r, AddrVar v) {
  if (v == AddrVar::kRow) r.row = true;
  else if (v == AddrVar::kCol) r.col = true;
  else if (v == AddrVar::kK) r.k = true;
  else r.other = true;
}

std::optional<GuardSide> SideOf(const Pred& p, const Generic& g, int num_slots) {
  Reads r;
  const std::optional<AddrVar> v = AddrVarOf(p.var);
  if (!v) return std::nullopt;
  AddVar(r, *v);
  if (p.rhs_is_operand) {
    if (p.rhs < 0 || p.rhs >= num_slots || p.rhs >= static_cast<int64_t>(g.ins.size())) return std::nullopt;
    const ElemAccess& m = g.ins[static_cast<size_t>(p.rhs)];
    if (m.indirect) return std::nullopt;
    const AffineForm f = ElemForm(m);
    for (int i = 0; i < kNumAddrVars; ++i) {
      if (f.coef[i] != 0) AddVar(r, static_cast<AddrVar>(i));
    }
  }
  if (r.other) return std::nullopt;
  if (!r.k) return GuardSide::kOut;
  if (!r.col) return GuardSide::kA;
  if (!r.row) return GuardSide::kB;
  return std::nullopt;  // reads ROW, COL and K: no operand or result carries it
}

}  // namespace

std::optional<Contraction> RecognizeContraction(const Generic& g, int num_slots) {
  Contraction c;
  bool has_k = false, has_row = false, has_col = false;
  for (const IterSpec& it : g.iters) {
    const int64_t e = it.extent;
    if (e < 1) return std::nullopt;
    if (it.var == LoopVar::kK && it.kind == IterKind::kReduceSum && !has_k) {
      has_k = true;
      c.k = e;
    } else if (it.var == LoopVar::kRow && it.kind == IterKind::kParallel && !has_row) {
      has_row = true;
      c.rows = e;
    } else if (it.var == LoopVar::kCol && it.kind == IterKind::kParallel && !has_col) {
      has_col = true;
      c.cols = e;
    } else {
      return std::nullopt;
    }
  }
  if (!has_k) return std::nullopt;
  const BodyNode* n = g.body.get();
  std::vector<double> peeled;
  for (int depth = 0;; ++depth) {
    if (n == nullptr || depth >= 64) return std::nullopt;
    if (n->op == BodyOp::kSelect) {
      const bool then_zero = IsZeroConst(n->b), else_zero = IsZeroConst(n->c);
      if (then_zero == else_zero) return std::nullopt;
      const std::optional<GuardSide> side = SideOf(n->pred, g, num_slots);
      if (!side) return std::nullopt;
      c.guards.push_back(ContractionGuard{n->pred, !then_zero, *side});
      n = (then_zero ? n->c : n->b).get();
    } else if (n->op == BodyOp::kMul && IsConstNode(n->b)) {
      peeled.push_back(n->b->value);
      n = n->a.get();
    } else if (n->op == BodyOp::kMul && IsConstNode(n->a)) {
      peeled.push_back(n->a->value);
      n = n->b.get();
    } else if (n->op == BodyOp::kMul && n->a.defined() && n->b.defined() && n->a->op == BodyOp::kOperand &&
               n->b->op == BodyOp::kOperand && n->a->operand != n->b->operand) {
      c.a = n->a->operand;
      c.b = n->b->operand;
      break;
    } else {
      return std::nullopt;
    }
  }
  const int nin = std::min<int>(num_slots, static_cast<int>(g.ins.size()));
  if (c.a < 0 || c.b < 0 || c.a >= nin || c.b >= nin) return std::nullopt;
  auto over = [&](int slot, AddrVar without) {  // read over K, never `without`, no indirect term
    const ElemAccess& m = g.ins[static_cast<size_t>(slot)];
    if (m.indirect) return false;
    const AffineForm f = ElemForm(m);
    return f.Uses(AddrVar::kK) && !f.Uses(without);
  };
  if (!(over(c.a, AddrVar::kCol) && over(c.b, AddrVar::kRow))) {
    if (!(over(c.b, AddrVar::kCol) && over(c.a, AddrVar::kRow))) return std::nullopt;
    std::swap(c.a, c.b);
  }
  if (ElemForm(g.out).Uses(AddrVar::kK) || g.out.indirect) return std::nullopt;
  c.factors.assign(peeled.rbegin(), peeled.rend());
  return c;
}

}  // namespace spatial
