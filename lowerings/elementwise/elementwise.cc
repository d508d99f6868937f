#include "lowerings/elementwise/elementwise.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/elementwise/map_forms.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

Body SiluExpr(Body x) { return Unary(SfpuKind::Silu(), std::move(x)); }

Body SigmoidExpr(Body x) {
  return Unary(SfpuKind::Recip(), Add(Const(1.0), Unary(SfpuKind::Exp(), Sub(Const(0.0), std::move(x)))));
}

Body Capped(Body x, double c) {
  Body sigmoid = Unary(SfpuKind::Recip(), Add(Const(1.0), Unary(SfpuKind::Exp(), Mul(std::move(x), Const(-2.0 / c)))));
  return Sub(Mul(Const(2.0 * c), sigmoid), Const(c));
}

Body GeluExpr(Body x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  constexpr double kCubic = 0.044715;
  Body cube = Mul(x, Mul(x, x));
  Body z = Mul(Const(kSqrt2OverPi), Add(x, Mul(Const(kCubic), cube)));
  Body two_z = Mul(Const(2.0), z);
  return Mul(x, Unary(SfpuKind::Recip(), Add(Const(1.0), Unary(SfpuKind::Exp(), Sub(Const(0.0), two_z)))));
}

Body DecayExpr(Body ar, Body dt, Body al) {
  // The base 1 + e^u is > 1, so the log is always of a positive number.
  Body base = Add(Const(1.0), Unary(SfpuKind::Exp(), Add(std::move(ar), std::move(dt))));
  return Unary(SfpuKind::Exp(), Mul(std::move(al), Unary(SfpuKind::Ln(), base)));
}

namespace {

// The checks every one-operand pointwise op shares, then the unary map over the spec's pointwise shape.
absl::StatusOr<Composition> Pointwise(const proto::OpSpec& spec, const std::string& kind, Datapath dp,
                                      int64_t n, const Body& body, const Target& target,
                                      std::optional<Precision> in_precision = std::nullopt, bool unary_dst = true) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, kind, 1));
  RETURN_IF_ERROR(CheckElements(kind, "n", n));
  ASSIGN_OR_RETURN(const auto shape, PointwiseShape(kind, spec.shape_rows(), spec.shape_cols(), n));
  const auto [rows, cols] = shape;
  return UnaryMap(kind, kind, dp, body, ops[0], spec.out(), rows, cols, target, in_precision, unary_dst);
}

}  // namespace

absl::StatusOr<Composition> UnaryMap(const std::string& name, const std::string& kind, Datapath dp, const Body& body,
                                     const OperandRef& x, const std::string& out, int64_t rows, int64_t n,
                                     const Target& target, std::optional<Precision> in_precision,
                                     bool unary_dst) {
  ASSIGN_OR_RETURN(Precision p, DatapathPrecision(dp, target));
  const Precision in = in_precision.value_or(p);
  const Precision acc = unary_dst ? MapAccFor(in, p, target) : AccFor(p);
  return PointwiseMap(name, kind, p, acc, body, {MapOperand{.ref = x, .in = in, .label = "x"}}, out, rows, n, target);
}

absl::StatusOr<Composition> FromSilu(const proto::OpSpec& spec, const Target& target) {
  return Pointwise(spec, "silu", Datapath::kFloat, spec.silu().n(), SiluExpr(Op(0)), target);
}

absl::StatusOr<Composition> FromRelu(const proto::OpSpec& spec, const Target& target) {
  // The datapath is named by the op: a float ReLU's max(x, 0) is integral arithmetic over float data.
  return Pointwise(spec, "relu", DatapathOf(!spec.relu().int_()), spec.relu().n(), Max(Op(0), Const(0.0)), target);
}

// ★ THE OP IS ONE KERNEL WHERE THE TARGET HAS IT: ttnn.sigmoid and ttnn.gelu are one SFPU kernel each
// (sigmoid_tile, gelu_tile), rounded once. Composed of Exp and Recip, a 16-bit Dst would round e^-x on the way.
absl::StatusOr<Composition> FromSigmoid(const proto::OpSpec& spec, const Target& target) {
  return Pointwise(spec, "sigmoid", Datapath::kFloat, spec.sigmoid().n(), Unary(SfpuKind::Sigmoid(), Op(0)), target);
}

absl::StatusOr<Composition> FromGelu(const proto::OpSpec& spec, const Target& target) {
  const Body body = spec.gelu().erf() ? Unary(SfpuKind::Gelu(), Op(0)) : GeluExpr(Op(0));
  return Pointwise(spec, "gelu", Datapath::kFloat, spec.gelu().n(), body, target);
}

absl::StatusOr<Composition> FromScale(const proto::OpSpec& spec, const Target& target) {
  const double c = spec.scale().factor();
  if (!std::isfinite(c)) {
    return absl::InvalidArgumentError(absl::StrCat("scale.factor is not finite (", c, ")"));
  }
  return Pointwise(spec, "scale", Datapath::kFloat, spec.scale().n(), Mul(Op(0), Const(c)), target);
}

