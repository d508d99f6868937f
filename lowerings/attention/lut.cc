#include "lowerings/attention/lut.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/geometry.h"  // LiteralPositionOutsideCache
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The largest magnitude of an int8 product q*k or w*v: (-128) * (-128).
constexpr int64_t kInt8Product = 128 * 128;

// A body that holds at a live position and is `otherwise` past P, against the bound in slot `bound_slot`.
Body Fenced(std::optional<int> bound_slot, Body then, Body otherwise) {
  if (!bound_slot) return then;
  return Select(Pred::LtOperand(LoopVar::kCol, *bound_slot), std::move(then), std::move(otherwise));
}

// An int8 operand of `n` values, loaded whole.
absl::StatusOr<BufferId> Int8Input(FlatBuild& f, const OperandRef& op, int64_t n) {
  return f.InputPaged(op.name, n, op.fill, Precision::kInt8, 2);
}

// Section 1: s[v*att + j] = sum_e Q[v*hd + e] * K[j*(kv*hd) + kvh*hd + e]. Integer reductions carry no scaler.
absl::StatusOr<Composition> Scores(const LutShape& s, const std::vector<OperandRef>& ops, const std::string& out,
                                   const std::string& tag, const Target& target) {
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kInt, target));
  ASSIGN_OR_RETURN(const BufferId q, Int8Input(f, ops[0], s.h * s.hd));
  ASSIGN_OR_RETURN(const BufferId k, Int8Input(f, ops[1], s.l * s.kv * s.hd));
  const int64_t nl = s.h * s.attended;
  const BufferId out_buf = f.t().AddBuffer("scores", TilesOf(nl, target), f.precision());
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  const int64_t j_stride = s.kv * s.hd;
  for (int64_t head = 0; head < s.h; ++head) {
    const int64_t kvh = head / s.group;
    slots.push_back(Slot{q, ElemAccess{head * s.hd, {{LoopVar::kRow, 1}}, std::nullopt}});
    const int q_slot = static_cast<int>(slots.size()) - 1;
    slots.push_back(Slot{k, ElemAccess{kvh * s.hd - head * s.attended * j_stride,
                                       {{LoopVar::kCol, j_stride}, {LoopVar::kRow, 1}}, std::nullopt}});
    const int k_slot = static_cast<int>(slots.size()) - 1;
    bands.push_back({(head + 1) * s.attended, Mul(Op(q_slot), Op(k_slot))});
  }
  const StageId st = f.Compute(
      "lut_scores", {IterSpec{LoopVar::kRow, s.hd, IterKind::kReduceSum}, IterSpec{LoopVar::kCol, nl, IterKind::kParallel}},
      std::move(slots), PerColMap(), Banded(bands), out_buf);
  return f.Finish(out, nl, {st}, out_buf, absl::StrCat(tag, "_scores"), NumericsClaim::Exact());
}

