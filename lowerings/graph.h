// Ops composed into one program: each op lowered by Lower (registry.h), the sections joined in order, the ops
// meeting through their named results (a layer's ops, models/layer.h; an OpGraph of `spatial lower --graph`, such as
// an attention composed from a matmul, a softmax and a matmul for the online-softmax pass to recognize).
//
// ★ LAYOUTS MEET WHERE THE OPS DO. A lowering declares each tensor it reads in the layout its form needs: a T x n
// matrix (a matmul, the streamed norm, the attention's query rows) or the flat 1 x T*n (a row softmax, the per-head
// norms, RoPE). Where an op reads a name in the other layout from the one its producer (or, for a name given to the
// run, its first reader) declared, LowerGraph moves it between the two (lowerings/attention/relayout_rows.h) into
// "{name}__rows" or "{name}__matrix" and lowers the op again reading that.
#ifndef LOWERINGS_GRAPH_H_
#define LOWERINGS_GRAPH_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

struct GraphOp {
  std::string label;  // "q_proj", "attention", ...; an OpGraph's op is labelled by its result
  proto::OpSpec spec;
};

// A part of the lowered graph: one op, or a relayout LowerGraph put between two of them.
struct LoweredPart {
  std::string label;  // the op's label, or "{tensor} to rows" / "{tensor} to matrix"
  std::string kind;   // the op's kind (OpKindName), or "relayout"
  std::string out;    // the tensor it produces
  int first = 0;      // its sections, [first, end) in program.sections
  int end = 0;
};

struct LoweredGraph {
  Composition program;
  std::vector<LoweredPart> parts;  // in program order; the ops among them in op order
};

// Each op of `ops` lowered for `target`, the sections joined in order into the composition `name`. `given`: the names
// the run is given (weights, caches, the token's rows); nullptr: every name an op reads before an op produces it.
// A refusal stays one and names the op ("NotLowered: op 'attention': ..."); a name read but neither produced
// before nor given, or held in two shapes, is InternalError (passes/handles.h).
//
// ★ AN OP'S EMBEDDED CONSTANTS ARE ITS OWN: a table an op embeds under a name another op already declared with other
// values is renamed, in every section of its op, "{label}__{name}".
absl::StatusOr<LoweredGraph> LowerGraph(const std::string& name, const std::vector<GraphOp>& ops,
                                        const std::set<std::string>* given, const Target& target);

// An OpGraph's ops, each labelled by its result. InvalidArgument when the graph has no ops, an op has no result
// name, or two ops produce one name.
absl::StatusOr<std::vector<GraphOp>> GraphOps(const proto::OpGraph& graph);

}  // namespace spatial

#endif  // LOWERINGS_GRAPH_H_
