// Work items and the fold's trip: items write disjoint rects inside the section's result, and a run-time trip
// never asks for more blocks than the fold's loads were proven safe for.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"
#include "spatial/maps.h"
#include "spatial/semantics/trip.h"

namespace spatial::certify {
namespace {

// Above this many tiles in the items' bounding box the tile-by-tile overlap check gives way to a pairwise one
// (never on a real program: items tile an output that fits device memory).
constexpr Wide kMaxMarkedTiles = Wide{1} << 28;
constexpr size_t kMaxPairwiseItems = 4096;

// The tensor the items' rects are in: the first stored Output, else State, else any stored tensor.
int ResultTensor(const Section& s) {
  int found[3] = {-1, -1, -1};
  for (const Stage& st : s.stages) {
    const auto* w = std::get_if<Store>(&st.op);
    if (!w) continue;
    const TensorRole role = s.tensors[w->tensor].role;
    const int rank = role == TensorRole::kOutput ? 0 : role == TensorRole::kState ? 1 : 2;
    if (found[rank] < 0) found[rank] = w->tensor;
  }
  for (int f : found) {
    if (f >= 0) return f;
  }
  return -1;
}

bool Intersect(const TileRect& a, const TileRect& b) {
  return a.row0_t < b.row0_t + b.h_t && b.row0_t < a.row0_t + a.h_t && a.col0_t < b.col0_t + b.w_t &&
         b.col0_t < a.col0_t + a.w_t;
}

std::string RectText(const TileRect& r) {
  return absl::StrCat("rows [", r.row0_t, ", ", r.row0_t + r.h_t, ") x cols [", r.col0_t, ", ", r.col0_t + r.w_t,
                      ")");
}

void CheckItems(SectionContext& ctx) {
  const Section& s = ctx.s;
  bool ok = true;
  const int result = ResultTensor(s);
  if (result >= 0) {
    const Tensor& t = s.tensors[result];
    const int64_t rows_t = CeilDiv(t.rows, ctx.tile_rows);
    const int64_t cols_t = CeilDiv(t.cols, ctx.tile_cols);
    for (size_t k = 0; k < s.items.size(); ++k) {
      const TileRect& r = s.items[k].out;
      if (r.row0_t + r.h_t <= rows_t && r.col0_t + r.w_t <= cols_t) continue;
      ok = false;
      ctx.Diag(codes::kItemsOverlap, -1, absl::StrCat("items[", k, "].out"),
               absl::StrCat("inside rows [0, ", rows_t, ") x cols [0, ", cols_t, ")"), RectText(r),
               absl::StrCat("item ", s.items[k].id, "'s output rect leaves the ", rows_t, " x ", cols_t,
                            " tile grid of the section's result '", t.name, "'"));
      break;  // one is enough to explain the fault; the rest are usually the same mistake
    }
  }

  // Disjointness: mark each covered tile of the rects' bounding box once; the first tile marked twice names the
  // pair. Marking stops at the first collision, so the work is at most the box's area.
  auto report = [&](size_t a, size_t b) {
    ok = false;
    ctx.rects_overlap = true;
    ctx.Diag(codes::kItemsOverlap, -1, absl::StrCat("items[", b, "].out"),
             absl::StrCat("disjoint from items[", a, "] (", RectText(s.items[a].out), ")"),
             RectText(s.items[b].out),
             absl::StrCat("items ", s.items[a].id, " and ", s.items[b].id,
                          " write overlapping tiles of the result: items of a section must be independent"));
  };
  int64_t r0 = INT64_MAX, c0 = INT64_MAX, r1 = INT64_MIN, c1 = INT64_MIN;
  for (const WorkItem& w : s.items) {
    r0 = std::min(r0, w.out.row0_t);
    c0 = std::min(c0, w.out.col0_t);
    r1 = std::max(r1, w.out.row0_t + w.out.h_t);
    c1 = std::max(c1, w.out.col0_t + w.out.w_t);
  }
  bool checked = true;
  const Wide area = s.items.empty() ? 0 : Wide{r1 - r0} * (c1 - c0);
  if (area <= kMaxMarkedTiles) {
    const int64_t width = c1 - c0;
    std::vector<bool> marked(static_cast<size_t>(area), false);
    bool found = false;
    for (size_t k = 0; k < s.items.size() && !found; ++k) {
      const TileRect& r = s.items[k].out;
      for (int64_t y = r.row0_t; y < r.row0_t + r.h_t && !found; ++y) {
        for (int64_t x = r.col0_t; x < r.col0_t + r.w_t; ++x) {
          const size_t at = static_cast<size_t>((y - r0) * width + (x - c0));
          if (!marked[at]) {
            marked[at] = true;
            continue;
          }
          for (size_t a = 0; a < k; ++a) {
            const TileRect& o = s.items[a].out;
            if (y >= o.row0_t && y < o.row0_t + o.h_t && x >= o.col0_t && x < o.col0_t + o.w_t) {
              report(a, k);
              break;
            }
          }
          found = true;
          break;
        }
      }
    }
  } else if (s.items.size() <= kMaxPairwiseItems) {
    bool found = false;
    for (size_t a = 0; a < s.items.size() && !found; ++a) {
      for (size_t b = a + 1; b < s.items.size(); ++b) {
        if (Intersect(s.items[a].out, s.items[b].out)) {
          report(a, b);
          found = true;
          break;
        }
      }
    }
  } else {
    checked = false;
  }
  ctx.proof.set_items_disjoint(ok && checked);
}

void CheckTrip(SectionContext& ctx) {
  const Section& s = ctx.s;
  if (!s.trip) return;
  const Trip& trip = *s.trip;
  proto::TripProof* tp = ctx.proof.mutable_trip();
  tp->mutable_value()->set_lo(trip.lo);
  tp->mutable_value()->set_hi(trip.hi);
  tp->set_num_blocks(s.num_blocks);
  const Tensor& t = s.tensors[trip.tensor];
  const Interval proven = ctx.tensor_ranges.Get(t);
  proto::Guard* g = ctx.proof.add_guards();
  g->set_field("trip");
  g->set_stage_index(-1);
  g->mutable_admitted()->set_lo(trip.lo);
  g->mutable_admitted()->set_hi(trip.hi);
  g->mutable_proven()->set_lo(ToInt64(proven.lo));
  g->mutable_proven()->set_hi(ToInt64(proven.hi));
  g->set_always_holds(proven.Within(trip.lo, trip.hi));

  const std::string formula = absl::StrCat("ceil((value + ", trip.bias, ") / ", trip.per, ")");
  if (trip.per <= 0) {
    ctx.Diag(codes::kTripOutOfRange, -1, "trip.per", ">= 1", absl::StrCat(trip.per),
             "a trip divides by `per`, which must be positive");
    return;
  }
  if (trip.elem < 0 || trip.elem >= t.rows * t.cols) {
    ctx.Diag(codes::kTripOutOfRange, -1, "trip.elem", absl::StrCat("[0, ", t.rows * t.cols, ")"),
             absl::StrCat(trip.elem),
             absl::StrCat("the trip reads element ", trip.elem, " of '", t.name, "', which has ", t.rows * t.cols));
    return;
  }
  // A non-positive count runs no block (the VM's rule), which the epilogue's carry check accounts for.
  const Interval range = TripBlockRange(trip);  // spatial/semantics/trip.h
  const Wide lo = range.lo, hi = range.hi;
  tp->mutable_blocks()->set_lo(ToInt64(lo));
  tp->mutable_blocks()->set_hi(ToInt64(hi));
  if (hi > s.num_blocks) {
    ctx.Diag(codes::kTripOutOfRange, -1, "trip.hi", absl::StrCat("<= ", s.num_blocks, " blocks"),
             absl::StrCat(WideToString(hi), " blocks"),
             absl::StrCat("the admitted value ", trip.hi, " gives ", formula, " = ", WideToString(hi),
                          " blocks, more than the fold's ", s.num_blocks, " (the loads are proven only for those)"));
  }
}

}  // namespace

void CheckWork(SectionContext& ctx) {
  CheckItems(ctx);
  CheckTrip(ctx);
}

}  // namespace spatial::certify
