#include "spatial/validate.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spatial/body.h"
#include "spatial/diagnostic_status.h"
#include "spatial/limits.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// ── Helpers ───────────────────────────────────────────────────────────────────────────────────────────────────


std::string Name(LoopVar v) { return std::string(LoopVarName(v)); }

// Enum values that a hand-built (not parsed) model could still get wrong by a cast.
bool Known(TensorRole r) { return r >= TensorRole::kInput && r <= TensorRole::kState; }
// Every precision spatial/precision.h names: kBf16 .. kBfp4B (bfp4_b came last, after the integers).
bool Known(Precision p) { return p >= Precision::kBf16 && p <= Precision::kBfp4B; }
bool Known(BufferKind k) { return k == BufferKind::kBuffer || k == BufferKind::kScratch; }
bool Known(Phase p) { return p >= Phase::kPrologue && p <= Phase::kEpilogue; }
bool Known(IterKind k) { return k >= IterKind::kParallel && k <= IterKind::kReduceArgMax; }
bool Known(LoopVar v) { return v >= LoopVar::kRow && v <= LoopVar::kKBlock; }
bool Known(StateAccess a) { return a == StateAccess::kRead || a == StateAccess::kWrite; }

absl::Status CheckId(const DiagWhere& where, std::string_view field, int64_t id, size_t count,
                     std::string_view what) {
  if (id < 0 || id >= static_cast<int64_t>(count)) {
    return Malformed(where, field,
               absl::StrCat(std::string(what), " ", id, " out of range (expected 0..", static_cast<int64_t>(count) - 1,
                            ", the section has ", count, " ", std::string(what), "s)"));
  }
  return absl::OkStatus();
}

absl::Status CheckRange(const DiagWhere& where, std::string_view field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) return Malformed(where, field, absl::StrCat("expected ", lo, "..", hi, ", got ", v));
  return absl::OkStatus();
}

// ── The section checker ───────────────────────────────────────────────────────────────────────────────────────

class SectionChecker {
 public:
  // Nothing structural depends on the tile yet: page planes and tensor tiling matter only to addresses, which
  // the certifier proves.
  explicit SectionChecker(const Section& s) : s_(s), where_(DiagWhere{}.Section(s.name)) {}

