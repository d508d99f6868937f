#include "lowerings/graph.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/attention/relayout_rows.h"
#include "lowerings/registry.h"
#include "lowerings/toolkit/common.h"  // IsRefusal
#include "passes/handles.h"
#include "spatial/status_macros.h"
#include "spatial/validate.h"

namespace spatial {

namespace {

struct Layout {
  int64_t rows = 0, cols = 0;
  Precision precision = Precision::kBf16;
};

// `st` about op `label`: "op 'label': ..." -- after the refusal's kind when it is one, so that a composition an op
// cannot be mapped into stays a refusal (IsRefusal: "NotLowered: op 'q_norm': ...").
absl::Status AboutOp(const absl::Status& st, const std::string& label) {
  absl::string_view msg = st.message();
  std::string kind;
  if (IsRefusal(st)) {
    const size_t colon = msg.find(": ");
    kind = std::string(msg.substr(0, colon + 2));
    msg.remove_prefix(colon + 2);
  }
  return absl::Status(st.code(), absl::StrCat(kind, "op '", label, "': ", msg));
}

// The layout the first section of `c` that declares `name` gives it.
std::optional<Layout> Declared(const Composition& c, const std::string& name) {
  for (const Section& s : c.sections) {
    const int i = s.FindTensor(name);
    if (i >= 0) return Layout{s.tensors[i].rows, s.tensors[i].cols, s.tensors[i].precision};
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<LoweredGraph> LowerGraph(const std::string& name, const std::vector<GraphOp>& ops,
                                        const std::set<std::string>* given, const Target& target) {
  LoweredGraph out;
  std::vector<Composition> parts;
  std::map<std::string, Layout> layout;  // each name's layout as its producer, or a given name's first reader, has it
  std::map<std::string, Tensor> declared;  // each name's first declaration in the composition
  int first = 0;
  auto append = [&](Composition c, const std::string& label, const std::string& kind, const std::string& result) {
    // ★ AN OP'S EMBEDDED CONSTANTS ARE ITS OWN. A lowering names its compile-time tables after its stages
    // ("rope__columns"), so two ops of one kind can declare one name with different values; in one program a name
    // is one tensor, and the second op would read the first's table. Such a table is renamed, in every section of
    // its op, after the op ("{label}__{name}"). Run inputs and results keep their names: they are the handles.
    // This is the graph's rule, not ComposeSections': a graph's ops meet only through named run inputs (weights
    // are External) and results, while other compositions share an embedded Param between parts on purpose (the
    // causal conv's prefill and decode parts read one embedded weight in two views, carried_conv_test).
    std::map<std::string, std::string> renamed;
    for (const Section& s : c.sections) {
      for (const Tensor& t : s.tensors) {
        if (t.role != TensorRole::kParam || t.init.kind == TensorInit::Kind::kExternal) continue;
        auto it = declared.find(t.name);
        if (it != declared.end() && !(it->second == t)) renamed[t.name] = absl::StrCat(label, "__", t.name);
      }
    }
    for (Section& s : c.sections) {
      for (Tensor& t : s.tensors) {
        auto it = renamed.find(t.name);
        if (it != renamed.end()) t.name = it->second;
      }
    }
    for (const Section& s : c.sections) {
      for (const Tensor& t : s.tensors) declared.emplace(t.name, t);
    }
    const int n = static_cast<int>(c.sections.size());
    out.parts.push_back({label, kind, result, first, first + n});
    first += n;
    for (const Section& s : c.sections) {
      for (const Tensor& t : s.tensors) {
        if (t.role == TensorRole::kOutput || t.role == TensorRole::kState || !layout.count(t.name)) {
          layout[t.name] = Layout{t.rows, t.cols, t.precision};
        }
      }
    }
    parts.push_back(std::move(c));
  };
  for (const GraphOp& op : ops) {
    auto lower = [&](const proto::OpSpec& spec) -> absl::StatusOr<Composition> {
      absl::StatusOr<Composition> c = Lower(spec, target);
      if (!c.ok()) return AboutOp(c.status(), op.label);
      return c;
    };
    proto::OpSpec spec = op.spec;
    ASSIGN_OR_RETURN(Composition c, lower(spec));
    bool moved = false;
    for (int i = 0; i < spec.operands_size(); ++i) {
      const std::string name = spec.operands(i).name();
      const std::optional<Layout> want = Declared(c, name);
      auto have = layout.find(name);
      if (!want || have == layout.end()) continue;
      const Layout& h = have->second;
      if (want->rows == h.rows && want->cols == h.cols) continue;
      // Only the flat and the matrix form of the same values are moved; any other difference is CheckHandles'.
      if (want->rows * want->cols != h.rows * h.cols || (want->rows > 1 && h.rows > 1)) continue;
      const bool to_rows = want->rows == 1;
      const std::string moved_name = absl::StrCat(name, to_rows ? "__rows" : "__matrix");
      if (!layout.count(moved_name)) {
        absl::StatusOr<Composition> r =
            to_rows ? RelayoutDenseToRows({name, {}}, moved_name, h.rows, h.cols, h.precision, target)
                    : RelayoutRowsToDense({name, {}}, moved_name, want->rows, want->cols, h.precision, target);
        if (!r.ok()) {
          return AboutOp(r.status(), absl::StrCat(op.label, "' reading '", name, to_rows ? "' as flat rows"
                                                                                          : "' as a matrix"));
        }
        append(*std::move(r), absl::StrCat(name, to_rows ? " to rows" : " to matrix"), "relayout", moved_name);
      }
      spec.mutable_operands(i)->set_name(moved_name);
      moved = true;
    }
    if (moved) {
      ASSIGN_OR_RETURN(c, lower(spec));
    }
    append(std::move(c), op.label, OpKindName(spec), spec.out());
  }
  out.program = ComposeSections(name, std::move(parts), target);
  // ★ THE OPS MEET THROUGH TYPED HANDLES: every name an op reads is produced by an earlier op or given to the run,
  // and holds one shape and precision in every section.
  if (absl::Status st = CheckHandles(out.program, given); !st.ok()) {
    return absl::InternalError(absl::StrCat("composition '", name, "': ", st.message()));
  }
  if (absl::Status st = ValidateComposition(out.program, target.tile_rows(), target.tile_cols()); !st.ok()) {
    return absl::InternalError(absl::StrCat("composition '", name, "': ", st.message()));
  }
  return out;
}


absl::StatusOr<std::vector<GraphOp>> GraphOps(const proto::OpGraph& graph) {
  if (graph.ops_size() == 0) return absl::InvalidArgumentError("the graph has no ops");
  std::vector<GraphOp> ops;
  std::set<std::string> produced;
  for (int i = 0; i < graph.ops_size(); ++i) {
    const proto::OpSpec& spec = graph.ops(i);
    if (spec.out().empty()) return absl::InvalidArgumentError(absl::StrCat("graph op ", i, " has no result name (out)"));
    if (!produced.insert(spec.out()).second) {
      return absl::InvalidArgumentError(absl::StrCat("graph op ", i, " produces '", spec.out(),
                                                     "', which an earlier op produces"));
    }
    ops.push_back({spec.out(), spec});
  }
  return ops;
}

}  // namespace spatial
