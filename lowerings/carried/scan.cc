#include "lowerings/carried/scan.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"
#include "spatial/validate.h"

namespace spatial {
namespace {

// The MAX scan's identity (the attention folds' MASKED): e^(MASKED - m) is exactly 0.
constexpr double kMaxIdentity = -1.0e30;

struct ScanShape {
  int64_t steps = 0;
  int64_t lanes = 0;
  bool max = false;
  bool discounted = false;
  bool exclusive = false;
  bool denominator = false;
};

absl::StatusOr<ScanShape> ScanShapeOf(const proto::OpSpec& spec) {
  const proto::ScanSpec& s = spec.scan();
  RETURN_IF_ERROR(CheckElements("scan", "steps", s.steps()));
  RETURN_IF_ERROR(CheckElements("scan", "lanes", s.lanes()));
  ScanShape sh{s.steps(), s.lanes(), s.op() == proto::ScanSpec::MAX, s.discounted(), s.exclusive(),
               s.softmax_denominator()};
  if (sh.max && sh.discounted) return NotLowered("a discounted MAX scan: a discount scales a sum's earlier terms");
  if (sh.denominator && (sh.max || sh.discounted || sh.exclusive)) {
    return NotLowered("a softmax denominator that is discounted, exclusive or MAX: the denominator is its own SUM "
                      "scan, discounted by the maximum's rescale");
  }
  return sh;
}

// One lane tile's page, tile_rows x tile_cols: row j is ROW-major at j * tile_cols.
ElemAccess Row(int64_t j, int64_t tw) { return ElemAccess{j * tw, {{LoopVar::kCol, 1}}, std::nullopt}; }

// The block's chain: tile_rows stages, step j rewriting row j of `page` (fp32, carried) from row j - 1 (row
// tile_rows - 1, the previous block's last, for j = 0), x's row j and d's row j.
void AddChain(Template& t, const std::string& name, BufferId page, BufferId x, std::optional<BufferId> d, bool max) {
  const int64_t tr = t.tile_rows(), tw = t.tile_cols();
  for (int64_t j = 0; j < tr; ++j) {
    std::vector<BufferId> ins{page, page, x};
    std::vector<ElemAccess> maps{IdentMap(tw), Row(j == 0 ? tr - 1 : j - 1, tw), Row(j, tw)};
    Body next;
    if (max) {
      next = Max(Op(1), Op(2));
    } else if (d) {
      ins.push_back(*d);
      maps.push_back(Row(j, tw));
      next = Add(Mul(Op(3), Op(1)), Op(2));
    } else {
      next = Add(Op(1), Op(2));
    }
    // Rows before j and after it keep their values; row j takes the step.
    Body body = Select(Pred::Lt(LoopVar::kRow, j + 1), next, Op(0));
    if (j > 0) body = Select(Pred::Lt(LoopVar::kRow, j), Op(0), body);
    t.AddGeneric(absl::StrCat(name, "_step", j), TileSpace(tr, tw), ins, maps, IdentMap(tw), body, page);
  }
}

// The carry a block starts from (the page's last row, before step 0 rewrites anything), in every row of a page.
BufferId AddCarryIn(Template& t, const std::string& name, BufferId page) {
  const int64_t tr = t.tile_rows(), tw = t.tile_cols();
  const BufferId carry = t.AddScratchDeep(name, 1, 1, Precision::kFp32);
  t.AddGeneric(name, TileSpace(tr, tw), {page}, {Row(tr - 1, tw)}, IdentMap(tw), Op(0), carry);
  return carry;
}

// The exclusive page: row r is the carry before step r (row r - 1 of the block's page, the carry in for row 0),
// times d_r for a discounted SUM.
BufferId AddExclusive(Template& t, const std::string& name, BufferId page, BufferId carry,
                      std::optional<BufferId> d) {
  const int64_t tr = t.tile_rows(), tw = t.tile_cols();
  const BufferId out = t.AddScratchDeep(name, 1, 1, Precision::kFp32);
  std::vector<BufferId> ins{carry, page};
  // Row r - 1 of the page; at row 0 it would be out of the page, but Select is lazy and row 0 reads the carry.
  std::vector<ElemAccess> maps{IdentMap(tw), ElemAccess{-tw, {{LoopVar::kRow, tw}, {LoopVar::kCol, 1}}, std::nullopt}};
  Body before = Select(Pred::Lt(LoopVar::kRow, 1), Op(0), Op(1));
  if (d) {
    ins.push_back(*d);
    maps.push_back(IdentMap(tw));
    before = Mul(Op(2), before);
  }
  t.AddGeneric(name, TileSpace(tr, tw), ins, maps, IdentMap(tw), before, out);
  return out;
}

}  // namespace

absl::StatusOr<Composition> FromScan(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(const ScanShape sh, ScanShapeOf(spec));
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "scan", sh.discounted ? 2 : 1));
  RETURN_IF_ERROR(RequireFp32Accumulator("a scan's carried page", target));
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  const int64_t tr = target.tile_rows(), tw = target.tile_cols();
  const int64_t blocks = CeilDiv(sh.steps, tr);
  const int64_t lanes_t = CeilDiv(sh.lanes, tw);
  const std::string what = absl::StrCat("a scan of ", sh.steps, " steps x ", sh.lanes, " lanes");
  RETURN_IF_ERROR(WorkItemBudget(what, lanes_t));
  if (blocks > kMaxFoldBlocks) {
    return NotLowered(absl::StrCat(what, ": ", blocks, " blocks of ", tr, " steps, more than a fold runs (",
                                   kMaxFoldBlocks, ")"));
  }
  const bool fold = blocks > 1;
  const std::string& out = spec.out();

  Template t(tr, tw);
  auto input = [&](const OperandRef& op) -> absl::StatusOr<TensorId> {
    ASSIGN_OR_RETURN(TensorInit init, InitOf(op.fill, sh.steps * sh.lanes));
    return t.AddTensor(op.name, TensorRole::kInput, sh.steps, sh.lanes, precision, std::move(init));
  };
  ASSIGN_OR_RETURN(const TensorId x, input(ops[0]));
  std::optional<TensorId> d;
  if (sh.discounted) {
    ASSIGN_OR_RETURN(d, input(ops[1]));
  }
  auto output = [&](const std::string& name) {
    return t.AddTensor(name, TensorRole::kOutput, sh.steps, sh.lanes, precision, TensorInit::Zero());
  };

  // ── The prologue, once per lane tile: the identity in the carried page(s).
  const BufferId page = t.AddScratchDeep("page", 2, 1, Precision::kFp32);
  t.AddGeneric("init_page", TileSpace(tr, tw), {}, {}, IdentMap(tw), Const(sh.max || sh.denominator ? kMaxIdentity : 0),
               page);
  std::optional<BufferId> sums;
  if (sh.denominator) {
    sums = t.AddScratchDeep("sums", 2, 1, Precision::kFp32);
    t.AddGeneric("init_sums", TileSpace(tr, tw), {}, {}, IdentMap(tw), Const(0.0), *sums);
  }

  // ── The body, once per block of tile_rows steps.
  t.SetPhase(fold ? Phase::kBody : Phase::kPrologue);
  if (fold) t.Fold(blocks);
  std::vector<Term> at{{LoopVar::kItemX, 1}};
  if (fold) at.push_back({LoopVar::kKBlock, lanes_t});
  auto load = [&](const std::string& name, TensorId tensor) {
    const BufferId b = t.AddBufferDeep(absl::StrCat("in_", name), 2, 1, precision);
    t.AddLoadBlockAt(absl::StrCat("load_", name), tensor, 0, at, {}, b);
    return b;
  };
  auto store = [&](const std::string& name, BufferId from, TensorId tensor) {
    const BufferId b = t.AddBufferDeep(absl::StrCat("out_", name), 2, 1, precision);
    t.AddGeneric(name, TileSpace(tr, tw), {from}, {IdentMap(tw)}, IdentMap(tw), Op(0), b);
    t.AddStoreBlock(absl::StrCat("store_", name), tensor, 0, at, {}, b);
  };
  const BufferId x_in = load("x", x);
  std::optional<BufferId> d_in;
  if (d) d_in = load("d", *d);
  std::string name;
  if (!sh.denominator) {
    std::optional<BufferId> carry;
    if (sh.exclusive) carry = AddCarryIn(t, "carry_in", page);
    AddChain(t, sh.max ? "max" : "sum", page, x_in, d_in, sh.max);
    store("y", page, output(out));
    if (sh.exclusive) {
      const BufferId excl = AddExclusive(t, "exclusive", page, *carry, d_in);
      store("y_exclusive", excl, output(absl::StrCat(out, "_exclusive")));
    }
    name = absl::StrCat("scan_", sh.max ? "max_" : "sum_", sh.steps, "x", sh.lanes, sh.discounted ? "_discounted" : "",
                        sh.exclusive ? "_exclusive" : "");
  } else {
    // m = MAX scan of x, m_(t-1) its exclusive page; then s = SUM scan of e^(x - m) discounted by e^(m_(t-1) - m).
    const BufferId carry = AddCarryIn(t, "carry_in", page);
    AddChain(t, "max", page, x_in, std::nullopt, true);
    const BufferId m_prev = AddExclusive(t, "max_before", page, carry, std::nullopt);
    const BufferId rescale = t.AddScratchDeep("rescale", 1, 1, Precision::kFp32);
    t.AddGeneric("rescale", TileSpace(tr, tw), {m_prev, page}, {IdentMap(tw), IdentMap(tw)}, IdentMap(tw),
                 Unary(SfpuKind::ExpAccurate(), Sub(Op(0), Op(1))), rescale);
    const BufferId terms = t.AddScratchDeep("terms", 1, 1, Precision::kFp32);
    t.AddGeneric("terms", TileSpace(tr, tw), {x_in, page}, {IdentMap(tw), IdentMap(tw)}, IdentMap(tw),
                 Unary(SfpuKind::Exp(), Sub(Op(0), Op(1))), terms);
    AddChain(t, "sum", *sums, terms, rescale, false);
    store("max", page, output(absl::StrCat(out, "_max")));
    store("y", *sums, output(out));
    name = absl::StrCat("scan_softmax_denominator_", sh.steps, "x", sh.lanes);
  }
  WireFirstReaders(t);
  std::vector<WorkItem> items;
  for (int64_t i = 0; i < lanes_t; ++i) {
    items.push_back(WorkItem{.id = i, .y = 0, .x = i, .out = TileRect{.row0_t = 0, .col0_t = i, .h_t = blocks,
                                                                      .w_t = 1}});
  }
  return FinishSection(t, std::move(name), std::move(items), Precision::kFp32, ApproxIn("scan", precision), target,
                       DstPolicy::kStreamed);
}

