// The elementwise family of seed 002 (original lines 719-1306): one Generic, one body, over a row (one whole-row
// item), a row wider than the accumulator (one item per tile), or a matrix (one item per tile of its grid); and
// Gated DeltaNet's decay, flat or dense.
#ifndef LOWERINGS_ELEMENTWISE_ELEMENTWISE_H_
#define LOWERINGS_ELEMENTWISE_ELEMENTWISE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/body.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// ── Bodies other families compose (a gate inside a larger body) ──
// silu(x) as the fused transform.
Body SiluExpr(Body x);
// sigmoid(x) = Recip(1 + Exp(0 - x)), composed, for a gate inside a larger body (the sigmoid op itself is the one
// Sigmoid transform, tt-metal's sigmoid_tile).
Body SigmoidExpr(Body x);
// x soft-capped at c, c*tanh(x/c), as 2c*Recip(1 + Exp(x*(-2/c))) - c: one exponential and one reciprocal,
// reaching +-c in both tails.
Body Capped(Body x, double c);
// ggml's tanh GELU in its one-exponential form x*Recip(1 + Exp(0 - 2z)), z = sqrt(2/pi)*(x + 0.044715*x*(x*x)),
// in the parser's exact arrangement.
Body GeluExpr(Body x);
// (1 + e^(ar + dt))^al as Exp(al * Ln(1 + Exp(ar + dt))): a real power needs a real log.
Body DecayExpr(Body ar, Body dt, Body al);

// ── The unary map ──
// y = body(x) over a rows x n tensor; `body` reads x as Operand(0). rows > 1: the matrix form, one item per tile,
// section "{name}_{rows}x{n}". A row wider than RowBlockTiles: one item per tile, "{name}_{n}". Otherwise one
// whole-row item, "{name}_{n}". The stage is named `kind`. `in_precision`, when given, is the precision x is
// stored in (narrower than the datapath: it bounds x, so the certifier can prove integer products fit).
// `unary_dst`: the Dst tt-metal's unary op of the same name computes in (MapAccFor: 16-bit for a bf16 map), for the
// ops that are such a unary op; otherwise AccFor's (an intermediate of a fused chain, a composite whose body
// cancels: it keeps an fp32 Dst).
absl::StatusOr<Composition> UnaryMap(const std::string& name, const std::string& kind, Datapath dp, const Body& body,
                                     const OperandRef& x, const std::string& out, int64_t rows, int64_t n,
                                     const Target& target, std::optional<Precision> in_precision = std::nullopt,
                                     bool unary_dst = false);

// ── The lowerings (operands in the seed's order; the result is OpSpec.out) ──
absl::StatusOr<Composition> FromSilu(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromRelu(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromSigmoid(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromGelu(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromScale(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromSoftcap(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromIntRequant(const proto::OpSpec& spec, const Target& target);
absl::StatusOr<Composition> FromIntClamp(const proto::OpSpec& spec, const Target& target);
// Operands [ar, dt, alog]. rows <= 1: three flat 1 x n rows, "decay_{n}". rows > 1: ar is rows x heads
// (heads = n / rows), dt and alog are 1 x heads broadcast down the rows, "decay_{rows}x{heads}".
absl::StatusOr<Composition> FromDecay(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ELEMENTWISE_ELEMENTWISE_H_
