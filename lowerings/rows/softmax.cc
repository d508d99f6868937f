#include "lowerings/rows/softmax.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

RowSoftmax AddRowSoftmax(Template& t, BufferId in, int64_t rows, int64_t cols, int64_t pitch, Precision acc,
                         std::optional<BufferId> scaler, const SinkInput& sink_input) {
  const int64_t one_w = t.PageWidth(1), tw = t.tile_cols();
  const ElemAccess per_row = PerRowMap(one_w);
  // A reduce takes the scaler tile as its engine's operand, where the caller has one.
  auto reduce_ins = [&](BufferId b, ElemAccess m) {
    std::pair<std::vector<BufferId>, std::vector<ElemAccess>> io{{b}, {std::move(m)}};
    if (scaler) {
      io.first.push_back(*scaler);
      io.second.push_back(ConstMap());
    }
    return io;
  };
  RowSoftmax r;
  BufferId rmax = t.AddScratch("row_max", 1, acc);
  auto [max_ins, max_maps] = reduce_ins(in, Map2(0, pitch, 1));
  r.chain.push_back(t.AddGeneric("row_max", HeadSpace(rows, cols, IterKind::kReduceMax), max_ins, max_maps, per_row,
                                 Op(0), rmax));
  std::optional<std::pair<BufferId, ElemAccess>> sink;
  if (sink_input) sink = sink_input();
  if (sink) {
    const BufferId with_sink = t.AddScratch("row_max_sink", 1, acc);
    r.chain.push_back(t.AddGeneric("row_max_sink", HeadSpace(rows, tw), {rmax, sink->first}, {per_row, sink->second},
                                   per_row, Max(Op(0), Op(1)), with_sink));
    rmax = with_sink;
  }
  const int64_t ex_tiles = t.TilesOf(cols);
  const int64_t exw = t.PageWidth(ex_tiles);
  r.ex = t.AddScratch("expx", ex_tiles, acc);
  r.chain.push_back(t.AddGeneric("exp_centred", HeadSpace(rows, cols), {in, rmax}, {Map2(0, pitch, 1), per_row},
                                 IdentMap(exw), Unary(SfpuKind::Exp(), Sub(Op(0), Op(1))), r.ex));
  BufferId rsum = t.AddScratch("row_sum", 1, acc);
  auto [sum_ins, sum_maps] = reduce_ins(r.ex, Map2(0, exw, 1));
  r.chain.push_back(t.AddGeneric("row_sum", HeadSpace(rows, cols, IterKind::kReduceSum), sum_ins, sum_maps, per_row,
                                 Op(0), rsum));
  if (sink) {
    const BufferId with_sink = t.AddScratch("row_sum_sink", 1, acc);
    r.chain.push_back(t.AddGeneric("row_sum_sink", HeadSpace(rows, tw), {rsum, sink->first, rmax},
                                   {per_row, sink->second, per_row}, per_row,
                                   Add(Op(0), Unary(SfpuKind::Exp(), Sub(Op(1), Op(2)))), with_sink));
    rsum = with_sink;
  }
  r.inv = t.AddScratch("row_inv", 1, acc);
  r.chain.push_back(t.AddGeneric("recip", HeadSpace(rows, tw), {rsum}, {per_row}, per_row,
                                 Unary(SfpuKind::Recip(), Op(0)), r.inv));
  return r;
}

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

  // max over the row, then sum exp(x - max), then exp(x - max) / sum.
  // A row's sink: element r of a flat 1 x rows tensor, declared where the chain first reads it.
  absl::Status sink_status;
  SinkInput sink;
  if (sinks) {
    sink = [&]() -> std::pair<BufferId, ElemAccess> {
      absl::StatusOr<BufferId> sk = f.Input(sinks->name, h, sinks->fill);
      sink_status = sk.status();
      return {sk.value_or(0), ElemAccess{0, {{LoopVar::kRow, 1}}, std::nullopt}};
    };
  }
  const RowSoftmax rs = AddRowSoftmax(t, sc, h, l, l, f.Acc(), ones_in, sink);
  RETURN_IF_ERROR(sink_status);
  std::vector<StageId> chain = rs.chain;
  const BufferId ex = rs.ex, inv = rs.inv;
  const int64_t exw = t.PageWidth(TilesOf(l, target));
  const int64_t one_w = t.PageWidth(1);
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
                           absl::StrCat("softmax_flat_", s.rows(), "x", s.cols()), p, sinks, target,
                           DstPolicy::kStreamed);
}

}  // namespace spatial
