// A Generic's maps are affine in (ROW, COL, K) over a box, so the extremes of an offset over the box are exact:
// each axis contributes coef*lo or coef*hi independently. A Select narrows the box of the branch it takes
// (AxisLt COL k: COL in [0, k) for `then`, [k, extent) for `else`); a branch whose box is empty is dead and
// reads nothing. The walk visits the body once per use of a node, so it is linear in the (expanded) body.
#include "certify/generic_access.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "spatial/limits.h"
#include "spatial/semantics/affine.h"

namespace spatial::certify {
namespace {

// Bounds on the walk, so a hostile body (deep, or a DAG whose expansion is huge) costs bounded time and stack:
// depth is counted in units of Eval's frame (~180 bytes), a nested Select costing kSelectDepth of them, so the
// walk never needs more than ~2 MB of stack. Any body the limits admit (spatial/limits.h kMaxBodyDepth, even one
// of nested Selects only) stays inside it, so every valid body is certified or refused for what it does.
constexpr int kSelectDepth = 5;
constexpr int kMaxDepth = static_cast<int>(kMaxBodyDepth) * kSelectDepth;
constexpr int64_t kMaxVisits = int64_t{1} << 23;  // FromProto admits 2^22 expanded nodes; regions add a walk

int AxisOf(LoopVar v) {
  switch (v) {
    case LoopVar::kRow: return 0;
    case LoopVar::kCol: return 1;
    case LoopVar::kK: return 2;
    default: return -1;
  }
}

constexpr const char* kAxisNames[3] = {"ROW", "COL", "K"};

// The values of ROW, COL, K at the points a read happens; an axis the space does not iterate is 0.
struct Box {
  Interval d[3] = {Interval::Point(0), Interval::Point(0), Interval::Point(0)};
  bool empty() const { return d[0].empty() || d[1].empty() || d[2].empty(); }
  friend bool operator==(const Box& a, const Box& b) {
    return a.d[0] == b.d[0] && a.d[1] == b.d[1] && a.d[2] == b.d[2];
  }
};

// A map's form (spatial/semantics/affine.h) and its indirect guard; its affine part is the form with INDEX at 0
// (the prover adds the indirect term itself, bounded by the guard's modulus).
struct AffineMap {
  AffineForm form;
  const IndirectTerm* ind = nullptr;
  int64_t page = 0;

  Interval Affine(const Box& box) const {
    AddrEnv<Interval> env = ZeroEnv<Interval>();
    env[static_cast<int>(AddrVar::kRow)] = box.d[0];
    env[static_cast<int>(AddrVar::kCol)] = box.d[1];
    env[static_cast<int>(AddrVar::kK)] = box.d[2];
    return Evaluate(form, env);
  }
};

AffineMap MapOf(const ElemAccess& m, int64_t page) {
  AffineMap out;
  out.form = ElemForm(m);
  out.ind = m.indirect ? &*m.indirect : nullptr;
  out.page = page;
  return out;
}

class GenericProver {
 public:
  GenericProver(SectionContext& ctx, int stage, const GenericFacts& facts)
      : ctx_(ctx),
        stage_(stage),
        st_(ctx.s.stages[stage]),
        g_(std::get<Generic>(st_.op)),
        facts_(facts),
        value_(facts.slot_values) {
    const size_t n = g_.ins.size();
    maps_.reserve(n);
    for (size_t k = 0; k < n; ++k) maps_.push_back(MapOf(g_.ins[k], ctx.PageElems(st_.ins[k])));
    out_map_ = MapOf(g_.out, ctx.PageElems(st_.outs[0]));
    for (const IterSpec& it : g_.iters) {
      const int a = AxisOf(it.var);
      if (a >= 0) full_.d[a] = Interval::Of(0, Wide{it.extent} - 1);
    }
    reported_.assign(n, 0);
    read_.assign(n, 0);
    guard_recorded_.assign(n, 0);
    memo_.assign(n, {});
    stamp_.assign(n, -1);
    // Slots that read the same element of the same buffer hold the same value at every point, so a guard on
    // one bounds the others (the seed's guard idiom: a stride-0 term on a second read of the index). Only the
    // integer datapath's value analysis narrows by guards.
    if (!integer()) return;
    class_of_.resize(n);
    std::map<std::tuple<int, Wide, Wide, Wide, Wide>, int> classes;
    for (size_t k = 0; k < n; ++k) {
      const AffineMap& m = maps_[k];
      if (m.ind && m.ind->stride != 0) {
        class_of_[k] = static_cast<int>(members_.size());
        members_.push_back({static_cast<int>(k)});
        continue;
      }
      auto key = std::make_tuple(st_.ins[k], m.form.base, m.form[AddrVar::kRow], m.form[AddrVar::kCol],
                                 m.form[AddrVar::kK]);
      auto [it, fresh] = classes.try_emplace(key, static_cast<int>(members_.size()));
      if (fresh) members_.emplace_back();
      class_of_[k] = it->second;
      members_[it->second].push_back(static_cast<int>(k));
    }
  }