absl::StatusOr<Composition> FromSoftcap(const proto::OpSpec& spec, const Target& target) {
  const double c = spec.softcap().cap();
  if (!std::isfinite(c)) {
    return absl::InvalidArgumentError(absl::StrCat("softcap.cap is not finite (", c, ")"));
  }
  // c * tanh(x / c) has no meaning at c = 0 (the seed's cap is a non-zero type).
  if (c == 0.0) return absl::InvalidArgumentError("softcap.cap is zero: c * tanh(x / c) needs a non-zero cap");
  // 2c * sigmoid(2x/c) - c cancels for small x: no single ttnn unary op, and a 16-bit Dst between the steps would
  // leave only the rounding of c (5% rel L2 at the example's shape). It keeps an fp32 Dst.
  return Pointwise(spec, "softcap", Datapath::kFloat, spec.softcap().n(), Capped(Op(0), c), target, std::nullopt,
                   /*unary_dst=*/false);
}

absl::StatusOr<Composition> FromIntRequant(const proto::OpSpec& spec, const Target& target) {
  const auto& r = spec.int_requant();
  // (x * M) >> S is an arithmetic shift of an int64 product: a shift of 63 or more, or a negative one, has no
  // integer meaning: a spec outside the op's domain, as a negative size is (exit 2, not a refusal).
  if (r.s() < 0 || r.s() > 62) {
    return absl::InvalidArgumentError(
        absl::StrCat("int_requant.s is outside [0, 62] (", r.s(), "): (x * m) >> s shifts an int64 product"));
  }
  Body body = Shr(Mul(Op(0), Const(static_cast<double>(r.m()))), r.s());
  // The exact product x·M is formed on the integer datapath, which wraps past its width: the input is stored in
  // the narrowest integer the target holds whose every value times |M| still fits (an int8 model's activations
  // are int8), so no input can overflow the product — and the certifier can prove it. None: refused, never a
  // program that wraps silently.
  ASSIGN_OR_RETURN(Precision dp, DatapathPrecision(Datapath::kInt, target));
  const double m = std::fabs(static_cast<double>(r.m()));
  for (Precision in : {Precision::kInt8, Precision::kInt16, Precision::kInt32}) {
    if (!target.supports_storage(in) || *IntBits(in) > *IntBits(dp)) continue;
    if (static_cast<double>(IntMax(in)) * m + 1.0 <= static_cast<double>(IntMax(dp))) {
      return Pointwise(spec, "int_requant", Datapath::kInt, r.n(), body, target, in);
    }
  }
  return NotLowered(absl::StrCat("an int requant whose product x*M (M = ", r.m(),
                                 ") leaves the integer datapath even for int8 inputs"));
}

absl::StatusOr<Composition> FromIntClamp(const proto::OpSpec& spec, const Target& target) {
  const auto& c = spec.int_clamp();
  if (c.lo() > c.hi()) {
    return absl::InvalidArgumentError(
        absl::StrCat("int_clamp.lo (", c.lo(), ") is above int_clamp.hi (", c.hi(), "): no value lies between them"));
  }
  // The bounds are constants of the integer datapath's arithmetic, so they must be values of its type.
  ASSIGN_OR_RETURN(const Precision dp, DatapathPrecision(Datapath::kInt, target));
  const int64_t most = IntMax(dp), least = -most - 1;
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"lo", c.lo()}, {"hi", c.hi()}}) {
    if (v < least || v > most) {
      return absl::InvalidArgumentError(absl::StrCat("int_clamp.", name, " (", v, ") is outside the ",
                                                     std::string(PrecisionName(dp)), " integer datapath of target '",
                                                     target.name(), "' [", least, ", ", most, "]"));
    }
  }
  Body body = Min(Max(Op(0), Const(static_cast<double>(c.lo()))), Const(static_cast<double>(c.hi())));
  return Pointwise(spec, "int_clamp", Datapath::kInt, c.n(), body, target);
}

namespace {

// ★ A REAL POWER NEEDS A REAL LOG: base^rate with a data-dependent, non-integer, negative rate is
// exp(rate * ln base), and nothing else of the algebra reaches it.
absl::StatusOr<Composition> FlatDecay(const std::vector<OperandRef>& ops, const std::string& out, int64_t n,
                                      const Target& target) {
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId ar, b.Input(ops[0].name, n, ops[0].fill));
  ASSIGN_OR_RETURN(BufferId dt, b.Input(ops[1].name, n, ops[1].fill));
  ASSIGN_OR_RETURN(BufferId al, b.Input(ops[2].name, n, ops[2].fill));
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = b.t().AddBuffer("out", cols_t, b.precision());
  const int64_t w = b.t().PageWidth(cols_t);
  StageId s = b.Compute("decay", FlatSpace(n), {Slot{ar, At(0)}, Slot{dt, At(0)}, Slot{al, At(0)}}, IdentMap(w),
                        DecayExpr(Op(0), Op(1), Op(2)), out_buf);
  // No column-blocked form (the seed has none): a row wider than the accumulator is refused at FinishSection.
  return b.Finish(out, n, {s}, out_buf, absl::StrCat("decay_", n), ApproxIn("decay", b.precision()));
}

