// TensorBody: the closed algebra's scalar expression tree (DESIGN §3.4), evaluated at every point of a Generic's
// iteration space. Nodes are immutable and shared (Halide's Expr), so lowerings copy bodies freely.
#ifndef SPATIAL_BODY_H_
#define SPATIAL_BODY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spatial/loop_var.h"

namespace spatial {

// ── The body IR's kinds, each listed once ──
// Every SFPU transform: X(enumerator, wire value = proto/types.proto SfpuKind, printed name, proto enumerator). A
// new transform is one line here: the enum, its name, its wire mapping (proto_io.cc checks the values agree),
// validation and the VM's acceptance follow; its numerics (sim/numerics/sfpu.cc) and exact math
// (sim/vm/exact_math.h) are switches the compiler points at (-Wswitch).
#define SPATIAL_SFPU_OPS(X)                        \
  X(kExp, 1, "exp", EXP)                           \
  X(kLn, 2, "ln", LN)                              \
  X(kRecip, 3, "recip", RECIP)                     \
  X(kRsqrt, 4, "rsqrt", RSQRT)                     \
  X(kSilu, 5, "silu", SILU)                        \
  X(kExpAccurate, 6, "exp_accurate", EXP_ACCURATE) \
  X(kSigmoid, 7, "sigmoid", SIGMOID)               \
  X(kGelu, 8, "gelu", GELU)                        \
  X(kExpFast, 9, "exp_fast", EXP_FAST)

enum class SfpuOp : uint8_t {
  kUnspecified = 0,
#define SPATIAL_X(e, v, name, wire) e = v,
  SPATIAL_SFPU_OPS(SPATIAL_X)
#undef SPATIAL_X
};
bool IsKnownSfpuOp(SfpuOp op);

// A transform the vector engine computes. Rsqrt is 1/sqrt(x/over + eps_nano*1e-9): the divide by the row width
// rides inside the transform (the seed measured a bf16 ulp when it did not).
struct SfpuKind {
  SfpuOp op = SfpuOp::kUnspecified;
  int64_t eps_nano = 0;  // Rsqrt only
  int64_t over = 1;      // Rsqrt only

  static SfpuKind Exp() { return {SfpuOp::kExp}; }
  static SfpuKind Ln() { return {SfpuOp::kLn}; }
  static SfpuKind Recip() { return {SfpuOp::kRecip}; }
  static SfpuKind Silu() { return {SfpuOp::kSilu}; }
  // 1 / (1 + e^-x), tt-metal's sigmoid_tile.
  static SfpuKind Sigmoid() { return {SfpuOp::kSigmoid}; }
  // x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), the erf GELU: tt-metal's gelu_tile (PyTorch's approximate='none').
  static SfpuKind Gelu() { return {SfpuOp::kGelu}; }
  // exp by the target's accurate algorithm whatever its approx mode (online-softmax rescale exp(m - m')).
  static SfpuKind ExpAccurate() { return {SfpuOp::kExpAccurate}; }
  // exp by the target's fast approximate exp whatever its approx mode (tt-metal SDPA's probabilities).
  static SfpuKind ExpFast() { return {SfpuOp::kExpFast}; }
  static SfpuKind Rsqrt(int64_t eps_nano, int64_t over) { return {SfpuOp::kRsqrt, eps_nano, over}; }
  friend bool operator==(const SfpuKind&, const SfpuKind&) = default;
};
std::string SfpuName(const SfpuKind& k);  // "exp", "rsqrt{eps_nano=1000,over=128}", ...

enum class PredKind : uint8_t { kAxisLt = 1, kAxisGe = 2 };

// `var < rhs` or `var >= rhs`, where rhs is a constant or the value of an input slot.
struct Pred {
  PredKind kind = PredKind::kAxisLt;
  LoopVar var = LoopVar::kCol;
  bool rhs_is_operand = false;
  int64_t rhs = 0;  // the constant, or the input slot