  Interval Run() {
    Undo undo;
    if (integer()) NarrowRegion(g_.body.get(), undo);
    Interval r = Eval(g_.body.get(), full_, 0);
    CheckOut();
    Restore(undo);
    if (aborted_) return Interval::Everything();
    int64_t proven = 0;
    for (size_t k = 0; k < read_.size(); ++k) proven += read_[k] && !reported_[k];
    if (facts_.record) ctx_.proof.set_element_reads_proven(ctx_.proof.element_reads_proven() + proven);
    return Pool(r);
  }

 private:
  using Undo = std::vector<std::pair<int, Interval>>;

  bool integer() const { return facts_.int_type.has_value(); }

  void Diag(std::string_view code, std::string field, std::string expected, std::string actual, std::string msg) {
    ctx_.Diag(code, stage_, std::move(field), std::move(expected), std::move(actual), std::move(msg));
  }

  std::string BoxText(const Box& box) const {
    std::string s;
    for (const IterSpec& it : g_.iters) {
      const int a = AxisOf(it.var);
      if (a < 0) continue;
      absl::StrAppend(&s, s.empty() ? "" : ", ", kAxisNames[a], " in ", IntervalToString(box.d[a]));
    }
    return s;
  }

  std::string BufName(int slot) const { return ctx_.s.buffers[st_.ins[slot]].name; }

  void RecordGuard(const std::string& field, const IndirectTerm& t, int slot_for_value) {
    if (!facts_.record) return;
    proto::Guard* gd = ctx_.proof.add_guards();
    gd->set_stage(st_.name);
    gd->set_stage_index(stage_);
    gd->set_field(field);
    const Interval admitted = Interval::Of(0, Wide{t.modulus} - 1);
    const Interval& proven = facts_.slot_values[slot_for_value];
    gd->mutable_admitted()->set_lo(ToInt64(admitted.lo));
    gd->mutable_admitted()->set_hi(ToInt64(admitted.hi));
    gd->mutable_proven()->set_lo(ToInt64(proven.lo));
    gd->mutable_proven()->set_hi(ToInt64(proven.hi));
    gd->set_always_holds(!proven.empty() && proven.Within(admitted.lo, admitted.hi));
  }

  // The index value of an indirect term read at `box`: the guard's admitted [0, modulus). The address proof
  // rests on the admitted range, not on the range of today's index data: the guard is the contract that keeps
  // the access in its page whatever the data (a loose modulus over run-time data is a finding). Only an index
  // that is one known constant (a compile-time table entry, read for one item) is used exactly.
  Interval IndexValue(const IndirectTerm& t, const Box& box, int depth) {
    CheckRead(t.operand, box, depth + 1);
    const Interval admitted = Interval::Of(0, Wide{t.modulus} - 1);
    const Interval& v = value_[t.operand];
    return !v.empty() && v.lo == v.hi ? Meet(admitted, v) : admitted;
  }

