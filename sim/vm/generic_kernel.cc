#include "sim/vm/generic_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/vm/exact_math.h"
#include "spatial/limits.h"
#include "spatial/semantics/affine.h"

namespace spatial::vm_internal {
namespace {

constexpr int kMaxSlots = 4096;
constexpr size_t kMaxInstrs = size_t{1} << 20;
// Offsets are computed in int64 without per-point overflow checks; Compile proves every reachable offset of a
// map is below this bound in magnitude, so the sums cannot overflow.
constexpr double kMaxOffsetBound = 2.0e18;

std::string VarName(LoopVar v) {
  auto n = LoopVarName(v);
  return n.empty() ? absl::StrCat("var#", static_cast<int>(v)) : std::string(n);
}

// The number of instructions `b` flattens to (a Select costs 3 of its own), memoized per shared node.
absl::StatusOr<double> TreeSize(const Body& b, int depth, absl::flat_hash_map<const BodyNode*, double>& memo) {
  if (!b.defined()) return absl::InvalidArgumentError("body has an undefined node");
  if (depth > kMaxBodyDepth) return absl::InvalidArgumentError(absl::StrCat("body is deeper than ", kMaxBodyDepth));
  if (auto it = memo.find(b.get()); it != memo.end()) return it->second;
  double size = 1;
  switch (b->op) {
    case BodyOp::kOperand:
    case BodyOp::kConst: break;
    case BodyOp::kShr:
    case BodyOp::kUnary: {
      ASSIGN_OR_RETURN(double a, TreeSize(b->a, depth + 1, memo));
      size += a;
      break;
    }
    case BodyOp::kSelect: {
      ASSIGN_OR_RETURN(double t, TreeSize(b->b, depth + 1, memo));
      ASSIGN_OR_RETURN(double e, TreeSize(b->c, depth + 1, memo));
      size += 3 + t + e;
      break;
    }
    default: {  // binary ops; an unknown op is reported by Emit
      if (b->a.defined()) {
        ASSIGN_OR_RETURN(double a, TreeSize(b->a, depth + 1, memo));
        size += a;
      }
      if (b->b.defined()) {
        ASSIGN_OR_RETURN(double c, TreeSize(b->b, depth + 1, memo));
        size += c;
      }
      break;
    }
  }
  memo[b.get()] = size;
  return size;
}

}  // namespace

absl::StatusOr<GenericKernel> GenericKernel::Compile(const Generic& g, std::vector<int64_t> in_sizes,
                                                     int64_t out_size, int64_t tile_rows, int64_t tile_cols) {
  GenericKernel k;
  if (g.iters.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("iteration space has ", g.iters.size(), " axes; at most 3 (ROW, COL, K)"));
  }
  k.num_iters_ = static_cast<int>(g.iters.size());
  k.points_ = 1.0;
  double reduce_points = 1.0;
  for (int p = 0; p < k.num_iters_; ++p) {
    const IterSpec& it = g.iters[p];
    if (!IsGenericAxis(it.var)) {
      return absl::InvalidArgumentError(
          absl::StrCat("iteration axis ", p, " is ", VarName(it.var), "; a Generic iterates ROW, COL or K"));
    }
    int v = static_cast<int>(it.var);
    if (k.axis_of_var_[v] != 3) {
      return absl::InvalidArgumentError(absl::StrCat("iteration axis ", VarName(it.var), " appears twice"));
    }
    if (it.extent < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("iteration axis ", VarName(it.var), " has negative extent ", it.extent));
    }
    if (it.kind != IterKind::kParallel && it.kind != IterKind::kReduceSum && it.kind != IterKind::kReduceMax &&
        it.kind != IterKind::kReduceArgMax) {
      return absl::InvalidArgumentError(
          absl::StrCat("iteration axis ", VarName(it.var), " has unknown kind ", static_cast<int>(it.kind)));
    }
    if (IsReduce(it.kind)) {
      if (k.pool_ != IterKind::kParallel && k.pool_ != it.kind) {
        return absl::InvalidArgumentError("Reduce axes with different pools in one space");
      }
      k.pool_ = it.kind;
      reduce_points *= static_cast<double>(it.extent);
    }
    k.axis_of_var_[v] = p;
    k.var_[p] = it.var;
    k.extent_[p] = it.extent;
    k.points_ *= static_cast<double>(it.extent);
  }
  if (reduce_points > 9.0e15) {
    return absl::InvalidArgumentError("the Reduce axes span more than 2^53 positions");
  }
  // ArgMax position: the linear index over the Reduce axes, first Reduce axis outermost.
  int64_t mult = 1;
  for (int p = k.num_iters_ - 1; p >= 0; --p) {
    if (!IsReduce(g.iters[p].kind)) continue;
    k.argmax_mult_[p] = mult;
    mult *= std::max<int64_t>(1, k.extent_[p]);
  }

  if (g.ins.size() > static_cast<size_t>(kMaxSlots)) {
    return absl::InvalidArgumentError(absl::StrCat("Generic has ", g.ins.size(), " input slots; at most ", kMaxSlots));
  }
  if (in_sizes.size() != g.ins.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Generic has ", g.ins.size(), " input maps but ", in_sizes.size(), " input buffers"));
  }
  k.in_sizes_ = std::move(in_sizes);
  k.out_size_ = out_size;
  k.slots_.resize(g.ins.size());
  for (size_t i = 0; i < g.ins.size(); ++i) {
    RETURN_IF_ERROR(k.CompileMap(g.ins[i], absl::StrCat("slot ", i), k.slots_[i]));
  }
  RETURN_IF_ERROR(k.CompileMap(g.out, "out map", k.out_));

  // Indirect chains must end: a slot whose index is read through itself would recurse forever.
  const int n = static_cast<int>(k.slots_.size());
  auto chain_ok = [&](int start, const char* what) -> absl::Status {
    int cur = start;
    for (int steps = 0; cur >= 0; ++steps) {
      if (steps > 64 || steps > n) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": its indirect index chain does not end (a cycle)"));
      }
      cur = k.slots_[cur].ind;
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < n; ++i) RETURN_IF_ERROR(chain_ok(i, absl::StrCat("slot ", i).c_str()));
  RETURN_IF_ERROR(chain_ok(k.out_.ind, "out map"));

  if (!g.body.defined()) return absl::InvalidArgumentError("Generic has no body");
  // Size the flattened body first, counting shared nodes once per use but visiting each only once: a DAG that
  // doubles at every level would otherwise be expanded for a long time before the cap stopped it.
  absl::flat_hash_map<const BodyNode*, double> sizes;
  ASSIGN_OR_RETURN(double size, TreeSize(g.body, 0, sizes));
  if (size > static_cast<double>(kMaxInstrs)) {
    return absl::InvalidArgumentError(absl::StrCat("body expands to more than ", kMaxInstrs, " operations"));
  }
  ASSIGN_OR_RETURN(k.result_reg_, k.Emit(g.body, 0));
  k.regs_.assign(static_cast<size_t>(k.num_regs_), 0.0);
  // ★ A CONTRACTION RUNS AS THE MACHINE RUNS IT (spatial/semantics/contraction.h, the recognizer the timing model
  // reads too): tile products on the matrix engine's path, not point by point on the eltwise path.
  if (tile_rows > 0 && tile_cols > 0) {
    k.contraction_ = RecognizeContraction(g, static_cast<int>(k.slots_.size()));
    k.tile_rows_ = tile_rows;
    k.tile_cols_ = tile_cols;
  }
  return k;
}

