// The stage-order pass over a section: proves every Load/Store tile address inside its tensor (for every item,
// every fold block and every admitted index), hands each Generic to the element-map prover, and carries the
// integer value ranges of buffers and tensors forward so that guards, comparisons and index arithmetic can be
// bounded by what earlier stages produced.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"
#include "certify/generic_access.h"
#include "spatial/semantics/affine.h"
#include "spatial/semantics/table_pages.h"

namespace spatial::certify {
namespace {

struct Coords {
  Interval y, x;  // ITEM_Y, ITEM_X over the section's items
};

Coords ItemBox(const Section& s) {
  Coords c{Interval::Empty(), Interval::Empty()};
  for (const WorkItem& w : s.items) {
    c.y = Hull(c.y, Interval::Point(w.y));
    c.x = Hull(c.x, Interval::Point(w.x));
  }
  return c;
}

class AccessPass {
 public:
  explicit AccessPass(SectionContext& ctx)
      : ctx_(ctx), s_(ctx.s), items_(ItemBox(ctx.s)), pages_(ctx.s, ctx.tile_rows, ctx.tile_cols) {
    const size_t nb = s_.buffers.size();
    range_.assign(nb, Interval::Empty());
    last_writer_.assign(nb, -1);
    for (size_t b = 0; b < nb; ++b) {
      if (!ctx.uses[b].writers.empty()) last_writer_[b] = ctx.uses[b].writers.back();
    }
  }

  void Run() {
    for (int i = 0; i < static_cast<int>(s_.stages.size()); ++i) {
      const Stage& st = s_.stages[i];
      if (const auto* l = std::get_if<Load>(&st.op)) {
        const Tensor& t = s_.tensors[l->tensor];
        CheckTiles(i, l->tensor, l->pattern, "load");
        if (l->multicast != LoopVar::kUnspecified) CheckMulticast(i, *l);
        Write(st.outs[0], ctx_.tensor_ranges.PageRange(t));
      } else if (const auto* w = std::get_if<Store>(&st.op)) {
        CheckTiles(i, w->tensor, w->pattern, "store");
        stores_.emplace_back(w->tensor, ReadRange(st.ins[0], i));
      } else if (std::holds_alternative<Generic>(st.op)) {
        GenericFacts facts;
        facts.slot_values.reserve(st.ins.size());
        bool integer = IsInteger(s_.buffers[st.outs[0]].precision);
        for (BufferId b : st.ins) {
          facts.slot_values.push_back(ReadRange(b, i));
          integer = integer && IsInteger(s_.buffers[b].precision);
        }
        if (integer) facts.int_type = ctx_.target.elementwise_int();
        const size_t mark = ctx_.sink.Mark();
        const Interval out = ProveGeneric(ctx_, i, facts);
        if (ctx_.sink.Mark() > mark) ReproveItemByItem(i, facts, mark);
        Write(st.outs[0], out);
      } else {
        for (BufferId b : st.outs) Write(b, PrecisionRange(s_.buffers[b].precision));
      }
    }
    // Stores take effect for later sections: this section's loads read what earlier sections left.
    for (const auto& [t, r] : stores_) ctx_.tensor_ranges.AddStore(s_.tensors[t], r);
  }

 private:
  // What stage `reader` can read from `b`: the hull of every write before it, when every writer of `b` comes
  // before it; otherwise (a carry rewritten later, a page left from the previous item) the precision's range.
  Interval ReadRange(BufferId b, int reader) const {
    const Precision p = s_.buffers[b].precision;
    if (!IsInteger(p)) return Interval::Everything();
    if (last_writer_[b] < 0 || last_writer_[b] >= reader || range_[b].empty()) return PrecisionRange(p);
    return range_[b];
  }

