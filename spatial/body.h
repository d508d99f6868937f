// TensorBody: the closed algebra's scalar expression tree (DESIGN §3.4), evaluated at every point of a Generic's
// iteration space. Nodes are immutable and shared (Halide's Expr), so lowerings copy bodies freely.
#ifndef SPATIAL_BODY_H_
#define SPATIAL_BODY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spatial/loop_var.h"

namespace spatial {

// Values match proto/program.proto's SfpuKind.
enum class SfpuOp : uint8_t { kUnspecified = 0, kExp = 1, kLn = 2, kRecip = 3, kRsqrt = 4, kSilu = 5,
                              kExpAccurate = 6 };

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
  // exp by the target's accurate algorithm whatever its approx mode (online-softmax rescale exp(m - m')).
  static SfpuKind ExpAccurate() { return {SfpuOp::kExpAccurate}; }
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

// Values match proto/program.proto's BodyNode.Op.
enum class BodyOp : uint8_t {
  kOperand = 1,
  kConst = 2,
  kAdd = 3,
  kSub = 4,
  kMul = 5,
  kMin = 6,
  kMax = 7,
  kFloorDiv = 8,
  kShr = 9,     // arithmetic shift right of a by `shift`
  kUnary = 10,  // sfpu(a)
  kSelect = 11, // pred ? b : c, lazily: the branch not taken reads nothing
};

struct BodyNode;

// A handle to an immutable expression node.
class Body {
 public:
  Body() = default;
  explicit Body(std::shared_ptr<const BodyNode> n) : node_(std::move(n)) {}

  const BodyNode& operator*() const { return *node_; }
  const BodyNode* operator->() const { return node_.get(); }
  const BodyNode* get() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }

 private:
  std::shared_ptr<const BodyNode> node_;
};

struct BodyNode {
  BodyOp op = BodyOp::kConst;
  int operand = 0;     // kOperand
  double value = 0.0;  // kConst
  int64_t shift = 0;   // kShr
  SfpuKind sfpu;       // kUnary
  Pred pred;           // kSelect
  Body a, b, c;        // children: binary ops use a, b; Unary and Shr use a; Select uses b (then) and c (else)
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