  // One read of `slot` at every point of `box`.
  __attribute__((noinline)) void CheckRead(int slot, const Box& box, int depth) {
    if (aborted_ || depth > static_cast<int>(maps_.size()) + 1) return;
    read_[slot] = 1;
    const AffineMap& m = maps_[slot];
    Interval v = Interval::Point(0);
    if (m.ind) {
      if (!guard_recorded_[slot]) {
        guard_recorded_[slot] = 1;
        RecordGuard(absl::StrCat("ins[", slot, "].indirect"), *m.ind, m.ind->operand);
      }
      v = IndexValue(*m.ind, box, depth);
    }
    Memo& memo = memo_[slot];
    if (memo.valid && memo.box == box && memo.v == v) return;
    memo = {true, box, v};
    if (reported_[slot]) return;
    const Interval affine = m.Affine(box);
    const Interval off = m.ind ? affine + Scale(v, m.ind->stride) : affine;
    if (off.Within(0, Wide{m.page} - 1)) return;
    reported_[slot] = 1;
    const bool by_index = m.ind && affine.Within(0, Wide{m.page} - 1);
    Diag(codes::kIndexOutOfRange, absl::StrCat("ins[", slot, "]", by_index ? ".indirect" : ""),
         absl::StrCat("in [0, ", m.page, ")"), IntervalToString(off),
         absl::StrCat("slot ", slot, " reads '", BufName(slot), "' at offsets ", IntervalToString(off), " of a ",
                      m.page, "-element page", by_index ? " once its index (admitted [0, " : "",
                      by_index ? absl::StrCat(m.ind->modulus, ") times stride ", m.ind->stride, ") is added") : "",
                      " at ", BoxText(box), box == full_ ? "" : " (the box its Select path allows)"));
  }

  // The out map is written at every point of the space.
  void CheckOut() {
    if (aborted_) return;
    Interval v = Interval::Point(0);
    if (out_map_.ind) {
      RecordGuard("out.indirect", *out_map_.ind, out_map_.ind->operand);
      v = IndexValue(*out_map_.ind, full_, 0);
    }
    const Interval affine = out_map_.Affine(full_);
    const Interval off = out_map_.ind ? affine + Scale(v, out_map_.ind->stride) : affine;
    if (off.Within(0, Wide{out_map_.page} - 1)) {
      if (facts_.record) ctx_.proof.set_element_writes_proven(ctx_.proof.element_writes_proven() + 1);
      return;
    }
    Diag(codes::kIndexOutOfRange, out_map_.ind && affine.Within(0, Wide{out_map_.page} - 1) ? "out.indirect" : "out",
         absl::StrCat("in [0, ", out_map_.page, ")"), IntervalToString(off),
         absl::StrCat("the out map writes '", ctx_.s.buffers[st_.outs[0]].name, "' at offsets ",
                      IntervalToString(off), " of a ", out_map_.page, "-element page at ", BoxText(full_)));
  }

  __attribute__((noinline)) Interval AbortDepth() {
    Abort(absl::StrCat("deeper than ", kMaxDepth, " nodes"));
    return Interval::Everything();
  }
  __attribute__((noinline)) Interval AbortVisits() {
    Abort(absl::StrCat("more than ", kMaxVisits, " node visits"));
    return Interval::Everything();
  }

  void Abort(const std::string& why) {
    if (aborted_) return;
    aborted_ = true;
    Diag(codes::kMalformed, "generic.body", "a body the certifier can walk", why,
         absl::StrCat("the body is too large to certify: ", why));
  }

