#include "spatial/body.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace spatial {
namespace {

Body Make(BodyNode n) { return Body(std::make_shared<BodyNode>(std::move(n))); }

Body Binary(BodyOp op, Body a, Body b) {
  BodyNode n;
  n.op = op;
  n.a = std::move(a);
  n.b = std::move(b);
  return Make(std::move(n));
}

}  // namespace

std::string_view LoopVarName(LoopVar v) {
  switch (v) {
    case LoopVar::kRow: return "ROW";
    case LoopVar::kCol: return "COL";
    case LoopVar::kK: return "K";
    case LoopVar::kItemY: return "ITEM_Y";
    case LoopVar::kItemX: return "ITEM_X";
    case LoopVar::kKBlock: return "KBLOCK";
    case LoopVar::kUnspecified: break;
  }
  return "UNSPECIFIED";
}

bool IsKnownSfpuOp(SfpuOp op) {
  switch (op) {
#define SPATIAL_X(e, v, name, wire) case SfpuOp::e:
    SPATIAL_SFPU_OPS(SPATIAL_X)
#undef SPATIAL_X
    return true;
    case SfpuOp::kUnspecified: break;
  }
  return false;
}

std::string SfpuName(const SfpuKind& k) {
  if (k.op == SfpuOp::kRsqrt) return absl::StrCat("rsqrt{eps_nano=", k.eps_nano, ",over=", k.over, "}");
  switch (k.op) {
#define SPATIAL_X(e, v, name, wire) \
  case SfpuOp::e: return name;
    SPATIAL_SFPU_OPS(SPATIAL_X)
#undef SPATIAL_X
    case SfpuOp::kUnspecified: break;
  }
  return "unspecified";
}

bool IsKnownBodyOp(BodyOp op) { return BodyOpName(op) != "?"; }

std::string_view BodyOpName(BodyOp op) {
  switch (op) {
#define SPATIAL_X(e, v, name, wire, children) \
  case BodyOp::e: return name;
    SPATIAL_BODY_OPS(SPATIAL_X)
#undef SPATIAL_X
  }
  return "?";
}

int BodyOpChildren(BodyOp op) {
  switch (op) {
#define SPATIAL_X(e, v, name, wire, children) \
  case BodyOp::e: return children;
    SPATIAL_BODY_OPS(SPATIAL_X)
#undef SPATIAL_X
  }
  return 0;
}

namespace {

// The children a node uses, in order (nullptr-free).
int Children(const BodyNode& n, const Body* out[3]) {
  int k = 0;
  if (n.op == BodyOp::kSelect) {
    if (n.b.defined()) out[k++] = &n.b;
    if (n.c.defined()) out[k++] = &n.c;
    return k;
  }
  if (BodyOpChildren(n.op) >= 1 && n.a.defined()) out[k++] = &n.a;
  if (BodyOpChildren(n.op) >= 2 && n.b.defined()) out[k++] = &n.b;
  return k;
}

}  // namespace

void VisitBody(const Body& root, const std::function<bool(const BodyNode&)>& f) {
  if (!root.defined()) return;
  std::unordered_set<const BodyNode*> done;
  // (node, whether its children have been pushed)
  std::vector<std::pair<const BodyNode*, bool>> stack{{root.get(), false}};
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    if (expanded) {
      stack.pop_back();
      if (done.insert(n).second && !f(*n)) return;
      continue;
    }
    stack.back().second = true;
    if (done.count(n)) continue;
    const Body* kids[3];
    const int k = Children(*n, kids);
    for (int i = k - 1; i >= 0; --i) {
      if (!done.count(kids[i]->get())) stack.push_back({kids[i]->get(), false});
    }
  }
}

Body RewriteBody(const Body& root, const std::function<Body(const BodyNode& node, Body a, Body b, Body c)>& f) {
  if (!root.defined()) return root;
  std::unordered_map<const BodyNode*, Body> out;
  auto get = [&out](const Body& x) { return x.defined() ? out.at(x.get()) : Body(); };
  VisitBody(root, [&](const BodyNode& n) {
    Body a, b, c;
    if (n.op == BodyOp::kSelect) {
      b = get(n.b);
      c = get(n.c);
    } else {
      if (BodyOpChildren(n.op) >= 1) a = get(n.a);
      if (BodyOpChildren(n.op) >= 2) b = get(n.b);
    }
    out.emplace(&n, f(n, std::move(a), std::move(b), std::move(c)));
    return true;
  });
  return out.at(root.get());
}

Body Op(int slot) {
  BodyNode n;
  n.op = BodyOp::kOperand;
  n.operand = slot;
  return Make(std::move(n));
}

Body Const(double v) {
  BodyNode n;
  n.op = BodyOp::kConst;
  n.value = v;
  return Make(std::move(n));
}

Body Add(Body a, Body b) { return Binary(BodyOp::kAdd, std::move(a), std::move(b)); }
Body Sub(Body a, Body b) { return Binary(BodyOp::kSub, std::move(a), std::move(b)); }
Body Mul(Body a, Body b) { return Binary(BodyOp::kMul, std::move(a), std::move(b)); }
Body Min(Body a, Body b) { return Binary(BodyOp::kMin, std::move(a), std::move(b)); }
Body Max(Body a, Body b) { return Binary(BodyOp::kMax, std::move(a), std::move(b)); }
Body FloorDiv(Body a, Body b) { return Binary(BodyOp::kFloorDiv, std::move(a), std::move(b)); }

