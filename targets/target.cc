#include "targets/target.h"

#include "absl/strings/str_cat.h"

namespace spatial {
namespace {

std::optional<Precision> Present(proto::Precision p) {
  if (p == proto::PRECISION_UNSPECIFIED) return std::nullopt;
  return static_cast<Precision>(p);
}

}  // namespace

int64_t Target::effective_acc_tiles(Precision acc, bool full_sync) const {
  for (const auto& a : p_.acc()) {
    if (static_cast<Precision>(a.precision()) == acc) return full_sync ? a.tiles_full_sync() : a.tiles_double_buf();
  }
  return 0;
}

std::optional<Precision> Target::elementwise_float() const { return Present(p_.datapaths().elementwise_float()); }
std::optional<Precision> Target::elementwise_int() const { return Present(p_.datapaths().elementwise_int()); }
std::optional<Precision> Target::matrix_in() const { return Present(p_.datapaths().matrix_in()); }
std::optional<Precision> Target::matrix_acc() const { return Present(p_.datapaths().matrix_acc()); }

bool Target::matrix_takes(Precision p) const {
  const std::optional<Precision> in = matrix_in();
  if (!in) return false;
  const bool block_float = p == Precision::kBfp8B || p == Precision::kBfp4B;
  return p == *in || (block_float && *in == Precision::kBf16);
}

absl::StatusOr<Precision> Target::index_precision_for(int64_t space) const {
  for (int p : p_.datapaths().index_precisions()) {
    Precision ix = static_cast<Precision>(p);
    if (IsInteger(ix) && space >= 0 && space <= IntMax(ix)) return ix;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("MissingPrecision: an index integer holding ", space, " (target ", name(), ")"));
}

bool Target::supports_storage(Precision p) const {
  for (int s : p_.datapaths().storage()) {
    if (static_cast<Precision>(s) == p) return true;
  }
  return false;
}

proto::Fidelity Target::matmul_fidelity(proto::Fidelity f) const {
  if (f != proto::FIDELITY_UNSPECIFIED) return f;
  const proto::Fidelity t = p_.numerics().fidelity();
  return t == proto::FIDELITY_UNSPECIFIED ? proto::HIFI4 : t;
}

double Target::matmul_cycles(proto::Fidelity f) const {
  const auto& c = p_.costs();
  switch (matmul_fidelity(f)) {
    case proto::LOFI: return c.matmul_lofi();
    case proto::HIFI2: return c.matmul_hifi2();
    case proto::HIFI3: return c.matmul_hifi3();
    default: return c.matmul_hifi4();
  }
}

}  // namespace spatial