  // The slots a region (the part of a branch evaluated whenever the branch is) certainly reads; each read's
  // guard passes or the stage faults, so within the region each guarded index lies in [0, modulus).
  __attribute__((noinline)) void NarrowRegion(const BodyNode* root, Undo& undo) {
    const int region = next_region_++;
    seen_.clear();
    std::vector<const BodyNode*> todo{root};
    std::vector<int> slots;
    while (!todo.empty() && !aborted_) {
      const BodyNode* n = todo.back();
      todo.pop_back();
      if (!n || !seen_.insert(n).second) continue;
      if (++visits_ > kMaxVisits) {
        Abort(absl::StrCat("more than ", kMaxVisits, " node visits"));
        break;
      }
      switch (n->op) {
        case BodyOp::kOperand: slots.push_back(n->operand); break;
        case BodyOp::kSelect:
          if (n->pred.rhs_is_operand) slots.push_back(static_cast<int>(n->pred.rhs));
          break;  // its branches are regions of their own
        default:
          if (n->a.defined()) todo.push_back(n->a.get());
          if (n->b.defined()) todo.push_back(n->b.get());
          break;
      }
    }
    for (int s : slots) {
      // Follow the slot's chain of indirect reads: each index read is guarded by its own term.
      for (size_t hops = 0; s >= 0 && hops <= maps_.size(); ++hops) {
        if (stamp_[s] == region) break;
        stamp_[s] = region;
        const IndirectTerm* t = maps_[s].ind;
        if (!t) break;
        const Interval admitted = Interval::Of(0, Wide{t->modulus} - 1);
        for (int member : members_[class_of_[t->operand]]) {
          const Interval narrowed = Meet(value_[member], admitted);
          if (narrowed == value_[member]) continue;
          undo.emplace_back(member, value_[member]);
          value_[member] = narrowed;
        }
        s = t->operand;
      }
    }
  }

  __attribute__((noinline)) void Restore(Undo& undo) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) value_[it->first] = it->second;
    undo.clear();
  }

  // Narrows `box` for the branch of `p` that is taken (`then_branch`) or not. rv: the operand's values.
  __attribute__((noinline)) static Box Branch(const Box& box, const Pred& p, bool then_branch, const Interval& rv) {
    Box out = box;
    const int a = AxisOf(p.var);
    if (a < 0) return out;
    // var < rhs holds for `then` of AxisLt and `else` of AxisGe.
    const bool less = (p.kind == PredKind::kAxisLt) == then_branch;
    if (!p.rhs_is_operand) {
      out.d[a] = less ? Meet(box.d[a], Interval::Of(-kSaturate, Wide{p.rhs} - 1))
                      : Meet(box.d[a], Interval::Of(p.rhs, kSaturate));
      return out;
    }
    if (rv.empty()) {
      out.d[a] = Interval::Empty();  // the comparison's read always faults: neither branch runs
      return out;
    }
    // var < v <= hi, or var >= v >= lo (integer index values; a float operand has no bound and narrows nothing).
    out.d[a] = less ? Meet(box.d[a], Interval::Of(-kSaturate, rv.hi - 1)) : Meet(box.d[a], Interval::Of(rv.lo, kSaturate));
    return out;
  }

  // Every intermediate value of index arithmetic must fit the datapath's integer.
  __attribute__((noinline)) Interval Fits(const Interval& r, BodyOp op, const Interval& a, const Interval& b) {
    if (!integer() || r.empty()) return r;
    const Precision t = *facts_.int_type;
    const Interval type = PrecisionRange(t);
    if (r.Within(type.lo, type.hi)) return r;
    if (!overflow_reported_) {
      overflow_reported_ = true;
      Diag(codes::kIndexOverflow, "generic.body", absl::StrCat("within ", std::string(PrecisionName(t)), " ",
                                                               IntervalToString(type)),
           IntervalToString(r),
           absl::StrCat(std::string(BodyOpName(op)), " of ", IntervalToString(a), " and ", IntervalToString(b), " can reach ",
                        IntervalToString(r), ", outside the ", std::string(PrecisionName(t)),
                        " of the integer datapath (operand ranges: the index tables' values, the guards' admitted "
                        "ranges, the input precisions)"));
    }
    const Interval clamped = Meet(r, type);
    return clamped.empty() ? type : clamped;
  }

  // A divisor that is always 0 faults every run that reaches it (the VM's DivisionByZero): a program that cannot
  // run. A divisor whose range merely includes 0 is a fault only for some data — the LUT attention's denominators
  // are sums of the caller's table — and the VM reports that run by its fault, as it does a trip outside its range.
  __attribute__((noinline)) void ZeroDivisor(const Interval& b) {
    if (zero_divisor_reported_) return;
    zero_divisor_reported_ = true;
    Diag(codes::kDivisionByZero, "generic.body", "a divisor that is not always 0", IntervalToString(b),
         "a FloorDiv divides by a value that is always 0 where it is evaluated, so every run that reaches it faults "
         "(DivisionByZero)");
  }

