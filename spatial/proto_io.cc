#include "spatial/proto_io.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spatial/diagnostic_status.h"
#include "spatial/proto_file.h"
#include "spatial/status_macros.h"
#include "spatial/validate.h"

namespace spatial {

// The body IR's kinds are listed once (spatial/body.h); their wire values must be the proto's.
#define SPATIAL_X(e, v, name, wire, children) \
  static_assert(static_cast<int>(BodyOp::e) == proto::BodyNode::wire, "BodyOp " name " and its wire value differ");
SPATIAL_BODY_OPS(SPATIAL_X)
#undef SPATIAL_X
#define SPATIAL_X(e, v, name, wire) \
  static_assert(static_cast<int>(SfpuOp::e) == proto::wire, "SfpuOp " name " and its wire value differ");
SPATIAL_SFPU_OPS(SPATIAL_X)
#undef SPATIAL_X
namespace {

// ── Enums ─────────────────────────────────────────────────────────────────────────────────────────────────────
// The C++ and proto enums are numerically identical (the headers say so), so conversion is a cast once the
// value is known to be a defined, non-UNSPECIFIED proto value. proto3 enums are open: a parsed message may hold
// any int, which is why every read goes through here.

template <typename E>
absl::StatusOr<E> EnumFrom(int v, bool (*is_valid)(int), const DiagWhere& where, std::string_view field) {
  if (v == 0) return Malformed(where, field, "UNSPECIFIED");
  if (!is_valid(v)) return Malformed(where, field, absl::StrCat("unknown value ", v));
  return static_cast<E>(v);
}

// ── Terms, maps, addresses ────────────────────────────────────────────────────────────────────────────────────

void TermsToProto(const std::vector<Term>& terms, google::protobuf::RepeatedPtrField<proto::Term>* out) {
  out->Reserve(static_cast<int>(terms.size()));
  for (const auto& [var, coef] : terms) {
    proto::Term* t = out->Add();
    t->set_var(static_cast<proto::LoopVar>(var));
    t->set_coef(coef);
  }
}

absl::StatusOr<std::vector<Term>> TermsFromProto(const google::protobuf::RepeatedPtrField<proto::Term>& in,
                                                 const DiagWhere& where, std::string_view field) {
  std::vector<Term> terms;
  terms.reserve(in.size());
  for (int i = 0; i < in.size(); ++i) {
    ASSIGN_OR_RETURN(LoopVar var, EnumFrom<LoopVar>(in[i].var(), proto::LoopVar_IsValid, where,
                                                    absl::StrCat(std::string(field), "[", i, "].var")));
    terms.emplace_back(var, in[i].coef());
  }
  return terms;
}

proto::ElemAccess ElemAccessToProto(const ElemAccess& m) {
  proto::ElemAccess p;
  p.set_base(m.base);
  TermsToProto(m.terms, p.mutable_terms());
  if (m.indirect) {
    proto::IndirectTerm* it = p.mutable_indirect();
    it->set_operand(m.indirect->operand);
    it->set_stride(m.indirect->stride);
    it->set_modulus(m.indirect->modulus);
  }
  return p;
}

absl::StatusOr<ElemAccess> ElemAccessFromProto(const proto::ElemAccess& p, const DiagWhere& where,
                                               const std::string& field) {
  ElemAccess m;
  m.base = p.base();
  ASSIGN_OR_RETURN(m.terms, TermsFromProto(p.terms(), where, field + ".terms"));
  if (p.has_indirect()) {
    m.indirect = IndirectTerm{p.indirect().operand(), p.indirect().stride(), p.indirect().modulus()};
  }
  return m;
}

proto::AccessPattern PatternToProto(const AccessPattern& a) {
  proto::AccessPattern p;
  proto::TileAddr* o = p.mutable_origin();
  o->set_base(a.origin.base);
  TermsToProto(a.origin.steps, o->mutable_steps());
  if (a.origin.indirect) {
    proto::IndirectTile* it = o->mutable_indirect();
    it->set_index_buffer(a.origin.indirect->index);
    it->set_tile_stride(a.origin.indirect->tile_stride);
    it->set_lo(a.origin.indirect->lo);
    it->set_hi(a.origin.indirect->hi);
  }
  p.set_block_h(a.block_h);
  p.set_block_w(a.block_w);
  p.set_stride_w(a.stride_w);
  p.set_stride_h(a.stride_h);
  return p;
}

absl::StatusOr<AccessPattern> PatternFromProto(const proto::AccessPattern& p, const DiagWhere& where,
                                               const std::string& field) {
  AccessPattern a;
  a.origin.base = p.origin().base();
  ASSIGN_OR_RETURN(a.origin.steps, TermsFromProto(p.origin().steps(), where, field + ".origin.steps"));
  if (p.origin().has_indirect()) {
    const proto::IndirectTile& it = p.origin().indirect();
    a.origin.indirect = IndirectTile{it.index_buffer(), it.tile_stride(), it.lo(), it.hi()};
  }
  a.block_h = p.block_h();
  a.block_w = p.block_w();
  a.stride_w = p.stride_w();
  a.stride_h = p.stride_h();
  return a;
}

// ── Bodies ────────────────────────────────────────────────────────────────────────────────────────────────────

// The children an op uses, in the order they are emitted: binary ops a, b; Shr and Unary a; Select b, c.
std::array<const Body*, 2> UsedChildren(const BodyNode& n, int* count) {
  switch (n.op) {
    case BodyOp::kOperand:
    case BodyOp::kConst: *count = 0; return {nullptr, nullptr};
    case BodyOp::kShr:
    case BodyOp::kUnary: *count = 1; return {&n.a, nullptr};
    case BodyOp::kSelect: *count = 2; return {&n.b, &n.c};
    default: *count = 2; return {&n.a, &n.b};
  }
}

bool IsBinary(BodyOp op) {
  return op == BodyOp::kAdd || op == BodyOp::kSub || op == BodyOp::kMul || op == BodyOp::kMin ||
         op == BodyOp::kMax || op == BodyOp::kFloorDiv;
}

// ── Tensors ───────────────────────────────────────────────────────────────────────────────────────────────────

void InitToProto(const TensorInit& init, proto::TensorInit* p) {
  switch (init.kind) {
    case TensorInit::Kind::kZero: p->mutable_zero(); break;
    case TensorInit::Kind::kConstF: p->set_const_f(init.const_f); break;
    case TensorInit::Kind::kValues: {
      auto* v = p->mutable_values()->mutable_v();
      v->Reserve(static_cast<int>(init.values.size()));
      for (int64_t x : init.values) v->Add(x);
      break;
    }
    case TensorInit::Kind::kFloatValues: {
      auto* v = p->mutable_float_values()->mutable_v();
      v->Reserve(static_cast<int>(init.float_values.size()));
      for (double x : init.float_values) v->Add(x);
      break;
    }
    case TensorInit::Kind::kExternal: p->mutable_external(); break;
  }
}

absl::StatusOr<TensorInit> InitFromProto(const proto::TensorInit& p, const DiagWhere& where) {
  switch (p.kind_case()) {
    case proto::TensorInit::kZero: return TensorInit::Zero();
    case proto::TensorInit::kConstF: return TensorInit::ConstF(p.const_f());
    case proto::TensorInit::kValues:
      return TensorInit::Values(std::vector<int64_t>(p.values().v().begin(), p.values().v().end()));
    case proto::TensorInit::kFloatValues:
      return TensorInit::FloatValues(std::vector<double>(p.float_values().v().begin(), p.float_values().v().end()));
    case proto::TensorInit::kExternal: return TensorInit::External();
    case proto::TensorInit::KIND_NOT_SET: break;
  }
  return Malformed(where, "init", "no kind (one of zero, const_f, values, float_values, external)");
}

// ── Stages ────────────────────────────────────────────────────────────────────────────────────────────────────

proto::Stage StageToProto(const Stage& s) {
  proto::Stage p;
  p.set_name(s.name);
  p.set_phase(static_cast<proto::Phase>(s.phase));
  p.set_last_blocks(s.last_blocks);
  p.mutable_ins()->Add(s.ins.begin(), s.ins.end());
  p.mutable_outs()->Add(s.outs.begin(), s.outs.end());
  if (const auto* l = std::get_if<Load>(&s.op)) {
    proto::Load* pl = p.mutable_load();
    pl->set_tensor(l->tensor);
    *pl->mutable_pattern() = PatternToProto(l->pattern);
    pl->set_num_blocks(l->num_blocks);
    if (l->multicast != LoopVar::kUnspecified) {
      pl->mutable_multicast()->set_axis(static_cast<proto::LoopVar>(l->multicast));
    }
  } else if (const auto* w = std::get_if<Store>(&s.op)) {
    proto::Store* pw = p.mutable_store();
    pw->set_tensor(w->tensor);
    *pw->mutable_pattern() = PatternToProto(w->pattern);
  } else if (const auto* g = std::get_if<Generic>(&s.op)) {
    proto::Generic* pg = p.mutable_generic();
    for (const IterSpec& it : g->iters) {
      proto::IterSpec* pi = pg->add_iters();
      pi->set_var(static_cast<proto::LoopVar>(it.var));
      pi->set_extent(it.extent);
      pi->set_kind(static_cast<proto::IterKind>(it.kind));
    }
    for (const ElemAccess& m : g->ins) *pg->add_ins() = ElemAccessToProto(m);
    *pg->mutable_out() = ElemAccessToProto(g->out);
    *pg->mutable_body() = BodyToProto(g->body);
  } else if (const auto* mm = std::get_if<MatmulTiles>(&s.op)) {
    proto::MatmulTiles* pm = p.mutable_matmul();
    pm->set_m_tiles(mm->m_tiles);
    pm->set_n_tiles(mm->n_tiles);
    pm->set_k_tiles(mm->k_tiles);
    pm->set_accumulate(mm->accumulate);
    pm->set_transpose_b(mm->transpose_b);
    pm->set_fidelity(static_cast<proto::Fidelity>(mm->fidelity));
  }
  return p;
}

absl::StatusOr<Stage> StageFromProto(const proto::Stage& p, const DiagWhere& section_where, int index) {
  const DiagWhere where = section_where.Stage(p.name(), index);
  Stage s;
  s.name = p.name();
  ASSIGN_OR_RETURN(s.phase, EnumFrom<Phase>(p.phase(), proto::Phase_IsValid, where, "phase"));
  s.last_blocks = p.last_blocks();
  s.ins.assign(p.ins().begin(), p.ins().end());
  s.outs.assign(p.outs().begin(), p.outs().end());
  switch (p.kind_case()) {
    case proto::Stage::kLoad: {
      Load l;
      l.tensor = p.load().tensor();
      ASSIGN_OR_RETURN(l.pattern, PatternFromProto(p.load().pattern(), where, "load.pattern"));
      l.num_blocks = p.load().num_blocks();
      if (p.load().has_multicast()) {
        // An unset axis inside a present message is not "no multicast": EnumFrom refuses UNSPECIFIED. Which axes
        // may be multicast is validate.cc's, so C++-built programs are held to it too.
        ASSIGN_OR_RETURN(l.multicast, EnumFrom<LoopVar>(p.load().multicast().axis(), proto::LoopVar_IsValid, where,
                                                        "load.multicast.axis"));
      }
      s.op = std::move(l);
      break;
    }
    case proto::Stage::kStore: {
      Store w;
      w.tensor = p.store().tensor();
      ASSIGN_OR_RETURN(w.pattern, PatternFromProto(p.store().pattern(), where, "store.pattern"));
      s.op = std::move(w);
      break;
    }
    case proto::Stage::kGeneric: {
      const proto::Generic& pg = p.generic();
      Generic g;
      g.iters.reserve(pg.iters_size());
      for (int i = 0; i < pg.iters_size(); ++i) {
        const proto::IterSpec& pi = pg.iters(i);
        IterSpec it;
        ASSIGN_OR_RETURN(it.var, EnumFrom<LoopVar>(pi.var(), proto::LoopVar_IsValid, where,
                                                   absl::StrCat("iters[", i, "].var")));
        it.extent = pi.extent();
        ASSIGN_OR_RETURN(it.kind, EnumFrom<IterKind>(pi.kind(), proto::IterKind_IsValid, where,
                                                     absl::StrCat("iters[", i, "].kind")));
        g.iters.push_back(it);
      }
      g.ins.reserve(pg.ins_size());
      for (int i = 0; i < pg.ins_size(); ++i) {
        ASSIGN_OR_RETURN(ElemAccess m, ElemAccessFromProto(pg.ins(i), where, absl::StrCat("ins[", i, "]")));
        g.ins.push_back(std::move(m));
      }
      ASSIGN_OR_RETURN(g.out, ElemAccessFromProto(pg.out(), where, "out"));
      absl::StatusOr<Body> body = BodyFromProto(pg.body());
      if (!body.ok()) return MalformedWithin(where, "body.", body.status());
      g.body = *std::move(body);
      s.op = std::move(g);
      break;
    }
    case proto::Stage::kMatmul: {
      const proto::MatmulTiles& pm = p.matmul();
      MatmulTiles mm{pm.m_tiles(), pm.n_tiles(), pm.k_tiles(), pm.accumulate(), pm.transpose_b()};
      // Unset is the target's default, not an error.
      if (pm.fidelity() != proto::FIDELITY_UNSPECIFIED) {
        ASSIGN_OR_RETURN(mm.fidelity,
                         EnumFrom<MathFidelity>(pm.fidelity(), proto::Fidelity_IsValid, where, "matmul.fidelity"));
      }
      s.op = mm;
      break;
    }
    case proto::Stage::KIND_NOT_SET:
      return Malformed(where, "stage has no kind (open algebra)", "one of load, store, generic, matmul must be set");
  }
  return s;
}

}  // namespace

// ── Bodies (public) ───────────────────────────────────────────────────────────────────────────────────────────

proto::TensorBody BodyToProto(const Body& b) {
  proto::TensorBody out;
  if (!b.defined()) return out;
  // Iterative post-order: a body may be deep (long Banded chains), and a shared node is emitted once.
  std::unordered_map<const BodyNode*, int> index;
  struct Frame {
    const BodyNode* node;
    int next;
  };
  std::vector<Frame> stack{{b.get(), 0}};
  while (!stack.empty()) {
    const BodyNode* n = stack.back().node;
    int count = 0;
    std::array<const Body*, 2> kids = UsedChildren(*n, &count);
    if (stack.back().next < count) {
      const BodyNode* k = kids[stack.back().next++]->get();
      if (k != nullptr && !index.contains(k)) stack.push_back({k, 0});
      continue;
    }
    stack.pop_back();
    if (index.contains(n)) continue;
    // A missing child is written as -1, which BodyFromProto rejects: the wire never hides a malformed body.
    auto child = [&](const Body& c) { return c.defined() ? index.at(c.get()) : -1; };
    proto::BodyNode* p = out.add_nodes();
    p->set_op(static_cast<proto::BodyNode::Op>(n->op));
    switch (n->op) {
      case BodyOp::kOperand: p->set_operand(n->operand); break;
      case BodyOp::kConst: p->set_value(n->value); break;
      case BodyOp::kShr:
        p->set_a(child(n->a));
        p->set_shift(n->shift);
        break;
      case BodyOp::kUnary:
        p->set_a(child(n->a));
        p->set_sfpu(static_cast<proto::SfpuKind>(n->sfpu.op));
        if (n->sfpu.op == SfpuOp::kRsqrt) {
          p->set_eps_nano(n->sfpu.eps_nano);
          p->set_over(n->sfpu.over);
        }
        break;
      case BodyOp::kSelect:
        p->set_b(child(n->b));
        p->set_c(child(n->c));
        p->set_pred(static_cast<proto::BodyNode::PredKind>(n->pred.kind));
        p->set_pred_var(static_cast<proto::LoopVar>(n->pred.var));
        p->set_pred_rhs_is_operand(n->pred.rhs_is_operand);
        p->set_pred_rhs(n->pred.rhs);
        break;
      default:
        p->set_a(child(n->a));
        p->set_b(child(n->b));
        break;
    }
    index.emplace(n, out.nodes_size() - 1);
  }
  return out;
}

absl::StatusOr<Body> BodyFromProto(const proto::TensorBody& p) {
  const int n = p.nodes_size();
  if (n == 0) return Malformed(DiagWhere{}, "nodes", "empty body (the root is the last node)");
  if (n > kMaxBodyNodes) {
    return Malformed(DiagWhere{}, "nodes", absl::StrCat(n, " nodes; the limit is ", kMaxBodyNodes));
  }
  std::vector<Body> built(n);
  std::vector<int64_t> depth(n, 1);
  std::vector<int64_t> expanded(n, 1);
  for (int i = 0; i < n; ++i) {
    const proto::BodyNode& pn = p.nodes(i);
    const DiagWhere where = DiagWhere{}.Part(absl::StrCat("nodes[", i, "] "));
    BodyNode node;
    ASSIGN_OR_RETURN(node.op, EnumFrom<BodyOp>(pn.op(), proto::BodyNode::Op_IsValid, where, "op"));
    auto child = [&](int c, std::string_view field, Body* dst) -> absl::Status {
      if (c < 0 || c >= i) {
        return Malformed(where, field,
                         absl::StrCat("child index ", c, " must name an earlier node (0..", i - 1, ")"));
      }
      *dst = built[c];
      depth[i] = std::max(depth[i], depth[c] + 1);
      expanded[i] = std::min(expanded[i] + expanded[c], kMaxBodyExpandedNodes + 1);
      return absl::OkStatus();
    };
    switch (node.op) {
      case BodyOp::kOperand: node.operand = pn.operand(); break;
      case BodyOp::kConst: node.value = pn.value(); break;
      case BodyOp::kShr:
        RETURN_IF_ERROR(child(pn.a(), "a", &node.a));
        node.shift = pn.shift();
        break;
      case BodyOp::kUnary: {
        RETURN_IF_ERROR(child(pn.a(), "a", &node.a));
        ASSIGN_OR_RETURN(node.sfpu.op, EnumFrom<SfpuOp>(pn.sfpu(), proto::SfpuKind_IsValid, where, "sfpu"));
        // eps/over mean something only for Rsqrt; elsewhere they keep the builders' defaults so a parsed body
        // compares equal (BodyEqual) to a built one.
        if (node.sfpu.op == SfpuOp::kRsqrt) {
          node.sfpu.eps_nano = pn.eps_nano();
          node.sfpu.over = pn.over();
        }
        break;
      }
      case BodyOp::kSelect: {
        RETURN_IF_ERROR(child(pn.b(), "b", &node.b));
        RETURN_IF_ERROR(child(pn.c(), "c", &node.c));
        ASSIGN_OR_RETURN(node.pred.kind,
                         EnumFrom<PredKind>(pn.pred(), proto::BodyNode::PredKind_IsValid, where, "pred"));
        ASSIGN_OR_RETURN(node.pred.var, EnumFrom<LoopVar>(pn.pred_var(), proto::LoopVar_IsValid, where, "pred_var"));
        node.pred.rhs_is_operand = pn.pred_rhs_is_operand();
        node.pred.rhs = pn.pred_rhs();
        break;
      }
      default:
        if (!IsBinary(node.op)) return absl::InternalError(absl::StrCat(where.text, "op: unhandled"));
        RETURN_IF_ERROR(child(pn.a(), "a", &node.a));
        RETURN_IF_ERROR(child(pn.b(), "b", &node.b));
        break;
    }
    if (depth[i] > kMaxBodyDepth) {
      return MalformedAt(where, absl::StrCat("depth ", depth[i], " exceeds the limit of ", kMaxBodyDepth));
    }
    if (expanded[i] > kMaxBodyExpandedNodes) {
      return MalformedAt(where, absl::StrCat("the body expands to more than ", kMaxBodyExpandedNodes,
                                             " nodes when shared subtrees are counted per use"));
    }
    built[i] = Body(std::make_shared<BodyNode>(std::move(node)));
  }
  return built.back();
}

// ── Sections ──────────────────────────────────────────────────────────────────────────────────────────────────

proto::Section SectionToProto(const Section& s) {
  proto::Section p;
  p.set_name(s.name);
  p.mutable_tensors()->Reserve(static_cast<int>(s.tensors.size()));
  for (const Tensor& t : s.tensors) {
    proto::Tensor* pt = p.add_tensors();
    pt->set_name(t.name);
    pt->set_role(static_cast<proto::TensorRole>(t.role));
    pt->set_rows(t.rows);
    pt->set_cols(t.cols);
    pt->set_precision(static_cast<proto::Precision>(t.precision));
    InitToProto(t.init, pt->mutable_init());
    if (t.domain) {
      pt->mutable_domain()->set_lo(t.domain->lo);
      pt->mutable_domain()->set_hi(t.domain->hi);
    }
  }
  p.mutable_buffers()->Reserve(static_cast<int>(s.buffers.size()));
  for (const Buffer& b : s.buffers) {
    proto::Buffer* pb = p.add_buffers();
    pb->set_name(b.name);
    pb->set_depth(b.depth);
    pb->set_page_tiles(b.page_tiles);
    pb->set_precision(static_cast<proto::Precision>(b.precision));
    pb->set_kind(static_cast<proto::BufferKind>(b.kind));
  }
  p.mutable_stages()->Reserve(static_cast<int>(s.stages.size()));
  for (const Stage& st : s.stages) *p.add_stages() = StageToProto(st);
  p.mutable_edges()->Reserve(static_cast<int>(s.edges.size()));
  for (const Edge& e : s.edges) {
    proto::Edge* pe = p.add_edges();
    pe->set_from_stage(e.from);
    pe->set_buffer(e.buffer);
    pe->set_to_stage(e.to);
  }
  p.mutable_items()->Reserve(static_cast<int>(s.items.size()));
  for (const WorkItem& w : s.items) {
    proto::WorkItem* pw = p.add_items();
    pw->set_id(w.id);
    pw->set_y(w.y);
    pw->set_x(w.x);
    proto::TileRect* r = pw->mutable_out();
    r->set_row0_t(w.out.row0_t);
    r->set_col0_t(w.out.col0_t);
    r->set_h_t(w.out.h_t);
    r->set_w_t(w.out.w_t);
    if (w.blocks >= 0) pw->set_blocks(w.blocks);
  }
  p.set_num_blocks(s.num_blocks);
  if (s.trip) {
    proto::Trip* t = p.mutable_trip();
    t->set_tensor(s.trip->tensor);
    t->set_elem(s.trip->elem);
    t->set_lo(s.trip->lo);
    t->set_hi(s.trip->hi);
    t->set_bias(s.trip->bias);
    t->set_per(s.trip->per);
  }
  if (s.plan) {
    proto::BlockPlan* b = p.mutable_plan();
    b->set_per_site_m(s.plan->per_site_m);
    b->set_per_site_n(s.plan->per_site_n);
    b->set_grid_y(s.plan->grid_y);
    b->set_grid_x(s.plan->grid_x);
    b->set_num_blocks(s.plan->num_blocks);
    b->set_block_k_tiles(s.plan->block_k_tiles);
    b->set_osh(s.plan->osh);
    b->set_osw(s.plan->osw);
    b->set_ibw(s.plan->ibw);
    b->set_pack_accumulate(s.plan->pack_accumulate);
    b->set_pack_row_sums(s.plan->pack_row_sums);
    b->set_stream_rows(s.plan->stream_rows);
  }
  p.mutable_claim()->set_exact(s.claim.exact);
  p.mutable_claim()->set_reason(s.claim.reason);
  if (s.claim.error_growth != 0) p.mutable_claim()->set_error_growth(s.claim.error_growth);
  p.set_acc_precision(static_cast<proto::Precision>(s.acc_precision));
  return p;
}

absl::StatusOr<Section> SectionFromProto(const proto::Section& p) {
  const DiagWhere where = DiagWhere{}.Section(p.name());
  Section s;
  s.name = p.name();
  s.tensors.reserve(p.tensors_size());
  for (int i = 0; i < p.tensors_size(); ++i) {
    const proto::Tensor& pt = p.tensors(i);
    const DiagWhere tw = where.Part(absl::StrCat("tensors[", i, "] '", pt.name(), "' "));
    Tensor t;
    t.name = pt.name();
    ASSIGN_OR_RETURN(t.role, EnumFrom<TensorRole>(pt.role(), proto::TensorRole_IsValid, tw, "role"));
    t.rows = pt.rows();
    t.cols = pt.cols();
    ASSIGN_OR_RETURN(t.precision, EnumFrom<Precision>(pt.precision(), proto::Precision_IsValid, tw, "precision"));
    ASSIGN_OR_RETURN(t.init, InitFromProto(pt.init(), tw));
    if (pt.has_domain()) {
      const double lo = pt.domain().lo(), hi = pt.domain().hi();
      if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
        return Malformed(tw, "domain", absl::StrCat("[", lo, ", ", hi, "] is not a range: lo < hi, both finite"));
      }
      if (IsInteger(t.precision)) {
        return Malformed(tw, "domain",
                         "set on an integer tensor; an integer input's range is what the program's guards admit");
      }
      t.domain = ValueDomain{lo, hi};
    }
    s.tensors.push_back(std::move(t));
  }
  s.buffers.reserve(p.buffers_size());
  for (int i = 0; i < p.buffers_size(); ++i) {
    const proto::Buffer& pb = p.buffers(i);
    const DiagWhere bw = where.Part(absl::StrCat("buffers[", i, "] '", pb.name(), "' "));
    Buffer b;
    b.name = pb.name();
    b.depth = pb.depth();
    b.page_tiles = pb.page_tiles();
    ASSIGN_OR_RETURN(b.precision, EnumFrom<Precision>(pb.precision(), proto::Precision_IsValid, bw, "precision"));
    ASSIGN_OR_RETURN(b.kind, EnumFrom<BufferKind>(pb.kind(), proto::BufferKind_IsValid, bw, "kind"));
    s.buffers.push_back(std::move(b));
  }
  s.stages.reserve(p.stages_size());
  for (int i = 0; i < p.stages_size(); ++i) {
    ASSIGN_OR_RETURN(Stage st, StageFromProto(p.stages(i), where, i));
    s.stages.push_back(std::move(st));
  }
  s.edges.reserve(p.edges_size());
  for (const proto::Edge& e : p.edges()) s.edges.push_back(Edge{e.from_stage(), e.buffer(), e.to_stage()});
  s.items.reserve(p.items_size());
  for (const proto::WorkItem& w : p.items()) {
    s.items.push_back(WorkItem{w.id(), w.y(), w.x(),
                               TileRect{w.out().row0_t(), w.out().col0_t(), w.out().h_t(), w.out().w_t()},
                               w.has_blocks() ? w.blocks() : -1});
  }
  s.num_blocks = p.num_blocks();
  if (p.has_trip()) {
    const proto::Trip& t = p.trip();
    s.trip = Trip{t.tensor(), t.elem(), t.lo(), t.hi(), t.bias(), t.per()};
  }
  if (p.has_plan()) {
    const proto::BlockPlan& b = p.plan();
    s.plan = BlockPlan{b.per_site_m(), b.per_site_n(), b.grid_y(),        b.grid_x(),
                       b.num_blocks(), b.block_k_tiles(), b.osh(), b.osw(), b.ibw(), b.pack_accumulate(),
                       b.pack_row_sums(), b.stream_rows()};
  }
  s.claim = NumericsClaim{p.claim().exact(), p.claim().reason(), p.claim().error_growth()};
  RETURN_IF_ERROR(ValidateClaim(s.claim, where));
  ASSIGN_OR_RETURN(s.acc_precision,
                   EnumFrom<Precision>(p.acc_precision(), proto::Precision_IsValid, where, "acc_precision"));
  return s;
}