Body Shr(Body a, int64_t by) {
  BodyNode n;
  n.op = BodyOp::kShr;
  n.a = std::move(a);
  n.shift = by;
  return Make(std::move(n));
}

Body Unary(SfpuKind k, Body a) {
  BodyNode n;
  n.op = BodyOp::kUnary;
  n.sfpu = k;
  n.a = std::move(a);
  return Make(std::move(n));
}

Body Select(Pred p, Body then, Body otherwise) {
  BodyNode n;
  n.op = BodyOp::kSelect;
  n.pred = p;
  n.b = std::move(then);
  n.c = std::move(otherwise);
  return Make(std::move(n));
}

Body Banded(const std::vector<std::pair<int64_t, Body>>& bands) {
  // Folded from the back: the last band is the fall-through.
  Body acc = bands.back().second;
  for (size_t i = bands.size() - 1; i-- > 0;) {
    acc = Select(Pred::Lt(LoopVar::kCol, bands[i].first), bands[i].second, acc);
  }
  return acc;
}

bool BodyEqual(const Body& x, const Body& y) {
  if (x.get() == y.get()) return true;
  if (!x.defined() || !y.defined()) return false;
  const BodyNode& a = *x;
  const BodyNode& b = *y;
  if (a.op != b.op) return false;
  switch (a.op) {
    case BodyOp::kOperand: return a.operand == b.operand;
    case BodyOp::kConst:
      // Bit equality: 0.0 and -0.0 differ, and NaN equals itself.
      return std::signbit(a.value) == std::signbit(b.value) &&
             (a.value == b.value || (std::isnan(a.value) && std::isnan(b.value)));
    case BodyOp::kShr: return a.shift == b.shift && BodyEqual(a.a, b.a);
    case BodyOp::kUnary: return a.sfpu == b.sfpu && BodyEqual(a.a, b.a);
    case BodyOp::kSelect: return a.pred == b.pred && BodyEqual(a.b, b.b) && BodyEqual(a.c, b.c);
    default: return BodyEqual(a.a, b.a) && BodyEqual(a.b, b.b);
  }
}

bool BodyIntegral(const Body& body) {
  bool integral = true;
  VisitBody(body, [&integral](const BodyNode& n) {
    if (n.op == BodyOp::kUnary) integral = false;
    if (n.op == BodyOp::kConst) integral = std::isfinite(n.value) && n.value == std::trunc(n.value);
    return integral;
  });
  return integral;
}

int BodySlotCount(const Body& body) {
  int k = 0;
  VisitBody(body, [&k](const BodyNode& n) {
    if (n.op == BodyOp::kOperand) k = std::max(k, n.operand + 1);
    if (n.op == BodyOp::kSelect && n.pred.rhs_is_operand) k = std::max<int>(k, static_cast<int>(n.pred.rhs) + 1);
    return true;
  });
  return k;
}

std::string BodyToString(const Body& body) {
  const BodyNode& n = *body;
  auto bin = [&](std::string_view op) {
    return absl::StrCat("(", BodyToString(n.a), " ", std::string(op), " ", BodyToString(n.b), ")");
  };
  switch (n.op) {
    case BodyOp::kOperand: return absl::StrCat("x", n.operand);
    case BodyOp::kConst: return absl::StrCat(n.value);
    case BodyOp::kAdd: return bin("+");
    case BodyOp::kSub: return bin("-");
    case BodyOp::kMul: return bin("*");
    case BodyOp::kFloorDiv: return bin("//");
    case BodyOp::kMin: return absl::StrCat("min(", BodyToString(n.a), ", ", BodyToString(n.b), ")");
    case BodyOp::kMax: return absl::StrCat("max(", BodyToString(n.a), ", ", BodyToString(n.b), ")");
    case BodyOp::kShr: return absl::StrCat("(", BodyToString(n.a), " >> ", n.shift, ")");
    case BodyOp::kUnary: return absl::StrCat(SfpuName(n.sfpu), "(", BodyToString(n.a), ")");
    case BodyOp::kSelect: {
      std::string rhs = n.pred.rhs_is_operand ? absl::StrCat("x", n.pred.rhs) : absl::StrCat(n.pred.rhs);
      return absl::StrCat("(", std::string(LoopVarName(n.pred.var)), n.pred.kind == PredKind::kAxisLt ? " < " : " >= ", rhs,
                          " ? ", BodyToString(n.b), " : ", BodyToString(n.c), ")");
    }
  }
  return "?";
}

BodyNode::~BodyNode() {
  std::vector<std::shared_ptr<BodyNode>> pending;
  auto take = [&pending](Body& child) {
    if (child.node_ != nullptr) pending.push_back(std::move(child.node_));
  };
  take(a);
  take(b);
  take(c);
  while (!pending.empty()) {
    std::shared_ptr<BodyNode> n = std::move(pending.back());
    pending.pop_back();
    if (n.use_count() == 1) {
      // The last handle: nothing else can see the node, so its children may be taken.
      take(n->a);
      take(n->b);
      take(n->c);
    }
    // n is released here with its children already taken: its own destructor finds nothing to walk.
  }
}

}  // namespace spatial