  // A value nothing is known of: on the integer datapath, still a value of its integer type.
  Interval Unknown() const { return integer() ? PrecisionRange(*facts_.int_type) : Interval::Everything(); }

  __attribute__((noinline)) void NotOnIntegerPath(const std::string& what) {
    if (!integer() || integral_reported_) return;
    integral_reported_ = true;
    Diag(codes::kUnsupportedPrecision, "generic.body", "integer arithmetic (the integer datapath)", what,
         absl::StrCat("every buffer of this Generic is an integer, so it runs on the integer datapath, which has no ",
                      what));
  }

  // The arithmetic (__int128 corners) stays out of Eval's frame, which a long arithmetic chain pays per level.
  __attribute__((noinline)) Interval Combine(BodyOp op, const Interval& a, const Interval& b) {
    Interval r;
    switch (op) {
      case BodyOp::kAdd: r = a + b; break;
      case BodyOp::kSub: r = a - b; break;
      case BodyOp::kMul: r = a * b; break;
      case BodyOp::kMin: r = Min(a, b); break;
      case BodyOp::kMax: r = Max(a, b); break;
      default: r = FloorDiv(a, b); break;
    }
    return Fits(r, op, a, b);
  }
  __attribute__((noinline)) static Interval ShrOf(const Interval& a, int64_t by) { return Shr(a, by); }

  // The string work of a finding stays out of Eval's frame (see EvalSelect).
  __attribute__((noinline)) void NotIntegral(double v) { NotOnIntegerPath(absl::StrCat("non-integer constant ", v)); }
  __attribute__((noinline)) void NotIntegral(const SfpuKind& k) {
    NotOnIntegerPath(absl::StrCat("transform ", SfpuName(k)));
  }

  // One branch of a Select: its region's guards narrow the slots while it is evaluated.
  __attribute__((noinline)) Interval EvalBranch(const BodyNode* child, const Box& box, int depth, Undo& undo) {
    if (integer()) NarrowRegion(child, undo);
    return Eval(child, box, depth);
  }

  // Kept out of Eval so that Eval's frame, paid once per level of an arithmetic chain, stays small. A band chain
  // (a Select in the else branch of a Select, DESIGN's Banded) is walked as a loop, not by recursion: a row of
  // thousands of bands (the seed's GDN update has hv*d) costs no stack per band. Each else region is nested in
  // the previous one, so its guard narrowings accumulate until the chain ends. A Select nested in a `then`
  // branch recurses and costs kSelectDepth of the depth budget (its frames are larger than an Add's).
  __attribute__((noinline)) Interval EvalSelect(const BodyNode* n, const Box& box, int depth) {
    Interval out = Interval::Empty();
    Undo chain;
    const BodyNode* cur = n;
    Box cur_box = box;
    depth += kSelectDepth;
    while (!aborted_) {
      Interval rv = Interval::Everything();
      if (cur->pred.rhs_is_operand) {
        const int slot = static_cast<int>(cur->pred.rhs);
        if (slot < 0 || slot >= static_cast<int>(maps_.size())) break;
        CheckRead(slot, cur_box, 0);
        rv = value_[slot];
      }
      Box next_box = Branch(cur_box, cur->pred, true, rv);
      if (!next_box.empty()) {  // an empty box is a dead branch: it reads nothing
        Undo undo;
        out = Hull(out, EvalBranch(cur->b.get(), next_box, depth, undo));
        Restore(undo);
      }
      next_box = Branch(cur_box, cur->pred, false, rv);
      if (next_box.empty()) break;
      const BodyNode* next = cur->c.get();
      if (!next || next->op != BodyOp::kSelect) {
        out = Hull(out, EvalBranch(next, next_box, depth, chain));
        break;
      }
      if (integer()) NarrowRegion(next, chain);
      if (++visits_ > kMaxVisits) {
        AbortVisits();
        break;
      }
      cur = next;
      cur_box = next_box;
    }
    Restore(chain);
    return out;
  }