// ── Compositions ──────────────────────────────────────────────────────────────────────────────────────────────

proto::Composition ToProto(const Composition& c) {
  proto::Composition p;
  p.set_ir_version(proto::IR_VERSION_1);
  p.set_name(c.name);
  p.mutable_sections()->Reserve(static_cast<int>(c.sections.size()));
  for (const Section& s : c.sections) *p.add_sections() = SectionToProto(s);
  for (const StateStep& st : c.state_order) {
    proto::StateStep* ps = p.add_state_order();
    ps->set_tensor(st.tensor);
    ps->set_section(st.section);
    ps->set_access(static_cast<proto::StateAccess>(st.access));
  }
  p.set_target(c.target);
  p.set_tile_rows(c.tile_rows);
  p.set_tile_cols(c.tile_cols);
  return p;
}

absl::StatusOr<Composition> FromProto(const proto::Composition& p) {
  const DiagWhere where = DiagWhere::Composition(p.name());
  if (p.ir_version() != proto::IR_VERSION_1) {
    return Malformed(where, "ir_version",
                     absl::StrCat(p.ir_version(), " is not a version this build reads (expected IR_VERSION_1 = 1)"));
  }
  if (p.tile_rows() <= 0 || p.tile_cols() <= 0) {
    return Malformed(where, "tile_rows x tile_cols",
                     absl::StrCat(p.tile_rows(), " x ", p.tile_cols(), " (both must be positive)"));
  }
  Composition c;
  c.name = p.name();
  c.target = p.target();
  c.tile_rows = p.tile_rows();
  c.tile_cols = p.tile_cols();
  c.sections.reserve(p.sections_size());
  for (const proto::Section& ps : p.sections()) {
    ASSIGN_OR_RETURN(Section s, SectionFromProto(ps));
    c.sections.push_back(std::move(s));
  }
  for (int i = 0; i < p.state_order_size(); ++i) {
    const proto::StateStep& ps = p.state_order(i);
    ASSIGN_OR_RETURN(StateAccess access, EnumFrom<StateAccess>(ps.access(), proto::StateAccess_IsValid, where,
                                                               absl::StrCat("state_order[", i, "].access")));
    c.state_order.push_back(StateStep{ps.tensor(), ps.section(), access});
  }
  return c;
}

absl::StatusOr<Composition> ReadComposition(const std::string& path) {
  proto::Composition p;
  RETURN_IF_ERROR(ReadProtoFile(path, &p));
  absl::StatusOr<Composition> c = FromProto(p);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path == "-" ? "<stdin>" : path, ": error: ",
                                                        c.status().message()));
  }
  return c;
}

absl::Status WriteComposition(const std::string& path, const Composition& c) {
  return WriteProtoFile(path, ToProto(c));
}

}  // namespace spatial