  static Pred Lt(LoopVar v, int64_t k) { return {PredKind::kAxisLt, v, false, k}; }
  static Pred Ge(LoopVar v, int64_t k) { return {PredKind::kAxisGe, v, false, k}; }
  static Pred LtOperand(LoopVar v, int slot) { return {PredKind::kAxisLt, v, true, slot}; }
  static Pred GeOperand(LoopVar v, int slot) { return {PredKind::kAxisGe, v, true, slot}; }
  friend bool operator==(const Pred&, const Pred&) = default;
};

// Every body node kind: X(enumerator, wire value = proto/program.proto BodyNode.Op, name, proto enumerator,
// children). Shr shifts a right arithmetically by `shift`; Unary is sfpu(a); Select is pred ? b : c, lazily (the
// branch not taken reads nothing).
#define SPATIAL_BODY_OPS(X)                 \
  X(kOperand, 1, "Operand", OPERAND, 0)     \
  X(kConst, 2, "Const", CONST, 0)           \
  X(kAdd, 3, "Add", ADD, 2)                 \
  X(kSub, 4, "Sub", SUB, 2)                 \
  X(kMul, 5, "Mul", MUL, 2)                 \
  X(kMin, 6, "Min", MIN, 2)                 \
  X(kMax, 7, "Max", MAX, 2)                 \
  X(kFloorDiv, 8, "FloorDiv", FLOOR_DIV, 2) \
  X(kShr, 9, "Shr", SHR, 1)                 \
  X(kUnary, 10, "Unary", UNARY, 1)          \
  X(kSelect, 11, "Select", SELECT, 2)

enum class BodyOp : uint8_t {
#define SPATIAL_X(e, v, name, wire, children) e = v,
  SPATIAL_BODY_OPS(SPATIAL_X)
#undef SPATIAL_X
};
bool IsKnownBodyOp(BodyOp op);
std::string_view BodyOpName(BodyOp op);  // "Add", ...; "?" for an unknown value
// The children a node of this kind uses: a, then b (binary ops); a (Shr, Unary); b and c (Select).
int BodyOpChildren(BodyOp op);

struct BodyNode;

// A handle to an immutable expression node.
class Body {
 public:
  Body() = default;
  // The node is held non-const so the last handle's destructor may unlink its children (~BodyNode); every access
  // through a Body is const.
  explicit Body(std::shared_ptr<BodyNode> n) : node_(std::move(n)) {}

  const BodyNode& operator*() const { return *node_; }
  const BodyNode* operator->() const { return node_.get(); }
  const BodyNode* get() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }

 private:
  friend struct BodyNode;  // its destructor takes its children's handles to release them without recursing
  std::shared_ptr<BodyNode> node_;
};

struct BodyNode {
  BodyOp op = BodyOp::kConst;
  int operand = 0;     // kOperand
  double value = 0.0;  // kConst
  int64_t shift = 0;   // kShr
  SfpuKind sfpu;       // kUnary
  Pred pred;           // kSelect
  Body a, b, c;        // children: binary ops use a, b; Unary and Shr use a; Select uses b (then) and c (else)

  BodyNode() = default;
  BodyNode(const BodyNode&) = default;
  BodyNode(BodyNode&&) = default;
  BodyNode& operator=(const BodyNode&) = default;
  BodyNode& operator=(BodyNode&&) = default;
  // Iterative: releasing the last handle to a chain thousands deep must not recurse once per level (it overflowed
  // the stack under ASan). Children this node alone owns are unlinked onto a worklist and released there.
  ~BodyNode();
};

// Builders (the seed's op, konst, add, sub, mul, unary, ...).
Body Op(int slot);
Body Const(double v);
Body Add(Body a, Body b);
Body Sub(Body a, Body b);
Body Mul(Body a, Body b);
Body Min(Body a, Body b);
Body Max(Body a, Body b);
Body FloorDiv(Body a, Body b);
Body Shr(Body a, int64_t by);
Body Unary(SfpuKind k, Body a);
Body Select(Pred p, Body then, Body otherwise);

// `bands` in increasing `hi`: band k covers COL < hi_k (and >= the previous band's hi); the last band is the
// fall-through and its hi is ignored. A partition of [0, n) costs len-1 predicates.
Body Banded(const std::vector<std::pair<int64_t, Body>>& bands);

// Every distinct node reachable from `root` once, children before parents (a shared node is visited once however
// many parents it has; iterative, so a deep body cannot overflow the stack). Stops early when `f` returns false.
void VisitBody(const Body& root, const std::function<bool(const BodyNode&)>& f);

// A rewrite: `f` gets each distinct node with its children already rewritten (as `a`, `b`, `c`) and returns the
// replacement; shared nodes are rewritten once and stay shared.
Body RewriteBody(const Body& root, const std::function<Body(const BodyNode& node, Body a, Body b, Body c)>& f);

// Structural equality.
bool BodyEqual(const Body& x, const Body& y);
// Integer-valued integer arithmetic: no transforms, every constant an integer (the seed's `integral()`).
bool BodyIntegral(const Body& b);
// The number of input slots the body reads (1 + the largest Operand index or Pred operand, 0 if none).
int BodySlotCount(const Body& b);
// A readable infix rendering: "recip(1 + exp(0 - x0))".
std::string BodyToString(const Body& b);

}  // namespace spatial

#endif  // SPATIAL_BODY_H_