  // The proof over all items failed. Slots that read one element of a compile-time table page hold one known
  // value per item; with those values exact, prove the stage item by item. If every item passes, the failure
  // was the box's (a relation between the table's entries that intervals over all items lose) and is dropped;
  // otherwise the first failing item's diagnostics replace the box's, naming the item.
  void ReproveItemByItem(int stage, const GenericFacts& facts, size_t mark) {
    const Stage& st = s_.stages[stage];
    const Generic& g = std::get<Generic>(st.op);
    std::vector<std::pair<int, int64_t>> exact;  // (slot, element offset)
    for (size_t k = 0; k < g.ins.size(); ++k) {
      const ElemAccess& m = g.ins[k];
      const BufferId b = st.ins[k];
      bool fixed = !m.indirect;
      for (const auto& [var, coef] : m.terms) fixed = fixed && coef == 0;
      if (fixed && pages_.TableLoad(b) && last_writer_[b] < stage) exact.emplace_back(static_cast<int>(k), m.base);
    }
    if (exact.empty()) return;
    GenericFacts item_facts = facts;
    item_facts.record = false;
    int bad = -1;
    for (size_t w = 0; w < s_.items.size() && bad < 0; ++w) {
      for (const auto& [slot, offset] : exact) {
        const std::optional<int64_t> v = pages_.Element(st.ins[slot], s_.items[w], offset);
        item_facts.slot_values[slot] = v ? Meet(Interval::Point(*v), facts.slot_values[slot]) : facts.slot_values[slot];
      }
      const size_t before = ctx_.sink.Mark();
      ProveGeneric(ctx_, stage, item_facts);
      if (ctx_.sink.Mark() > before) bad = static_cast<int>(w);
      ctx_.sink.Rollback(before);
    }
    ctx_.sink.Rollback(mark);
    if (bad < 0) return;
    // Report the failing item's own proof.
    for (const auto& [slot, offset] : exact) {
      const std::optional<int64_t> v = pages_.Element(st.ins[slot], s_.items[bad], offset);
      item_facts.slot_values[slot] = v ? Meet(Interval::Point(*v), facts.slot_values[slot]) : facts.slot_values[slot];
    }
    ProveGeneric(ctx_, stage, item_facts);
    const WorkItem& w = s_.items[bad];
    for (size_t d = mark; d < ctx_.sink.Mark(); ++d) {
      proto::Diagnostic& diag = ctx_.sink.at(d);
      diag.set_message(absl::StrCat(diag.message(), "; for item ", w.id, " (y=", w.y, ", x=", w.x,
                                    "), its compile-time table entries read exactly"));
    }
  }

  void Write(BufferId b, const Interval& r) {
    const Interval full = PrecisionRange(s_.buffers[b].precision);
    range_[b] = r.Within(full.lo, full.hi) && !r.empty() ? Hull(range_[b], r) : full;
  }

  void RecordGuard(int stage, const IndirectTile& it, const Interval& proven) {
    proto::Guard* g = ctx_.proof.add_guards();
    g->set_stage(s_.stages[stage].name);
    g->set_stage_index(stage);
    g->set_field("pattern.origin.indirect");
    g->mutable_admitted()->set_lo(it.lo);
    g->mutable_admitted()->set_hi(it.hi);
    g->mutable_proven()->set_lo(ToInt64(proven.lo));
    g->mutable_proven()->set_hi(ToInt64(proven.hi));
    g->set_always_holds(!proven.empty() && proven.Within(it.lo, it.hi));
  }

  // Whether every page of `index` is the same for items that differ only in `axis`: each stage writing it is a Load
  // with a direct origin that takes no step on the axis, from a tensor no stage of the section stores to — or a
  // compute stage (a Generic or a MatmulTiles: neither sees the item) whose every input is itself the same along the
  // axis (a run-time position's guarded row, computed per item from one loaded tile). A page among its own producers'
  // inputs (a carried update) holds by induction from its other writers.
  bool SameAlong(BufferId index, AddrVar axis) const {
    std::vector<BufferId> visiting;
    return SameAlong(index, axis, visiting);
  }
  bool SameAlong(BufferId index, AddrVar axis, std::vector<BufferId>& visiting) const {
    if (std::find(visiting.begin(), visiting.end(), index) != visiting.end()) return true;
    visiting.push_back(index);
    bool written = false;
    for (const Stage& st : s_.stages) {
      if (std::find(st.outs.begin(), st.outs.end(), index) == st.outs.end()) continue;
      written = true;
      if (std::holds_alternative<Generic>(st.op) || std::holds_alternative<MatmulTiles>(st.op)) {
        for (BufferId in : st.ins) {
          if (!SameAlong(in, axis, visiting)) return false;
        }
        continue;
      }
      const auto* w = std::get_if<Load>(&st.op);
      if (w == nullptr || w->pattern.origin.indirect || TileForm(w->pattern).Uses(axis)) return false;
      for (const Stage& other : s_.stages) {
        const auto* store = std::get_if<Store>(&other.op);
        if (store != nullptr && store->tensor == w->tensor) return false;
      }
    }
    return written;
  }

  // A multicast block is one block for every item that differs only in the axis (DESIGN §3.4): the origin's
  // coefficient on the axis is zero (the block's own extent never involves an item coordinate), and an indirect
  // origin's index page is itself the same along the axis (SameAlong); anything else is refused, not assumed.
  void CheckMulticast(int stage, const Load& l) {
    const AddrVar axis = l.multicast == LoopVar::kItemX ? AddrVar::kItemX : AddrVar::kItemY;
    const AffineForm form = TileForm(l.pattern);
    const std::string axis_name(LoopVarName(l.multicast));
    if (form.Uses(axis)) {
      ctx_.Diag(codes::kMulticastVaries, stage, "multicast.axis", absl::StrCat("no step on ", axis_name),
                absl::StrCat("coefficient ", WideToString(form[axis])),
                absl::StrCat("load of tensor '", s_.tensors[l.tensor].name, "' is multicast along ", axis_name,
                             " but its origin moves ", WideToString(form[axis]), " tiles per step of ", axis_name,
                             ": the items it would be sent to read different blocks"));
    } else if (l.pattern.origin.indirect && !SameAlong(l.pattern.origin.indirect->index, axis)) {
      ctx_.Diag(codes::kMulticastVaries, stage, "multicast.axis", "a direct origin",
                "an indirect origin",
                absl::StrCat("load of tensor '", s_.tensors[l.tensor].name, "' is multicast along ", axis_name,
                             " but its origin adds an index page's value, which is not proven the same for every "
                             "item along ", axis_name));
    }
  }

