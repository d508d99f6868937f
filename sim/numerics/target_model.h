// The simulator's value model: a target's tile-accurate numerics behind the VM's ValueModel seam
// (DESIGN §8 "Numerics are tile-accurate"; reference/hardware-facts.md §1.2, §2).
//
//   StoreRound  every buffer/tensor write: the precision's format with the target's pack rounding (a packer writes
//               Dst to L1: §1.2 early conversion rounds ties-away), denormals flushed, integers saturated.
//   Arith       one binary op of a Generic body: operands read as fp32, the result rounded to fp32 RNE and flushed
//               (the SFPU/FPU datapath is fp32, SFPMAD rounds RNE: §1.2). An integer accumulator computes exactly,
//               as the f64 VM does (integers are exact in f64 up to 2^53).
//   Sfpu        one transform by the target's algorithm and approximation mode for the destination precision
//               (sim/numerics/sfpu.h), including the kernel's final bf16 rounding when Dst is 16-bit.
//   MatmulTile  the matrix engine at the target's fidelity into an fp32 or bf16 Dst (sim/numerics/matrix_engine.h).
#ifndef SIM_NUMERICS_TARGET_MODEL_H_
#define SIM_NUMERICS_TARGET_MODEL_H_

#include <memory>
#include <optional>

#include "proto/target.pb.h"
#include "sim/numerics/matrix_engine.h"
#include "sim/numerics/sfpu.h"
#include "sim/vm/value_model.h"
#include "targets/target.h"

namespace spatial::numerics {

// Choices a run may make differently from the target's defaults (a lowering that asks for approx mode, a
// matmul at another fidelity).
struct ModelOptions {
  std::optional<bool> approx_mode;
  std::optional<proto::Fidelity> fidelity;
};

// The target's numerics with every unspecified field resolved.
struct TargetNumerics {
  proto::Rounding pack = proto::TIES_AWAY;       // default: the packer rounds ties-away (§1.2)
  proto::Rounding unpack = proto::TRUNCATE;      // default: Src keeps the top bits (§1.2 fidelity phases)
  proto::Rounding sfpu_store = proto::TRUNCATE;  // default: SFPSTORE truncates (§1.2)
  bool flush_denormals = true;
  bool approx_mode = false;
  Precision matrix_in = Precision::kBf16;
  proto::Fidelity fidelity = proto::HIFI4;  // default: all the bits
  SfpuConfig sfpu_fp32;                     // transforms writing an fp32 Dst
  SfpuConfig sfpu_bf16;                     // ... a bf16 Dst
  SfpuConfig sfpu_fp16;                     // ... an fp16 Dst
};

TargetNumerics ResolveTargetNumerics(const Target& target, const ModelOptions& options = {});

class TargetModel final : public ValueModel {
 public:
  explicit TargetModel(TargetNumerics numerics);

  bool exact() const override { return false; }
  void StoreRound(Precision p, double* v, int64_t n) const override;
  double Arith(BodyOp op, double a, double b, Precision acc) const override;
  double Sfpu(const SfpuKind& k, double x, Precision acc) const override;
  void MatmulTile(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c, int64_t ldc,
                  int64_t tr, int64_t tc, int64_t kk, Precision acc, MathFidelity fidelity) const override;
  void MatmulBlock(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                   int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t t, Precision acc,
                   MathFidelity fidelity) const override;

  const TargetNumerics& numerics() const { return n_; }
  // The matrix engine's configuration for a product at `acc` and a stage's `fidelity` (kDefault: the target's).
  MatmulConfig MatmulConfigFor(Precision acc, MathFidelity fidelity) const;
  // The SFPU choices for a destination precision (fp32 for fp32 and the integers, bf16 for bf16 and bfp8_b).
  const SfpuConfig& sfpu_for(Precision acc) const;

 private:
  TargetNumerics n_;
};

// The target's value model (exact() is false). Thread-safe: it holds no mutable state (the matmul's scratch is
// per thread).
std::unique_ptr<ValueModel> MakeTargetModel(const Target& target);
std::unique_ptr<ValueModel> MakeTargetModel(const Target& target, const ModelOptions& options);

}  // namespace spatial::numerics

namespace spatial {
// The simulator names the model spatial::MakeTargetModel.
using numerics::MakeTargetModel;
}  // namespace spatial

#endif  // SIM_NUMERICS_TARGET_MODEL_H_
