// The one meaning of the algebra's affine addresses (DESIGN §3.4, §3.6).
//
// A Load's or Store's tile address and a Generic's element offset are affine forms: a base plus a coefficient per
// variable. This header builds those forms from the program (TileForm, ElemForm) and evaluates them (Evaluate),
// generic over the value domain: exact integers (`Wide` points) for the VM and the machine, `Interval`s for the
// certifier. Every consumer takes the form from here, so a change of meaning (a new term, a different rule for
// repeated variables) changes the VM, the simulator and the certifier together; tests/semantics holds them to it.
//
// Evaluation is exact: terms are summed in __int128 saturated at 2^100 (spatial/semantics/interval.h), far beyond
// any tensor, so "outside the tensor" is the only fault an address can have and no arithmetic can overflow.
#ifndef SPATIAL_SEMANTICS_AFFINE_H_
#define SPATIAL_SEMANTICS_AFFINE_H_

#include <array>
#include <cstdint>

#include "spatial/program.h"
#include "spatial/semantics/interval.h"

namespace spatial {

// The variables an address depends on. ITEM_Y, ITEM_X and KBLOCK are bound by the run; ROW, COL and K are a
// Generic's axes (zero when the Generic does not iterate them); INDEX is the value an indirect term reads;
// BLOCK_I and BLOCK_J pick a tile of a Load/Store block.
enum class AddrVar : uint8_t { kItemY, kItemX, kKBlock, kRow, kCol, kK, kIndex, kBlockI, kBlockJ };
inline constexpr int kNumAddrVars = 9;

// The program's loop variable as an address variable; nullopt for kUnspecified.
std::optional<AddrVar> AddrVarOf(LoopVar v);

struct AffineForm {
  Wide base = 0;
  std::array<Wide, kNumAddrVars> coef{};  // repeated terms of one variable are summed

  Wide operator[](AddrVar v) const { return coef[static_cast<int>(v)]; }
  Wide& operator[](AddrVar v) { return coef[static_cast<int>(v)]; }
  bool Uses(AddrVar v) const { return (*this)[v] != 0; }
};

// Tile (BLOCK_I, BLOCK_J) of the block an AccessPattern names:
//   origin.base + sum(coef * var) + tile_stride * INDEX + BLOCK_I * stride_h + BLOCK_J * stride_w.
AffineForm TileForm(const AccessPattern& p);

// The flat page offset an ElemAccess names at a point: base + sum(coef * axis) + stride * INDEX.
AffineForm ElemForm(const ElemAccess& m);

// An environment: one value per variable.
template <class V>
using AddrEnv = std::array<V, kNumAddrVars>;

inline Wide Lift(Wide v, Wide /*tag*/) { return v; }
inline Interval Lift(Wide v, const Interval& /*tag*/) { return Interval::Point(v); }
inline Wide AddTerm(Wide acc, Wide x, Wide coef) { return Clamp(acc + MulSat(x, coef)); }
inline Interval AddTerm(const Interval& acc, const Interval& x, Wide coef) { return acc + Scale(x, coef); }

// The form's value over `env`: exact for Wide points; for intervals the exact hull, since each variable appears
// once with its summed coefficient.
template <class V>
V Evaluate(const AffineForm& f, const AddrEnv<V>& env) {
  V r = Lift(f.base, env[0]);
  for (int v = 0; v < kNumAddrVars; ++v) {
    if (f.coef[v] != 0) r = AddTerm(r, env[v], f.coef[v]);
  }
  return r;
}

// An environment of zeros (every variable unbound reads as zero).
template <class V>
AddrEnv<V> ZeroEnv() {
  AddrEnv<V> env;
  env.fill(Lift(0, V{}));
  return env;
}

// A test seam, not a knob: shifts the base of every TileForm by `tiles`, so a test can show that the VM, the
// machine model and the certifier all read addresses through TileForm (tests/semantics/one_meaning_test.cc).
void SetTileFormShiftForTesting(int64_t tiles);

}  // namespace spatial

#endif  // SPATIAL_SEMANTICS_AFFINE_H_
