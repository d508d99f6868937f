// A loaded target description: the proto (proto/target.proto) plus the derived questions lowerings, the
// certifier and the simulator ask of it.
#ifndef TARGETS_TARGET_H_
#define TARGETS_TARGET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/target.pb.h"
#include "spatial/precision.h"

namespace spatial {

class Target {
 public:
  explicit Target(proto::Target p) : p_(std::move(p)) {}

  const proto::Target& proto() const { return p_; }
  const std::string& name() const { return p_.name(); }

  int64_t tile_rows() const { return p_.tile().rows(); }
  int64_t tile_cols() const { return p_.tile().cols(); }
  int64_t tile_elems() const { return tile_rows() * tile_cols(); }
  int64_t tile_bytes(Precision p) const { return TileBytes(p, tile_elems()); }
  int64_t grid_y() const { return p_.grid().y(); }
  int64_t grid_x() const { return p_.grid().x(); }
  int64_t sites() const { return grid_y() * grid_x(); }

  // Local memory a section's buffers may use on one site: above the reserved base.
  int64_t max_local_mem_bytes() const { return p_.local_mem_bytes() - p_.local_mem_reserved(); }

  // Accumulator (Dst) tiles at `acc` precision; full_sync: the whole register for one thread (the seed's
  // effective_acc_tiles(policy, true)). 0 when the target has no accumulator at that precision.
  int64_t effective_acc_tiles(Precision acc, bool full_sync = true) const;

  // The datapaths; nullopt when the target has none.
  std::optional<Precision> elementwise_float() const;
  std::optional<Precision> elementwise_int() const;
  std::optional<Precision> matrix_in() const;
  std::optional<Precision> matrix_acc() const;
  // Whether the matrix engine takes an operand stored as `p`: its own format, or a block float (bfp8_b, bfp4_b:
  // bf16's sign and exponent with a shared exponent per 16 values, hardware-facts §1.2), which the unpacker expands
  // into a bf16 engine's source registers. The certifier's operand check and the matmul lowering's refusal.
  bool matrix_takes(Precision p) const;

  // The narrowest address integer holding every value in [-space, space]; an index rides the target's address
  // integer, never the float datapath (bf16 holds integers exactly only up to 256). Fails with
  // "MissingPrecision: ..." when no integer of the target holds it.
  absl::StatusOr<Precision> index_precision_for(int64_t space) const;

  // The fidelity a matmul runs at: `f`, or the target's numerics.fidelity when f is unset (HiFi4 when that is
  // unset too: tt-metal's accurate default). Its cycles per TR x TC @ TC x TC tile product, from the cost table.
  proto::Fidelity matmul_fidelity(proto::Fidelity f = proto::FIDELITY_UNSPECIFIED) const;
  double matmul_cycles(proto::Fidelity f = proto::FIDELITY_UNSPECIFIED) const;

  // Whether a buffer or tensor may hold values of this precision.
  bool supports_storage(Precision p) const;

 private:
  proto::Target p_;
};

}  // namespace spatial

#endif  // TARGETS_TARGET_H_