absl::StatusOr<TensorMap> ReferenceScan(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(const ScanShape sh, ScanShapeOf(spec));
  ASSIGN_OR_RETURN(const std::vector<OperandRef> ops, OperandsOf(spec, "scan", sh.discounted ? 2 : 1));
  ASSIGN_OR_RETURN(const TensorData* x, RefInput(inputs, ops[0].name, sh.steps, sh.lanes));
  const TensorData* d = nullptr;
  if (sh.discounted) {
    ASSIGN_OR_RETURN(d, RefInput(inputs, ops[1].name, sh.steps, sh.lanes));
  }
  TensorData y = RefResult(sh.steps, sh.lanes, x->precision);
  TensorData z = RefResult(sh.steps, sh.lanes, x->precision);
  for (int64_t c = 0; c < sh.lanes; ++c) {
    double carry = sh.max || sh.denominator ? kMaxIdentity : 0.0;
    for (int64_t t = 0; t < sh.steps; ++t) {
      const size_t at = static_cast<size_t>(t * sh.lanes + c);
      const double xt = x->values[at];
      if (sh.denominator) {
        // The direct formula: the maximum so far, and the sum of every earlier term against it.
        carry = std::max(carry, xt);
        double s = 0.0;
        for (int64_t j = 0; j <= t; ++j) s += std::exp(x->values[static_cast<size_t>(j * sh.lanes + c)] - carry);
        z.values[at] = carry;
        y.values[at] = s;
        continue;
      }
      const double seen = sh.max ? carry : (d != nullptr ? d->values[at] : 1.0) * carry;
      carry = sh.max ? std::max(carry, xt) : seen + xt;
      z.values[at] = seen;
      y.values[at] = carry;
    }
  }
  TensorMap m;
  if (sh.denominator) {
    m.emplace(absl::StrCat(spec.out(), "_max"), std::move(z));
  } else if (sh.exclusive) {
    m.emplace(absl::StrCat(spec.out(), "_exclusive"), std::move(z));
  }
  m.emplace(spec.out(), std::move(y));
  return m;
}

}  // namespace spatial
