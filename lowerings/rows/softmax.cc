#include "lowerings/rows/softmax.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<Composition> FlatSoftmaxRowsAt(const OperandRef& input, const std::string& out_name, int64_t rows,
                                              int64_t cols, const std::string& label, Precision precision,
                                              const std::optional<OperandRef>& sinks, const Target& target,
                                              DstPolicy policy) {
  RETURN_IF_ERROR(CheckElements("softmax", "rows", rows));
  RETURN_IF_ERROR(CheckElements("softmax", "cols", cols));
  // The seed builds on FlatBuild::new before it overrides the precision, so a float datapath must exist even for a
  // softmax computed at the accumulator's width.
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  RETURN_IF_ERROR(RequireFp32Accumulator("a row softmax", target));
  if (!IsFloat(precision) || !target.supports_storage(precision)) {
    return MissingPrecision(absl::StrCat("a row softmax at ", std::string(PrecisionName(precision))), target);
  }
  const int64_t tr = target.tile_rows();
  // The row max, the exponentials and the sums are planes of `rows` rows in one tile-high page.
  if (rows > tr) {
    return NotLowered(absl::StrCat("a flat row softmax over ", rows, " rows, more than a tile's ", tr));
  }
  FlatBuild f = FlatBuild::At(precision, target);
  f.SetDstPolicy(policy);
  Template& t = f.t();
  const int64_t h = rows;
  const int64_t l = cols;
  const int64_t n = h * l;
  ASSIGN_OR_RETURN(BufferId sc, f.Input(input.name, n, input.fill));
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = t.AddBuffer("probs", cols_t, precision);
  const int64_t ow = t.PageWidth(cols_t);
  // A composition unifies tensors by name, so a shared constant's name says what it holds: a tile of ones at the
  // target's element precision is `sm_scaler`, and at another precision (a router's fp32 softmax) it says which.
  const std::string scaler =
      precision == elem ? "sm_scaler" : absl::StrCat("sm_scaler_", std::string(PrecisionName(precision)));
  TensorId ones = OnesTile(t, scaler, precision);
  BufferId ones_in = t.AddBuffer("in_scaler", 1, precision);
  f.AddLoadToWire(t.AddLoad("load_scaler", ones, {}, 1, ones_in), ones_in);
  const int64_t one_w = t.PageWidth(1);

  // max over the row, then sum exp(x - max), then exp(x - max) / sum.
  BufferId rmax = f.Scratch("row_max", 1);
  StageId s1 = f.Compute("row_max", HeadSpace(h, l, IterKind::kReduceMax),
                         {Slot{sc, Map2(0, l, 1)}, Slot{ones_in, ConstMap()}}, PerRowMap(one_w), Op(0), rmax);
  // A row's sink: element r of a flat 1 x rows tensor.
  const ElemAccess sink_map{0, {{LoopVar::kRow, 1}}, std::nullopt};
  std::optional<BufferId> sink;
  if (sinks) {
    ASSIGN_OR_RETURN(BufferId sk, f.Input(sinks->name, h, sinks->fill));
    sink = sk;
  }
  std::vector<StageId> chain{s1};
  if (sink) {
    BufferId with_sink = f.Scratch("row_max_sink", 1);
    chain.push_back(f.Compute("row_max_sink", HeadSpace(h, target.tile_cols()),
                              {Slot{rmax, PerRowMap(one_w)}, Slot{*sink, sink_map}}, PerRowMap(one_w),
                              Max(Op(0), Op(1)), with_sink));
    rmax = with_sink;
  }
  const int64_t ex_tiles = TilesOf(l, target);
  const int64_t exw = t.PageWidth(ex_tiles);
  BufferId ex = f.Scratch("expx", ex_tiles);
  chain.push_back(f.Compute("exp_centred", HeadSpace(h, l), {Slot{sc, Map2(0, l, 1)}, Slot{rmax, PerRowMap(one_w)}},
                            IdentMap(exw), Unary(SfpuKind::Exp(), Sub(Op(0), Op(1))), ex));
  BufferId rsum = f.Scratch("row_sum", 1);
  chain.push_back(f.Compute("row_sum", HeadSpace(h, l, IterKind::kReduceSum),
                            {Slot{ex, Map2(0, exw, 1)}, Slot{ones_in, ConstMap()}}, PerRowMap(one_w), Op(0), rsum));
  if (sink) {
    BufferId with_sink = f.Scratch("row_sum_sink", 1);
    chain.push_back(f.Compute("row_sum_sink", HeadSpace(h, target.tile_cols()),
                              {Slot{rsum, PerRowMap(one_w)}, Slot{*sink, sink_map}, Slot{rmax, PerRowMap(one_w)}},
                              PerRowMap(one_w), Add(Op(0), Unary(SfpuKind::Exp(), Sub(Op(1), Op(2)))), with_sink));
    rsum = with_sink;
  }
  BufferId inv = f.Scratch("row_inv", 1);
  chain.push_back(f.Compute("recip", HeadSpace(h, target.tile_cols()), {Slot{rsum, PerRowMap(one_w)}},
                            PerRowMap(one_w), Unary(SfpuKind::Recip(), Op(0)), inv));
  // `ex` is the h x l plane: row `head`'s element j sits at head*exw + j, so the flat output column c = head*l + j
  // reads it at c + head*(exw - l) -- one map per row, all affine.
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t head = 0; head < h; ++head) {
    slots.push_back(Slot{ex, At(head * (exw - l))});
    const int e_slot = static_cast<int>(slots.size()) - 1;
    slots.push_back(Slot{inv, Fixed(head * one_w)});
    const int i_slot = static_cast<int>(slots.size()) - 1;
    bands.push_back({(head + 1) * l, Mul(Op(e_slot), Op(i_slot))});
  }
  chain.push_back(f.Compute("scale", FlatSpace(n), std::move(slots), IdentMap(ow), Banded(bands), out_buf));
  return FitSite(f.Finish(out_name, n, chain, out_buf, label, ApproxIn("row softmax", precision)), "row softmax",
                 target);
}

absl::StatusOr<Composition> FlatSoftmaxRows(const OperandRef& input, const std::string& out_name, int64_t rows,
                                            int64_t cols, const std::string& label, const Target& target) {
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  return FlatSoftmaxRowsAt(input, out_name, rows, cols, label, elem, std::nullopt, target);
}

absl::StatusOr<Composition> FromSoftmax(const proto::OpSpec& spec, const Target& target) {
  const auto& s = spec.softmax();
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "softmax", s.sinks() ? 2 : 1));
  RETURN_IF_ERROR(CheckElements("softmax", "rows", s.rows()));
  RETURN_IF_ERROR(CheckElements("softmax", "cols", s.cols()));
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  const Precision p = s.at_acc() ? AccFor(elem) : elem;
  std::optional<OperandRef> sinks;
  if (s.sinks()) sinks = ops[1];
  return FlatSoftmaxRowsAt(ops[0], spec.out(), s.rows(), s.cols(),
                           absl::StrCat("softmax_flat_", s.rows(), "x", s.cols()), p, sinks, target);
}

}  // namespace spatial
