#include "lowerings/elementwise/binary.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// What every form shares: the operands, the body, the precisions and the names.
struct BinaryPlan {
  std::vector<OperandRef> ops;
  std::string out;
  std::string kind;  // "binary_add", the stage's name
  Body body;
  Precision p = Precision::kBf16;   // the result, and a float map's inputs
  Precision in = Precision::kBf16;  // the inputs
  Precision acc = Precision::kFp32;
  bool broadcast = false;
  NumericsClaim claim;
};

// One row, one whole-row item.
absl::StatusOr<Composition> FlatBinary(const BinaryPlan& b, int64_t n, const Target& target) {
  FlatBuild f = FlatBuild::At(b.p, target);
  f.SetAcc(b.acc);
  ASSIGN_OR_RETURN(BufferId a_in, f.InputPaged(b.ops[0].name, n, b.ops[0].fill, b.in, 2));
  ASSIGN_OR_RETURN(BufferId b_in, f.InputPaged(b.ops[1].name, n, b.ops[1].fill, b.in, 2));
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = f.t().AddBuffer("out", cols_t, b.p);
  const int64_t w = f.t().PageWidth(cols_t);
  StageId s = f.Compute(b.kind, FlatSpace(n), {Slot{a_in, At(0)}, Slot{b_in, At(0)}}, IdentMap(w), b.body, out_buf);
  return f.Finish(b.out, n, {s}, out_buf, absl::StrCat(b.kind, "_", n), b.claim);
}

// ★ A MAP HAS NO CROSS-ELEMENT DEPENDENCE, so a row wider than a site holds is one item per tile (as the unary
// map's blocked form).
absl::StatusOr<Composition> BlockedBinary(const BinaryPlan& b, int64_t n, const Target& target) {
  const int64_t cols_t = TilesOf(n, target);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat(b.kind, " n = ", n), cols_t));
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit a_init, InitOf(b.ops[0].fill, n));
  ASSIGN_OR_RETURN(TensorInit b_init, InitOf(b.ops[1].fill, n));
  TensorId at = t.AddTensor(b.ops[0].name, TensorRole::kInput, 1, n, b.in, std::move(a_init));
  TensorId bt = t.AddTensor(b.ops[1].name, TensorRole::kInput, 1, n, b.in, std::move(b_init));
  TensorId ct = t.AddTensor(b.out, TensorRole::kOutput, 1, n, b.p, TensorInit::Zero());
  BufferId a_in = t.AddBuffer("in_a", 1, b.in);
  BufferId b_in = t.AddBuffer("in_b", 1, b.in);
  BufferId out_buf = t.AddBuffer("out", 1, b.p);
  StageId la = t.AddLoad("load_a", at, {{LoopVar::kItemX, 1}}, 1, a_in);
  StageId lb = t.AddLoad("load_b", bt, {{LoopVar::kItemX, 1}}, 1, b_in);
  const int64_t w = t.PageWidth(1);
  // The last tile computes over its padding columns too; the store drops them.
  StageId s = t.AddGeneric(b.kind, FlatSpace(w), {a_in, b_in}, {IdentMap(w), IdentMap(w)}, IdentMap(w), b.body,
                           out_buf);
  StageId st = t.AddStore(absl::StrCat("store_", b.out), ct, {{LoopVar::kItemX, 1}}, 1, out_buf);
  t.AddEdge(la, a_in, s);
  t.AddEdge(lb, b_in, s);
  t.AddEdge(s, out_buf, st);
  return FinishSection(t, absl::StrCat(b.kind, "_", n), ItemsPerTile(cols_t), b.acc, b.claim, target);
}