// Section 2: per head, the row maximum over the attended positions, the LUT index, and the weight.
absl::StatusOr<Composition> Weights(const LutShape& s, const std::vector<OperandRef>& ops,
                                    const std::string& scores_name, const std::string& out, const std::string& tag,
                                    const Target& target) {
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kInt, target));
  Template& t = f.t();
  const int64_t att = s.attended;
  const int64_t nl = s.h * att;
  ASSIGN_OR_RETURN(const BufferId sc, f.Input(scores_name, nl, proto::Fill()));
  ASSIGN_OR_RETURN(const BufferId e, Int8Input(f, ops[3], s.n));
  const int64_t one_w = t.PageWidth(1);
  const int64_t flat_w = t.PageWidth(TilesOf(nl, target));
  std::vector<StageId> chain;
  // When the bound is the program's: P checked to 1 <= P <= l (or the run stops), and head v's threshold v*att + P —
  // its position j sits at flat column v*att + j, live iff below it.
  std::optional<BufferId> pc, thr;
  if (s.named) {
    RETURN_IF_ERROR(RequireIndexArithmetic("a LUT attention's computed position", target));
    ASSIGN_OR_RETURN(const Precision ix, IndexType(target, nl + s.l));
    ASSIGN_OR_RETURN(const BufferId p_in, f.InputPaged(ops[4].name, 1, ops[4].fill, ix, 2));
    const IndexChain checked = CheckedCount(f, p_in, s.l, ix);
    chain.insert(chain.end(), checked.stages.begin(), checked.stages.end());
    pc = checked.out;
    const int64_t h_t = TilesOf(s.h, target);
    thr = t.AddScratchDeep("thresholds", 1, h_t, ix);
    std::vector<std::pair<int64_t, Body>> tb;
    for (int64_t head = 0; head < s.h; ++head) {
      tb.push_back({head + 1, Add(Const(static_cast<double>(head * att)), Op(0))});
    }
    chain.push_back(f.Compute("thresholds", FlatSpace(s.h), {Slot{*pc, Fixed(0)}}, IdentMap(t.PageWidth(h_t)),
                              Banded(tb), *thr));
  }
  // The row maximum: ONE FOLD PER HEAD, each a single row over its own slice of the flat scores. The fold's column IS
  // j, read against P itself; past P the fold takes the head's first score again — attended at every P >= 1, never
  // above the maximum.
  std::vector<BufferId> rmax;
  for (int64_t head = 0; head < s.h; ++head) {
    const std::string name = absl::StrCat("row_max_", head);
    const BufferId m = f.Scratch(name, 1);
    std::vector<Slot> slots{Slot{sc, At(head * att)}};
    std::optional<int> p_slot;
    Body otherwise = Const(0.0);
    if (pc) {
      slots.push_back(Slot{*pc, Fixed(0)});
      p_slot = static_cast<int>(slots.size()) - 1;
      slots.push_back(Slot{sc, Fixed(head * att)});
      otherwise = Op(static_cast<int>(slots.size()) - 1);
    }
    chain.push_back(f.Compute(name, HeadSpace(1, att, IterKind::kReduceMax), std::move(slots), PerRowMap(one_w),
                              Fenced(p_slot, Op(0), otherwise), m));
    rmax.push_back(m);
  }
  // idx[v*att + j] = clamp(((max_v - s_j) * M) >> S, 0, n - 1), 0 past P.
  const BufferId idx = f.Scratch("lut_index", TilesOf(nl, target));
  {
    std::vector<Slot> slots{Slot{sc, At(0)}};
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t head = 0; head < s.h; ++head) {
      slots.push_back(Slot{rmax[head], Fixed(0)});
      const int mx = static_cast<int>(slots.size()) - 1;
      std::optional<int> thr_slot;
      if (thr) {
        slots.push_back(Slot{*thr, Fixed(head)});
        thr_slot = static_cast<int>(slots.size()) - 1;
      }
      Body index = Min(Max(Shr(Mul(Sub(Op(mx), Op(0)), Const(static_cast<double>(s.m))), s.s), Const(0.0)),
                       Const(static_cast<double>(s.n - 1)));
      bands.push_back({(head + 1) * att, Fenced(thr_slot, index, Const(0.0))});
    }
    chain.push_back(f.Compute("lut_index", FlatSpace(nl), std::move(slots), IdentMap(flat_w), Banded(bands), idx));
  }
  // w = E[idx] at a live position, 0 past P: a weight of 0 adds nothing to either sum. The gather is guarded
  // 0 <= idx < n (always so, by the clamp; a masked position's idx is 0 and is not read).
  const BufferId out_buf = t.AddBuffer("weights", TilesOf(nl, target), f.precision());
  {
    std::vector<Slot> slots{Slot{idx, At(0)}, Slot{e, WithIndirect(ConstMap(), 0, 1, s.n)}};
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t head = 0; head < s.h; ++head) {
      std::optional<int> thr_slot;
      if (thr) {
        slots.push_back(Slot{*thr, Fixed(head)});
        thr_slot = static_cast<int>(slots.size()) - 1;
      }
      bands.push_back({(head + 1) * att, Fenced(thr_slot, Op(1), Const(0.0))});
    }
    chain.push_back(f.Compute("lut_weight", FlatSpace(nl), std::move(slots), IdentMap(flat_w), Banded(bands), out_buf));
  }
  return f.Finish(out, nl, chain, out_buf, absl::StrCat(tag, "_weights"), NumericsClaim::Exact());
}