  absl::Status Check() {
    RETURN_IF_ERROR(CheckRange(where_, "num_blocks", s_.num_blocks, 1, kMaxFoldBlocks));
    if (!Known(s_.acc_precision)) {
      return Malformed(where_, "acc_precision", absl::StrCat("unknown precision ", static_cast<int>(s_.acc_precision)));
    }
    RETURN_IF_ERROR(ValidateClaim(s_.claim, where_));
    RETURN_IF_ERROR(CheckTensors());
    RETURN_IF_ERROR(CheckBuffers());
    Phase last = Phase::kPrologue;
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      const Stage& st = s_.stages[i];
      const DiagWhere where = where_.Stage(st.name, static_cast<int>(i));
      RETURN_IF_ERROR(CheckStage(st, where));
      if (st.phase < last) {
        return Malformed(where, "phase",
                   absl::StrCat(std::string(PhaseName(st.phase)), " after ", std::string(PhaseName(last)),
                                " (phases must be non-decreasing in stage order)"));
      }
      last = st.phase;
    }
    RETURN_IF_ERROR(CheckEdges());
    RETURN_IF_ERROR(CheckItems());
    RETURN_IF_ERROR(CheckTrip());
    return CheckPlan();
  }

 private:
  absl::Status CheckTensors() {
    std::unordered_map<std::string, size_t> seen;
    for (size_t i = 0; i < s_.tensors.size(); ++i) {
      const Tensor& t = s_.tensors[i];
      const DiagWhere where = where_.Part(absl::StrCat("tensors[", i, "] '", t.name, "' "));
      if (t.name.empty()) return Malformed(where, "name", "empty (tensors are shared across sections by name)");
      if (auto [it, fresh] = seen.emplace(t.name, i); !fresh) {
        return Malformed(where, "name", absl::StrCat("repeats tensors[", it->second,
                                                     "] (names are unique in a section)"));
      }
      if (!Known(t.role)) return Malformed(where, "role", absl::StrCat("unknown role ", static_cast<int>(t.role)));
      if (!Known(t.precision)) {
        return Malformed(where, "precision", absl::StrCat("unknown precision ", static_cast<int>(t.precision)));
      }
      RETURN_IF_ERROR(CheckRange(where, "rows", t.rows, 1, kMaxTensorElems));
      RETURN_IF_ERROR(CheckRange(where, "cols", t.cols, 1, kMaxTensorElems));
      if (t.rows > kMaxTensorElems / t.cols) {
        return Malformed(where, "rows*cols",
                   absl::StrCat(t.rows, " x ", t.cols, " exceeds the limit of ", kMaxTensorElems, " elements"));
      }
      const int64_t elems = t.rows * t.cols;
      switch (t.init.kind) {
        case TensorInit::Kind::kValues:
          if (static_cast<int64_t>(t.init.values.size()) > elems) {
            return Malformed(where, "init.values",
                       absl::StrCat(t.init.values.size(), " values for ", elems, " elements (expected at most ",
                                    elems, ")"));
          }
          break;
        case TensorInit::Kind::kFloatValues:
          if (static_cast<int64_t>(t.init.float_values.size()) > elems) {
            return Malformed(where, "init.float_values",
                       absl::StrCat(t.init.float_values.size(), " values for ", elems,
                                    " elements (expected at most ", elems, ")"));
          }
          break;
        case TensorInit::Kind::kZero:
        case TensorInit::Kind::kConstF:
        case TensorInit::Kind::kExternal: break;
        default: return Malformed(where, "init.kind", absl::StrCat("unknown kind ", static_cast<int>(t.init.kind)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckBuffers() {
    for (size_t i = 0; i < s_.buffers.size(); ++i) {
      const Buffer& b = s_.buffers[i];
      const DiagWhere where = where_.Part(absl::StrCat("buffers[", i, "] '", b.name, "' "));
      RETURN_IF_ERROR(CheckRange(where, "depth", b.depth, 1, kMaxBufferDepth));
      RETURN_IF_ERROR(CheckRange(where, "page_tiles", b.page_tiles, 1, kMaxPageTiles));
      if (!Known(b.precision)) {
        return Malformed(where, "precision", absl::StrCat("unknown precision ", static_cast<int>(b.precision)));
      }
      if (!Known(b.kind)) return Malformed(where, "kind", absl::StrCat("unknown kind ", static_cast<int>(b.kind)));
    }
    return absl::OkStatus();
  }

  // ── Stages ──

  absl::Status CheckStage(const Stage& st, const DiagWhere& where) {
    if (!Known(st.phase)) return Malformed(where, "phase", absl::StrCat("unknown phase ", static_cast<int>(st.phase)));
    if (st.phase != Phase::kPrologue && !s_.has_fold()) {
      return Malformed(where, "phase",
                 absl::StrCat(std::string(PhaseName(st.phase)),
                              " stage in a section without a fold (num_blocks 1 and no trip): only prologue stages"));
    }
    for (size_t k = 0; k < st.ins.size(); ++k) {
      RETURN_IF_ERROR(CheckId(where, absl::StrCat("ins[", k, "]"), st.ins[k], s_.buffers.size(), "buffer"));
    }
    for (size_t k = 0; k < st.outs.size(); ++k) {
      RETURN_IF_ERROR(CheckId(where, absl::StrCat("outs[", k, "]"), st.outs[k], s_.buffers.size(), "buffer"));
    }
    RETURN_IF_ERROR(CheckLastBlocks(st, where));
    if (const auto* l = std::get_if<Load>(&st.op)) return CheckLoad(st, *l, where);
    if (const auto* w = std::get_if<Store>(&st.op)) return CheckStore(st, *w, where);
    if (const auto* g = std::get_if<Generic>(&st.op)) return CheckGeneric(st, *g, where);
    if (const auto* m = std::get_if<MatmulTiles>(&st.op)) return CheckMatmul(st, *m, where);
    return Malformed(where, "op", "no kind");
  }

  // A stage run on the last blocks only (Stage.last_blocks) is a body compute stage that rewrites in place what it
  // reads: on the blocks it skips, its buffers keep their pages, which is its meaning (RunsOnBlock, trip.h).
  absl::Status CheckLastBlocks(const Stage& st, const DiagWhere& where) {
    if (st.last_blocks == 0) return absl::OkStatus();
    RETURN_IF_ERROR(CheckRange(where, "last_blocks", st.last_blocks, 0, kMaxFoldBlocks));
    if (st.phase != Phase::kBody) {
      return Malformed(where, "last_blocks",
                       absl::StrCat("set on a ", std::string(PhaseName(st.phase)),
                                    " stage (only a body stage runs on some fold blocks and not others)"));
    }
    if (st.is_load() || st.is_store()) {
      return Malformed(where, "last_blocks",
                       "set on a Load or Store (only a compute stage that rewrites its buffers in place may skip "
                       "blocks; a transfer runs on every block)");
    }
    for (const BufferId b : st.outs) {
      if (std::find(st.ins.begin(), st.ins.end(), b) == st.ins.end()) {
        return Malformed(where, "last_blocks",
                         absl::StrCat("the stage writes buffer '", s_.buffers[b].name,
                                      "' without reading it: a stage run on the last blocks only must rewrite in "
                                      "place what it reads (on the blocks it skips, its buffers keep their pages)"));
      }
    }
    return absl::OkStatus();
  }

  // Shared by loads and stores: the block fits the page, steps use only item and block variables, the index
  // buffer of an indirect tile is the expected input.
  absl::Status CheckPattern(const Stage& st, const AccessPattern& p, const DiagWhere& where, std::string_view kind,
                            BufferId page_buffer, const std::vector<BufferId>& expected_ins) {
    const std::string f = absl::StrCat(std::string(kind), ".pattern.");
    RETURN_IF_ERROR(CheckRange(where, f + "block_h", p.block_h, 1, kMaxPageTiles));
    RETURN_IF_ERROR(CheckRange(where, f + "block_w", p.block_w, 1, kMaxPageTiles));
    const int64_t page_tiles = s_.buffers[page_buffer].page_tiles;
    if (p.block_h * p.block_w > page_tiles) {
      return Malformed(where, f + "block_h*block_w",
                 absl::StrCat(p.block_h, " x ", p.block_w, " = ", p.block_h * p.block_w,
                              " tiles do not fit a page of '",
                              s_.buffers[page_buffer].name, "' (page_tiles ", page_tiles, ")"));
    }
    for (size_t k = 0; k < p.origin.steps.size(); ++k) {
      const LoopVar v = p.origin.steps[k].first;
      const std::string field = absl::StrCat(f, "origin.steps[", k, "].var");
      if (v != LoopVar::kItemY && v != LoopVar::kItemX && v != LoopVar::kKBlock) {
        return Malformed(where, field,
                   absl::StrCat(Known(v) ? Name(v) : absl::StrCat(static_cast<int>(v)),
                                " in a tile address (expected ITEM_Y, ITEM_X or KBLOCK)"));
      }
      if (v == LoopVar::kKBlock && st.phase != Phase::kBody) {
        return Malformed(where, field,
                   absl::StrCat("KBLOCK in phase ", std::string(PhaseName(st.phase)),
                                " (the block index exists only in body-phase stages)"));
      }
    }
    if (st.ins != expected_ins) {
      std::string want = "[";
      for (size_t k = 0; k < expected_ins.size(); ++k) absl::StrAppend(&want, k ? ", " : "", expected_ins[k]);
      std::string got = "[";
      for (size_t k = 0; k < st.ins.size(); ++k) absl::StrAppend(&got, k ? ", " : "", st.ins[k]);
      return Malformed(where, "ins",
                 absl::StrCat("expected ", want, "] (", kind == "load" ? "" : "the source, then ",
                              "the index buffer only when the tile is indirect), got ", got, "]"));
    }
    if (p.origin.indirect) {
      const IndirectTile& it = *p.origin.indirect;
      RETURN_IF_ERROR(CheckId(where, f + "origin.indirect.index", it.index, s_.buffers.size(), "buffer"));
      if (it.lo > it.hi) {
        return Malformed(where, f + "origin.indirect.lo",
                   absl::StrCat("admitted range [", it.lo, ", ", it.hi, "] is empty (expected lo <= hi)"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckLoad(const Stage& st, const Load& l, const DiagWhere& where) {
    RETURN_IF_ERROR(CheckId(where, "load.tensor", l.tensor, s_.tensors.size(), "tensor"));
    if (st.outs.size() != 1) {
      return Malformed(where, "outs", absl::StrCat("a Load writes exactly 1 buffer, got ", st.outs.size()));
    }
    RETURN_IF_ERROR(CheckRange(where, "load.num_blocks", l.num_blocks, 1, kMaxFoldBlocks));
    const int64_t want_blocks = st.phase == Phase::kBody ? s_.num_blocks : 1;
    if (l.num_blocks != want_blocks) {
      return Malformed(where, "load.num_blocks",
                 absl::StrCat("expected ", want_blocks, " (",
                              st.phase == Phase::kBody ? "the section's num_blocks for a body-phase load"
                                                       : "a load outside the body runs once",
                              "), got ", l.num_blocks));
    }
    if (l.multicast != LoopVar::kUnspecified && l.multicast != LoopVar::kItemX && l.multicast != LoopVar::kItemY) {
      return Malformed(where, "load.multicast.axis",
                       absl::StrCat("ITEM_X or ITEM_Y (the item coordinate the block is the same along), got ",
                                    std::string(LoopVarName(l.multicast))));
    }
    std::vector<BufferId> expected;
    if (l.pattern.origin.indirect) expected.push_back(l.pattern.origin.indirect->index);
    return CheckPattern(st, l.pattern, where, "load", st.outs[0], expected);
  }

  absl::Status CheckStore(const Stage& st, const Store& w, const DiagWhere& where) {
    RETURN_IF_ERROR(CheckId(where, "store.tensor", w.tensor, s_.tensors.size(), "tensor"));
    if (!st.outs.empty()) {
      return Malformed(where, "outs", absl::StrCat("a Store writes no buffer, got ", st.outs.size()));
    }
    if (st.ins.empty()) return Malformed(where, "ins", "a Store reads its source buffer as ins[0], got no ins");
    std::vector<BufferId> expected{st.ins[0]};
    if (w.pattern.origin.indirect) expected.push_back(w.pattern.origin.indirect->index);
    return CheckPattern(st, w.pattern, where, "store", st.ins[0], expected);
  }

  absl::Status CheckMatmul(const Stage& st, const MatmulTiles& m, const DiagWhere& where) {
    if (st.ins.size() != 2) return Malformed(where, "ins", absl::StrCat("expected 2 (A, B), got ", st.ins.size()));
    if (st.outs.size() != 1) return Malformed(where, "outs", absl::StrCat("expected 1 (C), got ", st.outs.size()));
    RETURN_IF_ERROR(CheckRange(where, "matmul.m_tiles", m.m_tiles, 1, kMaxMatmulTiles));
    RETURN_IF_ERROR(CheckRange(where, "matmul.n_tiles", m.n_tiles, 1, kMaxMatmulTiles));
    RETURN_IF_ERROR(CheckRange(where, "matmul.k_tiles", m.k_tiles, 1, kMaxMatmulTiles));
    RETURN_IF_ERROR(CheckRange(where, "matmul.fidelity", static_cast<int64_t>(m.fidelity), 0,
                               static_cast<int64_t>(MathFidelity::kHiFi4)));
    const struct {
      const char* role;
      BufferId buf;
      int64_t need;
      const char* shape;
    } pages[] = {{"A (ins[0])", st.ins[0], m.m_tiles * m.k_tiles, "m_tiles*k_tiles"},
                 {"B (ins[1])", st.ins[1], m.k_tiles * m.n_tiles, "k_tiles*n_tiles"},
                 {"C (outs[0])", st.outs[0], m.m_tiles * m.n_tiles, "m_tiles*n_tiles"}};
    for (const auto& p : pages) {
      const Buffer& b = s_.buffers[p.buf];
      if (b.page_tiles < p.need) {
        return Malformed(where, absl::StrCat("matmul ", p.role, " page_tiles"),
                   absl::StrCat("buffer '", b.name, "' has ", b.page_tiles, " tiles per page, expected at least ",
                                p.need, " (", p.shape, ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckMap(const ElemAccess& m, const DiagWhere& where, const std::string& field,
                        const std::unordered_map<LoopVar, IterKind>& axes, size_t num_ins, bool is_out) {
    for (size_t k = 0; k < m.terms.size(); ++k) {
      const LoopVar v = m.terms[k].first;
      const std::string f = absl::StrCat(field, ".terms[", k, "].var");
      if (!IsGenericAxis(v)) {
        return Malformed(where, f,
                   absl::StrCat(Known(v) ? Name(v) : absl::StrCat(static_cast<int>(v)),
                                " in an element map (expected ROW, COL or K: a Generic cannot see the item or block)"));
      }
      auto it = axes.find(v);
      if (it == axes.end()) return Malformed(where, f, absl::StrCat(Name(v), " is not an axis of the iteration space"));
      if (is_out && IsReduce(it->second)) {
        return Malformed(where, f, absl::StrCat(Name(v), " is a Reduce axis (the out map must not mention it)"));
      }
    }
    if (m.indirect) {
      RETURN_IF_ERROR(CheckId(where, field + ".indirect.operand", m.indirect->operand, num_ins, "input slot"));
      if (m.indirect->modulus < 1) {
        return Malformed(where, field + ".indirect.modulus",
                   absl::StrCat("expected at least 1 (0 <= v < modulus), got ", m.indirect->modulus));
      }
    }
    return absl::OkStatus();
  }

  // Walks each node once (bodies share subtrees), checking what the evaluator relies on, and computes the
  // number of input slots the body reads (what BodySlotCount computes, without its exponential walk of DAGs).
  absl::Status CheckBody(const Body& root, const DiagWhere& where, size_t num_ins) {
    if (!root.defined()) return Malformed(where, "generic.body", "undefined (a Generic needs a body)");
    std::unordered_set<const BodyNode*> seen;
    std::vector<const BodyNode*> todo{root.get()};
    int64_t slots = 0;
    while (!todo.empty()) {
      const BodyNode* n = todo.back();
      todo.pop_back();
      if (!seen.insert(n).second) continue;
      auto need = [&](const Body& c, const char* which) -> absl::Status {
        if (!c.defined()) {
          return Malformed(where, "generic.body",
                     absl::StrCat(BodyOpName(n->op), " node has no operand '", which, "'"));
        }
        todo.push_back(c.get());
        return absl::OkStatus();
      };
      switch (n->op) {
        case BodyOp::kOperand:
          if (n->operand < 0) return Malformed(where, "generic.body", absl::StrCat("operand x", n->operand,
                                                                                   " is negative"));
          slots = std::max<int64_t>(slots, int64_t{n->operand} + 1);
          break;
        case BodyOp::kConst:
          // ±inf are masks and seeds (an argmax's, a running maximum's); a NaN constant only poisons what reads it,
          // and the VM (NaN) and the machine (whose packer turns NaN into inf) then disagree on every value.
          if (std::isnan(n->value)) return Malformed(where, "generic.body", "a NaN constant");
          break;
        case BodyOp::kShr:
          if (n->shift < 0 || n->shift > 63) {
            return Malformed(where, "generic.body", absl::StrCat("shr by ", n->shift, " (expected 0..63)"));
          }
          RETURN_IF_ERROR(need(n->a, "a"));
          break;
        case BodyOp::kUnary:
          if (!IsKnownSfpuOp(n->sfpu.op)) {
            return Malformed(where, "generic.body",
                       absl::StrCat("unary of unknown sfpu kind ", static_cast<int>(n->sfpu.op)));
          }
          if (n->sfpu.op == SfpuOp::kRsqrt && (n->sfpu.over < 1 || n->sfpu.eps_nano < 0)) {
            return Malformed(where, "generic.body",
                       absl::StrCat(SfpuName(n->sfpu), " (expected over >= 1 and eps_nano >= 0)"));
          }
          RETURN_IF_ERROR(need(n->a, "a"));
          break;
        case BodyOp::kSelect:
          if (n->pred.kind != PredKind::kAxisLt && n->pred.kind != PredKind::kAxisGe) {
            return Malformed(where, "generic.body",
                       absl::StrCat("select with unknown predicate kind ", static_cast<int>(n->pred.kind)));
          }
          if (!IsGenericAxis(n->pred.var)) {
            return Malformed(where, "generic.body",
                       absl::StrCat("select on ", Known(n->pred.var) ? Name(n->pred.var) : "an unknown variable",
                                    " (expected ROW, COL or K)"));
          }
          if (n->pred.rhs_is_operand) {
            if (n->pred.rhs < 0 || n->pred.rhs >= static_cast<int64_t>(num_ins)) {
              return Malformed(where, "generic.body",
                         absl::StrCat("select compares against input slot x", n->pred.rhs, " but the stage has ",
                                      num_ins, " ins"));
            }
            slots = std::max<int64_t>(slots, n->pred.rhs + 1);
          }
          RETURN_IF_ERROR(need(n->b, "b (then)"));
          RETURN_IF_ERROR(need(n->c, "c (else)"));
          break;
        case BodyOp::kAdd:
        case BodyOp::kSub:
        case BodyOp::kMul:
        case BodyOp::kMin:
        case BodyOp::kMax:
        case BodyOp::kFloorDiv:
          RETURN_IF_ERROR(need(n->a, "a"));
          RETURN_IF_ERROR(need(n->b, "b"));
          break;
        default: return Malformed(where, "generic.body", absl::StrCat("unknown op ", static_cast<int>(n->op)));
      }
    }
    if (slots > static_cast<int64_t>(num_ins)) {
      return Malformed(where, "generic.body",
                 absl::StrCat("reads ", slots, " input slots (BodySlotCount) but the stage has ", num_ins, " ins"));
    }
    // The depth every reader admits (spatial/limits.h), so a body built in C++ is held to the limit a body read
    // from the wire is: what validates certifies, and what certifies runs.
    const int64_t depth = BodyDepth(root.get());
    if (depth > kMaxBodyDepth) {
      return Malformed(where, "generic.body",
                 absl::StrCat("depth ", depth, " exceeds the limit of ", kMaxBodyDepth, " (spatial/limits.h)"));
    }
    return absl::OkStatus();
  }

  // The longest root-to-leaf path, each shared node once, iteratively (a hostile body must not overflow the
  // stack); every child was checked defined by CheckBody's walk.
  static int64_t BodyDepth(const BodyNode* root) {
    std::unordered_map<const BodyNode*, int64_t> depth;
    std::vector<std::pair<const BodyNode*, bool>> todo{{root, false}};
    auto children = [](const BodyNode* n) {
      std::vector<const BodyNode*> out;
      for (const Body* c : {&n->a, &n->b, &n->c}) {
        if (c->defined()) out.push_back(c->get());
      }
      return out;
    };
    while (!todo.empty()) {
      auto [n, expanded] = todo.back();
      todo.pop_back();
      if (depth.count(n)) continue;
      if (!expanded) {
        todo.push_back({n, true});
        for (const BodyNode* k : children(n)) {
          if (!depth.count(k)) todo.push_back({k, false});
        }
        continue;
      }
      int64_t d = 0;
      for (const BodyNode* k : children(n)) d = std::max(d, depth[k]);
      depth[n] = d + 1;
    }
    return depth[root];
  }

  static std::string BodyOpName(BodyOp op) {
    switch (op) {
      case BodyOp::kAdd: return "Add";
      case BodyOp::kSub: return "Sub";
      case BodyOp::kMul: return "Mul";
      case BodyOp::kMin: return "Min";
      case BodyOp::kMax: return "Max";
      case BodyOp::kFloorDiv: return "FloorDiv";
      case BodyOp::kShr: return "Shr";
      case BodyOp::kUnary: return "Unary";
      case BodyOp::kSelect: return "Select";
      default: return absl::StrCat("op ", static_cast<int>(op));
    }
  }

  absl::Status CheckGeneric(const Stage& st, const Generic& g, const DiagWhere& where) {
    if (st.outs.size() != 1) return Malformed(where, "outs", absl::StrCat("a Generic writes 1 buffer, got ",
                                                                          st.outs.size()));
    if (st.ins.size() != g.ins.size()) {
      return Malformed(where, "generic.ins",
                 absl::StrCat(g.ins.size(), " maps for ", st.ins.size(),
                              " input buffers (expected one map per input)"));
    }
    if (g.iters.empty()) return Malformed(where, "generic.iters", "empty (a Generic iterates at least one axis)");
    std::unordered_map<LoopVar, IterKind> axes;
    int64_t points = 1;
    for (size_t k = 0; k < g.iters.size(); ++k) {
      const IterSpec& it = g.iters[k];
      const std::string f = absl::StrCat("generic.iters[", k, "]");
      if (!IsGenericAxis(it.var)) {
        return Malformed(where, f + ".var",
                   absl::StrCat(Known(it.var) ? Name(it.var) : absl::StrCat(static_cast<int>(it.var)),
                                " (expected ROW, COL or K)"));
      }
      if (!Known(it.kind)) return Malformed(where, f + ".kind", absl::StrCat("unknown kind ",
                                                                             static_cast<int>(it.kind)));
      if (!axes.emplace(it.var, it.kind).second) {
        return Malformed(where, f + ".var", absl::StrCat(Name(it.var), " appears twice (each axis at most once)"));
      }
      RETURN_IF_ERROR(CheckRange(where, f + ".extent", it.extent, 1, kMaxGenericPoints));
      if (points > kMaxGenericPoints / it.extent) {
        return Malformed(where, "generic.iters",
                   absl::StrCat("the product of the extents exceeds the limit of ", kMaxGenericPoints, " points"));
      }
      points *= it.extent;
    }
    for (size_t k = 0; k < g.ins.size(); ++k) {
      RETURN_IF_ERROR(CheckMap(g.ins[k], where, absl::StrCat("generic.ins[", k, "]"), axes, g.ins.size(), false));
    }
    RETURN_IF_ERROR(CheckMap(g.out, where, "generic.out", axes, g.ins.size(), true));
    // An indirect value is read through its slot's own map; a cycle of such reads has no value.
    for (size_t k = 0; k < g.ins.size(); ++k) {
      size_t at = k;
      for (size_t hops = 0; g.ins[at].indirect; ++hops) {
        at = static_cast<size_t>(g.ins[at].indirect->operand);
        if (hops >= g.ins.size() || at == k) {
          return Malformed(where, absl::StrCat("generic.ins[", k, "].indirect.operand"),
                     "the indirect reads form a cycle (a slot's index is read through its own map)");
        }
      }
    }
    return CheckBody(g.body, where, g.ins.size());
  }

  // ── Edges, items, fold ──

  absl::Status CheckEdges() {
    for (size_t i = 0; i < s_.edges.size(); ++i) {
      const Edge& e = s_.edges[i];
      const DiagWhere where = where_.Part(absl::StrCat("edges[", i, "] "));
      RETURN_IF_ERROR(CheckId(where, "from", e.from, s_.stages.size(), "stage"));
      RETURN_IF_ERROR(CheckId(where, "buffer", e.buffer, s_.buffers.size(), "buffer"));
      RETURN_IF_ERROR(CheckId(where, "to", e.to, s_.stages.size(), "stage"));
      const Stage& from = s_.stages[e.from];
      const Stage& to = s_.stages[e.to];
      if (std::find(from.outs.begin(), from.outs.end(), e.buffer) == from.outs.end()) {
        return Malformed(where, "from",
                   absl::StrCat("stage '", from.name, "' (#", e.from, ") does not write buffer '",
                                s_.buffers[e.buffer].name, "'"));
      }
      if (std::find(to.ins.begin(), to.ins.end(), e.buffer) == to.ins.end()) {
        return Malformed(where, "to",
                   absl::StrCat("stage '", to.name, "' (#", e.to, ") does not read buffer '",
                                s_.buffers[e.buffer].name, "'"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckItems() {
    if (s_.items.empty()) return Malformed(where_, "items", "empty (a section runs once per item; give at least one)");
    if (static_cast<int64_t>(s_.items.size()) > kMaxWorkItems) {
      return Malformed(where_, "items", absl::StrCat(s_.items.size(), " items exceed the limit of ", kMaxWorkItems));
    }
    for (size_t i = 0; i < s_.items.size(); ++i) {
      const WorkItem& w = s_.items[i];
      const DiagWhere where = where_.Part(absl::StrCat("items[", i, "] "));
      RETURN_IF_ERROR(CheckRange(where, "out.row0_t", w.out.row0_t, 0, kMaxTensorElems));
      RETURN_IF_ERROR(CheckRange(where, "out.col0_t", w.out.col0_t, 0, kMaxTensorElems));
      RETURN_IF_ERROR(CheckRange(where, "out.h_t", w.out.h_t, 1, kMaxTensorElems));
      RETURN_IF_ERROR(CheckRange(where, "out.w_t", w.out.w_t, 1, kMaxTensorElems));
      // An item folds at most the section's blocks: the loads are proven for those only.
      const int64_t most = std::max<int64_t>(0, s_.num_blocks);
      if (w.blocks != -1 && (w.blocks < 0 || w.blocks > most)) {
        return Malformed(where, "blocks",
                         absl::StrCat("expected 0..", most, " (at most the section's num_blocks; -1 or unset: all of "
                                      "them), got ", w.blocks));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckTrip() {
    if (!s_.trip) return absl::OkStatus();
    const Trip& t = *s_.trip;
    const DiagWhere where = where_.Part("trip ");
    RETURN_IF_ERROR(CheckId(where, "tensor", t.tensor, s_.tensors.size(), "tensor"));
    const Tensor& tensor = s_.tensors[t.tensor];
    if (!IsInteger(tensor.precision)) {
      return Malformed(where, "tensor",
                 absl::StrCat("'", tensor.name, "' is ", std::string(PrecisionName(tensor.precision)),
                              " (a trip count is read from an integer tensor)"));
    }
    RETURN_IF_ERROR(CheckRange(where, "elem", t.elem, 0, tensor.rows * tensor.cols - 1));
    if (t.per < 1) return Malformed(where, "per", absl::StrCat("expected at least 1, got ", t.per));
    if (t.lo > t.hi) {
      return Malformed(where, "lo", absl::StrCat("admitted range [", t.lo, ", ", t.hi,
                                                 "] is empty (expected lo <= hi)"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPlan() {
    if (!s_.plan) return absl::OkStatus();
    const BlockPlan& p = *s_.plan;
    const DiagWhere where = where_.Part("plan ");
    const std::pair<const char*, int64_t> fields[] = {
        {"per_site_m", p.per_site_m}, {"per_site_n", p.per_site_n}, {"grid_y", p.grid_y},
        {"grid_x", p.grid_x},         {"num_blocks", p.num_blocks}, {"block_k_tiles", p.block_k_tiles},
        {"osh", p.osh},               {"osw", p.osw},               {"ibw", p.ibw}};
    // A hint, never a change of meaning: only negative values are malformed.
    for (const auto& [name, v] : fields) RETURN_IF_ERROR(CheckRange(where, name, v, 0, kMaxTensorElems));
    return absl::OkStatus();
  }

  const Section& s_;
  DiagWhere where_;
};

}  // namespace

absl::Status ValidateClaim(const NumericsClaim& claim, const DiagWhere& where) {
  const double growth = claim.error_growth;
  if (!(growth == 0 || (std::isfinite(growth) && growth >= 1 && !claim.exact))) {
    return Malformed(where, "claim.error_growth",
                     absl::StrCat(growth, claim.exact ? " on an exact claim" : " (must be >= 1, or 0: none)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSection(const Section& s, int64_t tile_rows, int64_t tile_cols) {
  RETURN_IF_ERROR(CheckRange(DiagWhere{}, "tile_rows", tile_rows, 1, kMaxTileSide));
  RETURN_IF_ERROR(CheckRange(DiagWhere{}, "tile_cols", tile_cols, 1, kMaxTileSide));
  return SectionChecker(s).Check();
}

absl::Status ValidateComposition(const Composition& c, int64_t tile_rows, int64_t tile_cols) {
  const DiagWhere where = DiagWhere::Composition(c.name);
  RETURN_IF_ERROR(CheckRange(where, "tile_rows", tile_rows, 1, kMaxTileSide));
  RETURN_IF_ERROR(CheckRange(where, "tile_cols", tile_cols, 1, kMaxTileSide));
  if (c.sections.empty()) return Malformed(where, "sections", "empty (a composition has at least one section)");
  for (const Section& s : c.sections) RETURN_IF_ERROR(SectionChecker(s).Check());

  // Sections share tensors by name, so a name must mean one shape and precision everywhere.
  struct First {
    size_t section;
    const Tensor* tensor;
  };
  std::unordered_map<std::string, First> first;
  for (size_t si = 0; si < c.sections.size(); ++si) {
    for (const Tensor& t : c.sections[si].tensors) {
      auto [it, fresh] = first.emplace(t.name, First{si, &t});
      if (fresh) continue;
      const Tensor& f = *it->second.tensor;
      if (f.rows != t.rows || f.cols != t.cols || f.precision != t.precision) {
        const DiagWhere tw =
            where.Section(c.sections[si].name, static_cast<int>(si)).Part(absl::StrCat("tensor '", t.name, "' "));
        return Malformed(tw, "rows x cols x precision",
                   absl::StrCat(t.rows, " x ", t.cols, " x ", std::string(PrecisionName(t.precision)),
                                ", but section '", c.sections[it->second.section].name, "' (#", it->second.section,
                                ") declares it ", f.rows, " x ", f.cols, " x ",
                                std::string(PrecisionName(f.precision))));
      }
    }
  }

  for (size_t i = 0; i < c.state_order.size(); ++i) {
    const StateStep& st = c.state_order[i];
    const DiagWhere sw = where.Part(absl::StrCat("state_order[", i, "] "));
    if (!Known(st.access)) return Malformed(sw, "access", absl::StrCat("unknown access ", static_cast<int>(st.access)));
    if (st.section < 0 || st.section >= static_cast<int>(c.sections.size())) {
      return Malformed(sw, "section",
                 absl::StrCat(st.section, " out of range (expected 0..", c.sections.size() - 1, ")"));
    }
    const Section& s = c.sections[st.section];
    const int t = s.FindTensor(st.tensor);
    if (t < 0) {
      return Malformed(sw, "tensor", absl::StrCat("'", st.tensor, "' is not a tensor of section '", s.name, "'"));
    }
    if (s.tensors[t].role != TensorRole::kState) {
      return Malformed(sw, "tensor",
                 absl::StrCat("'", st.tensor, "' is ", std::string(TensorRoleName(s.tensors[t].role)),
                              " in section '", s.name, "' (expected State)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateComposition(const Composition& c) { return ValidateComposition(c, c.tile_rows, c.tile_cols); }

}  // namespace spatial