// A matrix, one item per tile of the grid; a broadcast B is one row, its tile of the item's columns read down
// every row (★ A BROADCAST IS A MISSING TERM: the map has no row term).
absl::StatusOr<Composition> MatrixBinary(const BinaryPlan& b, int64_t rows, int64_t cols, const Target& target) {
  ASSIGN_OR_RETURN(const int64_t elems, CheckedElements(absl::StrCat(b.kind, " shape"), rows, cols));
  const int64_t tr = target.tile_rows(), tw = target.tile_cols();
  const int64_t rows_t = CeilDiv(rows, tr), cols_t = CeilDiv(cols, tw);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat(b.kind, " of ", rows, " x ", cols), CheckedMul(rows_t, cols_t)));
  Template t(tr, tw);
  ASSIGN_OR_RETURN(TensorInit a_init, InitOf(b.ops[0].fill, elems));
  ASSIGN_OR_RETURN(TensorInit b_init, InitOf(b.ops[1].fill, b.broadcast ? cols : elems));
  TensorId at = t.AddTensor(b.ops[0].name, TensorRole::kInput, rows, cols, b.in, std::move(a_init));
  TensorId bt = t.AddTensor(b.ops[1].name, TensorRole::kInput, b.broadcast ? 1 : rows, cols, b.in, std::move(b_init));
  TensorId ct = t.AddTensor(b.out, TensorRole::kOutput, rows, cols, b.p, TensorInit::Zero());
  const std::vector<Term> grid = TileGridSteps(cols_t);
  BufferId a_in = t.AddBuffer("in_a", 1, b.in);
  BufferId b_in = t.AddBuffer("in_b", 1, b.in);
  BufferId out_buf = t.AddBuffer("out", 1, b.p);
  StageId la = t.AddLoad("load_a", at, grid, 1, a_in);
  StageId lb = t.AddLoad("load_b", bt, b.broadcast ? std::vector<Term>{{LoopVar::kItemX, 1}} : grid, 1, b_in);
  const ElemAccess b_map = b.broadcast ? PerColMap() : IdentMap(tw);
  StageId s = t.AddGeneric(b.kind, TileSpace(tr, tw), {a_in, b_in}, {IdentMap(tw), b_map}, IdentMap(tw), b.body,
                           out_buf);
  StageId st = t.AddStore(absl::StrCat("store_", b.out), ct, grid, 1, out_buf);
  t.AddEdge(la, a_in, s);
  t.AddEdge(lb, b_in, s);
  t.AddEdge(s, out_buf, st);
  const std::string name = absl::StrCat(b.kind, b.broadcast ? "_row_" : "_", rows, "x", cols);
  return FinishSection(t, name, ItemsPerTileGrid(rows_t, cols_t), b.acc, b.claim, target);
}

// The widest integer the target stores whose every a op b stays on the integer datapath `dp`.
std::optional<Precision> IntInputs(proto::BinarySpec::Op op, Precision dp, const Target& target) {
  for (Precision in : {Precision::kInt32, Precision::kInt16, Precision::kInt8}) {
    if (!target.supports_storage(in) || *IntBits(in) > *IntBits(dp)) continue;
    const double m = static_cast<double>(-IntMin(in));  // the largest magnitude an input holds
    const double worst = op == proto::BinarySpec::MUL ? m * m : 2.0 * m;
    if (worst <= static_cast<double>(IntMax(dp))) return in;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Composition> FromBinary(const proto::OpSpec& spec, const Target& target) {
  const auto& bs = spec.binary();
  if (!proto::BinarySpec::Op_IsValid(bs.op()) || bs.op() == proto::BinarySpec::OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("binary.op is ", bs.op() == proto::BinarySpec::OP_UNSPECIFIED ? "unset" : "not an op", " (",
                     static_cast<int>(bs.op()), "): ADD, SUB or MUL"));
  }
  BinaryPlan b;
  ASSIGN_OR_RETURN(b.ops, OperandsOf(spec, "binary", 2));
  RETURN_IF_ERROR(CheckElements("binary", "n", bs.n()));
  ASSIGN_OR_RETURN(const auto shape, PointwiseShape("binary", spec.shape_rows(), spec.shape_cols(), bs.n()));
  const auto [rows, cols] = shape;
  b.out = spec.out();
  b.broadcast = bs.broadcast();
  const char* op_name = bs.op() == proto::BinarySpec::ADD ? "add" : bs.op() == proto::BinarySpec::SUB ? "sub" : "mul";
  b.kind = absl::StrCat("binary_", op_name);
  b.body = bs.op() == proto::BinarySpec::ADD   ? Add(Op(0), Op(1))
           : bs.op() == proto::BinarySpec::SUB ? Sub(Op(0), Op(1))
                                               : Mul(Op(0), Op(1));
  ASSIGN_OR_RETURN(b.p, DatapathPrecision(DatapathOf(!bs.int_()), target));
  if (bs.int_()) {
    const std::optional<Precision> in = IntInputs(bs.op(), b.p, target);
    if (!in) {
      return NotLowered(absl::StrCat("an int binary ", op_name, " whose result leaves the ",
                                     std::string(PrecisionName(b.p)), " datapath even for the narrowest integer ",
                                     target.name(), " stores"));
    }
    b.in = *in;
    b.acc = AccFor(b.p);
  } else {
    b.in = b.p;
    // tt-metal's eltwise binary computes bf16 data in a 16-bit Dst (fp32_dest_acc_en only for fp32 data).
    b.acc = MapAccFor(b.in, b.p, target);
  }
  b.claim = ClaimOf(b.kind, b.body, b.p);
  if (rows > 1) return MatrixBinary(b, rows, cols, target);
  if (TilesOf(cols, target) > RowBlockTiles(target)) return BlockedBinary(b, cols, target);
  return FlatBinary(b, cols, target);
}

}  // namespace spatial