absl::Status GenericKernel::CompileMap(const ElemAccess& m, const std::string& what, Map& out) {
  // The map's meaning is ElemForm (spatial/semantics/affine.h); the kernel compiles it to one int64 coefficient
  // per iterated position. An axis the Generic does not iterate reads as zero.
  const AffineForm form = ElemForm(m);
  out.base = m.base;
  for (int p = 0; p < num_iters_; ++p) {
    const Wide coef = form[*AddrVarOf(var_[p])];
    if (coef < std::numeric_limits<int64_t>::min() || coef > std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": coefficients of ", VarName(var_[p]), " overflow"));
    }
    out.coef[p] = static_cast<int64_t>(coef);
  }
  double bound = std::fabs(static_cast<double>(m.base));
  for (int p = 0; p < num_iters_; ++p) {
    bound += std::fabs(static_cast<double>(out.coef[p])) * static_cast<double>(std::max<int64_t>(0, extent_[p] - 1));
  }
  if (m.indirect) {
    const IndirectTerm& t = *m.indirect;
    if (t.operand < 0 || t.operand >= static_cast<int>(slots_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": indirect operand ", t.operand, " is not an input slot (",
                                                     slots_.size(), " slots)"));
    }
    out.ind = t.operand;
    out.stride = t.stride;
    out.modulus = t.modulus;
    if (t.stride != 0) {
      bound += std::fabs(static_cast<double>(t.stride)) * std::max(0.0, static_cast<double>(t.modulus) - 1.0);
    }
  }
  if (!(bound < kMaxOffsetBound)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": offsets can reach ", FormatValue(bound),
                                                   ", beyond what int64 arithmetic may hold safely"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> GenericKernel::Emit(const Body& body, int depth) {
  if (!body.defined()) return absl::InvalidArgumentError("body has an undefined node");
  if (depth > kMaxBodyDepth) return absl::InvalidArgumentError(absl::StrCat("body is deeper than ", kMaxBodyDepth));
  if (code_.size() >= kMaxInstrs) {
    return absl::InvalidArgumentError(absl::StrCat("body expands to more than ", kMaxInstrs, " operations"));
  }
  const BodyNode& n = *body;
  const int nslots = static_cast<int>(slots_.size());
  Instr in;
  switch (n.op) {
    case BodyOp::kOperand:
      if (n.operand < 0 || n.operand >= nslots) {
        return absl::InvalidArgumentError(
            absl::StrCat("body reads slot ", n.operand, " but the stage has ", nslots, " input slots"));
      }
      in.code = Code::kSlot;
      in.arg = n.operand;
      break;
    case BodyOp::kConst:
      in.code = Code::kConst;
      in.imm = n.value;
      break;
    case BodyOp::kAdd:
    case BodyOp::kSub:
    case BodyOp::kMul:
    case BodyOp::kMin:
    case BodyOp::kMax:
    case BodyOp::kFloorDiv: {
      static constexpr Code kCodes[] = {Code::kAdd, Code::kSub, Code::kMul, Code::kMin, Code::kMax, Code::kFloorDiv};
      in.code = kCodes[static_cast<int>(n.op) - static_cast<int>(BodyOp::kAdd)];
      ASSIGN_OR_RETURN(in.a, Emit(n.a, depth + 1));
      ASSIGN_OR_RETURN(in.b, Emit(n.b, depth + 1));
      break;
    }
    case BodyOp::kShr: {
      in.code = Code::kShr;
      in.arg = n.shift;
      ASSIGN_OR_RETURN(in.a, Emit(n.a, depth + 1));
      break;
    }
    case BodyOp::kUnary: {
      if (!IsKnownSfpuOp(n.sfpu.op)) {
        return absl::InvalidArgumentError(
            absl::StrCat("body has an unknown SFPU kind ", static_cast<int>(n.sfpu.op)));
      }
      in.code = Code::kSfpu;
      in.sfpu = n.sfpu;
      ASSIGN_OR_RETURN(in.a, Emit(n.a, depth + 1));
      break;
    }
    case BodyOp::kSelect: {
      const Pred& p = n.pred;
      if (p.kind != PredKind::kAxisLt && p.kind != PredKind::kAxisGe) {
        return absl::InvalidArgumentError(absl::StrCat("Select has an unknown predicate ", static_cast<int>(p.kind)));
      }
      Instr jump;
      jump.code = Code::kJumpUnless;
      jump.pred = p.kind;
      unsigned v = static_cast<unsigned>(p.var);
      jump.axis = v < 8 ? axis_of_var_[v] : 3;
      if (p.rhs_is_operand) {
        if (p.rhs < 0 || p.rhs >= nslots) {
          return absl::InvalidArgumentError(
              absl::StrCat("Select compares with slot ", p.rhs, " but the stage has ", nslots, " input slots"));
        }
        jump.rhs_slot = static_cast<int>(p.rhs);
      } else {
        jump.arg = p.rhs;
      }
      const int dst = num_regs_++;
      const size_t jump_at = code_.size();
      code_.push_back(jump);
      ASSIGN_OR_RETURN(int then_reg, Emit(n.b, depth + 1));
      Instr mv;
      mv.code = Code::kMove;
      mv.dst = dst;
      mv.a = then_reg;
      code_.push_back(mv);
      const size_t skip_at = code_.size();
      Instr skip;
      skip.code = Code::kJump;
      code_.push_back(skip);
      code_[jump_at].target = static_cast<int32_t>(code_.size());
      ASSIGN_OR_RETURN(int else_reg, Emit(n.c, depth + 1));
      mv.a = else_reg;
      code_.push_back(mv);
      code_[skip_at].target = static_cast<int32_t>(code_.size());
      return dst;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("body has an unknown op ", static_cast<int>(n.op)));
  }
  in.dst = num_regs_++;
  code_.push_back(in);
  return in.dst;
}

std::string GenericKernel::PointText(const int64_t* idx) const {
  if (num_iters_ == 0) return "";
  std::string s = " at (";
  for (int p = 0; p < num_iters_; ++p) {
    absl::StrAppend(&s, p ? ", " : "", VarName(var_[p]), "=", idx[p]);
  }
  return s + ")";
}

bool GenericKernel::Offset(const Map& m, int slot, const double* const* ins, const int64_t* idx, int64_t& off,
                           Fault& fault) const {
  off = m.base + m.coef[0] * idx[0] + m.coef[1] * idx[1] + m.coef[2] * idx[2];
  if (m.ind >= 0) {
    double v;
    if (!ReadSlot(m.ind, ins, idx, v, fault)) return false;
    const bool integral = v == std::floor(v);  // false for NaN and infinities too
    if (!integral || !(v >= 0.0 && v < static_cast<double>(m.modulus))) {
      std::string who = slot >= 0 ? absl::StrCat("slot ", slot) : std::string("out map");
      fault = MakeFault(kIndexOutOfRange,
                        absl::StrCat(who, ": index value ", FormatValue(v), " (read through slot ", m.ind, ")",
                                     integral ? " not in [0, " : " is not an integer in [0, ", m.modulus, ")",
                                     PointText(idx)));
      return false;
    }
    if (m.stride != 0) off += m.stride * static_cast<int64_t>(v);
  }
  const int64_t size = slot >= 0 ? in_sizes_[slot] : out_size_;
  if (off < 0 || off >= size) {
    std::string who = slot >= 0 ? absl::StrCat("slot ", slot) : std::string("out map");
    fault = MakeFault(kIndexOutOfRange,
                      absl::StrCat(who, ": offset ", off, " outside its page [0, ", size, ")", PointText(idx)));
    return false;
  }
  return true;
}

bool GenericKernel::ReadSlot(int slot, const double* const* ins, const int64_t* idx, double& v, Fault& fault) const {
  int64_t off;
  if (!Offset(slots_[slot], slot, ins, idx, off, fault)) return false;
  v = ins[slot][off];
  return true;
}

template <bool kExact>
bool GenericKernel::Eval(const double* const* ins, const int64_t* idx, const ValueModel& model, Precision acc,
                         double& result, Fault& fault) {
  double* r = regs_.data();
  const Instr* code = code_.data();
  const size_t n = code_.size();
  for (size_t pc = 0; pc < n;) {
    const Instr& in = code[pc];
    switch (in.code) {
      case Code::kSlot: {
        // The common direct read inline; indirect reads (and every fault) take the general path.
        const int slot = static_cast<int>(in.arg);
        const Map& m = slots_[slot];
        if (m.ind < 0) {
          const int64_t off = m.base + m.coef[0] * idx[0] + m.coef[1] * idx[1] + m.coef[2] * idx[2];
          if (static_cast<uint64_t>(off) < static_cast<uint64_t>(in_sizes_[slot])) {
            r[in.dst] = ins[slot][off];
            break;
          }
        }
        if (!ReadSlot(slot, ins, idx, r[in.dst], fault)) return false;
        break;
      }
      case Code::kConst: r[in.dst] = in.imm; break;
      case Code::kAdd:
        r[in.dst] = kExact ? r[in.a] + r[in.b] : model.Arith(BodyOp::kAdd, r[in.a], r[in.b], acc);
        break;
      case Code::kSub:
        r[in.dst] = kExact ? r[in.a] - r[in.b] : model.Arith(BodyOp::kSub, r[in.a], r[in.b], acc);
        break;
      case Code::kMul:
        r[in.dst] = kExact ? r[in.a] * r[in.b] : model.Arith(BodyOp::kMul, r[in.a], r[in.b], acc);
        break;
      case Code::kMin:
        r[in.dst] = kExact ? vm_math::Min(r[in.a], r[in.b]) : model.Arith(BodyOp::kMin, r[in.a], r[in.b], acc);
        break;
      case Code::kMax:
        r[in.dst] = kExact ? vm_math::Max(r[in.a], r[in.b]) : model.Arith(BodyOp::kMax, r[in.a], r[in.b], acc);
        break;
      case Code::kFloorDiv:
        if (r[in.b] == 0.0) {
          fault = MakeFault(kDivisionByZero,
                            absl::StrCat("FloorDiv of ", FormatValue(r[in.a]), " by zero", PointText(idx)));
          return false;
        }
        r[in.dst] = kExact ? vm_math::FloorDiv(r[in.a], r[in.b])
                           : model.Arith(BodyOp::kFloorDiv, r[in.a], r[in.b], acc);
        break;
      case Code::kShr: r[in.dst] = vm_math::Shr(r[in.a], in.arg); break;
      case Code::kSfpu:
        r[in.dst] = kExact ? vm_math::Sfpu(in.sfpu, r[in.a]) : model.Sfpu(in.sfpu, r[in.a], acc);
        break;
      case Code::kJumpUnless: {
        const int64_t x = idx[in.axis];
        bool cond;
        if (in.rhs_slot >= 0) {
          double rhs;
          if (!ReadSlot(in.rhs_slot, ins, idx, rhs, fault)) return false;
          const double xd = static_cast<double>(x);
          cond = in.pred == PredKind::kAxisLt ? xd < rhs : xd >= rhs;
        } else {
          cond = in.pred == PredKind::kAxisLt ? x < in.arg : x >= in.arg;
        }
        if (!cond) {
          pc = static_cast<size_t>(in.target);
          continue;
        }
        break;
      }
      case Code::kJump: pc = static_cast<size_t>(in.target); continue;
      case Code::kMove: r[in.dst] = r[in.a]; break;
    }
    ++pc;
  }
  result = r[result_reg_];
  return true;
}

template <bool kExact>
bool GenericKernel::RunImpl(const double* const* ins, double* out, const ValueModel& model, Precision acc,
                            Fault& fault) {
  const bool reduce = pool_ != IterKind::kParallel;
  if (reduce) {
    acc_.assign(static_cast<size_t>(out_size_), 0.0);
    reached_.assign(static_cast<size_t>(out_size_), 0);
    if (pool_ == IterKind::kReduceArgMax) argpos_.assign(static_cast<size_t>(out_size_), 0);
  }
  int64_t idx[4] = {0, 0, 0, 0};  // idx[3] stays 0: the value of every var the space does not iterate
  for (idx[0] = 0; idx[0] < extent_[0]; ++idx[0]) {
    for (idx[1] = 0; idx[1] < extent_[1]; ++idx[1]) {
      for (idx[2] = 0; idx[2] < extent_[2]; ++idx[2]) {
        double v;
        if (!Eval<kExact>(ins, idx, model, acc, v, fault)) return false;
        int64_t off = out_.base + out_.coef[0] * idx[0] + out_.coef[1] * idx[1] + out_.coef[2] * idx[2];
        if (out_.ind >= 0 || static_cast<uint64_t>(off) >= static_cast<uint64_t>(out_size_)) {
          if (!Offset(out_, -1, ins, idx, off, fault)) return false;
        }
        if (!reduce) {
          out[off] = v;
          continue;
        }
        double& a = acc_[off];
        const bool first = !reached_[off];
        reached_[off] = 1;
        switch (pool_) {
          case IterKind::kReduceSum:
            a = kExact ? a + v : model.Arith(BodyOp::kAdd, a, v, acc);
            break;
          case IterKind::kReduceMax:
            // NaN never wins: a NaN accumulator (only from NaN terms so far) yields to any number.
            if (first || std::isnan(a)) {
              a = v;
            } else if (!std::isnan(v)) {
              a = kExact ? vm_math::Max(a, v) : model.Arith(BodyOp::kMax, a, v, acc);
            }
            break;
          case IterKind::kReduceArgMax: {
            // The first maximum: only a strictly greater value moves the position; NaN is ignored.
            if (first || (!std::isnan(v) && (std::isnan(a) || v > a))) {
              a = v;
              argpos_[off] = idx[0] * argmax_mult_[0] + idx[1] * argmax_mult_[1] + idx[2] * argmax_mult_[2];
            }
            break;
          }
          case IterKind::kParallel: break;
        }
      }
    }
  }
  if (reduce) {
    const bool arg = pool_ == IterKind::kReduceArgMax;
    for (int64_t i = 0; i < out_size_; ++i) {
      if (reached_[i]) out[i] = arg ? static_cast<double>(argpos_[i]) : acc_[i];
    }
  }
  return true;
}

bool GenericKernel::GuardsKeep(GuardSide side, const double* const* ins, const int64_t* idx, bool& keep,
                               Fault& fault) const {
  keep = true;
  for (const ContractionGuard& gd : contraction_->guards) {
    if (gd.side != side) continue;
    const unsigned v = static_cast<unsigned>(gd.pred.var);
    const double x = static_cast<double>(idx[v < 8 ? axis_of_var_[v] : 3]);
    double rhs = static_cast<double>(gd.pred.rhs);
    if (gd.pred.rhs_is_operand && !ReadSlot(static_cast<int>(gd.pred.rhs), ins, idx, rhs, fault)) return false;
    const bool holds = gd.pred.kind == PredKind::kAxisLt ? x < rhs : x >= rhs;
    if (holds != gd.keep_when_true) {
      keep = false;
      return true;
    }
  }
  return true;
}

bool GenericKernel::RunContraction(const double* const* ins, double* out, const ValueModel& model, Precision acc,
                                   Fault& fault) {
  const Contraction& c = *contraction_;
  const int pr = axis_of_var_[static_cast<int>(LoopVar::kRow)], pc = axis_of_var_[static_cast<int>(LoopVar::kCol)],
            pk = axis_of_var_[static_cast<int>(LoopVar::kK)];
  const int64_t R = c.rows, C = c.cols, K = c.k;
  ca_.assign(static_cast<size_t>(R * K), 0.0);
  cb_.assign(static_cast<size_t>(K * C), 0.0);
  cm_.assign(static_cast<size_t>(R * C), 0.0);
  int64_t idx[4] = {0, 0, 0, 0};
  auto set = [&idx](int pos, int64_t v) {
    if (pos < 3) idx[pos] = v;
  };
  // Per K position: whether a guard masked an entry of A (of B) there, and whether A (B) holds a non-finite value.
  masked_a_.assign(static_cast<size_t>(K), 0);
  masked_b_.assign(static_cast<size_t>(K), 0);
  wild_a_.assign(static_cast<size_t>(K), 0);
  wild_b_.assign(static_cast<size_t>(K), 0);
  // One operand: entry (o, k) of an outer axis `po` (ROW for A, COL for B) and K, at `at(o, k)` of `dst`; the
  // other axis reads as zero.
  auto gather = [&](GuardSide side, int slot, int po, int64_t outer, int zero, std::vector<double>& dst,
                    int64_t (*at)(int64_t o, int64_t k, int64_t outer, int64_t K), std::vector<uint8_t>& masked,
                    std::vector<uint8_t>& wild) {
    bool keep = true;
    set(zero, 0);
    for (int64_t o = 0; o < outer; ++o) {
      set(po, o);
      for (int64_t k = 0; k < K; ++k) {
        set(pk, k);
        if (!GuardsKeep(side, ins, idx, keep, fault)) return false;
        double& v = dst[static_cast<size_t>(at(o, k, outer, K))];
        if (!keep) {
          masked[static_cast<size_t>(k)] = 1;
        } else if (!ReadSlot(slot, ins, idx, v, fault)) {
          return false;
        } else if (!std::isfinite(v)) {
          wild[static_cast<size_t>(k)] = 1;
        }
      }
    }
    return true;
  };
  if (!gather(GuardSide::kA, c.a, pr, R, pc, ca_, [](int64_t r, int64_t k, int64_t, int64_t K) { return r * K + k; },
              masked_a_, wild_a_) ||
      !gather(GuardSide::kB, c.b, pc, C, pr, cb_, [](int64_t j, int64_t k, int64_t C, int64_t) { return k * C + j; },
              masked_b_, wild_b_)) {
    return false;
  }
  // A masked entry is a zero operand, which contributes exactly 0 only beside a finite partner (0 * inf is NaN).
  // The body's Select is lazy (a masked product is 0 whatever its partner), and the lowerings promise that masked
  // positions are never read: where a masked entry meets a non-finite partner, the execution keeps that meaning
  // and runs point by point.
  for (int64_t k = 0; k < K; ++k) {
    if ((masked_a_[static_cast<size_t>(k)] && wild_b_[static_cast<size_t>(k)]) ||
        (masked_b_[static_cast<size_t>(k)] && wild_a_[static_cast<size_t>(k)])) {
      std::fill(out, out + out_size_, 0.0);
      return model.exact() ? RunImpl<true>(ins, out, model, acc, fault) : RunImpl<false>(ins, out, model, acc, fault);
    }
  }
  // Tile products, K a tile at a time, accumulated in the section's accumulator as MatmulTiles does.
  for (int64_t r0 = 0; r0 < R; r0 += tile_rows_) {
    for (int64_t c0 = 0; c0 < C; c0 += tile_cols_) {
      for (int64_t k0 = 0; k0 < K; k0 += tile_cols_) {
        model.MatmulTile(ca_.data() + r0 * K + k0, K, cb_.data() + k0 * C + c0, C, false, cm_.data() + r0 * C + c0, C,
                         std::min(tile_rows_, R - r0), std::min(tile_cols_, C - c0), std::min(tile_cols_, K - k0),
                         acc, MathFidelity::kDefault);
      }
    }
  }
  const bool exact = model.exact();
  for (double f : c.factors) {
    for (double& v : cm_) v = exact ? v * f : model.Arith(BodyOp::kMul, v, f, acc);
  }
  set(pk, 0);
  bool keep = true;
  for (int64_t r = 0; r < R; ++r) {
    set(pr, r);
    for (int64_t j = 0; j < C; ++j) {
      set(pc, j);
      if (!GuardsKeep(GuardSide::kOut, ins, idx, keep, fault)) return false;
      int64_t off;
      if (!Offset(out_, -1, ins, idx, off, fault)) return false;
      out[off] = keep ? cm_[static_cast<size_t>(r * C + j)] : 0.0;
    }
  }
  return true;
}

bool GenericKernel::Run(const double* const* ins, double* out, const ValueModel& model, Precision acc,
                        Fault& fault) {
  if (contraction_) return RunContraction(ins, out, model, acc, fault);
  return model.exact() ? RunImpl<true>(ins, out, model, acc, fault) : RunImpl<false>(ins, out, model, acc, fault);
}

}  // namespace spatial::vm_internal