  Interval Eval(const BodyNode* n, const Box& box, int depth) {
    if (aborted_ || !n) return Interval::Everything();
    if (depth > kMaxDepth) return AbortDepth();
    if (++visits_ > kMaxVisits) return AbortVisits();
    switch (n->op) {
      case BodyOp::kOperand:
        if (n->operand < 0 || n->operand >= static_cast<int>(maps_.size())) return Interval::Everything();
        CheckRead(n->operand, box, 0);
        return value_[n->operand];
      case BodyOp::kConst: {
        const double v = n->value;
        if (!(v > -9.2e18 && v < 9.2e18 && v == static_cast<double>(static_cast<int64_t>(v)))) {
          if (integer()) NotIntegral(v);
          return Unknown();
        }
        return Interval::Point(static_cast<int64_t>(v));
      }
      case BodyOp::kAdd:
      case BodyOp::kSub:
      case BodyOp::kMul:
      case BodyOp::kMin:
      case BodyOp::kMax:
      case BodyOp::kFloorDiv: {
        const Interval a = Eval(n->a.get(), box, depth + 1);
        const Interval b = Eval(n->b.get(), box, depth + 1);
        if (n->op == BodyOp::kFloorDiv && b.lo == 0 && b.hi == 0) ZeroDivisor(b);
        return Combine(n->op, a, b);
      }
      case BodyOp::kShr: return ShrOf(Eval(n->a.get(), box, depth + 1), n->shift);
      case BodyOp::kUnary:
        Eval(n->a.get(), box, depth + 1);
        if (integer()) NotIntegral(n->sfpu);
        return Unknown();
      case BodyOp::kSelect: return EvalSelect(n, box, depth);
    }
    return Interval::Everything();
  }

  // The values the output page receives after the pool.
  Interval Pool(const Interval& r) {
    Wide points = 1;
    IterKind pool = IterKind::kParallel;
    for (const IterSpec& it : g_.iters) {
      if (!IsReduce(it.kind)) continue;
      pool = it.kind;
      points = Clamp(points * it.extent);
    }
    Interval out = r;
    if (pool == IterKind::kReduceSum) out = Fits(Scale(r, points), BodyOp::kAdd, r, Interval::Point(points));
    if (pool == IterKind::kReduceArgMax) out = Interval::Of(0, points - 1);
    const Precision op = ctx_.s.buffers[st_.outs[0]].precision;
    if (!IsInteger(op)) return Interval::Everything();
    if (!integer() && pool != IterKind::kReduceArgMax) return PrecisionRange(op);
    const Interval type = PrecisionRange(op);
    if (!out.Within(type.lo, type.hi)) {
      if (!overflow_reported_) {
        overflow_reported_ = true;
        Diag(codes::kIndexOverflow, "outs[0]",
             absl::StrCat("within ", std::string(PrecisionName(op)), " ", IntervalToString(type)),
             IntervalToString(out),
             absl::StrCat("the values written to '", ctx_.s.buffers[st_.outs[0]].name, "' can reach ",
                          IntervalToString(out), ", which its ", std::string(PrecisionName(op)),
                          " precision cannot hold"));
      }
      return type;
    }
    return out;
  }

  struct Memo {
    bool valid = false;
    Box box;
    Interval v;
  };

  SectionContext& ctx_;
  int stage_;
  const Stage& st_;
  const Generic& g_;
  const GenericFacts& facts_;
  std::vector<Interval> value_;  // per slot, narrowed by the guards of the regions entered
  std::vector<AffineMap> maps_;
  AffineMap out_map_;
  Box full_;
  std::vector<char> reported_, read_, guard_recorded_;
  std::vector<Memo> memo_;
  std::vector<int> class_of_;
  std::vector<std::vector<int>> members_;
  std::vector<int> stamp_;
  int next_region_ = 0;
  absl::flat_hash_set<const BodyNode*> seen_;
  int64_t visits_ = 0;
  bool aborted_ = false;
  bool overflow_reported_ = false;
  bool zero_divisor_reported_ = false;
  bool integral_reported_ = false;
};

}  // namespace

Interval ProveGeneric(SectionContext& ctx, int stage, const GenericFacts& facts) {
  return GenericProver(ctx, stage, facts).Run();
}

}  // namespace spatial::certify