  // Every tile the pattern can form, for every item, block and admitted index, lies in the tensor's grid.
  // Loads always execute (DESIGN §3.4), so there is no path condition here.
  void CheckTiles(int stage, TensorId tensor, const AccessPattern& p, std::string_view kind) {
    const Stage& st = s_.stages[stage];
    const int64_t tiles = ctx_.TensorTiles(tensor);
    // TileForm is the one address evaluator (spatial/semantics/affine.h); here over intervals.
    const AffineForm form = TileForm(p);
    AddrEnv<Interval> env = ZeroEnv<Interval>();
    if (st.phase == Phase::kBody) env[static_cast<int>(AddrVar::kKBlock)] = Interval::Of(0, Wide{s_.num_blocks} - 1);
    env[static_cast<int>(AddrVar::kBlockI)] = Interval::Of(0, Wide{p.block_h} - 1);
    env[static_cast<int>(AddrVar::kBlockJ)] = Interval::Of(0, Wide{p.block_w} - 1);
    if (p.origin.indirect) {
      const IndirectTile& it = *p.origin.indirect;
      RecordGuard(stage, it, ReadRange(it.index, stage));
      env[static_cast<int>(AddrVar::kIndex)] = Interval::Of(it.lo, it.hi);
    }
    const Interval limit = Interval::Of(0, Wide{tiles} - 1);
    auto reach_at = [&](const Interval& y, const Interval& x, bool with_index = true) {
      AddrEnv<Interval> e = env;
      e[static_cast<int>(AddrVar::kItemY)] = y;
      e[static_cast<int>(AddrVar::kItemX)] = x;
      if (!with_index) e[static_cast<int>(AddrVar::kIndex)] = Interval::Point(0);
      return Evaluate(form, e);
    };

    Interval reach = reach_at(items_.y, items_.x);
    int bad_item = -1;
    if (!reach.Within(limit.lo, limit.hi)) {
      // The box over all items is loose when items do not fill it: decide item by item.
      reach = Interval::Empty();
      for (size_t k = 0; k < s_.items.size(); ++k) {
        const Interval r = reach_at(Interval::Point(s_.items[k].y), Interval::Point(s_.items[k].x));
        reach = Hull(reach, r);
        if (bad_item < 0 && !r.Within(limit.lo, limit.hi)) bad_item = static_cast<int>(k);
      }
    }
    proto::TileAccess* acc = ctx_.proof.add_tile_accesses();
    acc->set_stage(st.name);
    acc->set_stage_index(stage);
    acc->set_tensor(s_.tensors[tensor].name);
    acc->mutable_reach()->set_lo(ToInt64(reach.lo));
    acc->mutable_reach()->set_hi(ToInt64(reach.hi));
    acc->set_tiles(tiles);
    if (bad_item < 0) return;

    const WorkItem& w = s_.items[bad_item];
    const Interval at_item = reach_at(Interval::Point(w.y), Interval::Point(w.x));
    const Interval without_index = reach_at(Interval::Point(w.y), Interval::Point(w.x), false);
    const bool by_index = p.origin.indirect && without_index.Within(limit.lo, limit.hi);
    const Tensor& t = s_.tensors[tensor];
    std::string what = absl::StrCat(std::string(kind), " of tensor '", t.name, "' (", t.rows, " x ", t.cols, ", ",
                                    tiles, " tiles) can address tiles ", IntervalToString(at_item), " for item ",
                                    w.id, " (y=", w.y, ", x=", w.x, ")");
    if (st.phase == Phase::kBody && form.Uses(AddrVar::kKBlock)) absl::StrAppend(&what, " over blocks [0, ", s_.num_blocks, ")");
    if (p.origin.indirect) {
      absl::StrAppend(&what, " with its index admitted in [", p.origin.indirect->lo, ", ", p.origin.indirect->hi,
                      "] (tile_stride ", p.origin.indirect->tile_stride, ")");
    }
    if (p.block_h * p.block_w > 1) absl::StrAppend(&what, " and its ", p.block_h, " x ", p.block_w, " block");
    ctx_.Diag(codes::kIndexOutOfRange, stage, by_index ? "pattern.origin.indirect" : "pattern.origin",
              absl::StrCat("in [0, ", tiles, ")"), IntervalToString(at_item), what);
  }

  SectionContext& ctx_;
  const Section& s_;
  Coords items_;
  TablePages pages_;
  std::vector<Interval> range_;
  std::vector<int> last_writer_;
  std::vector<std::pair<TensorId, Interval>> stores_;
};

}  // namespace

void CheckAccesses(SectionContext& ctx) { AccessPass(ctx).Run(); }

}  // namespace spatial::certify