// Section 3: ctx[v*hd + e] = floor(sum_j w[v*att + j] * V[j, kvh, e] / sum_j w[v*att + j]).
absl::StatusOr<Composition> Context(const LutShape& s, const std::vector<OperandRef>& ops,
                                    const std::string& weights_name, const std::string& out, const std::string& tag,
                                    const Target& target) {
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kInt, target));
  Template& t = f.t();
  const int64_t att = s.attended;
  const int64_t nl = s.h * att;
  const int64_t nh = s.h * s.hd;
  ASSIGN_OR_RETURN(const BufferId w, f.Input(weights_name, nl, proto::Fill()));
  ASSIGN_OR_RETURN(const BufferId v, Int8Input(f, ops[2], s.l * s.kv * s.hd));
  const int64_t one_w = t.PageWidth(1);
  std::vector<StageId> chain;
  // One denominator fold per head, as the maxima are.
  std::vector<BufferId> den;
  for (int64_t head = 0; head < s.h; ++head) {
    const std::string name = absl::StrCat("den_", head);
    const BufferId d = f.Scratch(name, 1);
    chain.push_back(f.Compute(name, HeadSpace(1, att, IterKind::kReduceSum), {Slot{w, At(head * att)}},
                              PerRowMap(one_w), Op(0), d));
    den.push_back(d);
  }
  const BufferId num = f.Scratch("num", TilesOf(nh, target));
  {
    std::vector<Slot> slots;
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t head = 0; head < s.h; ++head) {
      const int64_t kvh = head / s.group;
      slots.push_back(Slot{w, ElemAccess{head * att, {{LoopVar::kRow, 1}}, std::nullopt}});
      const int w_slot = static_cast<int>(slots.size()) - 1;
      slots.push_back(Slot{v, ElemAccess{kvh * s.hd - head * s.hd, {{LoopVar::kRow, s.kv * s.hd}, {LoopVar::kCol, 1}},
                                         std::nullopt}});
      const int v_slot = static_cast<int>(slots.size()) - 1;
      bands.push_back({(head + 1) * s.hd, Mul(Op(w_slot), Op(v_slot))});
    }
    chain.push_back(f.Compute(
        "num", {IterSpec{LoopVar::kRow, att, IterKind::kReduceSum}, IterSpec{LoopVar::kCol, nh, IterKind::kParallel}},
        std::move(slots), PerColMap(), Banded(bands), num));
  }
  const BufferId out_buf = t.AddBuffer("out", TilesOf(nh, target), f.precision());
  {
    std::vector<Slot> slots{Slot{num, At(0)}};
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t head = 0; head < s.h; ++head) {
      slots.push_back(Slot{den[head], Fixed(0)});
      bands.push_back({(head + 1) * s.hd, FloorDiv(Op(0), Op(static_cast<int>(slots.size()) - 1))});
    }
    chain.push_back(f.Compute("floor_div", FlatSpace(nh), std::move(slots), IdentMap(t.PageWidth(TilesOf(nh, target))),
                              Banded(bands), out_buf));
  }
  return f.Finish(out, nh, chain, out_buf, absl::StrCat(tag, "_context"), NumericsClaim::Exact());
}

}  // namespace

