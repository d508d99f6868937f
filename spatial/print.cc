#include "spatial/print.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spatial/body.h"
#include "spatial/proto_io.h"

namespace spatial {
namespace {

// Items and init values beyond these counts are summarized: a 14,800-stage program must stay readable.
constexpr size_t kShownItems = 4;
constexpr size_t kShownValues = 8;
// Bodies that expand (shared subtrees counted per use) beyond this print flattened, one node a line.
constexpr int64_t kMaxInlineBodyNodes = 256;

std::string S(std::string_view v) { return std::string(v); }

// "12 + 32*ROW - COL": the base only when non-zero or alone; coefficient 1 elided.
void AppendAffine(std::string* out, int64_t base, const std::vector<Term>& terms) {
  bool first = true;
  if (base != 0 || terms.empty()) {
    absl::StrAppend(out, base);
    first = false;
  }
  for (const auto& [var, coef] : terms) {
    const uint64_t mag = coef < 0 ? 0 - static_cast<uint64_t>(coef) : static_cast<uint64_t>(coef);
    if (first) {
      absl::StrAppend(out, coef < 0 ? "-" : "");
    } else {
      absl::StrAppend(out, coef < 0 ? " - " : " + ");
    }
    if (mag != 1) absl::StrAppend(out, mag, "*");
    absl::StrAppend(out, S(LoopVarName(var)));
    first = false;
  }
}

std::string BufferName(const Section& s, int64_t id) {
  if (id < 0 || id >= static_cast<int64_t>(s.buffers.size())) return absl::StrCat("<bad buffer ", id, ">");
  return s.buffers[id].name;
}

std::string TensorName(const Section& s, int64_t id) {
  if (id < 0 || id >= static_cast<int64_t>(s.tensors.size())) return absl::StrCat("<bad tensor ", id, ">");
  return s.tensors[id].name;
}

std::string StageName(const Section& s, int64_t id) {
  if (id < 0 || id >= static_cast<int64_t>(s.stages.size())) return absl::StrCat("<bad stage ", id, ">");
  return absl::StrCat("#", id, " ", s.stages[id].name);
}

std::string BufferList(const Section& s, const std::vector<BufferId>& ids) {
  std::vector<std::string> names;
  names.reserve(ids.size());
  for (BufferId id : ids) names.push_back(BufferName(s, id));
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

template <typename T>
std::string ValueList(const std::vector<T>& v) {
  std::string out = absl::StrCat("[", v.size(), "]{");
  for (size_t i = 0; i < std::min(v.size(), kShownValues); ++i) absl::StrAppend(&out, i ? ", " : "", v[i]);
  if (v.size() > kShownValues) absl::StrAppend(&out, ", ...");
  return out + "}";
}

std::string InitToString(const TensorInit& init) {
  switch (init.kind) {
    case TensorInit::Kind::kZero: return "zero";
    case TensorInit::Kind::kConstF: return absl::StrCat("const(", init.const_f, ")");
    case TensorInit::Kind::kValues: return absl::StrCat("values", ValueList(init.values));
    case TensorInit::Kind::kFloatValues: return absl::StrCat("float_values", ValueList(init.float_values));
    case TensorInit::Kind::kExternal: return "external";
  }
  return "<bad init>";
}

std::string IterKindName(IterKind k) {
  switch (k) {
    case IterKind::kParallel: return "parallel";
    case IterKind::kReduceSum: return "sum";
    case IterKind::kReduceMax: return "max";
    case IterKind::kReduceArgMax: return "argmax";
  }
  return "<bad kind>";
}

std::string PatternToString(const AccessPattern& p, const Section& s) {
  std::string out = absl::StrCat("tile ", TileAddrToString(p.origin, &s), ", block ", p.block_h, "x", p.block_w);
  if (p.stride_w != 1 || p.block_w > 1) absl::StrAppend(&out, " stride_w ", p.stride_w);
  if (p.block_h > 1) absl::StrAppend(&out, " stride_h ", p.stride_h);
  return out;
}

// The flattened form: one node a line, children by index. Used when a body is too large (or too shared) to read
// inline, or malformed (a missing child is -1): BodyToString would expand or crash.
void AppendFlatBody(std::string* out, const proto::TensorBody& flat, const std::string& indent) {
  for (int i = 0; i < flat.nodes_size(); ++i) {
    const proto::BodyNode& n = flat.nodes(i);
    absl::StrAppend(out, indent, "%", i, " = ");
    switch (static_cast<BodyOp>(n.op())) {
      case BodyOp::kOperand: absl::StrAppend(out, "x", n.operand()); break;
      case BodyOp::kConst: absl::StrAppend(out, "const ", n.value()); break;
      case BodyOp::kShr: absl::StrAppend(out, "shr %", n.a(), ", ", n.shift()); break;
      case BodyOp::kUnary: {
        SfpuKind k{static_cast<SfpuOp>(n.sfpu()), n.eps_nano(), n.over()};
        absl::StrAppend(out, SfpuName(k), " %", n.a());
        break;
      }
      case BodyOp::kSelect:
        absl::StrAppend(out, "select ", S(LoopVarName(static_cast<LoopVar>(n.pred_var()))),
                        n.pred() == proto::BodyNode::AXIS_LT ? " < " : " >= ", n.pred_rhs_is_operand() ? "x" : "",
                        n.pred_rhs(), " ? %", n.b(), " : %", n.c());
        break;
      default:
        absl::StrAppend(out, proto::BodyNode::Op_Name(n.op()), " %", n.a(), ", %", n.b());
        break;
    }
    absl::StrAppend(out, "\n");
  }
}

void AppendBody(std::string* out, const Body& body, const std::string& indent) {
  if (!body.defined()) {
    absl::StrAppend(out, indent, "body <undefined>\n");
    return;
  }
  proto::TensorBody flat = BodyToProto(body);
  // Expanded size, and whether every child is present: both decide whether the infix form is safe to print.
  std::vector<int64_t> expanded(flat.nodes_size(), 1);
  bool well_formed = true;
  for (int i = 0; i < flat.nodes_size(); ++i) {
    const proto::BodyNode& n = flat.nodes(i);
    for (int c : {n.a(), n.b(), n.c()}) {
      // Unused children are 0 on the wire; only the node itself can be index 0, so reading them is harmless.
      if (c < 0) well_formed = false;
    }
    auto add = [&](int c) { expanded[i] = std::min(expanded[i] + (c >= 0 ? expanded[c] : 0), kMaxInlineBodyNodes + 1); };
    switch (static_cast<BodyOp>(n.op())) {
      case BodyOp::kOperand:
      case BodyOp::kConst: break;
      case BodyOp::kShr:
      case BodyOp::kUnary: add(n.a()); break;
      case BodyOp::kSelect:
        add(n.b());
        add(n.c());
        break;
      default:
        add(n.a());
        add(n.b());
        break;
    }
  }
  if (well_formed && expanded.back() <= kMaxInlineBodyNodes) {
    absl::StrAppend(out, indent, "body ", BodyToString(body), "\n");
    return;
  }
  absl::StrAppend(out, indent, "body (", flat.nodes_size(), " nodes, root last)\n");
  AppendFlatBody(out, flat, indent + "  ");
}

void AppendStage(std::string* out, const Section& s, size_t i) {
  const Stage& st = s.stages[i];
  absl::StrAppend(out, "    [", i, "] ", S(PhaseName(st.phase)), " ", S(StageKindName(st)), " '", st.name, "' ");
  if (st.last_blocks == 1) absl::StrAppend(out, "(each item's last block only) ");
  if (st.last_blocks > 1) absl::StrAppend(out, "(each item's last ", st.last_blocks, " blocks only) ");
  if (const auto* l = std::get_if<Load>(&st.op)) {
    absl::StrAppend(out, TensorName(s, l->tensor), "[", PatternToString(l->pattern, s), "]");
    if (l->num_blocks != 1) absl::StrAppend(out, " x", l->num_blocks, " blocks");
    if (l->multicast != LoopVar::kUnspecified) absl::StrAppend(out, " multicast ", S(LoopVarName(l->multicast)));
    if (!st.ins.empty()) absl::StrAppend(out, " index ", BufferList(s, st.ins));
    absl::StrAppend(out, " -> ", BufferList(s, st.outs), "\n");
  } else if (const auto* w = std::get_if<Store>(&st.op)) {
    absl::StrAppend(out, BufferList(s, st.ins), " -> ", TensorName(s, w->tensor), "[",
                    PatternToString(w->pattern, s), "]\n");
  } else if (const auto* g = std::get_if<Generic>(&st.op)) {
    absl::StrAppend(out, BufferList(s, st.ins), " -> ", BufferList(s, st.outs), "\n");
    std::vector<std::string> iters;
    for (const IterSpec& it : g->iters) {
      iters.push_back(absl::StrCat(S(LoopVarName(it.var)), " ", it.extent,
                                   it.kind == IterKind::kParallel ? "" : " " + IterKindName(it.kind)));
    }
    absl::StrAppend(out, "          iters [", absl::StrJoin(iters, ", "), "]\n");
    for (size_t k = 0; k < g->ins.size(); ++k) {
      std::string buf = k < st.ins.size() ? BufferName(s, st.ins[k]) : "<no buffer>";
      absl::StrAppend(out, "          ins[", k, "] ", buf, "[", MapToString(g->ins[k]), "]\n");
    }
    std::string obuf = st.outs.empty() ? "<no buffer>" : BufferName(s, st.outs[0]);
    absl::StrAppend(out, "          out    ", obuf, "[", MapToString(g->out), "]\n");
    AppendBody(out, g->body, "          ");
  } else if (const auto* m = std::get_if<MatmulTiles>(&st.op)) {
    absl::StrAppend(out, BufferList(s, st.ins), " -> ", BufferList(s, st.outs), " m=", m->m_tiles, " n=", m->n_tiles,
                    " k=", m->k_tiles, m->accumulate ? " accumulate" : "", m->transpose_b ? " transpose_b" : "",
                    m->fidelity == MathFidelity::kDefault ? "" : absl::StrCat(" ", S(MathFidelityName(m->fidelity))),
                    "\n");
  }
}

std::string ItemToString(const WorkItem& w) {
  return absl::StrCat("#", w.id, " (", w.y, ",", w.x, ") -> [", w.out.row0_t, ",", w.out.col0_t, " ", w.out.h_t, "x",
                      w.out.w_t, "]", w.blocks >= 0 ? absl::StrCat(" blocks ", w.blocks) : "");
}

}  // namespace

std::string MapToString(const ElemAccess& m) {
  std::string out;
  AppendAffine(&out, m.base, m.terms);
  if (m.indirect) {
    absl::StrAppend(&out, " [+ ", m.indirect->stride, "*x", m.indirect->operand, " %<", m.indirect->modulus, "]");
  }
  return out;
}

std::string TileAddrToString(const TileAddr& a, const Section* s) {
  std::string out;
  AppendAffine(&out, a.base, a.steps);
  if (a.indirect) {
    std::string index = s != nullptr ? BufferName(*s, a.indirect->index) : absl::StrCat(a.indirect->index);
    absl::StrAppend(&out, " [+ ", a.indirect->tile_stride, "*@", index, " in [", a.indirect->lo, ", ", a.indirect->hi,
                    "]]");
  }
  return out;
}

std::string PrintSection(const Section& s) {
  std::string out = absl::StrCat("section '", s.name, "' {\n");
  absl::StrAppend(&out, "  claim ", s.claim.exact ? "exact" : "approx");
  if (!s.claim.reason.empty()) absl::StrAppend(&out, " \"", s.claim.reason, "\"");
  if (s.claim.error_growth > 1) absl::StrAppend(&out, " growth ", s.claim.error_growth);
  absl::StrAppend(&out, "\n  acc ", S(PrecisionName(s.acc_precision)), "\n");
  if (s.trip) {
    const Trip& t = *s.trip;
    absl::StrAppend(&out, "  fold trip ceil((", TensorName(s, t.tensor), "[", t.elem, "] + ", t.bias, ") / ", t.per,
                    ") admit [", t.lo, ", ", t.hi, "], at most ", s.num_blocks, " blocks\n");
  } else if (s.num_blocks > 1) {
    absl::StrAppend(&out, "  fold ", s.num_blocks, " blocks\n");
  } else {
    absl::StrAppend(&out, "  fold none\n");
  }
  if (s.plan) {
    const BlockPlan& p = *s.plan;
    absl::StrAppend(&out, "  plan per_site ", p.per_site_m, "x", p.per_site_n, " grid ", p.grid_y, "x", p.grid_x,
                    " blocks ", p.num_blocks, " block_k_tiles ", p.block_k_tiles, " osh ", p.osh, " osw ", p.osw,
                    " ibw ", p.ibw, p.pack_accumulate ? " pack_accumulate" : "",
                    p.pack_row_sums ? " pack_row_sums" : "", p.stream_rows ? " stream_rows" : "", "\n");
  }
  absl::StrAppend(&out, "  tensors\n");
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const Tensor& t = s.tensors[i];
    absl::StrAppend(&out, "    %", i, " ", t.name, ": ", S(TensorRoleName(t.role)), " ", t.rows, "x", t.cols, " ",
                    S(PrecisionName(t.precision)), " init ", InitToString(t.init),
                    t.domain ? absl::StrCat(" domain [", t.domain->lo, ", ", t.domain->hi, "]") : "", "\n");
  }
  absl::StrAppend(&out, "  buffers\n");
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    const Buffer& b = s.buffers[i];
    absl::StrAppend(&out, "    #", i, " ", b.name, ": ", b.depth, " x ", b.page_tiles, " tiles ",
                    S(PrecisionName(b.precision)), b.kind == BufferKind::kScratch ? " scratch" : " buffer", "\n");
  }
  absl::StrAppend(&out, "  stages\n");
  for (size_t i = 0; i < s.stages.size(); ++i) AppendStage(&out, s, i);
  absl::StrAppend(&out, "  items ", s.items.size(), ":");
  for (size_t i = 0; i < std::min(s.items.size(), kShownItems); ++i) {
    absl::StrAppend(&out, i ? "; " : " ", ItemToString(s.items[i]));
  }
  if (s.items.size() > kShownItems) absl::StrAppend(&out, "; ... and ", s.items.size() - kShownItems, " more");
  absl::StrAppend(&out, "\n  edges\n");
  for (const Edge& e : s.edges) {
    absl::StrAppend(&out, "    ", StageName(s, e.from), " -[", BufferName(s, e.buffer), "]-> ", StageName(s, e.to),
                    "\n");
  }
  absl::StrAppend(&out, "}\n");
  return out;
}

std::string PrintComposition(const Composition& c) {
  std::string out = absl::StrCat("composition '", c.name, "' target '", c.target, "' tile ", c.tile_rows, "x",
                                 c.tile_cols, ", ", c.sections.size(), " section", c.sections.size() == 1 ? "" : "s",
                                 "\n");
  if (!c.state_order.empty()) {
    absl::StrAppend(&out, "state_order\n");
    for (const StateStep& st : c.state_order) {
      std::string section = st.section >= 0 && st.section < static_cast<int>(c.sections.size())
                                ? c.sections[st.section].name
                                : "<bad section>";
      absl::StrAppend(&out, "  ", st.tensor, ": ", st.access == StateAccess::kRead ? "read" : "write", " in #",
                      st.section, " '", section, "'\n");
    }
  }
  for (size_t i = 0; i < c.sections.size(); ++i) {
    absl::StrAppend(&out, "\n// section #", i, "\n", PrintSection(c.sections[i]));
  }
  return out;
}

}  // namespace spatial
