// A Generic stage compiled once per section: its maps reduced to per-axis coefficients and its body flattened
// into a small register program with jumps (Select stays lazy: the branch not taken is never executed, so its
// operands are never read). Running it touches no allocator after the first execution.
#ifndef SIM_VM_GENERIC_KERNEL_H_
#define SIM_VM_GENERIC_KERNEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/vm/fault.h"
#include "sim/vm/value_model.h"
#include "spatial/status_macros.h"
#include "spatial/program.h"
#include "spatial/semantics/contraction.h"

namespace spatial::vm_internal {

class GenericKernel {
 public:
  // Compiles `g`. in_sizes[i] is the page size (elements) of the buffer input slot i reads, out_size that of the
  // output page. An error's message says what is malformed (the caller adds where).
  // A Generic that is a contraction (spatial/semantics/contraction.h) runs as tile products through the value
  // model's MatmulTile, tile_rows x tile_cols outputs and tile_cols of K at a time, as the machine runs it; with a
  // zero tile it runs point by point.
  static absl::StatusOr<GenericKernel> Compile(const Generic& g, std::vector<int64_t> in_sizes, int64_t out_size,
                                               int64_t tile_rows = 0, int64_t tile_cols = 0);

  // Whether executions take the tile-product path.
  bool is_contraction() const { return contraction_.has_value(); }

  // Element operations of one execution: points x (1 + body operations), for the run's work cap.
  double cost() const { return points_ * (1.0 + static_cast<double>(code_.size())); }

  // One execution: ins[i] is slot i's page (in_sizes[i] elements, as it was before the stage), out the new page
  // (out_size elements, already zero). On a fault returns false and fills `fault`; `out` is then garbage.
  bool Run(const double* const* ins, double* out, const ValueModel& model, Precision acc, Fault& fault);

 private:
  struct Map {
    int64_t base = 0;
    int64_t coef[4] = {0, 0, 0, 0};  // per iteration position; position 3 is the constant-zero axis
    int ind = -1;                    // slot whose value is the indirect index, -1 = none
    int64_t stride = 0;
    int64_t modulus = 0;
  };
  enum class Code : uint8_t {
    kSlot, kConst, kAdd, kSub, kMul, kMin, kMax, kFloorDiv, kShr, kSfpu, kJumpUnless, kJump, kMove
  };
  struct Instr {
    Code code = Code::kConst;
    int32_t dst = 0, a = 0, b = 0;
    int32_t target = 0;      // jumps: the instruction to continue at
    double imm = 0.0;        // kConst
    int64_t arg = 0;         // kSlot: the slot; kShr: the shift; kJumpUnless: the constant rhs
    SfpuKind sfpu;           // kSfpu
    PredKind pred = PredKind::kAxisLt;  // kJumpUnless
    int axis = 3;            // kJumpUnless: iteration position of the predicate's var (3 = reads as zero)
    int rhs_slot = -1;       // kJumpUnless: slot whose value is the rhs, -1 = the constant `arg`
  };

  absl::StatusOr<int> Emit(const Body& body, int depth);
  absl::Status CompileMap(const ElemAccess& m, const std::string& what, Map& out);
  // " at (ROW=0, COL=5)": the point a fault happened at.
  std::string PointText(const int64_t* idx) const;

  // The contraction path: gather A and B through their maps (masked by their guards; a masked entry is never
  // read), tile products by model.MatmulTile, the factors, the result's guards, the out map.
  bool RunContraction(const double* const* ins, double* out, const ValueModel& model, Precision acc, Fault& fault);
  // Whether every guard on `side` keeps the point idx.
  bool GuardsKeep(GuardSide side, const double* const* ins, const int64_t* idx, bool& keep, Fault& fault) const;

  template <bool kExact>
  bool RunImpl(const double* const* ins, double* out, const ValueModel& model, Precision acc, Fault& fault);
  template <bool kExact>
  bool Eval(const double* const* ins, const int64_t* idx, const ValueModel& model, Precision acc, double& result,
            Fault& fault);
  bool ReadSlot(int slot, const double* const* ins, const int64_t* idx, double& v, Fault& fault) const;
  // The offset of map `m` (slot `slot`'s map, or the out map when slot < 0) at point idx, range-checked.
  bool Offset(const Map& m, int slot, const double* const* ins, const int64_t* idx, int64_t& off,
              Fault& fault) const;

  std::optional<Contraction> contraction_;
  int64_t tile_rows_ = 0, tile_cols_ = 0;
  std::vector<double> ca_, cb_, cm_;  // the contraction's A (rows x k), B (k x cols) and result (rows x cols)
  std::vector<uint8_t> masked_a_, masked_b_, wild_a_, wild_b_;  // per K position (RunContraction)

  int num_iters_ = 0;
  int64_t extent_[3] = {1, 1, 1};  // unused positions have extent 1 and coefficient 0
  LoopVar var_[3] = {LoopVar::kUnspecified, LoopVar::kUnspecified, LoopVar::kUnspecified};
  int axis_of_var_[8] = {3, 3, 3, 3, 3, 3, 3, 3};  // LoopVar -> iteration position (3 = not iterated)
  IterKind pool_ = IterKind::kParallel;           // the pool of every Reduce axis (all must agree)
  int64_t argmax_mult_[3] = {0, 0, 0};            // linear position over the Reduce axes
  double points_ = 0.0;

  std::vector<Map> slots_;
  std::vector<int64_t> in_sizes_;
  Map out_;
  int64_t out_size_ = 0;
  std::vector<Instr> code_;
  int result_reg_ = 0;
  int num_regs_ = 0;

  // Scratch reused across executions.
  std::vector<double> regs_;
  std::vector<double> acc_;
  std::vector<int64_t> argpos_;
  std::vector<uint8_t> reached_;
};

}  // namespace spatial::vm_internal

#endif  // SIM_VM_GENERIC_KERNEL_H_