absl::StatusOr<LutShape> LutShapeOf(const proto::OpSpec& spec) {
  if (spec.kind_case() != proto::OpSpec::kLutAttention) {
    return absl::InvalidArgumentError("a LUT attention shape is read from an OpSpec of kind 'lut_attention'");
  }
  const proto::LutAttentionSpec& a = spec.lut_attention();
  RETURN_IF_ERROR(CheckNotNegative("lut_attention", {{"h", a.h()}, {"kv", a.kv()}, {"hd", a.hd()}, {"l", a.l()},
                                                     {"table_len", a.table_len()}, {"s", a.s()}}));
  LutShape s;
  s.h = a.h(), s.kv = a.kv(), s.hd = a.hd(), s.l = a.l(), s.n = a.table_len(), s.m = a.m(), s.s = a.s();
  // The index is an arithmetic shift of an int64 product (as int_requant's): past 62 it has no integer meaning, and
  // the program model holds no shift past 63.
  if (s.s > 62) return NotLowered(absl::StrCat("a LUT attention index shift outside [0, 62] (", s.s, ")"));
  if (s.h == 0 || s.kv == 0 || s.hd == 0 || s.l == 0 || s.n == 0 || s.h % s.kv != 0) {
    return NotLowered(
        "a LUT attention with no heads, no head dimension, no cache or no table, or query heads that do not group "
        "over its K/V heads");
  }
  s.group = s.h / s.kv;
  // The positions attended: the whole cache, a literal prefix of it, or — masked — the first P for a P the program
  // computes (its operand follows Q, K, V, E).
  s.attended = s.l;
  switch (a.pos().kind_case()) {
    case proto::RowIndex::KIND_NOT_SET: break;
    case proto::RowIndex::kLiteral:
      if (a.pos().literal() < 1 || a.pos().literal() > s.l) {
        return LiteralPositionOutsideCache(a.pos().literal(), 1, s.l);
      }
      s.attended = a.pos().literal();
      break;
    case proto::RowIndex::kNamed:
      s.named = true;
      if (a.pos().named().empty()) {
        return absl::InvalidArgumentError("the LUT attention's position is named by an empty string (pos { named: \"\" })");
      }
      if (spec.operands_size() > 4 && spec.operands(4).name() != a.pos().named()) {
        return absl::InvalidArgumentError(absl::StrCat("the LUT attention's position is named '", a.pos().named(),
                                                       "' but its operand 4 is '", spec.operands(4).name(), "'"));
      }
      break;
  }
  return s;
}

absl::StatusOr<Composition> FromLutAttention(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(const LutShape s, LutShapeOf(spec));
  // Every section unrolls its bands, and the weights a fold, per query head.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a LUT attention of ", s.h, " query heads"), "unrolled heads", s.h));
  RETURN_IF_ERROR(CheckedElements("lut_attention scores h x attended", s.h, s.attended).status());
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "lut_attention", s.named ? 5 : 4));
  ASSIGN_OR_RETURN(const Precision dp, DatapathPrecision(Datapath::kInt, target));
  if (!target.supports_storage(Precision::kInt8)) {
    return MissingPrecision("int8 storage for a LUT attention's operands", target);
  }
  // Every value must stay inside the datapath's integer where the certifier can prove it: int8 scores of hd terms
  // reach hd*128^2, the index product twice that times |M|, a numerator att*128^2.
  const int64_t cap = IntMax(dp);
  // |M| in 128 bits: std::llabs(INT64_MIN) is undefined.
  const __int128 m_abs = s.m < 0 ? -static_cast<__int128>(s.m) : static_cast<__int128>(s.m);
  const __int128 product = static_cast<__int128>(2) * s.hd * kInt8Product * m_abs;
  const __int128 sums = static_cast<__int128>(std::max(s.hd, s.attended)) * kInt8Product;
  if (product > cap || sums > cap) {
    return NotLowered(absl::StrCat("a LUT attention whose index product (max - s) * M can leave the integer datapath (",
                                   "int8 scores of ", s.hd, " terms times M = ", s.m, ", ", s.attended,
                                   " positions, in ", std::string(PrecisionName(dp)), ")"));
  }
  const std::string tag = absl::StrCat("lut_attn_", s.h, "x", s.attended);
  const std::string scores_name = absl::StrCat(spec.out(), "_scores");
  const std::string weights_name = absl::StrCat(spec.out(), "_weights");
  ASSIGN_OR_RETURN(Composition score, Scores(s, ops, scores_name, tag, target));
  ASSIGN_OR_RETURN(Composition weights, Weights(s, ops, scores_name, weights_name, tag, target));
  ASSIGN_OR_RETURN(Composition context, Context(s, ops, weights_name, spec.out(), tag, target));
  std::string name = tag;
  std::vector<Composition> parts;
  parts.push_back(std::move(score));
  parts.push_back(std::move(weights));
  parts.push_back(std::move(context));
  // The flat sections load the cache and the table whole: a site that cannot hold them is refused, never a program
  // whose pages the model cannot hold.
  return FitsSites(ComposeSections(std::move(name), std::move(parts), target), "LUT attention", target);
}

}  // namespace spatial
