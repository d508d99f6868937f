#include "sim/numerics/target_model.h"

#include <cmath>
#include <utility>

#include "sim/numerics/float_bits.h"
#include "sim/numerics/formats.h"
#include "sim/vm/exact_math.h"

namespace spatial::numerics {
namespace {

proto::Rounding Or(proto::Rounding r, proto::Rounding dflt) { return r == proto::ROUNDING_UNSPECIFIED ? dflt : r; }

}  // namespace

TargetNumerics ResolveTargetNumerics(const Target& target, const ModelOptions& options) {
  const proto::Numerics& p = target.proto().numerics();
  TargetNumerics n;
  n.pack = Or(p.pack(), proto::TIES_AWAY);
  n.unpack = Or(p.unpack(), proto::TRUNCATE);
  n.sfpu_store = Or(p.sfpu_store(), proto::TRUNCATE);
  n.flush_denormals = p.flush_denormals();
  n.approx_mode = options.approx_mode.value_or(p.approx_mode());
  n.matrix_in = target.matrix_in().value_or(Precision::kBf16);
  n.fidelity = target.matmul_fidelity(options.fidelity.value_or(proto::FIDELITY_UNSPECIFIED));
  proto::Numerics effective = p;
  effective.set_sfpu_store(n.sfpu_store);
  n.sfpu_fp32 = ResolveSfpuConfig(effective, Precision::kFp32, n.approx_mode);
  n.sfpu_bf16 = ResolveSfpuConfig(effective, Precision::kBf16, n.approx_mode);
  n.sfpu_fp16 = ResolveSfpuConfig(effective, Precision::kFp16, n.approx_mode);
  return n;
}

TargetModel::TargetModel(TargetNumerics numerics) : n_(std::move(numerics)) {}

const SfpuConfig& TargetModel::sfpu_for(Precision acc) const {
  switch (acc) {
    case Precision::kBf16:
    case Precision::kBfp8B:
    case Precision::kBfp4B: return n_.sfpu_bf16;
    case Precision::kFp16: return n_.sfpu_fp16;
    default: return n_.sfpu_fp32;
  }
}

void TargetModel::StoreRound(Precision p, double* v, int64_t n) const {
  RoundToPrecision(p, n_.pack, n_.flush_denormals, v, n);
}

double TargetModel::Arith(BodyOp op, double a, double b, Precision acc) const {
  if (IsInteger(acc)) return vm_math::Binary(op, a, b);
  const bool flush = n_.flush_denormals;
  const float x = ToFp32(a, flush), y = ToFp32(b, flush);
  float r;
  switch (op) {
    case BodyOp::kAdd: r = x + y; break;
    case BodyOp::kSub: r = x - y; break;
    case BodyOp::kMul: r = x * y; break;
    case BodyOp::kMin: r = std::fmin(x, y); break;  // minNum, as the VM (a NaN operand yields the other)
    case BodyOp::kMax: r = std::fmax(x, y); break;
    case BodyOp::kFloorDiv: r = std::floor(x / y); break;  // the fp32 quotient, floored
    default: return vm_math::Binary(op, a, b);
  }
  return flush ? Ftz(r) : r;
}

double TargetModel::Sfpu(const SfpuKind& k, double x, Precision acc) const {
  return EvalSfpu(sfpu_for(acc), k, ToFp32(x, n_.flush_denormals));
}

MatmulConfig TargetModel::MatmulConfigFor(Precision acc, MathFidelity fidelity) const {
  MatmulConfig cfg;
  // A stage's own fidelity (MatmulSpec.math_fidelity) over the target's default.
  cfg.fidelity = fidelity == MathFidelity::kDefault ? n_.fidelity : static_cast<proto::Fidelity>(fidelity);
  cfg.src = n_.matrix_in;
  cfg.acc = acc == Precision::kUnspecified ? Precision::kFp32 : acc;
  cfg.unpack = n_.unpack;
  cfg.flush = n_.flush_denormals;
  return cfg;
}

void TargetModel::MatmulTile(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                             int64_t ldc, int64_t tr, int64_t tc, int64_t kk, Precision acc,
                             MathFidelity fidelity) const {
  MatmulTileAtFidelity(MatmulConfigFor(acc, fidelity), a, lda, b, ldb, transpose_b, c, ldc, tr, tc, kk);
}

void TargetModel::MatmulBlock(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c,
                              int64_t ldc, int64_t m, int64_t n, int64_t k, int64_t t, Precision acc,
                              MathFidelity fidelity) const {
  MatmulBlockAtFidelity(MatmulConfigFor(acc, fidelity), a, lda, b, ldb, transpose_b, c, ldc, m, n, k, t);
}

std::unique_ptr<ValueModel> MakeTargetModel(const Target& target) { return MakeTargetModel(target, ModelOptions{}); }

std::unique_ptr<ValueModel> MakeTargetModel(const Target& target, const ModelOptions& options) {
  return std::make_unique<TargetModel>(ResolveTargetNumerics(target, options));
}

}  // namespace spatial::numerics