// The decay over a rows x heads matrix a projection wrote, every row decayed by the same per-head bias and rate:
// one item per tile, the bias and rate tiles of its columns read down every row (a broadcast is a missing term,
// not an operator).
absl::StatusOr<Composition> DenseDecay(const std::vector<OperandRef>& ops, const std::string& out, int64_t rows,
                                       int64_t n, const Target& target) {
  const int64_t heads = n / rows;
  if (rows * heads != n || heads == 0) return NotLowered("a block decay whose rows do not divide its elements");
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const int64_t rows_t = CeilDiv(rows, tr);
  const int64_t cols_t = CeilDiv(heads, tw);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("decay rows = ", rows, ", n = ", n), CheckedMul(rows_t, cols_t)));
  ASSIGN_OR_RETURN(Precision dt, ElemPrecision(target));
  Template t(tr, tw);
  ASSIGN_OR_RETURN(TensorInit ar_init, InitOf(ops[0].fill, n));
  ASSIGN_OR_RETURN(TensorInit bias_init, InitOf(ops[1].fill, heads));
  ASSIGN_OR_RETURN(TensorInit rate_init, InitOf(ops[2].fill, heads));
  TensorId ar = t.AddTensor(ops[0].name, TensorRole::kInput, rows, heads, dt, std::move(ar_init));
  TensorId bias = t.AddTensor(ops[1].name, TensorRole::kInput, 1, heads, dt, std::move(bias_init));
  TensorId rate = t.AddTensor(ops[2].name, TensorRole::kInput, 1, heads, dt, std::move(rate_init));
  TensorId out_t = t.AddTensor(out, TensorRole::kOutput, rows, heads, dt, TensorInit::Zero());
  BufferId ar_in = t.AddBuffer("in_ar", 1, dt);
  BufferId bias_in = t.AddBuffer("in_bias", 1, dt);
  BufferId rate_in = t.AddBuffer("in_rate", 1, dt);
  BufferId out_buf = t.AddBuffer("out", 1, dt);
  const std::vector<Term> grid = TileGridSteps(cols_t);
  StageId l_ar = t.AddLoadBlockAt("load_ar", ar, 0, grid, {.pitch = cols_t}, ar_in);
  StageId l_bias = t.AddLoadBlockAt("load_bias", bias, 0, {{LoopVar::kItemX, 1}}, {}, bias_in);
  StageId l_rate = t.AddLoadBlockAt("load_rate", rate, 0, {{LoopVar::kItemX, 1}}, {}, rate_in);
  const ElemAccess down_rows = PerColMap();
  StageId s = t.AddGeneric("decay", TileSpace(tr, tw), {ar_in, bias_in, rate_in}, {IdentMap(tw), down_rows, down_rows},
                           IdentMap(tw), DecayExpr(Op(0), Op(1), Op(2)), out_buf);
  StageId st = t.AddStoreBlock("store_decay", out_t, 0, grid, {.pitch = cols_t}, out_buf);
  t.AddEdge(l_ar, ar_in, s);
  t.AddEdge(l_bias, bias_in, s);
  t.AddEdge(l_rate, rate_in, s);
  t.AddEdge(s, out_buf, st);
  // The seed's tile_row_plan(1, 1, dt) over the rows_t x cols_t grid.
  t.SetPlan(BlockPlan{.grid_y = rows_t, .grid_x = cols_t});
  return FinishSection(t, absl::StrCat("decay_", rows, "x", heads), ItemsPerTileGrid(rows_t, cols_t), AccFor(dt),
                       ApproxIn("decay", dt), target);
}

}  // namespace

absl::StatusOr<Composition> FromDecay(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "decay", 3));
  const auto& d = spec.decay();
  RETURN_IF_ERROR(CheckElements("decay", "n", d.n()));
  if (d.rows() < 0) return absl::InvalidArgumentError(absl::StrCat("decay.rows is negative (", d.rows(), ")"));
  // A flat row wider than the accumulator's page is a one-row matrix, an item a tile (the flat form has no column
  // blocks: it was refused by the accumulator's page check).
  if (d.rows() > 1 || RowNeedsBlocking(d.n(), target)) {
    return DenseDecay(ops, spec.out(), std::max<int64_t>(d.rows(), 1), d.n(), target);
  }
  return FlatDecay(ops, spec.out(), d.n(), target);
}

}  // namespace spatial
